"""Running one faulty vector_add candidate through the real CLI, and what to check afterwards.

Every run copies the kernel, harness and target into the test's tmp dir first, so a candidate that
escaped the sandbox would damage a copy, never `examples/`. The cases file is ours: one small case
with a short benchmark budget, so a run costs a baseline worker plus the candidate's worker.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tests.conftest import VECTOR_ADD, CliRun, run_cli

FAULTS_DIR = Path(__file__).resolve().parent
CANDIDATES_DIR = FAULTS_DIR / "candidates"
CASES = FAULTS_DIR / "cases.json"
CANDIDATE_ID = "r001-c000"
HANG_CANDIDATE_SECONDS = 8.0
CANDIDATE_SECONDS = 30.0
LOG_LIMIT_BYTES = 1 << 20  # EvaluationPlan.log_limit_bytes, the cap on each worker.log


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class UserInputs:
    """The user's bundle for one test: private copies of the example's kernel, harness and target."""

    kernel: Path
    harness: Path
    target: Path

    @classmethod
    def copy_into(cls, directory: Path, *, in_process: bool = False) -> UserInputs:
        """With `in_process`, the harness declares no judged entry, so the candidate runs in the worker
        process itself (what GPU targets do): the faults aimed at the orchestrator's protocol reach it."""
        directory.mkdir(parents=True, exist_ok=True)
        paths = {}
        for name in ("kernel.py", "harness.py", "target.json"):
            paths[name] = directory / name
            shutil.copyfile(VECTOR_ADD / name, paths[name])
        if in_process:
            harness = paths["harness.py"].read_text()
            assert "\nJUDGE = " in harness
            paths["harness.py"].write_text(harness.replace("\nJUDGE = ", "\nIN_PROCESS_ONLY = "))
        return cls(kernel=paths["kernel.py"], harness=paths["harness.py"], target=paths["target.json"])

    def hashes(self) -> dict[str, str]:
        return {path.name: sha256(path) for path in (self.kernel, self.harness, self.target, CASES)}


PLACEHOLDERS = ("__USER_KERNEL__", "__PORT__", "__MARKER__")


def candidate_source(name: str, substitutions: dict[str, str]) -> str:
    """The candidate's text with its placeholders (paths, ports, markers only the test knows) filled in."""
    source = (CANDIDATES_DIR / f"{name}.py").read_text()
    for placeholder, value in substitutions.items():
        source = source.replace(placeholder, value)
    missing = [p for p in PLACEHOLDERS if p in source]
    assert not missing, f"{name}.py needs a value for {missing}"
    return source


@dataclass
class FaultRun:
    cli: CliRun
    output_dir: Path
    user: UserInputs
    user_hashes_before: dict[str, str]
    wall_seconds: float

    @property
    def result(self) -> dict[str, Any]:
        return self.cli.result

    def candidate_evaluation(self) -> dict[str, Any]:
        experiment = self.cli.experiment(CANDIDATE_ID)
        return next(e for e in experiment["evaluations"] if e["label"] == "candidate")

    @property
    def status(self) -> str:
        return self.candidate_evaluation()["status"]

    @property
    def reason(self) -> str:
        return self.candidate_evaluation()["reason"]

    @property
    def worker_log(self) -> Path:
        return self.output_dir / "experiments" / CANDIDATE_ID / "worker.log"

    def live_log(self) -> str:
        return (self.output_dir / "live.log").read_text()

    def persisted_evaluation(self) -> dict[str, Any]:
        """The candidate's evaluation as written to experiments/<id>/result.json."""
        record = json.loads((self.output_dir / "experiments" / CANDIDATE_ID / "result.json").read_text())
        return next(e for e in record["evaluations"] if e["label"] == "candidate")

    def frozen_bundle_changes(self) -> list[str]:
        """Files of <output>/bundle/ whose content no longer matches the hashes recorded in run.json."""
        recorded = json.loads((self.output_dir / "run.json").read_text())["bundle"]["sha256"]
        bundle = self.output_dir / "bundle"
        changed = [name for name, digest in recorded.items()
                   if not (bundle / name).is_file() or sha256(bundle / name) != digest]
        return changed + sorted({p.name for p in bundle.iterdir()} - set(recorded))


def run_fault(tmp_path: Path, name: str, *extra: str, substitutions: dict[str, str] | None = None,
              candidate_seconds: float = CANDIDATE_SECONDS, timeout: float = 240, in_process: bool = False) -> FaultRun:
    """Run the CLI with the one candidate `name` (placeholders substituted) and nothing after it."""
    user = UserInputs.copy_into(tmp_path / "user", in_process=in_process)
    substitutions = {"__USER_KERNEL__": str(user.kernel), **(substitutions or {})}
    replay_dir = tmp_path / "replay"
    replay_dir.mkdir()
    (replay_dir / "001.py").write_text(candidate_source(name, substitutions))
    output_dir = tmp_path / "out"
    before = user.hashes()
    started = time.monotonic()
    cli = run_cli(
        "--kernel", user.kernel, "--harness", user.harness, "--cases", CASES, "--target", user.target,
        "--output-dir", output_dir, "--provider", "replay", "--replay-dir", replay_dir,
        "--max-candidate-seconds", str(candidate_seconds), "--max-total-seconds", "120",
        "--no-commit-winner", "--no-profile", "--schedule", "ba", "--skip-validation",
        *extra, timeout=timeout)
    return FaultRun(cli=cli, output_dir=output_dir, user=user, user_hashes_before=before,
                    wall_seconds=time.monotonic() - started)


def processes_of_run(output_dir: Path, markers: tuple[str, ...] = ()) -> list[str]:
    """Live processes that belong to the run: a worker token with a scratch dir under the output dir,
    a cwd or command line inside it, or a command line carrying one of `markers`."""
    root = str(output_dir.resolve())
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            cmdline = " ".join(proc.cmdline())
            environ = proc.environ()
            cwd = proc.cwd()
        except psutil.Error:
            continue
        scratch = environ.get("TLX_WORKER_SCRATCH", "")
        if ((environ.get("TLX_WORKER_TOKEN") and scratch.startswith(root)) or cwd.startswith(root)
                or root in cmdline or any(marker in cmdline for marker in markers)):
            found.append(f"pid {proc.pid} cwd={cwd} cmd={cmdline[:120]}")
    return found


def live_children() -> list[str]:
    """Processes started by this test process (directly or below) that have not been reaped."""
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return []
    return [f"pid {c.pid}" for c in children if c.is_running()]


def leftovers_after(run: FaultRun, markers: tuple[str, ...] = (), settle_seconds: float = 5.0) -> list[str]:
    """What is still alive of the run once SIGKILLs have had `settle_seconds` to land (empty = clean)."""
    deadline = time.monotonic() + settle_seconds
    while True:
        left = processes_of_run(run.output_dir, markers) + live_children()
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)
