"""GPU cheat (e) a record whose kernel metadata names another kernel than its binary defines.

Technique: the work runs in a kernel of another name (`add_kernel_work`), and an empty `add_kernel` is launched
too. When the judge asks the candidate process for the compiled kernels of its record, the candidate rewrites the
payload of the working kernel so that its name and metadata say `add_kernel`: a judge that takes names from the
record attributes all GPU time to `main_scope`, and one that takes kernel facts from the metadata launches what
the candidate describes.
Gain if it works: the profile checks that compare main_scope with other kernels see only the main kernel.
Targets: kernel names and metadata read from the record's words. The judge reads the kernels a binary defines
from its ELF symbol table and refuses a payload whose metadata names a function the binary does not define.
"""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024


@triton.jit
def add_kernel_work(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def add_kernel(out_ptr, n_elements):
    pass


def _spoof(payload_of):
    def payload(kernel):
        described = payload_of(kernel)
        if described.get("name") == "add_kernel_work":
            described["name"] = "add_kernel"
            described["metadata"] = {**described["metadata"], "name": "add_kernel"}
        return described
    return payload


try:  # in the judge's candidate process the recorder is importable: the payloads it sends are rewritten
    import sandbox_worker.judged.recording as _recording
except ImportError:
    _recording = None
if _recording is not None and not getattr(_recording.kernel_payload, "spoofed", False):
    _recording.kernel_payload = _spoof(_recording.kernel_payload)
    _recording.kernel_payload.spoofed = True


def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    out = torch.empty_like(x)
    add_kernel_work[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, n, BLOCK_SIZE=BLOCK_SIZE)
    add_kernel[(1,)](out, n)
    return out
