"""The standard harness for a kernel file with one Python entry point (what the examples use).

A harness supplies how to draw a case's inputs from a salt and a trusted reference; these helpers do
the rest the same way everywhere: build (load the candidate, find the entry), verify (seeded inputs,
poisoned outputs, magnitude-aware comparison), benchmark (timing kit with a re-check of the last timed
output), `run_case` (one launch on inputs cached per case and seed, what Proton times and NCU replays)
and the structured profile.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox_worker.harness_kit import checks, context, timing
from sandbox_worker.harness_kit.loader import load_kernel_module

MakeInputs = Callable[[dict[str, Any], str, int], Sequence[Any]]  # (case, device, salt) -> positional inputs
BENCHMARK_SALT = 101
PROFILE_SALT = 202


@dataclass(frozen=True)
class JudgedEntry:
    """What a harness declares as `JUDGE` so that its verdicts are computed outside the candidate's process
    (sandbox_worker/judged/judge.py): the entry's name, how to draw a case's inputs, the trusted reference,
    the comparison options of `checks.compare` (plus `allow_input_mutation`) and the case's work figures;
    with `outputs_are_arguments` the reference returns the outputs the entry is to write into.
    The worker then judges the candidate from another process: on the CPU (the Triton interpreter) by calling
    it per sample, on a GPU by replaying the Triton launches it recorded (sandbox_worker/judged/gpu_judge.py).
    A harness without `JUDGE` keeps its own `verify`/`benchmark`, run in the candidate's process."""

    entry: str
    kernel_name: str
    make_inputs: MakeInputs
    reference: Callable[..., Any]
    signature: str = "(...)"
    compare: dict[str, Any] = field(default_factory=dict)
    work: Callable[[dict[str, Any]], dict[str, float]] | None = None
    outputs_are_arguments: bool = False  # the entry writes into outputs passed after its inputs
    verify_blocker: str | None = None  # while set, verify fails every case with this message
    failure_note: str | None = None  # added to the diagnostics of a failed verify


GPU_BACKENDS = ("cuda", "nvidia")  # protocol.bundle.GPU_BACKENDS, which this stdlib-only side cannot import


def device_for(target: dict[str, Any]) -> str:
    """The target's CUDA device when the backend is CUDA and one is visible, else the CPU (interpreter)."""
    if str(target.get("backend", "")).lower() in GPU_BACKENDS and timing.cuda_available():
        device = str(target.get("device") or "cuda")
        return device if device.startswith("cuda") else "cuda"
    return "cpu"


def build_entry(kernel_source: str, target: dict[str, Any], *, entry: str, kernel_name: str,
                signature: str = "(...)") -> dict[str, Any]:
    """Load the candidate from a file and find `entry`; any import-time error is a failed build."""
    try:
        module = load_kernel_module(kernel_source)
    except Exception as exc:  # noqa: BLE001 - the candidate's import errors are build diagnostics
        return {"success": False, "diagnostics": f"{type(exc).__name__}: {exc}"}
    function = getattr(module, entry, None)
    if not callable(function):
        return {"success": False, "diagnostics": f"kernel does not export {entry}{signature}"}
    return {"success": True, "artifact": {
        "fn": function, "device": device_for(target), "kernel_name": kernel_name,
        "main_scope": target.get("main_scope") or kernel_name, "source": kernel_source, "target": target,
        "inputs": {}}}


def budget_seconds(case: dict[str, Any], default: float = 2.0) -> float:
    return float(case["parameters"].get("budget_seconds", default))


def timing_mode(case: dict[str, Any], device: str) -> str:
    """On a GPU, the mode the orchestrator fixed for the case (`context.timing_mode()`: the case's
    `timing_mode` parameter, or what the run's first measurement of it chose), else the case's parameter, else
    "auto"; "auto" elsewhere. One mode per case keeps every side of a comparison timed the same way, whatever
    the candidate does in its warm-up."""
    if not device.startswith("cuda"):
        return "auto"
    return context.timing_mode() or str(case["parameters"].get("timing_mode", "auto"))


def verify_entry(artifact: dict[str, Any], case: dict[str, Any], make_inputs: MakeInputs, reference: Callable,
                 **compare: Any) -> dict[str, Any]:
    device = artifact["device"]
    return checks.verify_call(artifact["fn"], reference, lambda salt: make_inputs(case, device, salt), **compare)


def benchmark_entry(artifact: dict[str, Any], case: dict[str, Any], repetitions: int, make_inputs: MakeInputs,
                    reference: Callable, *, work: dict[str, float] | None = None, **compare: Any) -> dict[str, Any]:
    device = artifact["device"]
    inputs = make_inputs(case, device, BENCHMARK_SALT)
    check_last = checks.last_output_check(reference, inputs, **compare)
    result = timing.measure(lambda: artifact["fn"](*inputs), repetitions=repetitions, device=device,
                            mode=timing_mode(case, device), budget_seconds=budget_seconds(case),
                            check_last=check_last)
    result["metrics"].update(work or {})
    return result


def run_entry_case(artifact: dict[str, Any], case: dict[str, Any], make_inputs: MakeInputs) -> Any:
    """Launch the case once on inputs drawn once per (case, seed); the NCU replay child, which rebuilds
    the artifact and is sent the same seed, launches exactly the same work."""
    key = (str(case.get("case_id")), context.evaluation_seed())
    cache = artifact["inputs"]
    if key not in cache:
        cache.clear()
        cache[key] = make_inputs(case, artifact["device"], PROFILE_SALT)
    return artifact["fn"](*cache[key])


def profile_entry(artifact: dict[str, Any], case: dict[str, Any], request: dict[str, Any] | None,
                  run_case: Callable[[], Any], harness_path: str) -> dict[str, Any]:
    """Proton attribution and NCU (through a replay of `harness_path`'s `run_case`) per the request."""
    from sandbox_worker.harness_kit.profile_kit import profile_with_kit

    return profile_with_kit(
        run_case, request=request, case=case, kernel_name=artifact["kernel_name"], main_scope=artifact["main_scope"],
        ncu_replay={"harness_path": harness_path, "kernel_source": artifact["source"], "target": artifact["target"],
                    "entry": "run_case"})
