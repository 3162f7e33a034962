"""One evaluation = one fresh worker: setup -> build -> verify every case -> benchmark -> profile (or screen).
Long because: every phase shares one session, its deadlines and its failure-to-status mapping.

Every phase has its own deadline inside the evaluation's deadline; whatever happens, the evaluation
ends in exactly one `EvaluationStatus` with a one-line reason, and the worker's whole process tree is
gone before this function returns.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import trio

from orchestrator.decision.statistics import sample_stats
from orchestrator.text import one_line
from orchestrator.worker.autotune_phase import (
    PhaseTimedOut,
    ProgressSink,
    blank_cases,
    call_with_progress,
    take_reply,
)
from orchestrator.worker.environment import build_worker_environment, make_scratch_dirs
from orchestrator.worker.launcher_store import LauncherStore
from orchestrator.worker.process import (
    OutputCapture,
    ProtocolViolation,
    Spawner,
    WorkerConnection,
    WorkerGone,
    WorkerLaunch,
)
from orchestrator.worker.process_tree import kill_tree
from protocol.autotune import AutotuneSetup, AutotuneTimer
from protocol.bundle import Case, Target
from protocol.profile import ProfileRequest
from protocol.results import CaseMeasurement, CommandSeed, Evaluation, EvaluationStatus
from protocol.worker import (
    AutotuneCommand,
    BenchmarkCommand,
    BenchmarkValue,
    BuildCommand,
    BuildValue,
    FailureEvent,
    FinishedEvent,
    FirstCallCommand,
    HelloEvent,
    IsolationConfig,
    ProfileCommand,
    ReadyEvent,
    ReplyEvent,
    ScreenCommand,
    ScreenValue,
    SetupCommand,
    ShutdownCommand,
    VerifyCommand,
    VerifyValue,
)

# An honest worker answers shutdown at once (it is waiting in recv), so a short window, granted even
# past a nearly spent deadline, is plenty; the same bound applies to the EOF that must follow `finished`.
SHUTDOWN_MIN_SECONDS, SHUTDOWN_MAX_SECONDS = 2.0, 5.0
RESOURCE_SIGNALS = {signal.SIGXCPU: "CPU time limit (RLIMIT_CPU)", signal.SIGXFSZ: "file size limit (RLIMIT_FSIZE)"}


@dataclass
class EvaluationPlan:
    label: str
    experiment_id: str
    run_id: str
    kernel_path: Path
    harness_path: Path
    target: Target
    cases: list[Case]
    repetitions: int
    work_dir: Path
    log_path: Path
    deadline: float  # absolute trio.current_time() by which everything must be over
    phase_seconds: float
    isolation: IsolationConfig | None = None
    worker_python: str = sys.executable
    benchmark: bool = True
    profile_request: Callable[[Case], ProfileRequest | None] | None = None
    # the run's time for the profiles (trio time; None: the evaluation's deadline): a case's profile that has not
    # finished by then, or that is not started because less is left than `profile_seconds` says it takes, is
    # not taken for the budget (`CaseMeasurement.profile_not_taken`) and the evaluation stands on its measurements
    profile_until: float | None = None
    profile_seconds: dict[str, float] = field(default_factory=dict)  # case id -> what its profile is expected to take
    seed: int = field(default_factory=lambda: secrets.randbits(64))  # names the evaluation; commands draw their own
    log_limit_bytes: int = 1 << 20
    environment: dict[str, str] | None = None
    screen: ScreenCommand | None = None  # screening: this one command instead of build/verify/benchmark
    # case id -> the timing mode the run fixed for it (its first measurement's, or the case's own); a case
    # not in it is measured with "auto" and its result says which mode that chose
    timing_modes: dict[str, str] = field(default_factory=dict)
    autotune: AutotuneSetup | None = None  # the worker's autotune guard: the run's pins, or the trusted step's
    # the trusted autotune step or a first-call measurement: these commands instead of build/verify/benchmark
    # (orchestrator/autotune/step.py), their progress to `progress` (autotune_phase.ProgressSink)
    trusted: list[AutotuneCommand | FirstCallCommand] | None = None
    progress: ProgressSink | None = None
    timer: AutotuneTimer = "triton"
    # the run's launchers (GPU runs): the judge's own builds this worker reports are kept for later workers
    launchers: LauncherStore | None = None


def sandbox_for(mode: Literal["strict", "standard", "off"], work_dir: Path, profile_dir: Path | None, *,
                data_limit_bytes: int | None, phase_seconds: float) -> IsolationConfig:
    """The isolation of one evaluation's worker, the same for a run's evaluations and the preflight's.

    The worker may write its scratch `work_dir` and, when it profiles, `profile_dir`. RLIMIT_CPU is a
    backstop behind the per-phase deadline (`phase_seconds`), so it is set well above it.
    """
    writable = [str(work_dir)] + ([str(profile_dir)] if profile_dir is not None else [])
    return IsolationConfig(mode=mode, scratch_dir=str(work_dir), writable_dirs=writable,
                           data_limit_bytes=data_limit_bytes, cpu_seconds=int(phase_seconds * 2) + 10)


class _Stop(Exception):
    """Ends the evaluation early with a status and reason."""

    def __init__(self, status: EvaluationStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class _BudgetCut(Exception):
    """A profile was still running when the run's time for it (`EvaluationPlan.profile_until`) ran out: the
    evaluation ends with what it measured, its worker is ended without a shutdown (it is busy profiling)."""


PROFILE_NOT_TAKEN_BUDGET = "budget"


def _failure_status(event: FailureEvent) -> EvaluationStatus | None:
    if event.category == "resource_limit":
        return EvaluationStatus.RESOURCE_LIMIT
    if event.category in ("sandbox_violation", "tamper"):
        return EvaluationStatus.SANDBOX_VIOLATION
    if event.category == "cheat":
        return EvaluationStatus.CHEAT_DETECTED
    if event.category == "crashed":
        return EvaluationStatus.CRASHED
    if event.category == "build":
        return EvaluationStatus.BUILD_FAILED
    return None


def _failure_reason(where: str, event: FailureEvent) -> str:
    """One line for a failure event: what was attempted or which limit was hit, else what was raised."""
    message = one_line(event.message, 300)
    if event.category in ("sandbox_violation", "tamper"):
        return f"{where}: sandbox violation: {message}"
    if event.category == "resource_limit":
        return f"{where}: resource limit: {message}"
    if event.category == "cheat":
        return f"{where}: cheat detected by the {message}"
    if event.category == "crashed":
        return f"{message} during {where}"
    if event.category == "build":
        return f"{where}: build failed: {event.error_type}: {message}"
    return f"{where} raised {event.error_type}: {message}"


def _ok_reason(evaluation: Evaluation) -> str:
    """The one-line reason of an `ok` evaluation: what was checked and measured, and which profiles the run's
    time did not allow."""
    cases = evaluation.cases
    parts = [f"{sum(1 for m in cases if m.correct)}/{len(cases)} case(s) correct"]
    parts.append(f"{sum(1 for m in cases if m.stats is not None)} benchmarked")
    profiled = sum(1 for m in cases if m.profile is not None)
    if profiled:
        parts.append(f"{profiled} profiled")
    not_taken = [m.case_id for m in cases if m.profile_not_taken]
    if not_taken:
        parts.append(f"profile not taken: budget ({', '.join(not_taken)}: the run's time ran out)")
    return ", ".join(parts)


def _no_time_to_profile(plan: EvaluationPlan, case_id: str) -> bool:
    """Less is left of the run's time for the profiles than this case's profile is expected to take (none at
    all when nothing is expected): it is not started, so the worker still shuts down cleanly."""
    if plan.profile_until is None:
        return False
    return plan.profile_until - trio.current_time() <= max(plan.profile_seconds.get(case_id, 0.0), 0.0)


def _exit_description(returncode: int | None) -> tuple[EvaluationStatus, str]:
    if returncode is None:
        return EvaluationStatus.CRASHED, "worker stopped answering"
    if returncode < 0:
        sig = -returncode
        if sig in RESOURCE_SIGNALS:
            return EvaluationStatus.RESOURCE_LIMIT, f"killed by {signal.Signals(sig).name}: {RESOURCE_SIGNALS[sig]}"
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return EvaluationStatus.CRASHED, f"killed by {name}"
    return EvaluationStatus.CRASHED, f"exited with code {returncode}"


class _Session:
    """The command/reply exchange of one evaluation, with per-phase deadlines."""

    def __init__(self, plan: EvaluationPlan, connection: WorkerConnection) -> None:
        self.plan = plan
        self.connection = connection
        self.next_command_id = 0
        self.seeds: list[CommandSeed] = []  # handed to the evaluation only once it is over
        # seconds spent in each phase (start: spawn to hello; setup: isolation, harness import, the judge's fork;
        # build, verify, benchmark, profile, screen; shutdown; teardown: ending the process tree)
        self.phases: dict[str, float] = {}
        self._phase, self._since = "start", trio.current_time()

    @property
    def phase(self) -> str:
        return self._phase

    @phase.setter
    def phase(self, value: str) -> None:
        self.close_phase()
        self._phase = value

    def close_phase(self) -> None:
        now = trio.current_time()
        self.phases[self._phase] = self.phases.get(self._phase, 0.0) + now - self._since
        self._since = now

    def _phase_deadline(self) -> float:
        return min(self.plan.deadline, trio.current_time() + self.plan.phase_seconds)

    async def expect(self, kinds: tuple[type, ...], what: str, budget: float | None = None) -> Any:
        """The next event; `budget`: the run's time for it, earlier than the phase's own deadline (`_BudgetCut`
        when it runs out first; the phase's deadline running out is the evaluation's timeout)."""
        phase_started = trio.current_time()
        phase_deadline = self._phase_deadline()
        cut_by_budget = budget is not None and budget <= phase_deadline
        with trio.move_on_at(budget if budget is not None and cut_by_budget else phase_deadline) as scope:
            event = await self.connection.receive_event()
        if scope.cancelled_caught:
            if cut_by_budget:
                raise _BudgetCut(f"{what} not finished after {trio.current_time() - phase_started:.1f} s, when the "
                                 "run's time for it ran out")
            limit = ("its phase limit" if phase_deadline < self.plan.deadline
                     else "the evaluation deadline (per-candidate or run budget)")
            raise _Stop(EvaluationStatus.TIMEOUT,
                        f"timed out in {what} after {trio.current_time() - phase_started:.1f} s ({limit})")
        if not isinstance(event, kinds):
            raise ProtocolViolation(f"unexpected {event.kind} event while waiting for {what}")
        return event

    async def call(self, command_type: type, what: str, budget: float | None = None,
                   **fields: Any) -> ReplyEvent | FailureEvent:
        self.next_command_id += 1
        command_id = self.next_command_id
        await self.connection.ensure_quiet(what)
        await self.connection.send(command_type(command_id=command_id, **fields))
        event = await self.expect((ReplyEvent, FailureEvent), what, budget)
        if event.command_id != command_id:
            raise ProtocolViolation(f"reply for command {event.command_id} while waiting for command {command_id}")
        return event

    def seed(self, case_id: str) -> int:
        """A command's seed: 64 bits from the operating system's CSPRNG, fresh per command, so no input set can be
        derived from anything a candidate read before its calls. The run records it after the evaluation, so the
        user can draw the same inputs again (`Evaluation.command_seeds`)."""
        value = secrets.randbits(64)
        self.seeds.append(CommandSeed(phase=self.phase, case_id=case_id, seed=value))
        return value


def _summarized(samples: list[float]) -> Any:
    """Statistics of benchmark samples (already bounded by `BenchmarkValue`); a failure is a violation."""
    try:
        return sample_stats(samples)
    except (ArithmeticError, ValueError) as exc:
        raise ProtocolViolation(f"benchmark samples cannot be summarized: {exc}") from None


def _validated(model: type, value: dict[str, Any], what: str) -> Any:
    from pydantic import ValidationError

    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ProtocolViolation(f"{what} reply invalid: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


async def _run_phases(plan: EvaluationPlan, session: _Session, evaluation: Evaluation) -> None:
    await session.expect((HelloEvent,), "worker start")
    session.phase = "setup"
    isolation = plan.isolation or IsolationConfig(scratch_dir=str(plan.work_dir))
    await session.connection.ensure_quiet("setup")
    await session.connection.send(SetupCommand(
        run_id=plan.run_id, experiment_id=plan.experiment_id, harness_path=str(plan.harness_path),
        kernel_path=str(plan.kernel_path), target=plan.target.model_dump(), isolation=isolation,
        autotune=plan.autotune))
    ready = await session.expect((ReadyEvent, FailureEvent), "setup (harness import)")
    if isinstance(ready, FailureEvent):
        raise _Stop(_failure_status(ready) or EvaluationStatus.CRASHED, _failure_reason("harness setup", ready))
    evaluation.worker.isolation = ready.isolation
    evaluation.worker.versions = ready.versions
    evaluation.worker.device = ready.device
    evaluation.worker.pid_namespace = ready.pid_namespace
    evaluation.worker.verdict_process = ready.verdict_process

    if plan.screen is not None:
        await _screen(plan.screen, session, evaluation)
        await _shutdown(plan, session, evaluation)
        return
    if plan.trusted is not None:
        await _trusted(plan, session, evaluation)
        await _shutdown(plan, session, evaluation)
        return

    session.phase = "build"
    reply = await session.call(BuildCommand, "build")
    if isinstance(reply, FailureEvent):
        raise _Stop(_failure_status(reply) or EvaluationStatus.BUILD_FAILED, _failure_reason("build", reply))
    build = _validated(BuildValue, reply.value, "build")
    if not build.success:
        raise _Stop(EvaluationStatus.BUILD_FAILED, f"build failed: {one_line(build.diagnostics, 300) or 'no diagnostics'}")

    measurements = {case.case_id: CaseMeasurement(case_id=case.case_id, protected=case.protected, weight=case.weight)
                    for case in plan.cases}
    evaluation.cases = list(measurements.values())
    session.phase = "verify"
    for case in plan.cases:
        measurement = measurements[case.case_id]
        reply = await session.call(VerifyCommand, f"verify (case {case.case_id})", case=case.model_dump(),
                                   seed=session.seed(case.case_id))
        if isinstance(reply, FailureEvent):
            status = _failure_status(reply)
            if status is not None:
                raise _Stop(status, _failure_reason(f"verify (case {case.case_id})", reply))
            measurement.correct = False
            measurement.diagnostics = f"verify raised {reply.error_type}: {one_line(reply.message, 300)}"
        else:
            verdict = _validated(VerifyValue, reply.value, "verify")
            measurement.correct = verdict.passed
            measurement.diagnostics = verdict.diagnostics
            measurement.metrics = verdict.metrics
        measurement.phase_seconds["verify"] = getattr(reply, "seconds", 0.0)
    failed = [m for m in evaluation.cases if m.protected and not m.correct]
    if failed:
        first = failed[0]
        raise _Stop(EvaluationStatus.INCORRECT,
                    f"protected case {first.case_id} failed: {one_line(first.diagnostics, 300) or 'verify returned false'}")

    if plan.benchmark:
        session.phase = "benchmark"
        for case in plan.cases:
            measurement = measurements[case.case_id]
            if not measurement.correct:
                continue
            reply = await session.call(BenchmarkCommand, f"benchmark (case {case.case_id})", case=case.model_dump(),
                                       repetitions=plan.repetitions, seed=session.seed(case.case_id),
                                       timing_mode=plan.timing_modes.get(case.case_id))
            if isinstance(reply, FailureEvent):
                # an exception (not a signal or exit) while timing: the call does not work, or its last
                # timed output was wrong (the harness re-checks it) -> incorrect, like one in verify
                raise _Stop(_failure_status(reply) or EvaluationStatus.INCORRECT,
                            _failure_reason(f"benchmark (case {case.case_id})", reply))
            timing = _validated(BenchmarkValue, reply.value, "benchmark")
            measurement.samples_us = timing.samples_us
            measurement.stats = _summarized(timing.samples_us)
            measurement.warmup_count = timing.warmup_count
            measurement.cache_policy = timing.cache_policy
            measurement.metrics.update({f"benchmark.{k}": v for k, v in timing.metrics.items()})
            measurement.phase_seconds["benchmark"] = reply.seconds

    if plan.profile_request is not None:
        session.phase = "profile"
        for index, case in enumerate(plan.cases):
            measurement = measurements[case.case_id]
            request = plan.profile_request(case)
            if request is None or not measurement.correct:
                continue
            if _no_time_to_profile(plan, case.case_id):
                measurement.profile_not_taken = PROFILE_NOT_TAKEN_BUDGET
                continue
            try:
                reply = await session.call(ProfileCommand, f"profile (case {case.case_id})", plan.profile_until,
                                           case=case.model_dump(), request=request.model_dump(),
                                           seed=session.seed(case.case_id))
            except _BudgetCut:
                for rest in plan.cases[index:]:  # this one, and every later one that was to be profiled
                    if measurements[rest.case_id].correct and plan.profile_request(rest) is not None:
                        measurements[rest.case_id].profile_not_taken = PROFILE_NOT_TAKEN_BUDGET
                raise
            if isinstance(reply, FailureEvent):
                if _failure_status(reply) is EvaluationStatus.SANDBOX_VIOLATION:
                    raise _Stop(EvaluationStatus.SANDBOX_VIOLATION, _failure_reason(f"profile (case {case.case_id})", reply))
                # Profiles are evidence, not gates: a failing profiler is recorded, the evaluation goes on.
                measurement.profile = {"available": False, "error": f"{reply.error_type}: {one_line(reply.message, 300)}",
                                       "request": request.model_dump()}
            else:
                measurement.profile = {**reply.value, "request": request.model_dump()}
                measurement.phase_seconds["profile"] = reply.seconds

    await _shutdown(plan, session, evaluation)


async def _screen(command: ScreenCommand, session: _Session, evaluation: Evaluation) -> None:
    session.phase = "screen"
    fields = command.model_dump(exclude={"kind", "command_id"})
    reply = await session.call(ScreenCommand, f"screening of {len(command.variants)} variant(s)", **fields)
    if isinstance(reply, FailureEvent):
        raise _Stop(_failure_status(reply) or EvaluationStatus.CRASHED, _failure_reason("screen", reply))
    value = _validated(ScreenValue, reply.value, "screen")
    expected = [v.variant_id for v in command.variants]
    if [v.variant_id for v in value.variants] != expected:
        raise ProtocolViolation("screen reply names other variants than the command, or another order")
    evaluation.screening = value.variants


async def _trusted(plan: EvaluationPlan, session: _Session, evaluation: Evaluation) -> None:
    """The trusted autotune step's commands (or one first call), each reply awaited through its progress."""
    for template in plan.trusted or []:
        session.phase = template.kind
        session.next_command_id += 1
        command = template.model_copy(update={"command_id": session.next_command_id})
        if isinstance(command, AutotuneCommand):
            blank_cases(evaluation, command.cases)
        started = trio.current_time()
        try:
            reply = await call_with_progress(session.connection, command, deadline=session._phase_deadline(),
                                             progress=plan.progress)
        except PhaseTimedOut as exc:
            raise _Stop(EvaluationStatus.TIMEOUT, str(exc)) from None
        if isinstance(reply, FailureEvent):
            raise _Stop(_failure_status(reply) or EvaluationStatus.CRASHED, _failure_reason(command.kind, reply))
        take_reply(evaluation, command, reply, trio.current_time() - started, plan.timer)


