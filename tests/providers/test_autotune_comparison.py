"""scripts/tuner_study.py --autotune in the interpreter: the `@triton.autotune` versions of the examples
(scripts/autotune_kernels/) build, verify and time through the example's own harness with the grid's
configurations written in. One configuration per knob: Triton's autotuner does not benchmark a single
configuration, which the interpreter could not do; the H200 runs the full grid (docs/tuner.md)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ONE_CONFIGURATION = {
    "softmax": ["block=64", "warps=1", "stages=1"],
    "matmul": ["tile=32", "warps=2", "stages=1", "group=1"],
}


def load_bench_search():
    spec = importlib.util.spec_from_file_location("bench_search", PROJECT_ROOT / "scripts" / "bench_search.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("example", sorted(ONE_CONFIGURATION))
def test_the_autotuned_example_is_verified_and_timed_beside_the_grid(example, tmp_path):
    command = [sys.executable, str(PROJECT_ROOT / "scripts" / "tuner_study.py"), "--example", example,
               "--bundle", ".", "--values", *ONE_CONFIGURATION[example], "--seconds", "60", "--autotune",
               "--out", str(tmp_path)]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=280, cwd=PROJECT_ROOT,
                               env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(PROJECT_ROOT)})
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["launchable"] == report["valid"] == 1
    autotune = report["autotune"]
    assert autotune["configurations"] == 1
    assert autotune["median_us"] and autotune["median_us"] > 0  # built, verified against the reference, timed
    assert autotune["tuning_seconds"] > 0
    # every case of the bundle, ranked by the gate's weighted objective; the first case's best beside it
    cases = json.loads((PROJECT_ROOT / "examples" / example / "cases.json").read_text())
    assert list(report["cases"]) == [case["case_id"] for case in cases]
    assert set(autotune["medians_us"]) == set(report["cases"]) == set(report["best"]["medians_us"])
    assert report["best"]["objective"] > 0 and report["best_first_case"] == report["best"]
    row = load_bench_search().compare_row(example, {"wall_seconds": 1.0, "exit_code": 0,
                                                    "report": {"aggregate_speedup": 1.0}}, report)
    assert row.startswith(f"{example} over {len(cases)} case(s) | tuner: n/a") and "tuning" in row
    assert "(1 of 1 launchable measured, 1 in the grid;" in row
    assert 0 <= report["walk_seconds"] <= report["seconds"]  # the walk's cap counts from the end of compiles


@pytest.mark.parametrize("example", sorted(ONE_CONFIGURATION))
def test_the_autotune_version_runs_the_examples_kernel_unchanged(example):
    """Only the launch differs: the @triton.jit function is the example's, line for line."""
    def kernel_source(path) -> str:
        text = path.read_text()
        tree = ast.parse(text)
        jitted = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.endswith("_kernel"))
        return ast.get_source_segment(text, jitted)

    template = PROJECT_ROOT / "scripts" / "autotune_kernels" / f"{example}.py"
    assert kernel_source(template) == kernel_source(PROJECT_ROOT / "examples" / example / "kernel.py")


def test_the_bench_search_command_line_parses(tmp_path):
    """Its parser is built on every call: a run directory without a result says so instead of a traceback."""
    completed = subprocess.run([sys.executable, str(PROJECT_ROOT / "scripts" / "bench_search.py"), "runs",
                                str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert f"{tmp_path.name} no result.json" in " ".join(completed.stdout.split())


def test_a_grid_cut_in_two_commands_is_resumed_and_its_best_measured_again(tmp_path):
    """A grid too large for one device command: the second walks only what the first lacks and measures the
    first's best again beside the new ones, so the ranking stays in one process."""
    def study(values: list[str], out, *extra: str) -> dict:
        command = [sys.executable, str(PROJECT_ROOT / "scripts" / "tuner_study.py"), "--example", "softmax",
                   "--bundle", ".", "--values", *values, "--seconds", "120", "--out", str(out), *extra]
        completed = subprocess.run(command, capture_output=True, text=True, timeout=280, cwd=PROJECT_ROOT,
                                   env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(PROJECT_ROOT)})
        assert completed.returncode == 0, completed.stderr[-3000:]
        return json.loads(completed.stdout.strip().splitlines()[-1])

    first = study(["block=64", "warps=1", "stages=1"], tmp_path / "first")
    earlier = tmp_path / "first" / "tuner_study_softmax.jsonl"
    assert [json.loads(line)["config"]["BLOCK_SIZE"] for line in earlier.read_text().splitlines()] == [64]
    assert first["measured"] == first["launchable"] == 1 and first["resumed"] == 0
    second = study(["block=64,128", "warps=1", "stages=1"], tmp_path / "second", "--resume", str(earlier))
    assert (second["resumed"], second["remeasured"], second["measured"], second["launchable"]) == (1, 1, 2, 2)
    lines = [json.loads(line) for line in (tmp_path / "second" / "tuner_study_softmax.jsonl").read_text().splitlines()]
    assert [(line["config"]["BLOCK_SIZE"], line["walk"]) for line in lines] == [(64, 1), (64, 0), (128, 0)]
    # the best is ranked on this command's own measurements only
    assert second["best"]["config"]["BLOCK_SIZE"] in (64, 128) and second["best"]["walk"] == 0
    row = load_bench_search().compare_row("softmax", {"wall_seconds": 1.0, "exit_code": 0,
                                                      "report": {"aggregate_speedup": 1.0}}, second)
    assert "(2 of 2 launchable measured, 2 in the grid, 1 of them by an earlier command whose 1 best" in row
