"""The trusted autotune step, and first-call measurements.

A kernel that carries `@triton.autotune` with more than one configuration would autotune again in every
worker (each starts with a fresh process and a fresh Triton cache), minutes per worker for a large list. So,
once per run and before any candidate, one worker runs the untouched kernel (the user's code; no candidate
code ever runs there, and no judge is forked) and lets its autotune run on every case (`autotune`: every case
through the harness's verify; on a GPU each key's list is compiled on threads before it is timed). Its choices
per key are the run's; every later worker pins them (`sandbox_worker/autotune_guard.py`). Progress reaches the
live log as it happens, and at least every `HEARTBEAT_SECONDS` when a compile or a configuration takes long.

Then `first_call`, in a fresh worker of its own (empty Triton cache, Triton compiling one configuration at a
time), measures the latency a user's fresh process pays on its first call, within what is left of the step's
deadline and at most `MAX_FIRST_CALL_SECONDS`. It is a figure for the report and decides nothing, so a first
call stopped at that limit is recorded as "longer than the time it had", and the step's choices stand. The winner's first call is measured the same way.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import trio

from orchestrator.autotune.detect import autotuned_kernels
from orchestrator.autotune.lines import choice_line, first_call_line, progress_line, quiet_line
from orchestrator.bundle.arch import interpreter_requested
from orchestrator.ledger.artifacts import write_json
from orchestrator.ledger.live_log import LiveLog, quote
from orchestrator.worker.autotune_phase import ProgressSink
from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation, sandbox_for
from orchestrator.worker.process import Spawner
from protocol.autotune import AutotuneRecord, AutotuneSetup, FirstCall
from protocol.bundle import Case, Target
from protocol.results import Evaluation, EvaluationStatus
from protocol.worker import AutotuneCommand, FirstCallCommand, IsolationConfig

MIN_FIRST_CALL_SECONDS = 5.0  # less left of the step's deadline: the untouched first call is not measured
# the untouched first call's own limit: a longer one is reported as longer than this (it decides nothing, and a
# 96-configuration list's first call compiles for minutes that the run's candidates can use better)
MAX_FIRST_CALL_SECONDS = 60.0


class AutotuneStepFailed(Exception):
    """The untouched kernel's autotune could not be run once for the run; the message says why and what to do."""


@dataclass
class StepWorkers:
    """How the step's workers start: as every worker of the run (or of the preflight) does."""

    run_id: str
    harness_path: Path  # the frozen harness
    target: Target
    cases: list[Case]
    work_root: Path
    log: LiveLog
    spawner: Spawner
    parent_env: dict[str, str]
    isolation: Literal["strict", "standard", "off"]
    worker_python: str
    data_limit_bytes: int | None
    seconds: float  # the step's whole deadline (budget `max_autotune_seconds`)

    def timer(self) -> Literal["triton", "interpreter_cpu"]:
        return "interpreter_cpu" if interpreter_requested(self.target) else "triton"

    def plan(self, tag: str, kernel_path: Path, commands: list[AutotuneCommand | FirstCallCommand],
             progress: ProgressSink, seconds: float) -> EvaluationPlan:
        work_dir = self.work_root / "workers" / tag
        isolation: IsolationConfig = sandbox_for(self.isolation, work_dir, None, data_limit_bytes=self.data_limit_bytes,
                                                 phase_seconds=seconds)
        # the kernel's own process: no judge (the untouched kernel is the user's; a winner's first call is a
        # measurement of latency, never a verdict)
        target = self.target.model_copy(update={"verdict_process": "candidate"})
        return EvaluationPlan(
            label=tag, experiment_id=tag, run_id=self.run_id, kernel_path=kernel_path, harness_path=self.harness_path,
            target=target, cases=self.cases, repetitions=1, work_dir=work_dir,
            log_path=self.work_root / f"worker-{tag}.log", deadline=trio.current_time() + seconds,
            phase_seconds=seconds, isolation=isolation, worker_python=self.worker_python, benchmark=False,
            autotune=AutotuneSetup(mode="tune"), trusted=commands, progress=progress, timer=self.timer())


def _progress(log: LiveLog) -> ProgressSink:
    started = time.monotonic()
    return ProgressSink(on_event=lambda event: log.event(progress_line(event, time.monotonic() - started)),
                        on_quiet=lambda last, seconds: log.event(quiet_line(last, seconds)))


