"""The tuner's knobs: tunable integer literals found in the kernel's AST, and the knob sites beyond them.

Block sizes, tile sizes, `num_warps`, `num_stages`, grouping constants and `triton.Config` entries; each
knob has a legal domain per kind, and an edit replaces only the literal's bytes, so a patch is a one-line
diff per knob. `tunable_knobs` adds what `discovery` finds where real code keeps its configuration (wrapper
assignments, launch expressions, `triton.heuristics`), narrows every domain by the constraints the code
states, and drops what those constraints pin; `apply_knob` edits those sites through `edits` (libcst).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from dataclasses import dataclass, replace

from orchestrator.providers.tune.discovery import KnobSite, discover
from orchestrator.providers.tune.domains import (
    DOMAINS,
    SCALE_EXPONENTS,
    TILE_NAME,
    domain_holding,
    literal_kind,
)
from orchestrator.providers.tune.edits import scale_violations, set_literal, set_scaled, violations
from orchestrator.providers.tune.forms import ADDITIVE_KINDS, scaled_code
from orchestrator.providers.tune.grid import grid_uses
from orchestrator.providers.tune.sites import SITE_WORDS

UP, DOWN = 1, -1

@dataclass(frozen=True)
class Knob:
    """One tunable integer literal and where it sits (AST line and UTF-8 byte columns)."""

    key: str  # stable across edits: origin, name and ordinal among equal (origin, name) pairs
    name: str
    kind: str
    origin: str  # constant | launch | config
    value: int
    line: int
    col: int
    end_col: int
    grid_uses: int | None = None  # times the launch grid mentions the name; None: the file launches no kernel
    site_key: str = ""  # the discovery's key of a knob beyond `find_knobs`, edited with libcst
    expression: str = ""  # an expression knob: `value` is then the scaling step applied to it (0: as written)
    allowed: tuple[int, ...] | None = None  # the kind's domain narrowed by the constraints in the code
    scope: str = ""  # the wrapper or kernel it sits in

    @property
    def domain(self) -> tuple[int, ...]:
        if self.allowed is not None:
            return self.allowed
        return SCALE_EXPONENTS if self.expression else DOMAINS[self.kind]

    @property
    def where(self) -> str:
        origin = SITE_WORDS.get(self.origin, self.origin) if self.site_key else self.origin
        return f"{origin}{f' in {self.scope}' if self.scope else ''} at line {self.line}"

    def written(self, limit: int = 60) -> str:
        """The expression of an expression knob on one line, shortened to `limit` characters."""
        text = " ".join(self.expression.split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def show(self, value: int) -> str:
        """A value in a proposal's text: the literal, or the expression with its step (`E`, `E x2`, `E /2`)."""
        if not self.expression:
            return str(value)
        return self.written() if value == 0 else f"{self.written()} {self.short(value)}"

    def code(self, value: int) -> str:
        """A value as the source will read: the literal, or the expression scaled by that step."""
        return scaled_code(self.expression, self.kind, value) if self.expression else str(value)

    def short(self, value: int) -> str:
        """A value in a few characters: the literal, or the step (`x1` as written, `x2`, `/2`, `+1`)."""
        if not self.expression:
            return str(value)
        if self.kind in ADDITIVE_KINDS:
            return f"{value:+d}"
        return f"x{2 ** value}" if value >= 0 else f"/{2 ** -value}"

    def magnitude(self, value: int) -> float:
        """How a value compares to another in size: the literal, or 2**step."""
        return float(2**value) if self.expression and self.kind not in ADDITIVE_KINDS else float(value)


def _int_literal(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int and node.lineno == node.end_lineno:
        return node.value
    return None


def _looks_like_matmul(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "dot":
            return True
        name = node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.keyword) else None
        if name and TILE_NAME.search(name):
            return True
    return False


def _call_name(call: ast.Call) -> str:
    function = call.func
    if isinstance(function, ast.Attribute):
        return function.attr
    if isinstance(function, ast.Name):
        return function.id
    return ""


def _is_loop(call: ast.Call) -> bool:
    return _call_name(call) in ("range", "static_range")


def _owns_stage_buffers(tree: ast.Module) -> set[int]:
    """Ids of the calls inside functions that allocate their own shared-memory buffers (`tlx.local_alloc`):
    there the kernel pipelines by hand, and a loop's `num_stages` is no knob."""
    owned: set[int] = set()
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef) and any(
                isinstance(node, ast.Call) and _call_name(node) == "local_alloc" for node in ast.walk(function)):
            owned |= {id(node) for node in ast.walk(function) if isinstance(node, ast.Call)}
    return owned


