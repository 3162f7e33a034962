"""Knobs where real Triton code keeps them: `discover(source)` lists every `KnobSite` with its constraints and
the edits it allows. `KnobSite` is the tuner's one model of a knob: the search's `Knob` (knobs.py) is a tunable
site under the key the search names it by.

The site styles of `styles/` find the places in one `Scan` of the source; what every place shares is decided
here: the constraints the kernel, the wrapper and the grid put on its parameter, the edits it takes unless its
style decides (pinned: none; an expression: literal or scaled; a per-shape table where the style takes one),
what a table may be keyed on, and its key.

A site whose constraints leave no useful value is listed but not editable, with the reason: a `tl.arange` size
that must equal the extent it indexes, or one the wrapper already computes as the smallest legal power of two
of a dimension it must cover (`triton.next_power_of_2(n_cols)` for a kernel that does not loop over the
columns), where a smaller value is wrong and a larger one only adds masked lanes.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import libcst as cst

from orchestrator.providers.tune.constraints import (
    Constraint,
    Coupling,
    launch_option_constraints,
    wrapper_constraints,
)
from orchestrator.providers.tune.domains import DOMAINS
from orchestrator.providers.tune.forms import AutotuneConfig, code, read_scaled
from orchestrator.providers.tune.scan import TRITON_DEFAULTS, Found, Launch, Scan, Scope, literal, subtree
from orchestrator.providers.tune.styles import FINDERS, SITE_WORDS, STYLES, style_of

_BOUNDS = ("at_least", "greater_than")


@dataclass(frozen=True)
class KnobSite:
    """One place where a launch parameter's value is set, and what may be done to it."""

    key: str  # site:scope.name#ordinal, stable across edits of values
    name: str  # the launch parameter it sets: a constexpr, num_warps, num_stages, programs, configs, key, grid
    kind: str  # block | tile | warps | stages | group | buffers | switch | programs | configs | key | grid
    site: str  # the style's site name (styles/)
    expression: str  # the value as written (for a scaled one, the author's expression inside the scaling)
    value: int | None  # a literal's value
    line: int
    scope: str  # the wrapper function, or the kernel for decorator sites; "" at module level
    kernel: str  # the kernel it configures ("" when the launch's callee is not a kernel of this file)
    variable: str = ""  # the name assigned, when it is not the launch parameter (`width` feeding `BLOCK=width`)
    step: int = 0  # the tuner's scaling already applied to `expression` (forms.py)
    domain: tuple[int, ...] = ()
    edits: tuple[str, ...] = ()  # literal | table | scale | configs
    constraints: tuple[Constraint, ...] = ()
    dimensions: tuple[str, ...] = ()  # what a per-shape table may be keyed on, most relevant first
    note: str = ""  # why it cannot be edited, or what it does (a grid's divisors, a config list's size)
    configs: tuple[AutotuneConfig, ...] = ()  # an autotune list's entries as written
    group: int = 0  # entries of one triton.Config share it (0 elsewhere)
    table_site: str = ""  # a module constant's: the key of the launch argument its per-shape tables go to

    @property
    def where(self) -> str:
        return f"{SITE_WORDS[self.site]}{f' in {self.scope}' if self.scope else ''} at line {self.line}"

    @property
    def category(self) -> str:
        return style_of(self.site).category_of(self)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        del data["group"]
        data["constraints"] = [c.to_json() for c in self.constraints]
        data["where"] = self.where
        return data


@dataclass(frozen=True)
class Discovery:
    sites: tuple[KnobSite, ...]
    kernels: tuple[str, ...]
    launches: tuple[Launch, ...]
    parse_error: str = ""
    ignored: tuple[str, ...] = ()  # entries read and left: a heuristic or constexpr that is no size, warps or stages
    couplings: tuple[Coupling, ...] = ()  # relations pairs of sites keep together
    unlaunched: tuple[tuple[str, str, int], ...] = ()  # (scope, name, line): knob-named locals no launch reads

    @property
    def tunable(self) -> tuple[KnobSite, ...]:
        return tuple(site for site in self.sites if site.edits)

    def site(self, key: str) -> KnobSite:
        for site in self.sites:
            if site.key == key:
                return site
        raise KeyError(f"no knob site {key!r}; the source has {', '.join(s.key for s in self.sites) or 'none'}")


def _is_bound(constraint: Constraint) -> bool:
    """A lower bound the code puts on a size (not the fixed floor of a launch option)."""
    return constraint.relation in _BOUNDS and constraint.parameter not in ("num_warps", "num_stages")


def _scope_name(found: Found) -> str:
    return found.scope_label


