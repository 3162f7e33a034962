"""The between-run noise a run learns from repeated measurements of unchanged sources."""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import NormalDist

from orchestrator.decision.statistics import pooled_between_run_sd, student_t_quantile
from protocol.results import Evaluation, EvaluationStatus

# Relative between-process noise assumed at least (H200 A/A study: 0.1-0.3 % for kernels >= 50 µs).
DEFAULT_NOISE_FLOOR = 0.002


@dataclass(frozen=True)
class BetweenRunNoise:
    """What the promotion test assumes about the scatter of fresh worker runs of one source.

    `floor` is never undercut. `learned_sd` is the pooled between-run sd of every source the run measured
    more than once, scaled by t(dof)/z at the test's confidence because it is itself an estimate, for the
    noisiest case (`raw_sd`, `dof` are that case's); `by_case` holds each learnable case's own. When
    present they replace the per-trial spread (that spread is already pooled into them): a case uses its
    own, a case without one the noisiest. Cases differ (H200, tutorial layer norm: a ragged 17-20 µs case
    15 % apart between processes, its 42 µs neighbour within 0.3 %), so one case's scatter must not widen
    another's. Records decided before `by_case` existed are replayed with it empty: the noisiest for all.
    """

    floor: float = DEFAULT_NOISE_FLOOR
    learned_sd: float | None = None
    raw_sd: float | None = None
    dof: int = 0
    by_case: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {"floor": self.floor, "learned_sd": self.learned_sd, "raw_sd": self.raw_sd, "dof": self.dof,
                "by_case": dict(self.by_case)}

    def describe(self) -> str:
        if self.learned_sd is None:
            return f"assumed floor {self.floor:.2%}"
        return (f"learned {self.raw_sd:.2%} over {self.dof} dof -> {self.learned_sd:.2%} at the test's confidence"
                + (f" (noisiest case; per case {', '.join(f'{c} {sd:.2%}' for c, sd in sorted(self.by_case.items()))})"
                   if len(self.by_case) > 1 else ""))


def noise_from_history(groups_by_case: dict[str, list[list[float]]], *, confidence: float = 0.99,
                       floor: float = DEFAULT_NOISE_FLOOR, min_dof: int = 2) -> BetweenRunNoise:
    """The between-run noise learnt from repeated sources: each case's pooled sd, t-inflated, and the
    noisiest of them.

    `groups_by_case[case_id]` holds, per source measured more than once, the medians of its runs. A case
    with fewer than `min_dof` degrees of freedom learns nothing; with none learnt the floor stands alone.
    """
    z = NormalDist().inv_cdf(confidence)
    by_case: dict[str, float] = {}
    worst: tuple[float, float, int] | None = None  # (inflated, raw sd, dof) of the noisiest case
    for case_id, groups in groups_by_case.items():
        sd, dof = pooled_between_run_sd(groups)
        if dof < min_dof:
            continue
        by_case[case_id] = inflated = sd * student_t_quantile(confidence, dof) / z
        if worst is None or inflated > worst[0]:
            worst = (inflated, sd, dof)
    if worst is None:
        return BetweenRunNoise(floor=floor)
    return BetweenRunNoise(floor=floor, learned_sd=worst[0], raw_sd=worst[1], dof=worst[2], by_case=by_case)


def noise_from_run_medians(run_medians: dict[str, dict[str, list[float]]], *, confidence: float = 0.99,
                           floor: float = DEFAULT_NOISE_FLOOR) -> BetweenRunNoise:
    """The noise learnt from a run's history: source digest -> case id -> the median of each benchmarked run
    of that source, in run order. The run loop and the simulation runner both call this, so they cannot drift
    apart."""
    groups: dict[str, list[list[float]]] = {}
    for per_case in run_medians.values():
        for case_id, medians in per_case.items():
            groups.setdefault(case_id, []).append(medians)
    return noise_from_history(groups, confidence=confidence, floor=floor)


@dataclass(frozen=True)
class RunMedians:
    """A run's history for learning its noise: the median of every benchmarked run of every source, per case,
    in the order the runs finished. Immutable: `with_run` returns the history with one more run.

    Sources are told apart by the normalized digest of what was measured; sources and cases keep the order
    they first appeared in, so the pooled estimate sums in the same order however the history was built (live,
    rebuilt for a resume, or replayed by `simulate`)."""

    runs: tuple[tuple[str, str, float], ...] = ()  # (source digest, case id, run median)
    # source digest -> its last benchmarked run, whole: what a decision may reuse as its first incumbent run
    last_evaluations: dict[str, Evaluation] = field(default_factory=dict)

    def with_run(self, digest: str, evaluation: Evaluation) -> RunMedians:
        """This history and one finished run of the source `digest` (a failed run teaches nothing)."""
        if evaluation.status is not EvaluationStatus.OK:
            return self
        added = tuple((digest, measured.case_id, measured.stats.median) for measured in evaluation.cases
                      if measured.stats is not None)
        if not added:
            return self
        return RunMedians(self.runs + added, {**self.last_evaluations, digest: evaluation})

    def by_source(self) -> dict[str, dict[str, list[float]]]:
        """source digest -> case id -> the medians of its runs, in run order."""
        grouped: dict[str, dict[str, list[float]]] = {}
        for digest, case_id, median in self.runs:
            grouped.setdefault(digest, {}).setdefault(case_id, []).append(median)
        return grouped

    def last_run(self, digest: str) -> dict[str, float]:
        """case id -> the median of the last benchmarked run of the source `digest` ({} if it has none): what a
        candidate's first run is compared with when the run triages (`gates.triage`)."""
        last: dict[str, float] = {}
        for source, case_id, median in self.runs:
            if source == digest:
                last[case_id] = median  # the later run's median replaces the earlier one
        return last

    def last_evaluation(self, digest: str) -> Evaluation | None:
        """The last benchmarked run of the source `digest`, whole (None if it has none)."""
        return self.last_evaluations.get(digest)

    def noise(self, *, confidence: float = 0.99, floor: float = DEFAULT_NOISE_FLOOR) -> BetweenRunNoise:
        return noise_from_run_medians(self.by_source(), confidence=confidence, floor=floor)
