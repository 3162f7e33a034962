"""The batch's decisions, as pure functions: which job goes to which free slot, what a job's exit code means,
what the batch exits with, and which jobs a `--resume` runs again.

Nothing here touches a file or a process, so every rule is unit-tested directly (tests/batch/test_policy.py).
"""

from __future__ import annotations

import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from protocol.batch import BatchExitCode, JobStatus, JobSummary
from protocol.outcome import ExitCode

# optimize's exit codes that name an outcome; anything else (1, 130, a signal) is a failure
STATUS_BY_EXIT_CODE = {
    ExitCode.OK: JobStatus.IMPROVED,
    ExitCode.NO_WINNER: JobStatus.NO_IMPROVEMENT,
    ExitCode.COMMIT_FAILED: JobStatus.COMMIT_FAILED,
}


@dataclass(frozen=True)
class Slot:
    """A place one job runs at a time: a GPU index (pinned with CUDA_VISIBLE_DEVICES) or a CPU lane."""

    name: str  # "gpu0" or "cpu0"
    gpu: str | None = None

    @property
    def is_gpu(self) -> bool:
        return self.gpu is not None


@dataclass(frozen=True)
class QueuedJob:
    job_id: str
    needs_gpu: bool


@dataclass(frozen=True)
class Placement:
    """The result of one scheduling step: jobs started now, jobs still waiting, slots still free."""

    assignments: tuple[tuple[QueuedJob, Slot], ...]
    waiting: tuple[QueuedJob, ...]
    free: tuple[Slot, ...]


def batch_slots(gpus: Sequence[str], parallel: int | None) -> tuple[Slot, ...]:
    """One slot per GPU (at most `parallel` of them when given), plus `parallel` CPU lanes (default 1).

    CPU lanes exist on a GPU machine too: a job whose target is the CPU interpreter must not hold a GPU.
    """
    if parallel is not None and parallel < 1:
        raise ValueError(f"--parallel must be at least 1, got {parallel}")
    gpu_slots = [Slot(f"gpu{gpu}", gpu) for gpu in gpus][: parallel or None]
    cpu_slots = [Slot(f"cpu{lane}") for lane in range(parallel or 1)]
    return (*gpu_slots, *cpu_slots)


def schedule(waiting: Sequence[QueuedJob], free: Sequence[Slot]) -> Placement:
    """Place waiting jobs, in manifest order, on free slots of their kind (a GPU job on a GPU, a CPU job on a
    CPU lane). A job that cannot be placed now does not hold back later jobs of the other kind."""
    free_left = list(free)
    assignments: list[tuple[QueuedJob, Slot]] = []
    still_waiting: list[QueuedJob] = []
    for job in waiting:
        slot = next((s for s in free_left if s.is_gpu == job.needs_gpu), None)
        if slot is None:
            still_waiting.append(job)
            continue
        free_left.remove(slot)
        assignments.append((job, slot))
    return Placement(tuple(assignments), tuple(still_waiting), tuple(free_left))


def unplaceable(jobs: Iterable[QueuedJob], slots: Sequence[Slot]) -> list[QueuedJob]:
    """Jobs no slot could ever run: a GPU job when the batch has no GPU."""
    has_gpu = any(slot.is_gpu for slot in slots)
    return [job for job in jobs if job.needs_gpu and not has_gpu]


def job_status(exit_code: int, result_readable: bool) -> JobStatus:
    """optimize's exit code as a job status; an outcome code whose JSON cannot be read is a failure."""
    status = STATUS_BY_EXIT_CODE.get(exit_code, JobStatus.FAILED)  # type: ignore[call-overload]
    return status if result_readable else JobStatus.FAILED


def exit_description(exit_code: int) -> str:
    """'exit 1' or 'killed by signal SIGABRT' (a negative code is a signal, as subprocess and trio report it)."""
    if exit_code >= 0:
        return f"exit {exit_code}"
    try:
        return f"killed by signal {signal.Signals(-exit_code).name}"
    except ValueError:
        return f"killed by signal {-exit_code}"


def progress_line(jobs: Sequence[JobSummary]) -> str:
    """The terminal's progress line: how many jobs are done and how they ended, and which run where."""
    done = [job for job in jobs if job.status.finished]
    counts = " ".join(f"{status.value}={n}" for status in JobStatus
                      if status.finished and (n := sum(job.status is status for job in done)))
    running = ", ".join(f"{job.job_id}@{job.gpu if job.gpu else job.node or 'cpu'}" for job in jobs
                        if job.status is JobStatus.RUNNING)
    return (f"batch {len(done)}/{len(jobs)} done" + (f" ({counts})" if counts else "")
            + (f"; running {running}" if running else ""))


def batch_exit_code(statuses: Iterable[JobStatus]) -> BatchExitCode:
    """0 every job improved, 2 none did, 5 some did. Called once every job has finished."""
    improved = [status == JobStatus.IMPROVED for status in statuses]
    if improved and all(improved):
        return BatchExitCode.ALL_IMPROVED
    return BatchExitCode.SOME_IMPROVED if any(improved) else BatchExitCode.NONE_IMPROVED


def is_kept_on_resume(previous: JobSummary | None, recorded_exit_code: int | None) -> bool:
    """A job is not run again when batch.json says it finished and its job JSON shows the same exit code.

    `recorded_exit_code` is the `exit_code` of DIR/jobs/<job_id>.json (None: missing or unreadable). A job
    that was running or pending, was interrupted (130), or was killed by a signal (no JSON) runs again.
    """
    if previous is None or not previous.status.finished or previous.exit_code is None:
        return False
    if previous.exit_code == ExitCode.INTERRUPTED:
        return False
    return recorded_exit_code == previous.exit_code


def aside_name(job_id: str, attempt: int, taken: Iterable[str]) -> str:
    """Where an earlier attempt's output goes: `<job_id>.attempt-<n>`, n the attempt it came from (at least
    1), or the next free number when that name is taken (a task Dask ran twice)."""
    taken_names = set(taken)
    number = max(attempt, 1)
    while f"{job_id}.attempt-{number}" in taken_names:
        number += 1
    return f"{job_id}.attempt-{number}"
