"""The output directory: layout, atomic JSON writes, the append-only journal, sources and patches."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from protocol.journal import JOURNAL_EVENT_ADAPTER


class OutputDirError(Exception):
    """The output directory cannot be used; the message says why and what to do."""


def prepare_output_dir(path: Path) -> Path:
    """Create or accept an empty directory; refuse one that already holds anything."""
    path = path.resolve()
    if path.exists():
        if not path.is_dir():
            raise OutputDirError(f"--output-dir {path} exists and is not a directory; pass a new directory")
        entries = list(path.iterdir())
        if any(e.name in ("run.json", "result.json", "journal.jsonl") for e in entries):
            raise OutputDirError(f"--output-dir {path} already holds a run; choose a new directory or empty it")
        if entries:
            raise OutputDirError(f"--output-dir {path} is not empty; choose a new directory or empty it")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"--output-dir {path} cannot be created: {exc}") from None
    return path


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(path: Path, value: Any) -> Path:
    """Write atomically (temp file, fsync, rename) so a crash never leaves half a JSON document, and a power
    loss never a renamed file whose data did not reach the disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps(to_jsonable(value), indent=2, sort_keys=True, allow_nan=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    return path


def unified_patch(before: str, after: str, before_name: str, after_name: str) -> str:
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=before_name, tofile=after_name)
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    return text


class RunArtifacts:
    """Knows where everything of one run goes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.journal_path = root / "journal.jsonl"

    def experiment_dir(self, experiment_id: str) -> Path:
        path = self.root / "experiments" / experiment_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    def journal(self, event: str, **fields: Any) -> None:
        """Append one event; one that `protocol.journal.JournalEvent` does not describe raises ValidationError
        (a caller's mistake) before anything is written."""
        record = JOURNAL_EVENT_ADAPTER.validate_python({"time": time.time(), "event": event, **to_jsonable(fields)})
        line = json.dumps(record.model_dump(mode="json"), sort_keys=True, allow_nan=False)
        with self.journal_path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def write_source(self, experiment_id: str, source: str) -> Path:
        path = self.experiment_dir(experiment_id) / "kernel.py"
        path.write_text(source, encoding="utf-8")
        return path

    def remove_unrecorded(self, experiment_ids: list[str], recorded: set[str]) -> None:
        """The sources written ahead for experiments that never ran (the run stopped within their round): their
        kernel.py goes, and their folder when nothing else is in it, so every experiment folder left has a record."""
        for experiment_id in experiment_ids:
            if experiment_id in recorded:
                continue
            directory = self.root / "experiments" / experiment_id
            (directory / "kernel.py").unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                directory.rmdir()

    def write_patches(self, experiment_id: str, source: str, parent_id: str, parent_source: str,
                      baseline_source: str) -> tuple[Path, Path]:
        directory = self.experiment_dir(experiment_id)
        incremental = directory / "incremental.patch"
        incremental.write_text(unified_patch(parent_source, source, f"experiments/{parent_id}/kernel.py",
                                             f"experiments/{experiment_id}/kernel.py"), encoding="utf-8")
        cumulative = directory / "cumulative.patch"
        cumulative.write_text(unified_patch(baseline_source, source, "experiments/baseline/kernel.py",
                                            f"experiments/{experiment_id}/kernel.py"), encoding="utf-8")
        return incremental, cumulative
