"""What each gated candidate of a run cost, from its result.json (docs/performance.md).

    python3 scripts/gate_cost.py OUT/result.json [OTHER/result.json ...]   (a .json.gz or an output dir too)

One row per run: candidates gated (a candidate run was measured), how many the gate's triage rejected on their
first run, how many it decided on the incumbent's last run and two new workers (`--reuse-incumbent-run`), the
median wall of a gated experiment (from its artifacts to its decision: compile ahead, every worker,
the profile), the median part of that wall outside its workers (the host's: chiefly a compile ahead the
candidate's turn waited for), its median count of workers, the run's workers' verify seconds per worker, and the
part of it the
candidate processes' first recorded call took (`record_first.candidate_recorded_call`: the first TorchDispatchMode
a process enters, before the fork server warmed it). Standard library only; the records are read, never changed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any

FIRST_RECORDING = "record_first.candidate_recorded_call"


def load(path: Path) -> dict[str, Any]:
    """A run's result.json: the file, a gzipped one, or the one in an output directory."""
    if path.is_dir():
        path = path / "result.json"
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def gated(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The experiments the gate measured a candidate of in a worker (revalidations aside, and candidates compile
    ahead refused before any worker: their record holds a candidate evaluation no worker ran)."""
    return [e for e in result.get("experiments", []) if e.get("experiment_id") not in ("baseline", None)
            and not str(e["experiment_id"]).startswith("final")
            and any(ev.get("label") == "candidate" and ((ev.get("worker") or {}).get("wall_seconds") or 0.0) > 0
                    for ev in e.get("evaluations", []))]


def triaged(experiment: dict[str, Any]) -> bool:
    return ((experiment.get("decision") or {}).get("gates") or {}).get("triage") is False


def reused(experiment: dict[str, Any]) -> bool:
    return "reused_incumbent_run" in (experiment.get("statistics") or {}) and not triaged(experiment)


def outside_workers(experiment: dict[str, Any]) -> float:
    """The seconds of a gated experiment's wall that none of its workers took."""
    workers = sum((ev.get("worker") or {}).get("wall_seconds") or 0.0 for ev in experiment.get("evaluations", []))
    return max((experiment.get("wall_seconds") or 0.0) - workers, 0.0)


def row(name: str, result: dict[str, Any]) -> dict[str, Any]:
    experiments = gated(result)
    report = result.get("report") or {}
    workers = report.get("workers") or 0
    verify = report.get("verify_seconds") or {}
    worker_seconds = report.get("worker_seconds") or {}
    return {
        "run": name,
        "gated": len(experiments),
        "triaged": sum(triaged(e) for e in experiments),
        "reused": sum(reused(e) for e in experiments),
        "median_gated_wall_s": statistics.median(e.get("wall_seconds", 0.0) for e in experiments) if experiments else None,
        "median_outside_workers_s": statistics.median(outside_workers(e) for e in experiments) if experiments else None,
        "median_gated_workers": statistics.median(len(e.get("evaluations", [])) for e in experiments) if experiments else None,
        "workers": workers,
        "verify_s_per_worker": worker_seconds.get("verify", 0.0) / workers if workers else None,
        "first_recording_s_per_worker": verify.get(FIRST_RECORDING, 0.0) / workers if workers else None,
        "run_wall_s": result.get("wall_seconds"),
        "stopping_reason": result.get("stopping_reason"),
    }


def table(rows: list[dict[str, Any]]) -> str:
    columns = list(rows[0]) if rows else []
    def text(value: Any) -> str:
        return f"{value:.2f}" if isinstance(value, float) else str(value)
    lines = [" | ".join(columns), " | ".join("---" for _ in columns)]
    lines += [" | ".join(text(r[c]) for c in columns) for r in rows]
    return "\n".join(f"| {line} |" for line in lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="result.json files (or .json.gz, or output dirs)")
    args = parser.parse_args(argv)
    rows = []
    for path in args.results:
        try:
            rows.append(row(path.parent.name if path.name.startswith("result.json") else path.name, load(path)))
        except (OSError, ValueError) as exc:
            print(f"gate_cost: {path}: {exc}", file=sys.stderr)
            return 1
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
