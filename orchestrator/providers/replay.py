"""`--provider replay`: candidates from a directory, in sorted order (001.py, 002.py, ...).

An optional `NNN.json` beside a source holds its metadata. Proposal k is the k-th file; when the
directory is exhausted the run stops with `provider_exhausted`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from orchestrator.providers.base import (
    Proposal,
    ProposalContext,
    ProposalError,
    ProviderConfigError,
    ProviderExhausted,
)
from orchestrator.text import one_line
from protocol.results import CandidateMetadata, ExperimentRecord


class ReplayProvider:
    name = "replay"
    concurrent = False

    def __init__(self, directory: Path) -> None:
        if not directory.is_dir():
            raise ProviderConfigError(f"--replay-dir {directory} is not a directory; pass the folder holding 001.py, 002.py, ...")
        self.sources = sorted(p for p in directory.iterdir() if p.suffix == ".py" and p.is_file())
        if not self.sources:
            raise ProviderConfigError(f"--replay-dir {directory} holds no .py candidate files")
        self.next_index = 0

    async def propose(self, context: ProposalContext) -> Proposal:
        if self.next_index >= len(self.sources):
            raise ProviderExhausted(f"replay directory exhausted after {len(self.sources)} candidates")
        path = self.sources[self.next_index]
        self.next_index += 1
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ProposalError(f"cannot read {path.name}: {exc}") from None
        return Proposal(source=source, metadata=self._metadata(path))

    def resume_from(self, history: Sequence[ExperimentRecord]) -> None:
        """A resumed run continues at the next unused file: each candidate record used one, and one more for
        each proposal the run refused before it (`--resume`)."""
        self.next_index = sum(record.proposals_made for record in history if record.round_index >= 1)

    @staticmethod
    def _metadata(path: Path) -> CandidateMetadata:
        sidecar = path.with_suffix(".json")
        if not sidecar.exists():
            return CandidateMetadata(change=f"replayed {path.name}")
        try:
            return CandidateMetadata.model_validate(json.loads(sidecar.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError, ValidationError) as exc:
            raise ProposalError(f"metadata {sidecar.name} is invalid: {one_line(exc, 200)}") from None

    async def aclose(self) -> None:
        return None
