"""A kernel whose own autotune the run pins, written with one configuration: where the tuner starts for it.

A run pins the untouched kernel's autotune choice in every worker (docs/autotune.md), so an edit of the list's
entries cannot change what runs. What can: a list of one, which Triton runs without autotuning. So the tuner
rewrites each pinned kernel's `configs=` as a list of one `triton.Config`, the choice its autotune made for the
cases that weigh most (kwargs and launch options as recorded, the hooks as the list's own entry passes them),
drops its `prune_configs_by` (a list of one has nothing to prune), and moves the knobs of that configuration as
of any other. Every other byte of the source stays. Where the list's entries cannot be read (no `triton.Config`
call to take the hooks from, a hook that depends on the comprehension's variables), the kernel is left as
written and its entries are not tuned.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from orchestrator.providers.tune.scan import LAUNCH_OPTIONS, Scan, dotted, names
from orchestrator.providers.tune.styles.autotune import config_list
from protocol.autotune import AutotuneChoice
from protocol.bundle import Case


@dataclass(frozen=True)
class Written:
    """A source with pinned kernels rewritten, and what was done, in words for the proposal's `change`."""

    source: str
    kernels: frozenset[str]  # the kernels written with one configuration
    said: str  # "" when none was


def heaviest_choice(choices: Sequence[AutotuneChoice], cases: Sequence[Case], kernel: str) -> AutotuneChoice | None:
    """The kernel's choice whose cases weigh most in the workload (the first of equals)."""
    weights = {case.case_id: case.weight for case in cases}
    own = [choice for choice in choices if choice.kernel == kernel]
    return max(own, key=lambda choice: sum(weights.get(case_id, 0.0) for case_id in choice.case_ids), default=None)


def one_configuration_each(source: str, choices: Sequence[AutotuneChoice], cases: Sequence[Case],
                           kernels: frozenset[str]) -> Written:
    """`source` with each of `kernels` that has a choice written with one configuration, where it can be."""
    written, said = set(), []
    for kernel in sorted(kernels):
        choice = heaviest_choice(choices, cases, kernel)
        rewritten = one_configuration(source, kernel, choice) if choice is not None else None
        if rewritten is None:
            continue
        source = rewritten
        written.add(kernel)
        said.append(f"{kernel}'s autotune list written as the one configuration its autotune chose for "
                    f"{', '.join(choice.case_ids)}")  # type: ignore[union-attr]
    return Written(source, frozenset(written), "; ".join(said))


def one_configuration(source: str, kernel: str, choice: AutotuneChoice) -> str | None:
    """`source` with `kernel`'s autotune list replaced by `choice` alone, or None where that cannot be written."""
    try:
        scan = Scan(source)
    except (cst.ParserSyntaxError, SyntaxError, RecursionError):
        return None
    node = scan.kernel_nodes.get(kernel)
    decorator = next((d.decorator for d in node.decorators if isinstance(d.decorator, cst.Call)
                      and dotted(d.decorator.func) == "autotune"), None) if node is not None else None
    if decorator is None:
        return None
    argument = next((a for a in decorator.args if a.keyword is not None and a.keyword.value == "configs"),
                    next((a for a in decorator.args if a.keyword is None and not a.star), None))
    listed = config_list(scan, argument.value) if argument is not None else None
    entry = _entry(listed, choice.config_index)
    if argument is None or entry is None:
        return None
    loop_variables = _loop_variables(listed) if isinstance(listed, cst.ListComp) else set()
    # what the recorded configuration does not hold: the hooks (`pre_hook=`), never recorded
    hooks = [a for a in entry.args if a.keyword is not None and a.keyword.value not in LAUNCH_OPTIONS
             and a.keyword.value not in choice.config]
    written_hooks = [cst.Module([]).code_for_node(hook).strip().rstrip(",") for hook in hooks]
    if any(names(hook.value) & loop_variables for hook in hooks) or not _module_level(written_hooks, scan.tree):
        return None
    text = _config_text(cst.Module([]).code_for_node(entry.func), choice.config, written_hooks)
    new_list = cst.parse_expression(f"[{text}]")
    pruning = [a for a in decorator.args if a.keyword is not None and a.keyword.value == "prune_configs_by"]
    new_args = [a.with_changes(value=new_list) if a is argument else a for a in decorator.args if a not in pruning]
    if pruning and decorator.args[-1] is pruning[0]:  # the layout of the call's end stays as written
        new_args[-1] = new_args[-1].with_changes(comma=pruning[0].comma)
    return scan.module.deep_replace(decorator, decorator.with_changes(args=new_args)).code


def _entry(listed: cst.BaseExpression | None, index: int | None) -> cst.Call | None:
    """The list's `triton.Config(...)` call to take hooks and spelling from: a comprehension's element, or the
    literal list's entry the choice was (its place in the list as the step recorded it, else the first)."""
    if isinstance(listed, cst.ListComp):
        candidate = listed.elt
    elif isinstance(listed, cst.List) and listed.elements:
        elements = [element for element in listed.elements if not isinstance(element, cst.StarredElement)]
        if len(elements) != len(listed.elements):
            return None  # `*more` entries: the recorded place does not name a written entry
        candidate = elements[index if index is not None and index < len(elements) else 0].value
    else:
        return None
    return candidate if isinstance(candidate, cst.Call) and dotted(candidate.func) == "Config" else None


def _module_level(hooks: list[str], tree: ast.Module) -> bool:
    """Every name the hooks read is bound at module level (a function, an import, an assignment) or a builtin:
    the list of one is written in the decorator, where a name of the config function's own scope is unbound."""
    bound = set(dir(builtins))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)}
    read = set()
    for hook in hooks:
        value = ast.parse(hook.split("=", 1)[1].strip(), mode="eval")
        own = {arg.arg for node in ast.walk(value) if isinstance(node, ast.Lambda) for arg in ast.walk(node.args)
               if isinstance(arg, ast.arg)}  # a lambda's parameters are its own
        read |= {node.id for node in ast.walk(value) if isinstance(node, ast.Name)} - own
    return read <= bound


def _loop_variables(comprehension: cst.ListComp) -> set[str]:
    variables: set[str] = set()
    clause: cst.CompFor | None = comprehension.for_in
    while clause is not None:
        variables |= names(clause.target)
        clause = clause.inner_for_in
    return variables


def _config_text(function: str, config: dict, hooks: list[str]) -> str:
    """`triton.Config({"BM": 128, ...}, num_warps=4, ctas_per_cga=(1, 1, 1), pre_hook=hook)` from a recorded
    configuration (its kwargs, then every launch option that is set) and the entry's hooks as written."""
    kwargs = config.get("kwargs") if isinstance(config.get("kwargs"), dict) else {}
    options = [f"{name}={_literal(value)}" for name, value in config.items() if name != "kwargs" and value is not None]
    body = ", ".join(f"{name!r}: {_literal(value)}" for name, value in kwargs.items())
    return f"{function}({{{body}}}{''.join(', ' + part for part in [*options, *hooks])})"


def _literal(value: object) -> str:
    if isinstance(value, list):
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)
