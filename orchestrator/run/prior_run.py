"""`--prior-run DIR`: what an earlier run may contribute, read defensively and never written.

Source digests of every readable earlier experiment join the dedup set (recomputed from the files, never
taken from the record); at most a dozen sanitized outcomes reach prompts; the earlier winner is never
adopted (the current kernel is measured again as the new baseline).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.providers.bottleneck import finite_number
from orchestrator.providers.prompt import MAX_PRIOR_EVIDENCE
from orchestrator.providers.redaction import redact_secrets
from orchestrator.source_digest import normalized_digest
from orchestrator.text import one_line

MAX_PRIOR_JSON_BYTES = 8 * 1024 * 1024
MAX_PRIOR_EXPERIMENTS = 1000
MAX_PRIOR_SOURCE_BYTES = 4 * 1024 * 1024
MAX_PRIOR_WARNINGS = 20
EXPERIMENT_ID = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")


class PriorRunError(ValueError):
    """The prior run cannot be read at all (missing, oversized or malformed experiments.json)."""


@dataclass(frozen=True)
class PriorRun:
    """What a prior run contributes: digests to never re-evaluate and a few outcomes to learn from."""

    source_digests: frozenset[str]
    evidence: tuple[dict[str, Any], ...]
    warnings: list[str] = field(default_factory=list)


def _read_regular_file(path: Path, limit: int) -> bytes:
    """Read a regular file of at most `limit` bytes without following a FIFO or device into a hang."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(path, flags)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        if info.st_size > limit:
            raise OverflowError(f"{path} has {info.st_size} bytes; the limit is {limit}")
        chunks, remaining = [], limit + 1
        while remaining > 0:
            chunk = os.read(descriptor, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise OverflowError(f"{path} grew past the limit of {limit} bytes")
        return data
    finally:
        os.close(descriptor)


def _get(mapping: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(mapping, dict):
            return None
        mapping = mapping.get(key)
    return mapping


def load_prior_run(path: Path) -> PriorRun:
    """Read a finished run's `experiments.json` and kernels, trusting none of it.

    Only `experiment_id`, `decision.status/reason`, `metadata.hypothesis/change`, `aggregate_speedup` and
    `source_sha256` are read. Kernel sources come from `experiments/<id>/kernel.py` inside the run directory
    (ids must match `^[A-Za-z0-9_.-]{1,80}$`, resolved paths must stay inside); their hashes are recomputed.
    At most 12 non-baseline outcomes become prompt evidence. Nothing is written and no source is returned:
    a prior winner is never adopted, only recognised as already tried. Raises `PriorRunError` when the
    file itself is unusable; problems with single experiments become warnings.
    """
    given = Path(path).expanduser()
    run_dir = given.parent if given.name == "experiments.json" else given
    try:
        root = run_dir.resolve(strict=True)
    except OSError:
        raise PriorRunError(f"prior run directory {run_dir} does not exist") from None
    listing = root / "experiments.json"
    try:
        raw = _read_regular_file(listing, MAX_PRIOR_JSON_BYTES)
    except FileNotFoundError:
        raise PriorRunError(f"{listing} does not exist; --prior-run needs a finished run's output directory") from None
    except OverflowError:
        raise PriorRunError(f"{listing} is larger than {MAX_PRIOR_JSON_BYTES} bytes; refusing to import it") from None
    except OSError as exc:
        raise PriorRunError(f"{listing} cannot be read: {exc}") from None
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PriorRunError(f"{listing} is not valid JSON: {exc}") from None
    if isinstance(payload, dict) and isinstance(payload.get("experiments"), list):
        payload = payload["experiments"]
    if not isinstance(payload, list):
        raise PriorRunError(f"{listing} must hold a JSON list of experiments, got {type(payload).__name__}")
    if len(payload) > MAX_PRIOR_EXPERIMENTS:
        raise PriorRunError(f"{listing} lists {len(payload)} experiments; the limit is {MAX_PRIOR_EXPERIMENTS}")

    warnings: list[str] = []
    digests: set[str] = set()
    outcomes: list[dict[str, Any]] = []
    for index, entry in enumerate(payload):
        experiment_id = _get(entry, "experiment_id")
        if not isinstance(experiment_id, str) or not EXPERIMENT_ID.match(experiment_id) or experiment_id in {".", ".."}:
            warnings.append(f"experiment #{index}: unsafe or missing experiment_id {one_line(repr(experiment_id), 60)}; skipped")
            continue
        kernel = root / "experiments" / experiment_id / "kernel.py"
        try:
            resolved = kernel.resolve(strict=True)
            if not resolved.is_relative_to(root):
                raise PermissionError("resolves outside the prior run directory")
            source = _read_regular_file(resolved, MAX_PRIOR_SOURCE_BYTES)
        except FileNotFoundError:
            warnings.append(f"{experiment_id}: experiments/{experiment_id}/kernel.py is missing; its digest is unknown")
        except (OSError, OverflowError, RuntimeError) as exc:
            warnings.append(f"{experiment_id}: kernel.py skipped ({one_line(exc, 160)})")
        else:
            recomputed = hashlib.sha256(source).hexdigest()
            recorded = _get(entry, "source_sha256")
            if isinstance(recorded, str) and recorded and recorded != recomputed:
                warnings.append(f"{experiment_id}: recorded source_sha256 does not match kernel.py; using the recomputed hash")
            digests.add(normalized_digest(source.decode("utf-8", errors="replace")))
        status = _get(entry, "decision", "status")
        if experiment_id == "baseline" or status == "baseline":
            continue
        speedup = finite_number(_get(entry, "aggregate_speedup"))
        outcomes.append(
            {
                "experiment_id": experiment_id,
                "status": one_line(status if isinstance(status, str) else "unknown", 40),
                "reason": redact_secrets(one_line(_get(entry, "decision", "reason") or "", 500)),
                "hypothesis": redact_secrets(one_line(_get(entry, "metadata", "hypothesis") or "", 240)),
                "change": redact_secrets(one_line(_get(entry, "metadata", "change") or "", 240)),
                "aggregate_speedup": speedup,
            }
        )
    if len(warnings) > MAX_PRIOR_WARNINGS:
        extra = len(warnings) - MAX_PRIOR_WARNINGS
        warnings = warnings[:MAX_PRIOR_WARNINGS] + [f"… and {extra} more warnings"]
    return PriorRun(
        source_digests=frozenset(digests),
        evidence=tuple(outcomes[-MAX_PRIOR_EVIDENCE:]),
        warnings=warnings,
    )
