"""What `tlx-agent init-bundle` writes: a starter harness.py, cases.json and target.json for one kernel entry point.

The entry point is read with `ast` (orchestrator/bundle/entry_signature.py and entry_facts.py; the kernel
is never imported) and planned (orchestrator/bundle/starter_plan.py): its kind, each argument's shape in
the case's dimensions or its scalar type, the outputs' shapes, the dtype and the reference, with every
guess listed.
The harness is orchestrator/bundle/templates/harness.py filled in. Its reference is, by kind:
elementwise and rowwise: the untouched kernel embedded in harness.py (so it survives the run's freeze),
which is a starting point, not a proof: a reference sharing the kernel's code shares its bugs, and the
harness says so; norm, reduction, gemm, bmm: the kind's standard math (templates/references.py) where the
entry's name and signature say which, else a TODO that fails verify, naming what to write, until someone
writes it. The command is orchestrator/cli/init_bundle.py.
"""

from __future__ import annotations

import ast
import copy
import json
import textwrap

from orchestrator.bundle.alignment import aligned_case
from orchestrator.bundle.entry_signature import EntrySignature
from orchestrator.bundle.starter_plan import STANDARD, StarterPlan, output_shape, shape_text
from orchestrator.python_template import read_template, render_template


def _cpu(case_id: str, weight: float, budget: float, **dimensions: int) -> dict[str, object]:
    return {"case_id": case_id, "parameters": {**dimensions, "budget_seconds": budget}, "weight": weight}


def _cuda(case_id: str, weight: float, **dimensions: int) -> dict[str, object]:
    return {"case_id": case_id, "parameters": dimensions, "weight": weight}


ROW_CASES = {  # CPU: small enough for the interpreter (about 1 ms per program); CUDA: production-sized
    "cpu": [_cpu("rows8_cols128", 2.0, 0.3, rows=8, cols=128), _cpu("ragged_5x97", 1.0, 0.3, rows=5, cols=97)],
    "cuda": [_cuda("rows4096_cols4096", 2.0, rows=4096, cols=4096), _cuda("ragged_4097x1000", 1.0, rows=4097, cols=1000)],
}
CASES = {
    "elementwise": {"cpu": [_cpu("n2048", 2.0, 0.3, n=2048), _cpu("ragged_1001", 1.0, 0.3, n=1001)],
                    "cuda": [_cuda("n16M", 2.0, n=16777216), _cuda("ragged_10000003", 1.0, n=10000003)]},
    "rowwise": ROW_CASES, "norm": ROW_CASES, "reduction": ROW_CASES,
    "gemm": {"cpu": [_cpu("m64_n64_k64", 2.0, 0.5, m=64, n=64, k=64), _cpu("ragged_48x40x72", 1.0, 0.5, m=48, n=40, k=72)],
             "cuda": [_cuda("m4096_n4096_k4096", 2.0, m=4096, n=4096, k=4096),
                      _cuda("ragged_4097x3001x1000", 1.0, m=4097, n=3001, k=1000)]},
    "bmm": {"cpu": [_cpu("batch2_m32_n32_k32", 2.0, 0.5, batch=2, m=32, n=32, k=32),
                    _cpu("ragged_3x24x20x40", 1.0, 0.5, batch=3, m=24, n=20, k=40)],
            "cuda": [_cuda("batch16_m1024_n1024_k1024", 2.0, batch=16, m=1024, n=1024, k=1024),
                     _cuda("ragged_9x1000x1001x999", 1.0, batch=9, m=1000, n=1001, k=999)]},
}


def _described(spec: tuple[str, ...] | str) -> str:
    if isinstance(spec, tuple):
        return shape_text(spec)
    what, _, names = spec.partition(":")
    return "(" + {"dim": f"the case's {names}", "shape": f"the tuple ({names},)", "none": "None"}.get(what, what) + ")"


def describe_arguments(plan: StarterPlan) -> str:
    return ", ".join(f"{name} {_described(spec)}" for name, spec in plan.inputs.items())


