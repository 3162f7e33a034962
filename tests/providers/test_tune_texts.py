"""What the tuner's proposals say is true: program counts from the real grid, decisions as the run recorded them,
and an exhausted tuner that says what it looked for and which edit would expose a knob."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import trio

from orchestrator.providers.base import Proposal, ProviderExhausted
from orchestrator.providers.tune import TuneProvider, find_knobs
from protocol.results import DecisionStatus, EvaluationStatus
from tests.providers.conftest import VECTOR_ADD, context, evaluation
from tests.providers.test_tune import digest_record, knob_values

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SOFTMAX = (EXAMPLES / "softmax/kernel.py").read_text()
MATMUL = (EXAMPLES / "matmul/kernel.py").read_text()

# The grids the example kernels launch, written out by hand, on sizes much larger than any block
LARGE = 1 << 24
GRIDS = {
    "vector_add": lambda knobs: math.ceil(LARGE / knobs["BLOCK_SIZE"]),
    "softmax": lambda knobs: 4096,  # one program per row, whatever the column tile
    "matmul": lambda knobs: math.ceil(LARGE / knobs["BLOCK_M"]) * math.ceil(LARGE / knobs["BLOCK_N"]),
}
SOURCES = {"vector_add": VECTOR_ADD, "softmax": SOFTMAX, "matmul": MATMUL}
SCALING_VERBS = ("halves", "quarters", "doubles", "quadruples", "divides", "multiplies")


def expected_programs_phrase(before: int, after: int) -> str:
    if before == after:
        return "keeps the number of programs"
    ratio = max(before, after) // min(before, after)
    if before > after:
        return {2: "halves the number of programs", 4: "quarters the number of programs"}.get(
            ratio, f"divides the number of programs by {ratio}")
    return {2: "doubles the number of programs", 4: "quadruples the number of programs"}.get(
        ratio, f"multiplies the number of programs by {ratio}")


def neutral_walk(source: str, limit: int = 400) -> list[Proposal]:
    """Every proposal the tuner makes from `source` while each one comes back rejected at 1.0x."""
    provider, proposals, history = TuneProvider(), [], []
    with pytest.raises(ProviderExhausted):
        for index in range(limit):
            proposal = trio.run(provider.propose, context(source=source, history=tuple(history),
                                                          round_index=index // 2 + 1, slot_index=index % 2))
            proposals.append(proposal)
            history.append(digest_record(f"r{index // 2 + 1:03d}-c{index % 2:03d}", proposal.source, speedup=1.0))
    return proposals


def moved_knob(before: str, after: str) -> str:
    (name,) = [name for name, value in knob_values(after).items() if knob_values(before)[name] != value]
    return name


@pytest.mark.parametrize("example", sorted(GRIDS))
def test_every_proposal_states_the_program_count_its_edit_gives(example):
    source, grid = SOURCES[example], GRIDS[example]
    kinds = {k.name: k.kind for k in find_knobs(source)}
    for proposal in neutral_walk(source):
        before, after = grid(knob_values(source)), grid(knob_values(proposal.source))
        name, hypothesis = moved_knob(source, proposal.source), proposal.metadata.hypothesis
        assert expected_programs_phrase(before, after) in hypothesis, hypothesis
        if before != after:  # the factor holds where a dimension spans many blocks, and the text says so
            sizes = knob_values(source)[name], knob_values(proposal.source)[name]
            assert f" on sizes much larger than {max(sizes)} and " in hypothesis, hypothesis
        if before == after:
            assert not any(verb in hypothesis for verb in SCALING_VERBS), hypothesis
            assert "fewer, larger programs" not in proposal.metadata.expected_effect
            if kinds[name] in ("block", "tile"):
                assert f"({name} is not in the launch grid)" in hypothesis


def test_a_stride_of_two_values_quarters_the_number_of_programs():
    provider = TuneProvider()
    source = VECTOR_ADD.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 512")
    doubled = trio.run(provider.propose, context(source=source))
    assert knob_values(doubled.source)["BLOCK_SIZE"] == 1024
    assert doubled.metadata.hypothesis.startswith("Raising BLOCK_SIZE from 512 to 1024 halves the number of programs")
    history = (digest_record("r001-c000", doubled.source, status=DecisionStatus.PROMOTED, speedup=1.3),)
    strided = trio.run(provider.propose, context(source=doubled.source, history=history, round_index=2))
    assert knob_values(strided.source)["BLOCK_SIZE"] == 4096
    assert strided.metadata.hypothesis.startswith(
        "Raising BLOCK_SIZE from 1024 to 4096 quarters the number of programs on sizes much larger than 4096 and ")


def test_sizes_outside_the_grid_and_warps_keep_the_program_count():
    softmax = trio.run(TuneProvider().propose, context(source=SOFTMAX))
    assert knob_values(softmax.source)["BLOCK_SIZE"] == 64
    assert softmax.metadata.hypothesis.startswith(
        "Raising BLOCK_SIZE from 32 to 64 keeps the number of programs (BLOCK_SIZE is not in the launch grid)")
    walk = {(moved_knob(MATMUL, p.source), knob_values(p.source)[moved_knob(MATMUL, p.source)]): p
            for p in neutral_walk(MATMUL)}
    assert walk[("BLOCK_K", 64)].metadata.hypothesis.startswith(
        "Raising BLOCK_K from 32 to 64 keeps the number of programs (BLOCK_K is not in the launch grid)")
    assert walk[("NUM_WARPS", 4)].metadata.hypothesis.startswith(
        "Raising NUM_WARPS from 2 to 4 keeps the number of programs and")
    assert walk[("BLOCK_N", 128)].metadata.hypothesis.startswith(
        "Raising BLOCK_N from 32 to 128 quarters the number of programs")


def test_a_rejected_step_is_never_called_helped_even_when_it_measured_faster():
    # the H200 softmax run: 32 -> 64 promoted, 64 -> 256 promoted, 256 -> 1024 at 1.013x rejected (not above noise)
    provider = TuneProvider()
    first = trio.run(provider.propose, context(source=SOFTMAX))
    history = [digest_record("r001-c000", first.source, status=DecisionStatus.PROMOTED, speedup=1.081)]
    second = trio.run(provider.propose, context(source=first.source, history=tuple(history), round_index=2))
    assert knob_values(second.source)["BLOCK_SIZE"] == 256
    history.append(digest_record("r002-c000", second.source, status=DecisionStatus.PROMOTED, speedup=1.439))
    third = trio.run(provider.propose, context(source=second.source, history=tuple(history), round_index=3))
    assert knob_values(third.source)["BLOCK_SIZE"] == 1024
    history.append(digest_record("r003-c000", third.source, status=DecisionStatus.REJECTED, speedup=1.013,
                                 reason="gain not above noise"))
    fourth = trio.run(provider.propose, context(source=second.source, history=tuple(history), round_index=4))
    evidence = fourth.metadata.evidence
    assert "BLOCK_SIZE 256->1024 rejected at 1.013x" in evidence, evidence
    assert "BLOCK_SIZE 64->256 promoted at 1.439x" in evidence, evidence
    assert all("helped" not in text for text in fourth.metadata.model_dump().values())


def test_a_slot_measured_against_a_newer_incumbent_says_against_which():
    # the CPU demo: both slots of round 1 move BLOCK_SIZE from 1024; slot 0 (-> 2048) is promoted first, so slot 1
    # (-> 4096) is measured against r001-c000, and its 1.739x is a gain over 2048, not over 1024
    provider = TuneProvider()
    source = VECTOR_ADD.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 1024")
    first = trio.run(provider.propose, context(source=source))
    second = trio.run(provider.propose, context(source=source, slot_index=1))
    assert (knob_values(first.source)["BLOCK_SIZE"], knob_values(second.source)["BLOCK_SIZE"]) == (2048, 4096)
    history = (digest_record("r001-c000", first.source, status=DecisionStatus.PROMOTED, speedup=1.939),
               digest_record("r001-c001", second.source, status=DecisionStatus.PROMOTED, speedup=1.739
                             ).model_copy(update={"parent_id": "r001-c000"}))
    later = trio.run(provider.propose, context(source=second.source, history=history, round_index=2))
    assert "BLOCK_SIZE 1024->2048 promoted at 1.939x, BLOCK_SIZE 1024->4096 promoted at 1.739x vs r001-c000" \
        in later.metadata.evidence, later.metadata.evidence


def test_a_failed_build_is_noted_with_the_workers_status():
    provider = TuneProvider()
    first = trio.run(provider.propose, context())
    broken = evaluation("candidate", {}, status=EvaluationStatus.BUILD_FAILED, reason="out of resources")
    history = (digest_record("r001-c000", first.source, status=DecisionStatus.FAILED, speedup=None,
                             evaluations=[broken]),)
    again = trio.run(provider.propose, context(history=history, round_index=2))
    assert "BLOCK_SIZE 64->128 failed (build_failed)" in again.metadata.evidence

