"""Each evaluation on disk as soon as it ends, so that a resumed run never runs a finished one again.

An experiment's record (experiments/<id>/result.json) is written once its last worker has ended; a run killed
between its workers would otherwise lose the ones that had finished. Each is written at once to
experiments/<id>/evaluations/<tag>.json (atomically) with the digest of the source it measured. A resume
moves an unfinished experiment aside (experiments/<id>.interrupted-<n>/) and `reusable_evaluations` reads
them back: the same experiment, tag and source is taken from the record instead of run again.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from orchestrator.ledger.artifacts import write_json
from protocol.results import FinishedEvaluation

FOLDER = "evaluations"


def write_finished(experiment_dir: Path, finished: FinishedEvaluation) -> Path:
    path = experiment_dir / FOLDER / f"{finished.tag}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, finished)
    return path


def _resume_number(directory: Path) -> int:
    try:
        return int(directory.name.rsplit(".interrupted-", 1)[1])
    except (IndexError, ValueError):
        return -1


def reusable_evaluations(output_dir: Path) -> tuple[dict[tuple[str, str], FinishedEvaluation], list[str]]:
    """(experiment id, tag) -> the finished evaluation kept in a moved-aside experiment (the latest resume's
    wins), and one warning per file that does not read (it is run again)."""
    found: dict[tuple[str, str], FinishedEvaluation] = {}
    warnings: list[str] = []
    aside = sorted((output_dir / "experiments").glob("*.interrupted-*"), key=_resume_number)
    for directory in aside:
        for path in sorted((directory / FOLDER).glob("*.json")):
            try:
                finished = FinishedEvaluation.model_validate_json(path.read_text(encoding="utf-8"))
            except (OSError, ValidationError) as exc:
                warnings.append(f"{path}: unreadable ({str(exc).splitlines()[0][:200]}); that evaluation runs again")
                continue
            found[(finished.experiment_id, finished.tag)] = finished
    return found, warnings
