"""Per-shape tables composed from one screened family: each group of cases (by a dimension the wrapper
computes, such as its `N`) takes the configuration that screened fastest on it, when no single
configuration serves every case as well.

Why: on the H200 the tutorial layer norm's best single configuration (`num_warps` a quarter of the
wrapper's) screened 5 % faster over its cases but 0.9 % slower on the 4096-column one, where NCU then
measured +4 % and vetoed it; 8 warps suit the wide rows and fewer the narrow ones. A table keyed on `N`
keeps each case's best, and every shape not in the table keeps the author's expression.

What a table is built from: the family's medians per case, the dimension's value per case and the value a
computed knob came to per case, both read from the wrapper's integer locals as screening verified each
variant (sandbox_worker/observe.py). Only knobs whose site takes a table (`KnobSite.edits`), in the scope
where the dimension was observed, get one; the other knobs take one value for every case. The composed
source is a proposal like any other: the promotion gate measures it from scratch.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.decision.statistics import weighted_geomean
from orchestrator.providers.tune.discovery import KnobSite, discover
from orchestrator.providers.tune.edits import EditError, set_table
from orchestrator.providers.tune.forms import scaled_value
from orchestrator.providers.tune.knobs import Knob, apply_knobs

Config = tuple[tuple[str, int], ...]

MIN_TABLE_GAIN = 0.01  # over the best single configuration (geometric mean over cases)
SPARED_SLOWDOWN = 0.005  # a case the best single configuration slows by more, and the table does not
GROUPING_TOLERANCE = 0.01  # a dimension with fewer groups wins unless one with more is this much faster


@dataclass(frozen=True)
class Run:
    """One screened variant: its configuration, its median per case, and its observed locals per case."""

    config: Config
    medians_us: dict[str, float]
    observed: dict[str, dict[str, int]]


@dataclass(frozen=True)
class TablePlan:
    source: str
    label: str
    config: Config  # the knobs every case shares, plus a marker naming the table
    medians_us: dict[str, float]  # per case, from its group's fastest configuration
    relative: float  # weighted geometric mean of medians / the control's
    single_relative: float | None = None  # the same for the best single configuration, once compared


def compose_table(source: str, knobs: list[Knob], control: Run, runs: list[Run], weights: dict[str, float], *,
                  min_gain: float) -> TablePlan | None:
    """The best table over the family's `runs` (the control among them or not) that beats the control by
    `min_gain` and either beats the best single configuration by MIN_TABLE_GAIN or spares a case it slows;
    None when there is none."""
    cases = sorted(control.medians_us)
    complete = [run for run in [control, *runs] if all(case in run.medians_us for case in cases)]
    if len(cases) < 2 or len(complete) < 2:
        return None
    sites = {site.key: site for site in discover(source).sites}
    ratios = {id(run): {case: run.medians_us[case] / control.medians_us[case] for case in cases} for run in complete}
    single = min(complete, key=lambda run: _mean(ratios[id(run)], weights))
    single_ratios = ratios[id(single)]
    options = []
    for scope, dimension in _dimensions(knobs, sites):
        grouped = _groups(control, cases, f"{scope}.{dimension}")
        # a knob whose value the control's run did not show (a launch argument computed in place) takes one
        # value for every case, like an untabled one
        tabled = [k for k in knobs if (site := _table_site(k, sites)) is not None
                  and site.scope == scope and dimension in site.dimensions
                  and all(_setting(k, site, control, (case,), scope) is not None for case in cases)]
        if grouped is None or len(grouped) < 2 or not tabled:
            continue
        composed = _compose(source, knobs, tabled, sites, control, complete, ratios, grouped, scope, dimension,
                            weights)
        if composed is not None:
            options.append((composed, len(grouped)))
    if not options:
        return None
    fastest = min(plan.relative for plan, _ in options)
    # as fast within the tolerance: the fewest groups, then the dimension the knob's expression reads (the
    # order of `_dimensions`): a table on the rows that happen to differ fits the cases, not the shapes
    plan = min((option for option in options if option[0].relative <= fastest * (1 + GROUPING_TOLERANCE)),
               key=lambda option: option[1])[0]
    plan_ratios = {case: plan.medians_us[case] / control.medians_us[case] for case in cases}
    single_relative = _mean(single_ratios, weights)
    beats_single = plan.relative < single_relative * (1 - MIN_TABLE_GAIN)
    spares_a_case = (max(single_ratios.values()) > 1 + SPARED_SLOWDOWN
                     and max(plan_ratios.values()) <= 1 + SPARED_SLOWDOWN)
    if plan.relative > 1 - min_gain or not (beats_single or spares_a_case):
        return None
    return TablePlan(source=plan.source, label=plan.label, config=plan.config, medians_us=plan.medians_us,
                     relative=plan.relative, single_relative=single_relative)


def takes_tables(source: str, knobs: list[Knob]) -> bool:
    """Whether a knob sits where a per-shape table may go: only then does screening observe the locals."""
    sites = {site.key: site for site in discover(source).sites}
    return bool(_dimensions(knobs, sites))


def _mean(ratios: dict[str, float], weights: dict[str, float]) -> float:
    return weighted_geomean(ratios, {case: weights.get(case, 1.0) for case in ratios})


def _table_site(knob: Knob, sites: dict[str, KnobSite]) -> KnobSite | None:
    """Where a table for `knob` goes: its own site when that takes one, or, for a module constant, the launch
    argument in the wrapper that passes it (`KnobSite.table_site`); None when there is no such place."""
    own = sites.get(knob.site_key)
    if own is not None and "table" in own.edits:
        return own
    place = sites.get(knob.site.table_site) if knob.site is not None and knob.site.table_site else None
    return place if place is not None and "table" in place.edits else None


def _dimensions(knobs: list[Knob], sites: dict[str, KnobSite]) -> list[tuple[str, str]]:
    """(scope, dimension) pairs a table could be keyed on: plain names the table sites can see, in their
    order of relevance."""
    pairs: list[tuple[str, str]] = []
    for knob in knobs:
        site = _table_site(knob, sites)
        if site is None:
            continue
        pairs += [(site.scope, d) for d in site.dimensions if d.isidentifier() and (site.scope, d) not in pairs]
    return pairs


def _groups(control: Run, cases: list[str], local: str) -> dict[int, tuple[str, ...]] | None:
    """The cases by the value `local` took in them under the control; None when a case did not observe it."""
    grouped: dict[int, list[str]] = {}
    for case in cases:
        value = control.observed.get(case, {}).get(local)
        if value is None:
            return None
        grouped.setdefault(value, []).append(case)
    return {value: tuple(members) for value, members in grouped.items()}


def _setting(knob: Knob, site: KnobSite, run: Run, members: tuple[str, ...], scope: str) -> int | None:
    """The value `knob` takes in `run` on the cases `members` (the same on every member); None when it is not
    known. A literal knob: its configured value. A computed one: as observed where the wrapper assigns it
    (the edit is in that assignment, so the local holds the scaled value); at a launch argument that names a
    local (`num_warps=num_warps`), that local scaled by the run's step, as the edited argument computes it."""
    if not knob.expression:
        return dict(run.config)[knob.key]
    if site.site == "wrapper":
        local, step = site.variable or site.name, 0  # `num_programs = ...` is the site `programs`
    elif site.expression.isidentifier():
        local, step = site.expression, dict(run.config)[knob.key]
    else:
        return None
    seen = {run.observed.get(case, {}).get(f"{scope}.{local}") for case in members}
    if len(seen) != 1 or None in seen:
        return None
    return scaled_value(seen.pop(), knob.kind, step)


