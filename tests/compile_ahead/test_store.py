"""The JSON-lines store of infeasible configs: round trip, neighbours, torn lines, corruption."""

from __future__ import annotations

import pytest

from orchestrator.compile_ahead import (
    Feasibility,
    InfeasibleEntry,
    InfeasibleStore,
    StoreCorrupt,
    Verdict,
)

SCOPE = "matmul_kernel:0123456789abcdef:cuda:sm_90"
HUGE = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 4, "num_warps": 8}
OVER_SHARED = Feasibility(verdict=Verdict.INFEASIBLE, resource="shared memory",
                          reason="shared memory 262144 B > 232448 B limit (sm_90)")


def test_an_infeasible_config_round_trips_through_a_new_store(tmp_path):
    path = tmp_path / "state" / "infeasible.jsonl"
    written = InfeasibleStore(path).record(SCOPE, HUGE, OVER_SHARED, triton_version="3.6.0")
    assert written is not None
    (entry,) = InfeasibleStore(path).entries()
    assert entry == written
    assert (entry.knobs, entry.resource, entry.reason, entry.triton_version) == (
        HUGE, "shared memory", "shared memory 262144 B > 232448 B limit (sm_90)", "3.6.0")


def test_a_later_run_skips_the_config_and_its_larger_neighbours_only(tmp_path):
    path = tmp_path / "infeasible.jsonl"
    InfeasibleStore(path).record(SCOPE, HUGE, OVER_SHARED)
    later = InfeasibleStore(path)
    assert later.blocking(SCOPE, HUGE).reason == OVER_SHARED.reason
    assert later.blocking(SCOPE, {**HUGE, "BLOCK_K": 128}) is not None
    assert later.blocking(SCOPE, {**HUGE, "num_stages": 3}) is None
    assert later.blocking(SCOPE, {**HUGE, "num_warps": 4}) is not None  # warps do not change shared memory
    assert later.blocking("matmul_kernel:fedcba9876543210:cuda:sm_90", HUGE) is None


def test_a_register_excess_blocks_larger_neighbours_at_the_same_warps_only(tmp_path):
    store = InfeasibleStore(tmp_path / "infeasible.jsonl")
    store.record(SCOPE, HUGE, Feasibility(verdict=Verdict.INFEASIBLE, resource="registers",
                                          reason="registers: ptxas Insufficient registers (40)"))
    assert store.blocking(SCOPE, {**HUGE, "BLOCK_N": 512}) is not None
    assert store.blocking(SCOPE, {**HUGE, "num_warps": 16}) is None


def test_a_compile_error_blocks_only_its_own_config(tmp_path):
    store = InfeasibleStore(tmp_path / "infeasible.jsonl")
    store.record(SCOPE, HUGE, Feasibility(verdict=Verdict.INFEASIBLE, resource="compile",
                                          reason="CompilationError: at 12:8:"))
    assert store.blocking(SCOPE, HUGE) is not None
    assert store.blocking(SCOPE, {**HUGE, "BLOCK_K": 128}) is None


def test_feasible_and_unknown_verdicts_are_not_stored(tmp_path):
    store = InfeasibleStore(tmp_path / "infeasible.jsonl")
    assert store.record(SCOPE, HUGE, Feasibility(verdict=Verdict.FEASIBLE, reason="within sm_90 limits")) is None
    assert store.record(SCOPE, HUGE, Feasibility(verdict=Verdict.UNKNOWN, reason="timed out")) is None
    assert store.entries() == [] and not store.path.exists()


def test_the_same_config_is_written_once(tmp_path):
    store = InfeasibleStore(tmp_path / "infeasible.jsonl")
    store.record(SCOPE, HUGE, OVER_SHARED)
    store.record(SCOPE, dict(reversed(list(HUGE.items()))), OVER_SHARED)
    assert len(store.path.read_text().splitlines()) == 1


def test_a_torn_last_line_is_skipped_and_cut_before_the_next_entry(tmp_path):
    store = InfeasibleStore(tmp_path / "infeasible.jsonl")
    store.record(SCOPE, HUGE, OVER_SHARED)
    with store.path.open("a") as handle:
        handle.write('{"scope": "matmul_kernel:01234')
    assert len(store.entries()) == 1
    store.record(SCOPE, {**HUGE, "BLOCK_M": 512}, OVER_SHARED)
    assert [entry.knobs["BLOCK_M"] for entry in InfeasibleStore(store.path).entries()] == [256, 512]


def test_a_complete_last_entry_without_its_newline_is_kept(tmp_path):
    store = InfeasibleStore(tmp_path / "infeasible.jsonl")
    entry = InfeasibleEntry(scope=SCOPE, knobs=HUGE, resource="shared memory", reason=OVER_SHARED.reason)
    store.path.write_text(entry.model_dump_json())
    store.record(SCOPE, {**HUGE, "BLOCK_M": 512}, OVER_SHARED)
    assert [entry.knobs["BLOCK_M"] for entry in store.entries()] == [256, 512]


def test_a_corrupt_line_in_the_middle_is_an_error_naming_it(tmp_path):
    store = InfeasibleStore(tmp_path / "infeasible.jsonl")
    store.record(SCOPE, HUGE, OVER_SHARED)
    with store.path.open("a") as handle:
        handle.write("not json\n")
    with store.path.open("a") as handle:
        handle.write(InfeasibleEntry(scope=SCOPE, knobs=HUGE, resource="compile", reason="x").model_dump_json() + "\n")
    with pytest.raises(StoreCorrupt, match=r"infeasible.jsonl:2 is not an infeasible-config entry"):
        store.entries()
    with pytest.raises(StoreCorrupt):
        store.record(SCOPE, {**HUGE, "BLOCK_M": 512}, OVER_SHARED)
