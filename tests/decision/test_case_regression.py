"""The per-case regression gate: no promotion that slows a protected case beyond its noise.

Recorded runs used here (docs/data):
- h200-records-2026-12-01/softmax_tune: the tuned softmax whose r003-c000 was promoted at 1.0140x while its
  ragged_3001x777 case ran at 0.891x (the report in docs/screenshots/report-softmax_tune.png);
- measurement-study-2 and measurement-study-3: real H200 runs of A/A candidates and of known 2/3/5 % gains,
  decided again by `orchestrator/decision/study.py` (`tlx-agent simulate DIR`).
"""

from __future__ import annotations

import math
import random

import pytest

from orchestrator.bundle.budget import resolve_budget
from orchestrator.decision.gates import decide, needs_confirmation
from orchestrator.decision.noise import BetweenRunNoise, RunMedians
from orchestrator.decision.referee import Referee, Rules, Ruling
from orchestrator.decision.simulate import simulate_run
from orchestrator.decision.statistics import sample_stats
from orchestrator.decision.study import analyse
from orchestrator.ledger.records import load_records, load_study
from protocol.bundle import Budget, BundleError, Case, Target
from protocol.results import CaseMeasurement, DecisionStatus, Evaluation, EvaluationStatus
from protocol.roles import Role
from tests.conftest import PROJECT_ROOT

DATA = PROJECT_ROOT / "docs" / "data"
SOFTMAX_TUNE = DATA / "h200-records-2026-12-01" / "softmax_tune"
QUIET, RAGGED = Case(case_id="quiet", weight=2.0), Case(case_id="ragged")


def run(label: str, medians: dict[str, float], rng: random.Random, cv: float = 0.002) -> Evaluation:
    cases = []
    for case_id, median in medians.items():
        samples = [median * (1.0 + rng.gauss(0.0, cv)) for _ in range(30)]
        cases.append(CaseMeasurement(case_id=case_id, protected=True, weight=1.0, correct=True, samples_us=samples,
                                     stats=sample_stats(samples)))
    return Evaluation(label=label, status=EvaluationStatus.OK, cases=cases)


def triple(candidate: dict[str, float], seed: int = 1) -> tuple[list[Evaluation], list[Evaluation]]:
    rng = random.Random(seed)
    incumbent = {"quiet": 100.0, "ragged": 20.0}
    return [run("candidate", candidate, rng)], [run("incumbent", incumbent, rng), run("incumbent", incumbent, rng)]


# ---- the gate in `decide` --------------------------------------------------------------------------------


def test_a_gain_bought_with_a_slower_protected_case_is_rejected_naming_the_case():
    candidates, incumbents = triple({"quiet": 90.0, "ragged": 22.0})  # quiet 1.111x (weight 2), ragged 0.909x
    verdict = decide([QUIET, RAGGED], candidates, incumbents, Budget())
    assert verdict.aggregate_speedup > 1.03
    assert verdict.decision.status is DecisionStatus.REJECTED
    assert verdict.decision.gates["case_regression"] is False
    assert all(passed for gate, passed in verdict.decision.gates.items() if gate != "case_regression")
    upper = verdict.test.per_case["ragged"].upper
    assert upper < 0.98
    assert verdict.decision.reason.startswith("protected case slower by more than 2%: ragged: 0.909x, upper bound "
                                              f"{upper:.3f}x < 0.98 (aggregate ")
    assert not needs_confirmation(verdict)  # slower beyond its noise: more runs would not lift it


def test_an_unprotected_case_may_get_slower():
    candidates, incumbents = triple({"quiet": 90.0, "ragged": 22.0})
    verdict = decide([QUIET, Case(case_id="ragged", protected=False)], candidates, incumbents, Budget())
    assert verdict.decision.status is DecisionStatus.PROMOTED and verdict.decision.gates["case_regression"]


def test_the_allowance_is_a_budget_value_and_one_turns_the_gate_off():
    candidates, incumbents = triple({"quiet": 90.0, "ragged": 22.0})
    assert decide([QUIET, RAGGED], candidates, incumbents, Budget(max_case_regression=0.15)).decision.status \
        is DecisionStatus.PROMOTED  # a 9 % loss is inside a 15 % allowance
    off = decide([QUIET, RAGGED], candidates, incumbents, Budget(max_case_regression=1.0))
    assert off.decision.status is DecisionStatus.PROMOTED and off.undecided_cases == ()


