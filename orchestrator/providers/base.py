"""The provider interface: what every candidate generator gets and must return.

A provider proposes source; it never declares a candidate correct or faster. The context carries
everything later providers need (incumbent source and measurements, profiles, earlier decisions), and what the
run lends a provider that can use it (screening, the remembered infeasible configs, the gate's threshold).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from orchestrator.compile_ahead.store import InfeasibleRecords
from orchestrator.providers.screening import Screener
from protocol.autotune import AutotuneChoice
from protocol.bundle import Case, Target
from protocol.results import CandidateMetadata, Evaluation, ExperimentRecord, RefusedProposal


class ProviderExhausted(Exception):
    """The provider has nothing more to propose; the run stops with `provider_exhausted`. `explanation_json`, when
    set, is a JSON object result.json carries as `provider_explanation` (the tuner's: what it looked for)."""

    explanation_json: dict[str, Any] | None = None


class ProposalError(Exception):
    """This proposal is unusable (malformed reply, generator failed); the experiment becomes `failed`."""


class ProviderConfigError(Exception):
    """The provider cannot start at all (missing binary, missing model); exit 1 with this message."""


@dataclass(frozen=True)
class Proposal:
    source: str
    metadata: CandidateMetadata
    # the launch configuration the source sets, by the names compile ahead knows (BLOCK_SIZE, num_warps,
    # num_stages, ...), when the provider knows it (the tuner): the run refuses one its infeasible store rules out
    configuration: Mapping[str, int] | None = None


@dataclass(frozen=True)
class ProposalContext:
    experiment_id: str
    round_index: int
    slot_index: int
    kernel_name: str
    incumbent_id: str
    incumbent_source: str
    incumbent_evaluation: Evaluation | None
    baseline_evaluation: Evaluation | None
    cases: tuple[Case, ...]
    target: Target
    history: tuple[ExperimentRecord, ...]
    excluded_digests: frozenset[str]
    reference_kernel_excerpt: str | None = None
    prior_evidence: tuple[dict[str, Any], ...] = ()
    workspace_root: Path | None = None
    deadline_seconds: float = 600.0
    screener: Screener | None = None  # where the run screens families of variants (the tuner's joint search)
    infeasible: InfeasibleRecords | None = None  # configs compile ahead found over the target's limits
    min_speedup: float = 1.0  # the promotion gate's threshold (Budget.min_speedup): a smaller gain is not promoted
    # the gate's per-case bar (Budget.max_case_regression): a protected case slower than 1 - this is not promoted
    max_case_regression: float = 1.0
    # this slot's proposals the run refused before any worker, as already refused (orchestrator/run/refusals.py):
    # the provider is asked again and should propose something else
    refused: tuple[RefusedProposal, ...] = ()
    # the untouched kernel's own autotune choices, which the run pins in every worker (orchestrator/autotune/):
    # an edit of such a list's entries cannot change the configuration that runs
    autotune_choices: tuple[AutotuneChoice, ...] = ()


class CandidateProvider(Protocol):
    name: str
    # True when several proposals of one round may be generated at the same time.
    concurrent: bool

    async def propose(self, context: ProposalContext) -> Proposal:
        """Return one complete replacement source; raise ProposalError or ProviderExhausted."""
        ...

    async def aclose(self) -> None:
        ...
