"""What the run already refused, so that no round is spent on it again, whichever provider proposes it.

A source compile ahead refused (over the device's limits), one whose build failed in its worker, and a variant a
screening refused (`build_failed`: held back by compile ahead or failed to build in the screening worker) are
refused by their normalized digest (orchestrator/source_digest.py: a comment or whitespace change is the same
source); a proposal that states its configuration (the tuner's) is refused also when the run's infeasible store
rules that configuration out. Such a proposal never reaches a worker: the loop records it on the slot's record
(`ExperimentRecord.refused_proposals`) and asks the provider again, at most `MAX_REFUSED_IN_A_ROW` times per slot;
a provider that proposes only refused things ends the round. Every refusal is rebuilt from the records on
`--resume` with the same functions (`refusals_in`, `screening_refusals`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.compile_ahead.ahead import STORE_NAME, refused_configuration
from orchestrator.source_digest import normalized_digest
from protocol.bundle import Target
from protocol.results import DecisionStatus, EvaluationStatus, ExperimentRecord, RefusedProposal

if TYPE_CHECKING:
    from orchestrator.compile_ahead.store import InfeasibleStore
    from orchestrator.providers.base import Proposal

MAX_REFUSED_IN_A_ROW = 3  # proposals refused in a row for one slot before the round ends
SCREENING_LOG = "screening.jsonl"


class OnlyRefused(Exception):
    """The provider proposed only refused things for a slot, `MAX_REFUSED_IN_A_ROW` in a row: the round ends."""

    def __init__(self, refused: list[RefusedProposal]) -> None:
        super().__init__(f"{len(refused)} proposal(s) in a row repeated what the run already refused")
        self.refused = refused


def refusal_of(record: ExperimentRecord) -> str | None:
    """Why a candidate's source is refused from now on: compile ahead kept it off the device, or its own run
    failed to build (deterministic: the same source fails again); None for everything else."""
    if record.decision is None or record.decision.status is DecisionStatus.DUPLICATE or not record.normalized_sha256:
        return None
    candidate = record.candidate_evaluation
    if candidate is not None and candidate.status is EvaluationStatus.BUILD_FAILED:
        return f"{record.experiment_id}: {candidate.reason or 'build failed'}"
    return None


def refusals_in(records: Sequence[ExperimentRecord]) -> dict[str, str]:
    """Normalized digest -> why, from experiment records: refused candidates and the proposals refused before them."""
    refused: dict[str, str] = {}
    for record in records:
        why = refusal_of(record)
        if why is not None:
            refused.setdefault(record.normalized_sha256, why)
        for proposal in record.refused_proposals:
            refused.setdefault(proposal.normalized_sha256, proposal.reason)
    return refused


def screening_refusal(screen_id: str, variant_id: str, label: str, status: str, reason: str) -> str | None:
    """Why a screened variant's source is refused from now on (its build failed or compile ahead held it back)."""
    if status != "build_failed":
        return None
    return f"screening {screen_id} {variant_id} ({label}): build_failed: {reason}"


def screening_refusals(output_dir: Path) -> dict[str, str]:
    """Normalized digest -> why, from the run's screening.jsonl (lines written before digests were kept are
    skipped: their variants are found again by the provider's own memory)."""
    refused: dict[str, str] = {}
    try:
        lines = (output_dir / SCREENING_LOG).read_text(encoding="utf-8").splitlines()
    except OSError:
        return refused
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if not isinstance(entry, dict) or not isinstance(entry.get("normalized_sha256"), str):
            continue
        why = screening_refusal(str(entry.get("screen_id")), str(entry.get("variant")), str(entry.get("label")),
                                str(entry.get("status")), str(entry.get("reason", "")))
        if why is not None:
            refused.setdefault(entry["normalized_sha256"], why)
    return refused


def known_refusal(refused: Mapping[str, str], store: InfeasibleStore | None, proposal: Proposal,
                  target: Target) -> str | None:
    """Why `proposal` is refused before any worker (None: it goes on to dedup and its workers): its source was
    refused before, or the configuration it states is one the infeasible store rules out."""
    why = refused.get(normalized_digest(proposal.source))
    if why is not None:
        return why
    if proposal.configuration and store is not None:
        found = refused_configuration(store, proposal.source, proposal.configuration, target)
        if found is not None:
            knobs, resource = found
            return (f"configuration {dict(proposal.configuration)} is ruled out by the infeasible {knobs} "
                    f"({resource}) in {STORE_NAME}")
    return None
