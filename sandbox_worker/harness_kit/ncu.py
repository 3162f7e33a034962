"""Nsight Compute (ncu) for harness authors: collect one case in a child process, parse the raw CSV.

Collection runs `ncu ... --export <artifacts_dir>/<name> <python> -m sandbox_worker.harness_kit.ncu_replay
--spec <spec.json>`: ncu must own the process it profiles, and the worker must not be that process (ncu
replays each kernel a dozen times and a crash there must not take the worker down). The replay child
rebuilds the candidate with the frozen harness and calls one harness entry point for the case
(`ncu_replay.py`). The report is then read back with `ncu --import ... --page raw --csv --print-units
base --metrics ...` and normalised by the pure `parse_ncu_raw_csv`.

Rules kept everywhere: a metric that was not collected, was `n/a`, or has a unit we cannot convert is
JSON null plus a diagnostic naming the metric, never 0; every command, stdout, stderr and CSV is saved in
`artifacts_dir` and returned by absolute path. Standard library only.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
# (lts__t_bytes_op_read/write.sum, in the anchor's alias table, were not collected on the H200 with
# ncu 2025.3.1, so L2 traffic is left out until a verified Hopper name replaces them.)
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

DURATION_TO_US = {
    "ns": 1e-3, "nsecond": 1e-3, "nsec": 1e-3,
    "us": 1.0, "usecond": 1.0, "usec": 1.0, "\u00b5s": 1.0,
    "ms": 1e3, "msecond": 1e3, "msec": 1e3,
    "s": 1e6, "second": 1e6, "sec": 1e6,
}
BYTES_TO_BYTES = {
    "byte": 1.0, "bytes": 1.0, "b": 1.0,
    "kbyte": 1e3, "kb": 1e3, "mbyte": 1e6, "mb": 1e6, "gbyte": 1e9, "gb": 1e9, "tbyte": 1e12, "tb": 1e12,
    "kib": 1024.0, "mib": 1024.0**2, "gib": 1024.0**3,
}

REFUSED_COUNTERS = "ERR_NVGPUCTRPERM"
LIBRARY_NOT_LOADED = "LibraryNotLoaded"
NO_KERNELS = "No kernels were profiled"
_BAD_METRIC_WORDS = ("not found", "failed to find", "invalid", "unknown", "not supported", "not available")


def _rejected_metric_line(output: str) -> str | None:
    """The `==ERROR==` line in which ncu refuses a metric name, if any."""
    for line in output.splitlines():
        lowered = line.lower()
        if "==error==" in lowered and "metric" in lowered and any(word in lowered for word in _BAD_METRIC_WORDS):
            return line.strip()
    return None


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


# ---- parsing (pure) ----------------------------------------------------------------------------------


def _number(text: str) -> float | None:
    """`1,234.5` -> 1234.5; `(128, 1, 1)` -> 128 (the product: total threads or blocks); `n/a`/'' -> None."""
    value = text.strip()
    if not value or value.lower() in ("n/a", "na", "nan", "-"):
        return None
    if value.startswith("(") and value.endswith(")"):
        parts = [p.strip() for p in value[1:-1].split(",") if p.strip()]
        try:
            product = 1.0
            for part in parts:
                product *= float(part)
            return product if parts else None
        except ValueError:
            return None
    try:
        return float(value.replace(",", "").rstrip("%").strip())
    except ValueError:
        return None


def _convert(value: float, unit: str, kind: str) -> float | None:
    """Convert a printed value to the field's unit; None when the unit is not one we know."""
    key = unit.strip()
    if kind == "duration":
        factor = DURATION_TO_US.get(key) or DURATION_TO_US.get(key.lower())
        return None if factor is None else value * factor
    if kind == "bytes":
        factor = BYTES_TO_BYTES.get(key.lower())
        return None if factor is None else value * factor
    return value


def _csv_rows(text: str) -> tuple[list[str], list[str], list[list[str]]]:
    """Header, units, data rows. Status lines (`==PROF==`, `==WARNING==`) before the header are skipped."""
    rows = [row for row in csv.reader(io.StringIO(text)) if row]
    start = next((i for i, row in enumerate(rows) if row and row[0].strip() == "ID"), None)
    if start is None:
        return [], [], []
    header = [cell.strip() for cell in rows[start]]
    rest = rows[start + 1:]
    units: list[str] = [""] * len(header)
    if rest and rest[0] and rest[0][0].strip() == "":
        units = [cell.strip() for cell in rest[0]] + [""] * max(0, len(header) - len(rest[0]))
        rest = rest[1:]
    data = [row for row in rest if row and row[0].strip() != "" and not row[0].startswith("==")]
    return header, units, data


