"""The batch's pure decisions: slots, placement, job status, the batch's exit code, what a resume keeps."""

from __future__ import annotations

import io

import pytest

from orchestrator.batch.outcome import interpret
from orchestrator.batch.policy import (
    QueuedJob,
    Slot,
    aside_name,
    batch_exit_code,
    batch_slots,
    is_kept_on_resume,
    job_status,
    progress_line,
    schedule,
    unplaceable,
)
from orchestrator.ledger.live_log import LiveLog
from protocol.batch import BatchExitCode, JobStatus, JobSummary

GPU0, GPU1, CPU0 = Slot("gpu0", "0"), Slot("gpu1", "1"), Slot("cpu0")


def gpu_job(job_id: str) -> QueuedJob:
    return QueuedJob(job_id, needs_gpu=True)


def cpu_job(job_id: str) -> QueuedJob:
    return QueuedJob(job_id, needs_gpu=False)


def test_slots_are_one_per_gpu_plus_cpu_lanes():
    assert batch_slots(["0", "1"], None) == (GPU0, GPU1, CPU0)
    assert batch_slots([], 3) == (CPU0, Slot("cpu1"), Slot("cpu2"))
    assert batch_slots(["0", "1", "2"], 2) == (GPU0, GPU1, CPU0, Slot("cpu1"))  # --parallel caps the GPUs too
    with pytest.raises(ValueError, match="at least 1"):
        batch_slots([], 0)


def test_jobs_take_free_slots_of_their_kind_in_manifest_order():
    placement = schedule([gpu_job("a"), gpu_job("b"), cpu_job("c"), gpu_job("d")], [GPU0, CPU0, GPU1])
    assert [(job.job_id, slot.name) for job, slot in placement.assignments] == [("a", "gpu0"), ("b", "gpu1"),
                                                                               ("c", "cpu0")]
    assert [job.job_id for job in placement.waiting] == ["d"]
    assert placement.free == ()


def test_a_waiting_gpu_job_does_not_hold_back_a_cpu_job():
    placement = schedule([gpu_job("a"), cpu_job("b")], [CPU0])
    assert [(job.job_id, slot.name) for job, slot in placement.assignments] == [("b", "cpu0")]
    assert [job.job_id for job in placement.waiting] == ["a"]


def test_never_two_jobs_on_one_gpu():
    """Replaying a whole batch through `schedule`: every GPU holds at most one job at any time."""
    waiting = tuple(gpu_job(f"j{i}") for i in range(7))
    free: tuple[Slot, ...] = (GPU0, GPU1)
    running: dict[str, Slot] = {}
    finished = []
    while waiting or running:
        placement = schedule(waiting, free)
        for job, slot in placement.assignments:
            assert slot not in running.values()
            running[job.job_id] = slot
        waiting, free = placement.waiting, placement.free
        done = min(running)  # the job that ends next
        free = (*free, running.pop(done))
        finished.append(done)
    assert sorted(finished) == [f"j{i}" for i in range(7)]


def test_gpu_jobs_without_a_gpu_are_unplaceable():
    assert unplaceable([gpu_job("a"), cpu_job("b")], [CPU0]) == [gpu_job("a")]
    assert unplaceable([gpu_job("a")], [GPU0, CPU0]) == []


@pytest.mark.parametrize(("exit_code", "readable", "status"), [
    (0, True, JobStatus.IMPROVED), (2, True, JobStatus.NO_IMPROVEMENT), (3, True, JobStatus.COMMIT_FAILED),
    (1, True, JobStatus.FAILED), (130, True, JobStatus.FAILED), (-6, False, JobStatus.FAILED),
    (0, False, JobStatus.FAILED),  # exit 0 but nothing readable on stdout
])
def test_job_status_from_exit_code(exit_code, readable, status):
    assert job_status(exit_code, readable) == status


@pytest.mark.parametrize(("statuses", "code"), [
    ([JobStatus.IMPROVED, JobStatus.IMPROVED], BatchExitCode.ALL_IMPROVED),
    ([JobStatus.NO_IMPROVEMENT, JobStatus.FAILED], BatchExitCode.NONE_IMPROVED),
    ([JobStatus.IMPROVED, JobStatus.FAILED], BatchExitCode.SOME_IMPROVED),
    ([JobStatus.IMPROVED, JobStatus.COMMIT_FAILED], BatchExitCode.SOME_IMPROVED),
])
def test_batch_exit_code(statuses, code):
    assert batch_exit_code(statuses) == code
    assert int(code) in (0, 2, 5)  # protocol.outcome.ExitCode: OK, NO_WINNER, SOME_IMPROVED


