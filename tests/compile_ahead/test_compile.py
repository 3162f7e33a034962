"""Real compile children on this CPU-only machine, for sm_90: figures, limits, faults, isolation, cleanup.

Triton compiles for an explicit target without a GPU, so these run anywhere Triton's NVIDIA backend is
installed (ptxas ships with it). The kernels are ours (tests/compile_ahead/kernels/).
"""

from __future__ import annotations

import ast
import socket
import sys
from pathlib import Path

import psutil
import pytest
import trio

from orchestrator.compile_ahead import (
    CompileJob,
    CompileOutcome,
    CompilePlan,
    ConfigSpec,
    Verdict,
    build_failed_reason,
    compile_configs,
    compile_configs_sync,
    compile_plan,
    judge,
    signature_from_launch,
)
from orchestrator.compile_ahead.compile import CHILD

KERNELS = Path(__file__).resolve().parent / "kernels"
FP16 = {"dtype": "float16", "shape": [4096, 4096]}
MATMUL_SIGNATURE = signature_from_launch((KERNELS / "matmul.py").read_text(), "matmul_kernel",
                                         [FP16, FP16, FP16, 4096, 4096, 4096, 4096, 1, 4096, 1, 4096, 1],
                                         {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32})
MATMUL = CompileJob(source_path=KERNELS / "matmul.py", signature=MATMUL_SIGNATURE)


