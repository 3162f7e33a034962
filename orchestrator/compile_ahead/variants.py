"""Variants compiled ahead through their own entry point: one isolated child per variant, several at a time.

A variant (the incumbent with knobs edited, or any candidate file) is compiled the way its real launches would
compile it: the child (orchestrator/compile_ahead/launch_child.py) calls the harness's entry on CPU inputs with
Triton's JIT set to compile without launching, and reports every compile. This needs no mapping from a
file's knobs to a kernel's constexprs: module constants, launch keywords, wrapper heuristics, grid lambdas and
autotune lists all reach Triton as they would on the GPU. The verdict (feasibility.judge_launches) keeps a
variant off the GPU only when its own compile named a resource, failed, or its file does not load.

Deadlines: `seconds` bounds one variant's child (start-up, imports and every case); a variant past it is
`unknown` with what it had compiled so far, which may still show it infeasible. The batch is the caller's to
bound; cancelling it ends every child.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import trio
from pydantic import Field, TypeAdapter

from orchestrator.compile_ahead.compile import (
    EXIT_WAIT_SECONDS,
    FILE_SIZE_BYTES,
    ChildProtocolError,
    CompileResultFields,
    LineReader,
    ReadyEvent,
    RefusedEvent,
    SourceErrorEvent,
    end_child,
    stderr_tail,
    target_properties,
)
from orchestrator.compile_ahead.feasibility import (
    Feasibility,
    Verdict,
    judge,
    judge_launches,
    judge_source_error,
)
from orchestrator.compile_ahead.models import CompileTarget, ConfigSpec, Frozen, ResourceReport, Scalar
from orchestrator.compile_ahead.reports import report_from_result
from orchestrator.source_digest import raw_digest
from orchestrator.worker.environment import build_worker_environment, make_scratch_dirs, triton_cache_dir
from protocol.base import StrictModel

LAUNCH_CHILD = Path(__file__).resolve().with_name("launch_child.py")
INPUT_SALT = 0  # any salt: inputs only need the case's shapes and dtypes
MIN_VARIANT_SECONDS = 5.0  # less cannot even import torch and Triton in the child

# Given the variant's source digest (sha256 of its text) and the child's Triton cache once the child has ended,
# keeps what it compiled for that source's later workers (orchestrator/worker/kernel_cache.py); how many groups.
KeepKernels = Callable[[str, Path], int]
# A compile ahead that lasts says how far it got at least every PROGRESS_SECONDS: one variant (compiles so far,
# seconds), or a batch (variants done, variants, seconds). An autotune list of a hundred TLX configs takes minutes.
PROGRESS_SECONDS = 15.0
VariantProgress = Callable[[int, float], None]
BatchProgress = Callable[[int, int, float], None]


async def _every_few_seconds(report: Callable[[], None]) -> None:
    while True:
        await trio.sleep(PROGRESS_SECONDS)
        report()


@contextlib.asynccontextmanager
async def _reporting(report: Callable[[], None] | None) -> AsyncIterator[None]:
    """Calls `report` every PROGRESS_SECONDS while the body runs (nothing when it is None)."""
    async with trio.open_nursery() as ticking:
        if report is not None:
            ticking.start_soon(_every_few_seconds, report)
        yield
        ticking.cancel_scope.cancel()


class VariantJob(Frozen):
    """One variant file compiled for one target through the frozen harness's entry, on the bundle's cases."""

    source_path: Path
    harness_path: Path
    cases: list[dict[str, Any]]
    target: CompileTarget = Field(default_factory=CompileTarget)
    python: str = sys.executable  # the worker's interpreter: its Triton is the one the GPU worker compiles with
    device_properties: dict[str, Scalar] = Field(default_factory=dict)
    environment: dict[str, str] = Field(default_factory=dict)  # target.json's, as a worker gets it
    stop_over_limit: bool = True


class LaunchCompile(StrictModel):
    """One compile the entry made: `launch:N` alone, or `autotune:N` with the other configs of its list."""

    group: str
    report: ResourceReport


class VariantCheck(StrictModel):
    """What compile ahead says of one variant, and every compile it is based on."""

    feasibility: Feasibility
    compiles: list[LaunchCompile] = Field(default_factory=list)
    seconds: float = 0.0
    triton_version: str | None = None
    isolation: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)  # a case whose entry raised here, and why
    kernel_groups_kept: int = 0  # compiled kernels handed to the run's cache for this source's workers

    def infeasible_reports(self) -> list[ResourceReport]:
        """The compiles that over-ran a limit or failed: what the infeasible store remembers."""
        return [compile.report for compile in self.compiles if judge(compile.report).infeasible]


class HarnessErrorEvent(StrictModel):
    event: Literal["harness_error"]
    error_type: str
    message: str


class CaseEvent(StrictModel):
    event: Literal["case"]
    case_id: str


class CompiledEvent(CompileResultFields):
    event: Literal["compiled"]
    group: str = Field(max_length=100)
    kernel: str = Field(max_length=200)
    config: ConfigSpec
    status: Literal["compiled", "shared_over_limit", "compile_error"]


class CaseErrorEvent(StrictModel):
    event: Literal["case_error"]
    case_id: str
    error_type: str
    message: str


class FinishedEvent(StrictModel):
    event: Literal["finished"]


LAUNCH_EVENT = TypeAdapter(Annotated[ReadyEvent | RefusedEvent | SourceErrorEvent | HarnessErrorEvent | CaseEvent
                                     | CompiledEvent | CaseErrorEvent | FinishedEvent, Field(discriminator="event")])


def request_for(job: VariantJob, scratch: Path, seconds: float, source: str) -> dict[str, Any]:
    """The child's request; the variant's text is copied into the scratch directory under a worker-like name."""
    module = scratch / "candidate_modules" / f"tlx_candidate_{raw_digest(source)[:16]}.py"
    module.parent.mkdir()
    module.write_text(source, encoding="utf-8")
    limits = job.target.limits
    return {"harness_path": str(job.harness_path.resolve()), "source_path": str(module), "cases": job.cases,
            "salt": INPUT_SALT, "target": job.target.model_dump(),
            "device_properties": target_properties(job.target, job.device_properties),
            "stop_above_shared_bytes": limits.shared_memory_per_block if job.stop_over_limit else None,
            "isolation": {"scratch_dir": str(scratch), "child_cuda": False, "cpu_seconds": int(seconds) + 10,
                          "file_size_bytes": FILE_SIZE_BYTES}}


class Follower:
    """Reads one child's events into compiles and notes, until its last word, its end or the deadline."""

    def __init__(self, job: VariantJob) -> None:
        self.job = job
        self.ready: ReadyEvent | None = None
        self.compiles: list[LaunchCompile] = []
        self.notes: list[str] = []
        self.finished = False
        self.decided: Feasibility | None = None  # a verdict the child's own words settle (source, harness)

    def take(self, event: Any) -> bool:
        """Record one event; True when it was the child's last word."""
        if isinstance(event, ReadyEvent):
            self.ready = event
        elif isinstance(event, CompiledEvent):
            result = event.model_dump(exclude={"event", "group", "kernel", "config"})
            report = report_from_result(event.config, self.job.target, result,
                                        triton_version=self.ready.triton_version if self.ready else None,
                                        isolation=self.ready.isolation if self.ready else {})
            self.compiles.append(LaunchCompile(group=event.group,
                                               report=report.model_copy(update={"kernel_name": event.kernel})))
        elif isinstance(event, CaseErrorEvent):
            self.notes.append(f"case {event.case_id}: the entry raised {event.error_type}: "
                              f"{event.message.splitlines()[0] if event.message else ''}")
        elif isinstance(event, SourceErrorEvent):
            self.decided = judge_source_error(event.error_type, event.message)
            return True
        elif isinstance(event, HarnessErrorEvent | RefusedEvent):
            why = event.reason if isinstance(event, RefusedEvent) else f"{event.error_type}: {event.message}"
            self.decided = Feasibility(verdict=Verdict.UNKNOWN, reason=f"compile ahead could not run: {why}")
            return True
        elif isinstance(event, FinishedEvent):
            self.finished = True
            return True
        return False

    def verdict(self, why_incomplete: str) -> Feasibility:
        if self.decided is not None:
            return self.decided
        pairs = [(compile.group, compile.report) for compile in self.compiles]
        complete = self.finished and not self.notes
        return judge_launches(pairs, complete=complete, why_incomplete=why_incomplete or "; ".join(self.notes))


