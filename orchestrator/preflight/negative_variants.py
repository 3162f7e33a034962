"""Deliberately bad kernels for the bundle preflight's negative tests.

A bundle is a trust boundary only if it rejects bad candidates. `invalid_variant` is the untouched
kernel plus one line that does not parse: `build` must reject it. `incorrect_variant` keeps the kernel
intact and appends a block (orchestrator/preflight/templates/perturb_outputs.py) that wraps every public
top-level Python function so that what it produces is wrong by a clear margin: returned float tensors
get `+ (1e-2 * max|out| + 1.0)` in place, integer tensors `+ 1`, bool tensors are negated, Python
floats/ints/bools and lists/tuples/dicts of them likewise, and tensor arguments the call wrote into
(preallocated outputs, detected by a before/after snapshot) are perturbed the same way. Only the
outermost wrapped call perturbs, so a public helper called by the entry point is not perturbed twice
(two negations would cancel). A kernel without public Python functions (the harness launches the
`@triton.jit` kernel itself) gets its `tl.store` values shifted by one instead. Everything is appended
or rewritten in a copy; the user's kernel is never touched.
"""

from __future__ import annotations

import ast

from orchestrator.bundle.entry_facts import dotted_name, is_kernel_function
from orchestrator.python_template import read_template, render_template

INVALID_MARKER = "tlx_agent_negative_test_invalid_syntax"
INVALID_SUFFIX = (
    "\n\n# tlx-agent validate: negative test, deliberately invalid syntax; build must reject this file\n"
    f"def {INVALID_MARKER}(:\n    pass\n"
)
PERTURBATION = "outputs shifted by 1e-2*max|out| + 1.0 (floats), +1 (integers), negated (bools)"


class NegativeVariantError(Exception):
    """No incorrect variant can be generated for this kernel; the message says why."""


def invalid_variant(source: str) -> str:
    return source.rstrip("\n") + "\n" + INVALID_SUFFIX


def public_entry_functions(tree: ast.Module) -> list[str]:
    """Top-level Python functions a harness may call: public names that are not Triton kernels."""
    return [node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_")
            and not is_kernel_function(node)]


class _StoreShifter(ast.NodeTransformer):
    """`tl.store(ptr, value, ...)` -> `tl.store(ptr, (value) + 1, ...)` inside Triton kernels."""

    def __init__(self) -> None:
        self.count = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if dotted_name(node.func).split(".")[-1] == "store":
            if len(node.args) >= 2:
                node.args[1] = ast.BinOp(left=node.args[1], op=ast.Add(), right=ast.Constant(1))
                self.count += 1
            else:
                for keyword in node.keywords:
                    if keyword.arg == "value":
                        keyword.value = ast.BinOp(left=keyword.value, op=ast.Add(), right=ast.Constant(1))
                        self.count += 1
        return node


def incorrect_variant(source: str) -> tuple[str, str]:
    """(source of an incorrect but buildable variant, one line saying how it is wrong)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise NegativeVariantError(f"the kernel does not parse (line {exc.lineno}: {exc.msg})") from None
    names = public_entry_functions(tree)
    if names:
        block = render_template(read_template("orchestrator.preflight", "perturb_outputs.py"),
                                {"TLX_AGENT_NEGATIVE_TEST_WRAPPED": f"_tlx_agent_make_outputs_wrong({names!r})"})
        return (source.rstrip("\n") + "\n\n\n" + block,
                f"public functions {', '.join(names)} wrapped: {PERTURBATION}")
    shifter = _StoreShifter()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_kernel_function(node):
            shifter.visit(node)
    if not shifter.count:
        raise NegativeVariantError("the kernel has no public Python function to wrap and no tl.store in a "
                                   "Triton kernel to perturb, so no incorrect variant can be generated")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n", f"{shifter.count} tl.store value(s) shifted by +1"
