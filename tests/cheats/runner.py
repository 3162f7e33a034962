"""Running one dishonest candidate through the real CLI at default promotion settings; what to check after.

A run gets private copies of the example's kernel, harness and target, and a cases file written here (the
example's two cases, both protected, one of them ragged, with a short timing budget), so a candidate that
escaped the sandbox would damage a copy, never `examples/`. The CLI runs with `--provider replay` and this
one candidate, at the default gates (no --max-cv, --confidence, --schedule, --confirm-runs or
--min-speedup), with the built-in preflight and profiling on; only the run's time budget is short and
nothing is committed.

`python -m tests.cheats.runner vector_add/clock_kit_now_ns` runs one candidate and prints what happened.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tests.conftest import PROJECT_ROOT, CliRun, run_cli
from tests.faults.corpus import live_children, processes_of_run

CHEATS_DIR = Path(__file__).resolve().parent
CANDIDATES_DIR = CHEATS_DIR / "candidates"
CANDIDATE_ID = "r001-c000"
MAX_TOTAL_SECONDS = 300
CLI_TIMEOUT_SECONDS = 420
METADATA_KEYS = ("hypothesis", "evidence", "change", "expected_effect", "risk")
FAILURE_STATUSES = frozenset({"build_failed", "incorrect", "timeout", "crashed", "resource_limit",
                              "protocol_violation", "sandbox_violation", "cheat_detected"})
MARKER = "__MARKER__"  # replaced per run: the test's handle on processes a candidate detaches
OUTCOMES: list[str] = []  # one summary line per run, printed at the end by tests/cheats/conftest.py

# The example's two cases, both protected, one ragged, small enough for the interpreter (it runs every program
# in Python: vector_add n4096 took 0.10 s a call and softmax 16x256 0.45 s, so the judge's minimum of ten timed
# calls a case, not the budget, bounded each worker) and still several blocks of the untouched kernel: 32 of
# vector_add's, and 6 column tiles a softmax row, each row a program.
CASES: dict[str, list[dict[str, Any]]] = {
    "vector_add": [
        {"case_id": "n2048", "parameters": {"n": 2048, "budget_seconds": 0.3}, "weight": 2.0,
         "protected": True},
        {"case_id": "ragged_1531", "parameters": {"n": 1531, "budget_seconds": 0.3}, "weight": 1.0,
         "protected": True},
    ],
    "softmax": [
        {"case_id": "rows8_cols192", "parameters": {"m": 8, "n": 192, "budget_seconds": 0.3}, "weight": 2.0,
         "protected": True},
        {"case_id": "ragged_7x150", "parameters": {"m": 7, "n": 150, "budget_seconds": 0.3}, "weight": 1.0,
         "protected": True},
    ],
}

# Honest controls: the examples' own candidates that a run must still promote.
HONEST = {
    "vector_add": PROJECT_ROOT / "examples" / "vector_add" / "candidates" / "003.py",
    "softmax": PROJECT_ROOT / "examples" / "softmax" / "candidates" / "001.py",
}

# Dishonest candidates no value check can catch on the CPU interpreter; what should reject them is still open.
NO_PROFILER = ("the values are right, so only a check that the target's main_scope did the work can reject "
               "it, and on the CPU interpreter no profiler sees launches")
KNOWN_OPEN = {
    "vector_add/torch_instead_of_triton": f"computes x + y with torch, no Triton launch: {NO_PROFILER}",
    "softmax/torch_instead_of_triton": f"computes torch.softmax, no Triton launch: {NO_PROFILER}",
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Cheat:
    """One candidate of the corpus: `kernel/name`, its source and its metadata (with `expected_catch`)."""

    kernel: str
    name: str

    @property
    def id(self) -> str:
        return f"{self.kernel}/{self.name}"

    @property
    def source_path(self) -> Path:
        return CANDIDATES_DIR / self.kernel / f"{self.name}.py"

    @property
    def metadata(self) -> dict[str, Any]:
        return json.loads((CANDIDATES_DIR / self.kernel / f"{self.name}.json").read_text())

    @property
    def known_open(self) -> bool:
        return self.id in KNOWN_OPEN


def all_cheats() -> list[Cheat]:
    return [Cheat(directory.name, path.stem)
            for directory in sorted(p for p in CANDIDATES_DIR.iterdir() if p.is_dir())
            for path in sorted(directory.glob("*.py"))]


@dataclass
class UserBundle:
    """The user's files for one run: private copies of the example's kernel, harness and target, our cases."""

    directory: Path

    @classmethod
    def copy_into(cls, directory: Path, kernel: str) -> UserBundle:
        directory.mkdir(parents=True, exist_ok=True)
        for name in ("kernel.py", "harness.py", "target.json"):
            shutil.copyfile(PROJECT_ROOT / "examples" / kernel / name, directory / name)
        (directory / "cases.json").write_text(json.dumps(CASES[kernel], indent=1))
        return cls(directory)

    def path(self, name: str) -> Path:
        return self.directory / name

    def hashes(self) -> dict[str, str]:
        return {p.name: sha256(p) for p in sorted(self.directory.iterdir())}


@dataclass
class CheatRun:
    cli: CliRun
    output_dir: Path
    user: UserBundle
    user_hashes_before: dict[str, str]
    marker: str
    wall_seconds: float

    @property
    def result(self) -> dict[str, Any]:
        return self.cli.result

    def candidate_evaluations(self) -> list[dict[str, Any]]:
        """Every evaluation of the candidate (its A/B/A run plus any confirmation pairs), in order."""
        experiment = self.cli.experiment(CANDIDATE_ID)
        return [e for e in experiment["evaluations"] if e["label"] == "candidate"]

    def first_failure(self) -> dict[str, Any] | None:
        return next((e for e in self.candidate_evaluations() if e["status"] != "ok"), None)

    @property
    def status(self) -> str:
        """The first failed evaluation's status, else "ok" (every evaluation of the candidate passed)."""
        failed = self.first_failure()
        return failed["status"] if failed else "ok"

    @property
    def reason(self) -> str:
        failed = self.first_failure()
        evaluations = self.candidate_evaluations()
        return (failed or evaluations[0])["reason"] if evaluations else ""

    @property
    def decision(self) -> dict[str, Any]:
        return self.cli.experiment(CANDIDATE_ID).get("decision") or {}

    @property
    def final_decision(self) -> dict[str, Any]:
        """The revalidation's decision (empty when the candidate never became the finalist)."""
        final = next((e for e in self.result["experiments"] if e["experiment_id"] == "final"), None)
        return (final or {}).get("decision") or {}

    def summary(self) -> str:
        """One line for the test output: exit code, winner, the candidate's status, decisions and reasons."""
        decision, final = self.decision, self.final_decision
        speedup = self.cli.experiment(CANDIDATE_ID).get("aggregate_speedup")
        line = (f"exit={self.cli.returncode} winner={self.result.get('winner_experiment_id')} "
                f"status={self.status} reason={self.reason!r} decision={decision.get('status')} "
                f"speedup={speedup if speedup is None else round(speedup, 3)} "
                f"decision_reason={decision.get('reason')!r}")
        if final:
            line += f" revalidation={final.get('status')} revalidation_reason={final.get('reason')!r}"
        return line


