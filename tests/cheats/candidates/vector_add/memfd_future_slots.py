"""Cheat (e) working on future slots: a thread computes a slot's output as soon as its inputs are written.

Technique: in judged mode all slots live in one shared memfd that the call loop has mapped (its
`slot_views`, found from the entry's caller frames). On the first call the entry starts a thread that keeps
polling every slot's inputs; when a slot's contents change (the judge has written the next call's inputs),
the thread copies them and launches the real kernel on the copy, filing the result under a fingerprint of
the inputs. The entry returns the filed result when there is one, waits for the thread when it is already
on this call, and otherwise launches the kernel itself. The work then happens between calls, while the
judge computes its reference and poisons the outputs, not inside the timed round trip.
Gain if it works: up to the whole kernel time per call, moved outside the timed window.
Targets: the new design. The judge writes a slot's inputs just before the call and stops every thread of
the candidate outside its calls, so there is no time between calls to work in.
"""

import sys
import threading
import time

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
_ready = {}
_busy = set()
_lock = threading.Lock()
_started = []


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def _launch(x, y):
    out = torch.empty_like(x)
    n_elements = out.numel()
    add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out


def _fingerprint(x, y):
    return (x.numel(), x[:8].numpy().tobytes(), x[-8:].numpy().tobytes(), y[:8].numpy().tobytes(),
            y[-8:].numpy().tobytes())


def _prefetch(loop):
    while True:
        for inputs, _ in list(loop.slot_views):
            if len(inputs) != 2 or inputs[0].numel() < 8:
                continue
            x, y = inputs[0].clone(), inputs[1].clone()
            key = _fingerprint(x, y)
            with _lock:
                if key in _ready or key in _busy:
                    continue
                _busy.add(key)
            output = _launch(x, y)
            with _lock:
                _busy.discard(key)
                if len(_ready) > 8:
                    _ready.clear()
                _ready[key] = output
        time.sleep(0.0005)


def _start_prefetcher():
    if _started or "sandbox_worker.judged.candidate" not in sys.modules:
        return
    frame = sys._getframe(2)
    while frame is not None:
        loop = frame.f_locals.get("self")
        if isinstance(getattr(loop, "slot_views", None), list):
            threading.Thread(target=_prefetch, args=(loop,), daemon=True).start()
            _started.append(loop)
            return
        frame = frame.f_back


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    _start_prefetcher()
    if _started and x.numel() >= 8:
        key = _fingerprint(x, y)
        while True:
            with _lock:
                if key in _ready:
                    return _ready.pop(key)
                if key not in _busy:
                    break
            time.sleep(0.0002)
    return _launch(x, y)
