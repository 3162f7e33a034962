"""`tlx-agent init-bundle`: a starter harness.py, cases.json and target.json for one kernel entry point.

The entry function's signature (read with `ast`, the kernel is never imported here) says how many
tensors it takes: required positional parameters without a scalar annotation are inputs; trailing ones
named like outputs (`out`, `output`, `result`, `dst`, `*_out`, `out_*`) are preallocated outputs the
harness allocates and poisons. `elementwise` inputs are 1-D of `n` elements, `rowwise` inputs 2-D
`(rows, cols)`. The reference is the untouched kernel itself, embedded in harness.py (so it survives
the run's freeze): every candidate is compared with the original on fresh seeded inputs. That is a
starting point, not a proof: a reference sharing the kernel's code shares its bugs, so the generated
harness says where to put an independent PyTorch reference. `tlx-agent validate` passes on the result.
"""

from __future__ import annotations

import argparse
import ast
import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from string import Template

from orchestrator.bundle.arch import lookup
from orchestrator.bundle.inputs import parse_python
from orchestrator.preflight.negative_variants import is_kernel_function
from protocol.bundle import BundleError
from protocol.outcome import ExitCode

SCALAR_ANNOTATIONS = frozenset({"int", "float", "bool", "str", "complex"})
OUTPUT_NAMES = frozenset({"out", "output", "result", "dst", "dest"})
CASES = {  # CPU: small enough for the interpreter (about 1 ms per program); CUDA: production-sized
    ("elementwise", "cpu"): [{"case_id": "n2048", "parameters": {"n": 2048, "budget_seconds": 0.3}, "weight": 2.0},
                             {"case_id": "ragged_1001", "parameters": {"n": 1001, "budget_seconds": 0.3}, "weight": 1.0}],
    ("elementwise", "cuda"): [{"case_id": "n16M", "parameters": {"n": 16777216}, "weight": 2.0},
                              {"case_id": "ragged_10000003", "parameters": {"n": 10000003}, "weight": 1.0}],
    ("rowwise", "cpu"): [{"case_id": "rows8_cols128", "parameters": {"rows": 8, "cols": 128, "budget_seconds": 0.3},
                          "weight": 2.0},
                         {"case_id": "ragged_5x97", "parameters": {"rows": 5, "cols": 97, "budget_seconds": 0.3},
                          "weight": 1.0}],
    ("rowwise", "cuda"): [{"case_id": "rows4096_cols4096", "parameters": {"rows": 4096, "cols": 4096}, "weight": 2.0},
                          {"case_id": "ragged_4097x1000", "parameters": {"rows": 4097, "cols": 1000}, "weight": 1.0}],
}


@dataclass
class EntrySignature:
    name: str
    inputs: list[str]
    outputs: list[str]
    kernels: list[str]  # @triton.jit kernels the entry launches, in source order
    all_kernels: list[str]

    @property
    def main_scope(self) -> str | None:
        if self.kernels:
            return self.kernels[0]
        return self.all_kernels[0] if len(self.all_kernels) == 1 else None


def _annotation_name(node: ast.expr | None) -> str | None:
    if node is None:
        return None
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(".")[-1]
    return None


def _is_output_name(name: str) -> bool:
    return name in OUTPUT_NAMES or name.endswith("_out") or name.startswith("out_")


