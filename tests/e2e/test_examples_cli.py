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
    assert run.returncode == 0, run.stderr[-3000:]
    best = (out_dir / "best_kernel.py").read_text()
    block = int(re.search(r"^BLOCK_SIZE = (\d+)", best, re.MULTILINE).group(1))
    assert block > 64
    assert run.result["report"]["aggregate_speedup"] > 1.2
    proposals = [line for line in run.stderr.splitlines() if "status=proposed" in line]
    assert proposals and all("hypothesis='" in line and "(not given)" not in line for line in proposals)


@pytest.mark.parametrize("example", ["softmax", "matmul"])
def test_tuner_finds_a_faster_configuration(example, out_dir):
    bundle = VECTOR_ADD.parent / example
    run = run_cli("--kernel", bundle / "kernel.py", "--harness", bundle / "harness.py", "--cases",
                  bundle / "cases.json", "--target", bundle / "target.json", "--output-dir", out_dir,
                  "--no-commit-winner", "--max-cv", "1.0", "--max-candidate-seconds", "240",
                  "--max-total-seconds", "560", "--provider", "tune", "--max-rounds", "2",
                  "--candidates-per-round", "1", "--no-profile", "--skip-validation", timeout=590)
    decisions = [line for line in run.stderr.splitlines() if " status=" in line and "decision=" in line]
    assert run.returncode == 0, "\n".join(decisions) or run.stderr[-3000:]
    assert run.result["report"]["aggregate_speedup"] > 1.1
    baseline = (bundle / "kernel.py").read_text()
    assert (out_dir / "best_kernel.py").read_text() != baseline
    promoted = [e for e in run.result["experiments"] if (e.get("decision") or {}).get("status") == "promoted"]
    assert promoted and all(e["metadata"]["hypothesis"] for e in promoted)