def _embedded(source: str) -> str:
    lines = source.splitlines(keepends=True) or [""]
    return "".join(f"    {line!r}\n" for line in lines)


def _output_doc(plan: StarterPlan, signature: EntrySignature) -> str:
    if plan.outputs:
        return f"{', '.join(f'{n} {shape_text(s)}' for n, s in plan.outputs.items())} (preallocated outputs, passed last)"
    return f"what {signature.name}() returns, a {shape_text(output_shape(plan.kind, ''))} tensor"


def _wrapped(text: str, indent: str = "") -> str:
    return "\n".join(textwrap.wrap(text, 108 - len(indent), subsequent_indent=indent, break_on_hyphens=False))


def _string_literal(text: str | None) -> str:
    """`text` as a parenthesized string literal over lines of at most about 100 characters."""
    if text is None:
        return "None"
    chunks = textwrap.wrap(text, 96, drop_whitespace=False, break_on_hyphens=False)
    return "(\n" + "".join(f"    {json.dumps(chunk)}\n" for chunk in chunks) + ")"  # a JSON string is a Python one


def reference_todo(plan: StarterPlan, signature: EntrySignature, harness_path: str) -> str | None:
    """The message verify fails with while the reference is a TODO (None when it is not)."""
    if plan.reference != "todo":
        return None
    return (f"reference() in {harness_path} is a TODO: init-bundle cannot tell what {signature.name}() computes "
            f"({plan.reference_reason}). Write it in PyTorch for ({describe_arguments(plan)}) to return "
            f"{_output_doc(plan, signature)}; then set REFERENCE_TODO = None and run validate again")


def render_reference(plan: StarterPlan, signature: EntrySignature) -> str:
    """A function of templates/references.py as the harness's `reference`: the entry's parameters, the
    reference's names renamed to the entry's arguments (or defaults)."""
    module = ast.parse(read_template("orchestrator.bundle", "references.py"))
    template = next(node for node in module.body if isinstance(node, ast.FunctionDef) and node.name == plan.reference)
    renames = {role: ast.parse(value, mode="eval").body for role, value in plan.reference_arguments.items()}

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            replacement = renames.get(node.id)
            return node if replacement is None else ast.copy_location(copy.deepcopy(replacement), node)

    function = Rename().visit(copy.deepcopy(template))
    function.name = "reference"
    function.args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=name) for name in plan.inputs], vararg=None,
                                  kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    if plan.reference == "todo":
        doc = (f"TODO: compute what {signature.name}() computes for ({describe_arguments(plan)}) in PyTorch, in a "
               f"precision a candidate cannot change, and return {_output_doc(plan, signature)}; then set "
               "REFERENCE_TODO = None.")
    else:
        doc = f"init-bundle's guess from the entry's name and arguments: {function.body[0].value.value}"
    function.body[0] = ast.Expr(ast.Constant(_wrapped(doc, "    ")))
    return ast.unparse(ast.fix_missing_locations(function))


def guess_comment(plan: StarterPlan, signature: EntrySignature, kernel_file: str) -> str:
    head = (f"init-bundle guessed what this harness assumes about {signature.name}() in {kernel_file}; check each "
            "guess, and edit INPUTS, OUTPUTS, reference() or cases.json where one is wrong:")
    lines = textwrap.wrap(head, 108, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False)
    for guess in plan.guesses:
        lines += textwrap.wrap(guess.line(), 108, initial_indent="# - ", subsequent_indent="#   ",
                               break_on_hyphens=False)
    return "\n".join(lines) + "\n"


