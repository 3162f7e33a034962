"""`tlx-agent simulate RUN`: decide a recorded run's experiments again from its records, without a worker.

stdout: one JSON document (a row per experiment, recorded against simulated, and `all_match`); stderr: the
same as a table. Exit 0 when every decision is reproduced (a decision that only a gate added since its record
changes counts as reproduced when the replay without that gate matches it; the row says what the gate changes),
or whenever a policy override is given (the rows then show what it changes); exit 1 when a decision is not
reproduced, or on unreadable records (one line naming the file).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.cli.output import emit, fail
from protocol.bundle import Budget
from protocol.outcome import ExitCode

if TYPE_CHECKING:
    from orchestrator.decision.simulate import DecisionView, Policy, RunReplay
    from orchestrator.decision.study import StudyResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, metavar="RUN_DIR_OR_RESULT_JSON",
                        help="a run's output directory, a result.json on its own, or a measurement study's directory "
                             "(runs_*.json of scripts/measurement_study.py: its A/B/A trials are decided again)")
    study = parser.add_argument_group("measurement studies")
    study.add_argument("--trials", type=int, default=200, help="A/B/A trials drawn per cell (default 200)")
    study.add_argument("--seed", type=int, default=7, help="seed of the trials' draws (default 7, the study's)")
    study.add_argument("--reuse-incumbent-run", action="store_true",
                       help="decide each trial as a triaging run does by default: the candidate's run triaged "
                            "against an incumbent run, then decided on it and one more")
    policy = parser.add_argument_group("policy overrides (default: what each decision used)")
    policy.add_argument("--min-speedup", type=float, help="minimum aggregate speedup to promote")
    policy.add_argument("--confidence", type=float, help="confidence of the promotion test")
    policy.add_argument("--max-cv", type=float, help="largest timing CV of a candidate's case")
    policy.add_argument("--max-case-regression", type=float,
                        help="largest loss a protected case may show beyond its noise (0.02 = 2 %%; 1 = off); "
                             "default: the run's value; records decided before this gate existed are replayed at "
                             f"today's default, {Budget().max_case_regression:g}")
    policy.add_argument("--noise-floor", type=float, help="between-run noise assumed at least (0.002 = 0.2 %%)")
    policy.add_argument("--noise-model", choices=("recorded", "learned", "floor"), default="recorded",
                        help="recorded: as each decision was made; learned: from the run's repeated sources; "
                             "floor: the floor and each trial's own spread (default: %(default)s)")
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
            f"changed by the {', '.join(row.new_gates)} gate: {row.first_difference}" if row.reproduced_without_new_gates \
            else f"{'changed' if replay.policy.overrides else 'DIFFERS'}: {row.first_difference}"
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
    changed = sum(not row.match and bool(row.reproduced_without_new_gates) for row in replay.experiments)
    lines.append(f"{reproduced} of {len(replay.experiments)} decisions reproduced"
                 + (f", {changed} more without the gates their records predate" if changed else ""))
    return "\n".join(lines) + "\n"


def format_study(result: StudyResult, source: str) -> str:
    """One row per example and cell: promoted with the product's gates, and without the per-case gate."""
    lines = [f"study {source}: {result.trials} trials per cell, seed {result.seed}, noise "
             f"{'learnt from the incumbent variant' if result.learn_noise else 'floor only'}, up to "
             f"{result.confirm_pairs} confirmation pairs, min_speedup {result.min_speedup:g}, "
             f"max_case_regression {result.max_case_regression:g}"
             + (", the incumbent's last run reused" if result.reuse_incumbent_run else "")]
    rows = [("example", "cell", "promoted", "without case gate", "case gate failed", "confirmed")]
    for example, cells in result.outcomes.items():
        for name, cell in cells.items():
            rows.append((example, name, f"{cell.promoted}/{cell.trials}", f"{cell.promoted_without_case_gate}/{cell.trials}",
                         str(cell.case_gate_failed), str(cell.confirmed_trials)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines) + "\n"


def simulate_study(args: argparse.Namespace, policy: Policy) -> int:
    """A measurement study's trials decided again under today's gates (and the policy's overrides)."""
    from orchestrator.decision.noise import DEFAULT_NOISE_FLOOR
    from orchestrator.decision.study import analyse
    from orchestrator.ledger.records import RecordsError, load_study

    if args.trials < 1:
        return fail(f"--trials {args.trials}: give at least 1 trial per cell")
    try:
        measurements = load_study(args.run)
        budget = Budget()
        budget = budget.model_copy(update={name: getattr(policy, name) for name in
                                           ("min_speedup", "max_cv", "max_case_regression")
                                           if getattr(policy, name) is not None})
        result = analyse(measurements, args.trials, args.seed, learn_noise=policy.noise_model != "floor",
                         budget=budget, confidence=policy.confidence or 0.99,
                         noise_floor=DEFAULT_NOISE_FLOOR if policy.noise_floor is None else policy.noise_floor,
                         reuse_incumbent_run=args.reuse_incumbent_run)
    except RecordsError as exc:
        return fail(str(exc))
    except ValueError as exc:
        return fail(f"{args.run}: {exc}")
    sys.stderr.write(format_study(result, str(args.run)))
    emit({"source": str(args.run), "study": result.model_dump(mode="json")})
    return ExitCode.OK


def simulate_main(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from orchestrator.decision.simulate import Policy, simulate_run
    from orchestrator.ledger.records import RecordsError, is_study, load_records

    try:
        policy = Policy(min_speedup=args.min_speedup, confidence=args.confidence, max_cv=args.max_cv,
                        max_case_regression=args.max_case_regression, noise_floor=args.noise_floor,
                        noise_model=args.noise_model)
    except ValidationError as exc:
        error = exc.errors()[0]
        return fail(f"--{str(error['loc'][0]).replace('_', '-')}: {error['msg']}")
    if is_study(args.run):
        return simulate_study(args, policy)
    try:
        records = load_records(args.run)
        replay = simulate_run(records.experiments, records.cases, settings=records.settings, policy=policy)
    except RecordsError as exc:
        return fail(str(exc))
    sys.stderr.write(format_table(replay, records.warnings))
    emit({"source": records.source, "warnings": records.warnings, **replay.model_dump(mode="json")})
    return ExitCode.OK if replay.all_reproduced or policy.overrides else ExitCode.ERROR
