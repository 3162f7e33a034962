"""What the joint search knows before it measures: configurations that are usually good for the kernel's
shape of knobs, and configurations that are almost never worth a screening slot.

Why: a screening worker ranks about eight configurations a minute on the H200 (each compiled for three
cases), and TPE's first samples are uniform over domains of millions of matmul configurations, most of them
pathological (a 256x128 tile on one warp, 32 warps on a 32x32 tile) and slow even to compile. On the H200
the first 600 s run spent its 24 screening slots there and found 1.06x where the grid's best is 7.1x
(docs/results/2026-12-01-tuner-priors-h200.md). Both pieces below are heuristics about the hardware, never
about a particular kernel: they decide what is screened first, and the screening and the promotion gate decide
everything else.

- `prior_configs`: the first family. For a kernel with M and N tiles (a `tl.dot` kernel, or tiles named
  `*_M`/`*_N`/`*_K`), the tile, warp, stage and group combinations of Triton's own matmul autotune lists
  (the tutorial's CUDA configurations, with the larger Hopper tiles first); for a kernel with one block knob,
  8 and 16 elements per thread (a 16-byte vector of fp16 or two of fp32) on 4 and 8 warps.
- `Roles.plausible`: each thread of a program holds between `MIN_ELEMENTS` and `MAX_ELEMENTS` of the M x N
  output tile (above, the fp32 accumulator spills; below, threads sit idle), or, for a one-block kernel, between
  `MIN_BLOCK_ELEMENTS` and `MAX_BLOCK_ELEMENTS` of the block.

Both read literal knobs only (a knob that scales an expression has no value to reason about) and apply only
when the roles are unambiguous: one warp knob, and one M and one N tile or a single block.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from orchestrator.providers.tune.knobs import Knob

MIN_ELEMENTS, MAX_ELEMENTS = 8, 128  # of an M x N output tile per thread
MIN_BLOCK_ELEMENTS, MAX_BLOCK_ELEMENTS = 1, 128  # of a one-dimensional block per thread
THREADS_PER_WARP = 32

# (M, N, K, warps, stages, group): Triton's matmul tutorial configurations for CUDA (fp16), led by the large
# tiles that Hopper's tensor cores keep busy; the order is the screening order.
TILE_CONFIGS: tuple[tuple[int, int, int, int, int, int], ...] = (
    (128, 256, 64, 8, 3, 8),
    (128, 256, 64, 8, 4, 8),
    (256, 128, 64, 8, 3, 8),
    (128, 128, 64, 4, 4, 8),
    (128, 128, 64, 8, 3, 8),
    (64, 256, 32, 4, 4, 8),
    (128, 128, 32, 4, 4, 8),
    (128, 64, 32, 4, 4, 8),
    (64, 128, 32, 4, 4, 8),
    (64, 64, 32, 4, 4, 8),
)
BLOCK_CONFIGS: tuple[tuple[int, int], ...] = tuple(  # (elements per thread, warps)
    (elements, warps) for warps in (4, 8) for elements in (16, 8))

ROLE = re.compile(r"_([MNK])$")

Config = tuple[tuple[str, int], ...]


class Roles:
    """The knobs the heuristics reason about, by role; `tiled` and `blocked` say which shape is unambiguous
    (neither: the heuristics do not apply)."""

    def __init__(self, knobs: Iterable[Knob]) -> None:
        literal = [k for k in knobs if not k.expression]
        tiles = [k for k in literal if k.kind == "tile"]
        self.tile = {role: [k.key for k in tiles if _role(k.name) == role] for role in "MNK"}
        self.blocks = [k.key for k in literal if k.kind == "block"]
        self.warps = [k.key for k in literal if k.kind == "warps"]
        self.stages = [k.key for k in literal if k.kind == "stages"]
        self.groups = [k.key for k in literal if k.kind == "group"]
        self.domains = {k.key: tuple(k.domain) for k in literal}
        one_warp_knob = len(self.warps) == 1
        self.tiled = one_warp_knob and len(self.tile["M"]) == 1 and len(self.tile["N"]) == 1
        self.blocked = one_warp_knob and not tiles and len(self.blocks) == 1

    def elements_per_thread(self, values: dict[str, int]) -> float | None:
        if self.tiled:
            size = values[self.tile["M"][0]] * values[self.tile["N"][0]]
        elif self.blocked:
            size = values[self.blocks[0]]
        else:
            return None
        return size / (values[self.warps[0]] * THREADS_PER_WARP)

    def plausible(self, config: Config) -> bool:
        """False when the configuration puts too much or too little of the tile (or block) on each thread."""
        elements = self.elements_per_thread(dict(config))
        if elements is None:
            return True
        low, high = (MIN_ELEMENTS, MAX_ELEMENTS) if self.tiled else (MIN_BLOCK_ELEMENTS, MAX_BLOCK_ELEMENTS)
        return low <= elements <= high


def prior_configs(knobs: list[Knob]) -> list[Config]:
    """The configurations to screen first, each the incumbent's values with the prior's roles set, a value
    outside a knob's (constraint-narrowed) domain moved to the nearest one inside it; implausible results,
    repeats and the incumbent itself are left out."""
    roles = Roles(knobs)
    incumbent = {k.key: int(k.value) for k in knobs}
    wanted: list[dict[str, int]] = []
    if roles.tiled:
        for m, n, k, warps, stages, group in TILE_CONFIGS:
            wanted.append(_set(roles.tile["M"], m) | _set(roles.tile["N"], n) | _set(roles.tile["K"], k)
                          | _set(roles.warps, warps) | _set(roles.stages, stages) | _set(roles.groups, group))
    elif roles.blocked:
        for elements, warps in BLOCK_CONFIGS:
            wanted.append(_set(roles.blocks, elements * warps * THREADS_PER_WARP) | _set(roles.warps, warps))
    configs: list[Config] = []
    for changes in wanted:
        inside = {key: _nearest(value, roles.domains[key]) for key, value in changes.items()}
        config = tuple(sorted((incumbent | inside).items()))
        if config != tuple(sorted(incumbent.items())) and config not in configs and roles.plausible(config):
            configs.append(config)
    return configs


def _nearest(value: int, domain: tuple[int, ...]) -> int:
    """The domain's value nearest to `value` by ratio (sizes, warps and groups are powers of two)."""
    return min(domain, key=lambda allowed: (abs(math.log2(allowed / value)), -allowed)) if domain else value


def _role(name: str) -> str | None:
    match = ROLE.search(name.upper())
    return match.group(1) if match else None


def _set(keys: list[str], value: int) -> dict[str, int]:
    return {key: value for key in keys[:1]}
