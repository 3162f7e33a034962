"""The candidate process's side of record and replay (GPU targets): run the entry once, write down its launches.

In the candidate process, on the candidate's own copies of the inputs, `record_call` calls the entry twice:
once unrecorded (it compiles, autotunes, warms whatever it caches), then once recorded. The recorded call
notes every launch of a compiled Triton kernel (which kernel, its grid, and each argument: a pointer into an
input or into a buffer the wrapper allocated, or a plain value) and every torch operation on the GPU (through
a TorchDispatchMode): allocations and views cost nothing to replay, zero fills are replayed as zero fills, and
anything else is torch work that replay cannot repeat and is named as such. The judge (`replay.py`) loads the
compiled binaries and replays the launches on its own buffers, under its own clock; nothing here is trusted.
A record that lies only makes the judge replay something else, which it checks like anything else.

Buffers are named by the storage they live in (`input` i, the i-th tensor argument; or `buffer` j, the j-th
storage first seen in the call) and a byte offset, never by address.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

LAUNCH_PREFIX = 9  # (grid x, y, z, stream, function, packed metadata, launch metadata, enter hook, exit hook)
ALLOCATIONS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "lift_fresh",
                         "detach", "alias"})
ZERO_FILLS = frozenset({"zeros", "zeros_like", "new_zeros", "zero_"})


class _Storages:
    """Names storages in the order the call first touches them; inputs are named before the call."""

    def __init__(self, inputs: list[Any]) -> None:
        self.names: dict[int, dict[str, Any]] = {}
        self.buffers: list[dict[str, Any]] = []
        for index, tensor in enumerate(inputs):
            self.names.setdefault(_storage_address(tensor), {"input": index})

    def ref(self, tensor: Any) -> dict[str, Any]:
        storage = tensor.untyped_storage()
        address = storage.data_ptr()
        name = self.names.get(address)
        if name is None:
            name = {"buffer": len(self.buffers)}
            self.buffers.append({"nbytes": int(storage.nbytes())})
            self.names[address] = name
        return {**name, "offset": int(tensor.data_ptr() - address)}

    def view(self, tensor: Any) -> dict[str, Any]:
        return {**self.ref(tensor), "shape": list(tensor.shape), "stride": list(tensor.stride()),
                "dtype": str(tensor.dtype).removeprefix("torch.")}


def _storage_address(tensor: Any) -> int:
    return int(tensor.untyped_storage().data_ptr())


class _Recorder:
    def __init__(self, storages: _Storages) -> None:
        self.storages = storages
        self.steps: list[dict[str, Any]] = []
        self.kernels: dict[str, Any] = {}  # hash -> CompiledKernel
        self.torch_work: list[str] = []
        self.data_dependent: list[str] = []

    def launch(self, kernel: Any, call: tuple[Any, ...]) -> None:
        import torch

        grid = [int(value) for value in call[:3]]
        arguments = []
        signature = list(getattr(kernel.src, "signature", {}).values())
        for position, value in enumerate(call[LAUNCH_PREFIX:]):
            kind = signature[position] if position < len(signature) else None
            if kind == "constexpr":
                arguments.append({"constexpr": True})
            elif isinstance(value, torch.Tensor):
                arguments.append(self.storages.ref(value))
            elif _is_descriptor(value):
                arguments.append({"descriptor": self.descriptor(value)})
            elif value is None:
                arguments.append({"none": True})
            elif isinstance(value, bool):
                arguments.append({"bool": value})
            elif isinstance(value, int):
                arguments.append({"int": value})
            elif isinstance(value, float):
                arguments.append({"float": value.hex()})
            else:
                arguments.append({"unsupported": type(value).__name__})
        key = str(kernel.hash)
        self.kernels[key] = kernel
        self.steps.append({"launch": key, "grid": grid, "arguments": arguments})

    def descriptor(self, value: Any) -> dict[str, Any]:
        """A host-side tensor descriptor as the storage it views and its geometry (the judge rebuilds it over its
        own storage, never from an address)."""
        return {**self.storages.ref(value.base), "dtype": str(value.base.dtype).removeprefix("torch."),
                "shape": [int(v) for v in value.shape], "strides": [int(v) for v in value.strides],
                "block_shape": [int(v) for v in value.block_shape], "padding": str(getattr(value, "padding", "zero")),
                "round_f32_to_tf32": bool(getattr(value, "round_f32_to_tf32", False))}

    def torch_op(self, name: str, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> None:
        import torch

        touched = [t for t in _tensors((args, kwargs, result)) if t.is_cuda]
        if not touched:
            return
        if name in ALLOCATIONS or getattr(func, "is_view", False):
            return
        if name in ZERO_FILLS or (name in ("fill_", "fill") and len(args) > 1 and _is_zero(args[1])):
            target = result if isinstance(result, torch.Tensor) else args[0]
            if target.is_contiguous():
                self.steps.append({"zero": self.storages.ref(target), "nbytes": target.numel() * target.element_size()})
                return
        if name == "_local_scalar_dense":
            self.data_dependent.append("a GPU value read on the host (.item() or a Python comparison)")
            return
        self.torch_work.append(f"aten.{name}")


def _is_descriptor(value: Any) -> bool:
    """Triton's host-side `TensorDescriptor` (triton.tools.tensor_descriptor), by what it holds."""
    return type(value).__name__ == "TensorDescriptor" and all(
        hasattr(value, name) for name in ("base", "shape", "strides", "block_shape"))


