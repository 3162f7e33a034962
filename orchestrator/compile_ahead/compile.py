"""Compile many configs of one kernel for the target in isolated child processes, `max_parallel` at a time.

The candidate file is untrusted, so it is never imported here: each child (orchestrator/compile_ahead/child.py)
gets a scratch directory holding a copy of the file, its own TRITON_CACHE_DIR, HOME and TMPDIR, the worker's
environment allow-list (orchestrator/worker/environment.py), no network and writes confined to the scratch
directory. Configs are dealt round-robin to `max_parallel` lanes; a lane's child imports torch, Triton and
the candidate once and compiles its configs in turn, announcing each (`start`) before its `result`. A config
that runs past `per_config_seconds` is reported `timeout`, one whose compile kills the child `crashed`;
either way the child's process group is ended and a fresh child takes the lane's remaining configs, so one
config never costs another its answer.

Deadlines: the per-config and start-up deadlines are the batch's policy, applied inside; the whole batch is
the caller's to bound (`trio.fail_after` around `compile_configs`); cancelling it ends every child.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

import trio
from pydantic import Field, TypeAdapter, ValidationError

from orchestrator.compile_ahead.models import (
    CompileOutcome,
    CompilePlan,
    CompileTarget,
    ConfigSpec,
    Frozen,
    KernelSignature,
    ResourceReport,
    Scalar,
)
from orchestrator.compile_ahead.reports import report_from_result
from orchestrator.worker.environment import build_worker_environment, make_scratch_dirs
from orchestrator.worker.process_tree import end_process_group, group_members
from protocol.base import StrictModel

CHILD = Path(__file__).resolve().with_name("child.py")
MAX_EVENT_BYTES = 1 << 20  # a result carries clipped logs (child.MESSAGE_LIMIT); anything near this is garbage
STDERR_TAIL_BYTES = 4000
EXIT_WAIT_SECONDS = 5.0
FILE_SIZE_BYTES = 256 << 20  # a compile writes IR, PTX and a cubin per config into the scratch cache


class CompileJob(Frozen):
    """One kernel of one file, compiled for one target by one interpreter."""

    source_path: Path
    signature: KernelSignature
    target: CompileTarget = Field(default_factory=CompileTarget)
    python: str = sys.executable  # use the worker's interpreter: its Triton is what the GPU worker compiles with
    device_properties: dict[str, Scalar] = Field(default_factory=dict)  # e.g. multiprocessor_count, for module code
    stop_over_limit: bool = True  # skip PTX and ptxas once shared memory is known to exceed the limit


def target_properties(target: CompileTarget, extra: dict[str, Scalar]) -> dict[str, Scalar]:
    """What the compile-only driver answers to `get_device_properties`: the target's limits, then `extra`."""
    limits = target.limits
    return {"max_shared_mem": limits.shared_memory_per_block, "max_num_regs": limits.registers_per_block,
            "warpSize": target.warp_size, **extra}


class ReadyEvent(StrictModel):
    event: Literal["ready"]
    triton_version: str
    isolation: dict[str, str]


class RefusedEvent(StrictModel):
    event: Literal["refused"]
    reason: str
    isolation: dict[str, str]


class SourceErrorEvent(StrictModel):
    event: Literal["source_error"]
    error_type: str
    message: str


class StartEvent(StrictModel):
    event: Literal["start"]
    index: int


class CompileResultFields(StrictModel):
    """What one compile in a child came to: the fields both children's result events carry."""

    seconds: float
    shared: int | None = None
    num_warps: int | None = None
    log: str = ""
    resource_usage: str = ""
    error_type: str = ""
    message: str = ""


class ResultEvent(CompileResultFields):
    event: Literal["result"]
    index: int
    status: Literal["compiled", "shared_over_limit", "compile_error", "signature_error"]


class FinishedEvent(StrictModel):
    event: Literal["finished"]


ChildEvent = Annotated[ReadyEvent | RefusedEvent | SourceErrorEvent | StartEvent | ResultEvent | FinishedEvent,
                       Field(discriminator="event")]
CHILD_EVENT = TypeAdapter(ChildEvent)


class ChildProtocolError(Exception):
    """The child printed something that is not one of its events."""


