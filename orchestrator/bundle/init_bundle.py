"""What `tlx-agent init-bundle` writes: a starter harness.py, cases.json and target.json for one kernel entry point.

The entry function's signature (read with `ast`, the kernel is never imported here) says how many
tensors it takes: required positional parameters without a scalar annotation are inputs; trailing ones
named like outputs (`out`, `output`, `result`, `dst`, `*_out`, `out_*`) are preallocated outputs the
harness allocates and poisons. `elementwise` inputs are 1-D of `n` elements, `rowwise` inputs 2-D
`(rows, cols)`. The reference is the untouched kernel itself, embedded in harness.py (so it survives
the run's freeze): every candidate is compared with the original on fresh seeded inputs. That is a
starting point, not a proof: a reference sharing the kernel's code shares its bugs, so the generated
harness says where to put an independent PyTorch reference. `tlx-agent validate` passes on the result.
The harness is orchestrator/bundle/templates/harness.py filled in; the command is orchestrator/cli/init_bundle.py.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from orchestrator.preflight.negative_variants import is_kernel_function
from orchestrator.preflight.python_template import read_template, render_template
from protocol.bundle import BundleError

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


def _embedded(source: str) -> str:
    lines = source.splitlines(keepends=True) or [""]
    return "".join(f"    {line!r}\n" for line in lines)


def render_harness(*, kernel_file: str, signature: EntrySignature, kind: str, dtype: str, source: str) -> str:
    shape_doc = "1-D tensors of n elements" if kind == "elementwise" else "2-D (rows, cols) tensors"
    output_doc = (f" Preallocated outputs {', '.join(signature.outputs)} are passed after the inputs."
                  if signature.outputs else "")
    assignments = {"ENTRY_POINT": repr(signature.name), "KIND": repr(kind), "INPUT_NAMES": repr(tuple(signature.inputs)),
                   "OUTPUT_NAMES": repr(tuple(signature.outputs)), "DTYPE": f"torch.{dtype}",
                   "MAIN_SCOPE": repr(signature.main_scope), "REFERENCE_SOURCE": f"(\n{_embedded(source)})"}
    fields = {"kernel_file": kernel_file, "entry": signature.name, "kind": kind,
              "input_list": ", ".join(signature.inputs), "shape_doc": shape_doc, "dtype": dtype, "output_doc": output_doc}
    return render_template(read_template("orchestrator.bundle", "harness.py"), assignments, fields)


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
