"""Joint search with screening: optuna's TPE proposes families of configurations over every knob at once,
one screening worker ranks a family against the incumbent (its control, timed in the same worker first and last), and the
fastest few go to the promotion gate one at a time.
Long because: one search state (the study, what each incumbent's families measured, the moves screened, the
limits learnt) that every way a configuration reaches the gate reads and extends.

Why optuna: the grid's best matmul differs from the baseline in all six knobs, which one knob at a time
climbs to slowly or not at all; TPE (a well-kept library's sampler) models the measured configurations
and samples the next family where they were fast, across knobs jointly. Screening results are its
observations: each value is the variant's time relative to the incumbent in the same worker (geometric
mean over cases, weighted as the gate weighs them), chained to the first incumbent's scale, so families
screened around later incumbents stay comparable. A variant that fails to build or verify is a failed
trial, which TPE avoids. Before TPE's own samples, the first families screen the usual configurations for
the kernel's shape of knobs, and nothing with implausible work per thread is screened (`priors`). A family
that yields nothing at least `MIN_SCREEN_GAIN` faster than its control counts as fruitless; after
`MAX_FRUITLESS_FAMILIES` in a row the direction is spent, and what is left of a small plausible grid is screened
family by family, nearest the incumbent first (`sweep`). When the family's cases differ in a dimension the
wrapper computes and no single configuration serves them all, a per-shape table of each group's fastest goes
first (`tables`). What screening measured still steers what follows:
a configuration it timed faster than the incumbent by more than the gate requires, though by less than
`MIN_SCREEN_GAIN`, is proposed before any single-knob guess (`leftover`), and a single-knob move it timed no
faster is not proposed at all (`measured_no_faster`); the single-knob moves themselves are screened beside the
incumbent before the gate sees them (`screen_moves`). On the H200 the softmax example's spent search left
1024/8 warps/3 stages (2.2 % faster, the grid's best) unproposed while the single-knob policy sent two moves
screening had timed 22 % slower and 0.6 % slower to the gate, a minute each. When all of that is spent, the few
configurations screened within screening's own error of the gate's bar go to the gate last (`near_miss`): a
fraction of a second per case cannot tell them from a winner, the gate's paired runs can.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.compile_ahead.feasibility import PRUNABLE, is_neighbour, pruning_knobs
from orchestrator.compile_ahead.models import REGISTERS, SHARED_MEMORY, THREADS
from orchestrator.decision.statistics import weighted_geomean
from orchestrator.providers.screening import ScreeningResult
from orchestrator.providers.tune.edits import EditError
from orchestrator.providers.tune.knobs import Knob, apply_knobs, check_domains
from orchestrator.providers.tune.priors import Roles, prior_configs
from orchestrator.providers.tune.tables import Run, compose_table, takes_tables

# On the H200, with plausible configurations only (priors.py) and compiles ahead on the host, a family of 8
# screened in 20.4 s (matmul, three 1000-4096-class cases; 9.6 s of compiles ahead before it) and 8.2 s
# (softmax): 16 fit the share of a 600 s run that screening may spend, and cover the matmul priors in one
# family. (Before the priors, 16 pathological ones outlasted a 400 s run's share and 8 barely fit.)
FAMILY_SIZE_GPU = 16
FAMILY_SIZE_INTERPRETER = 6  # interpreted calls take milliseconds to seconds: a smaller family
PROMOTE_PER_FAMILY = 3
MIN_SCREEN_GAIN = 0.03
MAX_FRUITLESS_FAMILIES = 2
ASK_ATTEMPTS_PER_SLOT = 8  # TPE may ask again for a configuration already measured
# How far a screening's relative time can sit from the gate's: on the H200 the TLX GEMM's NUM_STAGES 3 -> 4
# screened 0.86 % faster (short of the 0.99 % the gate needs) and measured 1.0076x in the gate; the softmax
# example's controls, timed first and last in one worker, differ by up to 1.5 %
SCREENING_ERROR = 0.02
NEAR_MISSES_PER_INCUMBENT = 4  # each costs the gate two or three workers: too close to the bar for triage's margin
# Once TPE's families are fruitless, what is left of the plausible grid is screened family by family when it holds
# at most this many configurations (`sweep`): the softmax example's 228 plausible ones are 15 families of 16, about
# 10 s each on the H200, where two fruitless families used to end its search with 48 screened and the grid's best
# (2.5 % faster than the winner) never timed. Larger grids (matmul's 19,950) stay TPE's alone.
SWEEP_LIMIT = 256
SWEEP_GRID_LIMIT = 20_000  # grids larger than this are not even enumerated

Screen = Callable[..., Awaitable[list[ScreeningResult]]]  # a Screener's screen (orchestrator/providers/screening.py)


@dataclass(frozen=True)
class Screened:
    """A configuration that screened faster than its control: proposed to the gate later."""

    config: tuple[tuple[str, int], ...]
    source: str
    relative: float  # its median relative to the control's in the same worker (geometric mean over cases)
    scale_value: float  # `relative` chained to the first incumbent's scale
    screen_label: str
    medians_us: dict[str, float]
    control_medians_us: dict[str, float]
    family_size: int
    ok_count: int
    single_relative: float | None = None  # a per-shape table: the best single configuration's `relative`
    near_miss: bool = False  # screened short of the gate's bar, within SCREENING_ERROR of it (`near_miss`)


@dataclass
class FamilySearch:
    seed: int = 0
    study: Any = None
    keys: tuple[str, ...] = ()
    values: dict[tuple[tuple[str, int], ...], float] = field(default_factory=dict)  # config -> chained value
    queue: list[Screened] = field(default_factory=list)
    fruitless: int = 0
    families: int = 0
    # configurations (by knob name) that failed to build for a resource, and which: a configuration at least
    # as large in every size and stage knob is not screened (orchestrator/compile_ahead/feasibility.py)
    infeasible: list[tuple[dict[str, int], str]] = field(default_factory=list)
    pruned: int = 0
    priors: list[tuple[tuple[str, int], ...]] = field(default_factory=list)  # not yet screened (priors.py)
    implausible: int = 0
    # every configuration screened with the incumbent of its day as control, by that incumbent: `leftover`
    # proposes from those the present incumbent controlled
    measured: dict[tuple[tuple[str, int], ...], list[Screened]] = field(default_factory=dict)
    proposed: set[tuple[tuple[str, int], ...]] = field(default_factory=set)
    # single-knob moves screened before the gate (`screen_moves`): (incumbent, move) -> what the move timed beside
    # that incumbent in the same worker, None when it failed to build or verify there
    moves_timed: dict[tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]], Screened | None] = field(
        default_factory=dict)
    near_misses: dict[tuple[tuple[str, int], ...], int] = field(default_factory=dict)  # proposed, per incumbent
    # protected case -> the largest time ratio to the control a configuration may screen at and still go to the
    # gate (`case_limits`): one slower than that the gate's triage rejects on its first run
    case_limits: dict[str, float] = field(default_factory=dict)
    swept: set[tuple[tuple[str, int], ...]] = field(default_factory=set)  # offered to a sweep family (`sweep`)
    sweep_done: bool = False

    def slows_a_protected_case(self, medians: dict[str, float], control: dict[str, float]) -> bool:
        """Whether a configuration screened slower on a protected case than the gate could accept."""
        return any(case in medians and control.get(case, 0.0) > 0 and medians[case] / control[case] > limit
                   for case, limit in self.case_limits.items())

    @property
    def spent(self) -> bool:
        return self.fruitless >= MAX_FRUITLESS_FAMILIES

    async def next_screened(self, knobs: list[Knob], incumbent_source: str, screen: Screen, *, family_size: int,
                            excluded: Callable[[str], bool], weights: dict[str, float] | None = None,
                            sweep_limit: int = 0) -> Screened | None:
        """The next configuration to propose, screening a new family when the queue is empty; None when the
        search is spent or screening is unavailable. `weights` are the cases' weights in the promotion gate's
        aggregate, so the screening ranks as the gate will judge (equal weights when not given). With
        `sweep_limit`, a spent search first screens what is left of a plausible grid that small (`sweep`)."""
        incumbent = _config(knobs)
        if self.study is not None and _space(knobs) != self.keys:
            # the knobs changed meaning (a table took a site's place): what was queued and measured was
            # measured against configurations that no longer exist
            self.queue.clear()
            self.measured.clear()
            self.proposed.clear()
            self.swept.clear()
            self.sweep_done = False
        while True:
            while not self.spent:
                queued = self._next_queued(incumbent, excluded)
                if queued is not None:
                    return queued
                if await self._screen_family(knobs, incumbent, incumbent_source, screen, family_size, excluded,
                                             weights or {}) is None:
                    return None
            chosen = self.sweep(knobs, incumbent, family_size - 1, sweep_limit)
            if not chosen:
                return None
            if await self._screen_family(knobs, incumbent, incumbent_source, screen, family_size, excluded,
                                         weights or {}, chosen=chosen) is None:
                return None
            # a sweep family that queued a gain revives the search (fruitless is 0 again); else the next one

    def _next_queued(self, incumbent: tuple[tuple[str, int], ...], excluded: Callable[[str], bool]) -> Screened | None:
        """The queue's next configuration still worth the gate, taken off it; None once the queue is empty."""
        current = self.values.get(incumbent)
        while self.queue:
            candidate = self.queue.pop(0)
            if excluded(candidate.source):
                continue
            if current is not None and candidate.scale_value >= current * (1 - MIN_SCREEN_GAIN):
                continue  # screened against an earlier incumbent and no faster than the present one
            self.proposed.add(candidate.config)
            return candidate
        return None

    def sweep(self, knobs: list[Knob], incumbent: tuple[tuple[str, int], ...], size: int,
              limit: int) -> list[tuple[tuple[str, int], ...]]:
        """The next at most `size` configurations of the knobs' grid that no family screened: plausible
        (`priors.Roles`), not grown from a configuration over a limit, nearest the incumbent first (fewest knobs
        changed, then the smallest steps). Empty once the sweep is over, and when the unscreened rest of the grid
        held more than `limit` configurations when it began (TPE alone searches a grid that size)."""
        if self.sweep_done or limit <= 0 or math.prod(len(k.domain) for k in knobs) > SWEEP_GRID_LIMIT:
            self.sweep_done = True
            return []
        roles, names = Roles(knobs), triton_names(knobs)
        keys = [k.key for k in knobs]
        rest = [config for values in itertools.product(*(k.domain for k in knobs))
                if (config := tuple(sorted(zip(keys, (int(v) for v in values), strict=True)))) not in self.values
                and config not in self.swept and roles.plausible(config) and not self._beyond_a_limit(config, names)]
        if not rest or (not self.swept and len(rest) > limit):
            self.sweep_done = True
            return []
        now = dict(incumbent)

        def distance(config: tuple[tuple[str, int], ...]) -> tuple[int, float]:
            steps = [abs(math.log2(max(value, 1) / max(now[key], 1))) for key, value in config if value != now[key]]
            return len(steps), sum(steps)

        chosen = sorted(rest, key=lambda config: (distance(config), config))[:size]
        self.swept.update(chosen)
        return chosen

    async def _screen_family(self, knobs: list[Knob], incumbent: tuple[tuple[str, int], ...], source: str,
                             screen: Screen, size: int, excluded: Callable[[str], bool],
                             weights: dict[str, float],
                             chosen: list[tuple[tuple[str, int], ...]] | None = None) -> bool | None:
        import optuna
        from optuna.distributions import CategoricalDistribution
        from optuna.trial import TrialState

        check_domains(knobs)  # the incumbent is every family's first trial: its values must be in the domains
        keys = _space(knobs)
        names = triton_names(knobs)
        domains = {k.key: CategoricalDistribution(list(k.domain)) for k in knobs}
        if self.study is None or keys != self.keys:
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            sampler = optuna.samplers.TPESampler(seed=self.seed, multivariate=True, constant_liar=True,
                                                 n_startup_trials=max(4, size // 2))
            self.study = optuna.create_study(direction="minimize", sampler=sampler)
            self.keys, self.values = keys, {}
            self.priors = prior_configs(knobs)
        self.study.enqueue_trial(dict(incumbent), skip_if_exists=False)
        trials, sources, configs = [], [], []
        seen = set(self.values)
        roles = Roles(knobs)
        attempts = 0
        pending = None if chosen is None else list(chosen)  # a sweep's configurations, in place of TPE's
        while len(trials) < size and attempts < size * ASK_ATTEMPTS_PER_SLOT:
            attempts += 1
            if trials and pending is not None:
                if not pending:
                    break
                self.study.enqueue_trial(dict(pending.pop(0)), skip_if_exists=False)
            elif trials and self.priors:  # the incumbent leads; then what is usually good, before TPE's guesses
                self.study.enqueue_trial(dict(self.priors.pop(0)), skip_if_exists=False)
            trial = self.study.ask(domains)
            config = tuple(sorted((key, int(value)) for key, value in trial.params.items()))
            if trials and (config in seen or config in configs):
                self.study.tell(trial, state=TrialState.PRUNED)
                continue
            if trials and not roles.plausible(config):
                self.study.tell(trial, state=TrialState.PRUNED)  # pruned, not failed: TPE learns to avoid it
                self.implausible += 1
                continue
            if trials and self._beyond_a_limit(config, names):
                self.study.tell(trial, state=TrialState.FAIL)  # as infeasible as the failure it grows from
                self.pruned += 1
                continue
            try:
                variant = source if not trials else apply_knobs(source, _changes(incumbent, config))
            except (EditError, ValueError):
                self.study.tell(trial, state=TrialState.FAIL)
                continue
            if trials and (variant == source or excluded(variant)):
                self.study.tell(trial, state=TrialState.PRUNED)
                continue
            trials.append(trial)
            sources.append(variant)
            configs.append(config)
        if len(trials) < 2:
            if chosen is None:
                self.fruitless = MAX_FRUITLESS_FAMILIES  # nothing untried is left to screen
                return None
            return True  # none of this sweep family could be edited in: the sweep goes on with the next
        self.families += 1
        labelled = [(_label(incumbent, config), variant) for config, variant in zip(configs, sources, strict=True)]
        observe = takes_tables(source, knobs)
        results, control = await _bracketed(screen, labelled, observe)
        if not results or not results[0].ok:
            for trial in trials:
                self.study.tell(trial, state=TrialState.FAIL)
            self.fruitless = MAX_FRUITLESS_FAMILIES  # the screening worker (or the control) failed: stop screening
            return None
        base = self.values.get(incumbent, 1.0)
        ok_count = sum(1 for r in results if r.ok)
        faster: list[Screened] = []
        for trial, config, variant, result in zip(trials, configs, sources, results, strict=True):
            relative = _relative(result.variant.medians_us, control, weights) if result.ok else None
            resource = _resource_of(result)
            if resource is not None:
                self.infeasible.append(({names[key]: value for key, value in config}, resource))
            if relative is None:  # unscreened (the screening's time ran out) is no evidence against it
                unscreened = result.variant.reason.startswith("not screened")
                self.study.tell(trial, state=TrialState.PRUNED if unscreened else TrialState.FAIL)
                continue
            value = base * relative
            self.study.tell(trial, value)
            self.values.setdefault(config, value)
            if config == incumbent:
                continue
            screened = Screened(config=config, source=variant, relative=relative, scale_value=value,
                                screen_label=result.label, medians_us=dict(result.variant.medians_us),
                                control_medians_us=dict(control), family_size=len(results), ok_count=ok_count)
            self.measured.setdefault(incumbent, []).append(screened)
            if relative <= 1 - MIN_SCREEN_GAIN and not self.slows_a_protected_case(screened.medians_us, control):
                faster.append(screened)
        faster.sort(key=lambda s: s.relative)
        table = self._table(knobs, source, configs, results, control, weights, base, excluded) if observe else None
        self.queue = ([table] if table is not None else []) + faster[:PROMOTE_PER_FAMILY]
        self.fruitless = 0 if self.queue else self.fruitless + 1
        return True

    @staticmethod
    def _table(knobs: list[Knob], source: str, configs: list[tuple[tuple[str, int], ...]], results: list[Any],
               control: dict[str, float], weights: dict[str, float], base: float,
               excluded: Callable[[str], bool]) -> Screened | None:
        """A per-shape table of the family's fastest per group of cases, when it serves the cases better than
        any single configuration did (orchestrator/providers/tune/tables.py `compose_table`); None otherwise.
        The control's run carries the bracketed medians (`_bracketed`)."""
        runs = [Run(config, dict(control if index == 0 else r.variant.medians_us), dict(r.variant.observed))
                for index, (config, r) in enumerate(zip(configs, results, strict=True)) if r.ok]
        plan = compose_table(source, knobs, runs[0], runs[1:], weights, min_gain=MIN_SCREEN_GAIN)
        if plan is None or excluded(plan.source):
            return None
        return Screened(config=plan.config, source=plan.source, relative=plan.relative,
                        scale_value=base * plan.relative, screen_label=plan.label, medians_us=plan.medians_us,
                        control_medians_us=dict(runs[0].medians_us), family_size=len(results),
                        ok_count=len(runs), single_relative=plan.single_relative)

    def leftover(self, knobs: list[Knob], *, min_gain: float, excluded: Callable[[str], bool]) -> Screened | None:
        """The fastest configuration not yet proposed that screening timed side by side with the present
        incumbent (its control) at least `min_gain` faster (the gate's threshold: 1 - 1/min_speedup): gains
        too small to count a family fruitful, still worth the gate's minute more than a guess. None when there
        is none."""
        incumbent = _config(knobs)
        for screened in sorted(self.measured.get(incumbent, ()), key=lambda s: s.relative):
            if screened.relative > 1 - min_gain:
                return None
            if screened.config in self.proposed or excluded(screened.source) or self.slows_a_protected_case(
                    screened.medians_us, screened.control_medians_us):
                continue
            self.proposed.add(screened.config)
            return screened
        return None

    def near_miss(self, knobs: list[Knob], *, min_gain: float, excluded: Callable[[str], bool]) -> Screened | None:
        """The fastest configuration not yet proposed that screening timed beside the present incumbent short of
        the gate's bar (`min_gain` faster) by no more than `SCREENING_ERROR`, at most `NEAR_MISSES_PER_INCUMBENT`
        per incumbent; None when there is none. What remains for the gate once nothing screened clearly faster is
        left: screening times each case for a fraction of a second and cannot tell these from a winner."""
        incumbent = _config(knobs)
        if self.near_misses.get(incumbent, 0) >= NEAR_MISSES_PER_INCUMBENT:
            return None
        bar = (1 - min_gain) * (1 + SCREENING_ERROR)
        pool = [*self.measured.get(incumbent, ()),
                *(move for (control, _), move in self.moves_timed.items() if control == incumbent and move)]
        for screened in sorted(pool, key=lambda s: s.relative):
            if screened.relative > bar:
                return None
            if screened.config in self.proposed or excluded(screened.source) or self.slows_a_protected_case(
                    screened.medians_us, screened.control_medians_us):
                continue
            self.proposed.add(screened.config)
            self.near_misses[incumbent] = self.near_misses.get(incumbent, 0) + 1
            return replace(screened, near_miss=screened.relative > 1 - min_gain)
        return None

    def measured_no_faster(self, knobs: list[Knob], configuration: tuple[tuple[str, int], ...], *,
                           min_gain: float) -> bool:
        """Whether screening timed `configuration` less than `min_gain` faster than the present incumbent (on
        the chained scale of every family of this search), or beside it slower on a protected case than the gate
        accepts, so the gate would not promote it."""
        configuration = tuple(sorted(configuration))
        if any(screened.config == configuration and self.slows_a_protected_case(screened.medians_us,
                                                                                screened.control_medians_us)
               for screened in self.measured.get(_config(knobs), ())):
            return True
        current = self.values.get(_config(knobs))
        value = self.values.get(configuration)
        return current is not None and value is not None and value > current * (1 - min_gain)

    async def screen_moves(self, knobs: list[Knob], source: str, screen: Screen,
                           moves: list[tuple[tuple[tuple[str, int], ...], str]],
                           weights: dict[str, float] | None = None) -> int:
        """Single-knob moves (configuration, source) screened as one family with the incumbent first as its
        control, before any of them goes to the gate (a gated candidate costs three workers, a screened one a
        second of one); what each timed is kept for `move_screened_out`. The number timed or refused by the
        screening (a move it had no time for is no evidence, and may be screened again)."""
        incumbent = _config(knobs)
        labelled = [(_label(incumbent, incumbent), source)] + [(_label(incumbent, config), variant)
                                                                for config, variant in moves]
        results, control = await _bracketed(screen, labelled, False)
        if not results or not results[0].ok:
            return 0
        judged = 0
        ok_count = sum(1 for r in results if r.ok)
        for (config, variant), result in zip(moves, results[1:], strict=False):
            if not result.ok and result.variant.reason.startswith("not screened"):
                continue
            judged += 1
            relative = _relative(result.variant.medians_us, control, weights) if result.ok else None
            if relative is not None and self.slows_a_protected_case(result.variant.medians_us, control):
                relative = None  # the gate would reject it on a protected case: screened out as a broken one
            self.moves_timed[(incumbent, tuple(sorted(config)))] = None if relative is None else Screened(
                config=tuple(sorted(config)), source=variant, relative=relative,
                scale_value=self.values.get(incumbent, 1.0) * relative, screen_label=result.label,
                medians_us=dict(result.variant.medians_us), control_medians_us=dict(control),
                family_size=len(results), ok_count=ok_count)
        return judged

    def move_screened(self, knobs: list[Knob], configuration: tuple[tuple[str, int], ...]) -> bool:
        return (_config(knobs), tuple(sorted(configuration))) in self.moves_timed

    def move_screened_out(self, knobs: list[Knob], configuration: tuple[tuple[str, int], ...], *,
                          min_gain: float) -> bool:
        """Whether screening, beside the present incumbent, found `configuration` broken or less than `min_gain`
        faster, so the gate would refuse or not promote it."""
        key = (_config(knobs), tuple(sorted(configuration)))
        if key not in self.moves_timed:
            return False
        move = self.moves_timed[key]
        return move is None or move.relative > 1 - min_gain

    def remember(self, remembered: list[tuple[dict[str, int], str]], knob_names: set[str]) -> None:
        """Infeasible configs an earlier screening or run recorded (orchestrator/compile_ahead/ahead.py
        `remembered_for`), by kernel parameter name: kept to the knobs this search moves, so a config grown
        from one of them is never screened."""
        for knobs, resource in remembered:
            entry = ({name: value for name, value in knobs.items() if name in knob_names}, resource)
            if entry[0] and resource in PRUNABLE and entry not in self.infeasible:
                self.infeasible.append(entry)

    def _beyond_a_limit(self, config: tuple[tuple[str, int], ...], names: dict[str, str]) -> bool:
        named = {names[key]: value for key, value in config}
        return any(is_neighbour(pruning_knobs(failed, resource), named) for failed, resource in self.infeasible)


def triton_names(knobs: list[Knob]) -> dict[str, str]:
    """Each knob's name as the feasibility rules and compile ahead know it: warps and stages under Triton's
    own names (`num_warps`, `num_stages`), the others under their own."""
    return {k.key: {"warps": "num_warps", "stages": "num_stages"}.get(k.kind, k.name) for k in knobs}


def _resource_of(result: Any) -> str | None:
    """The resource a build failure ran out of: compile ahead's verdict when it kept the variant off the GPU
    (orchestrator/run/screening.py), else what the worker's failure text names."""
    verdict = getattr(result, "infeasible", None)
    if verdict is not None and verdict.resource in PRUNABLE:
        return verdict.resource
    return _resource(result.variant.reason) if result.variant.status == "build_failed" else None


def _resource(reason: str) -> str | None:
    """The resource a build failure names (Triton's OutOfResources and ptxas texts), or None."""
    lowered = reason.lower()
    if "shared memory" in lowered:
        return SHARED_MEMORY
    if "register" in lowered:
        return REGISTERS
    if "threads" in lowered and "per block" in lowered:
        return THREADS
    return None


async def _bracketed(screen: Screen, labelled: list[tuple[str, str]],
                     observe: bool) -> tuple[list[Any], dict[str, float]]:
    """Screen a family whose first entry is the incumbent (its control), with the control timed once more after
    the rest: the family's results without that closing run, and the control's medians, per case the faster
    of its two timings. Why: a worker's first variant can be timed slow (a loaded host, a cold start; once
    3x its later self on a CI machine under the interpreter), and every variant then looked faster than it
    was and went to the gate; load that grows during the family would make them look slower instead. The
    faster of the two is the reference either way, so a drift can only hide a gain, never invent one. A
    closing run that failed or was not screened leaves the first timing alone."""
    family = [*labelled, labelled[0]]
    results = await (screen(family, observe=True) if observe else screen(family))
    if len(results) <= len(labelled):  # the screening ended early (it returns what it measured, or nothing)
        results = list(results)
        closing = None
    else:
        results, closing = list(results[:-1]), results[-1]
    if not results or not results[0].ok:
        return results, {}
    control = dict(results[0].variant.medians_us)
    if closing is not None and closing.ok:
        again = closing.variant.medians_us
        control = {case: min(median, again.get(case, median)) for case, median in control.items()}
    return results, control


def _space(knobs: list[Knob]) -> tuple[str, ...]:
    """What the configurations mean: the knobs and, for a computed one, the expression its steps scale."""
    return tuple(sorted(f"{k.key}={k.expression}" for k in knobs))


def _config(knobs: list[Knob]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((k.key, int(k.value)) for k in knobs))


def _changes(incumbent: tuple[tuple[str, int], ...], config: tuple[tuple[str, int], ...]) -> dict[str, int]:
    now = dict(incumbent)
    return {key: value for key, value in config if now.get(key) != value}


def _label(incumbent: tuple[tuple[str, int], ...], config: tuple[tuple[str, int], ...]) -> str:
    changes = _changes(incumbent, config)
    return "incumbent (control)" if not changes else ", ".join(f"{k}={v}" for k, v in sorted(changes.items()))


def _relative(medians: dict[str, float], control: dict[str, float],
              weights: dict[str, float] | None = None) -> float | None:
    """Weighted geometric mean over the control's cases of median / control median (the gate's aggregate
    form; a case without a weight weighs 1); None when a case is missing."""
    ratios = {case: medians[case] / control[case] for case in control if case in medians and control[case] > 0}
    if not ratios or len(ratios) != len(control):
        return None
    return weighted_geomean(ratios, {case: (weights or {}).get(case, 1.0) for case in ratios}) or None


def interpreted(target_environment: dict[str, str], backend: str) -> bool:
    """Whether the target runs Triton's interpreter (CPU): its screenings time milliseconds to seconds, loosely."""
    return target_environment.get("TRITON_INTERPRET") == "1" or backend.lower() == "cpu"


def family_size_for(target_environment: dict[str, str], backend: str) -> int:
    return FAMILY_SIZE_INTERPRETER if interpreted(target_environment, backend) else FAMILY_SIZE_GPU
