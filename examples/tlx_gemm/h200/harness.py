# init-bundle guessed what this harness assumes about matmul() in kernel.py; check each guess, and edit
# INPUTS, OUTPUTS, reference() or cases.json where one is wrong:
# - kind: gemm (`matmul` in its name); check: pass --kind (elementwise, rowwise, norm, reduction, gemm, bmm)
#   if the kernel is another kind
# - a: a tensor of shape (m, k) (`M, K = a.shape` in matmul(); gemm: a is (..., m, k)); check: the entry
#   must take this shape; otherwise edit INPUTS in harness.py (and cases.json's dimensions)
# - b: a tensor of shape (k, n) (`K, N = b.shape` in matmul(); gemm: b is (..., k, n)); check: the entry
#   must take this shape; otherwise edit INPUTS in harness.py (and cases.json's dimensions)
# - config: not passed: keeps its default None (a parameter with a default); check: to test other values,
#   add it to INPUTS (and to reference())
# - reference: the matrix product a @ b (the entry's name `matmul` and its arguments); check: if the kernel
#   computes something else, validate fails on verify: rewrite reference() in harness.py
"""Starter harness for kernel.py:matmul (gemm), written by `tlx-agent init-bundle`.

Inputs, in the entry's order: a (m, k), b (k, n) (tensors float16, in the case's dimensions from
cases.json), drawn from the seed the orchestrator sends with every command. Output: what matmul() returns, a
(m, n) tensor.

The reference is the matrix product a @ b in fp64, init-bundle's guess from the entry's name and arguments.
The last timed output is re-checked (`harness_kit.checks`, `harness_kit.timing`).

Checked for this example: the tutorial's matmul(a, b) is the fp16 product a @ b with fp32 accumulation (the
reference is right), and its `config` argument stays None so the kernel's own autotune config is what runs.
"""

from __future__ import annotations

from typing import Any

import torch

from sandbox_worker.harness_kit import checks, context, entry_point, timing
from sandbox_worker.harness_kit.loader import load_kernel_module

ENTRY_POINT = 'matmul'
KIND = 'gemm'
# The entry's arguments, in its order: a tensor is the tuple of its shape's case dimensions (cases.json);
# a scalar is "float" (drawn in [0.5, 2)), "int" (drawn in [1, 8]), "bool", "dim:D" (the case's dimension
# D), "shape:D" (the tuple (D,)) or "none" (None: the entry does not use it).
INPUTS = {'a': ('m', 'k'), 'b': ('k', 'n')}
OUTPUTS = {}  # preallocated outputs (name -> shape), passed after the inputs
DTYPE = torch.float16
MAIN_SCOPE = 'matmul_kernel_pipelined_hopper'
COMPARE = {}  # options of checks.compare (atol, rtol, base, ...) for verify and the last timed output
BENCHMARK_SALT = 101
PROFILE_SALT = 202
REFERENCE_TODO = None  # while this is a message, verify fails every case with it
REFERENCE_NOTE = (
    "the reference is init-bundle's guess, the matrix product a @ b, from the entry's name `matmul` "
    "and its arguments: if matmul() computes something else, rewrite reference() in "
    "examples/tlx_gemm/h200/harness.py"
)  # what the reference assumes: added to verify's diagnostics when a case fails


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


def _dimensions(case: dict[str, Any]) -> dict[str, int]:
    """The case's dimensions: its integer parameters (`budget_seconds` and `timing_mode` are settings)."""
    return {name: int(value) for name, value in case["parameters"].items()
            if isinstance(value, int) and not isinstance(value, bool) and name != "budget_seconds"}


def _draw(spec: Any, dimensions: dict[str, int], device: str, generator: torch.Generator) -> Any:
    """One argument as INPUTS describes it."""
    if isinstance(spec, tuple):
        return checks.random_tensor(tuple(dimensions[name] for name in spec), DTYPE, device, generator)
    if spec == "float":  # never near 0, so a candidate that ignores the scalar or bakes one in fails
        return 1.25 + 0.75 * float(checks.random_tensor((1,), torch.float64, device, generator))
    if spec == "int":
        return int(checks.random_tensor((1,), torch.int64, device, generator, low=1, high=9))
    if spec == "bool":
        return bool(checks.random_tensor((1,), torch.bool, device, generator))
    what, _, names = spec.partition(":")
    if what == "dim":
        return dimensions[names]
    if what == "shape":
        return tuple(dimensions[name] for name in names.split(","))
    return None


def _inputs(case: dict[str, Any], device: str, salt: int) -> tuple[Any, ...]:
    generator = checks.make_generator(device, salt=salt)
    dimensions = _dimensions(case)
    return tuple(_draw(spec, dimensions, device, generator) for spec in INPUTS.values())


