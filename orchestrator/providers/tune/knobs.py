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

from orchestrator.providers.tune.grid import grid_uses

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
    grid_uses: int | None = None  # times the launch grid mentions the name; None: the file launches no kernel

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
    in_grid = grid_uses(tree)
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
                grid_uses=None if in_grid is None else in_grid[name],
            )
        )
    return knobs


LOOKED_FOR = ("module-level upper-case integer constants named with BLOCK, TILE, GROUP, WARPS or STAGES and used in "
              "the file, integer literals given as num_warps=/num_stages= or as upper-case keywords of a "
              "kernel[grid](...) launch, and triton.Config entries")


def _module_int_constants(tree: ast.Module) -> dict[str, int]:
    """Module-level `NAME = <int>` assignments: name -> line."""
    constants: dict[str, int] = {}
    for statement in tree.body:
        if (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)
                and _int_literal(statement.value) is not None):
            constants[statement.targets[0].id] = statement.lineno
    return constants


def _launch_edits(launch: ast.Call, constants: dict[str, int], renamed: set[str]) -> list[str]:
    """The edits that would turn one launch's parameters into knobs (`renamed`: constants already advised)."""
    kernel = ast.unparse(launch.func.value)  # type: ignore[attr-defined]
    edits = []
    for keyword in launch.keywords:
        if keyword.arg is None or _int_literal(keyword.value) is not None:
            continue
        value = ast.unparse(keyword.value)
        if value in renamed:
            continue
        if isinstance(keyword.value, ast.Name) and keyword.value.id in constants:
            edits.append(f"rename the constant {value} (line {constants[value]}) passed as {keyword.arg}= to a name "
                         f"with BLOCK, TILE, GROUP, WARPS or STAGES in it")
        elif keyword.arg.isupper() or keyword.arg in ("num_warps", "num_stages"):
            edits.append(f"pass {keyword.arg}= a literal or a module-level constant instead of {value} in the "
                         f"launch of {kernel} at line {launch.lineno}")
    if not any(keyword.arg == "num_warps" for keyword in launch.keywords):
        edits.append(f"add num_warps=4 (Triton's default, so nothing changes) to the launch of {kernel} at line "
                     f"{launch.lineno}")
    return edits


def missing_knobs_advice(source: str) -> str:
    """Why a source has no knob: what `find_knobs` looks for, and the smallest edits that would expose one."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"the source does not parse ({exc.msg}, line {exc.lineno}), so it has no knob the tuner can read"
    constants = _module_int_constants(tree)
    loaded = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    renamed = {name for name in constants
               if name in loaded and not name.isupper() and _knob_kind(name.upper(), False) is not None}
    edits = [f"rename {name} (line {constants[name]}) to {name.upper()}" for name in sorted(renamed)]
    launches = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)]
    for launch in launches:
        edits += _launch_edits(launch, constants, renamed)
    if not launches:
        edits.append("launch the kernel from this file as kernel[grid](..., BLOCK_SIZE=BLOCK_SIZE, num_warps=4) with "
                     "a module-level BLOCK_SIZE = <int> constant")
    return f"it looks for {LOOKED_FOR}; to expose one, {'; or '.join(edits[:3])}"


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
