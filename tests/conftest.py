"""Shared helpers: run the real CLI in a subprocess and read what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SYNTHETIC = PROJECT_ROOT / "tests" / "e2e" / "synthetic"
VECTOR_ADD = PROJECT_ROOT / "examples" / "vector_add"


@dataclass
class CliRun:
    returncode: int
    stdout: str
    stderr: str
    output_dir: Path | None

    @property
    def result(self) -> dict[str, Any]:
        """The command's document; for optimize, whose stdout is the run's summary, the result.json it names."""
        document = json.loads(self.stdout)
        if isinstance(document, dict) and isinstance(document.get("result_json"), str):
            return json.loads(Path(document["result_json"]).read_text())
        return document

    @property
    def summary(self) -> dict[str, Any]:
        """stdout as printed (for optimize: protocol.summary.RunSummary)."""
        return json.loads(self.stdout)

    def experiment(self, experiment_id: str) -> dict[str, Any]:
        return next(e for e in self.result["experiments"] if e["experiment_id"] == experiment_id)

    def decisions(self) -> dict[str, str]:
        return {e["experiment_id"]: (e.get("decision") or {}).get("status") for e in self.result["experiments"]}


def run_cli(*args: str | Path, timeout: float = 300, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> CliRun:
    argv = [sys.executable, "-m", "orchestrator.cli", *map(str, args)]
    full_env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), **(env or {})}
    completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=full_env,
                               cwd=cwd or PROJECT_ROOT, stdin=subprocess.DEVNULL)
    output_dir = None
    if "--output-dir" in args:
        output_dir = Path(args[list(args).index("--output-dir") + 1])
    return CliRun(completed.returncode, completed.stdout, completed.stderr, output_dir)


def synthetic_args(output_dir: Path, *extra: str | Path, kernel: Path | None = None) -> list[str | Path]:
    return ["--kernel", kernel or SYNTHETIC / "kernel.py", "--harness", SYNTHETIC / "harness.py",
            "--cases", SYNTHETIC / "cases.json", "--target", SYNTHETIC / "target.json",
            "--output-dir", output_dir, "--no-commit-winner", "--max-candidate-seconds", "30",
            "--max-total-seconds", "240", *extra]


def synthetic_kernel(latency: float, body: str = "return [v * 2.0 for v in values]", prelude: str = "") -> str:
    return (f'"""Synthetic candidate."""\n{prelude}\nLATENCY_US = {latency}\n\n\n'
            f"def scale(values):\n    {body}\n")


def write_candidates(directory: Path, sources: list[str], metadata: list[dict] | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for index, source in enumerate(sources, start=1):
        (directory / f"{index:03d}.py").write_text(source)
        if metadata and index <= len(metadata) and metadata[index - 1]:
            (directory / f"{index:03d}.json").write_text(json.dumps(metadata[index - 1]))
    return directory


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    return tmp_path / "out"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many `slow` tests ran and their setup+call+teardown time, so CI output shows what they cost."""
    seconds: dict[str, float] = {}
    ran: set[str] = set()
    for reports in terminalreporter.stats.values():
        for report in reports:
            if not isinstance(report, pytest.TestReport) or "slow" not in report.keywords:
                continue
            seconds[report.nodeid] = seconds.get(report.nodeid, 0.0) + report.duration
            if report.when == "call" and not report.skipped:
                ran.add(report.nodeid)
    total = sum(seconds[nodeid] for nodeid in ran)
    terminalreporter.write_sep("-", f"slow tests: {len(ran)} ran, {total:.1f}s in all")


@pytest.fixture(scope="session")
def sm90_variants_dir(tmp_path_factory) -> str:
    """Where tests/compile_ahead/variant_checks.py compiles its variants for sm_90 once per test process (about
    13 s): the modules that read them share it, and their `xdist_group` keeps them in one process."""
    return str(tmp_path_factory.mktemp("sm90_variants"))