async def run_step(workers: StepWorkers, kernel_source: str) -> AutotuneRecord | None:
    """The untouched kernel's autotune, once per key; None when its source declares no list to choose from."""
    kernels = autotuned_kernels(kernel_source)
    if not kernels:
        return None
    log = workers.log
    log.event(f"autotune status=starting kernels={','.join(kernels)} cases={len(workers.cases)} "
              f"timer={workers.timer()} deadline_s={workers.seconds:g} (the untouched kernel's own autotune, once per "
              "key, in a worker that runs no candidate; every later worker pins its choice)")
    workers.work_root.mkdir(parents=True, exist_ok=True)
    kernel_path = workers.work_root / "kernel.py"
    kernel_path.write_text(kernel_source, encoding="utf-8")
    cases = [case.model_dump() for case in workers.cases]
    commands: list[AutotuneCommand | FirstCallCommand] = [
        AutotuneCommand(command_id=0, cases=cases, seed=secrets.randbits(64))]
    started = time.monotonic()
    evaluation = await run_evaluation(workers.plan("autotune", kernel_path, commands, _progress(log), workers.seconds),
                                      workers.spawner, workers.parent_env)
    write_json(workers.work_root / "result.json", evaluation)
    if evaluation.status is not EvaluationStatus.OK:
        raise AutotuneStepFailed(_failure(evaluation, workers))
    record = AutotuneRecord(kernels=kernels, choices=evaluation.autotune_choices or [],
                            seconds=time.monotonic() - started)
    for choice in record.choices:
        log.event(choice_line(choice))
    if not record.choices:
        log.event("autotune status=nothing_chosen (every call's list was pruned to one configuration)")
    left = workers.seconds - (time.monotonic() - started)
    if left < MIN_FIRST_CALL_SECONDS:
        why = f"not measured: {max(left, 0.0):.1f} s of the step's {workers.seconds:g} s were left after its autotune"
        log.event(f"first_call kernel=untouched status=skipped reason={quote(why)}")
        record.untouched_first_call_unmeasured = why
    else:
        limit = min(left, MAX_FIRST_CALL_SECONDS)
        first, why = await measure_first_call(workers, kernel_path, "untouched", seconds=limit)
        record.untouched_first_call = first
        record.untouched_first_call_unmeasured = unmeasured_reason(why, limit) if first is None else None
    log.event(f"autotune status=done choices={len(record.choices)} seconds={record.seconds:.1f}")
    return record


def unmeasured_reason(why: str, seconds: float) -> str:
    """What the report says of an untouched first call that has no figure: one the step's deadline cut is
    longer than the time it had (a user's fresh process pays at least that)."""
    if why.startswith(EvaluationStatus.TIMEOUT.value):
        return (f"longer than {seconds:.1f} s: stopped at the limit of its measurement (a fresh process pays at "
                "least that)")
    return f"failed: {why}"


def _failure(evaluation: Evaluation, workers: StepWorkers) -> str:
    advice = (f"raise --max-autotune-seconds (now {workers.seconds:g}) or give the kernel fewer configurations"
              if evaluation.status is EvaluationStatus.TIMEOUT else "fix the kernel or the bundle")
    return (f"the untouched kernel's autotune step failed: {evaluation.status.value}: {evaluation.reason}; {advice} "
            f"(worker log: {evaluation.worker.log_path})")


async def measure_first_call(workers: StepWorkers, kernel_path: Path, tag: str,
                             seconds: float | None = None) -> tuple[FirstCall | None, str]:
    """One fresh worker that loads `kernel_path` and calls it once on the first case, within `seconds` (the
    step's deadline by default); (None, why) on failure, `why` starting with the evaluation's status."""
    command = FirstCallCommand(command_id=0, case=workers.cases[0].model_dump(), seed=secrets.randbits(64))
    evaluation = await run_evaluation(workers.plan(tag, kernel_path, [command], _progress(workers.log),
                                                   seconds or workers.seconds), workers.spawner, workers.parent_env)
    write_json(workers.work_root / f"{tag}.json", evaluation)
    if evaluation.status is not EvaluationStatus.OK or evaluation.first_call is None:
        why = f"{evaluation.status.value}: {evaluation.reason}"
        workers.log.event(f"first_call kernel={tag} status=failed reason={quote(why)}")
        return None, why
    workers.log.event(first_call_line(tag, evaluation.first_call))
    return evaluation.first_call, ""
