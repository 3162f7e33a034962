"""`tlx-agent batch`: optimize many kernels, each job its own process, with a summary that survives a kill.

stdout carries the final BatchSummary (or the error document); stderr one line per job state change.
Exit codes (protocol.batch.BatchExitCode, within protocol.outcome.ExitCode): 0 every job improved; 2 none did; 5 some did; 1 invalid manifest,
output directory or arguments; 130 interrupted.

This module is the command: its flags, their checks, the output. What runs the batch (manifest, ledger, policy,
the engines) is orchestrator/batch/, which never imports the command line.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from orchestrator.batch.engine import run_unfinished
from orchestrator.batch.gpus import GpuSpecError, batch_gpus
from orchestrator.batch.ledger import (
    JOBS_DIR,
    SUMMARY_NAME,
    BatchDirError,
    BatchLedger,
    locked,
    now_iso,
    read_previous_summary,
    starting_jobs,
)
from orchestrator.batch.manifest import ManifestError, load_manifest
from orchestrator.batch.options import OptimizeArguments
from orchestrator.batch.policy import batch_exit_code, progress_line
from orchestrator.cli.output import emit, fail
from orchestrator.ledger.live_log import LiveLog
from protocol.batch import BatchExitCode, BatchSummary, JobStatus

EPILOG = """exit codes: 0 every job improved; 2 no job improved; 5 some jobs improved (the others found no
improvement or failed); 1 invalid manifest, output directory or arguments; 130 interrupted (--resume continues).
Dask workers for GPU jobs: one per GPU, `CUDA_VISIBLE_DEVICES=i dask worker ADDRESS --nthreads 1
--resources GPU=1` (docs/batch.md)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("manifest", type=Path, help="batch manifest (.json or .toml); job paths relative to its folder")
    parser.add_argument("--output-dir", type=Path, required=True,
                        help="new or empty directory: batch.json, and jobs/<job_id>/ plus .json and .log per job")
    parser.add_argument("--resume", action="store_true",
                        help="continue the batch recorded in --output-dir: finished jobs are kept, the rest rerun")
    parser.add_argument("--gpus", help="GPU indices for local jobs, one job per GPU at a time: 0,1 | all | none "
                                       "(default: all visible; none on a CPU machine)")
    parser.add_argument("--parallel", type=int,
                        help="jobs at once on the CPU (default 1); with GPUs it also caps the GPUs used")
    parser.add_argument("--engine", choices=("local", "dask"), default="local",
                        help="local subprocesses (default) or a Dask distributed cluster (pip install tlx-agent[cluster])")
    parser.add_argument("--scheduler", help="Dask scheduler address for --engine dask, e.g. tcp://head:8786")
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


def _log_with_progress(live: LiveLog, summary: BatchSummary) -> Callable[[str], None]:
    """stderr: one line per job state change, and on a terminal a progress line kept below them."""
    def log(line: str) -> None:
        live.event(line)
        live.progress(progress_line(summary.jobs))

    return log


def engine_argument_error(args: argparse.Namespace) -> str | None:
    """The one argument combination problem to report, if any (checked before anything is written)."""
    if args.engine == "dask" and not args.scheduler:
        return "--engine dask needs --scheduler ADDRESS (e.g. tcp://head:8786)"
    if args.engine == "local" and args.scheduler:
        return "--scheduler applies to --engine dask only"
    if args.engine == "dask" and (args.gpus is not None or args.parallel is not None):
        return ("--gpus and --parallel apply to --engine local; Dask workers declare GPUs with --resources GPU=1 "
                "and run as many jobs as they have threads")
    if args.parallel is not None and args.parallel < 1:
        return f"--parallel must be at least 1, got {args.parallel}"
    return None


def _missing_dask() -> str | None:
    try:
        import distributed  # noqa: F401 - only whether it is installed
    except ImportError:
        return "--engine dask needs the distributed package: pip install 'tlx-agent[cluster]'"
    return None


def batch_main(args: argparse.Namespace, define_optimize: OptimizeArguments) -> int:
    """`define_optimize` is optimize's argument definition, against which job options are checked."""
    live = LiveLog()
    problem = engine_argument_error(args) or (_missing_dask() if args.engine == "dask" else None)
    if problem:
        return fail(problem)
    try:
        gpus = batch_gpus(args.gpus or "all") if args.engine == "local" else []
        _, jobs = load_manifest(args.manifest, define_optimize)
        output_dir = args.output_dir.absolute()
        previous = read_previous_summary(output_dir, args.resume)
        jobs_dir = output_dir / JOBS_DIR
        jobs_dir.mkdir(parents=True, exist_ok=True)
    except (GpuSpecError, ManifestError, BatchDirError) as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"--output-dir {args.output_dir}: {exc.strerror or exc}")
    try:
        with locked(output_dir):
            summary = BatchSummary(manifest=str(args.manifest.absolute()), output_dir=str(output_dir),
                                   started=previous.started if previous else now_iso(), engine=args.engine,
                                   jobs=starting_jobs(jobs, previous, jobs_dir))
            kept = sum(job.status.finished for job in summary.jobs)
            live.event(f"batch {'resumed' if previous else 'started'} jobs={len(jobs)} kept={kept} engine={args.engine} "
                 f"output_dir={str(output_dir)!r}")
            ledger = BatchLedger(output_dir / SUMMARY_NAME, summary, _log_with_progress(live, summary))
            try:
                completed = run_unfinished(jobs, jobs_dir, ledger, engine=args.engine, scheduler=args.scheduler,
                                           gpus=gpus, parallel=args.parallel)
            except KeyboardInterrupt:
                completed = False
            except OSError as exc:
                if args.engine != "dask":
                    raise
                # the Dask scheduler cannot be reached, or went away
                return fail(f"--scheduler {args.scheduler}: {type(exc).__name__}: {exc}; batch.json keeps what "
                            "finished, --resume continues", output_dir=str(output_dir))
            finally:
                live.close()  # the progress line goes; later lines are plain
            if not completed:
                ledger.close(BatchExitCode.INTERRUPTED)
                return fail("batch interrupted; `tlx-agent batch --resume` continues it", BatchExitCode.INTERRUPTED,
                            output_dir=str(output_dir))
            exit_code = batch_exit_code(job.status for job in ledger.summary.jobs)
            ledger.close(exit_code)
    except BatchDirError as exc:
        return fail(str(exc))
    live.event(f"batch finished exit_code={int(exit_code)} " + " ".join(
        f"{status.value}={sum(job.status == status for job in summary.jobs)}" for status in JobStatus
        if status.finished))
    emit(summary.model_dump(mode="json"))
    return int(exit_code)
