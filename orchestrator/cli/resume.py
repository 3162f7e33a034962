"""`tlx-agent optimize --resume OUT`: continue a run whose orchestrator died (docs/resume.md).

Every input comes from OUT: the settings from the command recorded in run.json, the inputs from the frozen
bundle/ (never from the user's files, which the run's own commits may have changed). Only the two budget
flags that say how much longer the run may go, --max-total-seconds and --max-rounds, may be given with it;
anything else is refused (exit 1), because a finished record decided under other settings would mix with
new ones.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from orchestrator.bundle.inputs import load_inputs
from orchestrator.cli.output import fail
from orchestrator.cli.run_command import build_config, execute_run, load_prior
from orchestrator.ledger.artifacts import RunArtifacts
from orchestrator.ledger.config import RunConfig
from orchestrator.ledger.evaluations import reusable_evaluations
from orchestrator.ledger.live_log import LiveLog, quote
from orchestrator.providers.base import ProviderConfigError
from orchestrator.providers.factory import create_provider
from orchestrator.run.commit_step import CommitStep
from orchestrator.run.loop import OptimizationRun
from orchestrator.run.resume.aside import move_aside_unfinished
from orchestrator.run.resume.rebuild import resumption
from orchestrator.run.resume.record import RecordedRun, ResumeRefused, read_recorded_run
from protocol.bundle import BundleError

ALLOWED_WITH_RESUME = ("--resume", "--max-total-seconds", "--max-rounds", "--debug")
OVERRIDABLE_BUDGET = ("max_total_seconds", "max_rounds")


def refused_flags(argv: list[str]) -> list[str]:
    """The flags given with --resume that it does not take."""
    given = {token.split("=", 1)[0] for token in argv if token.startswith("--")}
    return sorted(given - set(ALLOWED_WITH_RESUME))


ParseCommand = Callable[[list[str]], argparse.Namespace]  # the CLI's parser; raises ValueError on bad usage


def recorded_config(recorded: RecordedRun, parse_command: ParseCommand) -> RunConfig:
    """The dead run's configuration: its recorded command parsed again, relative paths from where it ran."""
    manifest = recorded.manifest
    command = list(manifest.command[1:])
    try:
        args = parse_command(command)
    except (ValueError, SystemExit) as exc:
        raise ResumeRefused(f"the command recorded in run.json cannot be read again ({exc})") from None
    start = Path(manifest.working_directory or recorded.output_dir)
    for name, value in vars(args).items():
        if isinstance(value, Path) and not value.is_absolute():
            setattr(args, name, start / value)
    config = build_config(args, command)
    config.argv = list(manifest.command)
    config.output_dir = recorded.output_dir
    config.budget, config.budget_sources = manifest.budget, dict(manifest.budget_sources)
    config.isolation_probe = dict(manifest.isolation.probe)
    config.bundle_lock_summary = manifest.bundle_lock.model_dump(mode="json") if manifest.bundle_lock else None
    config.refused_environment = list(manifest.refused_environment)
    config.autotune = manifest.autotune  # the dead run's choice: a run autotunes once
    return config


def resume_main(args: argparse.Namespace, argv: list[str], parse_command: ParseCommand) -> int:
    refused = refused_flags(argv)
    if refused:
        return fail(f"--resume takes every input and setting from the run's run.json and bundle/; {', '.join(refused)} "
                    "cannot be given with it (only --max-total-seconds and --max-rounds may extend the budget)")
    try:
        recorded = read_recorded_run(args.resume)
        config = recorded_config(recorded, parse_command)
    except ResumeRefused as exc:
        return fail(str(exc))
    overrides = {name: getattr(args, name) for name in OVERRIDABLE_BUDGET if getattr(args, name) is not None}
    if overrides:
        try:
            config.budget = config.budget.model_validate({**config.budget.model_dump(), **overrides})
        except ValueError as exc:
            raise BundleError(f"--resume budget override is invalid: {exc}") from None
    frozen = recorded.bundle
    inputs = load_inputs(kernel=frozen.path("kernel.py"), harness=frozen.harness_path, cases=frozen.path("cases.json"),
                         target=frozen.path("target.json"),
                         budget=frozen.path("budget.json") if "budget.json" in frozen.files else None,
                         reference_kernel=frozen.path("reference_kernel.py")
                         if "reference_kernel.py" in frozen.files else None)
    inputs.kernel_path = config.kernel  # the user's file: commits go there, proposals name it
    try:
        provider = create_provider(config)
    except ProviderConfigError as exc:
        return fail(str(exc))
    prior_digests, prior_evidence = load_prior(config)
    output_dir = recorded.output_dir
    log = LiveLog()
    log.attach_file(output_dir / "live.log")
    artifacts = RunArtifacts(output_dir)
    point = resumption(recorded, config.budget.max_total_seconds, config.budget.candidates_per_round)
    count = recorded.resume_count + 1
    moved = move_aside_unfinished(output_dir, {r.experiment_id for r in recorded.experiments}, count)
    point.reusable, unreadable = reusable_evaluations(output_dir)
    artifacts.journal("run_resumed", argv=["tlx-agent", *argv], resume_count=count, moved_aside=moved,
                      budget_overrides=overrides)
    for warning in recorded.warnings:
        log.event(f"resume warning={quote(warning, 400)}")
    for path in moved:
        log.event(f"resume moved_aside={path!r} reason='its experiment had not finished; it runs again, its "
                  "finished evaluations are taken from the record'")
    for warning in unreadable:
        log.event(f"resume warning={quote(warning, 400)}")
    commit_step = CommitStep(config, config.kernel, log, artifacts)
    run = OptimizationRun(config, inputs, provider, log, artifacts, commit_step, prior_digests=prior_digests,
                          prior_evidence=prior_evidence, resume=point)
    return execute_run(run, artifacts, log, output_dir)


__all__ = ["resume_main"]
