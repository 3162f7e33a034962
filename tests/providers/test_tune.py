"""The offline tuner: knob discovery, one-line edits, evidence-driven choice, no repeats, exhaustion."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
from pathlib import Path

import pytest
import trio

from orchestrator.providers.base import ProviderExhausted
from orchestrator.providers.tune import DOMAINS, TuneProvider, find_knobs
from orchestrator.source_digest import normalized_digest
from protocol.results import DecisionStatus, EvaluationStatus
from tests.providers.conftest import MATMUL, VECTOR_ADD, context, evaluation, record

AUTOTUNED = '''\
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 128}, num_warps=4, num_stages=2),
        triton.Config({"BLOCK_SIZE": 256}, num_warps=8),
    ],
    key=["n"],
)
@triton.jit
def scale_kernel(x_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)


def scale(x):
    scale_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK_SIZE"]),)](x, x.numel())
    return x
'''


def changed_lines(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def block_size(source: str) -> int:
    return next(k.value for k in find_knobs(source) if k.name == "BLOCK_SIZE")


def digest_record(experiment_id: str, source: str, **kwargs):
    return record(experiment_id, source=hashlib.sha256(source.encode()).hexdigest(),
                  normalized=normalized_digest(source), **kwargs)


def test_finds_knobs_of_vector_add_and_matmul():
    (knob,) = find_knobs(VECTOR_ADD)
    assert (knob.name, knob.kind, knob.origin, knob.value, knob.line) == ("BLOCK_SIZE", "block", "constant", 64, 5)
    matmul = {k.name: k for k in find_knobs(MATMUL)}
    assert set(matmul) == {"GROUP_M", "BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"}
    assert (matmul["BLOCK_M"].kind, matmul["BLOCK_M"].origin, matmul["BLOCK_K"].value) == ("tile", "launch", 32)
    assert (matmul["GROUP_M"].kind, matmul["num_warps"].kind, matmul["num_stages"].value) == ("group", "warps", 3)


def test_finds_autotune_config_entries():
    knobs = find_knobs(AUTOTUNED)
    assert [(k.key, k.value) for k in knobs] == [
        ("config:BLOCK_SIZE#0", 128), ("config:num_warps#0", 4), ("config:num_stages#0", 2),
        ("config:BLOCK_SIZE#1", 256), ("config:num_warps#1", 8),
    ]


def test_first_proposal_doubles_block_size_with_a_one_line_patch():
    proposal = trio.run(TuneProvider().propose, context())
    assert changed_lines(VECTOR_ADD, proposal.source) == ["-BLOCK_SIZE = 64", "+BLOCK_SIZE = 128"]
    metadata = proposal.metadata
    assert "BLOCK_SIZE from 64 to 128" in metadata.hypothesis
    assert "4210" in metadata.evidence  # the dominant case's measured median
    assert metadata.change.startswith("BLOCK_SIZE 64 -> 128")
    assert metadata.expected_effect and metadata.risk
    # the configuration it states, by the names the infeasible store knows (the run refuses a ruled-out one)
    assert proposal.configuration is not None and proposal.configuration["BLOCK_SIZE"] == 128


def test_excluded_configurations_are_never_proposed():
    doubled = VECTOR_ADD.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 128")
    excluded = frozenset({normalized_digest(doubled)})
    proposal = trio.run(TuneProvider().propose, context(excluded=excluded))
    assert normalized_digest(proposal.source) not in excluded
    assert block_size(proposal.source) not in (64, 128)


def test_two_slots_of_one_round_propose_different_changes():
    provider = TuneProvider()

    async def both():
        return [await provider.propose(context(slot_index=slot)) for slot in (0, 1)]

    first, second = trio.run(both)
    assert first.source != second.source
    assert block_size(first.source) != block_size(second.source)


def test_regressed_direction_is_not_pushed_further():
    provider = TuneProvider()
    first = trio.run(provider.propose, context())
    assert block_size(first.source) == 128
    history = (digest_record("r001-c000", first.source, speedup=0.8),)
    second = trio.run(provider.propose, context(history=history, round_index=2))
    assert block_size(second.source) == 32
    assert "BLOCK_SIZE 64->128 rejected at 0.800x" in second.metadata.evidence


def test_a_direction_that_slowed_a_protected_case_is_not_followed_though_the_aggregate_was_faster():
    provider = TuneProvider()
    first = trio.run(provider.propose, context())
    assert block_size(first.source) == 128
    slowed = digest_record("r001-c000", first.source, speedup=1.04,
                           reason="protected case slower by more than 2%: large: 0.91x")
    slowed.decision.gates.update({"correct": True, "speedup": True, "case_regression": False})
    second = trio.run(provider.propose, context(history=(slowed,), round_index=2))
    assert block_size(second.source) == 32  # the other way, as after any regression; not 256 further up


def test_broken_candidate_blocks_its_direction():
    provider = TuneProvider()
    first = trio.run(provider.propose, context())
    broken = evaluation("candidate", {}, status=EvaluationStatus.BUILD_FAILED, reason="out of resources")
    history = (digest_record("r001-c000", first.source, status=DecisionStatus.FAILED, speedup=None,
                             evaluations=[broken]),)
    assert block_size(trio.run(provider.propose, context(history=history, round_index=2)).source) == 32


def test_bottleneck_evidence_steers_the_direction_and_success_keeps_it():
    spill = evaluation("incumbent", {"large": 500.0},
                       {"large": {"ncu": {"local_load_bytes": 8192, "local_store_bytes": 4096}}})
    provider = TuneProvider()
    first = trio.run(provider.propose, context(incumbent=spill))
    assert block_size(first.source) == 32 and "spill" in first.metadata.evidence

    # An earlier doubling that was promoted keeps the tuner going upward even under spill evidence, and
    # with a longer stride: it skips 256 and proposes 512.
    upward = TuneProvider()
    doubled = trio.run(upward.propose, context())
    history = (digest_record("r001-c000", doubled.source, status=DecisionStatus.PROMOTED, speedup=1.4),)
    next_proposal = trio.run(upward.propose, context(source=doubled.source, incumbent=spill, history=history,
                                                     round_index=2))
    assert block_size(next_proposal.source) == 512
    assert "BLOCK_SIZE 64->128 promoted at 1.400x" in next_proposal.metadata.evidence


def test_a_stride_that_overshoots_falls_back_to_the_skipped_value():
    provider = TuneProvider()
    doubled = trio.run(provider.propose, context())  # 64 -> 128
    history = [digest_record("r001-c000", doubled.source, status=DecisionStatus.PROMOTED, speedup=1.5)]
    strided = trio.run(provider.propose, context(source=doubled.source, history=tuple(history), round_index=2))
    assert block_size(strided.source) == 512  # 256 skipped
    history.append(digest_record("r002-c000", strided.source, speedup=0.9))  # overshoot: slower than 128
    back = trio.run(provider.propose, context(source=doubled.source, history=tuple(history), round_index=3))
    assert block_size(back.source) == 256  # the skipped value, below the regression
    assert "BLOCK_SIZE 128->512 rejected at 0.900x" in back.metadata.evidence


def run_neutral_loop(source: str, limit: int = 200) -> list[str]:
    """Feed every proposal back as a rejected, neutral experiment until the tuner is exhausted."""
    provider = TuneProvider()
    sources, history = [], []
    with pytest.raises(ProviderExhausted):
        for index in range(limit):
            proposal = trio.run(provider.propose, context(source=source, history=tuple(history),
                                                          round_index=index // 2 + 1, slot_index=index % 2))
            sources.append(proposal.source)
            history.append(digest_record(f"r{index // 2 + 1:03d}-c{index % 2:03d}", proposal.source, speedup=1.0))
    return sources


def test_vector_add_walks_every_block_size_once_then_exhausts():
    sources = run_neutral_loop(VECTOR_ADD)
    sizes = [block_size(source) for source in sources]
    assert sorted(sizes) == sorted(v for v in DOMAINS["block"] if v != 64)
    assert len(set(sources)) == len(sources)


def test_exhausts_quickly_when_both_directions_regress():
    provider = TuneProvider()
    history = []
    for index in range(2):
        proposal = trio.run(provider.propose, context(history=tuple(history), round_index=index + 1))
        history.append(digest_record(f"r{index + 1:03d}-c000", proposal.source, speedup=0.7))
    with pytest.raises(ProviderExhausted, match="no untried configuration"):
        trio.run(provider.propose, context(history=tuple(history), round_index=3))


def test_matmul_proposals_change_one_knob_within_bounds():
    sources = run_neutral_loop(MATMUL, limit=400)
    incumbent = {k.key: k.value for k in find_knobs(MATMUL)}
    seen = set()
    for source in sources:
        knobs = {k.key: k for k in find_knobs(source)}
        moved = [key for key, value in incumbent.items() if knobs[key].value != value]
        assert len(moved) == 1
        knob = knobs[moved[0]]
        assert knob.value in DOMAINS[knob.kind]
        assert len(changed_lines(MATMUL, source)) == 2
        seen.add(knob.name)
    assert seen == {"GROUP_M", "BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"}
    tiles = [k.value for s in sources for k in find_knobs(s) if k.kind == "tile"]
    assert max(tiles) == 256 and min(tiles) == 16


def test_source_without_knobs_is_exhausted_at_once():
    with pytest.raises(ProviderExhausted, match="no tunable knob"):
        trio.run(TuneProvider().propose, context(source="def f():\n    return 1\n"))


def test_matmul_first_choice_follows_compute_evidence():
    compute = evaluation("incumbent", {"large": 900.0},
                         {"large": {"ncu": {"sm_throughput_pct": 88.0, "dram_throughput_pct": 20.0}}})
    proposal = trio.run(TuneProvider().propose, context(source=MATMUL, incumbent=compute))
    assert changed_lines(MATMUL, proposal.source) and "compute" in proposal.metadata.hypothesis
    assert "BLOCK_M from 64 to 128" in proposal.metadata.hypothesis


def test_configurations_from_other_generators_are_not_repeated(tmp_path):
    replayed = tmp_path / "kernel.py"
    replayed.write_text(VECTOR_ADD.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 128  # from a replay"))
    history = (record("r001-c000", speedup=1.0, source_path=str(replayed)),)
    proposal = trio.run(TuneProvider().propose, context(history=history, round_index=2))
    assert block_size(proposal.source) == 256


def test_proposes_without_measurements_and_says_so():
    unmeasured = dataclasses.replace(context(), incumbent_evaluation=None, baseline_evaluation=None)
    proposal = trio.run(TuneProvider().propose, unmeasured)
    assert block_size(proposal.source) == 128
    assert "no incumbent evaluation" in proposal.metadata.evidence and "BLOCK_SIZE=64 at line 5" in proposal.metadata.evidence


EXAMPLE_MATMUL = (Path(__file__).resolve().parents[2] / "examples/matmul/kernel.py").read_text()


def knob_values(source: str) -> dict[str, int]:
    return {k.name: k.value for k in find_knobs(source)}


def test_a_tile_that_regressed_alone_is_grown_again_with_more_warps():
    # the H200 matmul run: BLOCK_M 32 -> 64 promoted; 64 -> 256 (stride) and 64 -> 128 regressed with 2 warps
    provider = TuneProvider()
    first = trio.run(provider.propose, context(source=EXAMPLE_MATMUL))
    assert knob_values(first.source)["BLOCK_M"] == 64
    history = [digest_record("r001-c000", first.source, status=DecisionStatus.PROMOTED, speedup=1.20)]
    incumbent = first.source
    strided = trio.run(provider.propose, context(source=incumbent, history=tuple(history), round_index=2))
    assert knob_values(strided.source)["BLOCK_M"] == 256
    history.append(digest_record("r002-c000", strided.source, speedup=0.23))
    back = trio.run(provider.propose, context(source=incumbent, history=tuple(history), round_index=3))
    assert knob_values(back.source)["BLOCK_M"] == 128 and knob_values(back.source)["NUM_WARPS"] == 2
    history.append(digest_record("r003-c000", back.source, speedup=0.48))

    paired = trio.run(provider.propose, context(source=incumbent, history=tuple(history), round_index=4))
    values = knob_values(paired.source)
    assert (values["BLOCK_M"], values["NUM_WARPS"]) == (128, 4)
    assert changed_lines(incumbent, paired.source) == ["-BLOCK_M = 64", "+BLOCK_M = 128", "-NUM_WARPS = 2",
                                                        "+NUM_WARPS = 4"]
    assert "together with NUM_WARPS from 2 to 4" in paired.metadata.hypothesis
    assert "BLOCK_M 64->128 rejected at 0.480x" in paired.metadata.evidence

    # the pair was promoted: the next step grows the pair again, from the new incumbent
    history.append(digest_record("r004-c000", paired.source, status=DecisionStatus.PROMOTED, speedup=1.3))
    again = trio.run(provider.propose, context(source=paired.source, history=tuple(history), round_index=5))
    assert "BLOCK_M 64->128 with NUM_WARPS 2->4 promoted at 1.300x" in again.metadata.evidence
    values = knob_values(again.source)
    assert (values["BLOCK_M"], values["NUM_WARPS"], values["BLOCK_N"]) == (256, 8, 32)


def test_a_pair_that_regressed_is_not_proposed_again_and_no_pair_without_evidence():
    provider = TuneProvider()
    first = trio.run(provider.propose, context(source=EXAMPLE_MATMUL))  # BLOCK_M 32 -> 64
    history = [digest_record("r001-c000", first.source, speedup=0.9)]  # regressed alone: blocks BLOCK_M up
    paired = trio.run(provider.propose, context(source=EXAMPLE_MATMUL, history=tuple(history), round_index=2))
    assert knob_values(paired.source)["NUM_WARPS"] == 4 and knob_values(paired.source)["BLOCK_M"] == 64
    history.append(digest_record("r002-c000", paired.source, speedup=0.95))
    later = trio.run(provider.propose, context(source=EXAMPLE_MATMUL, history=tuple(history), round_index=3))
    assert (knob_values(later.source)["BLOCK_M"], knob_values(later.source)["NUM_WARPS"]) != (64, 4)
    # neutral results never block a direction, so a neutral walk proposes no pair at all
    for source in run_neutral_loop(EXAMPLE_MATMUL, limit=400):
        assert sum(a != b for a, b in zip(knob_values(EXAMPLE_MATMUL).values(), knob_values(source).values(),
                                          strict=True)) == 1


def test_low_sm_and_memory_use_grows_the_block():
    # vector_add n64M on the H200 with 64-element blocks: SM 25 %, DRAM 26 %, occupancy 41 %
    starved = evaluation("incumbent", {"large": 636.3},
                         {"large": {"ncu": {"duration_us": 633.8, "dram_throughput_pct": 26.0, "sm_throughput_pct": 25.3,
                                            "achieved_occupancy_pct": 40.7, "registers_per_thread": 16}}})
    proposal = trio.run(TuneProvider().propose, context(incumbent=starved))
    assert block_size(proposal.source) == 128
    assert "synchronization" in proposal.metadata.evidence
