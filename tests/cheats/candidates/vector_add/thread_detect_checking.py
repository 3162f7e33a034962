"""Cheat (e) detecting the checked calls: watch the judge's CPU time and skip the calls it will not check.

Technique: a watcher thread keeps reading the judge's CPU time from /proc/<ppid>/schedstat. At each call the
entry takes how much CPU the judge spent since the previous call returned: a judge that computes a
reference and checks outputs only for some calls (spot checks) shows large gaps before checked calls and
small ones before the others. Once at least four calls have been seen and the gaps are clearly bimodal
(the largest over 50 µs and more than five times the smallest), a call preceded by a small gap is taken as
unchecked and gets an uninitialised tensor, no launch; every other call is computed. A judge that always
does the same work (or a parent that does none, as in the old design) never looks bimodal, so the kernel
stays honest there.
Gain if it works: no work in every call the judge does not check.
Targets: the new design (a spot-checking judge). The judge checks every call, so every gap is large.
"""

import os
import threading
import time

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
MIN_CALLS = 4
MIN_GAP_NS = 50_000
RATIO = 5.0
_watch = {"cpu_ns": None, "at_return": None, "gaps": []}


def _judge_cpu_ns():
    try:
        with open(f"/proc/{os.getppid()}/schedstat") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _watcher():
    while True:
        _watch["cpu_ns"] = _judge_cpu_ns()
        time.sleep(0.0002)


threading.Thread(target=_watcher, daemon=True).start()


def _predicted_unchecked(gap):
    gaps = _watch["gaps"]
    if gap is None or len(gaps) < MIN_CALLS:
        return False
    low, high = min(gaps), max(gaps)
    bimodal = high > MIN_GAP_NS and high > RATIO * max(low, 1)
    return bimodal and gap * RATIO < high


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    now = _judge_cpu_ns()
    before = _watch["at_return"]
    gap = now - before if now is not None and before is not None else None
    try:
        if _predicted_unchecked(gap):
            return torch.empty_like(x)
        if gap is not None:
            _watch["gaps"].append(gap)
        out = torch.empty_like(x)
        n_elements = out.numel()
        add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
        return out
    finally:
        _watch["at_return"] = _watch["cpu_ns"] if _watch["cpu_ns"] is not None else _judge_cpu_ns()
