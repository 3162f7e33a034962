"""The real examples through the CLI in the Triton interpreter: replay gates and the offline tuner."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import VECTOR_ADD, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# The interpreter's timings on a shared 2-core machine drift between worker processes by tens of percent
# (the promotion tests of tuner runs here reported noise of 22 % to 83 %), so at the default 99 % a 2x tuner step
# can be refused as within noise and the outcome would hang on the machine's load. The gate's calibration
# is tested on simulated H200 noise (tests/test_promotion.py); these runs test the pipeline, at a confidence
# where a 2x step clears that drift and with more confirmation pairs for smaller steps, so each run has one
# outcome: promoted and revalidated.
TUNER_GATE = ("--confidence", "0.75", "--confirm-runs", "4")


def _vector_add(out, *extra):
    return ["--kernel", VECTOR_ADD / "kernel.py", "--harness", VECTOR_ADD / "harness.py",
            "--cases", VECTOR_ADD / "cases.json", "--target", VECTOR_ADD / "target.json", "--output-dir", out,
            "--no-commit-winner", "--max-candidate-seconds", "180", "--max-total-seconds", "500",
            *extra]


def test_vector_add_replay_promotes_faster_and_rejects_incorrect_and_duplicate(out_dir):
    run = run_cli(*_vector_add(out_dir, "--provider", "replay", "--replay-dir", VECTOR_ADD / "candidates",
                               "--no-profile"))
    assert run.returncode == 0, run.stderr[-3000:]
    decisions = run.decisions()
    assert decisions == {"baseline": "baseline", "r001-c000": "promoted", "r001-c001": "rejected",
                         "r002-c000": "duplicate", "final": "revalidated"}
    assert "incorrect" in run.experiment("r001-c001")["decision"]["reason"]
    assert "BLOCK_SIZE = 1024" in (out_dir / "best_kernel.py").read_text()


@pytest.mark.quiet
def test_tuner_finds_a_faster_vector_add_configuration(out_dir):
    run = run_cli(*_vector_add(out_dir, "--provider", "tune", "--max-rounds", "2", "--no-profile",
                               *TUNER_GATE))
    assert_tuner_found_faster(run, VECTOR_ADD, out_dir)
    best = (out_dir / "best_kernel.py").read_text()
    assert int(re.search(r"^BLOCK_SIZE = (\d+)", best, re.MULTILINE).group(1)) > 64
    # the first proposals come from a screened family: one worker timed the incumbent and its variants
    screened = [json.loads(line) for line in (out_dir / "screening.jsonl").read_text().splitlines()]
    assert screened[0]["label"] == "incumbent (control)" and screened[0]["status"] == "ok"
    assert len(screened) >= 3 and all(line["screen_id"] == "s001" for line in screened[:3])
    first = run.experiment("r001-c000")
    assert first["metadata"]["hypothesis"].startswith("joint search over the knobs")


@pytest.mark.quiet
@pytest.mark.parametrize("example", ["softmax", "matmul"])
def test_tuner_finds_a_faster_configuration(example, out_dir):
    bundle = VECTOR_ADD.parent / example
    run = run_cli("--kernel", bundle / "kernel.py", "--harness", bundle / "harness.py", "--cases",
                  bundle / "cases.json", "--target", bundle / "target.json", "--output-dir", out_dir,
                  "--no-commit-winner", "--max-candidate-seconds", "240",
                  "--max-total-seconds", "560", "--provider", "tune", "--max-rounds", "2",
                  "--candidates-per-round", "1", "--no-profile", "--skip-validation", *TUNER_GATE, timeout=590)
    assert_tuner_found_faster(run, bundle, out_dir)


def assert_tuner_found_faster(run, bundle, out_dir) -> None:
    """A faster configuration, promoted and revalidated: exit 0 and a best_kernel.py that differs."""
    decisions = [line for line in run.stderr.splitlines() if " status=" in line and "decision=" in line]
    assert run.returncode == 0, "\n".join(decisions) or run.stderr[-3000:]
    candidates = [e for e in run.result["experiments"] if e["experiment_id"].startswith("r")]
    assert candidates and all(e["metadata"]["hypothesis"] for e in candidates)
    assert run.decisions()["final"] == "revalidated", "\n".join(decisions)
    assert run.result["report"]["aggregate_speedup"] > 1.1
    assert (out_dir / "best_kernel.py").read_text() != (bundle / "kernel.py").read_text()


RMS_NORM = '''\
"""A row kernel whose block the shape fixes and whose launch passes no num_warps: Triton's default is all
there is to tune."""
import torch
import triton
import triton.language as tl


@triton.jit
def rms_norm_kernel(x_ptr, y_ptr, stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    rms = tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * stride + cols, x / rms, mask=mask)


def rms_norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    rms_norm_kernel[(n_rows,)](x, y, x.stride(0), n_cols, eps, BLOCK_SIZE=BLOCK_SIZE)
    return y
'''


def test_a_launch_without_num_warps_is_tuned_by_adding_it(tmp_path, out_dir):
    """init-bundle, then the tuner through the real CLI and workers: every screened variant adds num_warps to
    the launch and builds and verifies in the interpreter (which ignores it, so none is faster and the
    tuner runs out of values instead of stopping at "no tunable knob")."""
    kernel = tmp_path / "kernel.py"
    kernel.write_text(RMS_NORM, encoding="utf-8")
    bundle = tmp_path / "bundle"
    made = run_cli("init-bundle", "--kernel", kernel, "--entry", "rms_norm", "--out", bundle, "--kind", "rowwise")
    assert made.returncode == 0, made.stderr[-2000:]
    run = run_cli("--kernel", kernel, "--harness", bundle / "harness.py", "--cases", bundle / "cases.json",
                  "--target", bundle / "target.json", "--output-dir", out_dir, "--no-commit-winner",
                  "--provider", "tune", "--max-total-seconds", "240")
    assert run.returncode == 2 and run.result["stopping_reason"] == "provider_exhausted", run.stderr[-3000:]
    assert "no untried configuration left for 1 knobs (num_warps)" in run.result["stopping_detail"]
    lines = [json.loads(line) for line in (out_dir / "screening.jsonl").read_text().splitlines()]
    screened = [line for line in lines if line["screen_id"] == "s001"]  # the joint search's family
    assert screened[0]["label"] == screened[-1]["label"] == "incumbent (control)"  # timed first and last
    variants = screened[1:-1]
    assert {line["label"] for line in variants} == {f"launch:rms_norm.num_warps#0={warps}" for warps in (1, 2, 8, 16, 32)}
    assert all(line["status"] == "ok" for line in lines)  # built and verified with the keyword added
    # a later family (single moves screened before the gate, when noise left one worth a look) moves the same knob
    assert all(line["label"] == "incumbent (control)" or line["label"].startswith("launch:rms_norm.num_warps#0=")
               for line in lines)
    edited = (out_dir / "screening" / "s001" / f"{variants[0]['variant']}.py").read_text()
    warps = variants[0]["label"].rsplit("=", 1)[1]
    assert f"rms_norm_kernel[(n_rows,)](x, y, x.stride(0), n_cols, eps, BLOCK_SIZE=BLOCK_SIZE, num_warps={warps})" in edited
