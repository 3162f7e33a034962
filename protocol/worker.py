"""JSON-lines messages between the orchestrator and one sandboxed worker.

One socketpair fd carries both directions, one JSON object per line. Commands go to the worker,
events come back. The worker (standard library only) builds these shapes by hand; the orchestrator
validates every line it receives against `WorkerEvent`, and `tests/test_protocol.py` checks that
every shape the worker can emit parses.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from protocol.autotune import AutotuneActivity, AutotuneSetup
from protocol.base import StrictModel

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_TEXT = 20_000


class IsolationConfig(StrictModel):
    """What the worker must apply to itself before importing the harness or the candidate."""

    mode: Literal["strict", "standard", "off"] = "standard"
    scratch_dir: str
    writable_dirs: list[str] = Field(default_factory=list)
    data_limit_bytes: int | None = None
    cpu_seconds: int | None = None
    file_size_bytes: int | None = 1 << 30
    open_files: int | None = 4096
    network: bool = False


# ---- orchestrator -> worker -------------------------------------------------------------------


class SetupCommand(StrictModel):
    kind: Literal["setup"] = "setup"
    run_id: str
    experiment_id: str
    harness_path: str
    kernel_path: str
    target: dict[str, Any]
    isolation: IsolationConfig
    # kernels that autotune themselves: pin the run's choice, or (the trusted step) let the autotune run
    autotune: AutotuneSetup | None = None


class BuildCommand(StrictModel):
    kind: Literal["build"] = "build"
    command_id: int


class VerifyCommand(StrictModel):
    kind: Literal["verify"] = "verify"
    command_id: int
    case: dict[str, Any]
    seed: int


TimingMode = Literal["events", "cuda_graph", "cpu"]


class BenchmarkCommand(StrictModel):
    kind: Literal["benchmark"] = "benchmark"
    command_id: int
    case: dict[str, Any]
    repetitions: int
    seed: int
    # the case's timing mode, fixed by the run from its first measurement (or the case's own `timing_mode`);
    # None only for that first measurement, where the worker's "auto" decides and reports what it chose
    timing_mode: TimingMode | None = None


class ProfileCommand(StrictModel):
    kind: Literal["profile"] = "profile"
    command_id: int
    case: dict[str, Any]
    request: dict[str, Any]
    seed: int


class ScreenVariant(StrictModel):
    variant_id: str = Field(max_length=100)
    kernel_path: str


class ScreenCommand(StrictModel):
    """Screening: build, verify and briefly time many variants of one source in this one worker, to rank
    them; the full evaluation of the best few is what decides (orchestrator/run/screening.py)."""

    kind: Literal["screen"] = "screen"
    command_id: int
    variants: list[ScreenVariant] = Field(min_length=1, max_length=256)
    cases: list[dict[str, Any]] = Field(min_length=1)
    seconds_per_case: float = Field(gt=0.0, le=60.0)
    repetitions: int = Field(ge=1)
    seed: int
    # the worker starts no further variant once this much time has passed; the rest come back unscreened
    budget_seconds: float = Field(default=600.0, gt=0.0)
    # each case's verify also records the integer locals of the variant's functions (per-shape tables)
    observe_locals: bool = False


class AutotuneCommand(StrictModel):
    """The trusted autotune step: call the untouched kernel through the harness's verify, case by case, and let
    its autotune run (orchestrator/autotune/step.py); the reply is every choice made."""

    kind: Literal["autotune"] = "autotune"
    command_id: int
    cases: list[dict[str, Any]] = Field(min_length=1)
    seed: int


class FirstCallCommand(StrictModel):
    """Load the kernel and call it once on one case, in a worker that has done nothing else (first-call latency)."""

    kind: Literal["first_call"] = "first_call"
    command_id: int
    case: dict[str, Any]
    seed: int


class ShutdownCommand(StrictModel):
    kind: Literal["shutdown"] = "shutdown"


WorkerCommand = Annotated[
    SetupCommand | BuildCommand | VerifyCommand | BenchmarkCommand | ProfileCommand | ScreenCommand
    | AutotuneCommand | FirstCallCommand | ShutdownCommand,
    Field(discriminator="kind"),
]

# ---- worker -> orchestrator -------------------------------------------------------------------


class HelloEvent(StrictModel):
    """First line: the worker is alive and speaks this protocol version."""

    kind: Literal["hello"]
    protocol_version: int
    pid: int
    python: str


class PidNamespace(StrictModel):
    """The worker's own PID namespace (the `processes` isolation layer, sandbox_worker/isolation/pidns.py)."""

    inode: int = Field(gt=0)  # of /proc/<pid>/ns/pid
    init_pid: int = Field(gt=0)  # its pid 1, as the orchestrator's /proc numbers it