def _summary(status: JobStatus, exit_code: int | None) -> JobSummary:
    return JobSummary(job_id="a", kernel="k.py", output_dir="/out/jobs/a", status=status, exit_code=exit_code,
                      attempts=1)


@pytest.mark.parametrize(("previous", "recorded", "kept"), [
    (_summary(JobStatus.IMPROVED, 0), 0, True),
    (_summary(JobStatus.FAILED, 1), 1, True),  # a job that failed for its own reasons is not retried
    (_summary(JobStatus.IMPROVED, 0), None, False),  # its JSON is gone or truncated
    (_summary(JobStatus.IMPROVED, 0), 2, False),  # its JSON says something else
    (_summary(JobStatus.RUNNING, None), None, False),
    (_summary(JobStatus.PENDING, None), None, False),
    (_summary(JobStatus.FAILED, 130), 130, False),  # interrupted: run it again
    (_summary(JobStatus.FAILED, -9), None, False),  # killed by a signal: no JSON, run it again
    (None, 0, False),  # a job new in the manifest
])
def test_what_a_resume_keeps(previous, recorded, kept):
    assert is_kept_on_resume(previous, recorded) is kept


def test_aside_names_count_attempts_and_skip_taken_ones():
    assert aside_name("a", 1, []) == "a.attempt-1"
    assert aside_name("a", 2, ["a.attempt-2"]) == "a.attempt-3"
    assert aside_name("a", 0, []) == "a.attempt-1"


def test_a_failed_job_gets_one_line_from_its_document_or_its_log():
    status, speedup, error = interpret(1, {"success": False, "exit_code": 1, "error": "baseline failed:\nboom"}, "")
    assert (status, speedup, error) == (JobStatus.FAILED, None, "exit 1: baseline failed: boom")
    status, _, error = interpret(-6, None, "[tlx-agent] baseline status=evaluating\nFatal Python error: Aborted\n")
    assert (status, error) == (JobStatus.FAILED, "killed by signal SIGABRT: Fatal Python error: Aborted")
    status, _, error = interpret(0, None, "")
    assert (status, error) == (JobStatus.FAILED, "exit 0, its result JSON unreadable: no output")
    status, speedup, error = interpret(0, {"exit_code": 0, "report": {"aggregate_speedup": 1.5}}, "")
    assert (status, speedup, error) == (JobStatus.IMPROVED, 1.5, None)
    # the stdout document lacks a speedup: the run's result.json has it
    assert interpret(2, {"exit_code": 2}, "", result_speedup=1.0)[1] == 1.0


def _summary(job_id: str, status: JobStatus, gpu: str | None = None) -> JobSummary:
    return JobSummary(job_id=job_id, kernel=f"{job_id}.py", output_dir=f"/out/jobs/{job_id}", status=status, gpu=gpu)


def test_the_progress_line_counts_how_jobs_ended_and_names_where_each_runs():
    jobs = [_summary("va", JobStatus.IMPROVED), _summary("sm", JobStatus.FAILED), _summary("mm", JobStatus.RUNNING, "1"),
            _summary("ln", JobStatus.RUNNING), _summary("gemm", JobStatus.PENDING)]
    assert progress_line(jobs) == "batch 2/5 done (improved=1 failed=1); running mm@1, ln@cpu"
    assert progress_line([_summary("va", JobStatus.PENDING)]) == "batch 0/1 done"


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as stderr does in an interactive shell."""

    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_progress_line_stays_below_the_job_lines_and_leaves_with_the_batch():
    terminal = Terminal()
    live = LiveLog(terminal)
    live.event("batch job=va status=running attempt=1 gpu=0 node=None")
    live.progress(progress_line([_summary("va", JobStatus.RUNNING, "0")]))
    live.event("batch job=va status=improved exit_code=0 speedup=3.0700x")
    live.progress(progress_line([_summary("va", JobStatus.IMPROVED, "0")]))
    live.close()
    shown = terminal.getvalue()
    assert shown.count("[tlx-agent] batch 0/1 done; running va@0") == 2  # drawn, then redrawn under the next line
    assert shown.index("status=improved") > shown.index("running va@0")
    assert shown.endswith("[tlx-agent] batch 1/1 done (improved=1)\r\x1b[K")  # erased when the batch ends
