"""Tensors in shared memory: where each input and output of a call lives in the arena both processes map.

The arena is an anonymous shared mapping made before the candidate process is forked, reserved (not
committed) at half the machine's memory: pages exist only once written, and unlike a memfd grown with
ftruncate it is not a file, so the worker's RLIMIT_FSIZE (a disk limit) does not cap the size of a case.

The judge lays out one slot per call (inputs first, then outputs, each 64-byte aligned), writes fresh
inputs into it, and reads the outputs back; the candidate process views the same bytes as tensors. Only
dtype names, shapes and byte offsets cross the process boundary, never pointers. Standard library at
module level; torch inside the functions.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import asdict, dataclass
from typing import Any

ALIGN = 64
# Dtypes a slot may hold: the names are what crosses the process boundary, so they are a closed list.
DTYPE_NAMES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


@dataclass(frozen=True)
class TensorSpec:
    """One contiguous tensor in a slot: `offset` bytes into the shared buffer."""

    dtype: str
    shape: tuple[int, ...]
    offset: int

    @property
    def nbytes(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count * element_size(self.dtype)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "shape": list(self.shape)}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> TensorSpec:
        dtype = str(value["dtype"])
        if dtype not in DTYPE_NAMES:
            raise ValueError(f"unsupported dtype {dtype!r} in a slot layout")
        shape = tuple(int(size) for size in value["shape"])
        offset = int(value["offset"])
        if offset < 0 or any(size < 0 for size in shape):
            raise ValueError("negative offset or size in a slot layout")
        return cls(dtype=dtype, shape=shape, offset=offset)


@dataclass(frozen=True)
class SlotLayout:
    """Where a call's tensors live. `arguments` holds, per positional argument, either the index of its
    tensor in `inputs` or a plain JSON value (`{"value": ...}`). With `outputs_are_arguments` the entry
    writes into the output tensors, passed after the inputs, instead of returning its outputs."""

    arguments: tuple[dict[str, Any], ...]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    total_bytes: int
    outputs_are_arguments: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"arguments": list(self.arguments), "inputs": [s.to_json() for s in self.inputs],
                "outputs": [s.to_json() for s in self.outputs], "total_bytes": self.total_bytes,
                "outputs_are_arguments": self.outputs_are_arguments}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> SlotLayout:
        inputs = tuple(TensorSpec.from_json(v) for v in value["inputs"])
        outputs = tuple(TensorSpec.from_json(v) for v in value["outputs"])
        total = int(value["total_bytes"])
        if any(spec.offset + spec.nbytes > total for spec in (*inputs, *outputs)):
            raise ValueError("a tensor in the slot layout lies outside the shared buffer")
        arguments = tuple(dict(a) for a in value["arguments"])
        for argument in arguments:
            if "tensor" in argument and not 0 <= int(argument["tensor"]) < len(inputs):
                raise ValueError("an argument names a tensor the layout does not have")
        return cls(arguments=arguments, inputs=inputs, outputs=outputs, total_bytes=total,
                   outputs_are_arguments=value.get("outputs_are_arguments") is True)


def element_size(dtype: str) -> int:
    return {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2}.get(dtype, 1)


def dtype_name(dtype: Any) -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPE_NAMES:
        raise TypeError(f"judged mode cannot share tensors of dtype {name}")
    return name


def plan_layout(arguments: tuple[Any, ...], outputs: tuple[Any, ...], *, outputs_are_arguments: bool = False) -> SlotLayout:
    """The layout for a call with these arguments (tensors and plain values) and reference outputs."""
    import torch

    offset = 0
    specs: list[TensorSpec] = []
    described: list[dict[str, Any]] = []

    def place(tensor: Any) -> TensorSpec:
        nonlocal offset
        spec = TensorSpec(dtype=dtype_name(tensor.dtype), shape=tuple(tensor.shape), offset=offset)
        offset += -(-spec.nbytes // ALIGN) * ALIGN if spec.nbytes else ALIGN
        return spec

    for argument in arguments:
        if isinstance(argument, torch.Tensor):
            specs.append(place(argument))
            described.append({"tensor": len(specs) - 1})
        elif argument is None or isinstance(argument, (bool, int, float, str)):
            described.append({"value": argument})
        else:
            raise TypeError(f"judged mode passes tensors and plain values, not {type(argument).__name__}")
    output_specs = []
    for output in outputs:
        if not isinstance(output, torch.Tensor):
            raise TypeError(f"the reference must return tensors, got {type(output).__name__}")
        output_specs.append(place(output))
    return SlotLayout(arguments=tuple(described), inputs=tuple(specs), outputs=tuple(output_specs),
                      total_bytes=max(offset, ALIGN), outputs_are_arguments=outputs_are_arguments)


ARENA_MINIMUM_BYTES = 64 << 20


class ArenaTooSmall(Exception):
    """A case's two slots do not fit in the shared arena."""


def reserve_arena(size: int | None = None) -> mmap.mmap:
    """An anonymous MAP_SHARED mapping that a forked child shares; halved until the kernel grants one."""
    wanted = size if size is not None else os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    flags = mmap.MAP_SHARED | getattr(mmap, "MAP_NORESERVE", 0)
    while True:
        try:
            return mmap.mmap(-1, wanted, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError:
            if wanted <= ARENA_MINIMUM_BYTES:
                raise
            wanted = max(wanted // 2, ARENA_MINIMUM_BYTES)


def require_fit(arena: mmap.mmap, layout: SlotLayout, slots: int) -> None:
    needed = layout.total_bytes * slots
    if needed > len(arena):
        raise ArenaTooSmall(
            f"the case's inputs and outputs need {_size(needed)} of shared memory for the judge's "
            f"{slots} slots; this machine's arena holds {_size(len(arena))}: use "
            f"smaller cases or set \"verdict_process\": \"candidate\" in target.json")


def _size(count: int) -> str:
    return f"{count / 2**30:.2f} GiB" if count >= 1 << 30 else f"{count / 2**20:.1f} MiB"


def slot_views(buffer: mmap.mmap, layout: SlotLayout, slots: int) -> list[tuple[list[Any], list[Any]]]:
    """(inputs, outputs) tensors of each slot: slot k starts `k * layout.total_bytes` into the buffer."""
    from dataclasses import replace

    per_slot = []
    for slot in range(slots):
        shift = slot * layout.total_bytes
        per_slot.append((views(buffer, tuple(replace(s, offset=s.offset + shift) for s in layout.inputs)),
                         views(buffer, tuple(replace(s, offset=s.offset + shift) for s in layout.outputs))))
    return per_slot


def views(buffer: mmap.mmap, specs: tuple[TensorSpec, ...]) -> list[Any]:
    """Tensors over `buffer` for `specs` (writes through them land in the shared memory), each with a storage
    of its own bytes only. Why: after every launch the Triton interpreter copies each argument's whole storage
    back onto itself, which torch skips only when both sides are the same storage; views of one storage per
    call of this function over the whole arena (half the machine's memory) gave an input and an output two
    storages at one address, and a 7 ms kernel took 690 ms a call copying gigabytes."""
    import torch

    tensors = []
    for spec in specs:
        dtype = getattr(torch, spec.dtype)
        if not spec.nbytes:
            tensors.append(torch.empty(spec.shape, dtype=dtype))
            continue
        raw = torch.frombuffer(buffer, dtype=torch.uint8, count=spec.nbytes, offset=spec.offset)
        tensors.append(raw.view(dtype).view(spec.shape))
    return tensors
