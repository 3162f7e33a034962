"""Seeded random inputs for harness `verify` cases.

Values are drawn from the orchestrator's per-command seed (`context.evaluation_seed()`), never a fixed
seed, so a candidate cannot memoize outputs across runs. Only the standard library is imported at
module level; torch is imported inside the functions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from sandbox_worker.harness_kit.context import evaluation_seed

DEFAULT_INT_RANGE = (-100, 100)


def derive_seed(seed: int, salt: int) -> int:
    """A 63-bit seed from (seed, salt); hashed so that (s, 1) and (s + 1, 0) do not collide."""
    digest = hashlib.sha256(f"tlx-agent:{seed}:{salt}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def make_generator(device: Any, *, salt: int = 0) -> Any:
    """A `torch.Generator` on `device` seeded from the orchestrator's evaluation seed and `salt`.

    Raises outside a worker unless a seed was set (`context.set_command_context`): a silently fixed
    seed is what a memoizing candidate exploits. Use different salts for different tensors or trials.
    """
    import torch

    generator = torch.Generator(device=torch.device(device))
    generator.manual_seed(derive_seed(evaluation_seed(), salt))
    return generator


def random_tensor(
    shape: Sequence[int],
    dtype: Any,
    device: Any,
    generator: Any,
    *,
    low: float | None = None,
    high: float | None = None,
) -> Any:
    """Uniform random values in [low, high): floats default to [-1, 1) (never all zeros), integers to
    [-100, 100) clipped to the dtype's range, bool to {False, True}. Low-precision floats are drawn in
    fp32 and rounded, so every dtype gets the same distribution."""
    import torch

    shape = tuple(shape)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator, device=device).bool()
    if dtype.is_floating_point:
        low = -1.0 if low is None else low
        high = 1.0 if high is None else high
        draw_dtype = torch.float64 if dtype == torch.float64 else torch.float32
        values = torch.rand(shape, generator=generator, device=device, dtype=draw_dtype)
        return (values * (high - low) + low).to(dtype)
    if dtype.is_complex:
        raise TypeError("random_tensor does not draw complex values; draw real and imaginary parts")
    info = torch.iinfo(dtype)
    int_low = max(int(DEFAULT_INT_RANGE[0] if low is None else low), info.min)
    int_high = min(int(DEFAULT_INT_RANGE[1] if high is None else high), info.max)
    values = torch.randint(int_low, int_high, shape, generator=generator, device=device, dtype=torch.int64)
    return values.to(dtype)
