#!/usr/bin/env python3
"""Measurement study on the H200: false promotions (A/A) and detection of known small gains.

For each example (its h200/ bundle, first case) fresh processes measure, in shuffled interleaved blocks,
five variants through the example's own harness (`benchmark`, i.e. the harness_kit timing the agent uses):
  A   the kernel;  A2  the kernel with a comment changed (an A/A candidate);
  T2, T3, T5  the kernel followed by a GPU spin (`torch.cuda._sleep`) calibrated to add 2 %, 3 %, 5 %
  of its time: an incumbent carrying known extra work, whose removal (candidate A) is a true gain.
Trials then take A/B/A triples of runs from different processes, exactly as the agent schedules them,
and apply the agent's promotion decision and confirmation loop (`orchestrator/decision/study.py`, which
`tlx-agent simulate DIR` runs on a study's directory too). Runs are real; trials are drawn from them.

  python3 scripts/measurement_study.py --out DIR [--examples vector_add softmax matmul] [--processes 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ENTRY = {"vector_add": "vector_add", "softmax": "softmax", "matmul": "matmul"}
GAINS = {"T2": 0.02, "T3": 0.03, "T5": 0.05}


def tax_source(source: str, entry: str, cycles: int) -> str:
    return source + (
        "\n\n# --- measurement study: known extra work (a calibrated GPU spin after each call) ---\n"
        "import torch as _study_torch\n"
        f"_study_inner = {entry}\n\n\n"
        f"def {entry}(*args, **kwargs):\n"
        "    out = _study_inner(*args, **kwargs)\n"
        f"    _study_torch.cuda._sleep({cycles})\n"
        "    return out\n")


def load_harness(example: str):
    path = ROOT / "examples" / example / "harness.py"
    spec = importlib.util.spec_from_file_location(f"study_harness_{example}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)
    return module


def measure_process(example: str, index: int, blocks: int, budget: float, out: Path) -> None:
    import torch

    from sandbox_worker.harness_kit import context

    harness = load_harness(example)
    bundle = ROOT / "examples" / example / "h200"
    target = json.loads((bundle / "target.json").read_text())
    case = json.loads((bundle / "cases.json").read_text())[0]
    case["parameters"]["budget_seconds"] = budget
    source = (ROOT / "examples" / example / "kernel.py").read_text()
    rng = random.Random(1000 + index)
    context.set_command_context(seed=rng.randrange(2**31), phase="benchmark")

    def run(artifact) -> list[float]:
        context.set_command_context(seed=rng.randrange(2**31), phase="benchmark")
        return harness.benchmark(artifact, case, 10)["samples_us"]

    base = harness.build(source, target)["artifact"]
    kernel_us = statistics.median(run(base))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)
    start.record()
    torch.cuda._sleep(1_000_000)
    end.record()
    torch.cuda.synchronize()
    cycles_per_us = 1_000_000 / (start.elapsed_time(end) * 1000.0)
    variants = {"A": source, "A2": source.replace('"""', '"""Measurement study A/A variant. ', 1)}
    for name, gain in GAINS.items():
        variants[name] = tax_source(source, ENTRY[example], int(gain * kernel_us * cycles_per_us))
    artifacts = {name: harness.build(text, target)["artifact"] for name, text in variants.items()}
    runs = []
    for block in range(blocks):
        order = list(variants)
        rng.shuffle(order)
        for name in order:
            runs.append({"variant": name, "process": index, "block": block, "samples_us": run(artifacts[name])})
    out.write_text(json.dumps({"example": example, "process": index, "kernel_us": kernel_us,
                               "cycles_per_us": cycles_per_us, "case": case, "runs": runs}))


def analyse(measurements: list[dict], trials: int, seed: int, *, learn_noise: bool = True,
            confirm_pairs: int = 2) -> dict:
    """The trials, decided by the product (`orchestrator/decision/study.py`, also `tlx-agent simulate DIR`)."""
    from orchestrator.decision.study import StudyMeasurement
    from orchestrator.decision.study import analyse as decide_trials

    result = decide_trials([StudyMeasurement.model_validate(m) for m in measurements], trials, seed,
                           learn_noise=learn_noise, confirm_pairs=confirm_pairs)
    return {example: {"noise": result.noise[example].model_dump() if example in result.noise else None,
                      "outcomes": {name: {**cell.model_dump(), "rate": cell.rate} for name, cell in cells.items()}}
            for example, cells in result.outcomes.items()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--examples", nargs="+", default=["vector_add", "softmax", "matmul"])
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--budget-seconds", type=float, default=0.25)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--measure", nargs=2, metavar=("EXAMPLE", "INDEX"))
    parser.add_argument("--analyse-only", action="store_true")
    parser.add_argument("--fixed-noise-floor", action="store_true", help="analyse with the 0.2 %% default floor only")
    parser.add_argument("--confirm-runs", type=int, default=2, help="extra pairs while only the noise gate fails")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.measure:
        example, index = args.measure
        measure_process(example, int(index), args.blocks, args.budget_seconds,
                        args.out / f"runs_{example}_{index}.json")
        return 0
    started = time.time()
    if not args.analyse_only:
        for example in args.examples:
            for index in range(args.processes):  # one fresh process at a time: the GPU is never shared
                subprocess.run([sys.executable, __file__, "--out", str(args.out), "--blocks", str(args.blocks),
                                "--budget-seconds", str(args.budget_seconds), "--measure", example, str(index)],
                               check=True)
    measurements = [json.loads(p.read_text()) for p in sorted(args.out.glob("runs_*.json"))]
    results = analyse(measurements, args.trials, seed=7, learn_noise=not args.fixed_noise_floor,
                      confirm_pairs=args.confirm_runs)
    (args.out / "study.json").write_text(json.dumps(results, indent=2))
    print(f"measurement study ({time.time() - started:.0f} s)")
    print(f"{'example':<11} {'kernel_us':>10} {'run_cv':>8} {'in_run_cv':>9} "
          f"{'A/A':>9} {'2%':>9} {'3%':>9} {'5%':>9}  measured gains")
    for example, data in results.items():
        noise, outcome = data["noise"], data["outcomes"]
        if noise is None:  # the examples decided together: see `tlx-agent simulate DIR`
            print(f"{example:<11} " + "  ".join(f"{k} {v['promoted']}/{v['trials']}" for k, v in outcome.items()))
            continue
        rates = "".join(f" {outcome[k]['promoted']:>4}/{outcome[k]['trials']:<4}" for k in ("aa", "T2", "T3", "T5"))
        gains = " ".join(f"{g}={v:.4f}" for g, v in noise["measured_gain"].items())
        print(f"{example:<11} {noise['kernel_us']:>10.2f} {noise['run_median_cv_A']:>8.4f} "
              f"{noise['within_run_cv_median']:>9.4f}{rates}  {gains}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
