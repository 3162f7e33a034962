"""The distributed engine: each job is one Dask task that runs the same job subprocess on a cluster node.

Jobs, not evaluations, are what travel: a task runs `python -m orchestrator.cli optimize` on its node,
writing into the output directory path it is given (a file system every node shares) and returns the
JobSummary fields. GPU exclusivity comes from Dask worker resources: start one worker per GPU, pinned with
CUDA_VISIBLE_DEVICES and declared with `--resources GPU=1`; a job whose target is not the CPU asks for
GPU=1, so at most one such job runs per GPU worker. The batch process stays the only writer of batch.json:
a task announces its start and end as Dask events, and the client loop below records them.
"""

from __future__ import annotations

import os
import queue
import socket
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distributed import Client, Future, get_worker, wait

from orchestrator.batch.job import JobCommand, job_command, run_job_blocking
from orchestrator.batch.ledger import BatchLedger
from orchestrator.batch.manifest import ResolvedJob
from orchestrator.batch.outcome import JobOutcome, one_line
from protocol.batch import JobStatus

TOPIC = "tlx-agent-batch"
POLL_SECONDS = 1.0  # how often the client loop records events while no task finishes
CONNECT_SECONDS = 30.0
GPU_RESOURCE = "GPU"


def job_task(command_data: dict[str, Any], batch_token: str) -> dict[str, Any]:
    """Runs on a Dask worker. A GPU job keeps the worker's pinned CUDA_VISIBLE_DEVICES; a CPU job sees none.

    It announces its start and its end as events: one worker's events reach the client in order, so the end
    of one GPU job is recorded before the start of the next on that GPU (the task's return value, which
    travels apart, only fills in an end event that never came).
    """
    command = JobCommand.model_validate(command_data)
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES") if command.needs_gpu else None
    worker = get_worker()
    worker.log_event(TOPIC, {"batch": batch_token, "job_id": command.job_id, "event": "started", "gpu": gpu,
                             "node": socket.gethostname()})
    outcome = run_job_blocking(command, None if command.needs_gpu else "")
    worker.log_event(TOPIC, {"batch": batch_token, "job_id": command.job_id, "event": "ended", "outcome": outcome})
    return outcome


def _gpu_workers(client: Client) -> int:
    workers = client.scheduler_info().get("workers", {}).values()
    return sum(1 for info in workers if (info.get("resources") or {}).get(GPU_RESOURCE, 0) >= 1)


def _record_outcome(job_id: str, outcome: JobOutcome, ledger: BatchLedger) -> None:
    if ledger.job(job_id).status != JobStatus.RUNNING:  # its start event was lost: the outcome says where
        ledger.started(job_id, outcome.gpu, outcome.node)
    ledger.finished(job_id, **outcome.model_dump())


def _record_events(events: queue.SimpleQueue, ledger: BatchLedger, batch_token: str) -> None:
    while True:
        try:
            _, message = events.get_nowait()
        except queue.Empty:
            return
        if message.get("batch") != batch_token:  # the topic is cluster-wide: another batch's job
            continue
        job_id = message["job_id"]
        if ledger.job(job_id).status.finished:  # a late event of a job already recorded from its result
            continue
        if message["event"] == "started":  # again after a lost worker: Dask retries, attempts counts it
            ledger.started(job_id, message.get("gpu"), message.get("node"))
        else:
            _record_outcome(job_id, JobOutcome.model_validate(message["outcome"]), ledger)


def _record_result(future: Future, job_id: str, ledger: BatchLedger) -> None:
    """A finished task whose end event has not arrived: its return value, or its exception, is the end."""
    if ledger.job(job_id).status.finished:
        return
    try:
        outcome = JobOutcome.model_validate(future.result())
    except Exception as exc:  # noqa: BLE001 - a task that raised, or a worker lost: that job's failure
        if ledger.job(job_id).status != JobStatus.RUNNING:
            ledger.started(job_id, None, None)
        ledger.finished(job_id, status=JobStatus.FAILED, exit_code=None,
                        error=one_line(f"dask task failed: {type(exc).__name__}: {exc}"))
        return
    _record_outcome(job_id, outcome, ledger)


def run_dask(jobs: Sequence[ResolvedJob], jobs_dir: Path, ledger: BatchLedger, address: str) -> None:
    """Submit every job to the cluster at `address` and record each start and end as it happens."""
    events: queue.SimpleQueue = queue.SimpleQueue()
    with Client(address, timeout=CONNECT_SECONDS) as client:
        client.subscribe_topic(TOPIC, events.put)
        has_gpu = _gpu_workers(client) > 0
        futures: dict[Future, str] = {}
        batch_token = uuid.uuid4().hex[:8]  # keys and events are cluster-wide: other batches use the same ids
        for job in jobs:
            if job.needs_gpu and not has_gpu:
                ledger.started(job.job_id, None, None)
                ledger.finished(job.job_id, status=JobStatus.FAILED, error=(
                    "needs a GPU and no Dask worker offers one: start GPU workers with --resources GPU=1"))
                continue
            command = job_command(job, jobs_dir, ledger.job(job.job_id).attempts + 1)
            future = client.submit(job_task, command.model_dump(mode="json"), batch_token, pure=False,
                                   key=f"tlx-batch-{job.job_id}-{command.attempt}-{batch_token}",
                                   resources={GPU_RESOURCE: 1} if job.needs_gpu else None)
            futures[future] = job.job_id
        pending = set(futures)
        while pending:
            try:
                done, pending = wait(pending, timeout=POLL_SECONDS, return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            _record_events(events, ledger, batch_token)
            for future in done:
                _record_result(future, futures[future], ledger)