def test_a_loss_inside_the_allowance_passes_without_more_runs():
    candidates, incumbents = triple({"quiet": 90.0, "ragged": 20.2})  # ragged 0.990x: within 2 %
    verdict = decide([QUIET, RAGGED], candidates, incumbents, Budget())
    assert verdict.decision.status is DecisionStatus.PROMOTED and verdict.undecided_cases == ()
    assert not needs_confirmation(verdict)


def test_a_case_that_may_be_slower_within_wide_noise_gets_confirmation_pairs():
    """Early in a run the learnt noise is wide: a 5 % loss whose upper bound still reaches 0.98 is measured again
    before the promotion, and the promotion stands only if the bound still allows it."""
    candidates, incumbents = triple({"quiet": 80.0, "ragged": 21.0})  # ragged 0.952x
    wide = BetweenRunNoise(learned_sd=0.03, raw_sd=0.02, dof=2, by_case={"quiet": 0.003, "ragged": 0.03})
    verdict = decide([QUIET, RAGGED], candidates, incumbents, Budget(), noise=wide)
    assert verdict.decision.status is DecisionStatus.PROMOTED and verdict.undecided_cases == ("ragged",)
    assert "possibly slower, within noise: ragged: 0.952x, upper bound " in verdict.decision.reason
    assert needs_confirmation(verdict)
    # two more pairs and a run's worth of history later the noise is narrow: the loss is beyond it
    rng = random.Random(9)
    for _ in range(2):
        candidates.append(run("candidate", {"quiet": 80.0, "ragged": 21.0}, rng))
        incumbents.append(run("incumbent", {"quiet": 100.0, "ragged": 20.0}, rng))
    narrow = BetweenRunNoise(learned_sd=0.004, raw_sd=0.003, dof=12, by_case={"quiet": 0.002, "ragged": 0.004})
    again = decide([QUIET, RAGGED], candidates, incumbents, Budget(), noise=narrow)
    assert again.decision.status is DecisionStatus.REJECTED and again.decision.gates["case_regression"] is False
    assert not needs_confirmation(again)


def test_the_confirmation_pairs_are_measured_until_an_undecided_case_is_decided():
    """The product's referee (as the run and `simulate` drive it): early in a run the noise is learnt from three runs
    of the incumbent, two degrees of freedom, and t(2) triples it; a promotion held for a possibly slower case
    measures one more pair, learns narrower noise from it, and turns the candidate down."""
    rng = random.Random(0)
    history = RunMedians()
    for ragged in (20.0, 20.3, 19.8):
        history = history.with_run("incumbent", run("incumbent", {"quiet": 100.0, "ragged": ragged}, rng))
    judge = Referee(Rules(cases=(QUIET, RAGGED), budget=Budget()))
    state = judge.start(role=Role.CANDIDATE, test_seed=1, history=history, digests=("candidate", "incumbent"))
    while not isinstance(ruling := judge.next(state), Ruling):
        medians = {"quiet": 80.0, "ragged": 21.0} if ruling.side == "candidate" else {"quiet": 100.0, "ragged": 20.0}
        state = judge.measured(state, run(ruling.role.value, medians, rng), math.inf)
    first, verdict = ruling.verdicts[0], ruling.verdict
    assert first.decision.status is DecisionStatus.PROMOTED and first.undecided_cases == ("ragged",)
    assert ruling.pairs == 1
    assert [e.label for e in ruling.runs] == ["incumbent", "candidate", "incumbent", "candidate", "incumbent"]
    assert ruling.notes == () and ruling.noise.dof == 6
    assert verdict.decision.status is DecisionStatus.REJECTED and "ragged: 0.95" in verdict.decision.reason


def test_a_noise_limited_candidate_with_a_slower_case_is_not_extended():
    candidates, incumbents = triple({"quiet": 98.5, "ragged": 22.0})
    verdict = decide([QUIET, RAGGED], candidates, incumbents, Budget(min_speedup=1.0))
    assert verdict.decision.gates["case_regression"] is False
    assert not needs_confirmation(verdict)


def test_a_failed_incumbent_run_still_rejects_a_candidate_its_runs_show_slower():
    candidates, incumbents = triple({"quiet": 90.0, "ragged": 22.0})
    cut = Evaluation(label="incumbent", status=EvaluationStatus.TIMEOUT, reason="the run's deadline", cases=[])
    verdict = decide([QUIET, RAGGED], candidates, [*incumbents, cut], Budget())
    assert verdict.decision.status is DecisionStatus.REJECTED
    assert "ragged: 0.909x" in verdict.decision.reason and "incumbent run(s)" in verdict.decision.reason


