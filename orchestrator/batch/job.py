"""Run one job: `python -m orchestrator.cli optimize ...` as its own process, so a crash stays that job's.

stdout (optimize's one JSON document) goes to DIR/jobs/<job_id>.json, stderr to DIR/jobs/<job_id>.log and
optimize's artifacts to DIR/jobs/<job_id>/. A later attempt first moves an earlier attempt's three outputs
aside to `<job_id>.attempt-<n>` (optimize refuses a non-empty output directory). The same code runs under the
local scheduler (`run_job`, a trio task) and on a Dask worker (`run_job_blocking`).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

import trio
from pydantic import BaseModel

from orchestrator.batch.manifest import ResolvedJob
from orchestrator.batch.outcome import JobOutcome, aggregate_speedup, interpret, one_line, parse_document
from orchestrator.batch.policy import aside_name
from protocol.batch import JobStatus

LOG_TAIL_BYTES = 4096
# On cancellation optimize gets SIGINT first: it stops its workers and prints its interrupted document.
INTERRUPT_GRACE_SECONDS = 15.0


class JobCommand(BaseModel):
    """Everything a node needs to run one job; paths absolute (on a cluster: on the shared file system)."""

    job_id: str
    args: list[str]  # after the interpreter: -m orchestrator.cli optimize ... --output-dir DIR/jobs/<job_id>
    cwd: str
    output_dir: str
    stdout_path: str
    stderr_path: str
    needs_gpu: bool
    attempt: int  # this run's number; an earlier one's outputs are moved aside first


def job_command(job: ResolvedJob, jobs_dir: Path, attempt: int) -> JobCommand:
    output_dir = jobs_dir / job.job_id
    return JobCommand(job_id=job.job_id, args=["-m", "orchestrator.cli", "optimize", *job.optimize_args,
                                               "--output-dir", str(output_dir)],
                      cwd=job.cwd, output_dir=str(output_dir), stdout_path=str(jobs_dir / f"{job.job_id}.json"),
                      stderr_path=str(jobs_dir / f"{job.job_id}.log"), needs_gpu=job.needs_gpu, attempt=attempt)


def move_aside(command: JobCommand) -> str | None:
    """Move an earlier attempt's output dir, JSON and log to `<job_id>.attempt-<n>`; the name used, if any."""
    outputs = [Path(command.output_dir), Path(command.stdout_path), Path(command.stderr_path)]
    present = [path for path in outputs if path.exists()]
    if not present:
        return None
    jobs_dir = Path(command.output_dir).parent
    taken = {entry.name.removesuffix(".json").removesuffix(".log") for entry in jobs_dir.iterdir()}
    name = aside_name(command.job_id, command.attempt - 1, taken)
    for path in present:
        path.rename(jobs_dir / (name + path.name.removeprefix(command.job_id)))
    return name


def _log_tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def read_outcome(command: JobCommand, exit_code: int, wall_seconds: float, gpu: str | None) -> JobOutcome:
    document = parse_document(_read_text(Path(command.stdout_path)))
    result_speedup = aggregate_speedup(parse_document(_read_text(Path(command.output_dir) / "result.json")))
    status, speedup, error = interpret(exit_code, document, _log_tail(Path(command.stderr_path)), result_speedup)
    return JobOutcome(status=status, exit_code=exit_code, speedup=speedup, error=error,
                      wall_seconds=round(wall_seconds, 3), gpu=gpu, node=socket.gethostname())


async def _interrupt_then_kill(process: trio.Process) -> None:
    process.send_signal(signal.SIGINT)
    with trio.move_on_after(INTERRUPT_GRACE_SECONDS):
        await process.wait()
    process.kill()


def job_environment(base: Mapping[str, str], visible_devices: str | None) -> dict[str, str]:
    """The job's environment: CUDA_VISIBLE_DEVICES pinned when given ("" hides every GPU from a CPU job)."""
    environment = dict(base)
    if visible_devices is not None:
        environment["CUDA_VISIBLE_DEVICES"] = visible_devices
    return environment


async def run_job(command: JobCommand, visible_devices: str | None) -> JobOutcome:
    """Run the job to its end and read what it left. `visible_devices`: None keeps this process's
    CUDA_VISIBLE_DEVICES (a Dask GPU worker pinned at start); the gpu recorded is what the job saw."""
    move_aside(command)
    Path(command.output_dir).parent.mkdir(parents=True, exist_ok=True)
    environment = job_environment(os.environ, visible_devices)
    gpu = environment.get("CUDA_VISIBLE_DEVICES") if command.needs_gpu else None
    started = trio.current_time()
    try:
        with open(command.stdout_path, "wb") as stdout, open(command.stderr_path, "wb") as stderr:
            process = await trio.run_process([sys.executable, *command.args], stdin=b"", stdout=stdout,
                                             stderr=stderr, cwd=command.cwd, env=environment, check=False,
                                             deliver_cancel=_interrupt_then_kill)
    except OSError as exc:  # the job could not start (its folder vanished, no file descriptors): its failure
        return JobOutcome(status=JobStatus.FAILED, exit_code=None, error=one_line(f"could not start: {exc}"),
                          wall_seconds=round(trio.current_time() - started, 3), gpu=gpu, node=socket.gethostname())
    return read_outcome(command, process.returncode, trio.current_time() - started, gpu)


def run_job_blocking(command: JobCommand, visible_devices: str | None = None) -> dict:
    """A Dask task: run the job on this node and return its outcome as plain data."""
    return trio.run(run_job, command, visible_devices).model_dump(mode="json")
