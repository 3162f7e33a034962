"""Which engine runs a batch's unfinished jobs: Dask when asked, else local slots, a GPU job the slots cannot
place failing at once with the reason (the ledger records each start and end, whichever engine runs them)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.batch.ledger import BatchLedger
from orchestrator.batch.manifest import ResolvedJob
from orchestrator.batch.policy import QueuedJob, batch_slots, unplaceable
from protocol.batch import JobStatus


def run_unfinished(jobs: list[ResolvedJob], jobs_dir: Path, ledger: BatchLedger, *, engine: str,
                   scheduler: str | None, gpus: list[str], parallel: int | None) -> bool:
    """Run the jobs the ledger has not finished; False when the batch was interrupted."""
    todo = [job for job in jobs if not ledger.job(job.job_id).status.finished]
    if engine == "dask":
        from orchestrator.batch.dask_engine import run_dask

        run_dask(todo, jobs_dir, ledger, scheduler)
        return True
    import trio

    from orchestrator.batch.local import run_local_until_signal

    slots = batch_slots(gpus, parallel)
    stuck = {job.job_id for job in unplaceable((QueuedJob(j.job_id, j.needs_gpu) for j in todo), slots)}
    for job_id in stuck:
        ledger.started(job_id, None, None)
        ledger.finished(job_id, status=JobStatus.FAILED,
                        error="its target needs a GPU and the batch has none (--gpus, or a GPU machine)")
    ledger.note(f"batch slots={','.join(slot.name for slot in slots)} jobs_to_run={len(todo) - len(stuck)}")
    return trio.run(run_local_until_signal, [job for job in todo if job.job_id not in stuck], slots, jobs_dir, ledger)
