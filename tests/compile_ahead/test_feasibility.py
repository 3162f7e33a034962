"""Reading the compile child's output, the verdict on a config, and pruning its neighbours (pure)."""

from __future__ import annotations

import pytest

from orchestrator.compile_ahead import (
    CompileOutcome,
    CompileTarget,
    ConfigSpec,
    ResourceReport,
    Verdict,
    is_resource_knob,
    judge,
    prune_neighbours,
)
from orchestrator.compile_ahead.reports import (
    classify_error,
    parse_ptxas_log,
    parse_resource_usage,
    report_from_result,
)

H200 = CompileTarget(arch=90)
CONFIG = ConfigSpec(constexprs={"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64}, num_warps=8, num_stages=4)
# `ptxas -v` as Triton 3.9 (ptxas-blackwell) and 3.6 (ptxas) print it for a 256x256x64 fp16 matmul tile
LOG_39 = """ptxas-blackwell info    : 0 bytes gmem
ptxas-blackwell info    : Compiling entry function 'matmul_kernel' for 'sm_90a'
ptxas-blackwell info    : Function properties for matmul_kernel
    720 bytes stack frame, 1772 bytes spill stores, 1260 bytes spill loads
ptxas-blackwell info    : Used 255 registers, used 1 barriers, 720 bytes cumulative stack size
ptxas-blackwell info    : Compile time = 1254.407 ms
"""
LOG_36 = LOG_39.replace("ptxas-blackwell", "ptxas").replace("1772", "1768").replace("1260", "1256")
OUT_OF_SHARED = "out of resource: shared memory, Required: 294912, Hardware limit: 232448. Reducing block sizes..."
INSUFFICIENT = ("Internal Triton PTX codegen error\n`ptxas` stderr:\nptxas fatal   : (C7602) Insufficient registers (40) "
                "to compile instruction at line 703 in function matmul_kernel. Try to compile with register target "
                "of 90 or higher.\nptxas fatal   : Ptx assembly aborted due to errors\n")


def compiled(shared: int, log: str = LOG_39, num_warps: int = 8) -> ResourceReport:
    return report_from_result(CONFIG, H200, {"status": "compiled", "shared": shared, "num_warps": num_warps,
                                             "log": log, "seconds": 1.5}, triton_version="3.9.0", isolation={})


@pytest.mark.parametrize("log", [LOG_39, LOG_36])
def test_ptxas_lines_give_registers_spills_stack_and_barriers(log):
    figures = parse_ptxas_log(log)
    assert figures["registers"] == 255 and figures["stack_frame"] == 720 and figures["barriers"] == 1
    assert figures["spill_stores"] in (1772, 1768) and figures["spill_loads"] in (1260, 1256)


def test_cuobjdump_resource_usage_gives_registers_and_stack():
    text = " Function matmul_kernel:\n  REG:255 STACK:864 SHARED:1024 LOCAL:0 CONSTANT[0]:592 TEXTURE:0\n"
    assert parse_resource_usage(text) == {"registers": 255, "stack_frame": 864}


def test_a_report_within_limits_is_feasible_and_says_what_bounds_it():
    report = compiled(131072, LOG_39.replace("255 registers", "127 registers"))
    assert report.registers_per_thread == 127 and report.max_threads_per_block == 512
    verdict = judge(report)
    assert verdict.verdict is Verdict.FEASIBLE and "1 block per SM (shared memory)" in verdict.reason
    assert "spills 1772 B per thread" in verdict.reason


def test_compiled_shared_memory_over_the_limit_is_infeasible_naming_it():
    verdict = judge(compiled(294912))
    assert (verdict.verdict, verdict.resource) == (Verdict.INFEASIBLE, "shared memory")
    assert verdict.reason == "shared memory 294912 B > 232448 B limit (sm_90)"


def test_a_compile_stopped_over_the_limit_is_infeasible_naming_shared_memory():
    report = report_from_result(CONFIG, H200, {"status": "shared_over_limit", "shared": 262144},
                                triton_version="3.6.0", isolation={})
    assert report.outcome is CompileOutcome.SHARED_OVER_LIMIT and report.registers_per_thread is None
    assert judge(report).reason == "shared memory 262144 B > 232448 B limit (sm_90)"


def test_more_warps_than_the_registers_allow_is_infeasible_naming_threads():
    report = compiled(65536, num_warps=16)  # 255 registers allow 256 threads
    verdict = judge(report)
    assert verdict.resource == "threads"
    assert verdict.reason == "threads 512 per block > 256 allowed at 255 registers per thread (sm_90)"


@pytest.mark.parametrize(("error_type", "message", "resource", "text"), [
    ("OutOfResources", OUT_OF_SHARED, "shared memory", "shared memory 294912 B > 232448 B limit (sm_90)"),
    ("PTXASError", INSUFFICIENT, "registers", "registers: ptxas Insufficient registers (40) to compile instruction"),
    ("PTXASError", "ptxas error   : Entry function 'k' uses too much shared data (0x48000 bytes, 0xc000 max)",
     "shared memory", "shared memory: ptxas uses too much shared data (0x48000 bytes, 0xc000 max)"),
    ("CompilationError", "at 12:8:\n    acc = tl.dot(a, b)\nAssertionError('Input shapes should have M >= 16')",
     "compile", "CompilationError: at 12:8:"),
])
def test_a_failed_compile_names_the_resource(error_type, message, resource, text):
    problem = classify_error(error_type, message, H200)
    assert problem.resource == resource and problem.message.startswith(text)


def test_a_failed_compile_is_infeasible_and_keeps_the_error():
    report = report_from_result(CONFIG, H200, {"status": "compile_error", "error_type": "PTXASError",
                                               "message": INSUFFICIENT}, triton_version=None, isolation={})
    verdict = judge(report)
    assert verdict.resource == "registers" and "Insufficient registers (40)" in verdict.reason
    assert "Ptx assembly aborted" in report.detail


@pytest.mark.parametrize("outcome", [CompileOutcome.SOURCE_FAILED, CompileOutcome.TIMEOUT, CompileOutcome.CRASHED,
                                     CompileOutcome.REFUSED])
def test_what_compile_ahead_could_not_tell_is_unknown(outcome):
    report = ResourceReport(config=CONFIG, target=H200, outcome=outcome, detail="RuntimeError: no GPU here\nmore")
    verdict = judge(report)
    assert verdict.verdict is Verdict.UNKNOWN and verdict.resource is None
    assert verdict.reason.endswith(": RuntimeError: no GPU here")


@pytest.mark.parametrize(("name", "increasing"), [
    ("BLOCK_M", True), ("BLOCK_SIZE_K", True), ("TILE_N", True), ("BLOCK_SIZE", True), ("num_stages", True),
    ("NUM_STAGES", True), ("num_warps", False), ("GROUP_M", False), ("GROUP_SIZE_M", False), ("NUM_BLOCKS", False),
    ("maxnreg", False),
])
def test_resource_increasing_knobs_are_sizes_and_stages(name, increasing):
    assert is_resource_knob(name) is increasing


INFEASIBLE = {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 4}


def config(m: int, n: int, k: int, stages: int, warps: int = 8) -> dict[str, int]:
    return {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "num_stages": stages, "num_warps": warps}


def test_pruning_drops_larger_neighbours_and_keeps_smaller_ones():
    larger = [config(256, 256, 128, 4), config(256, 256, 64, 5), config(256, 256, 64, 4, warps=4)]
    smaller = [config(128, 256, 64, 4), config(256, 256, 32, 4), config(256, 256, 64, 3), config(128, 128, 128, 5)]
    mixed = [smaller[0], larger[0], smaller[1], larger[1], smaller[2], larger[2], smaller[3]]
    assert prune_neighbours(INFEASIBLE, mixed) == smaller


def test_knobs_named_in_the_infeasible_config_must_match_when_they_do_not_grow_resources():
    registers_bound = {**INFEASIBLE, "num_warps": 4}
    candidates = [config(256, 256, 64, 4, warps=4), config(256, 256, 64, 4, warps=8)]
    assert prune_neighbours(registers_bound, candidates, resource="registers") == [candidates[1]]


def test_shared_memory_prunes_across_warps_and_maxnreg():
    infeasible = {**INFEASIBLE, "num_warps": 8, "maxnreg": 128}
    candidates = [config(256, 256, 64, 4, warps=4), config(256, 256, 64, 4, warps=16), config(128, 256, 64, 4)]
    assert prune_neighbours(infeasible, candidates, resource="shared memory") == [candidates[2]]


def test_a_candidate_without_one_of_the_knobs_is_kept():
    assert prune_neighbours(INFEASIBLE, [{"BLOCK_M": 512, "BLOCK_N": 512}]) == [{"BLOCK_M": 512, "BLOCK_N": 512}]


@pytest.mark.parametrize("resource", ["compile", "source", None])
def test_a_failure_that_is_not_a_resource_prunes_nothing(resource):
    candidates = [config(256, 256, 128, 4)]
    assert prune_neighbours(INFEASIBLE, candidates, resource=resource) == candidates