def loops_left_alone(source: str) -> list[tuple[int, str]]:
    """(line, reason) of each loop whose `num_stages` the tuner leaves as written: `num_stages=0` (Triton's
    software pipelining off on purpose), or any value in a kernel that allocates its own stage buffers."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    owned = _owns_stage_buffers(tree)
    left = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_loop(node)):
            continue
        for keyword in node.keywords:
            value = _int_literal(keyword.value)
            if keyword.arg != "num_stages" or value is None:
                continue
            if id(node) in owned:
                left.append((keyword.value.lineno, f"the loop's num_stages={value} (line {keyword.value.lineno}) "
                             "stays: the kernel allocates its own stage buffers (tlx.local_alloc) and pipelines "
                             "by hand"))
            elif value < 1:
                left.append((keyword.value.lineno, f"the loop's num_stages={value} (line {keyword.value.lineno}) "
                             "stays: it turns Triton's software pipelining off on purpose"))
    return sorted(left)


def find_knobs(source: str) -> list[Knob]:
    """Every tunable literal in source order; an unparsable source has none. Launch options count at a launch
    (`kernel[grid](...)`, `kernel.warmup(...)`) and in a `triton.Config`, and `num_stages` in a `tl.range` loop
    that pipelines (never elsewhere: a `tlx.async_task(num_warps=...)` partitions warps, it sets no launch)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    left_alone = {line for line, _ in loops_left_alone(source)}
    matmul = _looks_like_matmul(tree)
    loaded = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    found: list[tuple[str, str, ast.Constant]] = []  # (origin, name, literal)

    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id.isupper() and target.id in loaded and _int_literal(value) is not None:
            found.append(("constant", target.id, value))  # type: ignore[arg-type]

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        is_launch = isinstance(node.func, ast.Subscript)  # kernel[grid](...)
        is_config = _call_name(node) == "Config"
        takes_options = is_launch or is_config or _call_name(node) == "warmup"
        for keyword in node.keywords:
            if keyword.arg is None or _int_literal(keyword.value) is None:
                continue
            option = keyword.arg in ("num_warps", "num_stages") and (takes_options or (
                keyword.arg == "num_stages" and _is_loop(node) and keyword.value.lineno not in left_alone))
            if option or (is_launch and keyword.arg.isupper()):
                found.append(("config" if is_config else "launch", keyword.arg, keyword.value))  # type: ignore[arg-type]
        if is_config and node.args and isinstance(node.args[0], ast.Dict):
            for key, value in zip(node.args[0].keys, node.args[0].values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and _int_literal(value) is not None:
                    found.append(("config", key.value, value))  # type: ignore[arg-type]

    found.sort(key=lambda item: (item[2].lineno, item[2].col_offset))
    in_grid = grid_uses(tree)
    knobs: list[Knob] = []
    ordinals: dict[tuple[str, str], int] = {}
    for origin, name, literal in found:
        kind = literal_kind(name, matmul)
        if kind is None:
            continue
        ordinal = ordinals.get((origin, name), 0)
        ordinals[(origin, name)] = ordinal + 1
        knobs.append(
            Knob(
                key=f"{origin}:{name}#{ordinal}",
                name=name,
                kind=kind,
                origin=origin,
                value=literal.value,
                line=literal.lineno,
                col=literal.col_offset,
                end_col=literal.end_col_offset,  # type: ignore[arg-type]
                grid_uses=None if in_grid is None else in_grid[name],
            )
        )
    return knobs


def apply_knob(source: str, knob: Knob, value: int) -> str:
    """Replace just the literal's span (AST columns are UTF-8 byte offsets), leaving every other byte alone; a
    knob beyond the literals is edited through its site (a literal, or its expression scaled)."""
    if knob.site_key:
        return set_scaled(source, knob.site_key, value) if knob.expression else set_literal(source, knob.site_key, value)
    lines = source.splitlines(keepends=True)
    encoded = lines[knob.line - 1].encode("utf-8")
    lines[knob.line - 1] = (encoded[: knob.col] + str(value).encode() + encoded[knob.end_col :]).decode("utf-8")
    return "".join(lines)


def apply_knobs(source: str, values_by_key: dict[str, int]) -> str:
    """Set several knobs (by key); each edit re-finds its knob, since an earlier one can move its columns."""
    for key, value in values_by_key.items():
        source = apply_knob(source, next(k for k in tunable_knobs(source) if k.key == key), value)
    return source


def knob_configuration(knobs: Iterable[Knob]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((knob.key, knob.value) for knob in knobs))


def next_value(knob: Knob, direction: int, current: int) -> int | None:
    """The next legal value strictly beyond `current` in `direction`, or None at the bound."""
    beyond = [v for v in knob.domain if (v > current if direction == UP else v < current)]
    if not beyond:
        return None
    return min(beyond) if direction == UP else max(beyond)


def _narrowed(site: KnobSite, kind: str) -> tuple[int, ...] | None:
    """The values of the kind's domain the site's constraints allow; None when they allow all of them."""
    legal = tuple(value for value in DOMAINS[kind] if not violations(site, value))
    return None if legal == DOMAINS[kind] else legal


def _matches(knob: Knob, site: KnobSite) -> bool:
    return site.line == knob.line and site.value == knob.value and knob.name in (site.name, site.variable)


class KnobDomainError(AssertionError):
    """A knob whose current value lies outside its domain reached the search: a defect of the tuner, which
    `tunable_knobs` guarantees away (the run records it as that proposal's failure)."""


def check_domains(knobs: Iterable[Knob]) -> None:
    """The tuner's own assertion before it asks the search for values: every domain holds its knob's value."""
    outside = [f"{knob.key} = {knob.value} not in {knob.domain}" for knob in knobs if knob.value not in knob.domain]
    if outside:
        raise KnobDomainError(f"knob domain without the current value: {'; '.join(outside)}")


def tunable_knobs(source: str) -> list[Knob]:
    """`find_knobs`, narrowed by the code's constraints (a pinned literal is dropped), plus every editable site
    `discovery` finds beyond the literals, in source order. Keys of `find_knobs` knobs are unchanged. Every
    knob's domain holds its current value (`domain_holding`); a value that is no setting of its kind at all
    makes no knob (`set_aside` says why)."""
    return list(_tunable_knobs(source)[0])


def set_aside(source: str) -> list[tuple[Knob, str]]:
    """The literals `tunable_knobs` found and left, each with why: a current value that is no setting of its
    kind (`num_warps = 3`, a 48-element block)."""
    return list(_tunable_knobs(source)[1])


def _holding_value(knob: Knob) -> tuple[Knob | None, str]:
    """The knob with its current value in its domain, or None and why it is no knob."""
    domain, reason = domain_holding(knob.domain, knob.kind, knob.value) if not knob.expression else (
        tuple(sorted({*knob.domain, knob.value})), "")
    if not domain:
        return None, f"{knob.name} = {knob.value} ({knob.where}) is no {knob.kind} setting: {reason}"
    return (knob if domain == knob.domain else replace(knob, allowed=domain)), ""


@functools.lru_cache(maxsize=64)
def _tunable_knobs(source: str) -> tuple[tuple[Knob, ...], tuple[tuple[Knob, str], ...]]:
    knobs, left = [], []
    for knob in _found_knobs(source):
        held, reason = _holding_value(knob)
        if held is None:
            left.append((knob, reason))
        else:
            knobs.append(held)
    return tuple(knobs), tuple(left)


def _found_knobs(source: str) -> tuple[Knob, ...]:  # cached by `_tunable_knobs`: the policy asks for every move
    discovery = discover(source)
    sites = [site for site in discovery.sites if site.kind in DOMAINS or site.kind == "programs"]
    knobs: list[Knob] = []
    claimed: set[str] = set()
    for knob in find_knobs(source):
        site = next((site for site in sites if site.key not in claimed and _matches(knob, site)), None)
        if site is None:
            knobs.append(knob)
            continue
        claimed.add(site.key)
        allowed = _narrowed(site, knob.kind) if site.edits else ()
        if allowed != ():
            knobs.append(replace(knob, allowed=allowed))
    beyond = [site for site in sites if site.key not in claimed and site.edits]
    in_grid = grid_uses(ast.parse(source)) if beyond else None  # `discover` parsed it, so it parses
    for site in beyond:
        uses = None if in_grid is None else max(in_grid[site.name], in_grid[site.variable] if site.variable else 0)
        common = {"key": site.key, "name": site.name, "kind": site.kind, "origin": site.site, "line": site.line,
                  "col": 0, "end_col": 0, "grid_uses": uses, "site_key": site.key, "scope": site.scope}
        if site.value is not None and site.kind in DOMAINS:
            allowed = _narrowed(site, site.kind)
            if allowed != ():
                knobs.append(Knob(value=site.value, allowed=allowed, **common))
        elif site.value is None and "scale" in site.edits:
            steps = tuple(step for step in SCALE_EXPONENTS if not scale_violations(site, step))
            if steps != (site.step,):
                knobs.append(Knob(value=site.step, expression=site.expression,
                                  allowed=None if steps == SCALE_EXPONENTS else steps, **common))
    return tuple(sorted(knobs, key=lambda knob: knob.line))
