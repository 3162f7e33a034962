"""The shared arena of judged mode: not capped by the worker's RLIMIT_FSIZE, shared across the fork, and a
case too large for it is refused with a message that says what to change.

On the H200 the memfd the arena replaced failed the first judged run on vector_add's n64M case: two slots of
three 256 MiB tensors are more than the worker's 1 GiB file-size limit allows a memfd to grow.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap

import pytest

from sandbox_worker.judged.slots import ArenaTooSmall, plan_layout, require_fit, reserve_arena, slot_views

CHILD = textwrap.dedent("""
    import os, resource
    from sandbox_worker.judged.slots import reserve_arena
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    arena = reserve_arena(64 << 20)
    pid = os.fork()
    if pid == 0:
        arena[(32 << 20) + 7] = 42  # 32 MiB in: far past the file-size limit
        os._exit(0)
    os.waitpid(pid, 0)
    print(arena[(32 << 20) + 7], len(arena))
""")


def test_the_arena_is_shared_across_fork_and_not_capped_by_the_file_size_limit():
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["42", str(64 << 20)]
    assert resource.getrlimit(resource.RLIMIT_FSIZE)  # this process's limits were left alone


def test_a_case_larger_than_the_arena_is_refused_naming_the_sizes_and_the_way_out():
    torch = pytest.importorskip("torch")
    arena = reserve_arena(1 << 20)
    layout = plan_layout((torch.zeros(200_000), torch.zeros(200_000)), (torch.zeros(200_000),))
    with pytest.raises(ArenaTooSmall, match=r'need 4\.6 MiB.*2 slots.*holds 1\.0 MiB.*"verdict_process": "candidate"'):
        require_fit(arena, layout, 2)
    require_fit(reserve_arena(8 << 20), layout, 2)  # 4.6 MiB for both slots fits in 8 MiB


def test_each_slot_tensor_has_a_storage_of_its_own_bytes_so_the_interpreter_copies_no_more():
    # The Triton interpreter copies each argument's whole storage back after every launch. Views over the whole
    # arena gave an input and an output-argument two storages at one address: a 7 ms kernel took 690 ms a call
    # (init-bundle's preallocated-output path in `validate`, 154 s -> 12 s once fixed).
    import torch

    arena = reserve_arena(64 << 20)
    x, out = torch.arange(300, dtype=torch.float32), torch.zeros(300, dtype=torch.float32)
    layout = plan_layout((x, out), (out,), outputs_are_arguments=True)
    per_slot = slot_views(arena, layout, 2)
    tensors = [tensor for inputs, outputs in per_slot for tensor in (*inputs, *outputs)]
    assert [t.untyped_storage().nbytes() for t in tensors] == [t.numel() * t.element_size() for t in tensors]
    assert len({t.untyped_storage().data_ptr() for t in tensors}) == len(tensors)
    per_slot[1][0][0].copy_(x)  # writes land in the shared memory, at the slot's offset
    again = slot_views(arena, layout, 2)[1][0][0]
    assert torch.equal(again, x)
