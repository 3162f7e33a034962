"""Why a kernel has no knob the tuner can move: what was looked for, per category, what was found there and
why it does not count, and the smallest edits that would expose one. `NoKnobFound` carries it to the run."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from orchestrator.providers.base import ProviderExhausted
from orchestrator.providers.tune.discovery import Discovery, KnobSite, discover
from orchestrator.providers.tune.knobs import set_aside
from orchestrator.providers.tune.styles import categories

# (category, what the discovery looks for there), from the registry of site styles, in report order
LOOKED_FOR: tuple[tuple[str, str], ...] = categories()


@dataclass(frozen=True)
class CategoryReport:
    category: str
    looked_for: str
    found: tuple[str, ...]  # what was there and why it is no knob; empty when the file has nothing of this kind


@dataclass(frozen=True)
class NoKnobExplanation:
    """The structured answer to "why did the tuner find nothing to tune?", for result.json."""

    categories: tuple[CategoryReport, ...]
    suggestions: tuple[str, ...]  # edits that would expose a knob, the most direct first
    parse_error: str = ""
    brief: tuple[str, ...] = ()  # the sites found that cannot be tuned, each with its reason in a few words

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        """One paragraph for a log line or a stopping detail."""
        if self.parse_error:
            return f"the source does not parse ({self.parse_error}), so it has no knob the tuner can read"
        looked = ", ".join(c.category for c in self.categories)
        seen = f"found only {'; '.join(self.brief)}" if self.brief else "found none"
        return f"it looked for {looked}; {seen}; to expose one, {'; or '.join(self.suggestions[:3])}"


class NoKnobFound(ProviderExhausted):
    """The tune provider found no knob in the incumbent; `explanation` says what it looked for and what to do."""

    def __init__(self, explanation: NoKnobExplanation) -> None:
        super().__init__(f"tune found no tunable knob in the incumbent: {explanation.summary()}")
        self.explanation = explanation
        self.explanation_json = {"no_knob_found": explanation.to_json()}


def _found(site: KnobSite) -> str:
    written = " ".join(site.expression.split())
    written = written if len(written) <= 60 else written[:57] + "..."
    label = f"{site.variable} = {written}" if site.variable else f"{site.name}={written}"
    return f"{label} ({site.where}): {site.note or 'not a size, warps or stages'}"


def _reason(site: KnobSite) -> str:
    """Why a site cannot be tuned, in a few words: the constraint that pins it, or the note."""
    pinned = any(c.relation == "pinned" for c in site.constraints) or "smallest power of two" in site.note
    return f"pinned by {site.note.split(':')[0]}" if pinned else site.note


def _suggestions(discovery: Discovery) -> list[str]:
    edits = []
    kernels = {launch.kernel for launch in discovery.launches}
    for scope, name, line in discovery.unlaunched:
        kernel = next((launch.kernel for launch in discovery.launches if launch.scope == scope), "")
        option = name.lower() if name.lower() in ("num_warps", "num_stages") else name
        target = f"the launch of {kernel}" if kernel else "the kernel's launch"
        edits.append(f"pass {name} (assigned at line {line} in {scope}()) to {target} as {option}={name}, or move it "
                     f"to a module constant passed there")
    for launch in discovery.launches:
        if launch.star:
            edits.append(f"pass the launch options of {launch.kernel} at line {launch.line} as keywords "
                         "(num_warps=..., BLOCK_SIZE=...) instead of through *args or **kwargs")
        if not launch.autotuned and "num_warps" not in launch.options and launch.kernel not in discovery.kernels:
            edits.append(f"add num_warps=4 (Triton's default, so nothing changes) to the launch of {launch.kernel} at "
                         f"line {launch.line}")
    for kernel in discovery.kernels:
        if kernel not in kernels:
            edits.append(f"launch {kernel} from this file as {kernel}[grid](..., num_warps=4), or give it "
                         "@triton.autotune(configs=[triton.Config({...}, num_warps=4)], key=[...])")
    if not discovery.kernels and not discovery.launches:
        edits.append("launch the kernel from this file as kernel[grid](..., BLOCK_SIZE=BLOCK_SIZE, num_warps=4) with "
                     "a module-level BLOCK_SIZE = <int> constant")
    return list(dict.fromkeys(edits))


def explain_missing_knobs(source: str) -> NoKnobExplanation:
    """What the discovery looked for in `source`, what it found that is no knob (and why), and what would expose
    one. Meant for a source where `discover(source).tunable` is empty; on another it still reports the rest."""
    discovery = discover(source)
    if discovery.parse_error:
        return NoKnobExplanation((), ("fix the syntax error first",), parse_error=discovery.parse_error)
    found: dict[str, list[str]] = {category: [] for category, _ in LOOKED_FOR}
    for launch in discovery.launches:
        passed = ", ".join(launch.arguments) or "no size, num_warps or num_stages"
        found["launch arguments"].append(f"the launch of {launch.kernel} in {launch.scope or 'the module'} at line "
                                         f"{launch.line} passes {passed}" + (" and *args/**kwargs" if launch.star else ""))
    for site in discovery.sites:
        if not site.edits:
            found[site.category].append(_found(site))
    for scope, name, line in discovery.unlaunched:
        found["wrapper assignments"].append(f"{name} (line {line} in {scope}()) reaches no launch")
    for entry in discovery.ignored:
        category = "triton.heuristics" if "heuristics" in entry else "launch arguments"
        found[category].append(f"{entry} is left alone")
    for knob, reason in set_aside(source):
        if knob.site is not None:
            found[knob.site.category].append(reason)
    categories = tuple(CategoryReport(category, looked_for, tuple(found[category])) for category, looked_for in LOOKED_FOR)
    brief = tuple(f"{site.variable or site.name} in {site.scope or 'the module'}() at line {site.line} ({_reason(site)})"
                  for site in discovery.sites if not site.edits and site.kind not in ("grid", "key"))
    return NoKnobExplanation(categories, tuple(_suggestions(discovery)), brief=brief)
