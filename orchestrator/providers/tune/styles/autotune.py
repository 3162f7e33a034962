"""`@triton.autotune`: its config list (written in place, through a module name, returned by a config function,
passed through `list`/`tuple`/`sorted`/`filter`, or built by a comprehension over lists of values), each
`triton.Config` entry's literal values and launch options, and the key. Three kinds of place, one decorator:
the list takes a new set of configs as one edit (`edits.set_configs`), each literal entry (and each value of a
comprehension's literal list) is a knob of its own, and the key is read, never edited."""

from __future__ import annotations

import ast

import libcst as cst

from orchestrator.providers.tune.constraints import Constraint, KernelFacts, is_call
from orchestrator.providers.tune.domains import literal_kind
from orchestrator.providers.tune.forms import AutotuneConfig, code
from orchestrator.providers.tune.scan import LAUNCH_OPTIONS, Found, Scan, dotted, integer, literal, string
from orchestrator.providers.tune.styles.base import SiteStyle

_PASSING_CALLS = ("list", "tuple", "sorted", "filter")  # calls whose result holds the entries they are given


class _Absolute(cst.CSTTransformer):
    """Line breaks inside brackets that libcst would indent by the enclosing block: the text's own columns stay."""

    def leave_ParenthesizedWhitespace(self, original: cst.ParenthesizedWhitespace,
                                      updated: cst.ParenthesizedWhitespace) -> cst.ParenthesizedWhitespace:
        return updated.with_changes(indent=False)


class AutotuneListStyle(SiteStyle):
    site = "autotune"
    word = "triton.autotune config list"
    category = "triton.autotune"
    looks_for = "config lists of triton.Config entries, and their key"

    def find(self, scan: Scan) -> None:
        """Every autotuned kernel's config list, its entries and its key."""
        for kernel, named, positional in scan.decorator_calls("autotune"):
            configs = named.get("configs", positional[0] if positional else None)
            key = named.get("key", positional[1] if len(positional) > 1 else None)
            if configs is not None:
                _autotune_configs(scan, kernel, configs, scan.facts.get(kernel))
            if key is not None:
                keys = [s for e in key.elements if (s := string(e.value))] if isinstance(key, cst.List) else []
                scan.record(Found(KEY.site, "key", "key", key, None, kernel, scope_name=kernel,
                                  note=f"re-tunes when {', '.join(keys) or code(key)} change"))

    def edits(self, found: Found, constraints: list[Constraint]) -> tuple[tuple[str, ...], str] | None:
        return (("configs",) if isinstance(found.node, cst.List) else ()), found.note

    def spliced(self, found: Found) -> bool:
        return False  # a new list is laid out by the tree (its entries' own lines)

    def written(self, found: Found, updated: cst.CSTNode, text: str) -> cst.CSTNode:
        return cst.parse_expression(text).visit(_Absolute())  # the new list keeps the columns it was given


class ConfigEntryStyle(SiteStyle):
    site = "config"
    word = "triton.Config entry"
    category = "triton.autotune"


class AutotuneKeyStyle(SiteStyle):
    site = "autotune_key"
    word = "triton.autotune key"
    category = "triton.autotune"

    def edits(self, found: Found, constraints: list[Constraint]) -> tuple[tuple[str, ...], str] | None:
        return (), found.note


LIST, ENTRY, KEY = AutotuneListStyle(), ConfigEntryStyle(), AutotuneKeyStyle()


