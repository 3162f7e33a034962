"""journal.jsonl: one event per line, appended and fsynced as the run goes, so a crash loses at most one line.

Every event has `time` (Unix seconds) and `event`, its name, which picks the shape. `RunArtifacts.journal`
(`orchestrator/ledger/artifacts.py`) validates each event against `JournalEvent` before writing it, so
an event name or field not listed here is a programming error, never a silently different line.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from protocol.base import StrictModel
from protocol.outcome import ExitCode, StoppingReason
from protocol.results import CommitRecord, Decision, EvaluationStatus
from protocol.roles import Role


class _Event(StrictModel):
    time: float


class RunStartedEvent(_Event):
    event: Literal["run_started"]
    argv: list[str]


class EvaluationEvent(_Event):
    """One fresh-worker evaluation ended (any role)."""

    event: Literal["evaluation"]
    experiment_id: str
    label: Role
    tag: str
    status: EvaluationStatus
    reason: str
    wall_seconds: float
    reused: bool = False  # taken from the record by a resumed run, not run again (docs/resume.md)
    source_sha256: str = ""  # the source it measured (a resumed experiment may be proposed anew, differently)


class ExperimentEvent(_Event):
    """A candidate (or the finalist) got its decision."""

    event: Literal["experiment"]
    experiment_id: str
    decision: Decision | None
    aggregate_speedup: float | None


class CommitEvent(_Event):
    """A promotion, final or rollback commit, whatever its outcome."""

    event: Literal["commit"]
    record: CommitRecord


class CommitPreparedEvent(_Event):
    """The checkout took the run's commits: where they go, so a resumed run finds its own commits again."""

    event: Literal["commit_prepared"]
    vcs: str
    repository: str
    file: str
    base_revision: str
    ref: str | None


class RoundsEndedEvent(_Event):
    """The rounds are over and why; a resumed run goes on with the revalidation instead of proposing again."""

    event: Literal["rounds_ended"]
    incumbent_id: str
    stopping_reason: StoppingReason
    stopping_detail: str
    provider_explanation: dict[str, Any] | None = None


class ProposalRefusedEvent(_Event):
    """A proposal repeated what the run already refused (orchestrator/run/refusals.py): no worker ran it, and the
    provider was asked again for the same slot."""

    event: Literal["proposal_refused"]
    experiment_id: str  # the slot it was proposed for
    attempt: int  # refused proposals for this slot so far, this one included
    normalized_sha256: str
    reason: str
    source_path: str


class FinalistFallbackEvent(_Event):
    """A finalist failed its revalidation and the run revalidates the next-best earlier promotion
    (orchestrator/run/finalists.py): which, why it was chosen, and the time that made it fit."""

    event: Literal["finalist_fallback"]
    failed: str  # the finalist that failed
    revalidation_id: str  # its revalidation: final, final-2, ...
    next: str  # the promotion revalidated next
    next_revalidation_id: str
    chained_lower_bound: float  # the product of the lower bounds on its way from the baseline
    expected_seconds: float
    seconds_left: float


class RunResumedEvent(_Event):
    """`tlx-agent optimize --resume` took the run over: what it moved aside and which budget it changed."""

    event: Literal["run_resumed"]
    argv: list[str]
    resume_count: int
    moved_aside: list[str]
    budget_overrides: dict[str, float]


class RunFinishedEvent(_Event):
    event: Literal["run_finished"]
    exit_code: ExitCode
    stopping_reason: StoppingReason


class RunAbortedEvent(_Event):
    """The run stopped early with one message (bad baseline, tampered bundle, a checkout that takes no commits)."""

    event: Literal["run_aborted"]
    message: str
    exit_code: ExitCode


class RunInterruptedEvent(_Event):
    event: Literal["run_interrupted"]


class ProviderFailureEvent(_Event):
    """The provider raised where the run called it (orchestrator/run/provider_failures.py): that proposal
    failed, the run went on; the traceback is in `traceback_path`."""

    event: Literal["provider_failure"]
    call: str  # the proposal's experiment id, or `resume` / `aclose`
    provider: str
    error: str  # the exception's type and message, on one line
    traceback_path: str
    consecutive: int  # failed calls in a row so far, this one included


JournalEvent = Annotated[
    RunStartedEvent | EvaluationEvent | ExperimentEvent | CommitEvent | RunFinishedEvent | RunAbortedEvent
    | RunInterruptedEvent | CommitPreparedEvent | RoundsEndedEvent | RunResumedEvent | ProviderFailureEvent
    | FinalistFallbackEvent | ProposalRefusedEvent,
    Field(discriminator="event"),
]
JOURNAL_EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(JournalEvent)
