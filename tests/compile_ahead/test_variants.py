"""Variants compiled ahead through the harness's entry, by the real launch child, for sm_90 on this CPU-only
machine: each compile's figures, the verdict naming the resource, autotune lists config by config, files that
do not load."""

from __future__ import annotations

import json

import pytest

from orchestrator.compile_ahead import CompileOutcome, CompileTarget, ConfigSpec, ResourceReport, Verdict
from orchestrator.compile_ahead.feasibility import judge_launches, judge_source_error
from orchestrator.source_digest import raw_digest
from orchestrator.worker.kernel_cache import complete_groups
from tests.compile_ahead.variant_checks import VARIANTS, checked, kept_kernels

pytestmark = pytest.mark.xdist_group("sm90_variants")  # one compile of the variants (tests/conftest.py)


@pytest.fixture(scope="module")
def checks(sm90_variants_dir):
    return checked(sm90_variants_dir)


@pytest.mark.slow
def test_a_feasible_variant_reports_the_shared_memory_and_registers_of_its_real_launch(checks):
    check = checks["baseline"]
    assert check.feasibility.verdict is Verdict.FEASIBLE
    (launch,) = check.compiles
    report = launch.report
    assert launch.group.startswith("launch:") and report.kernel_name == "matmul_kernel"
    assert report.config.constexprs == {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 1}  # no strides
    assert (report.config.num_warps, report.config.num_stages) == (2, 1)
    assert report.shared_memory_bytes == (32 + 32) * 32 * 2  # one stage of both fp16 tiles
    assert 1 <= report.registers_per_thread <= 255 and report.spill_store_bytes == 0
    assert report.occupancy.blocks_per_sm >= 1
    assert check.isolation["network"] == "active" and check.triton_version
    assert check.feasibility.reason.startswith("1 compile within sm_90 limits: at most 4096 B shared, ")


@pytest.mark.slow
def test_a_variant_over_the_shared_memory_limit_is_infeasible_naming_it(checks):
    check = checks["huge"]
    assert (check.feasibility.verdict, check.feasibility.resource) == (Verdict.INFEASIBLE, "shared memory")
    assert check.feasibility.reason == ("shared memory 294912 B > 232448 B limit (sm_90) [matmul_kernel BLOCK_M=256 "
                                        "BLOCK_N=128 BLOCK_K=64 GROUP_M=1 num_warps=8 num_stages=6]")
    (report,) = check.infeasible_reports()
    assert report.outcome is CompileOutcome.SHARED_OVER_LIMIT and report.registers_per_thread is None


@pytest.mark.slow
def test_an_autotune_list_is_compiled_config_by_config_and_one_over_the_limit_does_not_sink_it(checks):
    check = checks["autotune"]
    assert [c.report.config.constexprs["BLOCK_SIZE_M"] for c in check.compiles] == [64, 256]
    assert len({c.group for c in check.compiles}) == 1 and check.compiles[0].group.startswith("autotune:")
    fits, over = (c.report for c in check.compiles)
    assert fits.outcome is CompileOutcome.COMPILED and fits.shared_memory_bytes == 3 * (64 + 64) * 32 * 2
    assert over.outcome is CompileOutcome.SHARED_OVER_LIMIT and over.shared_memory_bytes == 294912
    assert check.feasibility.verdict is Verdict.FEASIBLE  # Triton's autotuner skips the config out of resources


@pytest.mark.slow
def test_a_variant_that_raises_at_import_is_a_source_failure_not_a_crash(checks):
    check = checks["raises_at_import"]
    assert (check.feasibility.verdict, check.feasibility.resource) == (Verdict.INFEASIBLE, "source")
    assert check.feasibility.reason == "the variant does not load: ValueError: a broken edit"
    assert check.compiles == []


@pytest.mark.slow
def test_a_variant_that_asks_the_missing_gpu_at_import_is_left_to_a_gpu_worker(checks):
    check = checks["asks_the_gpu_at_import"]
    assert check.feasibility.verdict is Verdict.UNKNOWN
    assert check.feasibility.reason.startswith("the variant did not load without a GPU: ")


@pytest.mark.slow
def test_a_variant_that_asks_the_sm_count_of_a_named_device_compiles_ahead(checks):
    """A persistent kernel's wrapper sizes its grid by `torch.cuda.get_device_properties(...)
    .multi_processor_count` (fbtriton's warp-specialized GEMM does, in its wrapper and its pre-hook). For a device
    target.json names, compile ahead answers from protocol/devices.py, so the variant is judged here."""
    check = checks["asks_an_h200_its_sm_count"]
    assert check.feasibility.verdict is Verdict.FEASIBLE, check.feasibility.reason


