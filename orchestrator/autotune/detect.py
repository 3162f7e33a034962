"""Which kernels of a source may autotune at run time: `@triton.autotune` with more than one configuration.

Read from the text (the orchestrator never imports a kernel). A list literal of one `triton.Config` (or none)
never autotunes; a longer one, or a list the text does not spell out (a comprehension, a function's result),
may: the trusted step then runs and finds out, and says so when nothing autotuned after all.
"""

from __future__ import annotations

import ast


def autotuned_kernels(source: str) -> list[str]:
    """Names of the functions decorated with an autotune whose configurations may be more than one."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and _is_autotune(decorator.func) and _may_choose(decorator):
                names.append(node.name)
                break
    return names


def _is_autotune(function: ast.expr) -> bool:
    if isinstance(function, ast.Attribute):
        return function.attr == "autotune"
    return isinstance(function, ast.Name) and function.id == "autotune"


def _may_choose(call: ast.Call) -> bool:
    configs = next((k.value for k in call.keywords if k.arg == "configs"), call.args[0] if call.args else None)
    if isinstance(configs, (ast.List, ast.Tuple)):
        return len(configs.elts) > 1 or any(isinstance(e, ast.Starred) for e in configs.elts)
    return configs is not None
