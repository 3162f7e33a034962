"""Knob kinds and their legal values, shared by the literal finder (`knobs`) and the site discovery (`sites`)."""

from __future__ import annotations

import re

# Legal values per knob kind: powers of two with sensible bounds, stages step by one.
DOMAINS: dict[str, tuple[int, ...]] = {
    "block": tuple(2**exponent for exponent in range(4, 14)),  # 16 .. 8192 (1-D programs)
    "tile": tuple(2**exponent for exponent in range(4, 9)),  # 16 .. 256 (matmul tiles)
    "warps": (1, 2, 4, 8, 16, 32),  # 32 warps are 1024 threads, the most one program may have
    "stages": (1, 2, 3, 4, 5, 6),
    "group": tuple(2**exponent for exponent in range(0, 7)),  # 1 .. 64
    "buffers": (1, 2, 3, 4, 5, 6),  # a TLX kernel's shared-memory buffers per pipeline (styles/tlx.py)
    "switch": (0, 1),  # a boolean constexpr choosing between two code paths (False, True; styles/tlx.py)
}
# What an expression knob may be scaled by: exponents of 2 for sizes, warps, groups and program counts, steps
# of one for stages (`policy` and `edits` read a value of an expression knob as one of these).
SCALE_EXPONENTS = (-2, -1, 0, 1, 2)
TUNABLE_WORDS = ("BLOCK", "TILE", "WARPS", "STAGES", "GROUP")
MAX_WARPS = 32
TILE_NAME = re.compile(r"(?:BLOCK|TILE)(?:_SIZE)?_[MNK]$")


def literal_kind(name: str, matmul: bool) -> str | None:
    """The kind of a knob known only by its name (module constants, `triton.Config` entries): upper-case names
    with BLOCK, TILE, GROUP, WARPS or STAGES in them; None for anything else."""
    upper = name.upper()
    if upper == "NUM_WARPS" or "WARPS" in upper:
        return "warps"
    if upper == "NUM_STAGES" or "STAGES" in upper:
        return "stages"
    if not name.isupper() or upper.startswith("NUM_") or not any(word in upper for word in TUNABLE_WORDS):
        return None
    if "GROUP" in upper:
        return "group"
    return "tile" if matmul or TILE_NAME.search(upper) else "block"


def parameter_kind(name: str, sizes: frozenset[str], uses_dot: bool) -> str | None:
    """The kind of a launch parameter of a kernel whose body was read: a constexpr the kernel uses as a
    `tl.arange` size or loop step (`sizes`) is a block (a tile in a kernel with `tl.dot`), whatever its name."""
    lowered = name.lower()
    if "warps" in lowered:
        return "warps"
    if "stages" in lowered:
        return "stages"
    if name in sizes:
        return "tile" if uses_dot else "block"
    upper = name.upper()
    if "GROUP" in upper:
        return "group"
    if any(word in upper for word in ("BLOCK", "TILE")) and not upper.startswith("NUM_"):
        return "tile" if uses_dot or TILE_NAME.search(upper) else "block"
    return None


def illegal(kind: str, value: int) -> str:
    """Why `value` is no setting of a knob of `kind` at all, whatever the tuner's domain holds ("" when it is
    one): sizes are powers of two (tl.arange needs them), warps a power of two up to 32, a switch False or True,
    everything else positive."""
    if kind == "switch":
        return "" if value in (0, 1) else f"{value} is neither False nor True"
    if value < 1:
        return f"{value} is not positive"
    if kind in ("block", "tile", "warps") and value & (value - 1):
        return f"{value} is not a power of two"
    if kind == "warps" and value > MAX_WARPS:
        return f"{value} warps are more than the {MAX_WARPS} a program may have"
    return ""


def domain_holding(domain: tuple[int, ...], kind: str, value: int) -> tuple[tuple[int, ...], str]:
    """`domain` with the knob's current `value` in it, and "" - or (), and why the value is no setting of the
    kind (the knob is then no knob). A legal value outside the usual domain (an 8-element block, 8 stages) is
    added: the search must be able to stay where the author is, and every domain holds its current value."""
    if value in domain:
        return domain, ""
    reason = illegal(kind, value)
    if reason:
        return (), reason
    return tuple(sorted({*domain, value})), ""
