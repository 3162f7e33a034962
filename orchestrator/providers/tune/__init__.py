"""`--provider tune`, the offline default generator: launch-configuration changes steered by measurements.

How it reads a kernel: one `Scan` of the source (libcst, with the ast the kernel analyses need) in which each
registered site style (`styles/`) finds the places real Triton code sets a launch parameter: module constants,
launch arguments (and options left to Triton's default), the wrapper's assignments feeding them, `triton.autotune`
lists, entries and keys, `triton.heuristics`, launch grids and persistent program counts, loops' `num_stages`,
and in TLX kernels the buffer counts, with what their code demands of tiles and MMA groups (`styles/tlx.py`).
`discovery` turns them into `KnobSite`s, the one model of a knob, each with the constraints its code states and
the edits it takes, and the couplings pairs of sites keep together; `knobs` gives the search the tunable ones
(`Knob`: a key, a value, legal values holding the current one). Every edit rewrites the nodes the scan found, so a patch is a small diff and every other byte stays.

How it proposes: when the run offers screening, optuna's TPE proposes families over every knob at once
(`search`, starting from `priors`), one worker screens a family, and the fastest few go to the gate, a per-shape
table first where the cases want different values (`tables`); then the single-knob policy (`policy`) moves one
knob (or a tile with its warps) along what the history says, never repeating a configuration or pushing a
direction that regressed. When there is nothing to move, `NoKnobFound` says what it looked for (`explain`); when
everything was tried, `ProviderExhausted`.

Modules: `scan` (the one read), `styles/` (the registry of site styles: where knobs live, their constraints,
edits and words), `discovery` (`KnobSite`, `discover`), `constraints` (what kernel and wrapper code demand),
`domains` (kinds and legal values), `forms` (scaled and per-shape forms), `edits` (lossless rewrites),
`knobs` (`Knob`, `tunable_knobs`, `apply_knobs`), `grid` (which knobs set the launch grid), `priors`, `search`,
`tables`, `policy`, `metadata` (a proposal's hypothesis, evidence and risk), `explain`, `one_config` (a kernel
whose own autotune choice the run pins, written as its choices so that its knobs change what runs), `provider`
(`TuneProvider`). docs/tuner.md, "Adding a knob style", says how to add a style.
"""

from __future__ import annotations

from orchestrator.providers.tune.constraints import Constraint
from orchestrator.providers.tune.discovery import Discovery, KnobSite, discover
from orchestrator.providers.tune.domains import DOMAINS
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
from orchestrator.providers.tune.knobs import Knob, apply_knob, apply_knobs, find_knobs, tunable_knobs
from orchestrator.providers.tune.provider import TuneProvider

__all__ = ["DOMAINS", "AutotuneConfig", "Constraint", "Discovery", "EditError", "Knob", "KnobSite",
           "NoKnobExplanation", "NoKnobFound", "TuneProvider", "apply_knob", "apply_knobs", "discover",
           "explain_missing_knobs", "find_knobs", "set_configs", "set_literal", "set_scaled", "set_table",
           "tunable_knobs", "violations"]