class ReadyEvent(StrictModel):
    """After setup: isolation applied, harness imported, its functions found."""

    kind: Literal["ready"]
    isolation: dict[str, str]
    harness_functions: list[str]
    profile_arity: int | None
    versions: dict[str, str | None]
    device: str | None
    setup_seconds: float
    pid_namespace: PidNamespace | None = None  # None when the `processes` layer is not active
    # "judge": verify and benchmark run in this process and the candidate in a forked one
    # (sandbox_worker/judged/); "candidate": the harness calls the candidate in this process.
    verdict_process: Literal["judge", "candidate"] = "candidate"


class ReplyEvent(StrictModel):
    """A command finished; `value` is the normalized harness result."""

    kind: Literal["reply"]
    command_id: int
    value: dict[str, Any]
    seconds: float


class FailureEvent(StrictModel):
    """A harness or candidate call raised; the worker stays usable for the next command."""

    kind: Literal["failure"]
    command_id: int | None
    phase: Literal["setup", "build", "verify", "benchmark", "profile", "screen", "autotune", "first_call"]
    error_type: str = Field(max_length=200)
    message: str = Field(max_length=MAX_TEXT)
    traceback: str = Field(default="", max_length=MAX_TEXT)
    # "cheat": a judge's check the honest kernel always passes failed; "crashed": the candidate's own
    # process died while the worker (the judge) lived on; "build": Triton could not compile the kernel for
    # the device on its first launch (sandbox_worker/failures.py).
    category: Literal["exception", "resource_limit", "sandbox_violation", "tamper", "cheat", "crashed",
                      "build"] = "exception"


class AutotuneProgressEvent(StrictModel):
    """During `autotune` or `first_call`: a kernel's autotune starts timing one more configuration."""

    kind: Literal["autotune_progress"]
    command_id: int
    kernel: str = Field(max_length=200)
    key: dict[Annotated[str, Field(max_length=200)], Any] = Field(max_length=64)  # key argument -> value
    case_id: str | None = Field(default=None, max_length=200)
    configuration: int = Field(ge=1)
    of: int = Field(ge=1)
    config: dict[str, Any] = Field(max_length=64)
    # set when the key's whole list starts compiling on this many threads before its first timing
    compiling_threads: int | None = Field(default=None, ge=1, le=1024)


class FinishedEvent(StrictModel):
    """The last word of a clean shutdown."""

    kind: Literal["finished"]
    # what Triton's autotuners did, per process ("worker"; "candidate_process" as the judge's candidate
    # process reported it); absent when the worker was given no autotune setup
    autotune: dict[Literal["worker", "candidate_process"], AutotuneActivity] | None = None
    # a judged worker's launchers it built itself, base64 by path under the Triton cache root: the run keeps
    # them for later workers (orchestrator/worker/launcher_store.py); the orchestrator takes them only from a
    # worker whose verdicts were the judge's, and checks each name and content again
    launchers: dict[Annotated[str, Field(max_length=300)], Annotated[str, Field(max_length=8 << 20)]] | None = Field(
        default=None, max_length=16)


WorkerEvent = Annotated[
    HelloEvent | ReadyEvent | ReplyEvent | FailureEvent | AutotuneProgressEvent | FinishedEvent,
    Field(discriminator="kind"),
]
WORKER_EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(WorkerEvent)
WORKER_COMMAND_ADAPTER: TypeAdapter[Any] = TypeAdapter(WorkerCommand)

# ---- normalized harness values (inside ReplyEvent.value) ----------------------------------------


class BuildValue(StrictModel):
    success: bool
    diagnostics: str = Field(default="", max_length=MAX_TEXT)


class VerifyValue(StrictModel):
    passed: bool
    diagnostics: str = Field(default="", max_length=MAX_TEXT)
    metrics: dict[str, Any] = Field(default_factory=dict)


class ScreenedVariant(StrictModel):
    """One variant's screening: `ok` with its median per case, or why it dropped out."""

    variant_id: str = Field(max_length=100)
    status: Literal["ok", "build_failed", "incorrect", "failed"]
    reason: str = Field(default="", max_length=2000)
    medians_us: dict[str, Annotated[float, Field(gt=0.0, lt=1e12, allow_inf_nan=False)]] = Field(default_factory=dict)
    samples: dict[str, int] = Field(default_factory=dict)
    # per case, `function.local` -> its integer value when verify ran it (sandbox_worker/observe.py): it
    # shapes a per-shape table's proposal, never a decision
    observed: dict[str, Annotated[dict[Annotated[str, Field(max_length=200)], int], Field(max_length=64)]] = Field(
        default_factory=dict, max_length=1000)


class ScreenValue(StrictModel):
    variants: list[ScreenedVariant]


class BenchmarkValue(StrictModel):
    # finite, > 0 and below 1e12 µs: anything else is a broken or hostile harness, never a statistic
    samples_us: list[Annotated[float, Field(gt=0.0, lt=1e12, allow_inf_nan=False)]] = Field(min_length=1,
                                                                                            max_length=1_000_000)
    warmup_count: int | None = None
    cache_policy: str | None = Field(default=None, max_length=200)
    metrics: dict[str, Any] = Field(default_factory=dict)
