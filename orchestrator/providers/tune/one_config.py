"""A kernel whose own autotune the run pins, written as its choices: where the tuner starts for it.

A run pins the untouched kernel's autotune choice in every worker (docs/autotune.md), so an edit of the list's
entries cannot change what runs. What can: a list Triton never autotunes. So the tuner rewrites each pinned
kernel's `configs=` as its choices (kwargs and launch options as recorded, the hooks as the list's own entry
passes them): where every key chose alike, a list of one, and its `prune_configs_by` goes (a list of one has
nothing to prune); where keys chose differently, one entry per distinct choice, the heaviest key's first, and an
`early_config_prune` that keeps the key's own (marked by `ONE_PER_KEY`, orchestrator/autotune/detect.py). The
tuner then moves those entries' values as any other knobs. Every other byte of the source stays. Where the
list's entries cannot be written so (no `triton.Config` call to take the hooks from, a hook that reads the
comprehension's variables or a name of the config function's own, a key that is not plain values), the kernel is
left as written and its entries are not tuned.
"""

from __future__ import annotations

import ast
import builtins
import json
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from orchestrator.autotune.detect import ONE_PER_KEY
from orchestrator.autotune.lines import config_parts
from orchestrator.providers.tune.scan import LAUNCH_OPTIONS, Scan, dotted, names, string
from orchestrator.providers.tune.styles.autotune import config_list
from protocol.autotune import AutotuneChoice
from protocol.bundle import Case


@dataclass(frozen=True)
class Written:
    """A source with pinned kernels rewritten, and what was done, in words for the proposal's `change`."""

    source: str
    kernels: frozenset[str]  # the kernels written with one configuration
    said: str  # "" when none was


def by_weight(choices: Sequence[AutotuneChoice], cases: Sequence[Case], kernel: str) -> list[AutotuneChoice]:
    """The kernel's choices, the one whose cases weigh most in the workload first (the first of equals)."""
    weights = {case.case_id: case.weight for case in cases}
    own = [choice for choice in choices if choice.kernel == kernel]
    return sorted(own, key=lambda choice: -sum(weights.get(case_id, 0.0) for case_id in choice.case_ids))


def one_configuration_each(source: str, choices: Sequence[AutotuneChoice], cases: Sequence[Case],
                           kernels: frozenset[str]) -> Written:
    """`source` with each of `kernels` that has a choice written as its choices, where it can be."""
    written, said = set(), []
    for kernel in sorted(kernels):
        own = by_weight(choices, cases, kernel)
        rewritten = one_configuration(source, kernel, own) if own else None
        if rewritten is None:
            continue
        source = rewritten
        written.add(kernel)
        distinct = len({_config_key(choice) for choice in own})
        said.append(f"{kernel}'s autotune list written as the one configuration its autotune chose for "
                    f"{', '.join(case for choice in own for case in choice.case_ids)}" if distinct == 1 else
                    f"{kernel}'s autotune list written as the configuration its autotune chose for each key "
                    f"({distinct}, one per key by its own prune; another key takes the one for "
                    f"{', '.join(own[0].case_ids)})")
    return Written(source, frozenset(written), "; ".join(said))