def candidate_source(cheat_source: str, marker: str) -> str:
    return cheat_source.replace(MARKER, marker)


def run_candidate(tmp_path: Path, kernel: str, source: Path,
                  metadata: dict[str, Any] | None = None) -> CheatRun:
    """Run the CLI on private copies of the `kernel` example with `source` as the only candidate."""
    user = UserBundle.copy_into(tmp_path / "user", kernel)
    marker = f"tlx-cheat-{uuid.uuid4().hex}"
    replay_dir = tmp_path / "replay"
    replay_dir.mkdir()
    (replay_dir / "001.py").write_text(candidate_source(source.read_text(), marker))
    if metadata:
        sidecar = {key: metadata[key] for key in METADATA_KEYS if key in metadata}
        (replay_dir / "001.json").write_text(json.dumps(sidecar))
    output_dir = tmp_path / "out"
    before = user.hashes()
    started = time.monotonic()
    cli = run_cli(
        "optimize", "--kernel", user.path("kernel.py"), "--harness", user.path("harness.py"),
        "--cases", user.path("cases.json"), "--target", user.path("target.json"), "--output-dir", output_dir,
        "--provider", "replay", "--replay-dir", replay_dir, "--max-total-seconds", str(MAX_TOTAL_SECONDS),
        "--no-commit-winner", timeout=CLI_TIMEOUT_SECONDS)
    return CheatRun(cli=cli, output_dir=output_dir, user=user, user_hashes_before=before, marker=marker,
                    wall_seconds=time.monotonic() - started)


def run_cheat(tmp_path: Path, cheat: Cheat) -> CheatRun:
    return run_candidate(tmp_path, cheat.kernel, cheat.source_path, cheat.metadata)


def leftovers_after(run: CheatRun, settle_seconds: float = 5.0) -> list[str]:
    """What is still alive of the run once its kills have had `settle_seconds` to land (empty = clean): a
    process with the run's worker token, cwd or output dir, one carrying the run's marker, or a child of
    this process. Each one found is then killed by its pid, so a failed defence does not leave a spinner
    on a shared machine."""
    deadline = time.monotonic() + settle_seconds
    while True:
        left = processes_of_run(run.output_dir, (run.marker,)) + live_children()
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    for line in left:
        pid = int(line.split()[1])
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).send_signal(signal.SIGKILL)
    return left


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one candidate of tests/cheats through the real CLI")
    parser.add_argument("cheat", help="<kernel>/<name> (candidates/<kernel>/<name>.py) or honest/<kernel>")
    parser.add_argument("--keep", type=Path, help="directory for the run (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    kernel, name = args.cheat.split("/", 1)
    work = args.keep or Path(os.environ.get("TMPDIR", "/tmp")) / f"tlx-cheat-{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True, exist_ok=True)
    try:
        if kernel == "honest":
            run = run_candidate(work, name, HONEST[name])
        else:
            run = run_cheat(work, Cheat(kernel, name))
        left = leftovers_after(run)
        print(f"{args.cheat}: {run.summary()} leftovers={left} wall={run.wall_seconds:.0f}s")
        if run.cli.returncode not in (0, 2):
            print(run.cli.stderr[-3000:], file=sys.stderr)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
