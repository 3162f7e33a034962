"""The search's knobs: each tunable `KnobSite` of the discovery, under the key the search, the screening records
and the run's history name it by, with its legal values narrowed by the code's constraints.

A knob is a site with edits; its value is the literal, or for an expression the scaling step applied to it
(0: as the author wrote it). Its key is the site's (`wrapper:softmax.num_warps#0`), except for an integer
written where the first version of the tuner read literals (a module constant, a launch keyword, a
`triton.Config` entry, a loop's `num_stages`): that knob keeps the key those versions gave it
(`constant:BLOCK_SIZE#0`, `launch:num_warps#0`, `config:BLOCK_M#1`), so recorded screenings replay and resumed
runs match, and, as then, takes no per-shape table. Every knob's domain holds its current value
(`domains.domain_holding`); a value that is no setting of its kind at all makes no knob (`set_aside`).

`apply_knobs` sets several knobs in one rewrite of one parse (`edits.rewrite`).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from dataclasses import dataclass, replace

import libcst as cst

from orchestrator.providers.tune.constraints import Coupling
from orchestrator.providers.tune.discovery import KnobSite, Located, locate
from orchestrator.providers.tune.domains import (
    DOMAINS,
    SCALE_EXPONENTS,
    TILE_NAME,
    domain_holding,
    literal_kind,
)
from orchestrator.providers.tune.edits import EditError, rewrite, scale_violations, violations
from orchestrator.providers.tune.forms import ADDITIVE_KINDS, literal_code, scaled_code
from orchestrator.providers.tune.grid import grid_uses
from orchestrator.providers.tune.scan import Scan, dotted, integer, string
from orchestrator.providers.tune.styles.loop import LOOP_CALLS

UP, DOWN = 1, -1


@dataclass(frozen=True)
class Knob:
    """A tunable site as the search moves it: its key, its value (a literal, or a step) and its legal values."""

    key: str  # stable across edits of values
    name: str
    kind: str
    origin: str  # the site's style (styles/), or constant | launch | config under a literal's key
    value: int
    line: int
    grid_uses: int | None = None  # times the launch grid mentions the name; None: the file launches no kernel
    site_key: str = ""  # the site's key where the knob is known by it ("" under a literal's key: no table)
    expression: str = ""  # an expression knob: `value` is then the scaling step applied to it (0: as written)
    allowed: tuple[int, ...] | None = None  # the kind's domain narrowed by the constraints in the code
    scope: str = ""  # the wrapper or kernel it sits in ("" under a literal's key)
    site: KnobSite | None = None  # the discovery's site: where the edit goes

    @property
    def domain(self) -> tuple[int, ...]:
        if self.allowed is not None:
            return self.allowed
        return SCALE_EXPONENTS if self.expression else DOMAINS[self.kind]

    @property
    def where(self) -> str:
        if self.site is not None and self.site_key:
            return self.site.where
        return f"{self.origin}{f' in {self.scope}' if self.scope else ''} at line {self.line}"

    def written(self, limit: int = 60) -> str:
        """The expression of an expression knob on one line, shortened to `limit` characters."""
        text = " ".join(self.expression.split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def show(self, value: int) -> str:
        """A value in a proposal's text: the literal, or the expression with its step (`E`, `E x2`, `E /2`)."""
        if not self.expression:
            return literal_code(self.kind, value)
        return self.written() if value == 0 else f"{self.written()} {self.short(value)}"

    def code(self, value: int) -> str:
        """A value as the source will read: the literal, or the expression scaled by that step."""
        return scaled_code(self.expression, self.kind, value) if self.expression else literal_code(self.kind, value)

    def short(self, value: int) -> str:
        """A value in a few characters: the literal, or the step (`x1` as written, `x2`, `/2`, `+1`)."""
        if not self.expression:
            return literal_code(self.kind, value)
        if self.kind in ADDITIVE_KINDS:
            return f"{value:+d}"
        return f"x{2 ** value}" if value >= 0 else f"/{2 ** -value}"

    def magnitude(self, value: int) -> float:
        """How a value compares to another in size: the literal, or 2**step."""
        return float(2**value) if self.expression and self.kind not in ADDITIVE_KINDS else float(value)


