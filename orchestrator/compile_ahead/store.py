"""Infeasible configs remembered across runs: one JSON line per config, appended and flushed at once.

A later run asks `blocking(scope, knobs)` before it compiles or measures a config: a config recorded as
infeasible, or a neighbour of one in the same direction (orchestrator/compile_ahead/feasibility.py), is
skipped with the recorded reason. The scope (signature.kernel_scope) ties an entry to the kernel function's
text and the target, so an edited kernel or another GPU starts afresh. A torn last line (a crash mid-write)
is skipped on reading; anything else that is not an entry is an error, not silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from pydantic import Field, ValidationError

from orchestrator.compile_ahead.feasibility import PRUNABLE, Feasibility, is_neighbour, pruning_knobs
from orchestrator.compile_ahead.models import Frozen


class InfeasibleEntry(Frozen):
    scope: str  # signature.kernel_scope: kernel text digest and target
    knobs: dict[str, int]  # the config's integer settings (ConfigSpec.knobs)
    resource: str  # models.RESOURCES
    reason: str  # e.g. "shared memory 294912 B > 232448 B limit (sm_90)"
    triton_version: str | None = None
    recorded_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def covers(self, scope: str, knobs: Mapping[str, int]) -> bool:
        """This entry rules out `knobs`: the same config, or (for a prunable resource) a larger neighbour."""
        if scope != self.scope:
            return False
        if dict(knobs) == self.knobs:
            return True
        return self.resource in PRUNABLE and is_neighbour(pruning_knobs(self.knobs, self.resource), knobs)


class StoreCorrupt(ValueError):
    """A line of the store, other than a torn last one, is not an entry."""


class InfeasibleRecords(Protocol):
    """What reading remembered configs needs of a store (ahead.py `remembered_for`, the tuner through its
    proposal context): the entries so far, read again on each call so a config recorded since is included."""

    def entries(self) -> list[InfeasibleEntry]:
        ...


class InfeasibleStore:
    """The JSON-lines file at `path` (created on the first `add`)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __repr__(self) -> str:
        return f"InfeasibleStore({str(self.path)!r})"

    def entries(self) -> list[InfeasibleEntry]:
        return list(self._read())

    def _read(self) -> Iterator[InfeasibleEntry]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        lines = text.split("\n")
        torn = lines[-1] if lines[-1] else None  # text after the last newline: a write cut short
        for number, line in enumerate(lines[:-1], start=1):
            if not line.strip():
                continue
            try:
                yield InfeasibleEntry.model_validate_json(line)
            except ValidationError as exc:
                raise StoreCorrupt(f"{self.path}:{number} is not an infeasible-config entry: {exc}") from None
        if torn is not None:
            try:
                yield InfeasibleEntry.model_validate_json(torn)
            except ValidationError:
                return

    def add(self, entry: InfeasibleEntry) -> None:
        """Append one entry; an entry equal in scope and knobs to a recorded one is not written twice."""
        if any(known.scope == entry.scope and known.knobs == entry.knobs for known in self._read()):
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._mend_torn_line()
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry.model_dump(mode="json"), sort_keys=True) + "\n")
            handle.flush()

    def _mend_torn_line(self) -> None:
        """Before appending: end a complete last entry with its newline, cut away a torn one."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        if not data or data.endswith(b"\n"):
            return
        tail = data[data.rfind(b"\n") + 1:]
        try:
            InfeasibleEntry.model_validate_json(tail)
        except ValidationError:
            with self.path.open("r+b") as handle:
                handle.truncate(len(data) - len(tail))
            return
        with self.path.open("ab") as handle:
            handle.write(b"\n")

    def record(self, scope: str, knobs: Mapping[str, int], feasibility: Feasibility,
               triton_version: str | None = None) -> InfeasibleEntry | None:
        """Remember an infeasible verdict (others are not stored); returns the entry written or found."""
        if not feasibility.infeasible or feasibility.resource is None:
            return None
        entry = InfeasibleEntry(scope=scope, knobs=dict(knobs), resource=feasibility.resource,
                                reason=feasibility.reason, triton_version=triton_version)
        self.add(entry)
        return entry

    def blocking(self, scope: str, knobs: Mapping[str, int]) -> InfeasibleEntry | None:
        """The first entry that rules out `knobs` in `scope`, or None."""
        return next((entry for entry in self._read() if entry.covers(scope, knobs)), None)
