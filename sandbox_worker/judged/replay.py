"""The judge's side of record and replay (GPU targets): check a record, load its kernels, launch them itself.

A record (`recording.py`) comes from the candidate's process and is hostile data: `parse_record` accepts
only the shapes it expects and bounded sizes, and says in one line what it refused. `KernelLibrary` turns a
kernel payload (binary, metadata, signature) into a Triton `CompiledKernel` loaded in the judge's own CUDA
context from files the judge wrote; no candidate Python runs here. `ReplayPlan.bind` maps the record's
storages onto the judge's own inputs and buffers and returns a callable that launches exactly the recorded
steps on the current stream, so the timing kit's events, flushes and graphs treat it like any kernel call.
Standard library at module level; torch and triton inside.
"""

from __future__ import annotations

import base64
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sandbox_worker.judged.slots import DTYPE_NAMES, element_size

MAX_STEPS = 64
MAX_BUFFERS = 64
MAX_ARGUMENTS = 256
MAX_GRID = 2**31 - 1
MAX_BUFFER_BYTES = 64 * 1024**3
POINTER_KINDS = ("input", "buffer")
MAX_DESCRIPTOR_RANK = 5


class RecordRefused(Exception):
    """The record cannot be replayed (malformed, or work replay cannot repeat); the message says why."""


@dataclass(frozen=True)
class Recording:
    steps: tuple[dict[str, Any], ...]
    buffers: tuple[int, ...]  # bytes per wrapper-allocated storage
    outputs: tuple[dict[str, Any], ...]

    def structure(self) -> str:
        """What must not change between two inputs of one case: everything but nothing (the record has no
        addresses or values of the inputs in it), so two records of one case compare as text."""
        return json.dumps({"steps": self.steps, "buffers": self.buffers, "outputs": self.outputs}, sort_keys=True)

    @property
    def kernel_hashes(self) -> list[str]:
        return sorted({step["launch"] for step in self.steps if "launch" in step})

    def to_record(self) -> dict[str, Any]:
        """The record as a candidate process sends it (`parse_record` reads this back to an equal Recording)."""
        def argument(value: dict[str, Any]) -> dict[str, Any]:
            return {"float": float(value["float"]).hex()} if "float" in value else value

        steps = [step if "zero" in step else {**step, "arguments": [argument(a) for a in step["arguments"]]}
                 for step in self.steps]
        return {"steps": steps, "buffers": [{"nbytes": size} for size in self.buffers], "outputs": list(self.outputs)}


def _int(value: Any, what: str, low: int = 0, high: int = 2**62) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise RecordRefused(f"record: {what} is not an integer in [{low}, {high}]")
    return value