def _constraints(found: Found, scan: Scan, wrapper: list[Constraint], grid: list[tuple[str, Constraint]],
                 line: int) -> list[Constraint]:
    """What the code demands of the place: its launch option's range, what the kernel demands of its parameter,
    a tile the grid must divide by, the wrapper's checks, the grid's divisions, and what its style adds."""
    style = style_of(found.site)
    if style.own_constraints_only:
        return list(found.constraints)
    scope = _scope_name(found)
    names = {found.name, found.variable} - {""}
    found_constraints = list(found.constraints)
    if found.kind in ("warps", "stages"):
        found_constraints += launch_option_constraints(found.kind, scope, line)
    facts = scan.facts.get(found.kernel)
    if facts is not None and found.name in facts.constexprs:
        for constraint in facts.constraints:
            if constraint.parameter != found.name:
                continue
            at_launch = style.bound_at_launch(found, constraint.bound) if constraint.relation in _BOUNDS else ""
            found_constraints.append(dataclasses.replace(constraint, at_launch=at_launch))
    if facts is not None and found.name in facts.tiled and not facts.persistent:
        grids = [f for f in scan.found if f.kind == "grid" and f.kernel == found.kernel]
        if grids and not any(names & f.grid_names for f in grids):
            shown = ", ".join(code(f.node) for f in grids)
            found_constraints.append(Constraint(
                found.name, "pinned", shown,
                f"{found.kernel} offsets each program by a multiple of {found.name}, but its grid {shown} does not "
                f"divide by it, so the programs cover the data only at this {found.name}", found.kernel, line))
    found_constraints += [c for c in wrapper if c.scope == scope and c.parameter in names]
    found_constraints += [c for kernel, c in grid if kernel == found.kernel and c.parameter in names]
    return found_constraints + style.constraints(found, scan)


def _edits(found: Found, constraints: list[Constraint]) -> tuple[tuple[str, ...], str]:
    """The edits a site allows, or none with the reason: its style's say first, then the common rules."""
    decided = style_of(found.site).edits(found, constraints)
    if decided is not None:
        return decided
    if found.pinned:
        return (), found.pinned
    pinned = next((c for c in constraints if c.relation == "pinned"), None)
    if pinned is not None:
        return (), pinned.text()
    written = code(found.node)
    bound = next((c for c in constraints if _is_bound(c)), None)
    if bound is not None and "next_power_of_2" in written:
        return (), (f"{bound.text()}; the wrapper already computes the smallest power of two that satisfies it, so a "
                    "smaller value is wrong and a larger one only adds masked lanes")
    if found.kind == "switch":  # False or True, as the author writes it: no scale, no per-shape table
        return ("literal",), ""
    tables = style_of(found.site).takes_tables(found)
    if found.table_only:  # the launch argument a module constant's tables go to: its value is the constant's
        return (("table",), "") if tables else ((), "the place of a module constant's per-shape table")
    if isinstance(found.node, cst.Integer):  # scaling a literal is just another literal
        return (("literal", "table") if tables else ("literal",)), ""
    return (("literal", "table", "scale") if tables else ("literal", "scale")), ""


def _dimensions(found: Found, scan: Scan, constraints: list[Constraint]) -> tuple[str, ...]:
    """What a per-shape table may be keyed on: the shapes the expression reads, then the bounds, then the
    shapes the wrapper's sizes read (`BLOCK_SIZE = triton.next_power_of_2(n_cols)`: a literal `num_warps = 8`
    reads nothing, and the row length is what its best value follows), then the rest."""
    bounds = [c.at_launch or c.bound for c in constraints if _is_bound(c)]
    keys = style_of(found.site).table_keys(found, bounds)
    if keys is not None:
        return keys
    local: dict[str, str] = {}
    scope = found.scope
    sizes: list[str] = []
    while scope is not None:
        local = {**scope.dimensions, **local}
        sizes += [name for name in scope.bindings if name.isupper()]
        scope = scope.parent
    read = _shapes_reached(found.scope, _names(found.node), local)
    sized = _shapes_reached(found.scope, [name for name in sizes if name not in local], local)
    return tuple(dict.fromkeys([*read, *bounds, *sized, *sorted(local)]))


def _shapes_reached(scope: Scope | None, names: list[str], local: dict[str, str]) -> list[str]:
    """The shapes `names` read, directly or through the locals they read (`num_warps` from `BLOCK_SIZE`,
    `BLOCK_SIZE` from `N`), nearest first."""
    shapes: list[str] = []
    seen: set[str] = set()
    frontier = list(names)
    while frontier:
        name = frontier.pop(0)
        if name in seen:
            continue
        seen.add(name)
        if name in local:
            shapes.append(name)
            continue
        resolved = scope.resolve(name) if scope is not None else None
        for binding in (resolved[1] or []) if resolved is not None else []:
            if binding.value is not None:
                frontier += _names(binding.value)
    return shapes