async def check_variant(job: VariantJob, *, seconds: float = 300.0, scratch_root: Path | None = None,
                        keep_kernels: KeepKernels | None = None, progress: VariantProgress | None = None
                        ) -> VariantCheck:
    """Compile one variant ahead through its entry. Never raises for the variant's trouble (that is its
    verdict); raises OSError when the interpreter, the harness or the variant file is missing. With
    `keep_kernels`, a child that ran to its last word hands what it compiled to the run's cache, keyed by the
    variant's own source: the child ran that source alone, as a worker of it would."""
    python = shutil.which(job.python)
    if python is None:
        raise FileNotFoundError(f"compile ahead: no interpreter {job.python!r}")
    if not job.harness_path.is_file():
        raise FileNotFoundError(f"compile ahead: no harness {str(job.harness_path)!r}")
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="tlx-compile-ahead-", dir=scratch_root))
    follower = Follower(job)
    why_incomplete = ""
    kept = 0
    try:
        source = job.source_path.read_text(encoding="utf-8")  # read once: what the child runs, and its cache's key
        make_scratch_dirs(scratch)
        request_path = scratch / "request.json"
        request_path.write_text(json.dumps(request_for(job, scratch, seconds, source)), encoding="utf-8")
        env, _refused = build_worker_environment(os.environ, job.environment, scratch=scratch,
                                                 token=f"compile-ahead-{uuid.uuid4().hex}")
        stderr_path = scratch / "stderr.log"
        with stderr_path.open("wb") as stderr:
            process = await trio.lowlevel.open_process(
                [str(Path(python).absolute()), "-s", str(LAUNCH_CHILD), str(request_path)], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=str(scratch), start_new_session=True)
        last_word = False
        try:
            assert process.stdout is not None
            reader = LineReader(process.stdout, LAUNCH_EVENT)
            report = None if progress is None else (
                lambda: progress(len(follower.compiles), time.monotonic() - started))
            async with _reporting(report):
                with trio.move_on_after(seconds) as scope:
                    try:
                        while not last_word and (event := await reader.next_event()) is not None:
                            last_word = follower.take(event)
                    except ChildProtocolError as exc:
                        why_incomplete = f"the compile child broke its protocol: {exc}"
            if scope.cancelled_caught:
                why_incomplete = f"the compile ahead ran past its {seconds:.0f} s"
            elif not last_word and not why_incomplete:
                with trio.move_on_after(EXIT_WAIT_SECONDS):
                    await process.wait()
                why_incomplete = (f"the compile child ended without finishing (exit status {process.returncode}): "
                                  f"{stderr_tail(stderr_path)}")
        finally:
            with trio.CancelScope(shield=True):
                await end_child(process, wait=EXIT_WAIT_SECONDS if last_word else 0.0)
        if keep_kernels is not None and follower.finished:
            kept = keep_kernels(raw_digest(source), triton_cache_dir(scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ready = follower.ready
    return VariantCheck(feasibility=follower.verdict(why_incomplete), compiles=follower.compiles,
                        seconds=round(time.monotonic() - started, 3),
                        triton_version=ready.triton_version if ready else None,
                        isolation=ready.isolation if ready else {}, notes=follower.notes, kernel_groups_kept=kept)


async def check_variants(jobs: list[VariantJob], *, seconds_per_variant: float = 300.0, max_parallel: int | None = None,
                         deadline: float | None = None, scratch_root: Path | None = None,
                         keep_kernels: KeepKernels | None = None, progress: BatchProgress | None = None
                         ) -> list[VariantCheck]:
    """`check_variant` for each job, `max_parallel` children at a time (default: the host's cores less one,
    so the run's own work keeps a core); results in the order given. With a `deadline` (trio's clock) no child
    runs past it, and a variant whose turn comes too late is `unknown`, so what was compiled still counts."""
    lanes = max(1, min(max_parallel or (os.cpu_count() or 2) - 1, len(jobs) or 1))
    limiter = trio.CapacityLimiter(lanes)
    checks: dict[int, VariantCheck] = {}

    async def one(index: int, job: VariantJob) -> None:
        async with limiter:
            seconds = seconds_per_variant
            if deadline is not None:
                seconds = min(seconds, deadline - trio.current_time())
            if seconds < MIN_VARIANT_SECONDS:
                checks[index] = VariantCheck(feasibility=Feasibility(
                    verdict=Verdict.UNKNOWN, reason="not compiled ahead: its time share was spent"))
                return
            checks[index] = await check_variant(job, seconds=seconds, scratch_root=scratch_root,
                                                keep_kernels=keep_kernels)

    started = time.monotonic()
    report = None if progress is None else (lambda: progress(len(checks), len(jobs), time.monotonic() - started))
    async with _reporting(report), trio.open_nursery() as nursery:
        for index, job in enumerate(jobs):
            nursery.start_soon(one, index, job)
    return [checks[index] for index in range(len(jobs))]
