"""The limits table and the occupancy arithmetic (pure)."""

from __future__ import annotations

import pytest

from orchestrator.compile_ahead import LIMITS, limits_for, max_threads_per_block, occupancy

H200 = limits_for(90)


def test_the_h200_limits_are_the_ones_its_errors_and_the_guide_state():
    assert H200.shared_memory_per_block == 232448  # "Hardware limit: 232448" in the H200's OutOfResources
    assert (H200.registers_per_sm, H200.max_registers_per_thread, H200.max_threads_per_sm, H200.max_blocks_per_sm) \
        == (65536, 255, 2048, 32)
    assert limits_for(80).shared_memory_per_block == 166912


@pytest.mark.parametrize("cc", sorted(LIMITS))
def test_every_number_names_its_source(cc):
    limits = LIMITS[cc]
    numbers = {name for name, value in limits.model_dump().items()
               if isinstance(value, int) and name not in ("compute_capability", "warp_size")}
    assert numbers <= set(limits.sources), numbers - set(limits.sources)
    assert all(source.strip() for source in limits.sources.values())


def test_an_unknown_capability_is_refused_by_name():
    with pytest.raises(ValueError, match=r"sm_75.*known: sm_80"):
        limits_for(75)


@pytest.mark.parametrize(("registers", "threads"), [(255, 256), (224, 256), (128, 512), (64, 1024), (0, 1024)])
def test_registers_bound_the_block(registers, threads):
    assert max_threads_per_block(H200, registers) == threads


def test_a_register_bound_matmul_tile_fits_two_blocks():
    # 128x128x64 fp16 tile, 3 stages, 4 warps, as compiled for sm_90 (tests/compile_ahead/test_compile.py)
    fit = occupancy(H200, num_warps=4, registers_per_thread=222, shared_bytes=98304)
    assert (fit.blocks_per_sm, fit.warps_per_sm, fit.limited_by) == (2, 8, "registers")
    assert fit.per_limit["shared memory"] == 2 and fit.fraction == 0.125


def test_shared_memory_at_the_limit_leaves_one_block_and_over_it_none():
    assert occupancy(H200, num_warps=4, registers_per_thread=32, shared_bytes=232448).blocks_per_sm == 1
    over = occupancy(H200, num_warps=4, registers_per_thread=32, shared_bytes=294912)
    assert (over.blocks_per_sm, over.limited_by) == (0, "shared memory")


def test_small_blocks_are_bound_by_warps_or_blocks():
    assert occupancy(H200, num_warps=4, registers_per_thread=21, shared_bytes=16).limited_by == "warps"
    one_warp = occupancy(H200, num_warps=1, registers_per_thread=16, shared_bytes=0)
    assert (one_warp.blocks_per_sm, one_warp.limited_by) == (32, "blocks")


def test_too_many_registers_for_the_block_fit_nowhere():
    fit = occupancy(H200, num_warps=16, registers_per_thread=255, shared_bytes=0)
    assert (fit.blocks_per_sm, fit.limited_by) == (0, "registers")
