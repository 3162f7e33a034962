"""Read a batch manifest (JSON or TOML) and resolve each job into the optimize arguments it runs with.

Every problem is one `ManifestError` naming the file, the job and the field or option, raised before any
job runs. A job's files are not checked for existence here: a job with a broken bundle is that job's
failure (recorded in batch.json), not the batch's.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.batch.options import (
    OptimizeArguments,
    OptionError,
    check_argv,
    optimize_flags,
    optimize_parser,
    option_argv,
)
from protocol.batch import BatchManifest
from protocol.bundle import runs_on_gpu

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 has the same parser as the tomli package
    import tomli as tomllib


class ManifestError(ValueError):
    """The manifest cannot be run; the message names the file, the job and the field."""


@dataclass(frozen=True)
class ResolvedJob:
    """One job ready to run: optimize's arguments except --output-dir, paths absolute."""

    job_id: str
    kernel: str
    optimize_args: tuple[str, ...]
    cwd: str  # the manifest's folder: relative paths in the job's own output mean the same there
    needs_gpu: bool


def parse_manifest_text(text: str, suffix: str) -> Any:
    """The manifest's raw data: TOML for a .toml file, JSON otherwise."""
    return tomllib.loads(text) if suffix.lower() == ".toml" else json.loads(text)


def _job_label(raw: Any, index: int) -> str:
    try:
        return f"jobs[{index}] (job {raw['jobs'][index]['job_id']!r})"
    except (KeyError, IndexError, TypeError):
        return f"jobs[{index}]"


def describe_validation_error(raw: Any, error: ValidationError) -> str:
    """Each problem as `jobs[2] (job 'b'): field 'kernel': Field required`, joined with '; '."""
    parts = []
    for problem in error.errors():
        location = list(problem["loc"])
        where = ""
        if len(location) >= 2 and location[0] == "jobs" and isinstance(location[1], int):
            where = _job_label(raw, location[1]) + ": "
            location = location[2:]
        field = ".".join(str(part) for part in location) or "jobs"
        parts.append(f"{where}field {field!r}: {problem['msg']}")
    return "; ".join(parts)


def _resolve(base_dir: Path, value: str) -> Path:
    return base_dir / Path(value).expanduser()


def _needs_gpu(target_path: Path) -> bool:
    """A job needs a GPU when its target.json names a GPU backend (the run's own test, `runs_on_gpu`: any other
    backend runs on the CPU interpreter); an unreadable target is the job's own failure later, so it is placed
    on a CPU lane and fails there cheaply."""
    try:
        return runs_on_gpu(str(json.loads(target_path.read_text(encoding="utf-8")).get("backend", "cpu")))
    except (OSError, ValueError, AttributeError):
        return False


def resolve_jobs(manifest: BatchManifest, base_dir: Path, define: OptimizeArguments, label: str) -> list[ResolvedJob]:
    """Each job's optimize argv: its files, then defaults.options overridden by its own options."""
    parser = optimize_parser(define)
    flags = optimize_flags(parser)
    resolved = []
    for index, job in enumerate(manifest.jobs):
        where = f"manifest {label}: jobs[{index}] (job {job.job_id!r})"
        files = ["--kernel", _resolve(base_dir, job.kernel), "--harness", _resolve(base_dir, job.harness),
                 "--cases", _resolve(base_dir, job.cases), "--target", _resolve(base_dir, job.target)]
        if job.bundle_lock:
            files += ["--bundle-lock", _resolve(base_dir, job.bundle_lock)]
        try:
            argv = [*map(str, files), *option_argv({**manifest.defaults.options, **job.options}, flags, base_dir)]
            check_argv(parser, [*argv, "--output-dir", "OUTPUT"])
        except OptionError as exc:
            raise ManifestError(f"{where}: {exc}") from None
        resolved.append(ResolvedJob(job.job_id, job.kernel, tuple(argv), str(base_dir),
                                    _needs_gpu(_resolve(base_dir, job.target))))
    return resolved


def load_manifest(path: Path, define: OptimizeArguments) -> tuple[BatchManifest, list[ResolvedJob]]:
    """Read, validate and resolve the manifest at `path` (relative job paths: from its folder)."""
    label = str(path)
    try:
        raw = parse_manifest_text(path.read_text(encoding="utf-8"), path.suffix)
    except OSError as exc:
        raise ManifestError(f"manifest {label}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError both are
        raise ManifestError(f"manifest {label}: not valid {'TOML' if path.suffix == '.toml' else 'JSON'}: "
                            f"{exc}") from None
    try:
        manifest = BatchManifest.model_validate(raw)
    except ValidationError as exc:
        raise ManifestError(f"manifest {label}: {describe_validation_error(raw, exc)}") from None
    return manifest, resolve_jobs(manifest, path.resolve().parent, define, label)