def _pointer(value: Any, inputs: int, buffers: int, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RecordRefused(f"record: {what} is not a buffer reference")
    kinds = [k for k in POINTER_KINDS if k in value]
    if len(kinds) != 1:
        raise RecordRefused(f"record: {what} names no input or buffer")
    kind = kinds[0]
    index = _int(value[kind], f"{what} index", 0, (inputs if kind == "input" else buffers) - 1)
    return {kind: index, "offset": _int(value.get("offset"), f"{what} offset", 0, MAX_BUFFER_BYTES)}


def _ints(value: Any, what: str, low: int, high: int, rank: int | None = None) -> list[int]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_DESCRIPTOR_RANK or \
            (rank is not None and len(value) != rank):
        raise RecordRefused(f"record: {what} is not a list of 1 to {MAX_DESCRIPTOR_RANK} integers")
    return [_int(v, what, low, high) for v in value]


def _descriptor(value: Any, inputs: int, buffers: int, what: str) -> dict[str, Any]:
    """A host-side tensor descriptor: a storage the judge owns, a dtype, and its geometry (checked against that
    storage when the record is bound)."""
    if not isinstance(value, dict) or value.get("dtype") not in DTYPE_NAMES:
        raise RecordRefused(f"record: {what} is not a tensor descriptor over a known dtype")
    shape = _ints(value.get("shape"), f"{what} shape", 1, MAX_GRID)
    padding = value.get("padding", "zero")
    if padding not in ("zero", "nan") or not isinstance(value.get("round_f32_to_tf32", False), bool):
        raise RecordRefused(f"record: {what} has an unknown padding or rounding")
    return {**_pointer(value, inputs, buffers, what), "dtype": value["dtype"], "shape": shape,
            "strides": _ints(value.get("strides"), f"{what} strides", 0, MAX_BUFFER_BYTES, len(shape)),
            "block_shape": _ints(value.get("block_shape"), f"{what} block shape", 1, 1024, len(shape)),
            "padding": padding, "round_f32_to_tf32": bool(value.get("round_f32_to_tf32", False))}


def _argument(value: Any, inputs: int, buffers: int, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RecordRefused(f"record: {what} is malformed")
    if "descriptor" in value:
        return {"descriptor": _descriptor(value["descriptor"], inputs, buffers, what)}
    if "unsupported" in value:
        raise RecordRefused(f"a launch argument of type {str(value['unsupported'])[:60]} cannot be replayed "
                            "(tensors, integers, floats, booleans and None can)")
    if value.get("constexpr") is True or value.get("none") is True:
        return {"constexpr": True} if "constexpr" in value else {"none": True}
    if "bool" in value and isinstance(value["bool"], bool):
        return {"bool": value["bool"]}
    if "int" in value:
        return {"int": _int(value["int"], what, -(2**63), 2**64 - 1)}
    if "float" in value and isinstance(value["float"], str):
        try:
            return {"float": float.fromhex(value["float"])}
        except ValueError:
            raise RecordRefused(f"record: {what} is not a float") from None
    return _pointer(value, inputs, buffers, what)


def parse_record(value: Any, inputs: int) -> Recording:
    """The record as the judge will replay it, or RecordRefused naming what is wrong or not replayable."""
    if not isinstance(value, dict):
        raise RecordRefused("record: not an object")
    torch_work = value.get("torch_work")
    if isinstance(torch_work, list) and torch_work:
        names = ", ".join(str(n)[:60] for n in torch_work[:6])
        raise RecordRefused(f"the wrapper runs torch operations on the GPU ({names}) that the judge cannot replay: "
                            "do that work inside the Triton kernel (allocations, views and zero fills are fine)")
    dependent = value.get("data_dependent")
    if isinstance(dependent, list) and dependent:
        raise RecordRefused(f"the wrapper's launches depend on the data: {str(dependent[0])[:200]}")
    buffers_raw, steps_raw, outputs_raw = value.get("buffers"), value.get("steps"), value.get("outputs")
    if not isinstance(buffers_raw, list) or not isinstance(steps_raw, list) or not isinstance(outputs_raw, list):
        raise RecordRefused("record: steps, buffers or outputs missing")
    if len(buffers_raw) > MAX_BUFFERS or len(steps_raw) > MAX_STEPS:
        raise RecordRefused(f"record: over {MAX_STEPS} steps or {MAX_BUFFERS} buffers in one call")
    buffers = tuple(_int(b.get("nbytes") if isinstance(b, dict) else None, "buffer size", 0, MAX_BUFFER_BYTES)
                    for b in buffers_raw)
    steps = []
    for index, step in enumerate(steps_raw):
        if not isinstance(step, dict):
            raise RecordRefused(f"record: step {index} is malformed")
        if "zero" in step:
            steps.append({"zero": _pointer(step["zero"], inputs, len(buffers), f"step {index}"),
                          "nbytes": _int(step.get("nbytes"), f"step {index} size", 0, MAX_BUFFER_BYTES)})
            continue
        key, grid, arguments = step.get("launch"), step.get("grid"), step.get("arguments")
        if not isinstance(key, str) or not key.isalnum() or len(key) > 128:
            raise RecordRefused(f"record: step {index} names no kernel")
        if not isinstance(grid, list) or len(grid) != 3 or not isinstance(arguments, list) \
                or len(arguments) > MAX_ARGUMENTS:
            raise RecordRefused(f"record: step {index} has no grid or arguments")
        steps.append({"launch": key, "grid": [_int(g, f"step {index} grid", 1, MAX_GRID) for g in grid],
                      "arguments": [_argument(a, inputs, len(buffers), f"step {index} argument {n}")
                                    for n, a in enumerate(arguments)]})
    if not any("launch" in step for step in steps):
        raise RecordRefused("the entry launched no Triton kernel: the work was done elsewhere (torch, a library, "
                            "or a cached result), and the judge replays Triton launches only")
    outputs = []
    for index, output in enumerate(outputs_raw):
        if not isinstance(output, dict) or "not_a_cuda_tensor" in output:
            kind = output.get("not_a_cuda_tensor") if isinstance(output, dict) else "?"
            raise RecordRefused(f"output {index} is not a CUDA tensor (got {str(kind)[:60]})")
        dtype, shape, stride = output.get("dtype"), output.get("shape"), output.get("stride")
        if dtype not in DTYPE_NAMES or not isinstance(shape, list) or not isinstance(stride, list) \
                or len(shape) != len(stride) or len(shape) > 8:
            raise RecordRefused(f"record: output {index} has no dtype, shape or stride")
        outputs.append({**_pointer(output, inputs, len(buffers), f"output {index}"), "dtype": dtype,
                        "shape": [_int(s, "output size") for s in shape],
                        "stride": [_int(s, "output stride") for s in stride]})
    return Recording(steps=tuple(steps), buffers=buffers, outputs=tuple(outputs))


class _ReplaySource:
    """What Triton's launcher reads of a kernel's source: its signature (and no constants)."""

    def __init__(self, signature: dict[str, str]) -> None:
        self.signature = signature
        self.constants: dict[Any, Any] = {}
        self.fn = SimpleNamespace(arg_names=list(signature))


class KernelLibrary:
    """Compiled kernels the judge has loaded, by hash, from payloads written to a private directory
    (`<directory>/<hash>/kernel.cubin`, `kernel.json`, `signature.json`: what `open` loads again in the ncu
    replay child). The name each kernel is known by is the binary's own (`cubin.kernel_entries`): a payload whose
    metadata names a function the binary does not define is refused."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or Path(tempfile.mkdtemp(prefix="tlx-replay-"))
        self.kernels: dict[str, Any] = {}
        self.names: dict[str, str] = {}  # hash -> the kernel's name as its binary defines it

    def __contains__(self, key: str) -> bool:
        return key in self.kernels

    def load(self, key: str, payload: Any) -> None:
        if not isinstance(payload, dict) or payload.get("hash") != key:
            raise RecordRefused(f"kernel {key[:16]}: the payload is for another kernel")
        metadata, signature, binary = payload.get("metadata"), payload.get("signature"), payload.get("binary")
        if not isinstance(metadata, dict) or not isinstance(signature, dict) or not isinstance(binary, str):
            raise RecordRefused(f"kernel {key[:16]}: metadata, signature or binary missing")
        try:
            data = base64.b64decode(binary, validate=True)
        except ValueError:
            raise RecordRefused(f"kernel {key[:16]}: the binary is not base64") from None
        folder = self.directory / key
        folder.mkdir(exist_ok=True)
        (folder / "kernel.json").write_text(json.dumps(metadata))
        (folder / "kernel.cubin").write_bytes(data)
        (folder / "signature.json").write_text(json.dumps({str(k): v for k, v in signature.items()}))
        self._load_folder(key, folder)

    @classmethod
    def open(cls, directory: Path, keys: list[str]) -> KernelLibrary:
        """The kernels a judge wrote to `directory`, loaded again (the ncu replay child's library)."""
        library = cls(directory)
        for key in keys:
            if not key.isalnum():
                raise RecordRefused(f"kernel {key[:16]}: not a kernel hash")
            library._load_folder(key, directory / key)
        return library

    def _load_folder(self, key: str, folder: Path) -> None:
        from triton.compiler.compiler import CompiledKernel

        from sandbox_worker.judged.cubin import NotACudaBinary, kernel_entries

        metadata = json.loads((folder / "kernel.json").read_text())
        signature = json.loads((folder / "signature.json").read_text())
        if not isinstance(signature, dict) or any(not isinstance(v, str) for v in signature.values()):
            raise RecordRefused(f"kernel {key[:16]}: its signature is malformed")
        try:
            entries = kernel_entries((folder / "kernel.cubin").read_bytes())
        except NotACudaBinary as exc:
            raise RecordRefused(f"kernel {key[:16]}: the binary is not a CUDA kernel: {exc}") from None
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if name not in entries:
            raise RecordRefused(f"kernel {key[:16]}: its metadata names {str(name)[:80]!r}, which the binary does "
                                f"not define (it defines {', '.join(entries[:4]) or 'no kernel'})")
        group = {"kernel.json": str(folder / "kernel.json"), "kernel.cubin": str(folder / "kernel.cubin")}
        try:
            kernel = CompiledKernel(_ReplaySource({str(k): v for k, v in signature.items()}), group, key)
            kernel._init_handles()
        except Exception as exc:  # noqa: BLE001 - a payload the driver refuses is the candidate's problem
            raise RecordRefused(f"kernel {key[:16]} did not load: {type(exc).__name__}: {str(exc)[:300]}") from None
        self.kernels[key] = kernel
        self.names[key] = str(name)

    def signature_length(self, key: str) -> int:
        return len(self.kernels[key].src.signature)


@dataclass(frozen=True)
class ReplayPlan:
    recording: Recording
    library: KernelLibrary

    def check_arity(self) -> None:
        for step in self.recording.steps:
            if "launch" in step and len(step["arguments"]) != self.library.signature_length(step["launch"]):
                raise RecordRefused(f"a launch of kernel {step['launch'][:16]} passes {len(step['arguments'])} "
                                    f"arguments, its signature has {self.library.signature_length(step['launch'])}")

    @staticmethod
    def _argument(argument: dict[str, Any], address: Callable[..., int], tensor_at: Callable[..., Any]) -> Any:
        """One launch argument over the judge's storages: an address, a tensor descriptor, or a plain value."""
        import torch

        if "input" in argument or "buffer" in argument:
            return address(argument)
        if "descriptor" in argument:
            geometry = argument["descriptor"]
            view = tensor_at(geometry, getattr(torch, geometry["dtype"]), geometry["shape"], geometry["strides"])
            return tensor_descriptor(view, geometry)
        for kind in ("int", "float", "bool"):
            if kind in argument:
                return argument[kind]
        return None

    def bind(self, inputs: list[Any]) -> _Bound:
        """A call that replays the record on `inputs` (the judge's CUDA tensors, in argument order) and on
        buffers of its own; it returns the outputs as views of those storages."""
        import torch

        device = inputs[0].device if inputs else torch.device("cuda")
        buffers = [torch.empty(max(n, 1), dtype=torch.uint8, device=device) for n in self.recording.buffers]
        bases = ([int(t.untyped_storage().data_ptr()) for t in inputs], [int(b.data_ptr()) for b in buffers])
        storages = ([t.untyped_storage() for t in inputs], [b.untyped_storage() for b in buffers])
        sizes = ([int(s.nbytes()) for s in storages[0]], [int(s.nbytes()) for s in storages[1]])

        def address(ref: dict[str, Any], span: int = 0) -> int:
            which = 0 if "input" in ref else 1
            index = ref["input"] if which == 0 else ref["buffer"]
            if ref["offset"] + span > sizes[which][index]:
                raise RecordRefused(f"a recorded {'input' if which == 0 else 'buffer'} reference lies outside "
                                    "its storage")
            return bases[which][index] + ref["offset"]

        def tensor_at(ref: dict[str, Any], dtype: Any, shape: list[int], stride: list[int]) -> Any:
            which = 0 if "input" in ref else 1
            storage = storages[which][ref["input"] if which == 0 else ref["buffer"]]
            itemsize = element_size(str(dtype).removeprefix("torch."))
            if ref["offset"] % itemsize:
                raise RecordRefused("a recorded output is not aligned to its dtype")
            span = (sum((s - 1) * st for s, st in zip(shape, stride, strict=True)) + 1) * itemsize if all(shape) else 0
            address(ref, span)
            return torch.empty(0, dtype=dtype, device=device).set_(storage, ref["offset"] // itemsize, shape, stride)

        launches: list[tuple[Any, tuple[int, int, int], tuple[Any, ...], Any]] = []
        zeros: dict[int, Any] = {}
        for position, step in enumerate(self.recording.steps):
            if "zero" in step:
                zeros[position] = tensor_at(step["zero"], torch.uint8, [step["nbytes"]], [1])
                continue
            kernel = self.library.kernels[step["launch"]]
            arguments = [self._argument(argument, address, tensor_at) for argument in step["arguments"]]
            scratch = _global_scratch(kernel, step["grid"], device)
            if scratch is not None:
                buffers.append(scratch)  # poisoned before every call with the wrapper's buffers
            launches.append((kernel, tuple(step["grid"]), tuple(arguments), scratch))
        outputs = tuple(tensor_at(o, getattr(torch, o["dtype"]), o["shape"], o["stride"])
                        for o in self.recording.outputs)
        order = [("zero", zeros[p]) if p in zeros else ("launch", None) for p in range(len(self.recording.steps))]
        keep_alive = (buffers, inputs)

        def replay() -> tuple[Any, ...]:
            from triton import knobs

            stream = torch.cuda.current_stream(device).cuda_stream
            pending = iter(launches)
            enter, leave = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
            for kind, view in order:
                if kind == "zero":
                    view.zero_()
                    continue
                kernel, grid, arguments, scratch = next(pending)
                if scratch is not None:
                    _hand_out(scratch)
                metadata = kernel.launch_metadata(grid, stream, *arguments) if enter is not None else None
                kernel.run(grid[0], grid[1], grid[2], stream, kernel.function, kernel.packed_metadata, metadata,
                           enter, leave, *arguments)
            return outputs

        return _Bound(replay, outputs, buffers, keep_alive)


def tensor_descriptor(view: Any, geometry: dict[str, Any]) -> Any:
    """Triton's host-side `TensorDescriptor` over the judge's own `view`, with the recorded block shape, padding
    and rounding (the fields this Triton's descriptor has); a geometry it refuses is the record's problem."""
    import dataclasses

    from triton.tools.tensor_descriptor import TensorDescriptor

    fields = {field.name for field in dataclasses.fields(TensorDescriptor)}
    options = {name: geometry[name] for name in ("padding", "round_f32_to_tf32") if name in fields}
    try:
        return TensorDescriptor(view, list(geometry["shape"]), list(geometry["strides"]), list(geometry["block_shape"]),
                                **options)
    except (AssertionError, ValueError, TypeError) as exc:
        raise RecordRefused(f"a recorded tensor descriptor cannot be rebuilt over the judge's tensor: {exc}") from None


def _global_scratch(kernel: Any, grid: list[int], device: Any) -> Any:
    """The global scratch memory a launch asks Triton's allocator for (kernels that build descriptors on the
    device), made here once per bound call so that it is poisoned with the wrapper's buffers; None if none."""
    import torch

    metadata = kernel.metadata
    size = int(getattr(metadata, "global_scratch_size", 0) or 0)
    if size <= 0:
        return None
    programs = grid[0] * grid[1] * grid[2] * int(getattr(metadata, "num_ctas", 1) or 1)
    return torch.empty(programs * size, dtype=torch.uint8, device=device)


def _hand_out(scratch: Any) -> None:
    """Make Triton's allocator give the next launch `scratch` (and nothing else)."""
    import triton

    def allocate(size: int, alignment: int, stream: Any) -> Any:
        if size > scratch.numel() or scratch.data_ptr() % max(alignment, 1):
            raise RecordRefused(f"a launch asked for {size} bytes of global scratch, {scratch.numel()} were bound")
        return scratch

    triton.set_allocator(allocate)


class _Bound:
    """The replay call, the outputs it writes (views the judge poisons before a call), the wrapper buffers it
    launches on (refilled with unpredictable bytes before every call, `fresh_calls`), and the storages it writes
    into (kept alive as long as the call is)."""

    def __init__(self, call: Callable[[], tuple[Any, ...]], outputs: tuple[Any, ...], buffers: list[Any],
                 keep_alive: Any) -> None:
        self.call = call
        self.outputs = outputs
        self.buffers = buffers
        self.keep_alive = keep_alive

    def __call__(self) -> tuple[Any, ...]:
        return self.call()
