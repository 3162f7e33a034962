"""The tuner's knobs: tunable integer literals found in the kernel's AST, and edits of just their spans.

Block sizes, tile sizes, `num_warps`, `num_stages`, grouping constants and `triton.Config` entries; each
knob has a legal domain per kind, and an edit replaces only the literal's bytes, so a patch is a one-line
diff per knob.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

UP, DOWN = 1, -1

# Legal values per knob kind: powers of two with sensible bounds, stages step by one.
DOMAINS: dict[str, tuple[int, ...]] = {
    "block": tuple(2**exponent for exponent in range(4, 14)),  # 16 .. 8192 (1-D programs)
    "tile": tuple(2**exponent for exponent in range(4, 9)),  # 16 .. 256 (matmul tiles)
    "warps": (1, 2, 4, 8, 16),
    "stages": (1, 2, 3, 4, 5, 6),
    "group": tuple(2**exponent for exponent in range(0, 7)),  # 1 .. 64
}
_TUNABLE_WORDS = ("BLOCK", "TILE", "WARPS", "STAGES", "GROUP")
_TILE_NAME = re.compile(r"(?:BLOCK|TILE)(?:_SIZE)?_[MNK]$")


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

    @property
    def domain(self) -> tuple[int, ...]:
        return DOMAINS[self.kind]


def _int_literal(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int and node.lineno == node.end_lineno:
        return node.value
    return None


def _knob_kind(name: str, matmul: bool) -> str | None:
    upper = name.upper()
    if upper == "NUM_WARPS" or "WARPS" in upper:
        return "warps"
    if upper == "NUM_STAGES" or "STAGES" in upper:
        return "stages"
    if not name.isupper() or upper.startswith("NUM_") or not any(word in upper for word in _TUNABLE_WORDS):
        return None
    if "GROUP" in upper:
        return "group"
    return "tile" if matmul or _TILE_NAME.search(upper) else "block"


def _looks_like_matmul(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "dot":
            return True
        name = node.id if isinstance(node, ast.Name) else node.arg if isinstance(node, ast.keyword) else None
        if name and _TILE_NAME.search(name):
            return True
    return False


def _call_name(call: ast.Call) -> str:
    function = call.func
    if isinstance(function, ast.Attribute):
        return function.attr
    if isinstance(function, ast.Name):
        return function.id
    return ""


def find_knobs(source: str) -> list[Knob]:
    """Every tunable literal in source order; an unparsable source has none."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
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
        for keyword in node.keywords:
            if keyword.arg is None or _int_literal(keyword.value) is None:
                continue
            if keyword.arg in ("num_warps", "num_stages") or (is_launch and keyword.arg.isupper()):
                found.append(("config" if is_config else "launch", keyword.arg, keyword.value))  # type: ignore[arg-type]
        if is_config and node.args and isinstance(node.args[0], ast.Dict):
            for key, value in zip(node.args[0].keys, node.args[0].values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and _int_literal(value) is not None:
                    found.append(("config", key.value, value))  # type: ignore[arg-type]

    found.sort(key=lambda item: (item[2].lineno, item[2].col_offset))
    knobs: list[Knob] = []
    ordinals: dict[tuple[str, str], int] = {}
    for origin, name, literal in found:
        kind = _knob_kind(name, matmul)
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
            )
        )
    return knobs


def apply_knob(source: str, knob: Knob, value: int) -> str:
    """Replace just the literal's span (AST columns are UTF-8 byte offsets), leaving every other byte alone."""
    lines = source.splitlines(keepends=True)
    encoded = lines[knob.line - 1].encode("utf-8")
    lines[knob.line - 1] = (encoded[: knob.col] + str(value).encode() + encoded[knob.end_col :]).decode("utf-8")
    return "".join(lines)


def apply_knobs(source: str, values_by_key: dict[str, int]) -> str:
    """Set several knobs (by key); each edit re-finds its knob, since an earlier one can move its columns."""
    for key, value in values_by_key.items():
        source = apply_knob(source, next(k for k in find_knobs(source) if k.key == key), value)
    return source


def knob_configuration(knobs: Iterable[Knob]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((knob.key, knob.value) for knob in knobs))


def next_value(knob: Knob, direction: int, current: int) -> int | None:
    """The next legal value strictly beyond `current` in `direction`, or None at the bound."""
    beyond = [v for v in knob.domain if (v > current if direction == UP else v < current)]
    if not beyond:
        return None
    return min(beyond) if direction == UP else max(beyond)
