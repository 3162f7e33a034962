"""Launch arguments: what `kernel[grid](...)` (and `kernel.warmup(...)`) passes for a constexpr, `num_warps` or
`num_stages`, by keyword, by position or through `**dict` of literal keys. Each argument is followed to where its
value is set (`Scan.feed`): a wrapper assignment, a module constant, or the expression at the launch itself,
which is this style's place. A launch that leaves `num_warps` or `num_stages` to Triton has them too, at
Triton's default, edited by adding the keyword (only where the kernel has no tunable size: `discovery`).
The launch's grid is read here as well (`launch_grid`)."""

from __future__ import annotations

import libcst as cst

from orchestrator.providers.tune.constraints import Constraint
from orchestrator.providers.tune.domains import literal_kind
from orchestrator.providers.tune.forms import code
from orchestrator.providers.tune.scan import (
    LAUNCH_OPTIONS,
    TRITON_DEFAULTS,
    Found,
    Launch,
    Scan,
    Scope,
    dotted,
    first_line,
    string,
)
from orchestrator.providers.tune.styles import launch_grid
from orchestrator.providers.tune.styles.base import SiteStyle


def _callee_kernel(scan: Scan, node: cst.BaseExpression, scope: Scope) -> str:
    name = dotted(node)
    if name in scan.kernel_nodes:
        return name
    resolved = scope.resolve(name) if isinstance(node, cst.Name) else None
    for binding in (resolved[1] or []) if resolved else []:
        value = binding.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "warmup":
            return dotted(value.func.value) if dotted(value.func.value) in scan.kernel_nodes else ""
    return ""


def _unpacked_dict(node: cst.BaseExpression, scope: Scope) -> list[tuple[str, cst.BaseExpression, Scope]] | None:
    """The keywords `**META` passes, when META is a dict literal or `dict(...)` call with literal keys (or a name
    bound once to one), each with the scope it is written in; None when they cannot be read."""
    where = scope
    if isinstance(node, cst.Name):
        resolved = scope.resolve(node.value)
        bindings = resolved[1] if resolved is not None and resolved[1] is not None else []
        if len(bindings) != 1 or bindings[0].value is None:
            return None
        node, where = bindings[0].value, resolved[0]  # type: ignore[index]
    if isinstance(node, cst.Dict):
        items = [(string(e.key), e.value) for e in node.elements if isinstance(e, cst.DictElement)]
        if len(items) != len(node.elements):
            return None
    elif isinstance(node, cst.Call) and dotted(node.func) == "dict" and all(
            a.keyword is not None and not a.star for a in node.args):
        items = [(a.keyword.value, a.value) for a in node.args]  # type: ignore[union-attr]
    else:
        return None
    if any(key is None for key, _ in items):
        return None
    return [(key, value, where) for key, value in items]  # type: ignore[misc]


