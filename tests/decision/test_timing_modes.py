"""One timing mode per case for the whole run: the case's own, else the first measurement's; never a candidate's."""

from __future__ import annotations

from orchestrator.decision.timing_modes import fixed_modes, learn_modes
from protocol.bundle import Case
from protocol.results import CaseMeasurement, Evaluation, EvaluationStatus, SampleStats

CASES = [Case(case_id="small", parameters={"n": 4096}), Case(case_id="big", parameters={"n": 1 << 26}),
         Case(case_id="pinned", parameters={"n": 1 << 20, "timing_mode": "events"})]


def _evaluation(status=EvaluationStatus.OK, **modes: str) -> Evaluation:
    stats = SampleStats(n=10, median=1.0, p95=1.0, mean=1.0, stdev=0.0, cv=0.0, min=1.0, max=1.0)
    return Evaluation(label="candidate", status=status, cases=[
        CaseMeasurement(case_id=case_id, protected=True, weight=1.0, correct=True, stats=stats,
                        metrics={"benchmark.mode": mode}) for case_id, mode in modes.items()])


def test_the_first_measurement_fixes_each_case_and_a_later_one_cannot_change_it():
    learnt: dict[str, str] = {}
    assert fixed_modes(CASES, learnt) == {"pinned": "events"}  # the run's first workers: auto, but the case's own
    assert learn_modes(learnt, _evaluation(small="cuda_graph", big="events", pinned="events")) == \
        ["small", "big", "pinned"]
    # a candidate whose warm-up steered "auto" elsewhere (it is not asked: its worker is told the mode)
    assert learn_modes(learnt, _evaluation(small="events", big="cuda_graph")) == []
    assert fixed_modes(CASES, learnt) == {"small": "cuda_graph", "big": "events", "pinned": "events"}


def test_a_failed_evaluation_teaches_nothing():
    learnt: dict[str, str] = {}
    assert learn_modes(learnt, _evaluation(EvaluationStatus.CHEAT_DETECTED, small="cuda_graph")) == []
    assert learnt == {}
