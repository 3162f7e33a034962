"""`TuneProvider`: one knob move per proposal, chosen by the search policy and explained by its metadata."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from orchestrator.autotune.detect import autotuned_kernels
from orchestrator.compile_ahead.ahead import remembered_in_source
from orchestrator.decision.gates import TRIAGE_MARGIN
from orchestrator.providers.base import Proposal, ProposalContext, ProviderExhausted
from orchestrator.providers.bottleneck import classify_bottleneck
from orchestrator.providers.contract import validate_proposal
from orchestrator.providers.prompt import evidence_terms
from orchestrator.providers.tune.explain import NoKnobFound, explain_missing_knobs
from orchestrator.providers.tune.knobs import Knob, tunable_knobs
from orchestrator.providers.tune.metadata import proposal_metadata, screened_metadata
from orchestrator.providers.tune.one_config import one_configuration_each
from orchestrator.providers.tune.policy import (
    Attempt,
    Move,
    attempt_of,
    attempts_from_history,
    learn,
    rank_moves,
    source_digests,
)
from orchestrator.providers.tune.search import (
    SWEEP_LIMIT,
    FamilySearch,
    Screened,
    family_size_for,
    interpreted,
    triton_names,
)
from protocol.results import ExperimentRecord


class TuneProvider:
    """Evidence-driven single-knob tuning; proposals are sequential so each sees the last result."""

    name = "tune"
    concurrent = False

    def __init__(self) -> None:
        self._attempts: list[Attempt] = []
        self._search = FamilySearch()

    async def propose(self, context: ProposalContext) -> Proposal:
        self._search.case_limits = case_limits(context)
        context, written, pinned = self._one_configuration(context)
        found = tunable_knobs(context.incumbent_source)
        knobs = [knob for knob in found if not pinned_entry(knob, pinned)]
        if found and not knobs:
            raise ProviderExhausted(pinned_only(found))
        if not knobs:
            raise NoKnobFound(explain_missing_knobs(context.incumbent_source))
        proposal = await self._propose(context, knobs)
        if not written:
            return proposal
        change = f"{written}; {proposal.metadata.change}" if proposal.metadata.change else written
        return dataclasses.replace(proposal, metadata=proposal.metadata.model_copy(update={"change": change}))

    @staticmethod
    def _one_configuration(context: ProposalContext) -> tuple[ProposalContext, str, frozenset[str]]:
        """The context the knobs are read in: where the run pins a kernel's own autotune choice, its list written
        as its choices (one_config.py), with what was written, in words, and the kernels still pinned (their
        entries are not knobs)."""
        pinned = frozenset(c.kernel for c in context.autotune_choices) & frozenset(
            autotuned_kernels(context.incumbent_source))
        if not pinned:
            return context, "", pinned
        written = one_configuration_each(context.incumbent_source, context.autotune_choices, context.cases, pinned)
        return (dataclasses.replace(context, incumbent_source=written.source), written.said,
                pinned - written.kernels)

    async def _propose(self, context: ProposalContext, knobs: list[Knob]) -> Proposal:
        screened = await self._screened(context, knobs)
        if screened is not None:
            return screened
        lessons = learn(self._attempts, context)
        bottleneck, bottleneck_evidence = classify_bottleneck(context.incumbent_evaluation)
        min_gain = _gate_gain(context)
        moves = [move for move in rank_moves(context, knobs, lessons, bottleneck)
                 if not self._search.measured_no_faster(knobs, move.configuration, min_gain=min_gain)]
        moves = await self._screen_moves(context, knobs, moves, min_gain)
        if not moves:
            near = self._near_miss(context, knobs, min_gain)
            if near is not None:
                return near
            raise ProviderExhausted(
                f"tune has no untried configuration left for {len(knobs)} knobs "
                f"({', '.join(sorted({k.name for k in knobs}))}): every value in their domains was tried, lies past "
                "a step that regressed or was screened no faster than the incumbent; expose another knob (a "
                "BLOCK/TILE/GROUP constant, num_warps or num_stages at the launch) or continue with an LLM provider"
            )
        best = moves[0]
        metadata = proposal_metadata(best.knob, best.direction, best.value, bottleneck, bottleneck_evidence,
                                     lessons.notes, paired=best.paired)
        proposal = validate_proposal(
            best.source, metadata, context.incumbent_source, evidence_terms=evidence_terms(context)
        )
        self._attempts.append(attempt_of(best, context.round_index, context.incumbent_id))
        return dataclasses.replace(proposal, configuration=named_configuration(knobs, best.configuration))

    async def _screen_moves(self, context: ProposalContext, knobs: list, moves: list[Move],
                            min_gain: float) -> list[Move]:
        """The ranked moves, once screening (when the run offers it) has timed the best-ranked beside the
        incumbent: a family at a time until the first move left is one it timed at least `min_gain` faster, or
        one it could not time (no time left for screening: the gate decides, as without screening). A move it
        found broken or no faster never reaches the gate."""
        if context.screener is None:
            return moves
        family = family_size_for(dict(context.target.environment), context.target.backend) - 1
        weights = {case.case_id: case.weight for case in context.cases}

        measured = measured_already(context)

        def left(ranked: list[Move]) -> list[Move]:  # what the run measured or refused is not screened again
            return [m for m in ranked if not self._search.move_screened_out(knobs, m.configuration, min_gain=min_gain)
                    and not measured(m.source)
                    and tuple(sorted(m.configuration)) not in self._search.proposed]

        moves = left(moves)
        while moves and not self._search.move_screened(knobs, moves[0].configuration):
            batch = [m for m in moves if not self._search.move_screened(knobs, m.configuration)][:family]
            judged = await self._search.screen_moves(knobs, context.incumbent_source, context.screener.screen,
                                                     [(m.configuration, m.source) for m in batch], weights)
            moves = left(moves)
            if judged == 0:
                break
        return moves

    async def _screened(self, context: ProposalContext, knobs: list) -> Proposal | None:
        """The joint search's next screened configuration (orchestrator/providers/tune/search.py), when the
        run offers screening: a family's fastest while the search is not spent, then what it timed faster by
        less than a family needs yet more than the gate requires; None hands over to the single-knob policy."""
        if context.screener is None:
            return None
        if context.infeasible is not None:
            self._search.remember(remembered_in_source(context.infeasible, context.incumbent_source, context.target),
                                  set(triton_names(knobs).values()))

        seen = measured_already(context)
        environment = dict(context.target.environment)
        screened = await self._search.next_screened(
            knobs, context.incumbent_source, context.screener.screen, excluded=seen,
            family_size=family_size_for(environment, context.target.backend),
            weights={case.case_id: case.weight for case in context.cases},
            # on a GPU only: under the interpreter a family takes minutes and its timings scatter by tens of percent
            sweep_limit=0 if interpreted(environment, context.target.backend) else SWEEP_LIMIT)
        if screened is None:  # the search is spent: what it timed faster, by less than a family needs
            screened = self._search.leftover(knobs, min_gain=_gate_gain(context), excluded=seen)
        return None if screened is None else screened_proposal(context, knobs, screened)

    def _near_miss(self, context: ProposalContext, knobs: list[Knob], min_gain: float) -> Proposal | None:
        """Once every screened gain and single-knob move is spent: a configuration screening timed within its own
        error of the gate's bar (search.py `near_miss`). On a GPU only: an interpreted screening scatters by tens of
        percent, far more than that error."""
        if context.screener is None or interpreted(dict(context.target.environment), context.target.backend):
            return None
        screened = self._search.near_miss(knobs, min_gain=min_gain, excluded=measured_already(context))
        return None if screened is None else screened_proposal(context, knobs, screened)

    def resume_from(self, history: Sequence[ExperimentRecord]) -> None:
        """A resumed run's tuner: its attempts re-derived from the recorded history (`--resume`)."""
        self._attempts = attempts_from_history(history)

    async def aclose(self) -> None:
        return None


