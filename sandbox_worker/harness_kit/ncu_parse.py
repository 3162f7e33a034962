"""Reading ncu's output (pure): the raw-page CSV normalised into fields, and a collection run's exit
status and text classified into a status with diagnostics.

A metric that was not collected, was `n/a`, or has a unit we cannot convert is null plus a diagnostic
naming the metric, never 0. Standard library only.
"""

from __future__ import annotations

import csv
import io
import statistics
from typing import Any

from sandbox_worker.harness_kit.ncu_command import (
    DEEP_METRICS,
    LEVELS,
    STALL_METRICS,
    STALL_REASONS,
    SUMMARY_METRICS,
    MetricSpec,
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
