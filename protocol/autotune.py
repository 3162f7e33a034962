"""Kernels that autotune themselves (`@triton.autotune` with more than one configuration): the run's choice.

A run lets the untouched kernel's own autotune run once per autotune key, in a trusted step (a worker that
runs the user's kernel and no candidate), and hands that choice to every later worker, which pins it
instead of autotuning again (`sandbox_worker/autotune_guard.py`, `orchestrator/autotune/`, docs/autotune.md).
These are the shapes of that choice as workers send it and as run.json, result.json and the lock keep it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from protocol.base import StrictModel

MAX_CHOICES = 256
MAX_TIMINGS = 512
KeyItem = Annotated[bool | int | float | str | None, Field(union_mode="left_to_right")]
ShortText = Annotated[str, Field(max_length=200)]
# "triton": the kernel's own benchmarker on the device (its `do_bench`, CUDA graphs included);
# "interpreter_cpu": under TRITON_INTERPRET=1 Triton has no benchmarker, so the step times each configuration
# on the CPU itself (a figure of the interpreter, not of any GPU)
AutotuneTimer = Literal["triton", "interpreter_cpu"]


class AutotuneTiming(StrictModel):
    """One configuration the autotune tried for one key, and its median in milliseconds (None: it failed)."""

    config: dict[str, Any]
    median_ms: Annotated[float, Field(ge=0.0, allow_inf_nan=False)] | None = None


class CompiledAhead(StrictModel):
    """How a key's list was compiled before Triton timed it (sandbox_worker/autotune_compile.py): on `threads`
    threads in `seconds`, with a kernel ready for `compiled` of its `configurations` when the threads finished
    (fewer: the rest failed to compile, and their timings compile or fail as Triton's would; None: this Triton's
    pending compiles could not be read), or not, with why (`failed`: the timings then compiled one by one, as
    Triton does)."""

    threads: int | None = Field(default=None, ge=1, le=1024)
    seconds: Annotated[float, Field(ge=0.0, allow_inf_nan=False)] | None = None
    configurations: int | None = Field(default=None, ge=0)
    compiled: int | None = Field(default=None, ge=0)
    failed: ShortText | None = None


class AutotuneChoice(StrictModel):
    """The configuration a kernel's autotune chose for one key in the trusted step."""

    kernel: ShortText  # the @triton.jit function's name
    key: list[KeyItem] = Field(max_length=64)  # Triton's own cache key for the call, element by element
    key_values: dict[ShortText, Any] = Field(default_factory=dict, max_length=64)  # key argument -> its value
    case_ids: list[ShortText] = Field(default_factory=list)  # the cases whose calls have this key
    config: dict[str, Any]  # the chosen triton.Config: its kwargs and launch options (never its hooks)
    config_index: int | None = Field(default=None, ge=0)  # its place in the kernel's list
    configs_listed: int = Field(ge=1)  # the kernel's list
    configs_tried: int = Field(ge=1)  # after the kernel's own pruning (`prune_configs_by`)
    measured_ms: Annotated[float, Field(ge=0.0, allow_inf_nan=False)] | None = None  # the choice's median
    timings: list[AutotuneTiming] = Field(default_factory=list, max_length=MAX_TIMINGS)
    seconds: float = Field(default=0.0, ge=0.0)  # wall time of this key's autotune, compiles included
    timer: AutotuneTimer = "triton"
    compiled_ahead: CompiledAhead | None = None  # the list compiled on threads before the timings (GPU only)


class AutotunePin(StrictModel):
    """What a later worker is given: for this kernel and key, this configuration. A call is matched by its key's
    arguments by name and its tensors' dtypes (`key_values`, what Triton's key is made of), when Triton prunes
    because the key is not in its cache; `key` is Triton's own tuple, for the record."""

    kernel: ShortText
    key: list[KeyItem] = Field(max_length=64)
    key_values: dict[ShortText, Any] = Field(max_length=64)
    config: dict[str, Any]


