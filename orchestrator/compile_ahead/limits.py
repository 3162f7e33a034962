"""Per-block and per-SM resource limits of NVIDIA GPUs, keyed by compute capability (90 = sm_90).

Each number says where it comes from (`DeviceLimits.sources`):
- GUIDE: the CUDA C++ Programming Guide, table "Technical Specifications per Compute Capability"
  (shared memory per SM and per block with opt-in, 32-bit registers per SM, per block and per thread,
  threads per block and per SM, resident blocks per SM).
- OCCUPANCY_H: `cuda_occupancy.h`, shipped with Triton in `triton/backends/nvidia/include/` (allocation units
  for shared memory and registers, sub-partitions, resident blocks per SM, barriers per block).
- TUNING_GUIDE: the Ampere and Hopper tuning guides: the driver reserves 1 KB of shared memory per block.
- OBSERVED: on the H200 (sm_90) Triton refuses a kernel with "OutOfResources: shared memory, Required:
  294912, Hardware limit: 232448" (tests/faults/test_fault_corpus.py keeps the same message).
  Triton compares the kernel's `shared` metadata with the device's opt-in maximum, without the reserved KB.
"""

from __future__ import annotations

from pydantic import ConfigDict

from protocol.base import StrictModel

GUIDE = "CUDA C++ Programming Guide, Technical Specifications per Compute Capability"
OCCUPANCY_H = "cuda_occupancy.h (triton/backends/nvidia/include)"
TUNING_GUIDE = "NVIDIA Ampere/Hopper tuning guides: 1 KB of shared memory reserved per block"
OBSERVED = "H200 OutOfResources message, 'Hardware limit: 232448'"


class DeviceLimits(StrictModel):
    """What one block and one SM of a compute capability can hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compute_capability: int  # major * 10 + minor
    examples: str  # devices of this capability, for messages
    shared_memory_per_block: int  # bytes, the opt-in maximum a kernel may request
    shared_memory_per_sm: int  # bytes, with the largest carveout
    reserved_shared_memory_per_block: int  # bytes the driver adds to each block
    shared_memory_allocation_unit: int  # bytes
    registers_per_sm: int  # 32-bit registers
    registers_per_block: int
    max_registers_per_thread: int
    register_allocation_unit: int  # registers, allocated per warp
    sub_partitions: int  # a block's warps are rounded up to this many for the per-block register check
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    barrier_blocks_factor: int  # named barriers available per SM = max_blocks_per_sm * this
    warp_size: int = 32
    sources: dict[str, str]

    @property
    def sm(self) -> str:
        return f"sm_{self.compute_capability}"

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size


def _limits(cc: int, examples: str, *, shared_block: int, shared_sm: int, threads_sm: int, blocks_sm: int,
            barrier_factor: int, shared_source: str = GUIDE) -> DeviceLimits:
    return DeviceLimits(
        compute_capability=cc, examples=examples, shared_memory_per_block=shared_block,
        shared_memory_per_sm=shared_sm, reserved_shared_memory_per_block=1024, shared_memory_allocation_unit=128,
        registers_per_sm=65536, registers_per_block=65536, max_registers_per_thread=255,
        register_allocation_unit=256, sub_partitions=4, max_threads_per_block=1024, max_threads_per_sm=threads_sm,
        max_blocks_per_sm=blocks_sm, barrier_blocks_factor=barrier_factor,
        sources={
            "shared_memory_per_block": shared_source, "shared_memory_per_sm": GUIDE,
            "reserved_shared_memory_per_block": TUNING_GUIDE, "shared_memory_allocation_unit": OCCUPANCY_H,
            "registers_per_sm": GUIDE, "registers_per_block": GUIDE, "max_registers_per_thread": GUIDE,
            "register_allocation_unit": OCCUPANCY_H, "sub_partitions": OCCUPANCY_H,
            "max_threads_per_block": GUIDE, "max_threads_per_sm": GUIDE,
            "max_blocks_per_sm": f"{GUIDE}; {OCCUPANCY_H}", "barrier_blocks_factor": OCCUPANCY_H,
        })


LIMITS: dict[int, DeviceLimits] = {
    80: _limits(80, "A100, A800", shared_block=166912, shared_sm=167936, threads_sm=2048, blocks_sm=32,
                barrier_factor=2),
    86: _limits(86, "RTX 30xx, A10, A40", shared_block=101376, shared_sm=102400, threads_sm=1536, blocks_sm=16,
                barrier_factor=1),
    89: _limits(89, "RTX 40xx, L4, L40", shared_block=101376, shared_sm=102400, threads_sm=1536, blocks_sm=24,
                barrier_factor=1),
    90: _limits(90, "H100, H200, H20, GH200", shared_block=232448, shared_sm=233472, threads_sm=2048,
                blocks_sm=32, barrier_factor=2, shared_source=f"{GUIDE}; {OBSERVED}"),
    100: _limits(100, "B200, GB200", shared_block=232448, shared_sm=233472, threads_sm=2048, blocks_sm=32,
                 barrier_factor=2),
}


def limits_for(compute_capability: int) -> DeviceLimits:
    """The table's limits; an unknown capability is an error (a guess could let a config through)."""
    try:
        return LIMITS[compute_capability]
    except KeyError:
        known = ", ".join(f"sm_{cc}" for cc in sorted(LIMITS))
        raise ValueError(f"no resource limits recorded for sm_{compute_capability}; known: {known}") from None
