"""Screening as a provider sees it: the `Screener` a run lends through the proposal context, and the
`ScreeningResult` each screened variant comes back as.

The run implements it (orchestrator/run/screening.py: one sandboxed worker ranks the variants); the tuner's joint
search calls it (orchestrator/providers/tune/search.py). The contract sits here, below the run, so the provider
that is handed a screener never imports the run that made it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from orchestrator.compile_ahead.feasibility import Feasibility
from orchestrator.compile_ahead.variants import VariantCheck
from protocol.worker import ScreenedVariant


@dataclass(frozen=True)
class ScreeningResult:
    """A screened variant as the provider sees it: its label, the outcome and its medians."""

    label: str
    source: str
    variant: ScreenedVariant
    ahead: VariantCheck | None = None  # its compile ahead, when the target had one

    @property
    def ok(self) -> bool:
        return self.variant.status == "ok"

    @property
    def infeasible(self) -> Feasibility | None:
        """The compile-ahead verdict that kept it off the GPU (its resource named), or None."""
        return self.ahead.feasibility if self.ahead is not None and self.ahead.feasibility.infeasible else None


class Screener(Protocol):
    async def screen(self, variants: list[tuple[str, str]], *, observe: bool = False) -> list[ScreeningResult]:
        """Screen (label, source) pairs; returns one result per pair, in order. An empty list when the
        screening worker itself failed (the provider then proposes without it). With `observe`, each
        result also carries the integer locals of the variant's functions per case (a per-shape table's
        keys and values; sandbox_worker/observe.py)."""
        ...
