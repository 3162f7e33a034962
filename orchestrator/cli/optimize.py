"""`tlx-agent optimize`: resolve inputs, refuse bad ones early, run the loop under trio, report."""

from __future__ import annotations

import argparse
from pathlib import Path

import trio

from orchestrator.bundle.budget import resolve_budget
from orchestrator.bundle.inputs import load_inputs
from orchestrator.cli.output import emit, fail
from orchestrator.preflight.runner import optimize_builtin, optimize_preflight
from orchestrator.providers.base import ProviderConfigError
from orchestrator.providers.factory import create_provider
from orchestrator.run.commit_step import CommitStep
from orchestrator.run.config import RunConfig
from orchestrator.run.ledger.artifacts import OutputDirError, RunArtifacts, prepare_output_dir, write_json
from orchestrator.run.ledger.live_log import LiveLog, quote
from orchestrator.run.loop import OptimizationRun
from orchestrator.run.state import RunAborted
from orchestrator.vcs import VcsError
from orchestrator.worker.environment import refused_target_environment
from protocol.bundle import BundleError
from protocol.outcome import ExitCode, StoppingReason

MAX_CONFIRM_PAIRS = 4  # each pair is two more fresh workers


def _absolute(path: Path | None) -> Path | None:
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


BUDGET_FLAGS = ("max_rounds", "candidates_per_round", "max_candidate_seconds", "max_total_seconds", "min_speedup",
                "max_cv", "benchmark_repetitions")


def build_config(args: argparse.Namespace, argv: list[str]) -> RunConfig:
    """The run's configuration from the flags; the budget is merged with budget.json once it is loaded."""
    return RunConfig(
        kernel=_absolute(args.kernel), harness=_absolute(args.harness), cases=_absolute(args.cases),
        target=_absolute(args.target), output_dir=_absolute(args.output_dir), budget_file=_absolute(args.budget),
        provider=args.provider, replay_dir=_absolute(args.replay_dir), model=args.model, base_url=args.base_url,
        profile=args.profile, diagnostic_instrumentation=args.diagnostic_instrumentation,
        reference_kernel=_absolute(args.reference_kernel), arch=args.arch, vcs=args.vcs,
        commit_message=args.commit_message, commit_winner=args.commit_winner, prior_run=_absolute(args.prior_run),
        isolation=args.isolation, schedule=args.schedule, confirm_pairs=args.confirm_runs,
        worker_python=args.worker_python,
        worker_start=args.worker_start,
        data_limit_bytes=int(args.data_limit_gib * (1 << 30)) if args.data_limit_gib else None,
        confidence=args.confidence, debug=args.debug, bundle_lock=_absolute(args.bundle_lock),
        skip_validation=args.skip_validation, argv=["tlx-agent", *argv])


def optimize_main(args: argparse.Namespace, argv: list[str]) -> int:
    config = build_config(args, argv)
    inputs = load_inputs(kernel=config.kernel, harness=config.harness, cases=config.cases, target=config.target,
                         budget=config.budget_file, reference_kernel=config.reference_kernel)
    config.budget, config.budget_sources = resolve_budget(
        inputs.target, {name: getattr(args, name) for name in BUDGET_FLAGS}, inputs.budget_overrides)
    from orchestrator.decision.schedule import measurement_schedule

    try:
        measurement_schedule(config.schedule)
    except ValueError as exc:
        raise BundleError(f"--schedule {config.schedule!r}: {exc}") from None
    if not 0 <= config.confirm_pairs <= MAX_CONFIRM_PAIRS:
        raise BundleError(f"--confirm-runs {config.confirm_pairs}: use 0 (off) to {MAX_CONFIRM_PAIRS} extra pairs")
    prior_digests: frozenset[str] = frozenset()
    prior_evidence: tuple[dict, ...] = ()
    if config.prior_run is not None:
        from orchestrator.run.prior_run import load_prior_run

        try:
            prior = load_prior_run(config.prior_run)
        except (OSError, ValueError) as exc:
            raise BundleError(f"--prior-run {config.prior_run} is invalid: {exc}") from None
        prior_digests, prior_evidence = prior.source_digests, prior.evidence
    # Before any side effect: --arch and --bundle-lock; the built-in preflight comes once the output dir exists.
    device_view, arch, locked = optimize_preflight(config, inputs)
    config.refused_environment = refused_target_environment(inputs.target.environment)
    try:
        provider = create_provider(config)
    except ProviderConfigError as exc:
        return fail(str(exc))
    try:
        output_dir = prepare_output_dir(config.output_dir)
    except OutputDirError as exc:
        return fail(str(exc))
    config.output_dir = output_dir
    log = LiveLog()
    log.attach_file(output_dir / "live.log")
    preflight_failure, config.bundle_lock_summary = optimize_builtin(config, inputs, log, output_dir, device_view,
                                                                     arch, locked)
    if preflight_failure is not None:
        log.close()
        return fail(preflight_failure, output_dir=str(output_dir))
    if config.isolation != "off":
        from orchestrator.worker.doctor import probe_isolation_sync, strict_refusals

        layers = probe_isolation_sync(config.worker_python, config.isolation)
        config.isolation_probe = layers
        log.event("isolation mode=" + config.isolation + " " + " ".join(f"{k}={v!r}" for k, v in layers.items()))
        refused = strict_refusals(layers)
        if config.isolation == "strict" and refused:
            log.close()
            return fail(f"--isolation strict: layer(s) {', '.join(refused)} not active on this machine "
                        f"({'; '.join(f'{k}={layers[k]}' for k in refused)}); run `tlx-agent doctor`, "
                        "or use --isolation standard", output_dir=str(output_dir))
    artifacts = RunArtifacts(output_dir)
    artifacts.journal("run_started", argv=config.argv)
    if config.prior_run is not None:
        log.event(f"prior-run path={str(config.prior_run)!r} source_hashes={len(prior_digests)} "
                  f"evidence={len(prior_evidence)}")
    commit_step = CommitStep(config, config.kernel, log, artifacts)
    run = OptimizationRun(config, inputs, provider, log, artifacts, commit_step,
                          prior_digests=prior_digests, prior_evidence=prior_evidence)
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
    emit(result.model_dump(mode="json"))
    return result.exit_code


__all__ = ["optimize_main"]
