"""The between-run noise the run learns from repeated measurements of unchanged sources."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from orchestrator.decision.bootstrap import promotion_test
from orchestrator.decision.noise import DEFAULT_NOISE_FLOOR, BetweenRunNoise, noise_from_history
from orchestrator.decision.statistics import (
    pooled_between_run_sd,
    student_t_quantile,
    student_t_two_sided_mass,
)


def test_pooled_sd_of_log_medians_known_values():
    # one group: logs 0 and ln(1.02); sd of two values = |diff| / sqrt(2)
    sd, dof = pooled_between_run_sd([[100.0, 102.0]])
    assert dof == 1
    assert sd == pytest.approx(math.log(1.02) / math.sqrt(2))
    # two groups pool their squared deviations over (n1 - 1) + (n2 - 1) degrees of freedom
    sd, dof = pooled_between_run_sd([[100.0, 102.0], [50.0, 50.0, 50.0]])
    assert dof == 3
    assert sd == pytest.approx(math.sqrt((math.log(1.02) ** 2 / 2) / 3))


def test_single_runs_teach_nothing():
    assert pooled_between_run_sd([[100.0], [5.0]]) == (0.0, 0)
    assert pooled_between_run_sd([]) == (0.0, 0)


@pytest.mark.parametrize(("probability", "dof", "table"), [
    (0.99, 1, 31.821), (0.99, 2, 6.965), (0.99, 3, 4.541), (0.99, 5, 3.365), (0.99, 10, 2.764),
    (0.99, 30, 2.457), (0.999, 3, 10.215), (0.95, 4, 2.132), (0.975, 12, 2.179), (0.01, 7, -2.998),
])
def test_student_t_quantiles_match_the_printed_table(probability, dof, table):
    assert student_t_quantile(probability, dof) == pytest.approx(table, abs=6e-4)


def test_student_t_tends_to_the_normal_and_rejects_bad_input():
    assert student_t_quantile(0.99, 2000) == pytest.approx(NormalDist().inv_cdf(0.99), rel=2e-3)
    assert student_t_quantile(0.5, 3) == 0.0
    assert student_t_two_sided_mass(0.0, 4) == 0.0
    assert student_t_two_sided_mass(1e9, 5) == pytest.approx(1.0)
    for bad in ((0.0, 3), (1.0, 3), (0.9, 0)):
        with pytest.raises(ValueError):
            student_t_quantile(*bad)


def test_learned_noise_is_the_worst_case_inflated_by_t_over_z():
    quiet = {"a": [[100.0, 100.01, 99.99]]}
    learned = noise_from_history(quiet)
    assert learned.floor == DEFAULT_NOISE_FLOOR and learned.dof == 2
    drifting = {"a": [[100.0, 100.01, 99.99]], "b": [[1000.0, 1016.0, 992.0], [500.0, 503.0]]}
    sd, dof = pooled_between_run_sd(drifting["b"])
    learned = noise_from_history(drifting, confidence=0.99)
    assert (learned.raw_sd, learned.dof) == (pytest.approx(sd), dof)
    assert learned.learned_sd == pytest.approx(sd * student_t_quantile(0.99, dof) / NormalDist().inv_cdf(0.99))
    assert "learned" in learned.describe() and learned.as_dict()["dof"] == 3


def test_too_few_repeats_learn_nothing():
    assert noise_from_history({"a": [[100.0, 130.0]]}, min_dof=2) == BetweenRunNoise()
    assert noise_from_history({"a": [[100.0, 130.0]]}, min_dof=1).learned_sd > 0.1
    assert "assumed floor" in BetweenRunNoise().describe()


def test_a_learned_sd_replaces_the_trials_own_spread_but_never_undercuts_the_floor():
    incumbent = {"c": [[100.0] * 20, [101.0] * 20]}  # the incumbent disagrees with itself by 1 %
    candidate = {"c": [[98.0] * 20]}
    weights = {"c": 1.0}
    assumed = promotion_test(candidate, incumbent, weights, 1.0, noise_floor=0.002)
    learned_small = promotion_test(candidate, incumbent, weights, 1.0, noise_floor=0.002, learned_sd=0.001)
    learned_large = promotion_test(candidate, incumbent, weights, 1.0, noise_floor=0.002, learned_sd=0.02)
    # hypot(floor, 0.7 % observed) > max(floor, 0.1 %) = floor, and a 2 % learned sd is the widest
    assert learned_large.noise_estimate > assumed.noise_estimate > learned_small.noise_estimate
    floor_only = promotion_test(candidate, incumbent, weights, 1.0, noise_floor=0.002, learned_sd=0.0)
    assert floor_only.noise_estimate == pytest.approx(learned_small.noise_estimate, rel=0.1)
    assert "learned" in learned_large.method
    with pytest.raises(ValueError, match="learned_sd"):
        promotion_test(candidate, incumbent, weights, 1.0, learned_sd=float("nan"))
