"""`--provider tune`, the offline default generator: one launch-configuration change at a time, steered by
measurements.

It reads the kernel's tunable literals from the AST (block sizes, tile sizes, `num_warps`, `num_stages`,
grouping constants, `triton.Config` entries), picks the change the measured bottleneck and the run's
history favour, and edits only that literal's span, so a patch is a one-line diff. It never repeats a
configuration, never pushes further a knob direction that regressed or broke the kernel, keeps going in
directions that measured faster, and says `ProviderExhausted` when nothing untried is left.

One change is coupled: when a bigger block or tile regressed on its own, the next step may grow it
together with `num_warps` (x2 each), keeping the work per warp constant. On the H200 a 64 -> 128 matmul
tile with two warps ran at 0.48x and a single-knob climb stopped there; the pair is what the grid's best
configurations do (docs/tuner.md).

Modules: `knobs` (finding and editing the literals), `grid` (which knobs set the launch grid, and a move's
program count in words), `policy` (what history taught, which move is next), `metadata` (the proposal's
hypothesis, evidence and risk text), `provider` (`TuneProvider`).
"""

from __future__ import annotations

from orchestrator.providers.tune.knobs import DOMAINS, Knob, apply_knob, apply_knobs, find_knobs
from orchestrator.providers.tune.provider import TuneProvider

__all__ = ["DOMAINS", "Knob", "TuneProvider", "apply_knob", "apply_knobs", "find_knobs"]
