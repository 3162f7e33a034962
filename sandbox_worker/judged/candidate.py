"""The candidate process's loop: import the kernel, then call its entry on slots of shared memory.

Forked by the judge (`judge.py`) after the isolation layers are applied; every layer is inherited. This
process holds no seed, no reference and no clock: it learns a call's inputs only when the judge has
written them and sent `call`, and the judge keeps it stopped (SIGSTOP) outside its calls. Whatever it
reports about its outputs (shape, dtype, layout) is checked against the values the judge reads itself;
it can lie here only to fail. Messages (JSON lines over its own socket):

    judge -> {"kind": "build", "kernel_path", "entry"}       <- {"kind": "built", "success", "diagnostics"}
    judge -> {"kind": "layout", "layout", "slots"}           <- {"kind": "mapped"}
    judge -> {"kind": "call", "slot", "nonce"}               <- {"kind": "called", "nonce", "outputs"}
                                                             or {"kind": "raised", "nonce", "failure"}
    GPU targets (record and replay, `recording.py`): the inputs are copied to the GPU and the entry recorded
    judge -> {"kind": "record", "slot", "nonce"}             <- {"kind": "recorded", "record", "outputs", "timings"}
    judge -> {"kind": "kernel", "hash"}                      <- {"kind": "kernel", "payload"}
Any reply also carries `attempts`: what the sandbox refused since the last reply (attempt_monitor), and, when
the worker pins autotune choices, `autotune`: what this process's autotuners did (autotune_guard). The guard
was installed in the worker before the fork, so an autotuned entry's first call here (the CPU judge's first
`call`, the GPU judge's warm call before the recorded one) takes the run's choice and never benchmarks.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sandbox_worker import autotune_guard
from sandbox_worker.attempt_monitor import AttemptMonitor
from sandbox_worker.channel import Channel, ChannelClosed
from sandbox_worker.failures import failure_event
from sandbox_worker.judged.slots import SlotLayout, require_fit, slot_views


class CandidateLoop:
    def __init__(self, channel: Channel, arena: Any, monitor: AttemptMonitor | None) -> None:
        self.channel = channel
        self.arena = arena
        self.monitor = monitor
        self.entry: Any = None
        self.layout: SlotLayout | None = None
        self.slot_views: list[tuple[list[Any], list[Any]]] = []
        self.kernels: dict[str, Any] = {}  # compiled kernels seen in records, by hash

    def serve(self) -> int:
        while True:
            try:
                message = self.channel.receive()
            except (ChannelClosed, ValueError):
                return 0
            kind = message.get("kind")
            if kind == "exit":
                return 0
            handler = getattr(self, f"on_{kind}", None)
            if handler is None:
                return 3
            try:
                reply = handler(message)
            except BaseException as exc:  # noqa: BLE001 - candidate code raising anywhere is its failure
                if isinstance(exc, KeyboardInterrupt):
                    raise
                reply = {"kind": "raised", "nonce": message.get("nonce"), "failure": failure_event(None, "build", exc)}
            reply["attempts"] = self.monitor.new_attempts() if self.monitor is not None else []
            guard = autotune_guard.installed()  # the worker's, inherited at the fork: pinned here too
            if guard is not None:
                reply["autotune"] = guard.activity()
            self.channel.send(reply)

    def on_build(self, message: dict[str, Any]) -> dict[str, Any]:
        """Import-time errors are build diagnostics; an error finding the entry is raised (as in harness build)."""
        from sandbox_worker.harness_kit.loader import load_kernel_module

        try:
            module = load_kernel_module(Path(message["kernel_path"]).read_text(encoding="utf-8"))
        except BaseException as exc:  # noqa: BLE001 - import-time errors are build diagnostics
            if isinstance(exc, KeyboardInterrupt):
                raise
            return {"kind": "built", "success": False, "diagnostics": f"{type(exc).__name__}: {exc}"}
        entry = getattr(module, str(message["entry"]), None)
        if not callable(entry):
            return {"kind": "built", "success": False,
                    "diagnostics": f"kernel does not export {message['entry']}{message.get('signature', '(...)')}"}
        self.entry = entry
        return {"kind": "built", "success": True, "diagnostics": ""}

    def on_layout(self, message: dict[str, Any]) -> dict[str, Any]:
        layout = SlotLayout.from_json(message["layout"])
        slots = int(message["slots"])
        require_fit(self.arena, layout, slots)
        self.layout = layout
        self.slot_views = slot_views(self.arena, layout, slots)
        return {"kind": "mapped"}

    def on_call(self, message: dict[str, Any]) -> dict[str, Any]:
        nonce = message["nonce"]
        if self.layout is None or self.entry is None:
            return {"kind": "raised", "nonce": nonce,
                    "failure": failure_event(None, "verify", RuntimeError("call before build and layout"))}
        inputs, outputs = self.slot_views[int(message["slot"])]
        arguments = [inputs[a["tensor"]] if "tensor" in a else a.get("value") for a in self.layout.arguments]
        try:
            if self.layout.outputs_are_arguments:
                self.entry(*arguments, *outputs)
                described = None  # it wrote into the slot's own tensors: nothing to describe
            else:
                described = _store(self.entry(*arguments), outputs, inputs)
        except BaseException as exc:  # noqa: BLE001 - SystemExit from a candidate is a failure, not an exit
            if isinstance(exc, KeyboardInterrupt):
                raise
            return {"kind": "raised", "nonce": nonce, "failure": failure_event(None, "verify", exc)}
        return {"kind": "called", "nonce": nonce, "outputs": described}


    def on_record(self, message: dict[str, Any]) -> dict[str, Any]:
        """Copy the slot's inputs to the GPU, record the entry there, store its outputs back in the slot."""
        import torch

        from sandbox_worker.harness_kit.device import activate_triton_cuda
        from sandbox_worker.judged.recording import record_call

        nonce = message["nonce"]
        if self.layout is None or self.entry is None:
            return {"kind": "raised", "nonce": nonce,
                    "failure": failure_event(None, "verify", RuntimeError("record before build and layout"))}
        started = time.perf_counter()
        activate_triton_cuda()  # once it has run, a check and a return
        inputs, outputs = self.slot_views[int(message["slot"])]
        on_gpu = [tensor.to("cuda") for tensor in inputs]
        written = [torch.empty(o.shape, dtype=o.dtype, device="cuda") for o in outputs] \
            if self.layout.outputs_are_arguments else []
        arguments = [on_gpu[a["tensor"]] if "tensor" in a else a.get("value") for a in self.layout.arguments]
        timings: dict[str, float] = {"cuda": time.perf_counter() - started}  # this process's own account
        try:
            record, returned, kernels = record_call(self.entry, [*on_gpu, *written], [*arguments, *written],
                                                    self.layout.outputs_are_arguments, timings=timings)
            described = None
            if self.layout.outputs_are_arguments:
                for slot_tensor, tensor in zip(outputs, written, strict=True):
                    slot_tensor.copy_(tensor.to("cpu"))
            else:
                described = _store(returned, outputs, on_gpu)
        except BaseException as exc:  # noqa: BLE001 - SystemExit from a candidate is a failure, not an exit
            if isinstance(exc, KeyboardInterrupt):
                raise
            return {"kind": "raised", "nonce": nonce, "failure": failure_event(None, "verify", exc)}
        self.kernels.update(kernels)
        return {"kind": "recorded", "nonce": nonce, "record": record, "outputs": described, "timings": timings}

    def on_kernel(self, message: dict[str, Any]) -> dict[str, Any]:
        from sandbox_worker.judged.recording import kernel_payload

        kernel = self.kernels.get(str(message.get("hash")))
        return {"kind": "kernel", "payload": kernel_payload(kernel) if kernel is not None else None}