class LineReader:
    """Bounded JSON lines from the child's result pipe."""

    def __init__(self, stream: trio.abc.ReceiveStream, events: TypeAdapter[Any] = CHILD_EVENT) -> None:
        self.stream = stream
        self.events = events
        self.buffer = b""

    async def next_event(self) -> Any | None:
        """The next event, or None at end of stream."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_EVENT_BYTES:
                raise ChildProtocolError(f"an event line longer than {MAX_EVENT_BYTES} bytes")
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                if self.buffer.strip():
                    raise ChildProtocolError("the result stream ended inside a line")
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            return self.events.validate_python(json.loads(line))
        except (ValueError, ValidationError) as exc:
            raise ChildProtocolError(f"not a child event: {line[:200]!r} ({type(exc).__name__})") from None


class Lane:
    """The configs dealt to one lane and the reports they have so far; children come and go."""

    def __init__(self, job: CompileJob, source: str, items: list[tuple[int, ConfigSpec]],
                 reports: dict[int, ResourceReport], *, per_config_seconds: float, startup_seconds: float,
                 scratch_root: Path | None) -> None:
        self.job = job
        self.source = source
        self.items = items
        self.reports = reports
        self.per_config_seconds = per_config_seconds
        self.startup_seconds = startup_seconds
        self.scratch_root = scratch_root

    def pending(self) -> list[tuple[int, ConfigSpec]]:
        return [(index, config) for index, config in self.items if index not in self.reports]

    def record(self, index: int, outcome: CompileOutcome, detail: str, *, seconds: float = 0.0,
               isolation: dict[str, str] | None = None) -> None:
        config = dict(self.items)[index]
        self.reports[index] = ResourceReport(config=config, target=self.job.target, outcome=outcome, detail=detail,
                                             seconds=seconds, isolation=isolation or {})

    async def run(self) -> None:
        while pending := self.pending():
            await self.run_child(pending)
            if len(self.pending()) == len(pending):  # a child that reports nothing must not be restarted forever
                self.record(pending[0][0], CompileOutcome.CRASHED, "the compile child finished without this result")

    def request(self, scratch: Path, pending: list[tuple[int, ConfigSpec]]) -> dict[str, Any]:
        job = self.job
        digest = hashlib.sha256(self.source.encode()).hexdigest()[:16]
        module = scratch / "candidate_modules" / f"tlx_candidate_{digest}.py"
        module.parent.mkdir()
        module.write_text(self.source, encoding="utf-8")
        properties = target_properties(job.target, job.device_properties)
        limits = job.target.limits
        budget = self.startup_seconds + self.per_config_seconds * len(pending)
        return {
            "source_path": str(module), "kernel_name": job.signature.kernel_name, "types": job.signature.types,
            "constexprs": job.signature.constexprs, "divisible_by_16": job.signature.divisible_by_16,
            "target": job.target.model_dump(), "device_properties": properties,
            "stop_above_shared_bytes": limits.shared_memory_per_block if job.stop_over_limit else None,
            "configs": [{"index": index, **config.model_dump()} for index, config in pending],
            "isolation": {"scratch_dir": str(scratch), "child_cuda": False, "cpu_seconds": int(budget) + 10,
                          "file_size_bytes": FILE_SIZE_BYTES},
        }

    async def run_child(self, pending: list[tuple[int, ConfigSpec]]) -> None:
        """One child over `pending`; returns with at least one more config reported."""
        scratch = Path(tempfile.mkdtemp(prefix="tlx-compile-ahead-", dir=self.scratch_root))
        try:
            make_scratch_dirs(scratch)
            request_path = scratch / "request.json"
            request_path.write_text(json.dumps(self.request(scratch, pending)), encoding="utf-8")
            env, _refused = build_worker_environment(os.environ, scratch=scratch,
                                                     token=f"compile-ahead-{uuid.uuid4().hex}")
            stderr_path = scratch / "stderr.log"
            with stderr_path.open("wb") as stderr:
                process = await trio.lowlevel.open_process(
                    [self.job.python, str(CHILD), str(request_path)], stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=str(scratch), start_new_session=True)
            ended_by_itself = False
            try:
                ended_by_itself = await self.follow(process, pending, stderr_path)
            finally:
                with trio.CancelScope(shield=True):
                    await end_child(process, wait=EXIT_WAIT_SECONDS if ended_by_itself else 0.0)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    async def follow(self, process: trio.Process, pending: list[tuple[int, ConfigSpec]], stderr_path: Path) -> bool:
        """Read the child's events under the start-up, then the per-config, deadline; report every outcome.
        True when the child said its last word (it exits by itself), False when it is to be ended."""
        assert process.stdout is not None
        reader = LineReader(process.stdout)
        config_of = dict(pending)
        ready: ReadyEvent | None = None
        in_flight: int | None = None
        with trio.CancelScope(deadline=trio.current_time() + self.startup_seconds) as scope:
            try:
                while (event := await reader.next_event()) is not None:
                    if isinstance(event, StartEvent | ResultEvent) and event.index not in config_of:
                        raise ChildProtocolError(f"{event.event} for config {event.index}, not one it was given")
                    if isinstance(event, ReadyEvent):
                        ready = event
                        scope.deadline = trio.current_time() + self.per_config_seconds
                    elif isinstance(event, StartEvent):
                        in_flight = event.index
                        scope.deadline = trio.current_time() + self.per_config_seconds
                    elif isinstance(event, ResultEvent):
                        self.reports[event.index] = report_from_result(
                            config_of[event.index], self.job.target, event.model_dump(),
                            triton_version=ready.triton_version if ready else None,
                            isolation=ready.isolation if ready else {})
                        in_flight = None
                    elif isinstance(event, RefusedEvent):
                        for index, _config in pending:
                            self.record(index, CompileOutcome.REFUSED, event.reason, isolation=event.isolation)
                        return True
                    elif isinstance(event, SourceErrorEvent):
                        for index, _config in pending:
                            self.record(index, CompileOutcome.SOURCE_FAILED, f"{event.error_type}: {event.message}")
                        return True
                    else:
                        return True
            except ChildProtocolError as exc:
                self.blame(pending, in_flight, CompileOutcome.CRASHED, f"protocol: {exc}")
                return False
        if scope.cancelled_caught:
            if ready is None:
                for index, _config in pending:
                    self.record(index, CompileOutcome.TIMEOUT,
                                f"the compile child was not ready within {self.startup_seconds:.0f} s")
            else:
                self.blame(pending, in_flight, CompileOutcome.TIMEOUT,
                           f"no result within {self.per_config_seconds:.0f} s", seconds=self.per_config_seconds)
            return False
        with trio.move_on_after(EXIT_WAIT_SECONDS):  # its output closed: it is exiting or dead
            await process.wait()
        status = f"exit status {process.returncode}" if process.returncode is not None else "still running"
        self.blame(pending, in_flight, CompileOutcome.CRASHED,
                   f"the compile child ended without finishing ({status}): {stderr_tail(stderr_path)}")
        return False

    def blame(self, pending: list[tuple[int, ConfigSpec]], in_flight: int | None, outcome: CompileOutcome,
              detail: str, *, seconds: float = 0.0) -> None:
        """The config in flight takes the blame; with none in flight, the next unreported one (progress)."""
        index = in_flight if in_flight is not None else next(
            (index for index, _config in pending if index not in self.reports), None)
        if index is not None:
            self.record(index, outcome, detail, seconds=seconds)


async def end_child(process: trio.Process, *, wait: float) -> None:
    """Give a child that said its last word `wait` seconds to exit; end at once the group of any other, and of
    one whose ptxas children outlive it."""
    with trio.move_on_after(wait):
        await process.wait()
    if process.returncode is None or group_members(process.pid):
        await end_process_group(process, grace_seconds=1.0)
        with trio.move_on_after(EXIT_WAIT_SECONDS):  # a child stuck in the kernel must not hang the batch
            await process.wait()
    if process.stdout is not None:
        await process.stdout.aclose()


def stderr_tail(path: Path) -> str:
    try:
        data = path.read_bytes()[-STDERR_TAIL_BYTES:]
    except OSError:
        return "no stderr"
    lines = data.decode("utf-8", "replace").strip().splitlines()
    return " | ".join(lines[-5:]) if lines else "no stderr"


async def compile_configs(job: CompileJob, configs: list[ConfigSpec], *, per_config_seconds: float = 120.0,
                          startup_seconds: float = 120.0, max_parallel: int | None = None,
                          scratch_root: Path | None = None) -> list[ResourceReport]:
    """A report for each config, in the order given. Never raises for a config's trouble (that is its outcome);
    before any child starts, raises ValueError for a config that sets a parameter the signature does not type
    `constexpr`, and OSError for a missing interpreter or an unreadable source file."""
    if not configs:
        return []
    constexpr_names = {name for name, kind in job.signature.types.items() if kind == "constexpr"}
    for config in configs:
        if stray := sorted(set(config.constexprs) - constexpr_names):
            raise ValueError(f"config {config.label()!r} sets {', '.join(stray)}, which {job.signature.kernel_name} "
                             f"does not take as constexpr ({', '.join(sorted(constexpr_names)) or 'none'})")
    python = shutil.which(job.python)
    if python is None:
        raise FileNotFoundError(f"compile ahead: no interpreter {job.python!r}")
    job = job.model_copy(update={"python": str(Path(python).absolute())})  # the children start in scratch dirs
    source = job.source_path.read_text(encoding="utf-8")
    lanes_wanted = max(1, min(max_parallel or os.cpu_count() or 1, len(configs)))
    reports: dict[int, ResourceReport] = {}
    numbered = list(enumerate(configs))
    lanes = [Lane(job, source, numbered[start::lanes_wanted], reports, per_config_seconds=per_config_seconds,
                  startup_seconds=startup_seconds, scratch_root=scratch_root) for start in range(lanes_wanted)]
    async with trio.open_nursery() as nursery:
        for lane in lanes:
            nursery.start_soon(lane.run)
    return [reports[index] for index in range(len(configs))]


async def compile_plan(source_path: Path, plan: CompilePlan, *, python: str = sys.executable,
                       per_config_seconds: float = 120.0) -> ResourceReport:
    """One candidate file compiled ahead with its plan: what an evaluation runs before it spends a worker."""
    job = CompileJob(source_path=source_path, signature=plan.signature, target=plan.target, python=python)
    (report,) = await compile_configs(job, [plan.config], per_config_seconds=per_config_seconds, max_parallel=1)
    return report


def compile_configs_sync(job: CompileJob, configs: list[ConfigSpec], **options: Any) -> list[ResourceReport]:
    """`compile_configs` for callers outside trio (scripts, tests)."""
    return trio.run(lambda: compile_configs(job, configs, **options))