def one_configuration(source: str, kernel: str, choices: Sequence[AutotuneChoice]) -> str | None:
    """`source` with `kernel`'s autotune list replaced by its choices (the first the default for a key not
    chosen for), or None where that cannot be written. One distinct choice: a list of one, and the decorator's
    `prune_configs_by` goes. Several: one entry each and a `prune_configs_by` that keeps the key's own."""
    try:
        scan = Scan(source)
    except (cst.ParserSyntaxError, SyntaxError, RecursionError):
        return None
    node = scan.kernel_nodes.get(kernel)
    decorator = next((d.decorator for d in node.decorators if isinstance(d.decorator, cst.Call)
                      and dotted(d.decorator.func) == "autotune"), None) if node is not None else None
    if decorator is None or not choices:
        return None
    argument = next((a for a in decorator.args if a.keyword is not None and a.keyword.value == "configs"),
                    next((a for a in decorator.args if a.keyword is None and not a.star), None))
    if argument is None:
        return None
    listed = config_list(scan, argument.value)
    key_names = _key_names(decorator, choices)
    entries: list[str] = []  # one per distinct configuration, the heaviest key's first
    index_of: dict[str, int] = {}
    keys: dict[tuple, int] = {}
    for choice in choices:
        text = _written_entry(scan, listed, choice)
        if text is None:
            return None
        index = index_of.setdefault(_config_key(choice), len(entries))
        if index == len(entries):
            entries.append(text)
        keys[tuple(choice.key_values.get(name) for name in key_names)] = index
    pruning = [a for a in decorator.args if a.keyword is not None and a.keyword.value == "prune_configs_by"]
    table = {key: index for key, index in keys.items() if index}
    per_key = None
    if table:
        if not key_names or not all(isinstance(value, (int, str, bool)) for key in table for value in key):
            return None  # a key that cannot be written as a literal: no table
        lookup = f"tuple({{**named_args, **kwargs}}[name] for name in {tuple(key_names)!r})"
        per_key = cst.parse_expression(
            f'{{"early_config_prune": lambda configs, named_args, {ONE_PER_KEY}={table!r}, **kwargs: '
            f'[configs[{ONE_PER_KEY}.get({lookup}, 0)]]}}')
    new_list = cst.parse_expression(f"[{', '.join(entries)}]")
    new_args = []
    for current in decorator.args:
        if current is argument:
            new_args.append(current.with_changes(value=new_list))
        elif current in pruning:
            if per_key is not None:
                new_args.append(current.with_changes(value=per_key))
        else:
            new_args.append(current)
    if per_key is not None and not pruning:
        new_args.append(cst.Arg(keyword=cst.Name("prune_configs_by"), value=per_key,
                                equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                      whitespace_after=cst.SimpleWhitespace(""))))
    elif pruning and per_key is None and decorator.args[-1] is pruning[0]:  # the call's end stays as written
        new_args[-1] = new_args[-1].with_changes(comma=pruning[0].comma)
    return scan.module.deep_replace(decorator, decorator.with_changes(args=new_args)).code


def _written_entry(scan: Scan, listed: cst.BaseExpression | None, choice: AutotuneChoice) -> str | None:
    """`choice` as a `triton.Config(...)` call, with the hooks of the list's entry it was."""
    entry = _entry(listed, choice.config_index)
    if entry is None:
        return None
    loop_variables = _loop_variables(listed) if isinstance(listed, cst.ListComp) else set()
    # what the recorded configuration does not hold: the hooks (`pre_hook=`), never recorded
    hooks = [a for a in entry.args if a.keyword is not None and a.keyword.value not in LAUNCH_OPTIONS
             and a.keyword.value not in choice.config]
    written_hooks = [cst.Module([]).code_for_node(hook).strip().rstrip(",") for hook in hooks]
    if any(names(hook.value) & loop_variables for hook in hooks) or not _module_level(written_hooks, scan.tree):
        return None
    return _config_text(cst.Module([]).code_for_node(entry.func), choice.config, written_hooks)


def _config_key(choice: AutotuneChoice) -> str:
    return json.dumps(choice.config, sort_keys=True)


def _key_names(decorator: cst.Call, choices: Sequence[AutotuneChoice]) -> list[str]:
    """The autotune key's argument names: the decorator's literal `key=[...]`, else the recorded key's names."""
    key = next((a.value for a in decorator.args if a.keyword is not None and a.keyword.value == "key"), None)
    if isinstance(key, (cst.List, cst.Tuple)):
        written = [string(element.value) for element in key.elements]
        if all(written):
            return [name for name in written if name]
    return [name for name in choices[0].key_values if name != "dtypes"]


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
    kwargs, set_options = config_parts(config)
    options = [f"{name}={_literal(value)}" for name, value in set_options.items()]
    body = ", ".join(f"{name!r}: {_literal(value)}" for name, value in kwargs.items())
    return f"{function}({{{body}}}{''.join(', ' + part for part in [*options, *hooks])})"


def _literal(value: object) -> str:
    if isinstance(value, list):
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)
