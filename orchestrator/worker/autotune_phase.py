"""The commands of a trusted autotune step (`first_call`, `autotune`): replies that may take minutes.

While the worker autotunes it sends `autotune_progress` events (one per configuration it starts timing);
they are validated like every event, must name the command in flight, and are handed to the caller. When
none comes for `HEARTBEAT_SECONDS`, the caller is told anyway, so the live log has a line at least that often
while a compile or a long configuration runs. The reply is validated here and written into the evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio
from pydantic import ValidationError

from orchestrator.worker.process import ProtocolViolation, WorkerConnection
from protocol.autotune import AutotuneTimer, AutotuneValue, FirstCall, FirstCallValue
from protocol.results import CaseMeasurement, Evaluation
from protocol.worker import AutotuneCommand, AutotuneProgressEvent, FailureEvent, FirstCallCommand, ReplyEvent

HEARTBEAT_SECONDS = 10.0  # the live log's promise is a line at least every 15 s


class PhaseTimedOut(Exception):
    """The command outlived its deadline; the message says what it was doing last."""


@dataclass
class ProgressSink:
    """Where the step's progress goes: each event, and a beat when the worker has been quiet."""

    on_event: Callable[[AutotuneProgressEvent], None]
    on_quiet: Callable[[AutotuneProgressEvent | None, float], None]  # (last event, seconds since the command)


async def call_with_progress(connection: WorkerConnection, command: AutotuneCommand | FirstCallCommand, *,
                             deadline: float, progress: ProgressSink | None) -> ReplyEvent | FailureEvent:
    await connection.ensure_quiet(command.kind)
    await connection.send(command)
    sent = trio.current_time()
    last: AutotuneProgressEvent | None = None
    while True:
        with trio.move_on_at(min(deadline, trio.current_time() + HEARTBEAT_SECONDS)) as scope:
            event = await connection.receive_event()
        if scope.cancelled_caught:
            if trio.current_time() >= deadline:
                doing = (f"; last: {last.kernel} configuration {last.configuration} of {last.of}" if last else "")
                raise PhaseTimedOut(f"timed out in {command.kind} after {trio.current_time() - sent:.1f} s{doing}")
            if progress is not None:
                progress.on_quiet(last, trio.current_time() - sent)
            continue
        if isinstance(event, AutotuneProgressEvent):
            if event.command_id != command.command_id:
                raise ProtocolViolation(f"progress for command {event.command_id} while command "
                                        f"{command.command_id} runs")
            last = event
            if progress is not None:
                progress.on_event(event)
            continue
        if not isinstance(event, (ReplyEvent, FailureEvent)):
            raise ProtocolViolation(f"unexpected {event.kind} event while waiting for {command.kind}")
        if event.command_id != command.command_id:
            raise ProtocolViolation(f"reply for command {event.command_id} while waiting for command "
                                    f"{command.command_id}")
        return event


def take_reply(evaluation: Evaluation, command: AutotuneCommand | FirstCallCommand, reply: ReplyEvent,
               seconds: float, timer: AutotuneTimer) -> None:
    """The reply's content into the evaluation: the first call's figures, or each case's call and the choices."""
    model: Any = FirstCallValue if isinstance(command, FirstCallCommand) else AutotuneValue
    try:
        value = model.model_validate(reply.value)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ProtocolViolation(f"{command.kind} reply invalid: {'.'.join(map(str, first['loc']))}: "
                                f"{first['msg']}") from None
    choices = list(evaluation.autotune_choices or [])
    known = {(c.kernel, tuple(c.key)) for c in choices}
    for choice in value.choices:
        if (choice.kernel, tuple(choice.key)) not in known:
            choices.append(choice)
        else:  # the same choice reported again by a later command: its cases are merged
            same = next(c for c in choices if (c.kernel, tuple(c.key)) == (choice.kernel, tuple(choice.key)))
            same.case_ids = list(dict.fromkeys([*same.case_ids, *choice.case_ids]))
    evaluation.autotune_choices = choices
    if isinstance(value, FirstCallValue):
        evaluation.first_call = FirstCall(case_id=value.case_id, seconds=seconds, import_seconds=value.import_seconds,
                                          call_seconds=value.call_seconds, what=value.what, timer=timer,
                                          autotuned=value.autotuned)
        return
    by_case = {m.case_id: m for m in evaluation.cases}
    for outcome in value.cases:
        measurement = by_case.get(outcome.case_id)
        if measurement is None:
            raise ProtocolViolation(f"autotune reply names case {outcome.case_id!r}, which was not sent")
        measurement.correct, measurement.diagnostics = outcome.passed, outcome.diagnostics
        measurement.phase_seconds["autotune"] = outcome.seconds


def blank_cases(evaluation: Evaluation, cases: list[dict[str, Any]]) -> None:
    """The evaluation's case records before the `autotune` reply fills them in."""
    if not evaluation.cases:
        evaluation.cases = [CaseMeasurement(case_id=str(c["case_id"]), protected=bool(c.get("protected", True)),
                                            weight=float(c.get("weight", 1.0))) for c in cases]