def test_a_device_question_compile_ahead_cannot_answer_leaves_the_variant_to_a_gpu_worker():
    """Any other property raises RuntimeError, which the verdict reads as the missing GPU's doing (an
    AttributeError would call the variant broken)."""
    from orchestrator.compile_ahead.ahead import device_properties_for
    from orchestrator.compile_ahead.child import TorchDeviceProperties
    from protocol.bundle import Target

    properties = TorchDeviceProperties({"multi_processor_count": 132})
    assert properties.multi_processor_count == 132
    with pytest.raises(RuntimeError, match="total_memory is not known to compile ahead") as raised:
        properties.total_memory  # noqa: B018 - the attribute read is the test
    assert judge_source_error("RuntimeError", str(raised.value)).verdict is Verdict.UNKNOWN
    # the device the baseline's worker reported first, else the one the architecture names; sm_90 names none
    sm_90 = Target(backend="cuda", architecture="sm_90", device="cuda:0")
    assert device_properties_for(sm_90, "NVIDIA H100 PCIe") == {"multiprocessor_count": 114}
    assert device_properties_for(Target(backend="cuda", architecture="h200", device="cuda:0")) == {
        "multiprocessor_count": 132}
    assert device_properties_for(sm_90) == {} and device_properties_for(sm_90, "a card nobody listed") == {}


def report(outcome: CompileOutcome, *, shared: int, block: int, name: str = "k") -> ResourceReport:
    return ResourceReport(config=ConfigSpec(constexprs={"BLOCK": block}), target=CompileTarget(), outcome=outcome,
                          shared_memory_bytes=shared, registers_per_thread=40, kernel_name=name, problems=[] if
                          shared <= 232448 else [{"resource": "shared memory", "message": f"shared memory {shared} B"}])


def test_an_autotune_list_fails_only_when_every_config_does_and_a_plain_launch_when_its_one_does():
    over, fits = report(CompileOutcome.SHARED_OVER_LIMIT, shared=300000, block=256), \
        report(CompileOutcome.COMPILED, shared=4096, block=32)
    assert judge_launches([("autotune:0", fits), ("autotune:0", over)], complete=True).verdict is Verdict.FEASIBLE
    every = judge_launches([("autotune:0", over), ("autotune:0", over)], complete=True)
    assert every.infeasible and "every config of k's autotune list (2)" in every.reason
    plain = judge_launches([("launch:0", fits), ("launch:1", over)], complete=False, why_incomplete="timed out")
    assert plain.infeasible and plain.resource == "shared memory"  # evidence stands though the run was cut short
    assert judge_launches([("launch:0", fits)], complete=False, why_incomplete="timed out").reason == "timed out"
    assert judge_launches([], complete=True).verdict is Verdict.UNKNOWN


def test_only_errors_no_device_can_cause_make_a_source_failure():
    assert judge_source_error("SyntaxError", "invalid syntax (x.py, line 3)").resource == "source"
    assert judge_source_error("LookupError", "the kernel file does not export matmul(a, b)").infeasible
    for device_error in ("RuntimeError", "AssertionError", "KeyError"):
        assert judge_source_error(device_error, "Found no NVIDIA driver").verdict is Verdict.UNKNOWN


@pytest.mark.slow
def test_what_a_variant_compiled_is_kept_for_that_exact_source_and_no_other(checks, sm90_variants_dir, tmp_path):
    """A screened variant the gate measures next starts with its kernels compiled: each variant compiled alone in
    its own child, so its groups are filed under its own source digest (orchestrator/worker/kernel_cache.py)."""
    kept = kept_kernels(sm90_variants_dir)
    assert checks["baseline"].kernel_groups_kept == 1  # its one launch
    assert checks["autotune"].kernel_groups_kept == 1  # the config that fits; the one over the limit left no binary
    assert checks["huge"].kernel_groups_kept == 0 and checks["raises_at_import"].kernel_groups_kept == 0
    worker = tmp_path / "worker" / "triton_cache"
    assert kept.fill(raw_digest(VARIANTS["baseline"]), worker) == 1
    (group,) = complete_groups(worker)
    assert {name.rsplit(".", 1)[1] for name in group.members} >= {"cubin", "ptx", "json"}
    metadata = json.loads((worker / group.key / "matmul_kernel.json").read_text())
    assert metadata["target"]["arch"] == 90 and metadata["num_warps"] == 2  # the variant's own launch, for sm_90
    assert kept.fill(raw_digest(VARIANTS["autotune"]), tmp_path / "autotune") == 1
    assert kept.fill(raw_digest(VARIANTS["huge"]), tmp_path / "huge") == 0
    assert kept.fill(raw_digest(VARIANTS["baseline"] + "\n"), tmp_path / "edited") == 0  # another source's bytes
