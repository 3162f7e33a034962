"""What ncu is asked for (pure): the profile levels, their sections and metric catalogue, and the argv
of the collection run and of the report import.

Every normalised field names the ncu metrics that can fill it (`MetricSpec`); the collection asks only
for each field's preferred name, the import reads every alias back. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

LEVELS = ("summary", "deep")

SUMMARY_SECTIONS = ("SpeedOfLight", "Occupancy", "LaunchStats", "MemoryWorkloadAnalysis")
DEEP_SECTIONS = SUMMARY_SECTIONS + (
    "MemoryWorkloadAnalysis_Chart",
    "MemoryWorkloadAnalysis_Tables",
    "ComputeWorkloadAnalysis",
    "WarpStateStats",
    "SchedulerStats",
    "SourceCounters",
)


@dataclass(frozen=True)
class MetricSpec:
    """One normalised field, the ncu metric names that can fill it (first present wins) and its kind.

    `kind` decides the unit handling: duration -> microseconds, bytes -> bytes, percent and count as
    printed. `column` is a fixed CSV column used when no metric column is present (launch geometry).
    """

    field: str
    metrics: tuple[str, ...]
    kind: str
    column: str | None = None


SUMMARY_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("duration_us", ("gpu__time_duration.sum",), "duration"),
    MetricSpec("sm_throughput_pct", ("sm__throughput.avg.pct_of_peak_sustained_elapsed",), "percent"),
    MetricSpec("dram_throughput_pct", ("dram__throughput.avg.pct_of_peak_sustained_elapsed",
                                       "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"), "percent"),
    MetricSpec("memory_throughput_pct", ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
               "percent"),
    MetricSpec("achieved_occupancy_pct", ("sm__warps_active.avg.pct_of_peak_sustained_active",), "percent"),
    MetricSpec("theoretical_occupancy_pct", ("sm__maximum_warps_per_active_cycle_pct",), "percent"),
    MetricSpec("registers_per_thread", ("launch__registers_per_thread",), "count"),
    MetricSpec("local_load_bytes", ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",), "bytes"),
    MetricSpec("local_store_bytes", ("l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",), "bytes"),
    MetricSpec("l1_hit_rate_pct", ("l1tex__t_sector_hit_rate.pct",), "percent"),
    MetricSpec("l2_hit_rate_pct", ("lts__t_sector_hit_rate.pct",), "percent"),
    MetricSpec("block_size", ("launch__block_size",), "count", column="Block Size"),
    MetricSpec("grid_size", ("launch__grid_size",), "count", column="Grid Size"),
)

# Deep level: memory traffic and issue efficiency, to back locality and scheduling hypotheses with bytes.
# (lts__t_bytes_op_read/write.sum, the usual names for L2 read and write bytes, were not collected on
# the H200 with ncu 2025.3.1, so L2 traffic is left out until a verified Hopper name replaces them.)
DEEP_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("dram_read_bytes", ("dram__bytes_read.sum",), "bytes"),
    MetricSpec("dram_write_bytes", ("dram__bytes_write.sum",), "bytes"),
    MetricSpec("shared_bank_conflicts", ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",), "count"),
    MetricSpec("issue_active_pct", ("smsp__issue_active.avg.pct_of_peak_sustained_active",), "percent"),
    MetricSpec("eligible_warps_per_cycle", ("smsp__warps_eligible.avg.per_cycle_active",), "count"),
    MetricSpec("active_warps_per_cycle", ("smsp__warps_active.avg.per_cycle_active",), "count"),
    MetricSpec("occupancy_limit_registers", ("launch__occupancy_limit_registers",), "count"),
    MetricSpec("occupancy_limit_shared_mem", ("launch__occupancy_limit_shared_mem",), "count"),
    MetricSpec("occupancy_limit_warps", ("launch__occupancy_limit_warps",), "count"),
    MetricSpec("occupancy_limit_blocks", ("launch__occupancy_limit_blocks",), "count"),
)

# Warp-stall breakdown: percentage of active warps stalled for each reason (deep level only). The
# per-issue ratio that the WarpStateStats section stores is the fallback alias.
STALL_REASONS = (
    "barrier", "long_scoreboard", "short_scoreboard", "mio_throttle", "lg_throttle", "math_pipe_throttle",
    "wait", "not_selected", "selected", "no_instruction", "branch_resolving", "dispatch_stall", "membar",
    "sleeping", "tex_throttle", "drain", "imc_miss", "misc",
)
STALL_METRICS: tuple[MetricSpec, ...] = tuple(
    MetricSpec(f"{reason}_pct", (f"smsp__warp_issue_stalled_{reason}_per_warp_active.pct",), "percent")
    for reason in STALL_REASONS
) + tuple(
    MetricSpec(f"{reason}_per_issue", (f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio",),
               "count")
    for reason in STALL_REASONS
)


def level_metrics(level: str) -> tuple[MetricSpec, ...]:
    if level not in LEVELS:
        raise ValueError(f"unknown profile level {level!r}; expected one of {LEVELS}")
    return SUMMARY_METRICS if level == "summary" else SUMMARY_METRICS + DEEP_METRICS + STALL_METRICS


def collection_metrics(level: str) -> list[str]:
    """Metrics added to `--section` at collection: the ones no requested section is sure to hold.

    Only the first (preferred) name of each field is asked for; asking for an alias that the device
    lacks would make ncu refuse the whole run.
    """
    names = [spec.metrics[0] for spec in SUMMARY_METRICS]
    if level == "deep":
        names += [spec.metrics[0] for spec in DEEP_METRICS]
        names += [spec.metrics[0] for spec in STALL_METRICS if spec.field.endswith("_pct")]
    return list(dict.fromkeys(names))


def import_metrics(level: str) -> list[str]:
    """Every metric name (aliases included) read back from the report; absent ones are simply not printed."""
    return list(dict.fromkeys(name for spec in level_metrics(level) for name in spec.metrics))


# ---- commands (pure) ---------------------------------------------------------------------------------


def kernel_name_filter(kernel_name: str) -> str:
    """`regex:^name$`: Triton kernel names equal the Python function name under `--kernel-name-base function`."""
    return f"regex:^{re.escape(kernel_name)}$"


def ncu_command(
    *,
    kernel_name: str,
    level: str,
    export_path: str,
    target_argv: Sequence[str],
    ncu_binary: str = "ncu",
    launch_skip: int = 0,
    launch_count: int = 1,
    kernel_regex: str | None = None,
    profile_from_start: bool = False,
    extra_metrics: Sequence[str] = (),
) -> list[str]:
    """The collection argv. ncu appends `.ncu-rep` to `export_path`.

    `--clock-control none` keeps the clocks the benchmark ran at (and is what works on the H200 host);
    `--target-processes all` because the target may be a wrapper. With `profile_from_start=False` ncu
    records nothing until the replay child calls cudaProfilerStart, so warm-up and autotuning launches
    of the same kernel are never the profiled one; `--launch-skip` then counts only gated launches.
    """
    if level not in LEVELS:
        raise ValueError(f"unknown profile level {level!r}; expected one of {LEVELS}")
    if launch_skip < 0 or launch_count < 1:
        raise ValueError("launch_skip must be >= 0 and launch_count >= 1")
    if not target_argv:
        raise ValueError("target_argv is empty")
    argv = [
        ncu_binary,
        "--clock-control", "none",
        "--target-processes", "all",
        "--kernel-name-base", "function",
        "--kernel-name", f"regex:{kernel_regex}" if kernel_regex else kernel_name_filter(kernel_name),
        "--launch-skip", str(launch_skip),
        "--launch-count", str(launch_count),
    ]
    if not profile_from_start:
        argv += ["--profile-from-start", "off"]
    for section in SUMMARY_SECTIONS if level == "summary" else DEEP_SECTIONS:
        argv += ["--section", section]
    if extra_metrics:
        argv += ["--metrics", ",".join(extra_metrics)]
    argv += ["--export", export_path, "--force-overwrite"]
    return argv + list(target_argv)


def ncu_import_command(*, report_path: str, metrics: Sequence[str], ncu_binary: str = "ncu") -> list[str]:
    """Read a report back as one CSV row per profiled launch, values in base units (ns, byte)."""
    return [ncu_binary, "--import", report_path, "--page", "raw", "--csv", "--print-units", "base",
            "--metrics", ",".join(metrics)]
