"""Lossless edits of knob sites (libcst): every other byte of the file stays, so a patch is a small readable diff.

Every edit rewrites the nodes the discovery found, in one pass over the tree of one parse (`rewrite`); how a
place is written (a value replaced, a keyword added to a launch, a config list laid out) is its style's.
Four edits: a literal in place of a value or expression, a per-shape table keyed on a dimension with the original
expression as the fallback, the original expression scaled (forms.py), and an autotune list replaced by a given
set of configs. Each edit is checked against the site's constraints first (`violations`) and refused with
`EditError` when it could break one: a value below a lower bound the edit cannot show it meets, a size that
is not a power of two, warps outside {1, 2, 4, 8, 16, 32}.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import libcst as cst

from orchestrator.providers.tune.constraints import WARPS_RANGE, Constraint
from orchestrator.providers.tune.discovery import KnobSite, Located, locate
from orchestrator.providers.tune.domains import illegal
from orchestrator.providers.tune.forms import (
    AutotuneConfig,
    code,
    literal_code,
    read_table,
    scaled_code,
    table_code,
)
from orchestrator.providers.tune.scan import Found, subtree
from orchestrator.providers.tune.styles import style_of

_LOWER = ("at_least", "greater_than")


class EditError(ValueError):
    """The edit does not apply to this site, or could break a constraint the code states."""


def _check(constraint: Constraint, value: int, current: int | None, dims: Mapping[str, int]) -> str:
    """Why `value` may break `constraint` ("" when it keeps it). `dims` gives a bound's largest value over the
    cases; without it, a literal's current value (which the cases run with) stands in for the bound."""
    bound = constraint.at_launch or constraint.bound
    known = dims.get(bound)
    if constraint.relation == "pinned":
        return constraint.text()
    if constraint.relation == "power_of_two" and (value < 1 or value & (value - 1)):
        return f"{value} breaks {constraint.text()}"
    if constraint.relation == "one_of" and str(value) not in {v.strip() for v in constraint.bound.split(",")}:
        return f"{value} breaks {constraint.text()}"
    if constraint.relation in _LOWER:
        if bound.isdigit():
            known = int(bound)
        strict = constraint.relation == "greater_than"
        if known is not None:
            return "" if (value > known if strict else value >= known) else f"{value} breaks {constraint.text()} ({bound} = {known})"
        if current is not None and value >= current:
            return ""
        return f"cannot show that {value} keeps {constraint.text()}: give the largest {bound} the cases use"
    if constraint.relation == "at_most":
        if known is not None:
            return "" if value <= known else f"{value} breaks {constraint.text()} ({bound} = {known})"
        return "" if current is not None and value <= current else \
            f"cannot show that {value} keeps {constraint.text()}: give the smallest {bound} the cases use"
    if constraint.relation == "divides":
        if known is not None:
            return "" if known % value == 0 else f"{value} breaks {constraint.text()} ({bound} = {known})"
        return "" if current is not None and value and current % value == 0 else \
            f"cannot show that {value} keeps {constraint.text()}: give {bound} of every case"
    return ""


def violations(site: KnobSite, value: int, dims: Mapping[str, int] | None = None) -> list[str]:
    """Each constraint of `site` that setting it to `value` may break, in words; empty when the value is legal."""
    problems = [problem for constraint in site.constraints
                if (problem := _check(constraint, value, site.value, dims or {}))]
    if site.kind == "warps" and not site.constraints and value not in (1, 2, 4, 8, 16, 32):
        problems.append(f"num_warps {value} is not one of {WARPS_RANGE}")
    if site.kind == "switch":
        if reason := illegal(site.kind, value):
            problems.append(f"{site.name} {reason}")
    elif value < 1:
        problems.append(f"{site.name} {value} is not positive")
    return problems


def scale_violations(site: KnobSite, step: int) -> list[str]:
    """Constraints a scaling of an expression may break without knowing its value: a lower bound going down,
    an upper bound or a divisor going up."""
    problems = []
    for constraint in site.constraints:
        if constraint.relation == "pinned":
            problems.append(constraint.text())
        elif step < site.step and constraint.relation in _LOWER and constraint.parameter not in ("num_warps", "num_stages"):
            problems.append(f"scaling {site.name} down may break {constraint.text()}")
        elif step > site.step and constraint.relation in ("at_most", "divides"):
            problems.append(f"scaling {site.name} up may break {constraint.text()}")
    return problems


def _located(source: str, key: str, edit: str) -> tuple[Located, KnobSite]:
    located = locate(source)
    if located is None:
        raise EditError("the source does not parse")
    site = located.discovery.site(key)
    if edit not in site.edits:
        raise EditError(f"{site.key} takes {', '.join(site.edits) or 'no'} edits, not {edit}"
                        + (f": {site.note}" if site.note and not site.edits else ""))
    return located, site


class _Rewrite(cst.CSTTransformer):
    """Each target node (by identity in the tree of one parse) written anew by its site's style, children first:
    a launch that gains a keyword keeps the values edited inside it."""

    def __init__(self, changes: Mapping[int, list[tuple[Found, str]]]) -> None:
        super().__init__()
        self.changes = changes

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        for found, text in self.changes.get(id(original_node), ()):
            updated_node = style_of(found.site).written(found, updated_node, text)
        return updated_node


