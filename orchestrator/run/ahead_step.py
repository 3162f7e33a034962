"""A candidate compiled ahead before its GPU workers: one over the device's limits spends none.

On a CUDA target the candidate file is compiled for the device on the host (orchestrator/compile_ahead/); a
config that needs more shared memory, registers or threads than the device has is a `build_failed`
evaluation naming the resource, with no worker started, and is remembered (the run's infeasible store) so the
tuner does not propose it, or its neighbours in the same direction, again. A verdict of `unknown` (a compile
ahead cannot tell, e.g. the module queries the GPU at import) leaves the candidate to its workers.

A round's candidates are proposed before the first is measured, so all of them are compiled ahead side by side
from the start of the round (`RoundCompiles`, `--overlap-compile-ahead`): a later slot's compile runs on the host
while the earlier slots' workers measure, and its turn starts from a finished compile (on the H100, 3.8 s of a
7.4 s gated candidate was its compile ahead). The compile child runs on the host's CPU, never on the GPU the
workers time, and compiles without launching; at most the host's cores less one compile at a time.
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from orchestrator.compile_ahead.ahead import check_candidate, remember_infeasible
from orchestrator.run.screening_ahead import lanes_for_host
from orchestrator.source_digest import raw_digest
from protocol.results import Evaluation, EvaluationStatus
from protocol.roles import Role

if sys.version_info < (3, 11):  # trio's own dependency there
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    from orchestrator.compile_ahead.store import InfeasibleStore
    from orchestrator.compile_ahead.variants import VariantCheck
    from orchestrator.run.evaluator import Evaluates

SECONDS = 120.0  # at most this long per candidate; a compile ahead cut off says unknown and decides nothing


async def compile_check(evaluator: Evaluates, experiment_id: str, source_path: Path, seconds_left: float, *,
                        device_name: str | None = None) -> VariantCheck | None:
    """The candidate file compiled ahead for the run's device (its kernels kept for its workers); None where the
    target takes no compile ahead or too little time is left for one."""
    seconds = min(SECONDS, seconds_left / 4)
    if seconds <= 5:
        return None
    return await check_candidate(source_path, harness_path=evaluator.bundle.harness_path,
                                 cases=[case.model_dump() for case in evaluator.inputs.cases],
                                 target=evaluator.inputs.target, python=evaluator.config.worker_python,
                                 seconds=seconds, keep_kernels=evaluator.kernel_cache.keep, device_name=device_name,
                                 progress=lambda compiles, elapsed: evaluator.log.event(
                                     f"{experiment_id} compile_ahead compiles={compiles} seconds={elapsed:.0f} "
                                     f"(at most {seconds:.0f} s)"))


class _Pending:
    """One compile ahead started with its round: its check, or what it raised, once done."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.done = trio.Event()
        self.check: VariantCheck | None = None
        self.error: BaseException | None = None


class RoundCompiles:
    """The compiles ahead of one round's candidates, started together in the round's nursery (which cancels what
    is left when the round ends) and each taken by its candidate's turn, by the exact source it compiled. At most
    the host's cores less one compile at a time (as screening's compiles ahead), so the run's own work, a GPU
    worker's host side included, keeps a core: on a 2-core host they run one after another."""

    def __init__(self, evaluator: Evaluates, nursery: trio.Nursery) -> None:
        self.evaluator = evaluator
        self.nursery = nursery
        self.pending: dict[str, _Pending] = {}
        self.limiter = trio.CapacityLimiter(lanes_for_host())

    def start(self, experiment_id: str, source: str, source_path: Path, seconds_left: float, *,
              device_name: str | None = None) -> None:
        digest = raw_digest(source)
        if digest in self.pending:  # the same file twice in a round: one compile serves both turns
            return
        pending = self.pending[digest] = _Pending(time.monotonic())

        async def compile_one() -> None:
            try:
                async with self.limiter:
                    left = seconds_left - (time.monotonic() - pending.started)  # what waiting for a lane took
                    pending.check = await compile_check(self.evaluator, experiment_id, source_path, left,
                                                        device_name=device_name)
            except OSError as exc:  # no interpreter or harness: raised where the candidate's turn takes it
                pending.error = exc
            finally:
                pending.done.set()

        self.nursery.start_soon(compile_one)

    async def take(self, experiment_id: str, source: str) -> tuple[bool, VariantCheck | None]:
        """(True, its check) when this round compiles `source`, waiting for the rest of it; (False, None) when
        it does not. Logs how much of the compile the candidate's turn still waited for."""
        pending = self.pending.get(raw_digest(source))
        if pending is None:
            return False, None
        waiting = time.monotonic()
        await pending.done.wait()
        if pending.error is not None:
            raise pending.error
        finished = time.monotonic()
        self.evaluator.log.event(
            f"{experiment_id} compile_ahead overlapped: started with its round {finished - pending.started:.1f} s "
            f"ago, its turn waited {finished - waiting:.1f} s for it")
        return True, pending.check


@asynccontextmanager
async def compiling_alongside(evaluator: Evaluates) -> AsyncIterator[RoundCompiles]:
    """A round's compiles around the round's own work: what is left of them is cancelled when the round ends
    (child processes included), and what the round raises comes out as itself, not inside the nursery's
    exception group (the compiles raise nothing of their own: a missing interpreter is kept for its turn)."""
    try:
        async with trio.open_nursery() as nursery:
            try:
                yield RoundCompiles(evaluator, nursery)
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if len(group.exceptions) != 1:
            raise
        only = group.exceptions[0]
        raise only from only.__cause__


async def compiled_ahead(evaluator: Evaluates, store: InfeasibleStore | None, experiment_id: str, source: str,
                         source_path: Path, seconds_left: float, *, screened_in: str | None = None,
                         device_name: str | None = None, round_compiles: RoundCompiles | None = None
                         ) -> Evaluation | None:
    """The candidate's `build_failed` evaluation when it cannot run on the device, else None. `screened_in`
    names the screening whose compile ahead already found this exact source within the limits (its kernels are
    in the run's cache): it is not compiled again. `round_compiles`: its round's compiles, one of which may be
    this source's, started while earlier candidates were measured."""
    if screened_in is not None:
        evaluator.log.event(f"{experiment_id} compile_ahead skipped: {screened_in} compiled this exact source within "
                            "the device's limits")
        return None
    started, check = (await round_compiles.take(experiment_id, source) if round_compiles is not None
                      else (False, None))
    if not started:
        check = await compile_check(evaluator, experiment_id, source_path, seconds_left, device_name=device_name)
    if check is not None and check.kernel_groups_kept:
        evaluator.log.event(f"{experiment_id} compile_ahead kernel_groups_kept={check.kernel_groups_kept} "
                            "(compiled kernels its workers start with)")
    if check is None or not check.feasibility.infeasible:
        return None
    if store is not None:
        remember_infeasible(store, source, check)
    return Evaluation(label=Role.CANDIDATE.value, status=EvaluationStatus.BUILD_FAILED,
                      reason=f"compile ahead ({check.feasibility.resource or 'build'}): {check.feasibility.reason}")