class KnobDomainError(AssertionError):
    """A knob whose current value lies outside its domain reached the search: a defect of the tuner, which
    `tunable_knobs` guarantees away (the run records it as that proposal's failure)."""


def check_domains(knobs: Iterable[Knob]) -> None:
    """The tuner's own assertion before it asks the search for values: every domain holds its knob's value."""
    outside = [f"{knob.key} = {knob.value} not in {knob.domain}" for knob in knobs if knob.value not in knob.domain]
    if outside:
        raise KnobDomainError(f"knob domain without the current value: {'; '.join(outside)}")


# ---- keys of literals ------------------------------------------------------------------------------------


def _looks_like_matmul(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "dot":
            return True
        name = node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.keyword) else None
        if name and TILE_NAME.search(name):
            return True
    return False


@dataclass(frozen=True)
class _Literal:
    key: str
    origin: str
    name: str
    kind: str


def _literals(scan: Scan) -> dict[int, _Literal]:
    """The integers written where the first tuner read literals, by node id: module constants named in upper
    case and used by the file; launch keywords (upper-case constexprs, `num_warps`, `num_stages`) of
    `kernel[grid](...)` and `kernel.warmup(...)`; `triton.Config` entries and options; a pipelining loop's
    `num_stages`. Keys count each (origin, name) in source order; kinds follow the names, a file with `.dot` or
    M/N/K tiles making every size a tile."""
    matmul = _looks_like_matmul(scan.tree)
    found: list[tuple[str, str, cst.BaseExpression]] = []
    for line in scan.module.body:
        for statement in line.body if isinstance(line, cst.SimpleStatementLine) else ():
            if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
                target, value = statement.targets[0].target, statement.value
            elif isinstance(statement, cst.AnnAssign) and statement.value is not None:
                target, value = statement.target, statement.value
            else:
                continue
            if (isinstance(target, cst.Name) and target.value.isupper() and target.value in scan.loaded
                    and integer(value) is not None):
                found.append(("constant", target.value, value))
    for node in scan.calls:
        called = dotted(node.func)
        is_launch = isinstance(node.func, cst.Subscript)
        is_config = called == "Config"
        takes_options = is_launch or is_config or called == "warmup"
        for argument in node.args:
            if argument.keyword is None or integer(argument.value) is None:
                continue
            keyword = argument.keyword.value
            pinned_loop = (found_there := scan.by_node.get(id(argument.value))) is not None and found_there.pinned
            option = keyword in ("num_warps", "num_stages") and (takes_options or (
                keyword == "num_stages" and called in LOOP_CALLS and not pinned_loop))
            if option or (is_launch and keyword.isupper()):
                found.append(("config" if is_config else "launch", keyword, argument.value))
        positional = [a.value for a in node.args if a.keyword is None]
        if is_config and positional and isinstance(positional[0], cst.Dict) and not node.args[0].star:
            for element in positional[0].elements:
                name = string(element.key) if isinstance(element, cst.DictElement) else None
                if name is not None and integer(element.value) is not None:
                    found.append(("config", name, element.value))
    found.sort(key=lambda item: scan.start(item[2]))
    literals: dict[int, _Literal] = {}
    ordinals: dict[tuple[str, str], int] = {}
    for origin, name, node in found:
        kind = literal_kind(name, matmul)
        if kind is None:
            continue
        ordinal = ordinals.get((origin, name), 0)
        ordinals[(origin, name)] = ordinal + 1
        literals[id(node)] = _Literal(f"{origin}:{name}#{ordinal}", origin, name, kind)
    return literals


# ---- knobs -----------------------------------------------------------------------------------------------


