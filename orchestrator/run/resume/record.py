"""Read a dead run's output directory back for a resume, or refuse with the one reason it cannot be resumed.

The finished experiments are those in experiments.json (written atomically after each one); the journal says
where commits go, which commits were recorded, whether the rounds had ended and how long the run has
already spent. A torn last journal line is moved to `journal.jsonl.torn-<n>` and cut off, so the resumed
run appends to a readable journal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.bundle.inputs import FrozenBundle, check_frozen, sha256_file
from orchestrator.ledger.records import JournalEntry, RecordsError, load_journal, load_output_dir
from protocol.bundle import describe_validation_error
from protocol.manifest import RECORD_FORMAT, RunManifest
from protocol.results import CommitRecord, ExperimentRecord


class ResumeRefused(Exception):
    """The run cannot be resumed; the message says why (exit 1)."""


@dataclass
class RecordedRun:
    """What a dead run left: its manifest, finished experiments and the journal facts a resume needs."""

    output_dir: Path
    manifest: RunManifest
    bundle: FrozenBundle
    experiments: list[ExperimentRecord]
    journal: list[JournalEntry]
    warnings: list[str] = field(default_factory=list)

    @property
    def commits(self) -> list[CommitRecord]:
        return [CommitRecord.model_validate(entry.model_extra["record"]) for entry in self.journal
                if entry.event == "commit" and entry.model_extra]

    def last_event(self, name: str) -> dict[str, Any] | None:
        found = [entry for entry in self.journal if entry.event == name]
        return found[-1].model_dump() if found else None

    @property
    def resume_count(self) -> int:
        """How many times the run was resumed before this one."""
        return sum(entry.event == "run_resumed" for entry in self.journal)


def seconds_spent(journal: list[JournalEntry]) -> float:
    """Wall time the run's processes lived, as far as the journal saw: from each start or resume to the last
    event before the next one."""
    spent, session_start, last = 0.0, None, None
    for entry in journal:
        moment = float((entry.model_extra or {}).get("time", 0.0))
        if entry.event in ("run_started", "run_resumed"):
            if session_start is not None and last is not None:
                spent += max(0.0, last - session_start)
            session_start = moment
        last = moment
    if session_start is not None and last is not None:
        spent += max(0.0, last - session_start)
    return spent


def repair_journal(path: Path, resume_count: int) -> list[str]:
    """Cut off a torn last line (moved to `journal.jsonl.torn-<n>`); end a complete last line with a newline."""
    data = path.read_bytes()
    if not data:
        return []
    body, _, tail = data.rstrip(b"\n").rpartition(b"\n")
    try:
        parsed = json.loads(tail)
        complete = isinstance(parsed, dict)
    except ValueError:
        complete = False
    if complete:
        if not data.endswith(b"\n"):
            with path.open("ab") as handle:
                handle.write(b"\n")
        return []
    torn = path.with_name(f"{path.name}.torn-{resume_count + 1}")
    torn.write_bytes(tail)
    with path.open("r+b") as handle:
        handle.truncate(len(body) + 1 if body else 0)
    return [f"{path}: the last line was torn (the run died while writing it); it was moved to {torn} and dropped"]


def _manifest(path: Path) -> RunManifest:
    if not path.is_file():
        raise ResumeRefused(f"{path} does not exist; --resume takes the output directory of a run")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ResumeRefused(f"{path} cannot be read ({exc}); the run cannot be resumed") from None
    found = payload.get("record_format", 0) if isinstance(payload, dict) else None
    if found != RECORD_FORMAT:
        raise ResumeRefused(f"{path} was written in record format {found!r}, this tlx-agent resumes format "
                            f"{RECORD_FORMAT} only; run it again instead")
    try:
        return RunManifest.model_validate(payload)
    except ValidationError as exc:
        raise ResumeRefused(describe_validation_error(path, exc) + "; the run cannot be resumed") from None


def _check_finished_artifacts(experiments: list[ExperimentRecord]) -> None:
    """A finished experiment's source must still be what its record says: the resumed run builds on it."""
    for record in experiments:
        if not record.source_path or not record.source_sha256:
            continue
        path = Path(record.source_path)
        try:
            digest = sha256_file(path)
        except OSError:
            digest = None
        if digest != record.source_sha256:
            raise ResumeRefused(f"{path} (the source of the finished experiment {record.experiment_id}) is missing "
                                "or changed since it was recorded; the run cannot be resumed")


def read_recorded_run(output_dir: Path) -> RecordedRun:
    output_dir = output_dir.expanduser().resolve()
    if not output_dir.is_dir():
        raise ResumeRefused(f"--resume {output_dir} is not a directory; pass the output directory of a run")
    manifest = _manifest(output_dir / "run.json")
    if (output_dir / "result.json").exists():
        raise ResumeRefused(f"the run in {output_dir} already finished (result.json exists); there is nothing to "
                            "resume: start a new run with --prior-run to build on it")
    journal_path = output_dir / "journal.jsonl"
    if not journal_path.is_file():
        raise ResumeRefused(f"{journal_path} does not exist; the run cannot be resumed")
    warnings: list[str] = []
    try:
        earlier = sum(line.startswith('{"') and '"event": "run_resumed"' in line
                      for line in journal_path.read_text(encoding="utf-8", errors="replace").splitlines())
        warnings += repair_journal(journal_path, earlier)
        if (output_dir / "experiments.json").is_file():
            records = load_output_dir(output_dir)
            experiments, journal = records.experiments, records.journal
            warnings += records.warnings
        else:
            experiments = []
            journal, torn = load_journal(journal_path)
            warnings += torn
    except RecordsError as exc:
        raise ResumeRefused(f"{exc}; the run cannot be resumed") from None
    for entry in journal:
        if entry.event == "run_finished":
            raise ResumeRefused(f"the run in {output_dir} already finished (journal line {entry.line}); there is "
                                "nothing to resume")
        if entry.event == "run_aborted":
            message = (entry.model_extra or {}).get("message", "")
            raise ResumeRefused(f"the run in {output_dir} was aborted ({message}); a resume would stop the same way: "
                                "fix the cause and start a new run")
    bundle = FrozenBundle(directory=Path(manifest.bundle.directory), files=dict(manifest.bundle.sha256),
                          sources=dict(manifest.bundle.sources))
    changed = check_frozen(bundle) if bundle.directory.is_dir() else "bundle/"
    if changed is not None:
        raise ResumeRefused(f"the frozen bundle file {bundle.path(changed)} no longer matches its sha256 in "
                            f"{output_dir / 'run.json'}; the run cannot be resumed on other inputs")
    _check_finished_artifacts(experiments)
    return RecordedRun(output_dir=output_dir, manifest=manifest, bundle=bundle, experiments=experiments,
                       journal=journal, warnings=warnings)