async def _shutdown(plan: EvaluationPlan, session: _Session, evaluation: Evaluation) -> None:
    await session.connection.ensure_quiet("shutdown")
    session.phase = "shutdown"
    await session.connection.send(ShutdownCommand())
    # The results count only after the worker's own loop acknowledges the shutdown and then closes the
    # channel: a reply forged by the candidate for the last command is followed by the real one here.
    window = max(SHUTDOWN_MIN_SECONDS, min(SHUTDOWN_MAX_SECONDS, plan.deadline - trio.current_time()))
    with trio.move_on_after(window) as scope:
        finished = await session.connection.receive_event()
    if scope.cancelled_caught:
        raise _Stop(EvaluationStatus.TIMEOUT, f"timed out in shutdown: no finished event {window:.1f} s after the command")
    if not isinstance(finished, FinishedEvent):
        raise ProtocolViolation(f"unexpected {finished.kind} event while waiting for the finished event")
    evaluation.worker.autotune = finished.autotune
    keep_launchers(plan.launchers, finished, evaluation)
    await session.connection.ensure_closed(before=trio.current_time() + SHUTDOWN_MIN_SECONDS)


def keep_launchers(store: LauncherStore | None, finished: FinishedEvent, evaluation: Evaluation) -> None:
    """The launchers a worker's judge built, into the run's store; only a judge's: in the other verdict modes
    the candidate's code shares the worker's process and its socket, so what the worker says is the
    candidate's to forge."""
    if store is not None and finished.launchers and evaluation.worker.verdict_process == "judge":
        with contextlib.suppress(OSError):  # a store that cannot be written leaves later workers to build their own
            evaluation.worker.launchers_kept = len(store.keep(finished.launchers))


