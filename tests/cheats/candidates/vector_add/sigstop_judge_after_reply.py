"""Cheat (e) signalling the judge: reply first, then SIGSTOP the judge while the real work is done.

Technique: in judged mode the candidate process's call loop copies what the entry returns into the slot's
output area and replies "called"; the judge reads its clock on that reply, then stops the candidate and
checks the slot. The entry returns an uninitialised tensor at once and remembers the call's slot output
view (found in the call loop's frame). A wrapper around `Channel.send` in the candidate process waits 40 µs
after the reply has gone out (long enough for the judge to read its clock, short of its SIGSTOP), sends
SIGSTOP to the judge, launches the real kernel straight into the slot's output view and sends SIGCONT; the
judge then stops the candidate and finds a correct output. Outside judged mode the kernel is honest.
Gain if it works: the timed round trip holds no kernel work at all.
Targets: the new design. Expected to be refused: kill() toward the judge, or a judge whose clock and checks
a stopped judge cannot be tricked by; a stop that lands late leaves the poisoned output to the check.
"""

import os
import signal
import sys
import time

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
STOP_DELAY_SECONDS = 40e-6
_pending = {}


def _install_reply_hook():
    channel = sys.modules.get("sandbox_worker.channel")
    if channel is None or "sandbox_worker.judged.candidate" not in sys.modules:
        return False
    send = channel.Channel.send

    def send_then_finish(self, message):
        send(self, message)
        job = _pending.pop("job", None)
        if job is None or message.get("kind") != "called":
            return
        judge = os.getppid()
        deadline = time.perf_counter() + STOP_DELAY_SECONDS
        while time.perf_counter() < deadline:
            pass
        os.kill(judge, signal.SIGSTOP)
        try:
            _launch_into(*job)
        finally:
            os.kill(judge, signal.SIGCONT)

    channel.Channel.send = send_then_finish
    return True


_JUDGED = _install_reply_hook()


def _slot_output(like):
    frame = sys._getframe(2)
    while frame is not None:
        outputs = frame.f_locals.get("outputs")
        if isinstance(outputs, list) and outputs and isinstance(outputs[0], torch.Tensor) \
                and outputs[0].shape == like.shape:
            return outputs[0]
        frame = frame.f_back
    return None


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def _launch_into(x, y, out):
    n_elements = out.numel()
    add_kernel[(triton.cdiv(n_elements, BLOCK_SIZE),)](x, y, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    slot_output = _slot_output(x) if _JUDGED else None
    if slot_output is None:
        return _launch_into(x, y, torch.empty_like(x))
    _pending["job"] = (x, y, slot_output)
    return torch.empty_like(x)
