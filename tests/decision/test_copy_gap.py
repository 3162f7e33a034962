"""What keeps a memory-bound case below the copy ceiling, named from its size, launch and NCU summary; fed real
H100 records and figures built to hit each limit."""

from __future__ import annotations

import gzip
import json

import pytest

from orchestrator.decision.copy_gap import copy_gap, copy_gaps
from orchestrator.decision.physics import case_rate
from protocol.devices import peaks_for
from protocol.results import RunResult
from tests.conftest import PROJECT_ROOT

H200 = peaks_for("NVIDIA H200")
COPY = 4.0e12  # bytes per second, the run's measured copy ceiling
RECORDED = PROJECT_ROOT / "docs/results/2026-12-07-h100-gate-cost-and-fork-server"


def recorded(example: str) -> RunResult:
    return RunResult.model_validate(json.loads(gzip.decompress((RECORDED / f"{example}_tune-result.json.gz").read_bytes())))


def rate(bytes_moved: float, median_us: float, flops: float | None = None):
    metrics = {"benchmark.bytes": bytes_moved, "benchmark.device.copy_bytes_per_s": COPY}
    if flops is not None:
        metrics["benchmark.flops"], metrics["benchmark.flop_dtype"] = flops, "float16"
    return case_rate("c", median_us, metrics, H200)


def ncu(**summary: float) -> dict:
    deep = {key: summary.pop(key) for key in list(summary) if key.startswith("occupancy_limit")}
    stalls = {key: summary.pop(key) for key in list(summary) if key.endswith("_pct") and "scoreboard" in key}
    return {"available": True, "summary": {"duration_us": 50.0, **summary}, "deep": deep, "stalls": stalls}


BIG = 256e6  # bytes: the ceiling moves them in 64 µs


def test_a_case_at_the_ceiling_or_not_memory_bound_has_no_gap():
    assert copy_gap(rate(BIG, 64.0 / 0.9), H200, ncu(grid_size=4.0)) is None  # 90 % of the ceiling
    gemm = rate(100e6, 200.0, flops=1.4e11)  # 1,400 FLOP per byte: compute-bound, whatever its bandwidth
    assert gemm.percent_of_copy_ceiling < 85 and copy_gap(gemm, H200, ncu(grid_size=4.0)) is None
    assert copy_gap(case_rate("c", 100.0, {"benchmark.bytes": BIG}, H200), H200, None) is None  # no ceiling


@pytest.mark.parametrize(("case", "profile", "says"), [
    (rate(16e6, 8.0), None, "50 % of the copy ceiling: size: the ceiling moves its 16.0 MB in 4.0 µs"),
    (rate(BIG, 128.0), None, "50 % of the copy ceiling: no NCU profile of this case"),
    (rate(BIG, 128.0), ncu(grid_size=64.0), "grid: 64 programs for 132 SMs, so 68 SMs move nothing"),
    (rate(BIG, 128.0), ncu(grid_size=4096.0, local_load_bytes=2e6, local_store_bytes=1e6, registers_per_thread=255.0),
     "spills: 3.00 MB of local-memory traffic from registers spilled at 255 registers per thread"),
    (rate(BIG, 128.0), ncu(grid_size=4096.0, achieved_occupancy_pct=30.0, theoretical_occupancy_pct=31.25,
                           block_size=256.0, occupancy_limit_registers=2.0, occupancy_limit_blocks=32.0,
                           long_scoreboard_pct=80.0),
     "occupancy: 30 % of the warps an SM holds were active (at most 31 % possible; at most 2 blocks per SM (its "
     "registers); 8 warp(s) per program; warps waited on memory 80 % of the time)"),
    (rate(BIG, 128.0), ncu(grid_size=65536.0, achieved_occupancy_pct=90.0),
     "small programs: each of its 65536 programs moves 3.8 KiB"),
    (rate(BIG, 128.0), ncu(grid_size=4096.0, achieved_occupancy_pct=90.0, dram_throughput_pct=48.0,
                           sm_throughput_pct=20.0),
     "no single limit in its NCU summary (DRAM throughput 48 %, SM throughput 20 %, occupancy 90 %)"),
])
def test_each_limit_is_named_with_its_numbers(case, profile, says):
    assert says in copy_gap(case, H200, profile)


def test_the_h100_softmax_record_names_one_warp_programs_and_a_short_ragged_case():
    """The softmax example's untouched kernel on an H100 (num_warps=1): its large cases are held at half the warps
    an SM holds by one-warp programs and the SM's block limit; its ragged case is too small for the ceiling."""
    record = recorded("softmax")
    gaps = copy_gaps(record.baseline)  # what the run's report reads for its final (here the untouched kernel)
    assert gaps["rows4096_cols4096"].startswith(
        "41 % of the copy ceiling: occupancy: 46 % of the warps an SM holds were active (at most 50 % possible; at "
        "most 32 blocks per SM (its shared memory, the SM's block limit); 1 warp(s) per program; warps waited on "
        "memory 87 % of the time)")
    assert gaps["rows8192_cols1000"].startswith("61 % of the copy ceiling: occupancy: 39 % of the warps")
    assert gaps["ragged_3001x777"].startswith("46 % of the copy ceiling: size: the ceiling moves its 18.7 MB in 6.2 µs")
    matmul = recorded("matmul")
    assert set(copy_gaps(matmul.baseline).values()) == {None}  # compute-bound: the copy ceiling is not its floor
