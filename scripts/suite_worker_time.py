"""Where a test run's worker time went: every run record (result.json) the tests left under pytest's base
temporary directory, its workers' seconds summed per phase and per test, the costliest tests first.

The suite's end-to-end tests run real workers, and each worker records its seconds per phase
(`WorkerRecord.phases`); this reads those records after the run, so it needs no instrumentation of its own.
    .venv/bin/python scripts/suite_worker_time.py /tmp/pytest-of-$USER/pytest-N [--top 20]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def test_name(record: Path, base: Path) -> str:
    """The test's directory under the base (xdist adds a popen-gwN level): pytest names it after the test."""
    parts = record.relative_to(base).parts
    return parts[1] if parts[0].startswith("popen-gw") and len(parts) > 1 else parts[0]


def worker_seconds(base: Path) -> tuple[Counter[str], Counter[str], int, int]:
    phases: Counter[str] = Counter()
    by_test: Counter[str] = Counter()
    runs = evaluations = 0
    for record in base.rglob("result.json"):
        try:
            result = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(result, dict) or "experiments" not in result:
            continue  # an experiment's own result.json, or another document of that name
        runs += 1
        for experiment in result["experiments"]:
            for evaluation in experiment.get("evaluations") or []:
                worker = evaluation.get("worker") or {}
                evaluations += 1
                phases.update(worker.get("phases") or {})
                by_test[test_name(record, base)] += float(worker.get("wall_seconds") or 0.0)
    return phases, by_test, runs, evaluations


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path, help="pytest's base temporary directory of one run (pytest-N)")
    parser.add_argument("--top", type=int, default=20, help="how many tests to list: default 20")
    args = parser.parse_args(argv)
    if not args.base.is_dir():
        parser.error(f"{args.base} is not a directory")
    phases, by_test, runs, evaluations = worker_seconds(args.base)
    total = sum(phases.values())
    print(f"{runs} runs, {evaluations} worker evaluations, {total:.0f} s of worker time")
    for phase, seconds in phases.most_common():
        print(f"  {phase:<10} {seconds:8.0f} s  {100 * seconds / total if total else 0:5.1f} %")
    print(f"costliest {args.top} tests by worker seconds:")
    for name, seconds in by_test.most_common(args.top):
        print(f"  {seconds:8.0f} s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