def _field_value(
    spec: MetricSpec, header: list[str], units: list[str], rows: list[list[str]]
) -> tuple[float | None, str | None, str | None]:
    """(value as the median over launches, source column, diagnostic)."""
    columns = [name for name in spec.metrics if name in header]
    if not columns and spec.column and spec.column in header:
        columns = [spec.column]
    if not columns:
        return None, None, (f"ncu metric {spec.metrics[0]} ({spec.field}) is absent from the CSV: not collected; "
                            "reported as null")
    column = columns[0]
    index = header.index(column)
    unit = units[index] if index < len(units) else ""
    values: list[float] = []
    for row in rows:
        raw = _number(row[index]) if index < len(row) else None
        if raw is None:
            continue
        converted = _convert(raw, unit, spec.kind)
        if converted is None:
            return None, column, (f"ncu metric {column} ({spec.field}) has unit {unit!r} that cannot be converted; "
                                  "reported as null")
        values.append(converted)
    if not values:
        return None, column, f"ncu reported n/a for {column} ({spec.field}): unsupported here; reported as null"
    return (statistics.median(values) if len(values) > 1 else values[0]), column, None


def parse_ncu_raw_csv(text: str, level: str = "summary") -> dict[str, Any]:
    """Normalise `ncu --import F --page raw --csv` output for `level`.

    The CSV has a header row, a units row, then one row per profiled launch; values may carry thousands
    separators and `n/a`. Several launches give the median of each field. Returns `{launches,
    kernel_names, summary, deep, stalls, units, raw_metrics, diagnostics}`; `deep` and `stalls` are None
    at summary level.
    """
    specs_by_group = {"summary": SUMMARY_METRICS}
    if level == "deep":
        specs_by_group.update({"deep": DEEP_METRICS, "stalls": STALL_METRICS})
    elif level != "summary":
        raise ValueError(f"unknown profile level {level!r}; expected one of {LEVELS}")
    header, units, rows = _csv_rows(text)
    diagnostics: list[str] = []
    result: dict[str, Any] = {"launches": len(rows), "kernel_names": [], "summary": {}, "deep": None,
                              "stalls": None, "units": {}, "raw_metrics": {}, "diagnostics": diagnostics}
    if not header or not rows:
        diagnostics.append("ncu CSV has no metric rows (no header or no profiled launch); every metric is null")
    if "Kernel Name" in header:
        index = header.index("Kernel Name")
        result["kernel_names"] = sorted({row[index] for row in rows if index < len(row)})
        if len(result["kernel_names"]) > 1:
            diagnostics.append(f"ncu CSV holds launches of several kernels {result['kernel_names']}; "
                               "values are medians over all of them")
    for group, specs in specs_by_group.items():
        values: dict[str, float | None] = {}
        missing: list[str] = []
        for spec in specs:
            if not header or not rows:
                values[spec.field] = None
                continue
            value, column, diagnostic = _field_value(spec, header, units, rows)
            values[spec.field] = value
            if column is not None:
                index = header.index(column)
                result["units"][spec.field] = units[index] if index < len(units) else ""
                if value is not None and column in spec.metrics:
                    result["raw_metrics"][column] = value
            if diagnostic is None or spec.field.endswith("_per_issue"):
                continue  # per-issue stall ratios are fallbacks: their absence says nothing new
            if group == "stalls" and column is None:
                missing.append(spec.metrics[0])
            else:
                diagnostics.append(diagnostic)
        if group == "stalls":
            values = _compact_stalls(values)
            if missing:
                diagnostics.append(f"ncu warp-stall metrics absent from the CSV (not collected), reported as null: "
                                   f"{', '.join(missing)}")
        result[group] = values
    return result


def _compact_stalls(stalls: dict[str, float | None]) -> dict[str, float | None]:
    """Keep the per-issue ratios only when ncu printed at least one of them, so the breakdown stays short."""
    if any(stalls.get(f"{reason}_per_issue") is not None for reason in STALL_REASONS):
        return stalls
    return {key: value for key, value in stalls.items() if not key.endswith("_per_issue")}


def empty_summary(level: str) -> dict[str, Any]:
    """The result shape with every metric null, for runs that produced no CSV."""
    return {
        "summary": {spec.field: None for spec in SUMMARY_METRICS},
        "deep": {spec.field: None for spec in DEEP_METRICS} if level == "deep" else None,
        "stalls": ({spec.field: None for spec in STALL_METRICS if spec.field.endswith("_pct")}
                   if level == "deep" else None),
    }


