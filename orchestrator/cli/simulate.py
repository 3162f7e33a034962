"""`tlx-agent simulate RUN`: decide a recorded run's experiments again from its records, without a worker.

stdout: one JSON document (a row per experiment, recorded against simulated, and `all_match`); stderr: the
same as a table. Exit 0 when every decision is reproduced, or whenever a policy override is given (the rows
then show what it changes); exit 1 when a decision is not reproduced, or on unreadable records (one line
naming the file).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.cli.output import emit, fail
from protocol.outcome import ExitCode

if TYPE_CHECKING:
    from orchestrator.decision.simulate import DecisionView, RunReplay


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, metavar="RUN_DIR_OR_RESULT_JSON",
                        help="a run's output directory, or a result.json on its own")
    policy = parser.add_argument_group("policy overrides (default: what each decision used)")
    policy.add_argument("--min-speedup", type=float, help="minimum aggregate speedup to promote")
    policy.add_argument("--confidence", type=float, help="confidence of the promotion test")
    policy.add_argument("--max-cv", type=float, help="largest timing CV of a candidate's case")
    policy.add_argument("--noise-floor", type=float, help="between-run noise assumed at least (0.002 = 0.2 %%)")
    policy.add_argument("--noise-model", choices=("recorded", "learned", "floor"), default="recorded",
                        help="recorded: as each decision was made; learned: from the run's repeated sources; "
                             "floor: the floor and each trial's own spread")
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


def _cell(view: DecisionView | None) -> str:
    if view is None:
        return "(not decided)"
    speedup = f"{view.aggregate_speedup:.4f}x" if view.aggregate_speedup is not None else "-"
    bound = f" lb {view.lower_bound:.4f}x" if view.lower_bound is not None else ""
    failed = ",".join(sorted(gate for gate, passed in view.gates.items() if not passed))
    return f"{view.status.value} {speedup}{bound}" + (f" failed:{failed}" if failed else "")


def format_table(replay: RunReplay, warnings: list[str]) -> str:
    rows = [("experiment", "recorded", "simulated", "")]
    for row in replay.experiments:
        verdict = "match" if row.match else \
            f"{'changed' if replay.policy.overrides else 'DIFFERS'}: {row.first_difference}"
        if row.after_divergence:
            verdict += " (after divergence)"
        rows.append((row.experiment_id, _cell(row.recorded), _cell(row.simulated), verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(r[:3], widths, strict=True)) + "  " + r[3]
             for r in rows]
    for row in replay.experiments:
        lines += [f"  {row.experiment_id}: carried from the record: {item}" for item in row.carried
                  if row.replayed] + [f"  {row.experiment_id}: {note}" for note in row.notes]
    lines += [f"note: {note}" for note in replay.notes] + [f"warning: {warning}" for warning in warnings]
    if replay.diverges_at:
        lines.append(f"this policy would have taken another incumbent at {replay.diverges_at}; later rows judge "
                     "measurements such a run would not have made")
    reproduced = sum(row.match for row in replay.experiments)
    lines.append(f"{reproduced} of {len(replay.experiments)} decisions reproduced")
    return "\n".join(lines) + "\n"


def simulate_main(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from orchestrator.decision.simulate import Policy, simulate_run
    from orchestrator.run.ledger.records import RecordsError, load_records

    try:
        policy = Policy(min_speedup=args.min_speedup, confidence=args.confidence, max_cv=args.max_cv,
                        noise_floor=args.noise_floor, noise_model=args.noise_model)
    except ValidationError as exc:
        error = exc.errors()[0]
        return fail(f"--{str(error['loc'][0]).replace('_', '-')}: {error['msg']}")
    try:
        records = load_records(args.run)
        replay = simulate_run(records.experiments, records.cases, settings=records.settings, policy=policy)
    except RecordsError as exc:
        return fail(str(exc))
    sys.stderr.write(format_table(replay, records.warnings))
    emit({"source": records.source, "warnings": records.warnings, **replay.model_dump(mode="json")})
    return ExitCode.OK if replay.all_match or policy.overrides else ExitCode.ERROR
