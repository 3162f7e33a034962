"""`--provider tune`, the offline default generator: one launch-configuration change at a time, steered by
measurements.

It reads the kernel's tunable literals from the AST (block sizes, tile sizes, `num_warps`, `num_stages`,
grouping constants, `triton.Config` entries) and, with libcst, the places real Triton code keeps the rest:
expressions at the launch, the wrapper's assignments feeding it, `triton.heuristics`, autotune lists and a
persistent kernel's program count (`discovery`), each with the constraints its code states. It picks the change
the measured bottleneck and the run's history favour and edits only that value (a literal, or the expression
scaled), so a patch is a one-line diff; when there is nothing to move, `NoKnobFound` carries a structured
explanation (`explain`). It never repeats a
configuration, never pushes further a knob direction that regressed or broke the kernel, keeps going in
directions that measured faster, and says `ProviderExhausted` when nothing untried is left.

One change is coupled: when a bigger block or tile regressed on its own, the next step may grow it
together with `num_warps` (x2 each), keeping the work per warp constant. On the H200 a 64 -> 128 matmul
tile with two warps ran at 0.48x and a single-knob climb stopped there; the pair is what the grid's best
configurations do (docs/tuner.md).

Modules: `knobs` (the literals, and every knob the policy may move), `domains` (kinds and legal values),
`constraints` (what the kernel and wrapper code demand of a knob), `sites` and `discovery` (knob sites found
with libcst), `forms` (the scaled and per-shape forms the edits write), `edits` (lossless libcst edits),
`explain` (why a kernel has no knob), `grid` (which knobs set the launch grid, and a move's program count in
words), `policy` (what history taught, which move is next), `metadata` (the proposal's hypothesis, evidence
and risk text), `provider` (`TuneProvider`).
"""

from __future__ import annotations

from orchestrator.providers.tune.constraints import Constraint
from orchestrator.providers.tune.discovery import Discovery, KnobSite, discover
from orchestrator.providers.tune.edits import (
           EditError,
           set_configs,
           set_literal,
           set_scaled,
           set_table,
           violations,
)
from orchestrator.providers.tune.explain import NoKnobExplanation, NoKnobFound, explain_missing_knobs
from orchestrator.providers.tune.forms import AutotuneConfig
from orchestrator.providers.tune.knobs import (
           DOMAINS,
           Knob,
           apply_knob,
           apply_knobs,
           find_knobs,
           tunable_knobs,
)
from orchestrator.providers.tune.provider import TuneProvider

__all__ = ["DOMAINS", "AutotuneConfig", "Constraint", "Discovery", "EditError", "Knob", "KnobSite",
           "NoKnobExplanation", "NoKnobFound", "TuneProvider", "apply_knob", "apply_knobs", "discover",
           "explain_missing_knobs", "find_knobs", "set_configs", "set_literal", "set_scaled", "set_table",
           "tunable_knobs", "violations"]
