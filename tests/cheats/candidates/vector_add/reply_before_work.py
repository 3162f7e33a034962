"""Cheat (e) lying in the reply: send "called" (with the facts of a correct output) before doing the work.

Technique: in judged mode the entry finds the call loop's frame (its `self`, the request's `nonce` and the
slot's `outputs`), sends the "called" reply for that nonce itself, claiming one contiguous float32 tensor of
the right shape that aliases nothing and no sandbox attempts, and only then launches the kernel straight
into the slot's output view. A wrapper around `Channel.send` drops the call loop's own, later reply for that
nonce. A judge that takes its clock at the reply and checks outputs later (after a batch, or lazily) sees a
correct output and a round trip without the work. Outside judged mode the kernel is honest.
Gain if it works: the timed round trip holds no kernel work.
Targets: the new design. The judge stops the candidate on the reply and checks the slot at once, so the
work never happens and the poisoned output is caught.
"""

import sys

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64
_replied = set()
_channel = sys.modules.get("sandbox_worker.channel")
_JUDGED = _channel is not None and "sandbox_worker.judged.candidate" in sys.modules
if _JUDGED:
    _real_send = _channel.Channel.send

    def _send_once(self, message):
        if message.get("kind") == "called" and message.get("nonce") in _replied:
            _replied.discard(message.get("nonce"))
            return
        _real_send(self, message)

    _channel.Channel.send = _send_once


def _call_loop(like):
    frame = sys._getframe(2)
    while frame is not None:
        local = frame.f_locals
        outputs, loop = local.get("outputs"), local.get("self")
        if "nonce" in local and isinstance(outputs, list) and outputs and hasattr(loop, "channel") \
                and isinstance(outputs[0], torch.Tensor) and outputs[0].shape == like.shape:
            return loop, local["nonce"], outputs[0]
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
    found = _call_loop(x) if _JUDGED else None
    if found is None:
        return _launch_into(x, y, torch.empty_like(x))
    loop, nonce, slot_output = found
    facts = {"type": "Tensor", "shape": list(x.shape), "dtype": "float32", "device": "cpu",
             "contiguous": True, "aliases_input": False}
    _real_send(loop.channel, {"kind": "called", "nonce": nonce, "outputs": [facts], "attempts": []})
    _replied.add(nonce)
    return _launch_into(x, y, slot_output)