def _names(node: cst.CSTNode) -> list[str]:
    return list(dict.fromkeys(sub.value for sub in reversed(subtree(node)) if isinstance(sub, cst.Name)))


@dataclass(frozen=True)
class Located:
    """A discovery with what its sites were read from (the scan's findings by site key), for `edits`."""

    scan: Scan
    discovery: Discovery
    found: dict[str, Found]


@functools.lru_cache(maxsize=16)  # a libcst tree of a kernel file weighs megabytes
def locate(source: str) -> Located | None:
    """The scan and discovery of `source`, or None when it does not parse (cached: the policy asks often)."""
    try:
        scan = Scan(source)
    except (cst.ParserSyntaxError, SyntaxError, RecursionError):
        return None
    for style in STYLES:
        style.read(scan)
    for style in FINDERS:
        style.find(scan)
    variables: dict[str, set[str]] = {}
    for found in scan.found:
        variables.setdefault(_scope_name(found), set()).update({found.name, found.variable} - {""})
    wrapper = wrapper_constraints(scan.tree, variables)
    grid = [(found.kernel, c) for found in scan.found if style_of(found.site).own_constraints_only
            for c in found.constraints]
    ordered = sorted(scan.found, key=lambda f: scan.start(f.node))
    read = []
    for found in ordered:
        line = scan.line(found.node)
        constraints = _constraints(found, scan, wrapper, grid, line)
        read.append((found, line, constraints, *_edits(found, constraints)))
    # Launch options a launch leaves to Triton's default are knobs only for a kernel with no tunable size: there
    # they are all there is to tune (a row block the shape fixes); beside tunable sizes the author's choice to
    # leave them out stands, and the sizes' search stays as measured on the H200.
    sized = {found.kernel for found, _, _, edits, _ in read if edits and found.kind not in ("warps", "stages")}
    ordinals: dict[tuple[str, str, str], int] = {}
    sites, by_key = [], {}
    for found, line, constraints, edits, note in read:
        if found.absent_from is not None and found.kernel in sized:
            continue
        scope = _scope_name(found)
        ordinal = ordinals.get((found.site, scope, found.name), 0)
        ordinals[(found.site, scope, found.name)] = ordinal + 1
        key = f"{found.site}:{scope + '.' if scope else ''}{found.name}#{ordinal}"
        scaled = read_scaled(found.node, found.kind) if "scale" in edits else None
        value = literal(found.node, found.kind)
        if found.absent_from is not None:  # Triton's default until the tuner writes the keyword
            value = TRITON_DEFAULTS[found.name]
        sites.append(KnobSite(
            key=key, name=found.name, kind=found.kind, site=found.site,
            expression=str(value) if found.absent_from is not None else code(scaled.base if scaled else found.node),
            value=value if isinstance(value, int) else None,
            line=line, scope=scope, kernel=found.kernel,
            variable=style_of(found.site).assigned(found),
            step=scaled.step if scaled else 0, domain=DOMAINS.get(found.kind, ()), edits=edits,
            constraints=tuple(constraints), dimensions=_dimensions(found, scan, constraints) if "table" in edits else (),
            note=note or found.note, configs=found.configs, group=found.group))
        by_key[key] = found
    key_of = {id(found): key for key, found in by_key.items()}
    sites = [dataclasses.replace(site, table_site=key_of[id(place)])
             if (place := by_key[site.key].table_place) is not None and id(place) in key_of else site for site in sites]
    fed = {(site.scope, site.variable or site.name) for site in sites}
    unlaunched = tuple(
        (scope.name, name, scan.line(binding.value))
        for scope in scan.scopes for name, bindings in scope.bindings.items() for binding in bindings[:1]
        if binding.value is not None and (scope.name, name) not in fed and _knob_named(name))
    couplings = tuple(Coupling((key_of[id(first)], key_of[id(second)]), holds, text)
                      for first, second, holds, text in scan.couplings
                      if id(first) in key_of and id(second) in key_of)
    discovery = Discovery(tuple(sites), tuple(scan.kernel_nodes), tuple(scan.launches),
                          ignored=tuple(dict.fromkeys(scan.ignored)), unlaunched=unlaunched, couplings=couplings)
    return Located(scan, discovery, by_key)


def _knob_named(name: str) -> bool:
    upper = name.upper()
    return upper in ("NUM_WARPS", "NUM_STAGES") or any(word in upper for word in ("BLOCK", "TILE", "WARPS", "STAGES"))


def discover(source: str) -> Discovery:
    """Every knob site of a kernel file, in source order; a source that does not parse has none (and says so)."""
    located = locate(source)
    if located is None:
        try:
            ast.parse(source)
        except SyntaxError as exc:
            return Discovery((), (), (), parse_error=f"{exc.msg}, line {exc.lineno}")
        return Discovery((), (), (), parse_error="libcst cannot parse it")
    return located.discovery
