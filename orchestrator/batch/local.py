"""The default engine: jobs run as subprocesses of this machine, one per slot (a GPU, or a CPU lane).

A trio nursery owns every running job; `policy.schedule` decides which waiting job takes a freed slot. One
job at a time per GPU keeps its timed evaluations exclusive there (optimize itself times one worker at a
time). Cancelling the batch (Ctrl-C, SIGTERM) interrupts the running jobs and waits for them; their
records stay `running`, so a `--resume` runs them again.
"""

from __future__ import annotations

import math
import signal
import socket
from collections.abc import Sequence
from pathlib import Path

import trio

from orchestrator.batch.job import job_command, run_job
from orchestrator.batch.ledger import BatchLedger
from orchestrator.batch.manifest import ResolvedJob
from orchestrator.batch.policy import QueuedJob, Slot, schedule


async def _run_in_slot(job: ResolvedJob, slot: Slot, jobs_dir: Path, ledger: BatchLedger,
                       freed: trio.MemorySendChannel[Slot]) -> None:
    attempt = ledger.started(job.job_id, slot.gpu, socket.gethostname())
    # A CPU lane hides the GPUs, so a CPU job cannot disturb the timing of a job that owns one.
    outcome = await run_job(job_command(job, jobs_dir, attempt), slot.gpu if slot.is_gpu else "")
    ledger.finished(job.job_id, **outcome.model_dump())
    await freed.send(slot)


async def run_local(jobs: Sequence[ResolvedJob], slots: Sequence[Slot], jobs_dir: Path, ledger: BatchLedger) -> None:
    """Run `jobs` (each placeable on some slot) to their ends, at most one per slot at any time."""
    by_id = {job.job_id: job for job in jobs}
    waiting = tuple(QueuedJob(job.job_id, job.needs_gpu) for job in jobs)
    free = tuple(slots)
    running = 0
    freed_send, freed_receive = trio.open_memory_channel[Slot](math.inf)
    async with trio.open_nursery() as nursery:
        while True:
            placement = schedule(waiting, free)
            for queued, slot in placement.assignments:
                nursery.start_soon(_run_in_slot, by_id[queued.job_id], slot, jobs_dir, ledger, freed_send)
            running += len(placement.assignments)
            waiting, free = placement.waiting, placement.free
            if running == 0:
                return
            free = (*free, await freed_receive.receive())
            running -= 1


async def run_local_until_signal(jobs: Sequence[ResolvedJob], slots: Sequence[Slot], jobs_dir: Path,
                                 ledger: BatchLedger) -> bool:
    """`run_local`, cancelled by SIGTERM or SIGHUP as Ctrl-C would: True when every job ran to its end."""
    async with trio.open_nursery() as nursery:

        async def cancel_on_signal() -> None:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    return

        nursery.start_soon(cancel_on_signal)
        await run_local(jobs, slots, jobs_dir, ledger)
        nursery.cancel_scope.cancel()  # stop the signal watcher
        return True
    return False