# ---- where the allowance comes from ----------------------------------------------------------------------


def test_target_json_sets_the_allowance_and_a_flag_or_budget_json_overrides_it():
    target = Target(backend="cuda", architecture="h200", max_case_regression=0.05)
    budget, sources = resolve_budget(target, {}, {})
    assert (budget.max_case_regression, sources["max_case_regression"]) == (0.05, "target.json")
    budget, sources = resolve_budget(target, {"max_case_regression": 0.01}, {})
    assert (budget.max_case_regression, sources["max_case_regression"]) == (0.01, "command line")
    budget, sources = resolve_budget(target, {"max_case_regression": 0.01}, {"max_case_regression": 0.03})
    assert (budget.max_case_regression, sources["max_case_regression"]) == (0.03, "budget.json")
    budget, sources = resolve_budget(Target(backend="cuda", architecture="h200"), {}, {})
    assert (budget.max_case_regression, sources["max_case_regression"]) == (0.02, "default")


def test_a_bad_allowance_on_the_command_line_names_the_flag():
    with pytest.raises(BundleError, match=r"^--max-case-regression 1\.5: input should be less than or equal to 1 "):
        resolve_budget(Target(backend="cpu", architecture="cpu"), {"max_case_regression": 1.5}, {})


# ---- recorded runs ---------------------------------------------------------------------------------------


def test_the_softmax_report_candidate_that_slowed_ragged_3001x777_is_rejected():
    records = load_records(SOFTMAX_TUNE)
    replay = simulate_run(records.experiments, records.cases, settings=records.settings)
    r003 = next(row for row in replay.experiments if row.experiment_id == "r003-c000")
    assert r003.recorded.status is DecisionStatus.PROMOTED and r003.recorded.aggregate_speedup > 1.01
    assert r003.simulated.status is DecisionStatus.REJECTED
    assert r003.simulated.gates["case_regression"] is False
    assert r003.simulated.reason.startswith("protected case slower by more than 2%: ragged_3001x777: 0.89")
    assert "< 0.98" in r003.simulated.reason
    # decided without the gate, the record is reproduced: the gate alone changes it
    assert r003.new_gates == ["case_regression"] and r003.reproduced_without_new_gates is True
    assert replay.diverges_at == "r003-c000" and replay.all_reproduced and not replay.all_match
    changed = [row.experiment_id for row in replay.experiments if row.simulated.status != row.recorded.status]
    assert changed == ["r003-c000"]


@pytest.fixture(scope="module")
def studies():
    return {name: analyse(load_study(DATA / name), trials=60, seed=7)
            for name in ("measurement-study-2", "measurement-study-3")}


@pytest.mark.parametrize("name", ["measurement-study-2", "measurement-study-3"])
def test_no_recorded_a_a_candidate_is_touched_by_the_gate(studies, name):
    for example, cells in studies[name].outcomes.items():
        aa = cells["aa"]
        assert aa.case_gate_failed == 0, example
        assert aa.promoted == aa.promoted_without_case_gate, example


@pytest.mark.parametrize("name", ["measurement-study-2", "measurement-study-3"])
def test_the_recorded_three_percent_gains_are_still_promoted(studies, name):
    for example, cells in studies[name].outcomes.items():
        gain = cells["T3"]
        assert gain.promoted == gain.trials == gain.promoted_without_case_gate, example
        assert gain.case_gate_failed == 0, example


def test_a_three_percent_loss_hidden_in_an_aggregate_gain_is_rejected(studies):
    hidden = studies["measurement-study-3"].outcomes["combined"]["hidden_regression"]
    assert hidden.promoted == 0 and hidden.case_gate_failed == hidden.trials
    assert hidden.promoted_without_case_gate >= 0.9 * hidden.trials  # what the aggregate alone would promote


def test_on_the_recorded_studies_reusing_the_incumbent_run_decides_as_three_fresh_runs_do():
    """Trials triaged against a drawn incumbent run and decided on it and one more (the run's default): no A/A
    candidate promoted, every recorded 3 % gain found, the hidden 3 % loss rejected."""
    study = analyse(load_study(DATA / "measurement-study-3"), trials=60, seed=7, reuse_incumbent_run=True)
    assert study.reuse_incumbent_run
    for example, cells in study.outcomes.items():
        assert cells["aa"].promoted == 0, example
        assert cells["T3"].promoted == cells["T3"].trials, example
    assert study.outcomes["combined"]["hidden_regression"].promoted == 0
