"""The between-run noise a run learns from repeated measurements of unchanged sources."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

from orchestrator.decision.statistics import pooled_between_run_sd, student_t_quantile

# Relative between-process noise assumed at least (H200 A/A study: 0.1-0.3 % for kernels >= 50 µs).
DEFAULT_NOISE_FLOOR = 0.002


@dataclass(frozen=True)
class BetweenRunNoise:
    """What the promotion test assumes about the scatter of fresh worker runs of one source.

    `floor` is never undercut. `learned_sd` is the pooled between-run sd of every source the run measured
    more than once, scaled by t(dof)/z at the test's confidence because it is itself an estimate; when it
    is present it replaces the per-trial spread (that spread is already pooled into it).
    """

    floor: float = DEFAULT_NOISE_FLOOR
    learned_sd: float | None = None
    raw_sd: float | None = None
    dof: int = 0

    def as_dict(self) -> dict[str, float | int | None]:
        return {"floor": self.floor, "learned_sd": self.learned_sd, "raw_sd": self.raw_sd, "dof": self.dof}

    def describe(self) -> str:
        if self.learned_sd is None:
            return f"assumed floor {self.floor:.2%}"
        return f"learned {self.raw_sd:.2%} over {self.dof} dof -> {self.learned_sd:.2%} at the test's confidence"


def noise_from_history(groups_by_case: dict[str, list[list[float]]], *, confidence: float = 0.99,
                       floor: float = DEFAULT_NOISE_FLOOR, min_dof: int = 2) -> BetweenRunNoise:
    """The between-run noise learnt from repeated sources: the worst case's pooled sd, t-inflated.

    `groups_by_case[case_id]` holds, per source measured more than once, the medians of its runs. With
    fewer than `min_dof` degrees of freedom in every case nothing is learnt and the floor stands alone.
    """
    z = NormalDist().inv_cdf(confidence)
    worst: BetweenRunNoise | None = None
    for groups in groups_by_case.values():
        sd, dof = pooled_between_run_sd(groups)
        if dof < min_dof:
            continue
        inflated = sd * student_t_quantile(confidence, dof) / z
        if worst is None or inflated > (worst.learned_sd or 0.0):
            worst = BetweenRunNoise(floor=floor, learned_sd=inflated, raw_sd=sd, dof=dof)
    return worst or BetweenRunNoise(floor=floor)


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
