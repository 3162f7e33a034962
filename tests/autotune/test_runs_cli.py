"""A kernel that autotunes itself through the real CLI in Triton's interpreter: `validate` passes and shows the
choice; `optimize` autotunes the untouched kernel once per key before any candidate, and its records show that
no other worker autotuned (so no timed sample holds an autotune call); a candidate whose list keeps the run's
choice is pinned to it, one whose list lost it is refused by name, and a winner whose list is pruned to one
configuration ships with its first call measured."""

from __future__ import annotations

import json
import re

import pytest

from orchestrator.autotune.detect import autotuned_kernels
from tests.conftest import PROJECT_ROOT, run_cli, write_candidates

EXAMPLE = PROJECT_ROOT / "examples" / "autotuned_add"
KERNEL = (EXAMPLE / "kernel.py").read_text()
FILES = ["--kernel", EXAMPLE / "kernel.py", "--harness", EXAMPLE / "harness.py", "--cases", EXAMPLE / "cases.json",
         "--target", EXAMPLE / "target.json"]
# the interpreter's drift between workers on a shared 2-core machine (tests/e2e/test_examples_cli.py)
GATE = ("--confidence", "0.75", "--confirm-runs", "4")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _entries(*blocks_and_warps: tuple[int, int]) -> str:
    return "".join(f'        triton.Config({{"BLOCK_SIZE": {b}}}, num_warps={w}),\n' for b, w in blocks_and_warps)


ORIGINAL_LIST = _entries((64, 1), (128, 2), (256, 4), (512, 4))
LOST_CHOICE = KERNEL.replace(ORIGINAL_LIST, _entries((64, 1), (128, 2), (1024, 4), (2048, 4)))
ONE_CONFIGURATION = KERNEL.replace(ORIGINAL_LIST, _entries((2048, 4)))
KEPT_CHOICE = KERNEL.replace(ORIGINAL_LIST, _entries((64, 1), (128, 2), (256, 4), (512, 4), (4096, 8)))
# one configuration per key by its own prune, as the tuner writes keys that chose differently: neither is the run's
# choice, and no key autotunes, so nothing is refused
ONE_PER_KEY = KERNEL.replace(ORIGINAL_LIST, _entries((1024, 4), (256, 2))).replace(
    '    key=["n_elements"],\n)',
    '    key=["n_elements"],\n    prune_configs_by={"early_config_prune": lambda configs, named_args, one_per_key={(1001,): 1}, '
    '**kwargs: [configs[one_per_key.get(tuple({**named_args, **kwargs}[name] for name in ("n_elements",)), 0)]]},\n)')


