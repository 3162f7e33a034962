"""The real examples through the CLI in the Triton interpreter: replay gates and the offline tuner."""

from __future__ import annotations

import re

import pytest

from tests.conftest import VECTOR_ADD, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _vector_add(out, *extra):
    return ["--kernel", VECTOR_ADD / "kernel.py", "--harness", VECTOR_ADD / "harness.py",
            "--cases", VECTOR_ADD / "cases.json", "--target", VECTOR_ADD / "target.json", "--output-dir", out,
            "--no-commit-winner", "--max-cv", "1.0", "--max-candidate-seconds", "180", "--max-total-seconds", "500",
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
    run = run_cli(*_vector_add(out_dir, "--provider", "tune", "--max-rounds", "2", "--no-profile"))
    assert_tuner_found_faster(run, VECTOR_ADD, out_dir)
    if run.returncode == 0:
        best = (out_dir / "best_kernel.py").read_text()
        assert int(re.search(r"^BLOCK_SIZE = (\d+)", best, re.MULTILINE).group(1)) > 64


@pytest.mark.parametrize("example", ["softmax", "matmul"])
def test_tuner_finds_a_faster_configuration(example, out_dir):
    bundle = VECTOR_ADD.parent / example
    run = run_cli("--kernel", bundle / "kernel.py", "--harness", bundle / "harness.py", "--cases",
                  bundle / "cases.json", "--target", bundle / "target.json", "--output-dir", out_dir,
                  "--no-commit-winner", "--max-cv", "1.0", "--max-candidate-seconds", "240",
                  "--max-total-seconds", "560", "--provider", "tune", "--max-rounds", "2",
                  "--candidates-per-round", "1", "--no-profile", "--skip-validation", timeout=590)
    assert_tuner_found_faster(run, bundle, out_dir)


def assert_tuner_found_faster(run, bundle, out_dir) -> None:
    """A promoted, revalidated faster configuration; or, when the interpreter's timings on a loaded 2-core
    CI machine drift so much between worker processes that the promotion test rightly refuses, a clearly
    faster correct configuration that only the noise gate turned down."""
    decisions = [line for line in run.stderr.splitlines() if " status=" in line and "decision=" in line]
    assert run.returncode in (0, 2), "\n".join(decisions) or run.stderr[-3000:]
    candidates = [e for e in run.result["experiments"] if e["experiment_id"].startswith("r")]
    assert candidates and all(e["metadata"]["hypothesis"] for e in candidates)
    if run.returncode == 0:
        assert run.result["report"]["aggregate_speedup"] > 1.1
        assert (out_dir / "best_kernel.py").read_text() != (bundle / "kernel.py").read_text()
        return
    fast = [e for e in run.result["experiments"] if (e.get("aggregate_speedup") or 0.0) > 1.5]
    assert fast, "\n".join(decisions)  # found: correct (a protected failure gives 0) and > 1.5x
    refused = [e for e in fast if e["decision"]["status"] == "rejected"]  # a candidate, or the finalist
    assert refused and all(e["decision"]["reason"].startswith("gain not above noise") for e in refused), \
        "\n".join(decisions)
