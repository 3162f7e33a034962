"""Starter harness for ${kernel_file}:${entry} (${kind}), written by `tlx-agent init-bundle`.

Inputs: ${input_list} (${shape_doc}, ${dtype}), drawn from the seed the orchestrator sends with every
command.${output_doc} The reference is the kernel as it was when this bundle was made (REFERENCE_SOURCE
below): candidates are compared with the untouched kernel on fresh inputs, outputs are poisoned between
timed calls and the last timed output is re-checked (`harness_kit.checks`, `harness_kit.timing`).

TODO: replace `reference()` with an independent PyTorch implementation when you can (a reference that
shares the kernel's code shares its bugs), add the production shapes to cases.json, the kernel's
invariants to target.json's optimization_guidance, then run `tlx-agent validate` again.
"""

from __future__ import annotations

from typing import Any

import torch

from sandbox_worker.harness_kit import checks, context, timing
from sandbox_worker.harness_kit.loader import load_kernel_module

# template: render_harness (orchestrator/bundle/init_bundle.py) fills the ${...} fields of the module docstring
# template: and replaces the values of ENTRY_POINT, KIND, INPUT_NAMES, OUTPUT_NAMES, DTYPE, MAIN_SCOPE and
# template: REFERENCE_SOURCE; the values here are an example that keeps this file a working module. Lines
# template: starting with "# template:" are not written to the generated harness.
ENTRY_POINT = "entry"
KIND = "elementwise"
INPUT_NAMES = ("x",)
OUTPUT_NAMES = ()  # preallocated outputs, passed after the inputs
DTYPE = torch.float32
MAIN_SCOPE = None
BENCHMARK_SALT = 101
PROFILE_SALT = 202
REFERENCE_SOURCE = (
    "def entry(x):\n"
    "    return x * 2\n"
)
_reference_module: list[Any] = []


def _device(target: dict[str, Any]) -> str:
    """The device the target names; a CUDA target without a visible GPU is an error, never a CPU fallback."""
    if str(target.get("backend", "")).lower() in ("cuda", "nvidia"):
        if not torch.cuda.is_available():
            raise RuntimeError("target backend is cuda, but torch sees no CUDA device")
        device = str(target.get("device") or "cuda")
        return device if device.startswith("cuda") else "cuda"
    return "cpu"


def build(kernel_source: str, target: dict[str, Any]) -> dict[str, Any]:
    try:
        module = load_kernel_module(kernel_source)
        device = _device(target)
    except Exception as exc:  # noqa: BLE001 - any import-time error is a failed build
        return {"success": False, "diagnostics": f"{type(exc).__name__}: {exc}"}
    function = getattr(module, ENTRY_POINT, None)
    if not callable(function):
        return {"success": False, "diagnostics": f"kernel does not export {ENTRY_POINT}()"}
    artifact = {"fn": function, "device": device, "main_scope": target.get("main_scope") or MAIN_SCOPE,
                "source": kernel_source, "target": target, "inputs": {}}
    return {"success": True, "artifact": artifact}


def _shape(case: dict[str, Any]) -> tuple[int, ...]:
    parameters = case["parameters"]
    if KIND == "rowwise":
        return int(parameters["rows"]), int(parameters["cols"])
    return (int(parameters["n"]),)


def _inputs(case: dict[str, Any], device: str, salt: int) -> tuple[torch.Tensor, ...]:
    generator = checks.make_generator(device, salt=salt)
    shape = _shape(case)
    return tuple(checks.random_tensor(shape, DTYPE, device, generator) for _ in INPUT_NAMES)


def _outputs(*inputs: torch.Tensor) -> Any:
    buffers = tuple(torch.empty_like(inputs[0]) for _ in OUTPUT_NAMES)
    return buffers[0] if len(buffers) == 1 else buffers


def _as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def reference(*inputs: torch.Tensor) -> Any:
    """The untouched kernel's output (see the module doc); replace with a PyTorch expression when you can."""
    if not _reference_module:
        _reference_module.append(load_kernel_module(REFERENCE_SOURCE, name_prefix="tlx_reference"))
    function = getattr(_reference_module[0], ENTRY_POINT)
    if OUTPUT_NAMES:
        outputs = _outputs(*inputs)
        function(*inputs, *_as_tuple(outputs))
        return outputs
    return function(*inputs)


def verify(artifact: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    device = artifact["device"]
    return checks.verify_call(artifact["fn"], reference, lambda salt: _inputs(case, device, salt),
                              output_factory=_outputs if OUTPUT_NAMES else None)


def _bound_call(artifact: dict[str, Any], inputs: tuple) -> tuple[Any, Any]:
    """(a no-argument call of the candidate on `inputs`, its preallocated outputs or None)."""
    function = artifact["fn"]
    if OUTPUT_NAMES:
        outputs = _outputs(*inputs)
        buffers = _as_tuple(outputs)
        return (lambda: function(*inputs, *buffers)), outputs
    return (lambda: function(*inputs)), None


def benchmark(artifact: dict[str, Any], case: dict[str, Any], repetitions: int) -> dict[str, Any]:
    device = artifact["device"]
    inputs = _inputs(case, device, salt=BENCHMARK_SALT)
    call, outputs = _bound_call(artifact, inputs)
    check_last = checks.last_output_check(reference, inputs, outputs=outputs)
    budget = float(case["parameters"].get("budget_seconds", 2.0))
    return timing.measure(call, repetitions=repetitions, device=device, budget_seconds=budget,
                          check_last=check_last)


def run_case(artifact: dict[str, Any], case: dict[str, Any]) -> Any:
    """Launch the case once on inputs drawn once per (case, seed): what Proton times and ncu replays."""
    key = (str(case.get("case_id")), context.evaluation_seed())
    cache = artifact["inputs"]
    if key not in cache:
        cache.clear()
        cache[key] = _bound_call(artifact, _inputs(case, artifact["device"], salt=PROFILE_SALT))[0]
    return cache[key]()


def profile(artifact: dict[str, Any], case: dict[str, Any], request: dict[str, Any] | None = None) -> dict[str, Any]:
    from sandbox_worker.harness_kit.profile_kit import profile_with_kit

    return profile_with_kit(
        lambda: run_case(artifact, case), request=request, case=case, kernel_name=artifact["main_scope"],
        main_scope=artifact["main_scope"],
        ncu_replay={"harness_path": __file__, "kernel_source": artifact["source"], "target": artifact["target"],
                    "entry": "run_case"})