def test_validate_passes_and_shows_the_choice(tmp_path):
    run = run_cli("validate", *FILES, "--output-dir", tmp_path / "validate", "--no-profile", timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    check = next(c for c in run.result["checks"] if c["name"] == "autotune")
    assert check["status"] == "passed"
    assert {tuple(c["case_ids"]) for c in check["details"]["choices"]} == {("n2048",), ("ragged_1001",)}
    assert "BLOCK_SIZE=" in check["message"] and "first call" in check["message"]
    assert "configuration 4 of 4" in run.stderr and "validate check=autotune status=passed" in run.stderr


# wrong on the last partial block whatever the configuration: the ragged case fails at the autotune's choice
WRONG_TAIL = KERNEL.replace("tl.store(out_ptr + offsets, x + y, mask=mask)",
                            "tail = offsets >= (n_elements // BLOCK_SIZE) * BLOCK_SIZE\n"
                            "    tl.store(out_ptr + offsets, tl.where(tail, x + y + 1.0, x + y), mask=mask)")


def test_a_case_that_fails_at_the_autotune_choice_names_it_and_the_judge_stays(tmp_path):
    kernel = tmp_path / "kernel.py"
    kernel.write_text(WRONG_TAIL)
    files = [*FILES[2:], "--kernel", kernel]
    run = run_cli("validate", *files, "--output-dir", tmp_path / "validate", "--no-profile", timeout=600)
    assert run.returncode == 1, run.stderr[-3000:]
    checks = {c["name"]: c for c in run.result["checks"]}
    assert run.result["failed_checks"] == ["verify"]
    verify = checks["verify"]["message"]
    assert "protected case(s) ragged_1001 fail on the untouched kernel" in verify
    choice = next(c for c in checks["autotune"]["details"]["choices"] if c["case_ids"] == ["ragged_1001"])
    assert f"at the kernel's own autotune choice for its key (add_kernel BLOCK_SIZE={choice['config']['kwargs']['BLOCK_SIZE']}" in verify
    # it fails in the judge and in the candidate's process alike: its own failure, and verdicts stay in the judge
    assert checks["verdict_process"]["status"] == "passed" and "in the judge" in checks["verdict_process"]["message"]


def test_optimize_autotunes_once_and_pins_the_choice_everywhere(tmp_path):
    assert "one_per_key" in ONE_PER_KEY
    candidates = write_candidates(tmp_path / "candidates", [LOST_CHOICE, ONE_CONFIGURATION, KEPT_CHOICE, ONE_PER_KEY])
    out = tmp_path / "out"
    run = run_cli("optimize", *FILES, "--output-dir", out, "--no-commit-winner", "--no-profile", "--provider",
                  "replay", "--replay-dir", candidates, "--max-candidate-seconds", "180", "--max-total-seconds", "600",
                  *GATE, timeout=800)
    assert run.returncode in (0, 2), run.stderr[-3000:]
    manifest = json.loads((out / "run.json").read_text())
    choices = manifest["autotune"]["choices"]
    assert sorted(c["key"][0] for c in choices) == [1001, 2048]  # once per key
    step = json.loads((out / "autotune" / "result.json").read_text())
    assert step["worker"]["autotune"]["worker"]["tuned"] == len(choices)
    assert "configuration 1 of 4" in run.stderr
    assert run.stderr.index("autotune status=done") < run.stderr.index("baseline status=evaluating")

    result = run.result
    evaluations = [(e["experiment_id"], ev) for e in result["experiments"] for ev in e["evaluations"]]
    assert len(evaluations) >= 6
    for experiment_id, evaluation in evaluations:  # no worker but the step's autotuned, so no sample holds one
        for process, activity in (evaluation["worker"]["autotune"] or {}).items():
            assert (activity["mode"], activity["tuned"], activity["configurations_timed"]) == ("pin", 0, 0), \
                (experiment_id, process)
    benchmarked = [ev for _, ev in evaluations if any(c["samples_us"] for c in ev["cases"])]
    assert benchmarked and all(ev["worker"]["autotune"]["candidate_process"]["tuned"] == 0 for ev in benchmarked)
    baseline = result["baseline"]["worker"]["autotune"]
    assert baseline["candidate_process"]["pinned"] == 2  # the judge's candidate process took the pins

    lost = run.experiment("r001-c000")
    assert lost["decision"]["status"] == "rejected"
    assert "AutotuneRefused: add_kernel: autotune over 4 configurations" in lost["decision"]["reason"]
    assert "does not hold" in lost["decision"]["reason"]
    kept = run.experiment("r002-c000")
    candidate = next(ev for ev in kept["evaluations"] if ev["label"] == "candidate")
    assert candidate["status"] == "ok" and candidate["worker"]["autotune"]["candidate_process"]["pinned"] == 2

    per_key = next(ev for ev in run.experiment("r002-c001")["evaluations"] if ev["label"] == "candidate")
    assert per_key["status"] == "ok", per_key["reason"]
    assert (per_key["worker"]["autotune"]["candidate_process"]["single"],
            per_key["worker"]["autotune"]["candidate_process"]["tuned"]) == (2, 0)  # each key pruned to its own

    report = result["report"]["autotune"]
    assert report["untouched_first_call"]["autotuned"] == 1
    assert run.decisions()["r001-c001"] == "promoted" and run.decisions()["final"] == "revalidated"
    assert report["winner_experiment_id"] == "r001-c001"
    assert report["winner_first_call"]["autotuned"] == 0  # the pruned list: the user's first call autotunes nothing


def test_the_tuner_writes_the_pinned_list_as_one_configuration_and_ships_it_tuned(tmp_path):
    """`--provider tune` on the autotuned example: its list's entries cannot change what runs while the run pins
    the choice, so the tuner writes the list as that choice, a list of one, and moves its values; the winner
    ships with one configuration, and its first call autotunes nothing."""
    out = tmp_path / "out"
    run = run_cli("optimize", *FILES, "--output-dir", out, "--no-commit-winner", "--no-profile", "--provider", "tune",
                  "--max-rounds", "1", "--candidates-per-round", "1", "--max-total-seconds", "300", *GATE, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    proposed = run.experiment("r001-c000")
    # one entry per distinct choice (the keys' choices as the step made them), and a value of one moved; under
    # the interpreter the kernel's own autotune may choose alike for both keys or not, and the change says which
    choices = json.loads((out / "run.json").read_text())["autotune"]["choices"]
    chosen = {json.dumps(c["config"], sort_keys=True): c["config"]["kwargs"]["BLOCK_SIZE"] for c in choices}
    written_as = ("the one configuration its autotune chose for" if len(chosen) == 1
                  else "the configuration its autotune chose for each key (2, one per key by its own prune")
    assert f"add_kernel's autotune list written as {written_as}" in proposed["metadata"]["change"]
    assert run.decisions()["r001-c000"] == "promoted" and run.decisions()["final"] == "revalidated"
    best = (out / "best_kernel.py").read_text()
    written = best[best.index("configs=["):best.index("key=")]
    assert written.count("triton.Config(") == len(chosen)
    assert sorted(map(int, re.findall(r"'BLOCK_SIZE': (\d+)", written))) != sorted(chosen.values())
    assert autotuned_kernels(best) == []  # a list of one, or one per key by its own prune: never an autotune
    assert best[:best.index("configs=[")] == KERNEL[:KERNEL.index("configs=[")]
    assert best[best.index("@triton.jit"):] == KERNEL[KERNEL.index("@triton.jit"):]
    report = run.result["report"]["autotune"]
    assert report["untouched_first_call"]["autotuned"] == 1 and report["winner_first_call"]["autotuned"] == 0