class AutotuneSetup(StrictModel):
    """Part of a worker's setup. "pin": every autotune of the worker is answered from `pins`; a key without a pin,
    or a pin whose configuration is not in the kernel's list, is refused by name (the worker never benchmarks
    configurations itself). "tune": the trusted step (the untouched kernel, or a first-call measurement): the
    autotune runs, timed by Triton's benchmarker, or on the interpreter by the step's own CPU timer."""

    mode: Literal["pin", "tune"]
    pins: list[AutotunePin] = Field(default_factory=list, max_length=MAX_CHOICES)


class AutotuneActivity(StrictModel):
    """What Triton's autotuners did in one process of a worker (`sandbox_worker/autotune_guard.py`)."""

    mode: Literal["pin", "tune"]
    pinned: int = Field(default=0, ge=0)  # keys answered from a choice instead of an autotune
    tuned: int = Field(default=0, ge=0)  # keys autotuned here (configurations benchmarked)
    configurations_timed: int = Field(default=0, ge=0)
    refused: int = Field(default=0, ge=0)  # autotunes refused by name
    single: int = Field(default=0, ge=0)  # calls whose pruned list held one configuration: nothing to choose
    tuned_during: list[ShortText] = Field(default_factory=list, max_length=16)  # phases an autotune ran in


class FirstCall(StrictModel):
    """The first call of a kernel in a fresh worker process: its import, compile (or cache) and autotune."""

    case_id: ShortText
    seconds: float = Field(ge=0.0)  # the orchestrator's clock around the command
    import_seconds: float = Field(ge=0.0)  # the worker's split: loading the kernel file
    call_seconds: float = Field(ge=0.0)  # ... and its first call, synchronized
    what: Literal["entry", "verify"]  # the harness's JUDGE entry on drawn inputs, or its verify (no JUDGE)
    timer: AutotuneTimer  # "interpreter_cpu": the Triton interpreter's figure, not a GPU's
    autotuned: int = Field(default=0, ge=0)  # keys autotuned during it


class AutotuneRecord(StrictModel):
    """The run's autotune step: what was chosen, how long it took, and the first calls measured."""

    kernels: list[ShortText] = Field(default_factory=list)  # autotuned kernels of the untouched source
    choices: list[AutotuneChoice] = Field(default_factory=list, max_length=MAX_CHOICES)
    seconds: float = Field(default=0.0, ge=0.0)  # the step's worker, start to end
    untouched_first_call: FirstCall | None = None
    # why the untouched kernel's first call has no figure (the step's deadline cut it, or left it no time)
    untouched_first_call_unmeasured: Annotated[str, Field(max_length=400)] | None = None
    winner_first_call: FirstCall | None = None
    winner_experiment_id: str | None = None

    def pins(self) -> list[AutotunePin]:
        return [AutotunePin(kernel=c.kernel, key=c.key, key_values=c.key_values, config=c.config)
                for c in self.choices]


class AutotuneCaseOutcome(StrictModel):
    case_id: ShortText
    passed: bool
    diagnostics: str = Field(default="", max_length=2000)
    seconds: float = Field(ge=0.0)


class AutotuneValue(StrictModel):
    """The reply to `autotune`: each case's call through the harness's verify, and every choice made."""

    cases: list[AutotuneCaseOutcome]
    choices: list[AutotuneChoice] = Field(max_length=MAX_CHOICES)


class FirstCallValue(StrictModel):
    """The reply to `first_call` (the worker's split of it; the orchestrator times the command itself)."""

    case_id: ShortText
    import_seconds: float = Field(ge=0.0)
    call_seconds: float = Field(ge=0.0)
    what: Literal["entry", "verify"]
    passed: bool | None = None  # verify's verdict when `what` is "verify"
    autotuned: int = Field(default=0, ge=0)
    choices: list[AutotuneChoice] = Field(default_factory=list, max_length=MAX_CHOICES)
