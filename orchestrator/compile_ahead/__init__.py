"""Compile ahead: a config's shared memory, registers, spills and occupancy, read before any GPU time is spent.

Why: on the H200 the tuner spent 3 of 7 matmul candidates on configs that cannot run (Triton's
"OutOfResources: shared memory, Required: 294912, Hardware limit: 232448"; ptxas "Insufficient registers");
each cost a whole GPU worker and came back `incorrect`. Triton compiles for an explicit target without a GPU
(`triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32),
options={"num_warps", "num_stages"})`, the same in Triton 3.6 and 3.9), and the compile already knows what the
GPU would refuse: so each config is compiled on the host's cores first, and one over the device's limits
never reaches a GPU worker (`judge` says `infeasible`, naming the resource; the evaluation calls that
`build_failed`, with `build_failed_reason`).

What it reads, per config (reports.py): shared memory from Triton's `shared` metadata (set when shared memory is
allocated, in the LLVM IR stage: a config over the limit stops there, before PTX and ptxas); registers per
thread, spill stores and loads, stack frame (local memory) and barriers from the `ptxas -v` log Triton prints
under TRITON_DUMP_PTXAS_LOG (or `cuobjdump --dump-resource-usage` on the cubin, both shipped in
`triton/backends/nvidia/bin/`); ptxas failures ("Insufficient registers") from the error. Max threads per block
and theoretical occupancy (blocks and warps per SM, and which resource limits them) follow from those figures
by the rules of `cuda_occupancy.h` (occupancy.py).

Limits (limits.py, keyed by compute capability, each number with its source):
    sm   shared/block  shared/SM  regs/SM  regs/thread  threads/SM  blocks/SM
    80   166912        167936     65536    255          2048        32
    86   101376        102400     65536    255          1536        16
    89   101376        102400     65536    255          1536        24
    90   232448        233472     65536    255          2048        32
    100  232448        233472     65536    255          2048        32
Sources: the CUDA C++ Programming Guide's per-compute-capability table (shared memory, registers, threads,
blocks); `cuda_occupancy.h` as shipped with Triton (allocation units: 128 B of shared memory, 256 registers
per warp; 4 sub-partitions; blocks per SM; barriers); the Ampere and Hopper tuning guides (1 KB of shared
memory reserved per block); the H200's own OutOfResources message (232448 B).

Safety: candidate files are imported only in the compile child (child.py), which isolates itself like a
worker (no network, writes confined to its scratch directory, seccomp, rlimits), sees no GPU, and answers a
tutorial's module-level driver queries from the target. A candidate can only misreport its own configs, and a
config reported feasible still goes through the GPU worker and every gate. A config is kept off the GPU only
by its own compile (a failure, or a figure over a limit) or by pruning next to a config kept off for a resource.

Modules: `limits`, `occupancy` (pure arithmetic), `models` (what goes in and out: `ConfigSpec`,
`KernelSignature`, `CompilePlan`, `ResourceReport`), `signature` (`signature_from_launch`: Triton's typing of a
launch from example arguments, by `ast`; `kernel_scope`), `compile` (`compile_configs`: child processes in
parallel lanes with per-config deadlines; `compile_plan` for one evaluation), `child` (the script those
processes run), `reports` (their output as `ResourceReport`s), `feasibility` (`judge`, `prune_neighbours`,
`build_failed_reason`, `judge_launches`, `judge_source_error`), `store` (`InfeasibleStore`, the JSON-lines
memory of infeasible configs).

Variants (what the tuner screens, or any candidate) need no signature or config from outside: `variants`
(`check_variant(s)`) runs `launch_child`, which imports the frozen harness and the variant, makes Triton's JIT
compile without launching (and autotune lists compile config by config) and calls the entry on each case's CPU
inputs; every compile Triton makes is reported and `judge_launches` gives the variant's verdict. `ahead`
(`compile_target_for` a run's target, `check_ahead` for one candidate, `remember_infeasible` /
`remembered_for` with the store) is what the run uses; orchestrator/run/screening.py wires it into screening.
"""

from __future__ import annotations

from orchestrator.compile_ahead.compile import CompileJob, compile_configs, compile_configs_sync, compile_plan
from orchestrator.compile_ahead.feasibility import (
    Feasibility,
    Verdict,
    build_failed_reason,
    is_neighbour,
    is_resource_knob,
    judge,
    prune_neighbours,
    pruning_knobs,
)
from orchestrator.compile_ahead.limits import LIMITS, DeviceLimits, limits_for
from orchestrator.compile_ahead.models import (
    RESOURCES,
    CompileOutcome,
    CompilePlan,
    CompileTarget,
    ConfigSpec,
    KernelSignature,
    ResourceProblem,
    ResourceReport,
)
from orchestrator.compile_ahead.occupancy import Occupancy, max_threads_per_block, occupancy
from orchestrator.compile_ahead.signature import (
    SignatureError,
    TensorArg,
    kernel_scope,
    signature_from_launch,
)
from orchestrator.compile_ahead.store import InfeasibleEntry, InfeasibleStore, StoreCorrupt

__all__ = ["LIMITS", "RESOURCES", "CompileJob", "CompileOutcome", "CompilePlan", "CompileTarget", "ConfigSpec",
           "DeviceLimits", "Feasibility", "InfeasibleEntry", "InfeasibleStore", "KernelSignature", "Occupancy",
           "ResourceProblem", "ResourceReport", "SignatureError", "StoreCorrupt", "TensorArg", "Verdict",
           "build_failed_reason", "compile_configs", "compile_configs_sync", "compile_plan", "is_neighbour", "is_resource_knob", "judge", "kernel_scope", "limits_for",
           "max_threads_per_block", "occupancy", "prune_neighbours", "pruning_knobs", "signature_from_launch"]
