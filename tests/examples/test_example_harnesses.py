"""The example bundles (vector_add, softmax, matmul) through their own harnesses in the Triton interpreter.

Per example, in a subprocess with TRITON_INTERPRET=1 (an interpreter out-of-bounds access corrupts the
process that made it): the baseline builds and passes every case of cases.json; its benchmark returns
at least `repetitions` positive samples; a deliberately wrong variant (outputs scaled by 1.01) fails
verify; a better-tuned variant (bigger tiles, more warps: the knobs a tuner edits) passes every case and
is faster than the baseline, both timed in the same process; and `profile` answers on a CPU with every
tool unavailable instead of raising. The subprocess is this file run as a script; it writes one JSON
report that the tests below assert on.

The seed is random per run (the harnesses must pass for any seed) and is printed in every failure.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
REPETITIONS = 3
SPEED_REPETITIONS = 5
MIN_SPEEDUP = 1.2
CHILD_TIMEOUT_S = 100

pytestmark = pytest.mark.timeout(CHILD_TIMEOUT_S + 20)


@dataclass(frozen=True)
class Example:
    name: str
    wrong: tuple[str, str]  # (text in kernel.py, replacement) that scales the output by 1.01
    tuned: dict[str, int]  # module-level knob -> better value
    baseline: dict[str, int]  # the untuned knob values kernel.py must start from
    extra_wrong: dict[str, str] = field(default_factory=dict)  # label -> complete kernel source that must fail


NAIVE_SOFTMAX = '''\
"""Softmax without the row-max subtraction: exp overflows (or underflows) for large row offsets."""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0)
    offsets = tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * n_cols + offsets, mask=mask, other=float("-inf"))
    e = tl.exp(x)
    tl.store(out_ptr + row * n_cols + offsets, e / tl.sum(e, axis=0), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return out
'''

EXAMPLE_SPECS = {
    "vector_add": Example(
        name="vector_add",
        wrong=("tl.store(out_ptr + offsets, x + y, mask=mask)", "tl.store(out_ptr + offsets, (x + y) * 1.01, mask=mask)"),
        baseline={"BLOCK_SIZE": 64},
        tuned={"BLOCK_SIZE": 1024},
    ),
    "softmax": Example(
        name="softmax",
        wrong=("tl.exp(x - row_max) * inverse_sum", "tl.exp(x - row_max) * inverse_sum * 1.01"),
        baseline={"BLOCK_SIZE": 32, "NUM_WARPS": 1, "NUM_STAGES": 1},
        tuned={"BLOCK_SIZE": 512, "NUM_WARPS": 4},
        extra_wrong={"no_max_subtraction": NAIVE_SOFTMAX},
    ),
    "matmul": Example(
        name="matmul",
        wrong=("acc.to(c_ptr.dtype.element_ty)", "(acc * 1.01).to(c_ptr.dtype.element_ty)"),
        baseline={"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 1, "NUM_WARPS": 2, "NUM_STAGES": 1},
        tuned={"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "NUM_WARPS": 4},
    ),
}


# ---- the child: runs under TRITON_INTERPRET=1 -------------------------------------------------------


def set_knobs(source: str, knobs: dict[str, int], expected: dict[str, int]) -> str:
    """Rewrite `NAME = value` module-level lines; each must exist exactly once with its expected value."""
    lines = source.splitlines(keepends=True)
    for name, value in knobs.items():
        matches = [i for i, line in enumerate(lines) if line.startswith(f"{name} = ")]
        if len(matches) != 1:
            raise AssertionError(f"expected one module-level `{name} = ...` line, found {len(matches)}")
        index = matches[0]
        current = lines[index].split("=", 1)[1].split("#", 1)[0].strip()
        if current != str(expected[name]):
            raise AssertionError(f"{name} is {current}, expected the untuned baseline {expected[name]}")
        lines[index] = f"{name} = {value}\n"
    return "".join(lines)


def _import_harness(example: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"example_harness_{example}", EXAMPLES / example / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verdict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return {"passed": bool(value.get("passed")), "diagnostics": str(value.get("diagnostics", ""))[:400]}
    return {"passed": bool(value), "diagnostics": ""}


def _run_child(example_name: str, seed: int) -> dict[str, Any]:
    from sandbox_worker.harness_kit import context

    spec = EXAMPLE_SPECS[example_name]
    harness = _import_harness(example_name)
    directory = EXAMPLES / example_name
    source = (directory / "kernel.py").read_text(encoding="utf-8")
    target = json.loads((directory / "target.json").read_text(encoding="utf-8"))
    cases = json.loads((directory / "cases.json").read_text(encoding="utf-8"))
    report: dict[str, Any] = {"seed": seed, "cases": [case["case_id"] for case in cases]}

    def phase(name: str) -> None:
        context.set_command_context(seed=seed, phase=name)

    def build(kernel_source: str) -> Any:
        phase("build")
        built = harness.build(kernel_source, target)
        assert built["success"], built.get("diagnostics")
        return built["artifact"]

    def verify_all(artifact: Any) -> dict[str, dict[str, Any]]:
        phase("verify")
        return {case["case_id"]: _verdict(harness.verify(artifact, case)) for case in cases}

    def quick(case: dict[str, Any], budget: float) -> dict[str, Any]:
        return {**case, "parameters": {**case["parameters"], "budget_seconds": budget}}

    def benchmark(artifact: Any, case: dict[str, Any], repetitions: int, budget: float) -> dict[str, Any]:
        phase("benchmark")
        return harness.benchmark(artifact, quick(case, budget), repetitions)

    phase("build")
    missing = harness.build("import torch\n", target)
    report["build_without_entry_point"] = {"success": missing["success"], "diagnostics": missing.get("diagnostics")}

    baseline = build(source)
    started = time.perf_counter()
    report["baseline_verify"] = verify_all(baseline)
    report["baseline_verify_seconds"] = time.perf_counter() - started

    result = benchmark(baseline, cases[0], REPETITIONS, budget=0.2)
    report["baseline_benchmark"] = {"samples_us": result["samples_us"], "metrics": result.get("metrics", {}),
                                    "cache_policy": result.get("cache_policy")}

    wrong_source = source.replace(*spec.wrong)
    assert wrong_source != source, f"the wrong-variant edit {spec.wrong[0]!r} no longer matches kernel.py"
    phase("verify")
    report["wrong_verify"] = {"scaled_by_1.01": _verdict(harness.verify(build(wrong_source), cases[0]))}
    for label, extra in spec.extra_wrong.items():
        phase("verify")
        report["wrong_verify"][label] = _verdict(harness.verify(build(extra), cases[0]))

    tuned = build(set_knobs(source, spec.tuned, spec.baseline))
    report["tuned_verify"] = verify_all(tuned)
    # Alternate the two so load on the machine hits both alike; medians of all their samples.
    baseline_samples: list[float] = []
    tuned_samples: list[float] = []
    for _ in range(2):
        baseline_samples += benchmark(baseline, cases[0], SPEED_REPETITIONS, budget=0.3)["samples_us"]
        tuned_samples += benchmark(tuned, cases[0], SPEED_REPETITIONS, budget=0.3)["samples_us"]
    report["speed"] = {"baseline_median_us": statistics.median(baseline_samples),
                       "tuned_median_us": statistics.median(tuned_samples),
                       "speedup": statistics.median(baseline_samples) / statistics.median(tuned_samples)}

    phase("profile")
    with tempfile.TemporaryDirectory() as artifacts_dir:
        profiled = harness.profile(baseline, cases[0], {"level": "summary", "tools": ["proton_launch", "ncu"],
                                                        "artifacts_dir": artifacts_dir})
    report["profile"] = json.loads(json.dumps(profiled, default=str))
    output = harness.run_case(baseline, cases[0])
    report["run_case_shape"] = list(output.shape)
    return report


def child_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="run one example's harness checks; writes a JSON report")
    parser.add_argument("--example", required=True, choices=sorted(EXAMPLE_SPECS))
    parser.add_argument("--seed", required=True, type=int)
    parser.add_argument("--report", required=True)
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") != "1":
        sys.stderr.write("run with TRITON_INTERPRET=1\n")
        return 2
    report = _run_child(args.example, args.seed)
    Path(args.report).write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


# ---- the tests ----------------------------------------------------------------------------------------


def run_example(example: str, tmp_path: Path) -> dict[str, Any]:
    seed = random.SystemRandom().randrange(2**31)
    report_path = tmp_path / f"{example}.json"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT), "TLX_WORKER_SCRATCH": str(tmp_path)}
    completed = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--example", example, "--seed", str(seed),
         "--report", str(report_path)],
        capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )
    assert completed.returncode == 0, f"seed {seed}: child failed\n{completed.stderr[-4000:]}"
    return json.loads(report_path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("example", sorted(EXAMPLE_SPECS))
def test_example_harness_in_the_interpreter(example: str, tmp_path: Path) -> None:
    report = run_example(example, tmp_path)
    seed = f"{example} (seed {report['seed']})"

    assert report["build_without_entry_point"]["success"] is False, seed
    assert "does not export" in report["build_without_entry_point"]["diagnostics"], seed

    assert report["cases"], seed
    for case_id, verdict in report["baseline_verify"].items():
        assert verdict["passed"], f"{seed}: baseline fails {case_id}: {verdict['diagnostics']}"
    assert set(report["baseline_verify"]) == set(report["cases"])

    samples = report["baseline_benchmark"]["samples_us"]
    assert len(samples) >= REPETITIONS and all(s > 0 for s in samples), f"{seed}: {samples}"
    assert report["baseline_benchmark"]["cache_policy"] == "cpu_perf_counter", seed
    assert report["baseline_benchmark"]["metrics"]["mode"] == "cpu", seed

    for label, verdict in report["wrong_verify"].items():
        assert not verdict["passed"], f"{seed}: the {label} variant passed verify"
        assert verdict["diagnostics"], f"{seed}: the {label} variant failed without a diagnostic"

    for case_id, verdict in report["tuned_verify"].items():
        assert verdict["passed"], f"{seed}: tuned variant fails {case_id}: {verdict['diagnostics']}"
    speed = report["speed"]
    assert speed["speedup"] > MIN_SPEEDUP, f"{seed}: tuned is not faster enough: {speed}"

    profiled = report["profile"]
    assert profiled["proton"]["available"] is False and profiled["ncu"]["available"] is False, seed
    assert any("TRITON_INTERPRET" in line for line in profiled["diagnostics"]), profiled["diagnostics"]
    assert profiled["scope"]["kernel"] == json.loads((EXAMPLES / example / "target.json").read_text())["main_scope"]
    assert report["run_case_shape"], seed


def test_bundles_pair_an_interpreter_target_with_an_h200_target() -> None:
    """Every example runs in the interpreter by default and has an H200 variant; both have a protected
    ragged case, and both name the same main kernel for Proton and ncu."""
    for example in EXAMPLE_SPECS:
        directory = EXAMPLES / example
        cpu_target = json.loads((directory / "target.json").read_text())
        gpu_target = json.loads((directory / "h200" / "target.json").read_text())
        assert cpu_target["environment"] == {"TRITON_INTERPRET": "1"} and cpu_target["backend"] == "cpu"
        assert (gpu_target["backend"], gpu_target["architecture"], gpu_target["device"]) == ("cuda", "H200", "cuda:0")
        assert cpu_target["main_scope"] == gpu_target["main_scope"]
        for cases_path in (directory / "cases.json", directory / "h200" / "cases.json"):
            cases = json.loads(cases_path.read_text())
            assert any(case["protected"] and "ragged" in case["case_id"] for case in cases), cases_path


@pytest.mark.parametrize("example", sorted(EXAMPLE_SPECS))
def test_knobs_are_plain_literals_the_tuner_can_edit(example: str) -> None:
    from orchestrator.providers.tune import find_knobs

    source = (EXAMPLES / example / "kernel.py").read_text(encoding="utf-8")
    knobs = {knob.name: knob.value for knob in find_knobs(source) if knob.origin == "constant"}
    assert knobs == EXAMPLE_SPECS[example].baseline


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(child_main(sys.argv[1:]))
