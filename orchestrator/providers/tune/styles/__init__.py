"""The registry of site styles: every kind of place where the tuner finds a knob, one module each.

| site | module | a knob there |
| --- | --- | --- |
| `constant` | `constant` | a module constant, `BLOCK_SIZE = 1024` |
| `launch` | `launch` | what a launch passes, `kernel[grid](..., num_warps=4)`, or leaves to Triton's default |
| `wrapper` | `wrapper` | the wrapper's assignment a launch argument reads, `num_warps = min(max(BLOCK // 256, 1), 8)` |
| `autotune`, `config`, `autotune_key` | `autotune` | a `@triton.autotune` list, a `triton.Config` entry, the key |
| `heuristic` | `heuristic` | a `@triton.heuristics` lambda |
| `grid` | `launch_grid` | a launch grid (read, never edited), a persistent kernel's program count |
| `loop` | `loop` | a `tl.range(..., num_stages=N)` loop's pipelining |
| `tlx_buffers` | `tlx` | a TLX kernel's buffer count (`tlx.local_alloc(..., NUM_STAGES)`), wherever its value is set |

Each style says where its knobs are, what their code demands, which edits they take and how a report names them
(`base.SiteStyle`); `discovery` asks the registry instead of naming styles itself. docs/tuner.md, "Adding a knob
style", walks through adding one.
"""

from __future__ import annotations

from orchestrator.providers.tune.styles import (
    autotune,
    constant,
    heuristic,
    launch,
    launch_grid,
    loop,
    tlx,
    wrapper,
)
from orchestrator.providers.tune.styles.base import SiteStyle

# In the order reports list their categories (explain.py): module constants, launch arguments, wrapper
# assignments, triton.autotune, triton.heuristics, launch grids.
STYLES: tuple[SiteStyle, ...] = (constant.STYLE, launch.STYLE, loop.STYLE, wrapper.STYLE, autotune.LIST,
                                 autotune.ENTRY, autotune.KEY, heuristic.STYLE, launch_grid.STYLE, tlx.STYLE)
# In the order they search a scan: a place two styles reach is described by the first (a module constant a
# launch passes is recorded with that launch's kernel before the constants' own search finds it); the TLX
# style comes last because it claims places the others found.
FINDERS: tuple[SiteStyle, ...] = (autotune.LIST, heuristic.STYLE, launch.STYLE, constant.STYLE, loop.STYLE,
                                  tlx.STYLE)
BY_SITE: dict[str, SiteStyle] = {style.site: style for style in STYLES}
SITE_WORDS: dict[str, str] = {style.site: style.word for style in STYLES}


def style_of(site: str) -> SiteStyle:
    return BY_SITE[site]


def categories() -> tuple[tuple[str, str], ...]:
    """(category, what the discovery looks for there), in report order: one entry per category."""
    return tuple((style.category, style.looks_for) for style in STYLES if style.looks_for)


__all__ = ["BY_SITE", "FINDERS", "SITE_WORDS", "STYLES", "SiteStyle", "categories", "style_of"]