def read_entry(tree: ast.Module, entry: str, kernel_path: Path) -> EntrySignature:
    functions = {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    all_kernels = [name for name, node in functions.items() if is_kernel_function(node)]
    node = functions.get(entry)
    if node is None:
        public = [name for name, fn in functions.items() if not name.startswith("_") and not is_kernel_function(fn)]
        raise BundleError(f"kernel {kernel_path} defines no top-level function {entry!r}; "
                          f"public functions: {', '.join(public) or 'none'}")
    if is_kernel_function(node):
        raise BundleError(f"{entry!r} in {kernel_path} is a Triton kernel; pass the Python function that launches it")
    args = node.args
    if args.vararg is not None:
        raise BundleError(f"{entry}(*{args.vararg.arg}) in {kernel_path}: variadic entry points cannot be inferred; "
                          "write the harness by hand")
    positional = [*args.posonlyargs, *args.args]
    required = positional[:len(positional) - len(args.defaults)]
    missing_kw = [a.arg for a, default in zip(args.kwonlyargs, args.kw_defaults, strict=True) if default is None]
    if missing_kw:
        raise BundleError(f"{entry}() in {kernel_path} has required keyword-only parameter(s) {', '.join(missing_kw)}; "
                          "give them defaults or write the harness by hand")
    scalars = [a.arg for a in required if _annotation_name(a.annotation) in SCALAR_ANNOTATIONS]
    if scalars:
        raise BundleError(f"{entry}() in {kernel_path} has required scalar parameter(s) {', '.join(scalars)}; "
                          "init-bundle only fills tensors: give them defaults or write the harness by hand")
    names = [a.arg for a in required]
    outputs: list[str] = []
    while names and _is_output_name(names[-1]):
        outputs.insert(0, names.pop())
    misplaced = [name for name in names if _is_output_name(name)]
    if misplaced:
        raise BundleError(f"{entry}() in {kernel_path}: output parameter(s) {', '.join(misplaced)} must come after "
                          "every input")
    if not names:
        raise BundleError(f"{entry}() in {kernel_path} takes no input tensor; nothing to generate inputs for")
    launched: list[str] = []
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            target = call.func.value if isinstance(call.func, ast.Subscript) else call.func
            if isinstance(target, ast.Name) and target.id in all_kernels and target.id not in launched:
                launched.append(target.id)
    return EntrySignature(name=entry, inputs=names, outputs=outputs, kernels=launched, all_kernels=all_kernels)


HARNESS_TEMPLATE = Template('''"""Starter harness for ${kernel_file}:${entry} (${kind}), written by `tlx-agent init-bundle`.

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

ENTRY_POINT = ${entry_repr}
KIND = ${kind_repr}
INPUT_NAMES = ${inputs_repr}
OUTPUT_NAMES = ${outputs_repr}  # preallocated outputs, passed after the inputs
DTYPE = torch.${dtype}
MAIN_SCOPE = ${main_scope_repr}
BENCHMARK_SALT = 101
PROFILE_SALT = 202
REFERENCE_SOURCE = (
${reference_source})
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
''')


def _embedded(source: str) -> str:
    lines = source.splitlines(keepends=True) or [""]
    return "".join(f"    {line!r}\n" for line in lines)


def render_harness(*, kernel_file: str, signature: EntrySignature, kind: str, dtype: str, source: str) -> str:
    shape_doc = "1-D tensors of n elements" if kind == "elementwise" else "2-D (rows, cols) tensors"
    output_doc = (f" Preallocated outputs {', '.join(signature.outputs)} are passed after the inputs."
                  if signature.outputs else "")
    return HARNESS_TEMPLATE.substitute(
        kernel_file=kernel_file, entry=signature.name, kind=kind, input_list=", ".join(signature.inputs),
        shape_doc=shape_doc, dtype=dtype, output_doc=output_doc, entry_repr=repr(signature.name), kind_repr=repr(kind),
        inputs_repr=repr(tuple(signature.inputs)), outputs_repr=repr(tuple(signature.outputs)),
        main_scope_repr=repr(signature.main_scope), reference_source=_embedded(source))


def render_target(*, backend: str, arch: str | None, signature: EntrySignature, kind: str) -> dict[str, object]:
    guidance = (f"{kind} kernel: {signature.name}({', '.join(signature.inputs + signature.outputs)}). Generated by "
                "tlx-agent init-bundle: the harness compares candidates with the untouched kernel. Add the kernel's "
                "invariants, known failed configurations and evidence-to-knob rules here.")
    target: dict[str, object] = {"backend": backend}
    if backend == "cpu":
        target.update(architecture="interpreter", device="cpu", environment={"TRITON_INTERPRET": "1"})
    else:
        target.update(architecture=arch, device="cuda:0", environment={})
    if signature.main_scope:
        target["main_scope"] = signature.main_scope
    target["optimization_guidance"] = guidance
    return target


def render_cases(kind: str, backend: str) -> list[dict[str, object]]:
    return [{**case, "protected": True} for case in CASES[(kind, backend)]]


def init_bundle_main(args: argparse.Namespace) -> int:
    from orchestrator.cli.output import emit
    from orchestrator.run.ledger.live_log import LiveLog

    kernel = args.kernel.expanduser().resolve()
    out = args.out.expanduser().resolve()
    source, tree = parse_python(kernel, "kernel")
    if args.backend == "cuda":
        if not args.arch:
            raise BundleError("--backend cuda needs --arch (for example h200 or b200) for target.json's architecture")
        spec = lookup(args.arch)
        if spec is None or spec.kind != "cuda":
            raise BundleError(f"--arch {args.arch!r} is not a known CUDA architecture (h200, h100, b200, a100, sm_90, ...)")
    elif args.arch and (lookup(args.arch) is None or lookup(args.arch).kind != "cpu"):  # type: ignore[union-attr]
        raise BundleError(f"--backend cpu runs the Triton interpreter; --arch {args.arch!r} does not apply")
    if args.backend == "cpu" and args.dtype == "bfloat16":
        raise BundleError("--dtype bfloat16 with --backend cpu: the Triton interpreter has no bf16 arithmetic")
    signature = read_entry(tree, args.entry, kernel)
    files = {"harness.py": out / "harness.py", "cases.json": out / "cases.json", "target.json": out / "target.json"}
    existing = [str(path) for path in files.values() if path.exists()]
    if existing and not args.force:
        raise BundleError(f"{', '.join(existing)} already exist(s); choose another --out or pass --force")
    if out.exists() and not out.is_dir():
        raise BundleError(f"--out {out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    files["harness.py"].write_text(render_harness(kernel_file=kernel.name, signature=signature, kind=args.kind,
                                                  dtype=args.dtype, source=source), encoding="utf-8")
    files["cases.json"].write_text(json.dumps(render_cases(args.kind, args.backend), indent=2) + "\n", encoding="utf-8")
    target = render_target(backend=args.backend, arch=args.arch, signature=signature, kind=args.kind)
    files["target.json"].write_text(json.dumps(target, indent=2) + "\n", encoding="utf-8")
    command = ["tlx-agent", "validate", "--kernel", str(kernel), "--harness", str(files["harness.py"]),
               "--cases", str(files["cases.json"]), "--target", str(files["target.json"])]
    if args.backend == "cpu":
        command += ["--arch", "cpu"]
    elif args.arch:
        command += ["--arch", args.arch]
    log = LiveLog(sys.stderr)
    log.event(f"init-bundle entry={signature.name} kind={args.kind} backend={args.backend} inputs={signature.inputs} "
              f"outputs={signature.outputs} main_scope={signature.main_scope} out={str(out)!r}")
    log.event("init-bundle next: edit the TODOs in harness.py, then run: " + shlex.join(command))
    emit({"success": True, "exit_code": int(ExitCode.OK), "bundle_dir": str(out),
          "files": {name: str(path) for name, path in files.items()}, "entry": signature.name, "kind": args.kind,
          "backend": args.backend, "inputs": signature.inputs, "outputs": signature.outputs,
          "main_scope": signature.main_scope, "validate_command": command})
    return ExitCode.OK
