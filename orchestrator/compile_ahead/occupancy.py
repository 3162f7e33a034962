"""Theoretical occupancy from a compiled kernel's resources, by the rules of `cuda_occupancy.h`.

The same arithmetic as `cudaOccMaxActiveBlocksPerMultiprocessor` (shipped with Triton in
triton/backends/nvidia/include/cuda_occupancy.h), for the largest shared-memory carveout: Triton asks the
driver to prefer shared memory for any kernel over 48 KB, and the figure is a ceiling, not a prediction.
Registers are allocated per warp in units of `register_allocation_unit`; the per-block register check
rounds a block's warps up to the SM's sub-partitions; shared memory per block is the kernel's plus the
driver's reserved KB, rounded up to the allocation unit.
"""

from __future__ import annotations

from pydantic import ConfigDict

from orchestrator.compile_ahead.limits import DeviceLimits
from protocol.base import StrictModel

LIMITERS = ("blocks", "warps", "registers", "shared memory", "barriers")


class Occupancy(StrictModel):
    """How many blocks of this kernel one SM can hold at once, and what stops it holding more."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    blocks_per_sm: int
    warps_per_sm: int
    fraction: float  # warps_per_sm / the SM's maximum resident warps
    limited_by: str  # one of LIMITERS: the first that gives the minimum
    per_limit: dict[str, int]  # blocks per SM each resource alone allows


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def registers_per_warp(limits: DeviceLimits, registers_per_thread: int) -> int:
    return _round_up(registers_per_thread * limits.warp_size, limits.register_allocation_unit)


def max_threads_per_block(limits: DeviceLimits, registers_per_thread: int) -> int:
    """The largest block the per-block register check admits (what CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
    reports for these registers), at most the device's threads per block. 255 registers give 256 threads."""
    per_warp = registers_per_warp(limits, registers_per_thread)
    if per_warp == 0:
        return limits.max_threads_per_block
    warps = (limits.registers_per_block // per_warp) // limits.sub_partitions * limits.sub_partitions
    return min(limits.max_threads_per_block, warps * limits.warp_size)


def shared_memory_per_block(limits: DeviceLimits, shared_bytes: int) -> int:
    """What one block takes from the SM: the kernel's bytes plus the reserved KB, rounded up."""
    return _round_up(shared_bytes + limits.reserved_shared_memory_per_block, limits.shared_memory_allocation_unit)


def _blocks_by_registers(limits: DeviceLimits, registers_per_thread: int, warps_per_block: int) -> int:
    per_warp = registers_per_warp(limits, registers_per_thread)
    if per_warp == 0:
        return limits.max_blocks_per_sm
    assumed = per_warp * _round_up(warps_per_block, limits.sub_partitions)
    if (assumed > limits.registers_per_block or per_warp * warps_per_block > limits.registers_per_block
            or registers_per_thread > limits.max_registers_per_thread):
        return 0
    warps_per_sub_partition = (limits.registers_per_sm // limits.sub_partitions) // per_warp
    return warps_per_sub_partition * limits.sub_partitions // warps_per_block


def _blocks_by_shared(limits: DeviceLimits, shared_bytes: int) -> int:
    if shared_bytes > limits.shared_memory_per_block:
        return 0
    return limits.shared_memory_per_sm // shared_memory_per_block(limits, shared_bytes)


def occupancy(limits: DeviceLimits, *, num_warps: int, registers_per_thread: int, shared_bytes: int,
              barriers: int = 1) -> Occupancy:
    """Blocks and warps per SM for a block of `num_warps` warps; zero blocks when one block does not fit."""
    if num_warps <= 0:
        raise ValueError(f"num_warps must be positive, got {num_warps}")
    per_limit = {
        "blocks": limits.max_blocks_per_sm,
        "warps": limits.max_warps_per_sm // num_warps,
        "registers": _blocks_by_registers(limits, registers_per_thread, num_warps),
        "shared memory": _blocks_by_shared(limits, shared_bytes),
        "barriers": (limits.max_blocks_per_sm * limits.barrier_blocks_factor // barriers if barriers > 0
                     else limits.max_blocks_per_sm),
    }
    blocks = min(per_limit.values())
    limited_by = next(name for name in LIMITERS if per_limit[name] == blocks)
    warps = blocks * num_warps
    return Occupancy(blocks_per_sm=blocks, warps_per_sm=warps, fraction=round(warps / limits.max_warps_per_sm, 4),
                     limited_by=limited_by, per_limit=per_limit)