class LaunchStyle(SiteStyle):
    site = "launch"
    word = "launch argument"
    category = "launch arguments"
    looks_for = ("constexpr sizes, num_warps= and num_stages= passed by keyword or position at each "
                 "kernel[grid](...) or kernel.warmup(...) launch")

    def find(self, scan: Scan) -> None:
        for scope in [scan.module_scope, *scan.scopes]:
            for node in scan.walk(scope.node, into_scopes=False):
                if not isinstance(node, cst.Call):
                    continue
                if isinstance(node.func, cst.Subscript):
                    callee, grid = node.func.value, node.func.slice[0].slice
                elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "warmup":
                    callee = node.func.value
                    grid = next((a.value for a in node.args if a.keyword and a.keyword.value == "grid"), None)
                else:
                    continue
                kernel = _callee_kernel(scan, callee, scope)
                if not kernel and not isinstance(node.func, cst.Subscript):
                    continue
                self._launch(scan, node, kernel, scope, grid.value if isinstance(grid, cst.Index) else grid)

    def _launch(self, scan: Scan, call: cst.Call, kernel: str, scope: Scope, grid: cst.BaseExpression | None) -> None:
        facts = scan.facts.get(kernel)
        parameters = facts.parameters if facts else ()
        passed: list[tuple[str, cst.BaseExpression, Scope]] = []
        star = False
        for index, argument in enumerate(call.args):
            unpacked = _unpacked_dict(argument.value, scope) if argument.star == "**" else None
            if unpacked is not None:
                passed.extend(unpacked)
            elif argument.star:
                star = True
            elif argument.keyword is not None:
                passed.append((argument.keyword.value, argument.value, scope))
            elif index < len(parameters):
                passed.append((parameters[index], argument.value, scope))
        arguments = {name: code(value) for name, value, _ in passed}
        autotuned = scan.autotuned(kernel)
        shown, options = [], []
        for name, value, where in passed:
            kind = LAUNCH_OPTIONS.get(name)
            if kind is None and facts is not None and name in facts.constexprs:
                kind = facts.kind_of(name)
                if kind is None:
                    scan.ignored.append(f"{kernel}'s constexpr {name} (not a size, warps, stages or group)")
                shown.append(f"{name}={first_line(code(value), 40)}")
            elif kind is None and facts is None and name.isupper():
                kind = literal_kind(name, False)
                shown.append(f"{name}={first_line(code(value), 40)}")
            elif kind is not None:
                options.append(name)
                shown.append(f"{name}={first_line(code(value), 40)}")
            if kind is not None and name != "grid":
                scan.feed(name, kind, value, where, kernel, arguments)
        scan.launches.append(Launch(kernel or dotted(call.func.value if isinstance(call.func, cst.Subscript) else call.func),
                                    scope.name, scan.line(call), tuple(shown), tuple(options), star, autotuned))
        if kernel and isinstance(call.func, cst.Subscript) and not star and not autotuned:
            self._absent_options(scan, call, kernel, scope, {name for name, _, _ in passed}, arguments)
        if grid is not None and isinstance(call.func, cst.Subscript):
            launch_grid.read_grid(scan, grid, scope, kernel, arguments)

    def _absent_options(self, scan: Scan, call: cst.Call, kernel: str, scope: Scope, passed: set[str],
                        arguments: dict[str, str]) -> None:
        """`num_warps` / `num_stages` that a plain launch leaves to Triton's default: knobs at that default,
        edited by adding the keyword (`kernel[(n_rows,)](y, x, n_cols, BLOCK_SIZE=BLOCK_SIZE)` has no other).
        `num_stages` only for a kernel with a loop: software pipelining has nothing else to overlap."""
        left_alone = {f.name for f in scan.found if f.site == "heuristic" and f.kernel == kernel}
        body = scan.kernel_nodes[kernel]
        if not any(isinstance(node, (cst.For, cst.While)) for node in scan.walk(body, into_scopes=True)):
            left_alone.add("num_stages")
        func = call.func
        assert isinstance(func, cst.Subscript)
        anchors = {"num_warps": func, "num_stages": func.value}
        for option, kind in LAUNCH_OPTIONS.items():
            if option in passed or option in left_alone:
                continue
            scan.record(Found(self.site, option, kind, anchors[option], scope, kernel, launch_arguments=arguments,
                              absent_from=call,
                              note=f"not passed: Triton's default {TRITON_DEFAULTS[option]} applies"))

    def edits(self, found: Found, constraints: list[Constraint]) -> tuple[tuple[str, ...], str] | None:
        if found.absent_from is not None:  # a keyword to add: one value for every shape
            return ("literal",), ""
        return None

    def spliced(self, found: Found) -> bool:
        return found.absent_from is None

    def target(self, found: Found) -> cst.CSTNode:
        return found.absent_from if found.absent_from is not None else found.node

    def written(self, found: Found, updated: cst.CSTNode, text: str) -> cst.CSTNode:
        """An option the launch does not pass yet: `name=text` appended, every other argument as it was (a
        trailing comma moves to the new last argument)."""
        if found.absent_from is None:
            return super().written(found, updated, text)
        assert isinstance(updated, cst.Call)
        keyword = cst.Arg(value=cst.parse_expression(text), keyword=cst.Name(found.name),
                          equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                whitespace_after=cst.SimpleWhitespace("")))
        arguments = list(updated.args)
        if arguments:  # `f(a, b)` -> `f(a, b, name=v)`
            last = arguments[-1]
            if isinstance(last.comma, cst.Comma):
                keyword = keyword.with_changes(comma=last.comma)
            arguments[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        return updated.with_changes(args=arguments + [keyword])


STYLE = LaunchStyle()
