"""The entry point of a kernel file and its parameters, read with `ast` (the kernel is never imported).

`read_entry` finds the entry (a function, or `name = Cls.apply` of a `torch.autograd.Function` in the
file, read as its `forward` without `ctx`) and splits its parameters: required ones are passed by the harness (trailing
ones named like outputs, `out`, `output`, `result`, `dst`, `*_out`, `out_*`, are preallocated outputs the
harness allocates and poisons); ones with defaults keep them. It records each parameter's annotation and
default, the kernels the entry launches, and what the body does with each parameter
(orchestrator/bundle/entry_facts.py).
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from pathlib import Path

from orchestrator.bundle.entry_facts import EntryFacts, is_kernel_function, read_entry_facts
from protocol.bundle import BundleError

OUTPUT_NAMES = frozenset({"out", "output", "result", "dst", "dest"})
UNFILLABLE_ANNOTATIONS = frozenset({"str", "complex", "bytes"})


@dataclass
class EntrySignature:
    name: str
    inputs: list[str]  # required parameters before the outputs, in order: what the harness passes
    outputs: list[str]
    kernels: list[str]  # @triton.jit kernels the entry launches, in source order
    all_kernels: list[str]
    annotations: dict[str, str]  # parameter -> the last name of its annotation (`float`, `Tensor`, ...)
    defaults: dict[str, object]  # parameters with defaults, which keep them: name -> the literal (or its source)
    facts: EntryFacts

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


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def _is_output_name(name: str) -> bool:
    return name in OUTPUT_NAMES or name.endswith("_out") or name.startswith("out_")


def _autograd_forwards(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """`name = Cls.apply` at module level, where `Cls` is a class of the file with a `forward(ctx, ...)`
    (the Triton tutorials' `layer_norm = LayerNorm.apply`): name -> that forward without its `ctx`, which
    is what calling `name` takes."""
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    found: dict[str, ast.FunctionDef] = {}
    for statement in tree.body:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name) and isinstance(statement.value, ast.Attribute)
                and statement.value.attr == "apply" and isinstance(statement.value.value, ast.Name)):
            continue
        cls = classes.get(statement.value.value.id)
        forward = next((node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "forward"),
                       None) if cls is not None else None
        if forward is None or not forward.args.args or forward.args.posonlyargs:
            continue
        called = copy.deepcopy(forward)
        called.args.args = called.args.args[1:]  # apply() supplies ctx
        called.name = statement.targets[0].id
        found[called.name] = called
    return found


def read_entry(tree: ast.Module, entry: str, kernel_path: Path) -> EntrySignature:
    functions = {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    kernels = {name: node for name, node in functions.items() if is_kernel_function(node)}
    forwards = _autograd_forwards(tree)
    node = functions.get(entry) or forwards.get(entry)
    if node is None:
        public = [name for name, fn in functions.items() if not name.startswith("_") and not is_kernel_function(fn)]
        public += [name for name in forwards if not name.startswith("_")]
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
    annotations = {a.arg: name for a in [*positional, *args.kwonlyargs]
                   if (name := _annotation_name(a.annotation)) is not None}
    unfillable = [a.arg for a in required if annotations.get(a.arg) in UNFILLABLE_ANNOTATIONS]
    if unfillable:
        raise BundleError(f"{entry}() in {kernel_path} has required parameter(s) {', '.join(unfillable)} of a type "
                          "init-bundle cannot draw (it fills tensors, floats, ints and bools): give them defaults "
                          "or write the harness by hand")
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
    defaults = {a.arg: _literal(d) for a, d in zip(positional[len(required):], args.defaults, strict=True)}
    defaults.update({a.arg: _literal(d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                     if d is not None})
    launched: list[str] = []
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            target = call.func.value if isinstance(call.func, ast.Subscript) else call.func
            if isinstance(target, ast.Name) and target.id in kernels and target.id not in launched:
                launched.append(target.id)
    helpers = {name: fn for name, fn in functions.items() if name not in kernels}
    facts = read_entry_facts(node, [*names, *outputs, *defaults], kernels, helpers)
    return EntrySignature(name=entry, inputs=names, outputs=outputs, kernels=launched, all_kernels=list(kernels),
                          annotations=annotations, defaults=defaults, facts=facts)