def _dimensions_of(inputs: tuple[Any, ...]) -> dict[str, int]:
    """The dimensions the inputs were drawn with (read back from their shapes)."""
    dimensions: dict[str, int] = {}
    for spec, value in zip(INPUTS.values(), inputs, strict=True):
        if isinstance(spec, tuple):
            dimensions.update(zip(spec, value.shape, strict=True))
        elif isinstance(spec, str) and spec.startswith("dim:"):
            dimensions[spec[4:]] = value
    return dimensions


# The work every call must do: the physics check refuses a measurement faster than the device's peaks allow, and
# the report shows each case's percent of peak. Each tensor input is read once and each output written once;
# the arithmetic is the kind's (a lower bound: a count that is too high makes honest kernels look impossible).
RETURNED_OUTPUT = {"elementwise": ("n",), "rowwise": ("rows", "cols"), "norm": ("rows", "cols"),
                   "reduction": ("rows",), "gemm": ("m", "n"), "bmm": ("batch", "m", "n")}


def _work(case: dict[str, Any]) -> dict[str, Any]:
    dimensions = _dimensions(case)

    def elements(shape: tuple[str, ...]) -> int:
        count = 1
        for name in shape:
            count *= dimensions.get(name, 0)
        return count

    shapes = [spec for spec in INPUTS.values() if isinstance(spec, tuple)]
    shapes += list(OUTPUTS.values()) or [RETURNED_OUTPUT.get(KIND, ())]
    counts = [elements(shape) for shape in shapes if shape]
    products = {"gemm": ("m", "n", "k"), "bmm": ("batch", "m", "n", "k")}
    flops = 2 * elements(products[KIND]) if KIND in products else max(counts, default=0)
    return {"bytes": float(sum(counts) * torch.empty((), dtype=DTYPE).element_size()), "flops": float(flops),
            "flop_dtype": str(DTYPE).removeprefix("torch.")}


def _outputs(*inputs: Any) -> Any:
    dimensions = _dimensions_of(inputs)
    device = next(value.device for value in inputs if isinstance(value, torch.Tensor))
    buffers = tuple(torch.empty(tuple(dimensions[name] for name in shape), dtype=DTYPE, device=device)
                    for shape in OUTPUTS.values())
    return buffers[0] if len(buffers) == 1 else buffers


def _as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def reference(a, b):
    """init-bundle's guess from the entry's name and arguments: a @ b for a (m, k) and b (k, n) in fp64,
    rounded once to a's dtype."""
    return torch.matmul(a.double(), b.double()).to(a.dtype)


# Verify and benchmark through the judge (sandbox_worker/judged/): on the CPU interpreter the candidate runs in
# its own process and every check and the clock stay in the worker; on a GPU the functions below are used.
JUDGE = entry_point.JudgedEntry(entry=ENTRY_POINT, kernel_name=str(MAIN_SCOPE or ENTRY_POINT), make_inputs=_inputs,
                                reference=reference, compare=COMPARE, outputs_are_arguments=bool(OUTPUTS),
                                verify_blocker=REFERENCE_TODO, failure_note=REFERENCE_NOTE, work=_work)


def verify(artifact: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    if REFERENCE_TODO:
        return checks.verdict(False, REFERENCE_TODO)
    device = artifact["device"]
    result = checks.verify_call(artifact["fn"], reference, lambda salt: _inputs(case, device, salt),
                                output_factory=_outputs if OUTPUTS else None, **COMPARE)
    if not result["passed"] and REFERENCE_NOTE:
        result["diagnostics"] += f" ({REFERENCE_NOTE})"
    return result


def _bound_call(artifact: dict[str, Any], inputs: tuple) -> tuple[Any, Any]:
    """(a no-argument call of the candidate on `inputs`, its preallocated outputs or None)."""
    function = artifact["fn"]
    if OUTPUTS:
        outputs = _outputs(*inputs)
        buffers = _as_tuple(outputs)
        return (lambda: function(*inputs, *buffers)), outputs
    return (lambda: function(*inputs)), None


def benchmark(artifact: dict[str, Any], case: dict[str, Any], repetitions: int) -> dict[str, Any]:
    device = artifact["device"]
    inputs = _inputs(case, device, salt=BENCHMARK_SALT)
    call, outputs = _bound_call(artifact, inputs)
    check_last = checks.last_output_check(reference, inputs, outputs=outputs, **COMPARE)
    budget = float(case["parameters"].get("budget_seconds", 2.0))
    result = timing.measure(call, repetitions=repetitions, device=device, budget_seconds=budget,
                            mode=entry_point.timing_mode(case, device), check_last=check_last)
    result["metrics"].update(_work(case))
    return result


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
