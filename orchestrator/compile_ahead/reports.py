"""From what the compile child printed to a `ResourceReport` (pure): ptxas lines, error messages, occupancy.

Registers, spills and stack come from `ptxas -v`, which Triton runs for every cubin and prints when
TRITON_DUMP_PTXAS_LOG is set (triton/backends/nvidia/compiler.py, `make_cubin`, in 3.6 and 3.9), e.g.
    ptxas info    : Function properties for matmul_kernel
        720 bytes stack frame, 1772 bytes spill stores, 1260 bytes spill loads
    ptxas info    : Used 255 registers, used 1 barriers, 720 bytes cumulative stack size
or, when no log was printed, from `cuobjdump --dump-resource-usage` on the cubin (`REG:255 STACK:720`, no
spill split). Shared memory is Triton's own `shared` metadata (dynamic shared memory: ptxas does not see it).
"""

from __future__ import annotations

import re
from typing import Any

from orchestrator.compile_ahead.feasibility import limit_problems
from orchestrator.compile_ahead.models import (
    COMPILE,
    REGISTERS,
    SHARED_MEMORY,
    CompileOutcome,
    CompileTarget,
    ConfigSpec,
    ResourceProblem,
    ResourceReport,
)
from orchestrator.compile_ahead.occupancy import max_threads_per_block, occupancy

ENTRY = re.compile(r"Compiling entry function '([^']+)'")
REGISTERS_USED = re.compile(r"Used (\d+) registers")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
BARRIERS = re.compile(r"used (\d+) barriers")
RESOURCE_USAGE = re.compile(r"REG:(\d+) STACK:(\d+)")
# Triton's runtime message (the same one compile ahead exists to pre-empt) and ptxas's own failures.
OUT_OF_SHARED = re.compile(r"shared memory, Required: (\d+), Hardware limit: (\d+)")
INSUFFICIENT_REGISTERS = re.compile(r"Insufficient registers[^\n]*")
TOO_MUCH_SHARED = re.compile(r"uses too much shared data[^\n]*")


def _int(match: re.Match[str] | None, group: int = 1) -> int | None:
    return int(match.group(group)) if match else None


def parse_ptxas_log(log: str) -> dict[str, int]:
    """The entry function's figures from `ptxas -v` output (the text after its "Compiling entry function"):
    registers, spill_stores, spill_loads, stack_frame, barriers, whichever the text gives."""
    entry = ENTRY.search(log)
    text = log[entry.start():] if entry else log
    figures: dict[str, int] = {}
    registers = _int(REGISTERS_USED.search(text))
    if registers is not None:
        figures["registers"] = registers
    frame = FRAME.search(text)
    if frame:
        figures.update(stack_frame=int(frame.group(1)), spill_stores=int(frame.group(2)),
                       spill_loads=int(frame.group(3)))
    barriers = _int(BARRIERS.search(text))
    if barriers is not None:
        figures["barriers"] = barriers
    return figures


def parse_resource_usage(text: str) -> dict[str, int]:
    """`cuobjdump --dump-resource-usage`: registers and stack only."""
    usage = RESOURCE_USAGE.search(text)
    return {"registers": int(usage.group(1)), "stack_frame": int(usage.group(2))} if usage else {}


def classify_error(error_type: str, message: str, target: CompileTarget) -> ResourceProblem:
    """Name the resource a failed compile ran out of; anything else is a compile failure, by its first line."""
    limits = target.limits
    shared = OUT_OF_SHARED.search(message)
    if shared:
        return ResourceProblem(resource=SHARED_MEMORY, message=(
            f"shared memory {shared.group(1)} B > {shared.group(2)} B limit ({limits.sm})"))
    registers = INSUFFICIENT_REGISTERS.search(message)
    if registers:
        return ResourceProblem(resource=REGISTERS, message=f"registers: ptxas {registers.group(0).strip()}")
    too_much = TOO_MUCH_SHARED.search(message)
    if too_much:
        return ResourceProblem(resource=SHARED_MEMORY, message=f"shared memory: ptxas {too_much.group(0).strip()}")
    first = next((line.strip() for line in message.splitlines() if line.strip()), "")
    return ResourceProblem(resource=COMPILE, message=f"{error_type}: {first}" if first else error_type)


def report_from_result(config: ConfigSpec, target: CompileTarget, result: dict[str, Any], *,
                       triton_version: str | None, isolation: dict[str, str]) -> ResourceReport:
    """One `result` event of the child (already checked for shape) as a report, limits applied."""
    limits = target.limits
    common: dict[str, Any] = {"config": config, "target": target, "seconds": float(result.get("seconds", 0.0)),
                              "triton_version": triton_version, "isolation": isolation}
    status = result["status"]
    if status == "shared_over_limit":
        shared = int(result["shared"])
        return ResourceReport(outcome=CompileOutcome.SHARED_OVER_LIMIT, shared_memory_bytes=shared,
                              problems=limit_problems(limits, shared_bytes=shared, registers_per_thread=None,
                                                      num_warps=None, max_threads_per_block=None), **common)
    if status == "signature_error":
        return ResourceReport(outcome=CompileOutcome.SOURCE_FAILED,
                              detail=f"{result.get('error_type', 'SignatureError')}: {result.get('message', '')}",
                              **common)
    if status == "compile_error":
        message = str(result.get("message", ""))
        problem = classify_error(str(result.get("error_type", "error")), message, target)
        return ResourceReport(outcome=CompileOutcome.COMPILE_FAILED, problems=[problem], detail=message, **common)
    log = str(result.get("log", ""))
    figures = parse_ptxas_log(log)
    if "registers" not in figures:
        figures = parse_resource_usage(str(result.get("resource_usage", "")))
    shared = int(result["shared"])
    num_warps = int(result.get("num_warps") or config.num_warps)
    registers = figures.get("registers")
    max_threads = max_threads_per_block(limits, registers) if registers is not None else None
    fit = (occupancy(limits, num_warps=num_warps, registers_per_thread=registers, shared_bytes=shared,
                     barriers=figures.get("barriers", 1)) if registers is not None else None)
    return ResourceReport(
        outcome=CompileOutcome.COMPILED, shared_memory_bytes=shared, registers_per_thread=registers,
        spill_store_bytes=figures.get("spill_stores"), spill_load_bytes=figures.get("spill_loads"),
        local_memory_bytes=figures.get("stack_frame"), barriers=figures.get("barriers"), num_warps=num_warps,
        max_threads_per_block=max_threads, occupancy=fit,
        problems=limit_problems(limits, shared_bytes=shared, registers_per_thread=registers, num_warps=num_warps,
                                max_threads_per_block=max_threads),
        detail=log.strip(), **common)
