"""Output poisoning: fill output buffers with values no kernel should leave before each call.

A kernel that skips its work, or reads uninitialized memory, then leaves the poison behind instead of a
stale correct answer from an earlier call. `checks` poisons preallocated outputs before each verify
call; `timing` poisons the previous call's output before each timed call when a `check_last` re-checks
the last one. Only the standard library is imported at module level; torch inside the functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


def _int_sentinel(dtype: Any) -> int:
    import torch

    info = torch.iinfo(dtype)
    return info.min if info.min < 0 else info.max


def poison_(outputs: Any) -> Any:
    """Fill output buffers in place with values no kernel should leave: NaN for floating point, the
    most negative value (unsigned: the largest) for integers, True for bool. Accepts a tensor or a
    tuple/list/dict of them (other values are left alone); returns its argument."""
    import torch

    if isinstance(outputs, torch.Tensor):
        if outputs.is_floating_point() or outputs.is_complex():
            outputs.fill_(math.nan)
        elif outputs.dtype == torch.bool:
            outputs.fill_(True)
        else:
            outputs.fill_(_int_sentinel(outputs.dtype))
    elif isinstance(outputs, (tuple, list)):
        for item in outputs:
            poison_(item)
    elif isinstance(outputs, dict):
        for item in outputs.values():
            poison_(item)
    return outputs


class PoisoningCaller:
    """Calls `fn`; when enabled, `poison_previous()` poisons the previous call's output, so a call
    that skips its work leaves poison for `check_last` to find (see `timing`)."""

    def __init__(self, fn: Callable[[], Any], *, enabled: bool) -> None:
        self._fn = fn
        self._enabled = enabled
        self._previous: Any = None

    def poison_previous(self) -> None:
        if self._previous is not None:
            poison_(self._previous)

    def __call__(self) -> Any:
        output = self._fn()
        if self._enabled:
            self._previous = output
        return output