def _narrowed(site: KnobSite, kind: str, couplings: tuple[Coupling, ...] = (),
              now: dict[str, int] | None = None) -> tuple[int, ...] | None:
    """The values of the kind's domain the site's constraints allow, each coupled site at its value `now` (site
    key -> value); None when they allow all of them."""
    legal = tuple(value for value in DOMAINS[kind] if not violations(site, value)
                  and not _broken(couplings, {**(now or {}), site.key: value}))
    return None if legal == DOMAINS[kind] else legal


def _broken(couplings: tuple[Coupling, ...], values: dict[str, int]) -> list[str]:
    """The couplings `values` (site key -> value) break, in words."""
    return [problem for coupling in couplings if (problem := coupling.broken(values))]


def _literal_knob(site: KnobSite, literal: _Literal, value: int, uses: int | None) -> Knob:
    return Knob(key=literal.key, name=literal.name, kind=literal.kind, origin=literal.origin, value=value,
                line=site.line, grid_uses=uses, site=site)


def _site_knob(site: KnobSite, uses: int | None, couplings: tuple[Coupling, ...], now: dict[str, int]) -> Knob | None:
    common = {"key": site.key, "name": site.name, "kind": site.kind, "origin": site.site, "line": site.line,
              "grid_uses": uses, "site_key": site.key, "scope": site.scope, "site": site}
    if site.value is not None and site.kind in DOMAINS:
        allowed = _narrowed(site, site.kind, couplings, now)
        return Knob(value=site.value, allowed=allowed, **common) if allowed != () else None
    if site.value is None and "scale" in site.edits:
        steps = tuple(step for step in SCALE_EXPONENTS if not scale_violations(site, step))
        if steps != (site.step,):
            return Knob(value=site.step, expression=site.expression,
                        allowed=None if steps == SCALE_EXPONENTS else steps, **common)
    return None


@functools.lru_cache(maxsize=64)
def _knobs(source: str) -> tuple[tuple[Knob, ...], tuple[tuple[Knob, str], ...], tuple[Knob, ...]]:
    """(tunable knobs, knobs set aside with why, every literal under its key whatever its constraints)."""
    located = locate(source)
    if located is None:
        return (), (), ()
    literals = _literals(located.scan)
    in_grid = grid_uses(located.scan.tree)
    couplings = located.discovery.couplings
    now = {site.key: site.value for site in located.discovery.sites if site.value is not None}
    under_literal_keys: list[Knob] = []
    every_literal: list[Knob] = []
    by_site: list[Knob] = []
    for site in located.discovery.sites:
        found = located.found[site.key]
        if site.kind not in DOMAINS and site.kind != "programs":
            continue
        literal = literals.get(id(found.node)) if found.absent_from is None and not found.via else None
        if literal is not None and site.value is not None:
            knob = _literal_knob(site, literal, site.value, None if in_grid is None else in_grid[literal.name])
            every_literal.append(knob)
            allowed = _narrowed(site, literal.kind, couplings, now) if site.edits else ()
            if allowed != ():
                under_literal_keys.append(replace(knob, allowed=allowed))
        elif site.edits:
            uses = None if in_grid is None else max(in_grid[site.name], in_grid[site.variable] if site.variable else 0)
            knob = _site_knob(site, uses, couplings, now)
            if knob is not None:
                by_site.append(knob)
    # as the first tuner listed them: its literals, then the sites beyond them, each line's in that order
    ordered = sorted(under_literal_keys + by_site, key=lambda knob: knob.line)
    tunable, left = [], []
    for knob in ordered:
        held, reason = _holding_value(knob)
        if held is None:
            left.append((knob, reason))
        else:
            tunable.append(held)
    return tuple(tunable), tuple(left), tuple(every_literal)


def _holding_value(knob: Knob) -> tuple[Knob | None, str]:
    """The knob with its current value in its domain, or None and why it is no knob."""
    domain, reason = domain_holding(knob.domain, knob.kind, knob.value) if not knob.expression else (
        tuple(sorted({*knob.domain, knob.value})), "")
    if not domain:
        return None, f"{knob.name} = {knob.value} ({knob.where}) is no {knob.kind} setting: {reason}"
    return (knob if domain == knob.domain else replace(knob, allowed=domain)), ""


