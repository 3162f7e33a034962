"""Where each budget value comes from: the target's kind, the flags given, budget.json."""

from __future__ import annotations

import pytest

from orchestrator.bundle.budget import resolve_budget
from protocol.bundle import INTERPRETER_BUDGET, Budget, BundleError, Target

GPU = Target(backend="cuda", architecture="h200", device="cuda:0")
INTERPRETER = Target(backend="cpu", architecture="interpreter", device="cpu", environment={"TRITON_INTERPRET": "1"})
NO_FLAGS = dict.fromkeys(Budget.model_fields)


def test_a_gpu_target_gets_the_standard_defaults_from_nowhere_else():
    budget, sources = resolve_budget(GPU, NO_FLAGS, {})
    assert budget == Budget()
    assert set(sources.values()) == {"default"}


def test_an_interpreter_target_gets_its_stated_cv_gate_and_says_so():
    budget, sources = resolve_budget(INTERPRETER, NO_FLAGS, {})
    assert budget.max_cv == INTERPRETER_BUDGET["max_cv"] == 2.0
    assert sources["max_cv"] == "interpreter default"
    assert budget.min_speedup == Budget().min_speedup and sources["min_speedup"] == "default"


def test_an_interpreter_that_is_switched_off_is_not_an_interpreter():
    target = Target(backend="cuda", architecture="h200", device="cuda:0", environment={"TRITON_INTERPRET": "0"})
    assert resolve_budget(target, NO_FLAGS, {})[0].max_cv == Budget().max_cv


def test_a_flag_beats_the_interpreter_default_and_budget_json_beats_a_flag():
    budget, sources = resolve_budget(INTERPRETER, {**NO_FLAGS, "max_cv": 0.3, "max_rounds": 2}, {"max_rounds": 7})
    assert (budget.max_cv, sources["max_cv"]) == (0.3, "command line")
    assert (budget.max_rounds, sources["max_rounds"]) == (7, "budget.json")


def test_an_invalid_value_is_one_message_naming_the_flag_as_typed():
    with pytest.raises(BundleError, match=r"^--max-cv -1: input should be greater than or equal to 0 \(see --help\)$"):
        resolve_budget(GPU, {**NO_FLAGS, "max_cv": -1.0}, {})
    with pytest.raises(BundleError, match=r"^--max-rounds 0: input should be greater than 0 \(see --help\)$"):
        resolve_budget(GPU, {**NO_FLAGS, "max_rounds": 0}, {})
