"""`tlx-agent optimize`: resolve inputs, refuse bad ones early, run the loop under trio, report."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from orchestrator.autotune.optimize_step import optimize_autotune
from orchestrator.autotune.step import AutotuneStepFailed
from orchestrator.bundle.budget import resolve_budget
from orchestrator.bundle.inputs import load_inputs
from orchestrator.cli.output import fail
from orchestrator.cli.run_command import (
    build_config,
    execute_run,
    load_prior,
)
from orchestrator.ledger.artifacts import OutputDirError, RunArtifacts, prepare_output_dir
from orchestrator.ledger.live_log import LiveLog
from orchestrator.preflight.for_optimize import (
    optimize_builtin,
    optimize_preflight,
    validated_without_preflight,
)
from orchestrator.providers.base import ProviderConfigError
from orchestrator.providers.factory import create_provider
from orchestrator.run.commit_step import CommitStep
from orchestrator.run.loop import OptimizationRun
from orchestrator.worker.environment import refused_target_environment
from orchestrator.worker.process import Spawner
from protocol.bundle import BundleError

MAX_CONFIRM_PAIRS = 4  # each pair is two more fresh workers


BUDGET_FLAGS = ("max_rounds", "candidates_per_round", "max_candidate_seconds", "max_total_seconds", "min_speedup",
                "max_cv", "benchmark_repetitions", "max_case_regression", "max_autotune_seconds")


REQUIRED_INPUTS = ("kernel", "harness", "cases", "target", "output_dir")


def optimize_main(args: argparse.Namespace, argv: list[str],
                  parse_command: Callable[[list[str]], argparse.Namespace] | None = None) -> int:
    if args.resume is not None:
        from orchestrator.cli.resume import resume_main

        if parse_command is None:
            return fail("--resume needs the command line's parser to read the recorded command again")
        return resume_main(args, argv, parse_command)
    missing = [f"--{name.replace('_', '-')}" for name in REQUIRED_INPUTS if getattr(args, name) is None]
    if missing:
        return fail(f"tlx-agent optimize: the following arguments are required: {', '.join(missing)} (or --resume "
                    "OUT to continue a run; see --help)")
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
    prior_digests, prior_evidence = load_prior(config)
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
    try:  # before the preflight: its workers and the run's pin the untouched kernel's own autotune choice
        config.autotune = optimize_autotune(config, inputs, log)
    except AutotuneStepFailed as exc:
        log.close()
        return fail(str(exc), output_dir=str(output_dir))
    validated, config.bundle_lock_summary = validated_without_preflight(config, log, locked)
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

    async def preflight(spawner: Spawner) -> str | None:
        """The built-in preflight in the run's own workers (its fork server has imported torch and triton once)."""
        failure, config.bundle_lock_summary = await optimize_builtin(config, inputs, log, output_dir, device_view,
                                                                     arch, spawner)
        return failure

    run = OptimizationRun(config, inputs, provider, log, artifacts, commit_step,
                          prior_digests=prior_digests, prior_evidence=prior_evidence,
                          preflight=None if validated else preflight)
    return execute_run(run, artifacts, log, output_dir)


__all__ = ["optimize_main"]
