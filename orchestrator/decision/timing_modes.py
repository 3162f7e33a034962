"""One timing mode per case for the whole run, never the candidate's choice.

The worker's "auto" picks CUDA graphs for calls under ~20 µs and per-call events above; left to every worker,
a candidate could steer its own side into the mode it prefers (fast, skipped warm-up calls that read as short)
and two sides of one comparison could be timed differently. So the mode of a case is the case's own
`timing_mode` parameter when it has one, else what the run's first measurement of it chose (the untouched
kernel's), and every later worker of the run, candidate, incumbent and revalidation alike, is told that mode.
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence

from protocol.bundle import Case
from protocol.results import Evaluation, EvaluationStatus

MODES = ("events", "cuda_graph", "cpu")


def fixed_modes(cases: Sequence[Case], learnt: Mapping[str, str]) -> dict[str, str]:
    """Case id -> the mode its workers are told; a case missing here is measured with "auto"."""
    modes: dict[str, str] = {}
    for case in cases:
        given = case.parameters.get("timing_mode")
        if isinstance(given, str) and given in MODES:
            modes[case.case_id] = given
        elif case.case_id in learnt:
            modes[case.case_id] = learnt[case.case_id]
    return modes


def learn_modes(learnt: MutableMapping[str, str], evaluation: Evaluation) -> list[str]:
    """Note the mode of each case this evaluation measured first; returns the case ids learnt now."""
    if evaluation.status is not EvaluationStatus.OK:
        return []
    learnt_now = []
    for measured in evaluation.cases:
        mode = measured.metrics.get("benchmark.mode")
        if measured.stats is not None and isinstance(mode, str) and mode in MODES \
                and measured.case_id not in learnt:
            learnt[measured.case_id] = mode
            learnt_now.append(measured.case_id)
    return learnt_now