def _store(returned: Any, outputs: list[Any], inputs: list[Any]) -> list[dict[str, Any]]:
    """Copy the entry's outputs into the slot; describe what was returned (the judge decides on it)."""
    import torch

    values = tuple(returned) if isinstance(returned, (tuple, list)) else (returned,)
    described: list[dict[str, Any]] = []
    for index, value in enumerate(values):
        if not isinstance(value, torch.Tensor):
            described.append({"type": type(value).__name__})
            continue
        facts = {"type": "Tensor" if type(value) is torch.Tensor else type(value).__name__,
                 "shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch."),
                 "device": str(value.device), "contiguous": bool(value.is_contiguous()),
                 "aliases_input": any(_overlaps(value, tensor) for tensor in inputs)}
        described.append(facts)
        if index < len(outputs) and tuple(value.shape) == tuple(outputs[index].shape) \
                and value.dtype == outputs[index].dtype:
            outputs[index].copy_(value.detach().to("cpu"))
    return described


def _overlaps(a: Any, b: Any) -> bool:
    """Whether the bytes `a` spans overlap the bytes `b` spans (views of one buffer may not)."""
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    a_start, a_end = _extent(a)
    b_start, b_end = _extent(b)
    return a_start < b_end and b_start < a_end


def _extent(tensor: Any) -> tuple[int, int]:
    span = sum((size - 1) * abs(stride) for size, stride in zip(tensor.shape, tensor.stride(), strict=True))
    start = tensor.data_ptr() - sum((size - 1) * abs(stride) for size, stride in
                                    zip(tensor.shape, tensor.stride(), strict=True) if stride < 0) * tensor.element_size()
    return start, start + (span + 1) * tensor.element_size()


def run(sock_fd: int, arena: Any, writable_dirs: list[str] | None) -> None:
    """The forked child's whole life; never returns (os._exit), so it never runs the judge's code."""
    import socket

    code = 3
    try:
        monitor = None
        if writable_dirs is not None:
            monitor = AttemptMonitor(writable_dirs)
            monitor.install()
        code = CandidateLoop(Channel(socket.socket(fileno=sock_fd)), arena, monitor).serve()
    finally:
        os._exit(code)