def _compose(source: str, knobs: list[Knob], tabled: list[Knob], sites: dict[str, KnobSite], control: Run,
             runs: list[Run], ratios: dict[int, dict[str, float]], grouped: dict[int, tuple[str, ...]], scope: str,
             dimension: str, weights: dict[str, float]) -> TablePlan | None:
    """The fastest composition keyed on `dimension`: for each assignment of the untabled knobs that some run
    has, each group's fastest run with it; None when no composition differs between groups or edits."""
    tabled_keys = {k.key for k in tabled}

    def shared(run: Run) -> Config:
        return tuple(item for item in run.config if item[0] not in tabled_keys)

    best: TablePlan | None = None
    for assignment in dict.fromkeys(shared(run) for run in runs):
        choice: dict[int, Run] = {}
        for value, members in grouped.items():
            eligible = [run for run in runs if shared(run) == assignment
                        and all(_setting(k, _table_site(k, sites), run, members, scope) is not None
                                for k in tabled)]
            if not eligible:
                break
            choice[value] = min(eligible, key=lambda run, m=members: _mean({c: ratios[id(run)][c] for c in m},
                                                                               weights))
        if len(choice) < len(grouped) or len({id(run) for run in choice.values()}) < 2:
            continue
        plan = _plan(source, knobs, tabled, sites, control, choice, grouped, scope, dimension, assignment, weights)
        if plan is not None and (best is None or plan.relative < best.relative):
            best = plan
    return best


def _plan(source: str, knobs: list[Knob], tabled: list[Knob], sites: dict[str, KnobSite], control: Run,
          choice: dict[int, Run], grouped: dict[int, tuple[str, ...]], scope: str, dimension: str,
          assignment: Config, weights: dict[str, float]) -> TablePlan | None:
    """The source and label of one composition: the untabled knobs set to `assignment`, each tabled knob
    either one value (the groups agree) or a table with an entry for every group (its value where the
    group's run had it: computed knobs as observed, so the entry is what that run launched with)."""
    by_key = {k.key: k for k in knobs}
    changes = {key: value for key, value in assignment if by_key[key].value != value}
    tables: dict[str, dict[int, int]] = {}
    for knob in tabled:
        configured = {dict(run.config)[knob.key] for run in choice.values()}
        if len(configured) == 1:  # the groups agree: one value, no table
            if (value := configured.pop()) != knob.value:
                changes[knob.key] = value
            continue
        entries = {value: _setting(knob, _table_site(knob, sites), run, grouped[value], scope)
                   for value, run in choice.items()}
        tables[knob.key] = {value: setting for value, setting in entries.items() if setting is not None}
    if not tables:
        return None
    try:
        composed = apply_knobs(source, changes) if changes else source
        for key, entries in tables.items():
            composed = set_table(composed, _table_site(by_key[key], sites).key, dimension, entries)
    except (EditError, ValueError, StopIteration):
        return None
    labels = [f"{by_key[key].name}={by_key[key].short(value)}" for key, value in sorted(changes.items())]
    labels += [f"{by_key[key].name} by {dimension} {{{', '.join(f'{d}: {v}' for d, v in sorted(entries.items()))}}}"
               for key, entries in sorted(tables.items())]
    medians = {case: run.medians_us[case] for value, run in choice.items() for case in grouped[value]}
    relative = _mean({case: medians[case] / control.medians_us[case] for case in medians}, weights)
    shared = {**dict(assignment), **changes}
    config = (*sorted(shared.items()), (f"table:{scope}.{dimension}", len(grouped)))
    return TablePlan(source=composed, label=", ".join(labels), config=config, medians_us=medians, relative=relative)