def config_list(scan: Scan, node: cst.BaseExpression, depth: int = 0) -> cst.List | cst.ListComp | None:
    """The list literal or comprehension an autotune `configs=` reaches: itself, a module name, what a
    function returns, or what `list`, `tuple`, `sorted` or `filter(keep, ...)` is given (a filter only
    drops entries, so what it is given holds every one it may keep)."""
    if isinstance(node, (cst.List, cst.ListComp)) or depth > 3:
        return node if isinstance(node, (cst.List, cst.ListComp)) else None
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in _PASSING_CALLS:
        positional = [a.value for a in node.args if a.keyword is None and not a.star]
        given = positional[-1] if node.func.value == "filter" and len(positional) == 2 else (
            positional[0] if len(positional) == 1 else None)
        return config_list(scan, given, depth + 1) if given is not None else None
    if isinstance(node, cst.Name):
        resolved = scan.module_scope.resolve(node.value)
        for binding in (resolved[1] or []) if resolved else []:
            if binding.value is not None and (found := config_list(scan, binding.value, depth + 1)) is not None:
                return found
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
        function = next((s for s in scan.scopes if s.name == node.func.value and s.parent is scan.module_scope), None)
        for sub in scan.walk(function.node, into_scopes=False) if function else ():
            if (isinstance(sub, cst.Return) and sub.value is not None
                    and (found := config_list(scan, sub.value, depth + 1)) is not None):
                return found
    return None


def _autotune_configs(scan: Scan, kernel: str, configs: cst.BaseExpression, facts: KernelFacts | None) -> None:
    listed = config_list(scan, configs)
    if listed is None:
        scan.record(Found(LIST.site, "configs", "configs", configs, None, kernel, scope_name=kernel,
                            note="the config list is built in a way the discovery does not follow"))
        return
    if isinstance(listed, cst.ListComp):
        _comprehension_configs(scan, kernel, listed, facts)
        return
    entries = []
    for element in listed.elements:
        call = element.value
        if not (isinstance(call, cst.Call) and dotted(call.func) == "Config"):
            continue
        kwargs: dict[str, int | str] = {}
        options: dict[str, int | None] = {}
        positional = [a.value for a in call.args if a.keyword is None]
        if positional and isinstance(positional[0], cst.Dict):
            for item in positional[0].elements:
                name = string(item.key) if isinstance(item, cst.DictElement) else None
                if name is None:
                    continue
                value = integer(item.value)
                kwargs[name] = value if value is not None else code(item.value)
                kind = facts.kind_of(name) if facts else literal_kind(name, False)
                if kind is not None and literal(item.value, kind) is not None:
                    scan.record(Found(ENTRY.site, name, kind, item.value, None, kernel, scope_name=kernel,
                                      group=id(call), pinned=never_read(scan, facts, name)))
        for argument in call.args:
            option = argument.keyword.value if argument.keyword else ""
            if option in LAUNCH_OPTIONS:
                options[option] = integer(argument.value)
                if options[option] is not None:
                    scan.record(Found(ENTRY.site, option, LAUNCH_OPTIONS[option], argument.value, None, kernel,
                                        scope_name=kernel))
        entries.append(AutotuneConfig.of(kwargs, **options))
    scan.record(Found(LIST.site, "configs", "configs", listed, None, kernel, scope_name=kernel,
                        note=f"{len(entries)} triton.Config entries", configs=tuple(entries)))


def never_read(scan: Scan, facts: KernelFacts | None, name: str) -> str:
    """Why a config entry is no knob: the kernel takes `name` and its body never reads it, and no other code of
    the file names it (a hook's `nargs["BM"]`, a prune's `kwargs["BM"]`, a heuristic's `args["BM"]`), so no value
    there changes what runs; "" where something reads it, or the kernel is not one the file defines."""
    if facts is None or name not in facts.parameters or name in facts.reads:
        return ""
    if name in named_outside_configs(scan):
        return ""
    return (f"{name} is a parameter of {facts.name} that its body never reads, and no other code of the file "
            "names it: a value there changes nothing that runs; left as written")


def named_outside_configs(scan: Scan) -> frozenset[str]:
    """Every string constant of the file but the keys of a `triton.Config` dict (read once per scan)."""
    found = scan.readings.get("named_outside_configs")
    if found is None:
        keys = {id(key) for node in ast.walk(scan.tree) if is_call(node, "Config")
                for argument in node.args[:1] if isinstance(argument, ast.Dict)
                for key in argument.keys if key is not None}
        found = frozenset(node.value for node in ast.walk(scan.tree)
                          if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in keys)
        scan.readings["named_outside_configs"] = found
    return found