async def run_evaluation(plan: EvaluationPlan, spawner: Spawner, parent_env: dict[str, str]) -> Evaluation:
    """Run one evaluation in one fresh worker; never raises for anything the worker does."""
    started = time.monotonic()
    make_scratch_dirs(plan.work_dir)
    token = uuid.uuid4().hex
    env, _refused = build_worker_environment(
        parent_env, {**plan.target.environment, **(plan.environment or {})}, scratch=plan.work_dir, token=token)
    log_path = plan.log_path
    launch = WorkerLaunch(argv=[plan.worker_python, "-s", "-m", "sandbox_worker"], env=env, cwd=plan.work_dir,
                          log_path=log_path, token=token, log_limit_bytes=plan.log_limit_bytes)
    evaluation = Evaluation(label=plan.label, status=EvaluationStatus.OK, seed=plan.seed)
    evaluation.worker.log_path = str(log_path)
    capture = OutputCapture(path=log_path, limit_bytes=plan.log_limit_bytes)
    try:
        spawned = await spawner.spawn(launch)
    except OSError as exc:
        evaluation.status = EvaluationStatus.CRASHED
        evaluation.reason = f"could not start the worker: {exc}"
        return evaluation
    evaluation.worker.pid = spawned.process.pid
    session = _Session(plan, WorkerConnection(spawned))
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(capture.drain, spawned.output)
            try:
                await _run_phases(plan, session, evaluation)
                evaluation.reason = _ok_reason(evaluation)
                with trio.move_on_after(2.0):  # a clean shutdown exits by itself; the kill below is for the rest
                    await spawned.process.wait()
            except _BudgetCut as cut:  # what it measured stands; the busy worker is ended below
                evaluation.reason = f"{_ok_reason(evaluation)}; {cut}"
            except _Stop as stop:
                evaluation.status, evaluation.reason = stop.status, stop.reason
            except ProtocolViolation as exc:
                evaluation.status = EvaluationStatus.PROTOCOL_VIOLATION
                evaluation.reason = f"during {session.phase}: {exc}"
            except WorkerGone:
                with trio.move_on_after(2.0):
                    await spawned.process.wait()
                status, description = _exit_description(spawned.process.returncode)
                evaluation.status = status
                evaluation.reason = f"worker {description} during {session.phase}"
            finally:
                with trio.CancelScope(shield=True):
                    session.phase = "teardown"
                    evaluation.worker.leftover_processes_killed = await kill_tree(spawned.process, token)
                    await spawned.protocol.aclose()
                    session.close_phase()
                nursery.cancel_scope.cancel()
    finally:
        capture.finish()
        evaluation.command_seeds = list(session.seeds)
        evaluation.worker.phases = {phase: round(seconds, 4) for phase, seconds in session.phases.items()}
        evaluation.worker.exit_code = spawned.process.returncode
        if spawned.process.returncode is not None and spawned.process.returncode < 0:
            evaluation.worker.signal = -spawned.process.returncode
        evaluation.worker.log_bytes_dropped = capture.dropped
        evaluation.worker.wall_seconds = time.monotonic() - started
    return evaluation
