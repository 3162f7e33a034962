"""What compile ahead takes and gives: the target, a kernel's signature, one config, and its resource report."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import ConfigDict, Field

from orchestrator.compile_ahead.limits import DeviceLimits, limits_for
from orchestrator.compile_ahead.occupancy import Occupancy
from protocol.base import StrictModel

Scalar = int | float | bool | str | None
# The resources a problem may name; "compile" and "source" are failures that are not a hardware resource.
SHARED_MEMORY, REGISTERS, THREADS, COMPILE, SOURCE = "shared memory", "registers", "threads", "compile", "source"
RESOURCES = (SHARED_MEMORY, REGISTERS, THREADS, COMPILE, SOURCE)


class Frozen(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CompileTarget(Frozen):
    """The device a kernel is compiled for: Triton's `GPUTarget(backend, arch, warp_size)`."""

    backend: Literal["cuda"] = "cuda"
    arch: int = 90  # compute capability, major * 10 + minor
    warp_size: int = 32

    @property
    def limits(self) -> DeviceLimits:
        return limits_for(self.arch)

    @property
    def name(self) -> str:
        return f"{self.backend}:sm_{self.arch}"


class KernelSignature(Frozen):
    """A kernel's parameters as Triton types them for one launch (`signature_from_launch` makes one)."""

    kernel_name: str
    parameters: list[str]  # in declaration order
    types: dict[str, str]  # parameter -> "*fp16", "i32", "fp32", "u1" or "constexpr"
    constexprs: dict[str, Scalar] = Field(default_factory=dict)  # values of the "constexpr" parameters
    divisible_by_16: list[str] = Field(default_factory=list)  # pointers and integers Triton marks 16-divisible
    launch_options: dict[str, Scalar] = Field(default_factory=dict)  # num_warps, num_stages, ... given at the launch
    notes: list[str] = Field(default_factory=list)  # what was assumed


class ConfigSpec(Frozen):
    """One launch configuration: constexpr values over the signature's, and the compile options."""

    constexprs: dict[str, Scalar] = Field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 3
    maxnreg: int | None = None

    def knobs(self) -> dict[str, int]:
        """The integer settings, by name, as pruning and the infeasible store compare them."""
        values = {name: value for name, value in self.constexprs.items()
                  if isinstance(value, int) and not isinstance(value, bool)}
        values.update(num_warps=self.num_warps, num_stages=self.num_stages)
        if self.maxnreg is not None:
            values["maxnreg"] = self.maxnreg
        return values

    def label(self) -> str:
        return " ".join(f"{name}={value}" for name, value in self.knobs().items())


class CompilePlan(Frozen):
    """What a proposal carries so that its evaluation can be compiled ahead: the kernel's launch signature, the
    config the candidate launches it with, and the target."""

    signature: KernelSignature
    config: ConfigSpec
    target: CompileTarget = Field(default_factory=CompileTarget)


class CompileOutcome(str, Enum):
    COMPILED = "compiled"  # through ptxas: every figure below is known
    SHARED_OVER_LIMIT = "shared_over_limit"  # stopped once shared memory was allocated, before PTX
    COMPILE_FAILED = "compile_failed"  # Triton or ptxas raised; `problems` names the resource when there is one
    SOURCE_FAILED = "source_failed"  # the file did not import here, has no such kernel, or not with these parameters
    TIMEOUT = "timeout"  # over the per-config deadline
    CRASHED = "crashed"  # the child died while compiling this config
    REFUSED = "refused"  # the child could not isolate itself and imported nothing


class ResourceProblem(Frozen):
    resource: str  # one of RESOURCES
    message: str  # e.g. "shared memory 294912 B > 232448 B limit (sm_90)"


class ResourceReport(StrictModel):
    """What one config's compile for the target says about its resources (None: not known)."""

    config: ConfigSpec
    target: CompileTarget
    outcome: CompileOutcome
    shared_memory_bytes: int | None = None
    registers_per_thread: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    local_memory_bytes: int | None = None  # per thread: the stack frame, where spills live
    barriers: int | None = None
    num_warps: int | None = None  # as compiled (warp specialisation may change it)
    max_threads_per_block: int | None = None  # that the registers allow
    occupancy: Occupancy | None = None
    problems: list[ResourceProblem] = Field(default_factory=list)
    seconds: float = 0.0
    triton_version: str | None = None
    isolation: dict[str, str] = Field(default_factory=dict)
    detail: str = ""  # the error, or the ptxas log, clipped
    kernel_name: str | None = None  # the compiled kernel, when compile ahead found it by running the entry