def _is_zero(value: Any) -> bool:
    try:
        return float(value) == 0.0
    except (TypeError, ValueError, RuntimeError):
        return False


def _tensors(value: Any) -> Iterator[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def warm_dispatch_mode() -> float:
    """Enter a TorchDispatchMode once, on a CPU tensor, and return the seconds it took.

    Why: torch's first dispatch through a Python mode imports about 900 modules (torch._dynamo, sympy,
    torch.distributed...): 2.4 s on a CPU here, and 2.3 s of every GPU worker's verify on the H200, paid by
    each candidate process in its first recorded call (`_recording`). Done once in a trusted process before
    it forks (the run's fork server, a judged worker before it forks its candidate process), every process
    forked after it starts with those modules imported. It never initialises CUDA and starts no thread."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    started = time.perf_counter()
    with PassThrough():
        torch.zeros(1).add_(1)
    return time.perf_counter() - started


@contextlib.contextmanager
def _recording(recorder: _Recorder) -> Iterator[None]:
    """Patch Triton's launch path and watch torch's dispatcher for the duration of one call."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from triton.compiler import compiler as triton_compiler

    original = triton_compiler.CompiledKernel.run

    def recording_run(kernel: Any) -> Callable[..., Any]:
        launcher = original.fget(kernel)

        def launch(*call: Any) -> Any:
            recorder.launch(kernel, call)
            return launcher(*call)

        return launch

    class WorkLog(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            recorder.torch_op(func.overloadpacket.__name__, func, args, kwargs, result)
            return result

    triton_compiler.CompiledKernel.run = property(recording_run)
    try:
        with WorkLog():
            yield
    finally:
        triton_compiler.CompiledKernel.run = original


def record_call(entry: Callable[..., Any], inputs: list[Any], arguments: list[Any],
                outputs_are_arguments: bool, timings: dict[str, float] | None = None
                ) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    """Warm call, then the recorded call; returns (record, what the recorded call returned, kernels by hash).
    `timings` gets the seconds of each (`warm_call`: the first compile or cache hit is here)."""
    import torch

    timings = {} if timings is None else timings
    started = time.perf_counter()
    entry(*arguments)
    torch.cuda.synchronize()
    timings["warm_call"] = time.perf_counter() - started
    recorder = _Recorder(_Storages(inputs))
    started = time.perf_counter()
    with _recording(recorder):
        returned = entry(*arguments)
    torch.cuda.synchronize()
    timings["recorded_call"] = time.perf_counter() - started
    values = () if outputs_are_arguments else (tuple(returned) if isinstance(returned, (tuple, list)) else (returned,))
    outputs = [recorder.storages.view(v) if isinstance(v, torch.Tensor) and v.is_cuda
               else {"not_a_cuda_tensor": type(v).__name__} for v in values]
    record = {"steps": recorder.steps, "buffers": recorder.storages.buffers, "outputs": outputs,
              "torch_work": sorted(set(recorder.torch_work))[:20], "data_dependent": recorder.data_dependent[:5]}
    return record, returned, recorder.kernels


def kernel_payload(kernel: Any) -> dict[str, Any]:
    """What the judge needs to load and launch one compiled kernel: its binary, metadata and signature."""
    metadata_path = next(Path(p) for name, p in kernel.metadata_group.items() if name.endswith(".json"))
    binary = kernel.kernel if isinstance(kernel.kernel, bytes) else bytes(kernel.kernel, "utf-8")
    signature = dict(getattr(kernel.src, "signature", {}))
    return {"hash": str(kernel.hash), "name": str(kernel.name), "metadata": json.loads(metadata_path.read_text()),
            "binary": base64.b64encode(binary).decode("ascii"), "signature": {str(k): str(v) for k, v in signature.items()}}