def classify_ncu_output(returncode: int | None, output: str, *, kernel_filter: str = "") -> tuple[str, list[str]]:
    """(status, diagnostics) from a collection run's exit status and its stdout+stderr text.

    The exit status alone is not trusted: ncu exits 0 when its filter matched nothing.
    """
    if REFUSED_COUNTERS in output:
        return "counters_refused", [
            "ncu was refused the GPU performance counters (ERR_NVGPUCTRPERM): run as root or load the driver "
            "with NVreg_RestrictProfilingToAdminUsers=0; ncu metrics are null"]
    if LIBRARY_NOT_LOADED in output:
        return "library_not_loaded", [
            "ncu could not load its profiling library (LibraryNotLoaded; seen under gVisor); ncu metrics are null"]
    bad_metric = _rejected_metric_line(output)
    if bad_metric:
        return "bad_metric", [f"ncu rejected a requested metric: {bad_metric[:300]}"]
    if NO_KERNELS in output:
        return "no_kernel", [
            f"ncu profiled no kernel: the filter {kernel_filter or '(kernel name)'} matched no launch inside the "
            "profiled range (wrong kernel name, or the replay entry launched nothing); ncu metrics are null"]
    if returncode is None:
        return "timeout", ["ncu collection timed out and was killed; ncu metrics are null"]
    if returncode != 0:
        errors = [line.strip() for line in output.splitlines() if "==ERROR==" in line or "[tlx-ncu-replay]" in line]
        detail = "; ".join(errors[-3:]) if errors else output.strip()[-400:]
        return "failed", [f"ncu exited with status {returncode}: {detail[:600]}; ncu metrics are null"]
    return "ok", []


# ---- collection (I/O) --------------------------------------------------------------------------------


def _package_root() -> str:
    """The directory holding `sandbox_worker`, so the replay child can import it under any cwd."""
    return str(Path(__file__).resolve().parents[2])


def _run(argv: list[str], *, stdout_path: Path, stderr_path: Path, timeout_s: float,
         env: dict[str, str] | None = None) -> int | None:
    """Run in a new session with output to files (never pipes a grandchild could hold open).

    Returns the exit status, or None after a timeout (the whole process group is killed).
    """
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                   start_new_session=True)
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
            return None


def _write_command(path: Path, argv: list[str], *, env_additions: dict[str, str] | None = None,
                   timeout_s: float | None = None) -> None:
    payload = {"argv": argv, "shell": shlex.join(argv), "env_additions": env_additions or {},
               "cwd": os.getcwd(), "timeout_s": timeout_s}
    path.write_text(json.dumps(payload, indent=2), encoding="utf-8")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def unavailable_ncu(level: str, diagnostics: list[str], *, kernel: str | None = None,
                    artifacts: dict[str, str] | None = None, status: str = "unavailable") -> dict[str, Any]:
    return {"available": False, "tool": "ncu", "status": status, "level": level, "kernel": kernel,
            "launches": 0, **empty_summary(level), "diagnostics": list(diagnostics), "artifacts": artifacts or {}}


