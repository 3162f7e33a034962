"""Launch grids: the grid a launch passes (a tuple, a lambda over META, a name, a `def grid(meta)`), read for the
sizes it divides by (`cdiv(n, BLOCK)`, `n // BLOCK`: a floor division also needs the size to divide the
problem) and, for a persistent kernel (its programs stride by `tl.num_programs`), the program count, which is
a knob of its own (`programs`). The grid itself is never edited; the launch style reads it at each launch."""

from __future__ import annotations

import libcst as cst

from orchestrator.providers.tune.constraints import Constraint
from orchestrator.providers.tune.forms import code
from orchestrator.providers.tune.scan import Found, Scan, Scope, dotted, first_line, names, string, walk
from orchestrator.providers.tune.styles.base import SiteStyle


def _divisor_of(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """What a grid term divides by: `cdiv(n, BLOCK)` or `n // BLOCK`."""
    if isinstance(node, cst.Call) and dotted(node.func) == "cdiv" and len(node.args) == 2:
        return [node.args[1].value]
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.FloorDivide):
        return [node.right]
    return []


def read_grid(scan: Scan, grid: cst.BaseExpression, scope: Scope, kernel: str, arguments: dict[str, str]) -> None:
    """Record the grid and what sets its program count; a persistent kernel's count is itself a knob."""
    written, expression, where = grid, grid, scope  # written: what the launch reads, maybe a name
    if isinstance(grid, cst.Name):
        resolved = scope.resolve(grid.value)
        bindings = [b for b in (resolved[1] or []) if b.value is not None] if resolved else []
        if bindings:
            expression, where = bindings[0].value, resolved[0]  # type: ignore[assignment,index]
        elif resolved and grid.value in {s.name for s in scan.scopes}:
            function = next(s for s in scan.scopes if s.name == grid.value)
            returns = [n.value for n in scan.walk(function.node, into_scopes=False)
                       if isinstance(n, cst.Return) and n.value is not None]
            expression = returns[0] if returns else grid
    body = expression.body if isinstance(expression, cst.Lambda) else expression
    facts = scan.facts.get(kernel)
    # A persistent axis's programs stride over the work: any count covers it, so the arithmetic behind the
    # count (the tutorial's occupancy, NUM_REGS // (n_regs * WARP_SIZE * num_warps)) constrains nothing.
    elements = body.elements if isinstance(body, cst.Tuple) else ()
    persistent = facts.persistent_axes if facts and elements else frozenset()
    parts = [body]
    if persistent:
        parts = [element.value for axis, element in enumerate(elements) if axis not in persistent]
    divisors: list[str] = []
    constraints: list[Constraint] = []
    for part in parts:
        part_divisors, part_constraints = _divisors(scan, part, where)
        divisors += [d for d in part_divisors if d not in divisors]
        constraints += part_constraints
    note = f"work per program set by {', '.join(divisors)}" if divisors else "no size divides it"
    shown = expression if isinstance(expression, (cst.Lambda, cst.Tuple, cst.Call, cst.BinaryOperation)) else written
    found = Found(STYLE.site, "grid", "grid", shown, scope, kernel, note=note, launch_arguments=arguments)
    found.constraints.extend(constraints)
    found.grid_names = _reachable(body, where)
    scan.record(found)
    for axis in sorted(persistent):
        if axis < len(elements):
            scan.feed("programs", "programs", elements[axis].value, where, kernel, arguments, site=STYLE.site)


def _expanded(node: cst.CSTNode, scope: Scope) -> list[tuple[cst.CSTNode, Scope]]:
    """`node` and the values of the names it reads, transitively (`cdiv(n, BLOCK)` behind a `num_blocks`), but
    not the values of the sizes it divides by, whose own arithmetic is no part of the grid."""
    expanded, pending, seen = [], [(node, scope, 0)], set()
    while pending:
        current, where, depth = pending.pop(0)
        expanded.append((current, where))
        divisors = {name for part in walk(current, into_scopes=True) for divisor in _divisor_of(part)
                    for name in names(divisor)}
        for name in sorted(names(current) - divisors) if depth < 4 else ():
            resolved = where.resolve(name)
            for binding in (resolved[1] or []) if resolved else []:
                if binding.value is not None and id(binding.value) not in seen:
                    seen.add(id(binding.value))
                    pending.append((binding.value, resolved[0], depth + 1))
    return expanded


def _reachable(node: cst.CSTNode, scope: Scope) -> set[str]:
    """Names and string keys the grid reads, directly or through the names it reads."""
    return {name for sub, _ in _expanded(node, scope) for name in names(sub)} | {
        key for sub, _ in _expanded(node, scope) for part in walk(sub, into_scopes=True) if (key := string(part))}


def _divisors(scan: Scan, body: cst.CSTNode, scope: Scope) -> tuple[list[str], list[Constraint]]:
    divisors: list[str] = []
    constraints: list[Constraint] = []
    nodes = [node for part, _ in _expanded(body, scope) for node in walk(part, into_scopes=True)]
    for node in nodes:
        for divisor in _divisor_of(node):
            floor_of = node.left if isinstance(node, cst.BinaryOperation) else None
            _divisor(scan, node, divisor, floor_of, scope, divisors, constraints)
    return divisors, constraints


def _divisor(scan: Scan, node: cst.CSTNode, divisor: cst.BaseExpression, floor_of: cst.BaseExpression | None,
             scope: Scope, divisors: list[str], constraints: list[Constraint]) -> None:
    """Record the sizes one grid term divides by; a floor division also needs them to divide the problem."""
    keys = [key for sub in walk(divisor, into_scopes=True) if (key := string(sub)) is not None]
    read = keys or sorted(names(divisor) - {"triton", "META", "meta"})
    divisors.extend(n for n in read if n not in divisors)
    for name in read if floor_of is not None else ():
        constraints.append(Constraint(
            name, "divides", code(floor_of),
            f"the grid computes {first_line(code(node), 60)} (line {scan.line(node)}), which drops the "
            "remainder: a size that does not divide it leaves elements unprocessed", scope.name, scan.line(node)))


class LaunchGridStyle(SiteStyle):
    site = "grid"
    word = "launch grid"
    category = "launch grids"
    looks_for = "grid expressions that set the work per program, and a persistent kernel's program count"
    own_constraints_only = True  # a grid's constraints are its own: the floor divisions it computes

    def edits(self, found: Found, constraints: list[Constraint]) -> tuple[tuple[str, ...], str] | None:
        return ((), found.note) if found.kind == "grid" else None  # the grid stays; a program count is a knob


STYLE = LaunchGridStyle()
