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

This module runs the collection and the import (I/O); the argv and metric catalogue are in
`ncu_command`, the parsing in `ncu_parse`, and their names are re-exported here.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sandbox_worker.harness_kit.ncu_command import (
    DEEP_METRICS,
    DEEP_SECTIONS,
    LEVELS,
    STALL_METRICS,
    STALL_REASONS,
    SUMMARY_METRICS,
    SUMMARY_SECTIONS,
    MetricSpec,
    collection_metrics,
    import_metrics,
    kernel_name_filter,
    level_metrics,
    ncu_command,
    ncu_import_command,
)
from sandbox_worker.harness_kit.ncu_parse import (
    BYTES_TO_BYTES,
    DURATION_TO_US,
    LIBRARY_NOT_LOADED,
    NO_KERNELS,
    REFUSED_COUNTERS,
    classify_ncu_output,
    empty_summary,
    parse_ncu_raw_csv,
)

__all__ = [
    "BYTES_TO_BYTES",
    "DEEP_METRICS",
    "DEEP_SECTIONS",
    "DURATION_TO_US",
    "LEVELS",
    "LIBRARY_NOT_LOADED",
    "NO_KERNELS",
    "REFUSED_COUNTERS",
    "STALL_METRICS",
    "STALL_REASONS",
    "SUMMARY_METRICS",
    "SUMMARY_SECTIONS",
    "MetricSpec",
    "classify_ncu_output",
    "collect_ncu_profile",
    "collection_metrics",
    "empty_summary",
    "import_metrics",
    "kernel_name_filter",
    "level_metrics",
    "ncu_command",
    "ncu_import_command",
    "parse_ncu_raw_csv",
    "unavailable_ncu",
]


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
    module = str(replay_spec.get("module") or "sandbox_worker.harness_kit.ncu_replay")
    target_argv = [python or sys.executable, "-m", module, "--spec", str(spec_path)]
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