def collect_ncu_profile(
    *,
    kernel_name: str,
    level: str,
    artifacts_dir: str,
    replay_spec: dict[str, Any],
    name: str = "ncu",
    ncu_binary: str | None = None,
    python: str | None = None,
    kernel_regex: str | None = None,
    timeout_s: float = 300.0,
    import_timeout_s: float = 120.0,
) -> dict[str, Any]:
    """Profile one case's main kernel under ncu in a child process and return the normalised result.

    `replay_spec` is what `ncu_replay` needs (harness_path, kernel_path, target, case, seed, entry,
    warmup_calls, profiled_calls, gate); it is written to `<artifacts_dir>/<name>_replay_spec.json`.
    """
    if level not in LEVELS:
        raise ValueError(f"unknown profile level {level!r}; expected one of {LEVELS}")
    directory = Path(artifacts_dir)
    if not directory.is_absolute():
        raise ValueError("artifacts_dir must be an absolute path")
    directory.mkdir(parents=True, exist_ok=True)
    binary = ncu_binary or shutil.which("ncu")
    if binary is None:
        return unavailable_ncu(level, ["ncu not found on PATH; native profiler unavailable, ncu metrics are null"],
                               kernel=kernel_name)

    artifacts: dict[str, str] = {}
    spec_path = directory / f"{name}_replay_spec.json"
    spec_path.write_text(json.dumps(replay_spec, indent=2, default=str), encoding="utf-8")
    artifacts["ncu_replay_spec"] = str(spec_path)
    gated = replay_spec.get("gate", "cuda_profiler_api") == "cuda_profiler_api"
    export_path = directory / name
    report_path = directory / f"{name}.ncu-rep"
    target_argv = [python or sys.executable, "-m", "sandbox_worker.harness_kit.ncu_replay", "--spec", str(spec_path)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    launch_skip = 0 if gated else int(replay_spec.get("warmup_calls", 0))
    launch_count = int(replay_spec.get("profiled_calls", 1))
    diagnostics: list[str] = []

    status = "failed"
    for attempt, extra in enumerate((collection_metrics(level), ())):
        argv = ncu_command(kernel_name=kernel_name, level=level, export_path=str(export_path),
                           target_argv=target_argv, ncu_binary=binary, launch_skip=launch_skip,
                           launch_count=launch_count, kernel_regex=kernel_regex,
                           profile_from_start=not gated, extra_metrics=extra)
        suffix = "" if attempt == 0 else "_retry"
        command_path = directory / f"{name}_collect_command{suffix}.json"
        stdout_path = directory / f"{name}_collect_stdout{suffix}.txt"
        stderr_path = directory / f"{name}_collect_stderr{suffix}.txt"
        _write_command(command_path, argv, env_additions={"PYTHONPATH": env["PYTHONPATH"]}, timeout_s=timeout_s)
        report_path.unlink(missing_ok=True)
        started = time.monotonic()
        returncode = _run(argv, stdout_path=stdout_path, stderr_path=stderr_path, timeout_s=timeout_s, env=env)
        elapsed = time.monotonic() - started
        artifacts.update({f"ncu_collect_command{suffix}": str(command_path),
                          f"ncu_collect_stdout{suffix}": str(stdout_path),
                          f"ncu_collect_stderr{suffix}": str(stderr_path)})
        output = _read(stdout_path) + "\n" + _read(stderr_path)
        status, found = classify_ncu_output(returncode, output, kernel_filter=argv[argv.index("--kernel-name") + 1])
        diagnostics += found
        if status == "bad_metric" and extra:
            diagnostics.append("ncu collection retried with sections only (no --metrics)")
            continue
        break
    if status == "ok" and not report_path.is_file():
        status = "failed"
        diagnostics.append(f"ncu exited 0 but wrote no report at {report_path}; ncu metrics are null")
    if status != "ok":
        return unavailable_ncu(level, diagnostics, kernel=kernel_name, artifacts=artifacts, status=status)
    artifacts["ncu_report"] = str(report_path)

    import_argv = ncu_import_command(report_path=str(report_path), metrics=import_metrics(level), ncu_binary=binary)
    import_command_path = directory / f"{name}_import_command.json"
    csv_path = directory / f"{name}_raw.csv"
    import_stderr_path = directory / f"{name}_import_stderr.txt"
    _write_command(import_command_path, import_argv, timeout_s=import_timeout_s)
    returncode = _run(import_argv, stdout_path=csv_path, stderr_path=import_stderr_path, timeout_s=import_timeout_s)
    artifacts.update({"ncu_import_command": str(import_command_path), "ncu_raw_csv": str(csv_path),
                      "ncu_import_stderr": str(import_stderr_path)})
    if returncode != 0:
        detail = "timed out" if returncode is None else f"exited with status {returncode}"
        tail = _read(import_stderr_path).strip()[-300:]
        return unavailable_ncu(level, [*diagnostics, f"ncu --import {detail}: {tail}; ncu metrics are null"],
                               kernel=kernel_name, artifacts=artifacts, status="import_failed")
    parsed = parse_ncu_raw_csv(_read(csv_path), level)
    available = parsed["launches"] > 0
    return {
        "available": available,
        "tool": "ncu",
        "status": "ok" if available else "no_rows",
        "level": level,
        "kernel": kernel_name,
        "launches": parsed["launches"],
        "kernel_names": parsed["kernel_names"],
        "summary": parsed["summary"],
        "deep": parsed["deep"],
        "stalls": parsed["stalls"],
        "units": parsed["units"],
        "raw_metrics": parsed["raw_metrics"],
        "collect_seconds": round(elapsed, 3),
        "diagnostics": diagnostics + parsed["diagnostics"],
        "artifacts": artifacts,
    }
