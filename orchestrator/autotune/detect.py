"""Which kernels of a source may autotune at run time: `@triton.autotune` with more than one configuration.

Read from the text (the orchestrator never imports a kernel). A list literal of one `triton.Config` (or none)
never autotunes, nor does a list whose `early_config_prune` is the tuner's one-per-key lambda (`ONE_PER_KEY`);
a longer one, or a list the text does not spell out (a comprehension, a function's result), may: the trusted
step then runs and finds out, and says so when nothing autotuned after all.
"""

from __future__ import annotations

import ast

# The parameter that marks an `early_config_prune` keeping one configuration per key (the tuner writes it for a
# kernel whose choices differ per key, orchestrator/providers/tune/one_config.py): such a list never autotunes.
ONE_PER_KEY = "one_per_key"


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
    if _one_per_key(call):
        return False
    configs = next((k.value for k in call.keywords if k.arg == "configs"), call.args[0] if call.args else None)
    if isinstance(configs, (ast.List, ast.Tuple)):
        return len(configs.elts) > 1 or any(isinstance(e, ast.Starred) for e in configs.elts)
    return configs is not None


def _one_per_key(call: ast.Call) -> bool:
    """`prune_configs_by={"early_config_prune": lambda configs, named_args, one_per_key={...}, **kwargs: ...}`."""
    pruning = next((k.value for k in call.keywords if k.arg == "prune_configs_by"), None)
    if not isinstance(pruning, ast.Dict):
        return False
    prune = next((v for k, v in zip(pruning.keys, pruning.values, strict=True)
                  if isinstance(k, ast.Constant) and k.value == "early_config_prune"), None)
    return isinstance(prune, ast.Lambda) and any(a.arg == ONE_PER_KEY for a in prune.args.args)
