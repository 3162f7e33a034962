"""The names the judge reports are the binary's own: read from a real CUDA binary (compiled here, without a GPU,
by Triton's own ptxas), and a payload whose metadata names a function the binary lacks is refused."""

from __future__ import annotations

import base64
import json

import pytest

from sandbox_worker.judged.cubin import NotACudaBinary, kernel_entries
from sandbox_worker.judged.replay import KernelLibrary, RecordRefused

KERNEL = "c" * 64


@pytest.fixture(scope="module")
def compiled():
    """A Triton kernel compiled for sm_90 on this CPU host: (cubin bytes, metadata)."""
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out + offsets, tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask), mask=mask)

    source = ASTSource(add_kernel, signature={"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32",
                                              "BLOCK": "constexpr"}, constexprs={"BLOCK": 1024})
    kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32))
    metadata_path = next(path for name, path in kernel.metadata_group.items() if name.endswith(".json"))
    with open(metadata_path) as handle:
        return kernel.kernel, json.load(handle)


def test_the_kernel_a_real_binary_defines_is_read_from_its_symbol_table(compiled):
    binary, metadata = compiled
    assert kernel_entries(binary) == ["add_kernel"] == [metadata["name"]]


@pytest.mark.parametrize("data", [b"", b"\x7fELF" + b"\0" * 60, b"MZ" + b"\0" * 100])
def test_bytes_that_are_no_cuda_binary_are_refused_by_name(data):
    with pytest.raises(NotACudaBinary):
        kernel_entries(data)


def test_a_payload_whose_metadata_names_another_kernel_is_refused_before_the_driver_sees_it(compiled, tmp_path):
    binary, metadata = compiled
    payload = {"hash": KERNEL, "metadata": {**metadata, "name": "main_kernel_that_does_all_the_work"},
               "signature": {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32", "BLOCK": "constexpr"},
               "binary": base64.b64encode(binary).decode()}
    library = KernelLibrary(tmp_path)
    with pytest.raises(RecordRefused, match="names 'main_kernel_that_does_all_the_work', which the binary does not "
                                            "define \\(it defines add_kernel\\)"):
        library.load(KERNEL, payload)
    assert KERNEL not in library
    payload["binary"] = base64.b64encode(b"\x7fELF" + b"\0" * 100).decode()
    with pytest.raises(RecordRefused, match="the binary is not a CUDA kernel"):
        library.load(KERNEL, payload)
