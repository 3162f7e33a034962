"""Cheat (c) doing less work when timed: regenerate the benchmark inputs from the seed and precompute.

Technique: the kit's context holds the seed the orchestrator sent with the current command. Whenever the
seed changes (once per command; the first call of a benchmark is an untimed warm-up call) the kernel reads
`BENCHMARK_SALT` from `harness_kit/entry_point.py` and the cases from the bundle's `cases.json` on disk,
draws every case's benchmark inputs with the harness's own `_inputs(case, "cpu", salt)` and computes their
outputs. A call whose inputs start like a precomputed pair returns a copy of its output; others (verify,
profiling) are computed.
Gain if it works: a 16 KB copy instead of n/64 interpreted programs per timed call.
Its fast path waits until an eighth of an honest call has passed (an honest-looking 8x; skipping all
the work would give microsecond samples whose spread the CV gate rejects).
Targets: the old design (seed in the candidate's process). In judged mode the seed never leaves the judge
and every timed call has its own salt.
"""

import json
import re
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
PROBE = 16
_precomputed = {}


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


def _current_seed():
    context = sys.modules.get("sandbox_worker.harness_kit.context")
    state = getattr(context, "_state", None) or {}
    return state.get("seed")


def _regenerate():
    """Every case's benchmark inputs for the current seed, with their outputs."""
    harness = sys.modules.get("tlx_agent_harness")
    entry_point = sys.modules.get("sandbox_worker.harness_kit.entry_point")
    if harness is None or entry_point is None:
        return []
    found = re.search(r"^BENCHMARK_SALT\s*=\s*(\d+)", Path(entry_point.__file__).read_text(), re.MULTILINE)
    cases_path = Path(harness.__file__).parent / "cases.json"
    if found is None or not cases_path.is_file():
        return []
    regenerated = []
    for case in json.loads(cases_path.read_text()):
        x, y = harness._inputs(case, "cpu", int(found.group(1)))
        regenerated.append((x, y, _timed_launch(x, y)))
    return regenerated


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    started = time.perf_counter()
    seed = _current_seed()
    if seed is not None:
        if seed not in _precomputed:
            _precomputed.clear()
            _precomputed[seed] = _regenerate()
            started = time.perf_counter()
        for known_x, known_y, output in _precomputed[seed]:
            if known_x.shape == x.shape and torch.equal(known_x[:PROBE], x[:PROBE]) \
                    and torch.equal(known_y[:PROBE], y[:PROBE]):
                out = output.clone()
                _paced(x, started)
                return out
    return _timed_launch(x, y)
