"""Per-evaluation facts the worker hands to harness code: the random seed, the scratch dir, the phase.

The orchestrator sends a fresh seed with every verify/benchmark/profile command; harnesses must draw
their inputs from `evaluation_seed()` and never from a fixed seed, so a candidate cannot memoize outputs.
"""

from __future__ import annotations

import os
from pathlib import Path

_state: dict[str, object] = {"seed": None, "phase": None, "timing_mode": None}


def set_command_context(*, seed: int | None, phase: str | None, timing_mode: str | None = None) -> None:
    """Called by the worker before every harness call."""
    _state["seed"] = seed
    _state["phase"] = phase
    _state["timing_mode"] = timing_mode


def evaluation_seed(default: int | None = None) -> int:
    """The seed the orchestrator sent for the current command.

    Outside a worker (a harness unit test), `default` is used; with no default this raises, because a
    silently fixed seed is exactly what a memoizing candidate exploits.
    """
    seed = _state["seed"]
    if seed is None:
        if default is None:
            raise RuntimeError("no evaluation seed: call inside a tlx-agent worker or pass default=")
        return default
    return int(seed)  # type: ignore[call-overload]


def current_phase() -> str | None:
    return _state["phase"]  # type: ignore[return-value]


def timing_mode() -> str | None:
    """The timing mode the orchestrator fixed for this benchmark's case ("events", "cuda_graph"), or None when
    the run has not fixed one yet (its first measurement of the case, where "auto" decides)."""
    return _state["timing_mode"]  # type: ignore[return-value]


def scratch_dir() -> Path:
    """The worker's private writable directory (its cwd); a temp dir outside a worker."""
    value = os.environ.get("TLX_WORKER_SCRATCH")
    if value:
        return Path(value)
    import tempfile

    return Path(tempfile.gettempdir())
