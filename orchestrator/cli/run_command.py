"""What `optimize` and `optimize --resume` share: the run's configuration from parsed flags, the prior run's
evidence, and running the loop under trio with its outcome written (result.json, everything) and reported (stdout:
the compact `protocol.summary.RunSummary`)."""

from __future__ import annotations

import argparse
from pathlib import Path

import trio

from orchestrator.cli.output import emit, fail
from orchestrator.ledger import reporting
from orchestrator.ledger.artifacts import RunArtifacts, write_json
from orchestrator.ledger.config import RunConfig
from orchestrator.ledger.live_log import LiveLog, quote
from orchestrator.run.loop import OptimizationRun
from orchestrator.run.state import RunAborted
from orchestrator.vcs import VcsError
from protocol.bundle import BundleError
from protocol.outcome import ExitCode, StoppingReason


def absolute(path: Path | None) -> Path | None:
    return None if path is None else path.expanduser().resolve()


def _leaf(exc: BaseException) -> BaseException:
    """The exception that matters inside trio's exception groups: Ctrl-C first, then a run abort."""
    leaves: list[BaseException] = []
    pending = [exc]
    while pending:
        current = pending.pop()
        nested = getattr(current, "exceptions", None)
        if isinstance(nested, tuple):
            pending.extend(nested)
        else:
            leaves.append(current)
    for kind in (KeyboardInterrupt, RunAborted, VcsError):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    return exc


def build_config(args: argparse.Namespace, argv: list[str]) -> RunConfig:
    """The run's configuration from the flags; the budget is merged with budget.json once it is loaded."""
    return RunConfig(
        kernel=absolute(args.kernel), harness=absolute(args.harness), cases=absolute(args.cases),
        target=absolute(args.target), output_dir=absolute(args.output_dir), budget_file=absolute(args.budget),
        provider=args.provider, replay_dir=absolute(args.replay_dir), model=args.model, base_url=args.base_url,
        profile=args.profile, diagnostic_instrumentation=args.diagnostic_instrumentation,
        reference_kernel=absolute(args.reference_kernel), arch=args.arch, vcs=args.vcs,
        commit_message=args.commit_message, commit_winner=args.commit_winner, prior_run=absolute(args.prior_run),
        isolation=args.isolation, schedule=args.schedule, confirm_pairs=args.confirm_runs, triage=args.triage,
        reuse_incumbent_run=args.reuse_incumbent_run, overlap_compile_ahead=args.overlap_compile_ahead,
        worker_python=args.worker_python,
        worker_start=args.worker_start,
        data_limit_bytes=int(args.data_limit_gib * (1 << 30)) if args.data_limit_gib else None,
        confidence=args.confidence, debug=args.debug, bundle_lock=absolute(args.bundle_lock),
        skip_validation=args.skip_validation, argv=["tlx-agent", *argv])


def load_prior(config: RunConfig) -> tuple[frozenset[str], tuple[dict, ...]]:
    """--prior-run: the source digests and evidence of an earlier run (read-only)."""
    if config.prior_run is None:
        return frozenset(), ()
    from orchestrator.run.prior_run import load_prior_run

    try:
        prior = load_prior_run(config.prior_run)
    except (OSError, ValueError) as exc:
        raise BundleError(f"--prior-run {config.prior_run} is invalid: {exc}") from None
    return prior.source_digests, prior.evidence


def execute_run(run: OptimizationRun, artifacts: RunArtifacts, log: LiveLog, output_dir: Path) -> int:
    """Run the loop under trio and turn how it ended into the journal, result.json, stdout and the exit code."""
    try:
        try:
            result = trio.run(run.run)
        except BaseException as raised:  # noqa: BLE001 - trio wraps what nurseries raise in exception groups
            raise _leaf(raised) from None
    except RunAborted as exc:
        artifacts.journal("run_aborted", message=exc.message, exit_code=exc.exit_code)
        log.close()
        return fail(exc.message, exc.exit_code, output_dir=str(output_dir), stopping_reason=exc.stopping_reason)
    except VcsError as exc:
        artifacts.journal("run_aborted", message=str(exc), exit_code=ExitCode.COMMIT_FAILED)
        log.close()
        return fail(f"cannot prepare commits: {exc}", ExitCode.COMMIT_FAILED, output_dir=str(output_dir))
    except KeyboardInterrupt:
        artifacts.journal("run_interrupted")
        log.close()
        return fail("interrupted; partial artifacts are in the output directory", ExitCode.INTERRUPTED,
                    output_dir=str(output_dir), stopping_reason=StoppingReason.INTERRUPTED)
    write_json(output_dir / "result.json", result)
    artifacts.journal("run_finished", exit_code=result.exit_code, stopping_reason=result.stopping_reason)
    log.event(f"run finished status={'success' if result.success else 'no_winner'} exit_code={result.exit_code} "
              f"stopping_reason={result.stopping_reason.value} stopping_detail={quote(result.stopping_detail, 400)} "
              f"winner={result.winner_experiment_id} "
              f"aggregate_speedup={result.report.aggregate_speedup} output_dir={str(output_dir)!r}")
    log.close()
    emit(reporting.run_summary(result, run.inputs.cases, run.config.budget.max_case_regression).model_dump(mode="json"))
    return result.exit_code
