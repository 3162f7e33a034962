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
