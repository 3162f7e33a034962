"""Deliberately bad kernels for the bundle preflight's negative tests (seed Layer 1 step 5).

A bundle is a trust boundary only if it rejects bad candidates. `invalid_variant` is the untouched
kernel plus one line that does not parse: `build` must reject it. `incorrect_variant` keeps the kernel
intact and appends a block that wraps every public top-level Python function so that what it produces is
wrong by a clear margin: returned float tensors get `+ (1e-2 * max|out| + 1.0)` in place, integer tensors
`+ 1`, bool tensors are negated, Python floats/ints/bools and lists/tuples/dicts of them likewise, and
tensor arguments the call wrote into (preallocated outputs, detected by a before/after snapshot) are
perturbed the same way. Only the outermost wrapped call perturbs, so a public helper called by the entry
point is not perturbed twice (two negations would cancel). A kernel without public Python functions
(the harness launches the `@triton.jit` kernel itself) gets its `tl.store` values shifted by one instead.
Everything is appended or rewritten in a copy; the user's kernel is never touched.
"""

from __future__ import annotations

import ast

INVALID_MARKER = "tlx_agent_negative_test_invalid_syntax"
INVALID_SUFFIX = (
    "\n\n# tlx-agent validate: negative test, deliberately invalid syntax; build must reject this file\n"
    f"def {INVALID_MARKER}(:\n    pass\n"
)
KERNEL_DECORATOR_SUFFIXES = ("jit", "autotune", "heuristics")
PERTURBATION = "outputs shifted by 1e-2*max|out| + 1.0 (floats), +1 (integers), negated (bools)"


class NegativeVariantError(Exception):
    """No incorrect variant can be generated for this kernel; the message says why."""


def invalid_variant(source: str) -> str:
    return source.rstrip("\n") + "\n" + INVALID_SUFFIX


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return ""


def is_kernel_function(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated with something named like triton.jit / tlx.jit / triton.autotune / triton.heuristics."""
    return any(_dotted(d).split(".")[-1] in KERNEL_DECORATOR_SUFFIXES for d in node.decorator_list)


def public_entry_functions(tree: ast.Module) -> list[str]:
    """Top-level Python functions a harness may call: public names that are not Triton kernels."""
    return [node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_")
            and not is_kernel_function(node)]


PERTURB_BLOCK = '''

# ---- tlx-agent validate: negative test. Every public entry function below is wrapped so that its ----
# ---- outputs are wrong; verify must reject this file. Generated, never a candidate.              ----
def _tlx_agent_make_outputs_wrong(names):
    import functools
    import inspect
    import sys
    import threading

    state = threading.local()

    def library(name):  # only what the kernel or harness already imported: never pay for an import here
        return sys.modules.get(name)

    def is_tensor(value):
        torch = library("torch")
        return torch is not None and isinstance(value, torch.Tensor)

    def shift_tensor(tensor, in_place):
        torch = library("torch")
        if tensor.numel() == 0:
            return tensor
        with torch.no_grad():
            if tensor.dtype == torch.bool:
                return tensor.logical_not_() if in_place else tensor.logical_not()
            if tensor.is_floating_point() or tensor.is_complex():
                delta = 1e-2 * float(tensor.detach().abs().max()) + 1.0
            else:
                delta = 1
            return tensor.add_(delta) if in_place else tensor + delta

    def wrong(value):
        if is_tensor(value):
            try:
                return shift_tensor(value, True)
            except RuntimeError:  # not writable in place (expanded, inference-mode, ...)
                return shift_tensor(value, False)
        numpy = library("numpy")
        if numpy is not None and isinstance(value, numpy.ndarray) and value.size:
            if value.dtype == bool:
                return ~value
            if value.dtype.kind in "fc":
                return value + (1e-2 * float(numpy.abs(value).max()) + 1.0)
            return value + 1
        if isinstance(value, bool):
            return not value
        if isinstance(value, int):
            return value + 1
        if isinstance(value, float):
            return value + 1e-2 * abs(value) + 1.0
        if isinstance(value, list):
            return [wrong(item) for item in value]
        if isinstance(value, tuple):
            items = [wrong(item) for item in value]
            return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
        if isinstance(value, dict):
            return {key: wrong(item) for key, item in value.items()}
        return value

    def tensors_in(value, found):
        if is_tensor(value):
            found.add(id(value))
        elif isinstance(value, (list, tuple)):
            for item in value:
                tensors_in(item, found)
        elif isinstance(value, dict):
            for item in value.values():
                tensors_in(item, found)
        return found

    def snapshot(args, kwargs):
        try:
            return [(t, t.detach().clone()) for t in (*args, *kwargs.values()) if is_tensor(t)]
        except RuntimeError:  # out of memory: only returned values are perturbed
            return []

    def changed(tensor, before):
        torch = library("torch")
        if tensor.shape != before.shape or tensor.dtype != before.dtype:
            return True
        if tensor.is_floating_point() or tensor.is_complex():
            return not bool(torch.isclose(tensor, before, rtol=0.0, atol=0.0, equal_nan=True).all())
        return not bool(torch.equal(tensor, before))

    def wrap(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            if getattr(state, "depth", 0):
                return function(*args, **kwargs)
            state.depth = 1
            try:
                before = snapshot(args, kwargs)
                result = function(*args, **kwargs)
            finally:
                state.depth = 0
            returned = tensors_in(result, set())
            for tensor, copy in before:
                if id(tensor) not in returned and changed(tensor, copy):
                    try:
                        shift_tensor(tensor, True)
                    except RuntimeError:
                        pass
            return wrong(result)

        return wrapper

    wrapped = []
    namespace = globals()
    for name in names:
        function = namespace.get(name)
        if inspect.isfunction(function) and function.__module__ == __name__:
            namespace[name] = wrap(function)
            wrapped.append(name)
    return wrapped


TLX_AGENT_NEGATIVE_TEST_WRAPPED = _tlx_agent_make_outputs_wrong({names!r})
del _tlx_agent_make_outputs_wrong
'''


class _StoreShifter(ast.NodeTransformer):
    """`tl.store(ptr, value, ...)` -> `tl.store(ptr, (value) + 1, ...)` inside Triton kernels."""

    def __init__(self) -> None:
        self.count = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if _dotted(node.func).split(".")[-1] == "store":
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
        block = PERTURB_BLOCK.replace("{names!r}", repr(names))
        return source.rstrip("\n") + "\n" + block, f"public functions {', '.join(names)} wrapped: {PERTURBATION}"
    shifter = _StoreShifter()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_kernel_function(node):
            shifter.visit(node)
    if not shifter.count:
        raise NegativeVariantError("the kernel has no public Python function to wrap and no tl.store in a "
                                   "Triton kernel to perturb, so no incorrect variant can be generated")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n", f"{shifter.count} tl.store value(s) shifted by +1"