def tiles(m: int, n: int, k: int, *, warps: int = 4, stages: int = 3, maxnreg: int | None = None) -> ConfigSpec:
    return ConfigSpec(constexprs={"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k}, num_warps=warps, num_stages=stages,
                      maxnreg=maxnreg)


FP32 = {"dtype": "float32", "shape": [1 << 20]}
COPY_SIGNATURE = signature_from_launch((KERNELS / "faulty.py").read_text(), "copy_kernel", [FP32, FP32, 1 << 20],
                                       {"BLOCK_SIZE": 1024})


def copy_job(path: Path, kernel: str = "copy_kernel") -> CompileJob:
    """A job for the copy kernel's signature on `path` (which may not hold that kernel at all)."""
    return CompileJob(source_path=path, signature=COPY_SIGNATURE.model_copy(update={"kernel_name": kernel}))


def block(size: int) -> ConfigSpec:
    return ConfigSpec(constexprs={"BLOCK_SIZE": size}, num_warps=4, num_stages=1)


def leftover_children() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


@pytest.fixture(scope="module")
def matmul_reports():
    configs = [tiles(64, 64, 32, stages=2), tiles(64, 64, 32, stages=3), tiles(128, 64, 32),
               tiles(128, 64, 32, warps=8), tiles(64, 64, 32, maxnreg=24)]
    return compile_configs_sync(MATMUL, configs, max_parallel=2)


def test_shared_memory_grows_with_stages_and_tiles(matmul_reports):
    two_stages, three_stages, wider, wider_8_warps, _ = matmul_reports
    assert two_stages.shared_memory_bytes < three_stages.shared_memory_bytes < wider.shared_memory_bytes
    # each stage holds one BLOCK_K slice of both fp16 operands: (64 + 64) * 32 * 2 B
    assert three_stages.shared_memory_bytes - two_stages.shared_memory_bytes == (64 + 64) * 32 * 2
    assert wider_8_warps.shared_memory_bytes == wider.shared_memory_bytes  # warps do not change the buffers


def test_registers_are_integers_a_thread_can_have(matmul_reports):
    compiled = [report for report in matmul_reports if report.outcome is CompileOutcome.COMPILED]
    assert len(compiled) == 4
    for report in compiled:
        assert isinstance(report.registers_per_thread, int) and 1 <= report.registers_per_thread <= 255
        assert report.spill_store_bytes == 0 and report.local_memory_bytes == 0
        assert report.num_warps * 32 <= report.max_threads_per_block
        assert report.occupancy.blocks_per_sm >= 1
        assert judge(report).verdict is Verdict.FEASIBLE
        assert report.triton_version and report.target.name == "cuda:sm_90"
    wider, wider_8_warps = compiled[2], compiled[3]
    assert wider_8_warps.registers_per_thread < wider.registers_per_thread  # the same tile over twice the threads


def test_too_few_registers_is_infeasible_naming_registers(matmul_reports):
    starved = matmul_reports[4]
    assert starved.outcome is CompileOutcome.COMPILE_FAILED
    verdict = judge(starved)
    assert verdict.resource == "registers"
    assert verdict.reason.startswith("registers: ptxas Insufficient registers (24)")


def test_the_child_isolated_itself_and_the_candidate_never_entered_this_process(matmul_reports):
    isolation = matmul_reports[0].isolation
    assert set(isolation) == {"stdin", "rlimits", "network", "filesystem", "seccomp"}
    assert not isolation["network"].startswith("unavailable")
    assert not [name for name in sys.modules if name.startswith("tlx_candidate")]
    assert leftover_children() == []


def test_a_huge_config_stops_at_shared_memory_and_is_infeasible():
    (report,) = compile_configs_sync(MATMUL, [tiles(256, 256, 128, warps=8, stages=5)])
    assert report.outcome is CompileOutcome.SHARED_OVER_LIMIT
    assert report.registers_per_thread is None  # stopped before PTX and ptxas
    verdict = judge(report)
    assert (verdict.verdict, verdict.resource) == (Verdict.INFEASIBLE, "shared memory")
    assert verdict.reason == f"shared memory {report.shared_memory_bytes} B > 232448 B limit (sm_90)"
    assert report.shared_memory_bytes == 5 * (256 + 256) * 128 * 2


def test_an_evaluation_gets_its_build_failed_reason_from_its_plan():
    plan = CompilePlan(signature=MATMUL_SIGNATURE, config=tiles(64, 64, 32, maxnreg=24))
    report = trio.run(lambda: compile_plan(KERNELS / "matmul.py", plan, python=sys.executable))
    assert build_failed_reason(report, judge(report)).startswith(
        "compile ahead (sm_90): registers: ptxas Insufficient registers (24)")


@pytest.mark.slow
def test_without_the_early_stop_the_huge_config_compiles_and_is_still_infeasible():
    job = MATMUL.model_copy(update={"stop_over_limit": False})
    (report,) = compile_configs_sync(job, [tiles(256, 256, 128, warps=8, stages=5)])
    assert report.outcome is CompileOutcome.COMPILED and 1 <= report.registers_per_thread <= 255
    assert report.occupancy.blocks_per_sm == 0 and report.occupancy.limited_by == "shared memory"
    assert judge(report).resource == "shared memory"


def test_the_candidate_reaches_no_network_writes_nothing_outside_and_sees_no_gpu(tmp_path, monkeypatch):
    outside = tmp_path / "outside.txt"
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        monkeypatch.setenv("TRITON_COMPILE_AHEAD_TEST_PORT", str(listener.getsockname()[1]))
        monkeypatch.setenv("TRITON_COMPILE_AHEAD_TEST_OUTSIDE", str(outside))
        reports = compile_configs_sync(copy_job(KERNELS / "reaches_out.py"), [block(1024), block(2048)])
    assert [report.outcome for report in reports] == [CompileOutcome.SOURCE_FAILED] * 2
    assert "RuntimeError: no network (" in reports[0].detail
    assert "no write outside (PermissionError)" in reports[0].detail
    assert "CUDA_VISIBLE_DEVICES=''" in reports[0].detail
    assert not outside.exists()
    assert judge(reports[0]).verdict is Verdict.UNKNOWN  # not the config's fault: a GPU worker decides


def test_a_missing_kernel_is_a_source_failure():
    (report,) = compile_configs_sync(copy_job(KERNELS / "matmul.py", kernel="copy_kernel"), [block(1024)])
    assert report.outcome is CompileOutcome.SOURCE_FAILED
    assert report.detail == "LookupError: the kernel file defines no 'copy_kernel'"


def test_garbage_on_the_result_channel_is_blamed_on_the_config_and_never_trusted():
    reports = compile_configs_sync(copy_job(KERNELS / "garbage.py"), [block(1024), block(2048)], max_parallel=1)
    assert [report.outcome for report in reports] == [CompileOutcome.CRASHED] * 2
    assert all(report.detail.startswith("protocol: ") for report in reports)
    assert leftover_children() == []


def test_a_kernel_whose_parameters_differ_from_the_signature_is_not_blamed_on_the_config():
    (report,) = compile_configs_sync(copy_job(KERNELS / "matmul.py", kernel="matmul_kernel"), [block(1024)])
    assert report.outcome is CompileOutcome.SOURCE_FAILED and judge(report).verdict is Verdict.UNKNOWN
    assert report.detail.startswith("SignatureError: the kernel's parameters differ from the signature: missing a_ptr")


def test_a_missing_interpreter_is_refused_before_any_child_starts():
    job = MATMUL.model_copy(update={"python": "/nonexistent/python3"})
    with pytest.raises(FileNotFoundError, match="no interpreter '/nonexistent/python3'"):
        compile_configs_sync(job, [tiles(64, 64, 32)])


def test_a_config_setting_a_runtime_parameter_is_refused_by_name():
    wrong = ConfigSpec(constexprs={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "M": 128})
    with pytest.raises(ValueError, match=r"sets M, which matmul_kernel does not take as constexpr"):
        compile_configs_sync(MATMUL, [wrong])


def test_cancelling_the_batch_ends_every_child():
    async def main() -> bool:
        with trio.move_on_after(4) as scope:
            await compile_configs(copy_job(KERNELS / "faulty.py"), [block(4096), block(4096)], max_parallel=2)
        return scope.cancelled_caught

    assert trio.run(main)
    assert leftover_children() == []


@pytest.mark.slow
def test_a_crash_and_a_hang_cost_only_their_own_configs():
    configs = [block(1024), block(2048), block(4096), block(512)]
    reports = compile_configs_sync(copy_job(KERNELS / "faulty.py"), configs, max_parallel=1, per_config_seconds=15)
    assert [report.outcome for report in reports] == [CompileOutcome.COMPILED, CompileOutcome.CRASHED,
                                                      CompileOutcome.TIMEOUT, CompileOutcome.COMPILED]
    assert "exit status -9" in reports[1].detail
    assert reports[2].detail == "no result within 15 s"
    assert [judge(report).verdict for report in reports[1:3]] == [Verdict.UNKNOWN] * 2
    assert leftover_children() == []


@pytest.mark.slow
def test_a_tutorial_style_softmax_compiles_without_a_gpu_and_reports_spills():
    fp32 = {"dtype": "float32", "shape": [4096, 4096]}
    source = KERNELS / "softmax.py"
    signature = signature_from_launch(source.read_text(), "softmax_kernel", [fp32, fp32, 4096, 4096, 4096],
                                      {"BLOCK_SIZE": 4096})
    configs = [ConfigSpec(constexprs={"BLOCK_SIZE": 4096}, num_warps=8, num_stages=1),
               ConfigSpec(constexprs={"BLOCK_SIZE": 4096}, num_warps=1, num_stages=1, maxnreg=32)]
    spread, squeezed = compile_configs_sync(CompileJob(source_path=source, signature=signature), configs)
    assert spread.outcome is squeezed.outcome is CompileOutcome.COMPILED  # module-level driver queries answered
    assert 1 <= spread.registers_per_thread <= 255 and spread.spill_store_bytes == 0
    assert squeezed.registers_per_thread == 32 and squeezed.spill_store_bytes > 0
    assert squeezed.local_memory_bytes >= squeezed.spill_store_bytes // 4
    assert f"spills {squeezed.spill_store_bytes} B per thread" in judge(squeezed).reason


def test_the_child_imports_only_the_standard_library_triton_and_the_worker_isolation():
    tree = ast.parse(CHILD.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    outside = imported - set(sys.stdlib_module_names) - {"__future__"}
    assert outside == {"triton", "sandbox_worker", "torch"}
