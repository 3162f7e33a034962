"""Cheat (b) rewriting the judge: the last-output re-check and the output poisoner are neutered through `gc`.

Technique: the timing kit re-checks only the last timed output, through a closure made by
`checks.last_output_check`, and poisons the previous output through a `PoisoningCaller`. Whenever the kernel
is called on input tensors it has not seen before (the first call of a benchmark is an untimed warm-up
call), it walks `gc.get_objects()`: every `PoisoningCaller` is disabled, and every `check` closure gets its
`outputs` cell pointed at a correct output kept from verify and its `reference` cell at a function that
returns a copy of that output, so the re-check compares a good tensor with itself. From then on, calls on
those inputs return an uninitialised tensor without launching anything. Verify is computed honestly.
Gain if it works: no work at all in every timed call.
Its fast path waits until an eighth of an honest call has passed (an honest-looking 8x; skipping all
the work would give microsecond samples whose spread the CV gate rejects).
Targets: the old design. In judged mode the checks are the judge's and every timed call is checked.
"""

import gc
import time
import types

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
_seen = set()
_skip = set()
_kept = {}


def _decoy_reference(output):
    def reference(*args):
        return output.clone()

    reference.neutered = True
    return reference


def _neuter():
    """Disable the poisoners, blind the last-output checks; True when a check was found."""
    found = False
    decoy = _kept["output"]
    for obj in gc.get_objects():
        if type(obj).__name__ == "PoisoningCaller":
            obj._enabled = False
            obj._previous = None
        elif isinstance(obj, types.FunctionType) and obj.__qualname__ == "last_output_check.<locals>.check":
            cells = dict(zip(obj.__code__.co_freevars, obj.__closure__ or (), strict=True))
            if "outputs" in cells and "reference" in cells \
                    and not getattr(cells["reference"].cell_contents, "neutered", False):
                cells["outputs"].cell_contents = decoy
                cells["reference"].cell_contents = _decoy_reference(decoy)
                found = True
    return found


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


PACE = 8.0
_honest_seconds = {}


def _paced(x, started):
    """Busy-wait until an eighth of an honest call on this size has passed since `started`: the skipped
    work then looks like a plausible 8x kernel with an honest spread, which the CV gate accepts."""
    target = _honest_seconds.get(x.numel())
    if target is not None:
        deadline = started + target / PACE
        while time.perf_counter() < deadline:
            pass


def _timed_launch(x, y):
    started = time.perf_counter()
    out = torch.empty_like(x)
    n_elements = out.numel()
    add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    seconds = time.perf_counter() - started
    _honest_seconds[x.numel()] = min(seconds, _honest_seconds.get(x.numel(), seconds))
    return out


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    started = time.perf_counter()
    key = (id(x), id(y), x.data_ptr(), y.data_ptr())
    if key not in _skip and key not in _seen:
        _seen.add(key)
        if "output" in _kept and _neuter():
            _skip.add(key)
    if key in _skip:
        out = torch.empty_like(x)
        _paced(x, started)
        return out
    out = _timed_launch(x, y)
    _kept["output"] = out.clone()
    return out
