"""The between-run noise the run learns from repeated measurements of unchanged sources."""

from __future__ import annotations

import math

import pytest

from orchestrator.policy import DEFAULT_NOISE_FLOOR, noise_floor_from_history
from orchestrator.statistics import pooled_between_run_sd


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


def test_noise_floor_never_below_the_default_and_takes_the_worst_case():
    quiet = {"a": [[100.0, 100.01, 99.99]]}
    assert noise_floor_from_history(quiet) == DEFAULT_NOISE_FLOOR
    drifting = {"a": [[100.0, 100.01, 99.99]], "b": [[1000.0, 1016.0, 992.0]]}
    expected, _ = pooled_between_run_sd(drifting["b"])
    assert expected > DEFAULT_NOISE_FLOOR
    assert noise_floor_from_history(drifting) == pytest.approx(expected)


def test_too_few_repeats_keep_the_assumed_floor():
    assert noise_floor_from_history({"a": [[100.0, 130.0]]}, min_dof=2) == DEFAULT_NOISE_FLOOR
    assert noise_floor_from_history({"a": [[100.0, 130.0]]}, min_dof=1) > 0.1