def rewrite(located: Located, changes: Sequence[tuple[str, str]]) -> str:
    """The source with each site (by key) set to its text, in one pass; the edits' order is kept where two touch
    one node (two options added to one launch). One-line values that replace a value's own text are spliced in
    by position (what rewriting the tree would write, without walking it); anything else rewrites the tree."""
    founds = [(located.found[key], text) for key, text in changes]
    if all(style_of(found.site).spliced(found) and "\n" not in text for found, text in founds):
        return _splice(located, founds)
    targets: dict[int, list[tuple[Found, str]]] = {}
    for key, text in changes:
        found = located.found[key]
        targets.setdefault(id(style_of(found.site).target(found)), []).append((found, text))
    return located.scan.module.visit(_Rewrite(targets)).code


def _splice(located: Located, changes: Sequence[tuple[Found, str]]) -> str:
    """Each value's text (its parentheses outside the span, so they stay) replaced, the last in the file first."""
    parts = located.scan.source.split("\n")  # libcst's lines end at \n only (never at a form feed)
    lines = [part + "\n" for part in parts[:-1]] + [parts[-1]]
    spans = sorted(((located.scan.positions[found.node], text) for found, text in changes),
                   key=lambda item: (item[0].start.line, item[0].start.column), reverse=True)
    for span, text in spans:
        first, last = span.start.line - 1, span.end.line - 1
        lines[first:last + 1] = [lines[first][: span.start.column] + text + lines[last][span.end.column:]]
    return "".join(lines)


def set_literal(source: str, key: str, value: int, dims: Mapping[str, int] | None = None) -> str:
    """`value` in place of the site's value or expression. A lower bound needs `dims` (the bound's largest value
    over the cases) unless `value` is at least the literal there now."""
    located, site = _located(source, key, "literal")
    problems = violations(site, value, dims)
    if problems:
        raise EditError(f"{site.key} = {value}: {'; '.join(problems)}")
    return rewrite(located, [(key, literal_code(site.kind, value))])


def set_scaled(source: str, key: str, step: int) -> str:
    """The site's expression scaled by 2**step (stages: plus step), clamped to the kind's hard limits; step 0
    restores the author's expression."""
    located, site = _located(source, key, "scale")
    problems = scale_violations(site, step)
    if problems:
        raise EditError(f"{site.key} scaled by step {step}: {'; '.join(problems)}")
    return rewrite(located, [(key, scaled_code(site.expression, site.kind, step))])


def _visible(located: Located, site: KnobSite, dimension: str) -> bool:
    names = {node.value for node in subtree(cst.parse_expression(dimension)) if isinstance(node, cst.Name)}
    found = located.found[site.key]
    return style_of(found.site).sees(found, names)


def set_table(source: str, key: str, dimension: str, table: Mapping[int, int]) -> str:
    """`{k: v, ...}.get(dimension, <the current expression>)`: per-shape values keyed on `dimension` (an
    expression the site can see, e.g. one of `site.dimensions`), the original expression for every other shape.
    Each value is checked with `dimension` = its key."""
    located, site = _located(source, key, "table")
    try:
        visible = _visible(located, site, dimension)
    except cst.ParserSyntaxError as exc:
        raise EditError(f"the table key {dimension!r} is not an expression") from exc
    if not visible or not table:
        raise EditError(f"{site.key}: a table needs entries and a key the site can see ({', '.join(site.dimensions)})")
    problems = [f"at {dimension} = {shape}: {problem}" for shape, value in table.items()
                for problem in violations(site, value, {dimension: shape})]
    if problems:
        raise EditError(f"{site.key} table: {'; '.join(problems)}")
    node = located.found[key].node
    existing = read_table(node)
    fallback = code(existing.fallback) if existing is not None else code(node.with_changes(lpar=[], rpar=[]))
    return rewrite(located, [(key, table_code(dimension, dict(table), fallback))])


def set_configs(source: str, key: str, configs: Sequence[AutotuneConfig],
                dims: Mapping[str, int] | None = None) -> str:
    """The autotune list's entries replaced by `configs`, in the list's own layout (one entry per line when it
    had its entries on their own lines). Each value is checked against its parameter's constraints."""
    located, site = _located(source, key, "configs")
    if not configs:
        raise EditError(f"{site.key}: an autotune list needs at least one config")
    facts = located.scan.facts.get(site.kernel)
    problems = []
    for config in configs:
        for name, value in [*config.kwargs, ("num_warps", config.num_warps)]:
            if not isinstance(value, int):
                continue
            constraints = tuple(c for c in (facts.constraints if facts else ()) if c.parameter == name)
            probe = KnobSite(key=site.key, name=name, kind="warps" if name == "num_warps" else "", site="config",
                             expression="", value=None, line=site.line, scope=site.scope, kernel=site.kernel,
                             constraints=constraints)
            problems += [f"{config.code()}: {problem}" for problem in violations(probe, value, dims)]
    if problems:
        raise EditError(f"{site.key}: {'; '.join(problems)}")
    listed = located.found[key].node
    assert isinstance(listed, cst.List)
    first = listed.elements[0].value if listed.elements else None
    callee = code(first.func) if isinstance(first, cst.Call) else "triton.Config"
    strings = [node for node in subtree(first) if isinstance(node, cst.SimpleString)] if first is not None else []
    quote = code(strings[-1])[0] if strings else '"'
    entries = [config.code(callee, quote) for config in configs]
    positions = located.scan.positions
    start, end = positions[listed].start, positions[listed].end
    if first is not None and positions[first].start.line > start.line:
        indent = " " * positions[first].start.column
        before = source.splitlines()[end.line - 1][: end.column - 1]
        closing = before if not before.strip() else ""
        text = "[\n" + "".join(f"{indent}{entry},\n" for entry in entries) + f"{closing}]"
    else:
        text = "[" + ", ".join(entries) + "]"
    return rewrite(located, [(key, text)])
