"""The metadata text of a tuner proposal: why a knob move should help, what it should do, what it risks."""

from __future__ import annotations

from orchestrator.providers.tune.knobs import DOWN, UP, Knob
from orchestrator.text import one_line

_RATIONALE: dict[tuple[str, int], tuple[str, str]] = {
    # (kind, direction): (why, expected effect)
    ("block", UP): ("halves the number of programs, cutting per-program overhead",
                    "fewer, larger programs: lower launch and scheduling cost, longer memory bursts"),
    ("block", DOWN): ("doubles the number of programs for more parallelism and fewer registers per program",
                      "more programs in flight and lower register pressure per program"),
    ("tile", UP): ("raises data reuse per loaded tile",
                   "fewer global loads per output element and higher arithmetic intensity"),
    ("tile", DOWN): ("lowers registers and shared memory per program",
                     "more resident programs (occupancy) and fewer spills"),
    ("warps", UP): ("spreads each program over more warps to hide latency",
                    "more warps in flight per program, better latency hiding"),
    ("warps", DOWN): ("gives each warp more work and lowers synchronization per program",
                      "less intra-program synchronization and scheduling overhead"),
    ("stages", UP): ("deepens software pipelining to overlap loads with compute",
                     "memory latency hidden behind compute"),
    ("stages", DOWN): ("frees shared memory and registers held by pipeline buffers",
                       "higher occupancy and fewer spills"),
    ("group", UP): ("groups more tiles per program column for L2 reuse",
                    "higher L2 hit rate on shared operand tiles"),
    ("group", DOWN): ("shrinks tile groups so more columns run concurrently",
                      "better load balance across SMs"),
}

_RISK: dict[tuple[str, int], str] = {
    ("block", UP): "more registers per program may lower occupancy or spill; small cases get fewer programs than SMs",
    ("block", DOWN): "more programs raise launch and scheduling overhead",
    ("tile", UP): "more registers and shared memory may spill or not fit, lowering occupancy",
    ("tile", DOWN): "less data reuse raises global memory traffic",
    ("warps", UP): "more warps may raise register pressure and synchronization cost",
    ("warps", DOWN): "fewer warps may expose memory latency",
    ("stages", UP): "more shared memory per program may lower occupancy or exceed the limit",
    ("stages", DOWN): "shallower pipelining may expose memory latency",
    ("group", UP): "larger groups can unbalance work across SMs",
    ("group", DOWN): "smaller groups lower L2 reuse",
}


def proposal_metadata(
    knob: Knob, direction: int, value: int, bottleneck: str, bottleneck_evidence: str, notes: list[str],
    paired: tuple[Knob, int] | None = None,
) -> dict[str, str]:
    """Hypothesis, evidence, change, expected effect and risk of one move, each one line of <= 240 characters."""
    if paired is not None:
        return _paired_metadata(knob, value, paired, bottleneck, bottleneck_evidence, notes)
    why, effect = _RATIONALE[(knob.kind, direction)]
    verb = "Raising" if direction == UP else "Lowering"
    where = f"{knob.origin} at line {knob.line}"
    history = f"; earlier: {', '.join(notes[-3:])}" if notes else ""
    bound = f" (the incumbent is {bottleneck}-bound)" if bottleneck != "unknown" else ""
    return {
        "hypothesis": one_line(f"{verb} {knob.name} from {knob.value} to {value} {why}{bound}", 240),
        "evidence": one_line(
            f"{bottleneck}: {bottleneck_evidence}; {knob.name}={knob.value} at line {knob.line}{history}", 240
        ),
        "change": one_line(f"{knob.name} {knob.value} -> {value} ({where}); nothing else changes", 240),
        "expected_effect": one_line(f"{effect}; lower median latency on the dominant case", 240),
        "risk": one_line(_RISK[(knob.kind, direction)], 240),
    }


def _paired_metadata(knob: Knob, value: int, paired: tuple[Knob, int], bottleneck: str, bottleneck_evidence: str,
                     notes: list[str]) -> dict[str, str]:
    warps, more_warps = paired
    history = f"; earlier: {', '.join(notes[-3:])}" if notes else ""
    return {
        "hypothesis": one_line(
            f"Raising {knob.name} from {knob.value} to {value} together with {warps.name} from {warps.value} to "
            f"{more_warps} keeps the work per warp constant: the larger {knob.kind} alone lacked the warps to "
            "compute it", 240),
        "evidence": one_line(
            f"{bottleneck}: {bottleneck_evidence}; {knob.name}={knob.value}, {warps.name}={warps.value}{history}", 240),
        "change": one_line(f"{knob.name} {knob.value} -> {value} and {warps.name} {warps.value} -> {more_warps} "
                           f"(lines {knob.line} and {warps.line}); nothing else changes", 240),
        "expected_effect": one_line(
            f"{_RATIONALE[(knob.kind, UP)][1]} without fewer warps per element; lower median latency on the "
            "dominant case", 240),
        "risk": one_line(f"{_RISK[(knob.kind, UP)]}; more warps also raise per-program synchronization", 240),
    }