def render_harness(*, kernel_file: str, signature: EntrySignature, plan: StarterPlan, source: str,
                   harness_path: str) -> str:
    todo = reference_todo(plan, signature, harness_path)
    note = None if plan.reference in ("kernel", "todo") else (
        f"the reference is init-bundle's guess, {plan.reference_reason}: if {signature.name}() computes something "
        f"else, rewrite reference() in {harness_path}")
    assignments = {"ENTRY_POINT": repr(signature.name), "KIND": repr(plan.kind), "INPUTS": repr(plan.inputs),
                   "OUTPUTS": repr(plan.outputs), "DTYPE": f"torch.{plan.dtype}", "MAIN_SCOPE": repr(signature.main_scope),
                   "COMPARE": repr(plan.compare), "REFERENCE_TODO": _string_literal(todo),
                   "REFERENCE_NOTE": _string_literal(note)}
    functions: dict[str, str] = {}
    drop: list[str] = []
    if plan.reference == "kernel":
        assignments["REFERENCE_SOURCE"] = f"(\n{_embedded(source)})"
        reference_doc = ("The reference is the kernel as it was when this bundle was made (REFERENCE_SOURCE below): "
                         "candidates are compared with the untouched kernel on the same inputs, so a bug the kernel "
                         "has is not caught.")
        todo_doc = ("replace `reference()` with an independent PyTorch implementation when you can (a reference "
                    "that shares the kernel's code shares its bugs), ")
    else:
        functions["reference"] = render_reference(plan, signature)
        drop += ["REFERENCE_SOURCE", "_reference_module"]
        if todo:
            reference_doc = "There is no reference yet: verify fails every case with REFERENCE_TODO until one is written."
            todo_doc = "write `reference()` and set REFERENCE_TODO = None, "
        else:
            reference_doc = (f"The reference is {STANDARD[plan.reference]} in fp64, init-bundle's guess from the "
                             "entry's name and arguments.")
            todo_doc = "check the guesses listed at the top and `reference()`, "
    inputs_doc = (f"Inputs, in the entry's order: {describe_arguments(plan)} (tensors {plan.dtype}, in the case's "
                  "dimensions from cases.json), drawn from the seed the orchestrator sends with every command. "
                  f"Output: {_output_doc(plan, signature)}.")
    reference_doc += (" Preallocated outputs are poisoned before every call and the" if plan.outputs else " The") + \
        " last timed output is re-checked (`harness_kit.checks`, `harness_kit.timing`)."
    todo_doc = (f"TODO: {todo_doc}add the production shapes to cases.json and the kernel's invariants to "
                "target.json's optimization_guidance, then run `tlx-agent validate` again.")
    fields = {"kernel_file": kernel_file, "entry": signature.name, "kind": plan.kind, "inputs_doc": _wrapped(inputs_doc),
              "reference_doc": _wrapped(reference_doc), "todo_doc": _wrapped(todo_doc)}
    rendered = render_template(read_template("orchestrator.bundle", "harness.py"), assignments, fields,
                               functions=functions, drop=drop)
    return guess_comment(plan, signature, kernel_file) + rendered


def render_target(*, backend: str, arch: str | None, signature: EntrySignature, plan: StarterPlan) -> dict[str, object]:
    compared = {"kernel": "the harness compares candidates with the untouched kernel",
                "todo": "the harness's reference() is still a TODO"}.get(
        plan.reference, f"the harness's reference is {STANDARD.get(plan.reference, plan.reference)}")
    guidance = (f"{plan.kind} kernel: {signature.name}({', '.join(signature.inputs + signature.outputs)}). Generated "
                f"by tlx-agent init-bundle: {compared}. Add the kernel's invariants, known failed configurations and "
                "evidence-to-knob rules here.")
    target: dict[str, object] = {"backend": backend}
    if backend == "cpu":
        target.update(architecture="interpreter", device="cpu", environment={"TRITON_INTERPRET": "1"})
    else:
        target.update(architecture=arch, device="cuda:0", environment={})
    if signature.main_scope:
        target["main_scope"] = signature.main_scope
    target["optimization_guidance"] = guidance
    return target


def render_cases(kind: str, backend: str, *, aligned: bool = False) -> list[dict[str, object]]:
    """The kind's cases for the backend, every one protected; `aligned`: the ragged case with its inner
    dimensions on 16-element multiples, for a kernel that copies asynchronously (bundle/alignment.py)."""
    cases = CASES[kind][backend]
    return [{**(aligned_case(case) if aligned else case), "protected": True} for case in cases]
