"""Unfinished experiments' artifacts move aside (never deleted) so their ids can be evaluated from scratch."""

from __future__ import annotations

from pathlib import Path


def move_aside_unfinished(output_dir: Path, finished: set[str], resume_count: int) -> list[str]:
    """Rename every `experiments/<id>/` whose record was never written to `experiments/<id>.interrupted-<n>/`;
    returns the new paths. A finished experiment's directory is never touched."""
    experiments = output_dir / "experiments"
    moved: list[str] = []
    if not experiments.is_dir():
        return moved
    for directory in sorted(experiments.iterdir()):
        if not directory.is_dir() or ".interrupted-" in directory.name or directory.name in finished:
            continue
        target = experiments / f"{directory.name}.interrupted-{resume_count}"
        directory.rename(target)
        moved.append(str(target))
    return moved