def measured_already(context: ProposalContext) -> Callable[[str], bool]:
    """Whether the run already measured or refused a source (its digests among the context's excluded ones)."""
    return lambda source: bool(source_digests(source) & context.excluded_digests)


def screened_proposal(context: ProposalContext, knobs: list[Knob], screened: Screened) -> Proposal:
    bottleneck, _ = classify_bottleneck(context.incumbent_evaluation)
    proposal = validate_proposal(screened.source, screened_metadata(screened, bottleneck), context.incumbent_source,
                                 evidence_terms=evidence_terms(context))
    return dataclasses.replace(proposal, configuration=named_configuration(knobs, screened.config))


def pinned_entry(knob: Knob, pinned: frozenset[str]) -> bool:
    """An entry of the autotune list of a kernel whose choice the run pins: in every worker that kernel runs the
    pinned configuration, so editing an entry either loses it (the worker refuses the list), leaves the kernel's
    own pruning nothing, or changes nothing that runs."""
    # entries of one triton.Config share a group, whatever style claimed them (a TLX buffer count in a config)
    return knob.site is not None and knob.site.group != 0 and knob.site.scope in pinned


def pinned_only(knobs: Sequence[Knob]) -> str:
    kernels = sorted({knob.site.scope if knob.site is not None else knob.scope for knob in knobs})
    return (f"tune found only entries of the autotune list of {', '.join(kernels)} "
            f"({', '.join(sorted({knob.name for knob in knobs}))}), and the run pins that kernel's own choice in "
            "every worker: an edit of an entry cannot change the configuration that runs (docs/autotune.md). "
            "Give the kernel one configuration per key to tune it, or continue with an LLM provider")


def named_configuration(knobs: list, configuration: tuple[tuple[str, int], ...]) -> dict[str, int]:
    """A configuration by the names compile ahead and the infeasible store know (`Proposal.configuration`)."""
    names = triton_names(knobs)
    return {names.get(key, key): int(value) for key, value in configuration}


def case_limits(context: ProposalContext) -> dict[str, float]:
    """Per protected case, the largest time ratio to the control a screened configuration may show and still go
    to the gate: slower than `1 - max_case_regression` by more than triage's margin, the gate rejects it on its
    first run (orchestrator/decision/gates.py `triage`). On a GPU only: an interpreted screening's timings
    scatter by more than that margin, and the gate, which learns the run's noise, is the better judge there."""
    bar = (1.0 - context.max_case_regression) * (1.0 - TRIAGE_MARGIN)
    if bar <= 0 or interpreted(dict(context.target.environment), context.target.backend):
        return {}
    return {case.case_id: 1.0 / bar for case in context.cases if case.protected}


def _gate_gain(context: ProposalContext) -> float:
    """The smallest gain the promotion gate accepts (1 - 1/min_speedup)."""
    return 1.0 - 1.0 / context.min_speedup
