"""The metadata text of a tuner proposal: why a knob move should help, what it should do, what it risks."""

from __future__ import annotations

from orchestrator.providers.tune.grid import programs_phrase, scaling_words
from orchestrator.providers.tune.knobs import DOWN, UP, Knob
from orchestrator.providers.tune.search import Screened
from orchestrator.text import one_line

# (kind, direction): (why, expected effect). Block and tile sizes here are ones the launch grid divides by.
_RATIONALE: dict[tuple[str, int], tuple[str, str]] = {
    ("block", UP): ("cuts per-program overhead",
                    "fewer, larger programs: lower launch and scheduling cost, longer memory bursts"),
    ("block", DOWN): ("adds parallelism with fewer registers per program",
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
    ("buffers", UP): ("gives the hand-written pipeline one more shared-memory buffer to load ahead into",
                      "loads issued further ahead of the MMAs that use them"),
    ("buffers", DOWN): ("frees the shared memory of one pipeline buffer",
                        "room for larger tiles or more resident programs"),
    ("switch", UP): ("takes the code path the author wrote under `if` this switch instead of its `else`",
                     "the alternative the kernel already holds (a subtiled epilogue: smaller stores, fewer live "
                     "registers at the end)"),
    ("switch", DOWN): ("takes the kernel's `else` path instead of the one this switch guards",
                       "the kernel's other written path (a whole-tile epilogue: one larger store)"),
    ("programs", UP): ("launches more persistent programs, so more of them are resident on the SMs",
                       "more rows or tiles in flight at once, better latency hiding"),
    ("programs", DOWN): ("launches fewer persistent programs, each looping over more of the work",
                         "less scheduling and per-program setup, more registers and shared memory per program"),
}
# Block and tile sizes the grid does not divide by (or a file without a launch): the programs stay, each one
# walks its data in other steps, so nothing here speaks of more or fewer programs.
_RATIONALE_OFF_GRID: dict[tuple[str, int], tuple[str, str]] = {
    ("block", UP): ("gives each program wider blocks to work through",
                    "wider loads per step, and fewer loop steps where a program loops over its data"),
    ("block", DOWN): ("gives each program narrower blocks with fewer registers",
                      "lower register pressure per program, more loop steps where a program loops over its data"),
    ("tile", UP): ("gives each program larger tiles per loop step", "fewer loop steps and larger loads per step"),
    ("tile", DOWN): ("lowers registers and shared memory per program",
                     "more resident programs (occupancy) and fewer spills"),
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
    ("buffers", UP): "each buffer holds a tile of every operand: shared memory may not fit (compile ahead checks)",
    ("buffers", DOWN): "a shallower pipeline may expose memory latency",
    ("switch", UP): "the other path may use more registers or shared memory, or issue more, smaller memory operations",
    ("switch", DOWN): "the other path may use more registers or shared memory, or issue fewer, larger memory operations",
    ("programs", UP): "programs beyond what the SMs hold wait for a slot and add setup",
    ("programs", DOWN): "too few programs leave SMs idle",
}
_RISK_OFF_GRID: dict[tuple[str, int], str] = {
    ("block", UP): "more registers per program may lower occupancy or spill; lanes past the data's end are masked work",
    ("block", DOWN): "more loop steps per program and shorter memory bursts",
}


def _sets_grid(knob: Knob) -> bool:
    return bool(knob.grid_uses) and knob.kind in ("block", "tile")


def _rationale(knob: Knob, direction: int) -> tuple[str, str]:
    off_grid = _RATIONALE_OFF_GRID.get((knob.kind, direction))
    return _RATIONALE[(knob.kind, direction)] if _sets_grid(knob) or off_grid is None else off_grid


def _risk(knob: Knob, direction: int) -> str:
    off_grid = _RISK_OFF_GRID.get((knob.kind, direction))
    return _RISK[(knob.kind, direction)] if _sets_grid(knob) or off_grid is None else off_grid


def _programs(knob: Knob, value: int) -> str:
    """What the move does to the number of programs, when the file says."""
    if knob.kind == "programs":
        return scaling_words(knob.magnitude(value) / knob.magnitude(knob.value), "the number of programs")
    largest = f"the larger {knob.name}" if knob.expression else ""
    return programs_phrase(knob.name, knob.kind, knob.magnitude(knob.value), knob.magnitude(value), knob.grid_uses,
                           largest)


def _moves(knob: Knob, value: int) -> str:
    """`NAME from old to new`, then what that does to the number of programs when the file says."""
    programs = _programs(knob, value)
    moved = (f"{knob.name} ({knob.written()}) from {knob.short(knob.value)} to {knob.short(value)}" if knob.expression
             else f"{knob.name} from {knob.show(knob.value)} to {knob.show(value)}")
    return moved + (f" {programs} and" if programs else "")


def _change(knob: Knob, value: int) -> str:
    """`old -> new` as code: the literals, or the expression as it is and as the edit writes it."""
    if not knob.expression:
        return f"{knob.show(knob.value)} -> {knob.show(value)}"
    return f"{knob.code(knob.value)} -> {knob.code(value)}"


def _history(head: str, notes: list[str], limit: int = 240) -> str:
    """Up to the last three notes that fit after `head`, oldest first: the newest are kept whole, since
    truncating the line would cut the step the proposal reacts to."""
    kept: list[str] = []
    for note in reversed(notes[-3:]):
        if len(head) + len(f"; earlier: {', '.join([note, *kept])}") > limit:
            break
        kept.insert(0, note)
    return f"; earlier: {', '.join(kept)}" if kept else ""


def proposal_metadata(
    knob: Knob, direction: int, value: int, bottleneck: str, bottleneck_evidence: str, notes: list[str],
    paired: tuple[Knob, int] | None = None,
) -> dict[str, str]:
    """Hypothesis, evidence, change, expected effect and risk of one move, each one line of <= 240 characters."""
    if paired is not None:
        return _paired_metadata(knob, value, paired, bottleneck, bottleneck_evidence, notes)
    why, effect = _rationale(knob, direction)
    verb = ("Turning on" if direction == UP else "Turning off") if knob.kind == "switch" else (
        "Raising" if direction == UP else "Lowering")
    head = f"{bottleneck}: {bottleneck_evidence}; {knob.name}={knob.show(knob.value)} at line {knob.line}"
    bound = f" (the incumbent is {bottleneck}-bound)" if bottleneck != "unknown" else ""
    return {
        "hypothesis": one_line(f"{verb} {_moves(knob, value)} {why}{bound}", 240),
        "evidence": one_line(head + _history(head, notes), 240),
        "change": one_line(f"{knob.name} {_change(knob, value)} ({knob.where}); nothing else changes", 240),
        "expected_effect": one_line(f"{effect}; lower median latency on the dominant case", 240),
        "risk": one_line(_risk(knob, direction), 240),
    }


def _paired_metadata(knob: Knob, value: int, paired: tuple[Knob, int], bottleneck: str, bottleneck_evidence: str,
                     notes: list[str]) -> dict[str, str]:
    warps, more_warps = paired
    programs = _programs(knob, value)
    programs = f" {programs} and" if programs else ""
    old, new, old_warps, new_warps = knob.show(knob.value), knob.show(value), warps.show(warps.value), warps.show(more_warps)
    head = f"{bottleneck}: {bottleneck_evidence}; {knob.name}={old}, {warps.name}={old_warps}"
    return {
        "hypothesis": one_line(
            f"Raising {knob.name} from {old} to {new} together with {warps.name} from {old_warps} to "
            f"{new_warps}{programs} keeps the work per warp constant: the larger {knob.kind} alone lacked the "
            "warps to compute it", 240),
        "evidence": one_line(head + _history(head, notes), 240),
        "change": one_line(f"{knob.name} {old} -> {new} and {warps.name} {old_warps} -> {new_warps} "
                           f"(lines {knob.line} and {warps.line}); nothing else changes", 240),
        "expected_effect": one_line(
            f"{_rationale(knob, UP)[1]} without fewer warps per element; lower median latency on the "
            "dominant case", 240),
        "risk": one_line(f"{_risk(knob, UP)}; more warps also raise per-program synchronization", 240),
    }


def screened_metadata(screened: Screened, bottleneck: str) -> dict[str, str]:
    """Metadata of a configuration the joint search screened faster than the incumbent in one worker."""
    changes = screened.screen_label
    cases = sorted(screened.control_medians_us)
    evidence = "; ".join(f"{case}: median {screened.medians_us[case]:.1f} us vs incumbent "
                         f"{screened.control_medians_us[case]:.1f} us" for case in cases[:4])
    speedup = 1 / screened.relative
    if screened.single_relative is not None:
        hypothesis = (f"per-shape table ({bottleneck} bottleneck): of {screened.family_size} configurations "
                      f"screened side by side in one worker, each group of cases takes its fastest; composed "
                      f"{speedup:.2f}x as fast as the incumbent, against {1 / screened.single_relative:.2f}x for "
                      "the best single configuration")
    elif screened.near_miss:
        hypothesis = (f"near the gate's bar ({bottleneck} bottleneck): screened beside the incumbent at "
                      f"{speedup:.4f}x, short of the bar by less than screening's error; brief screening cannot "
                      "tell it from a winner, the gate's paired runs can")
    else:
        hypothesis = (f"joint search over the knobs ({bottleneck} bottleneck): of {screened.family_size} "
                      f"configurations screened side by side in one worker ({screened.ok_count} built and "
                      f"verified), this one ran {speedup:.2f}x as fast as the incumbent")
    return {
        "hypothesis": one_line(hypothesis, 300),
        "evidence": one_line(f"screening: {evidence}", 400),
        "change": one_line(f"set {changes}", 300),
        "expected_effect": one_line(f"about {speedup:.2f}x on the screened cases (geometric mean)", 200),
        "risk": ("screened short of the gate's bar: likely no gain; the gate measures it in full (three workers)"
                 if screened.near_miss else
                 "screening timed each case briefly (0.3 s); the A/B/A gate and revalidation decide"),
    }
