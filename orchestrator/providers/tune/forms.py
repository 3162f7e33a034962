"""The forms the tuner writes in place of an expression knob, and reading them back from the source.

A scaled expression keeps the author's expression whole, in parentheses: `min(2 * (E), 32)` (warps clamp at
32), `4 * (E)`, `max((E) // 2, 1)`, and for stages `(E) + 1` / `max((E) - 1, 1)`. A per-shape table is
`{4096: 8, 8192: 16}.get(n_cols, E)`. Reading a form back gives E and the step, so a second edit rewrites the
factor instead of wrapping the expression again, and step 0 restores E byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

ADDITIVE_KINDS = frozenset({"stages", "buffers"})
UPPER_CLAMP = {"warps": 32}  # a hard limit: more warps than 32 cannot launch
LOWER_FLOOR = {"tile": 16, "stages": 1, "buffers": 1}  # tl.dot tiles need 16; anything else floors at 1


@dataclass(frozen=True)
class Scaled:
    base: cst.BaseExpression  # the expression as its author wrote it
    step: int  # a factor of 2**step (stages: a difference of step); 0 when `base` is the whole expression


@dataclass(frozen=True)
class Table:
    dimension: cst.BaseExpression
    entries: tuple[tuple[int, int], ...]
    fallback: cst.BaseExpression


def literal_code(kind: str, value: int) -> str:
    """A knob's literal value as the source writes it: `True` / `False` for a switch, the integer otherwise."""
    if kind == "switch":
        return "True" if value else "False"
    return str(value)


def code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _integer(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer) and not node.lpar:
        value = node.evaluated_value
        return value if isinstance(value, int) else None
    return None


def _unwrapped(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The expression inside the one pair of parentheses the tuner added; None if it has none."""
    if not node.lpar:
        return None
    return node.with_changes(lpar=node.lpar[1:], rpar=node.rpar[:-1])


def _call_of(node: cst.BaseExpression, name: str) -> tuple[cst.BaseExpression, ...] | None:
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == name and not node.lpar
            and all(not arg.keyword and not arg.star for arg in node.args)):
        return tuple(arg.value for arg in node.args)
    return None


def _power_of_two_exponent(value: int | None) -> int | None:
    if value is None or value < 2 or value & (value - 1):
        return None
    return value.bit_length() - 1


def read_scaled(node: cst.BaseExpression, kind: str) -> Scaled:
    """The author's expression and the step the tuner applied to it (step 0 for any other expression). Only the
    exact forms `scaled_code` writes are read back, with its own clamp and floor."""
    floor, clamp = LOWER_FLOOR.get(kind, 1), UPPER_CLAMP.get(kind)
    inner, outer = node, ""
    for name, limit in (("min", clamp), ("max", floor)):
        arguments = _call_of(node, name)
        if arguments and len(arguments) == 2 and limit is not None and _integer(arguments[1]) == limit:
            inner, outer = arguments[0], name
    if not isinstance(inner, cst.BinaryOperation) or inner.lpar:
        return Scaled(node, 0)
    operator = inner.operator
    if kind in ADDITIVE_KINDS:
        amount, base = _integer(inner.right), _unwrapped(inner.left)
        if amount and base is not None and isinstance(operator, cst.Add) and not outer:
            return Scaled(base, amount)
        if amount and base is not None and isinstance(operator, cst.Subtract) and outer == "max":
            return Scaled(base, -amount)
        return Scaled(node, 0)
    if isinstance(operator, cst.Multiply) and outer == ("min" if clamp else ""):
        exponent, base = _power_of_two_exponent(_integer(inner.left)), _unwrapped(inner.right)
        if exponent and base is not None:
            return Scaled(base, exponent)
    if isinstance(operator, cst.FloorDivide) and outer == "max":
        exponent, base = _power_of_two_exponent(_integer(inner.right)), _unwrapped(inner.left)
        if exponent and base is not None:
            return Scaled(base, -exponent)
    return Scaled(node, 0)


def scaled_code(base: str, kind: str, step: int) -> str:
    """The source of `base` scaled by `step`, clamped to the kind's hard limits."""
    if step == 0:
        return base
    floor = LOWER_FLOOR.get(kind, 1)
    if kind in ADDITIVE_KINDS:
        return f"({base}) + {step}" if step > 0 else f"max(({base}) - {-step}, {floor})"
    if step < 0:
        return f"max(({base}) // {2 ** -step}, {floor})"
    clamp = UPPER_CLAMP.get(kind)
    return f"min({2 ** step} * ({base}), {clamp})" if clamp else f"{2 ** step} * ({base})"


def scaled_value(value: int, kind: str, step: int) -> int:
    """What `scaled_code` evaluates to where its base is `value` (the same clamps and floors)."""
    if step == 0:
        return value
    floor = LOWER_FLOOR.get(kind, 1)
    if kind in ADDITIVE_KINDS:
        return value + step if step > 0 else max(value + step, floor)
    if step < 0:
        return max(value // 2 ** -step, floor)
    clamp = UPPER_CLAMP.get(kind)
    return min(2**step * value, clamp) if clamp else 2**step * value


def read_table(node: cst.BaseExpression) -> Table | None:
    """`{k: v, ...}.get(dimension, fallback)` with integer keys and values, or None."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get"
            and isinstance(node.func.value, cst.Dict) and len(node.args) == 2 and not node.lpar):
        return None
    entries = []
    for element in node.func.value.elements:
        if not isinstance(element, cst.DictElement):
            return None
        key, value = _integer(element.key), _integer(element.value)
        if key is None or value is None:
            return None
        entries.append((key, value))
    return Table(node.args[0].value, tuple(entries), node.args[1].value)


def table_code(dimension: str, entries: dict[int, int], fallback: str) -> str:
    table = ", ".join(f"{key}: {value}" for key, value in sorted(entries.items()))
    return f"{{{table}}}.get({dimension}, {fallback})"


@dataclass(frozen=True)
class AutotuneConfig:
    """One `triton.Config` entry: its constexpr values and launch options (None: not given, Triton's default)."""

    kwargs: tuple[tuple[str, int | str], ...]
    num_warps: int | None = None
    num_stages: int | None = None

    @classmethod
    def of(cls, kwargs: dict[str, int | str], num_warps: int | None = None,
           num_stages: int | None = None) -> AutotuneConfig:
        return cls(tuple(kwargs.items()), num_warps, num_stages)

    def code(self, callee: str = "triton.Config", quote: str = '"') -> str:
        entries = ", ".join(f"{quote}{name}{quote}: {value}" for name, value in self.kwargs)
        options = "".join(f", {option}={value}" for option, value in
                          (("num_warps", self.num_warps), ("num_stages", self.num_stages)) if value is not None)
        return f"{callee}({{{entries}}}{options})"
