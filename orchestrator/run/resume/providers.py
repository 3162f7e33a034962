"""How a provider goes on after a resume: one that keeps state between proposals rebuilds it from the records.

The replay provider continues at the next unused candidate file, the tuner re-learns its attempts from the
recorded history; a provider without `resume_from` (the LLM ones) just proposes again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from protocol.results import ExperimentRecord


@runtime_checkable
class ResumableProvider(Protocol):
    def resume_from(self, history: Sequence[ExperimentRecord]) -> None:
        """Take the state the proposals behind `history` (every finished record, in order) left."""


def resume_provider(provider: object, history: Sequence[ExperimentRecord]) -> None:
    if isinstance(provider, ResumableProvider):
        provider.resume_from(history)