def tunable_knobs(source: str) -> list[Knob]:
    """Every knob the search may move, in source order (by line; on one line, those under a literal's key
    first). A source that does not parse has none."""
    return list(_knobs(source)[0])


def set_aside(source: str) -> list[tuple[Knob, str]]:
    """The knobs `tunable_knobs` left, each with why: a current value that is no setting of its kind
    (`num_warps=3`, a 48-element block)."""
    return list(_knobs(source)[1])


def find_knobs(source: str) -> list[Knob]:
    """Every integer written where the first tuner read literals (`_literals`) that sets a knob site, under its
    key with its kind's whole domain, whatever the code's constraints say (scripts enumerate grids with it)."""
    return list(_knobs(source)[2])


def knob_configuration(knobs: Iterable[Knob]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((knob.key, knob.value) for knob in knobs))


def next_value(knob: Knob, direction: int, current: int) -> int | None:
    """The next legal value strictly beyond `current` in `direction`, or None at the bound."""
    beyond = [v for v in knob.domain if (v > current if direction == UP else v < current)]
    if not beyond:
        return None
    return min(beyond) if direction == UP else max(beyond)


# ---- edits -----------------------------------------------------------------------------------------------


def _change(knob: Knob, value: int) -> tuple[str, str]:
    """(site key, text) of setting `knob` to `value`, checked as `edits.set_literal` / `set_scaled` check."""
    site = knob.site
    if site is None:
        raise EditError(f"{knob.key} has no site to edit")
    if knob.expression:
        if "scale" not in site.edits:
            raise EditError(f"{site.key} takes {', '.join(site.edits) or 'no'} edits, not scale")
        problems = scale_violations(site, value)
        if problems:
            raise EditError(f"{site.key} scaled by step {value}: {'; '.join(problems)}")
        return site.key, scaled_code(site.expression, site.kind, value)
    if "literal" not in site.edits:
        raise EditError(f"{site.key} takes {', '.join(site.edits) or 'no'} edits, not literal")
    problems = violations(site, value)
    if problems:
        raise EditError(f"{site.key} = {value}: {'; '.join(problems)}")
    return site.key, literal_code(site.kind, value)


def _located(source: str) -> Located:
    located = locate(source)
    if located is None:
        raise EditError("the source does not parse")
    return located


def apply_knob(source: str, knob: Knob, value: int) -> str:
    """`source` with `knob` (one of `tunable_knobs(source)`) set to `value`: its literal replaced, or its
    expression scaled by that step; every other byte stays."""
    return apply_knobs(source, {knob.key: value}, [knob])


def apply_knobs(source: str, values_by_key: dict[str, int], knobs: list[Knob] | None = None) -> str:
    """Several knobs (by key) set in one rewrite of one parse, each edit checked against its site's
    constraints and the whole against the couplings of the sites it moves (EditError)."""
    located = _located(source)
    by_key = {knob.key: knob for knob in (knobs if knobs is not None else tunable_knobs(source))}
    missing = [key for key in values_by_key if key not in by_key]
    if missing:
        raise EditError(f"no knob {', '.join(missing)} in the source")
    if located.discovery.couplings:
        values = {site.key: site.value for site in located.discovery.sites if site.value is not None}
        values.update({by_key[key].site.key: value for key, value in values_by_key.items()  # type: ignore[union-attr]
                       if by_key[key].site is not None and not by_key[key].expression})
        moved = {by_key[key].site.key for key in values_by_key if by_key[key].site is not None}  # type: ignore[union-attr]
        problems = _broken(tuple(c for c in located.discovery.couplings if moved & set(c.sites)), values)
        if problems:
            raise EditError("; ".join(problems))
    return rewrite(located, [_change(by_key[key], value) for key, value in values_by_key.items()])