def _comprehension_configs(scan: Scan, kernel: str, comprehension: cst.ListComp, facts: KernelFacts | None) -> None:
    """`[triton.Config({"BLOCK_M": BM}, num_warps=w) for BM in [64, 128] for w in [4, 8]]`: every value of a
    loop over a literal list is a config site of the parameter the loop variable feeds, so the tuner
    changes the choices autotune has (`for BM in [64, 256]`); a loop over anything else stays as written."""
    call = comprehension.elt
    if not (isinstance(call, cst.Call) and dotted(call.func) == "Config"):
        scan.record(Found(LIST.site, "configs", "configs", comprehension, None, kernel, scope_name=kernel,
                            note="a comprehension whose entries are not triton.Config(...) calls"))
        return
    feeds: dict[str, str] = {}  # loop variable -> the Config parameter or launch option it sets
    positional = [a.value for a in call.args if a.keyword is None]
    if positional and isinstance(positional[0], cst.Dict):
        for item in positional[0].elements:
            name = string(item.key) if isinstance(item, cst.DictElement) else None
            if name is not None and isinstance(item.value, cst.Name):
                feeds[item.value.value] = name
    for argument in call.args:
        option = argument.keyword.value if argument.keyword else ""
        if option in LAUNCH_OPTIONS and isinstance(argument.value, cst.Name):
            feeds[argument.value.value] = option
    followed, left = [], []
    clause: cst.CompFor | None = comprehension.for_in
    while clause is not None:
        for target, iterable in _loops(clause):
            parameter = feeds.get(target.value) if isinstance(target, cst.Name) else None
            if parameter is None:
                continue
            values = _module_list(scan, iterable)
            kind = LAUNCH_OPTIONS.get(parameter) or (
                facts.kind_of(parameter) if facts else literal_kind(parameter, False))
            elements = values.elements if isinstance(values, (cst.List, cst.Tuple)) else ()
            if kind is not None and elements and all(literal(e.value, kind) is not None for e in elements):
                for element in elements:
                    scan.record(Found(ENTRY.site, parameter, kind, element.value, None, kernel, scope_name=kernel,
                                  group=id(call)))
                followed.append(f"{parameter} in {code(values)}")
            else:
                left.append(f"{parameter} in {code(values)}")
        clause = clause.inner_for_in
    note = f"a comprehension of triton.Config entries over {'; '.join(followed) or 'no literal list'}"
    if left:
        note += f" ({'; '.join(left)} left as written)"
    scan.record(Found(LIST.site, "configs", "configs", comprehension, None, kernel, scope_name=kernel, note=note))


def _loops(clause: cst.CompFor) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """Each loop variable of a comprehension clause with what it runs over: `for BM in [64, 128]` is one;
    `for BM, w in itertools.product([64, 128], [4, 8])` is one per factor of the product, so each factor's literal
    list is followed as its own loop would be. A nested target (`for (m, n), w in product(...)`) pairs values and
    stays as written."""
    target, iterable = clause.target, clause.iter
    if (isinstance(target, cst.Tuple) and isinstance(iterable, cst.Call) and dotted(iterable.func) == "product"
            and all(argument.keyword is None and not argument.star for argument in iterable.args)
            and len(target.elements) == len(iterable.args)):
        return [(element.value, argument.value) for element, argument in zip(target.elements, iterable.args, strict=True)]
    return [(target, iterable)]


def _module_list(scan: Scan, node: cst.BaseExpression) -> cst.BaseExpression:
    """What a module name bound once to a list or tuple literal holds (`NUM_STAGES_OPTIONS = [2, 3, 4]`);
    anything else as it is."""
    if isinstance(node, cst.Name):
        resolved = scan.module_scope.resolve(node.value)
        bindings = resolved[1] if resolved else None
        if bindings and len(bindings) == 1 and isinstance(bindings[0].value, (cst.List, cst.Tuple)):
            return bindings[0].value
    return node

