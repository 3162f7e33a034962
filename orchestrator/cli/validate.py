"""`tlx-agent validate`: the flags in, bundle.lock.json out (stdout and the output dir).

What the preflight checks and how is orchestrator/preflight/runner.py (`full_validation`); this module
turns the flags into its inputs and settings, prepares the output directory and the log, and prints the
lock. Exit 0 only when every check passed.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from orchestrator.bundle.arch import resolve_arch_flag
from orchestrator.bundle.budget import resolve_budget
from orchestrator.bundle.inputs import Inputs, load_inputs
from orchestrator.cli.output import emit, fail
from orchestrator.cli.run_command import absolute
from orchestrator.ledger.artifacts import OutputDirError, prepare_output_dir
from orchestrator.ledger.live_log import LiveLog
from orchestrator.preflight.runner import MIN_BENCHMARK_WORKERS, Settings, full_validation
from protocol.bundle import Budget, BundleError
from protocol.outcome import ExitCode

INTERPRETER_STABILITY = ("the CPU interpreter's timings measure this machine's load, not the kernel (pass "
                         "--max-cv to judge them anyway)")


def load_validate_inputs(args: argparse.Namespace) -> tuple[Inputs, Budget, dict[str, str]]:
    inputs = load_inputs(kernel=absolute(args.kernel), harness=absolute(args.harness), cases=absolute(args.cases),
                         target=absolute(args.target), budget=absolute(args.budget),
                         reference_kernel=absolute(args.reference_kernel))
    given = {"max_cv": args.max_cv, "benchmark_repetitions": args.benchmark_repetitions,
             "max_candidate_seconds": args.max_candidate_seconds, "max_autotune_seconds": args.max_autotune_seconds}
    budget, sources = resolve_budget(inputs.target, given, inputs.budget_overrides)
    return inputs, budget, sources


def validate_main(args: argparse.Namespace, argv: list[str]) -> int:
    inputs, budget, sources = load_validate_inputs(args)
    arch = resolve_arch_flag(args.arch)
    if args.benchmark_workers < MIN_BENCHMARK_WORKERS:
        raise BundleError(f"--benchmark-workers must be at least {MIN_BENCHMARK_WORKERS}, got {args.benchmark_workers}")
    settings = Settings(max_cv=budget.max_cv, repetitions=budget.benchmark_repetitions,
                        phase_seconds=budget.max_candidate_seconds, benchmark_workers=args.benchmark_workers,
                        isolation=args.isolation, worker_python=args.worker_python,
                        data_limit_bytes=int(args.data_limit_gib * (1 << 30)) if args.data_limit_gib else None,
                        profile=args.profile, arch=args.arch,
                        stability_not_judged=INTERPRETER_STABILITY if sources["max_cv"] == "interpreter default"
                        else None, autotune_seconds=budget.max_autotune_seconds)
    if args.output_dir is not None:
        try:
            output_dir = prepare_output_dir(absolute(args.output_dir))  # type: ignore[arg-type]
        except OutputDirError as exc:
            return fail(str(exc))
    else:
        output_dir = Path(tempfile.mkdtemp(prefix="tlx-agent-validate-")).resolve()
    log = LiveLog()
    log.attach_file(output_dir / "validate.log")
    log.event(f"validate kernel={str(inputs.kernel_path)!r} harness={str(inputs.harness_path)!r} "
              f"cases={str(inputs.cases_path)!r} target={str(inputs.target_path)!r} output_dir={str(output_dir)!r} "
              f"benchmark_workers={settings.benchmark_workers} max_cv={settings.max_cv}")
    try:
        lock = full_validation(inputs, settings=settings, arch=arch, work_root=output_dir, log=log,
                               parent_env=dict(os.environ))
    except KeyboardInterrupt:
        log.close()
        return fail("interrupted", ExitCode.INTERRUPTED)
    log.close()
    emit(lock.model_dump(mode="json"))
    return ExitCode.OK if lock.passed else ExitCode.ERROR
