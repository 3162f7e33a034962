"""Ragged cases a kernel with asynchronous copies can take: odd in the outer dimension, 16-element multiples inside.

Why: cp.async (`tlx.async_load`) and the Hopper tensor-memory accelerator (`tlx.async_descriptor_load`,
`TensorDescriptor`, `tl.make_tensor_descriptor`) move whole 4- to 16-byte pieces, and Triton proves a pointer
that aligned only where the sizes and strides it is passed are divisible by 16 (its integer specialization). A
row of 3001 fp16 elements is neither, so such a kernel does not even compile on the usual ragged GEMM case
("cp.async does not support transfers smaller than 4 bytes", measured with fbtriton's pipelined TLX GEMM on
Hopper). Its ragged case keeps what a tile must mask: the outer dimension stays odd and the inner ones are
rounded up to a multiple of 16 that no tile of 128 divides. The kernel is read with `ast`, never imported.
"""

from __future__ import annotations

import ast

# Calls that copy through cp.async or the tensor-memory accelerator, by their last dotted name.
ASYNC_COPY_CALLS = frozenset({
    "async_load", "async_descriptor_load", "async_descriptor_store", "async_copy_global_to_local",
    "async_copy_global_to_shared", "make_tensor_descriptor", "TensorDescriptor",
    "_experimental_descriptor_load", "_experimental_make_tensor_descriptor",
})
# Dimensions that only count rows, programs or batches: a ragged value there needs no alignment.
OUTER_DIMENSIONS = frozenset({"m", "rows", "batch"})
ALIGNMENT = 16  # elements: 16 bytes at one byte an element, and Triton's divisibility specialization
TILE = 128      # the rounded size stays ragged for every tile that divides this


def async_copy_evidence(tree: ast.Module) -> str | None:
    """Where the kernel file first copies asynchronously ("`tlx.async_load` at line 87"), or None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name.rsplit(".", 1)[-1] in ASYNC_COPY_CALLS:
                return f"`{name}` at line {node.lineno}"
    return None


def aligned_size(size: int) -> int:
    """`size` rounded up to a multiple of ALIGNMENT that TILE does not divide (3001 -> 3008, 1000 -> 1008)."""
    aligned = -(-size // ALIGNMENT) * ALIGNMENT
    while aligned % TILE == 0:
        aligned += ALIGNMENT
    return aligned


def aligned_case(case: dict[str, object]) -> dict[str, object]:
    """A ragged case with every inner dimension aligned, renamed after its dimensions; other cases unchanged."""
    case_id = str(case["case_id"])
    if not case_id.startswith("ragged_"):
        return case
    parameters = dict(case["parameters"])  # type: ignore[arg-type]
    for name, value in parameters.items():
        if name not in OUTER_DIMENSIONS and name != "budget_seconds" and isinstance(value, int):
            parameters[name] = aligned_size(value)
    dimensions = [str(value) for name, value in parameters.items() if name != "budget_seconds"]
    return {**case, "case_id": "ragged_" + "x".join(dimensions), "parameters": parameters}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""
