#!/usr/bin/env python3
"""Measurement study on the H200: false promotions (A/A) and detection of known small gains.

For each example (its h200/ bundle, first case) fresh processes measure, in shuffled interleaved blocks,
five variants through the example's own harness (`benchmark`, i.e. the harness_kit timing the agent uses):
  A   the kernel;  A2  the kernel with a comment changed (an A/A candidate);
  T2, T3, T5  the kernel followed by a GPU spin (`torch.cuda._sleep`) calibrated to add 2 %, 3 %, 5 %
  of its time: an incumbent carrying known extra work, whose removal (candidate A) is a true gain.
Trials then take A/B/A triples of runs from different processes, exactly as the agent schedules them,
and apply the agent's promotion decision (`orchestrator.decision.gates.decide`: correctness, min speedup, CV,
and the statistical test). Runs are real; trials are drawn from them (the report says how many).

  python3 scripts/measurement_study.py --out DIR [--examples vector_add softmax matmul] [--processes 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
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


def evaluation(label: str, case, samples):
    from orchestrator.decision.statistics import sample_stats
    from protocol.results import CaseMeasurement, Evaluation, EvaluationStatus

    measured = CaseMeasurement(case_id=case.case_id, protected=True, weight=1.0, correct=True,
                               samples_us=samples, stats=sample_stats(samples))
    return Evaluation(label=label, status=EvaluationStatus.OK, cases=[measured])


def trial(case, candidate_pool: list[dict], incumbent_pool: list[dict], between, budget, rng: random.Random,
          confirm_pairs: int) -> tuple[object, list[dict], list[dict]]:
    """One A/B/A trial (candidate run from another process than both incumbent runs), extended by the
    agent's own confirmation loop with further runs of the same variants, none used twice. Returns the
    verdict and the runs used on each side."""
    import trio

    from orchestrator.decision.confirmation import confirm_until_decided
    from orchestrator.decision.gates import decide

    incumbents = rng.sample(incumbent_pool, 2)
    candidates = [rng.choice([r for r in candidate_pool if r["process"] not in {i["process"] for i in incumbents}]
                             or candidate_pool)]
    test_seed = rng.randrange(2**31)

    def decide_again():
        return decide([case], [evaluation("candidate", case, r["samples_us"]) for r in candidates],
                      [evaluation("incumbent", case, r["samples_us"]) for r in incumbents],
                      budget, test_seed=test_seed, noise=between)

    async def measure_pair(_pair: int) -> bool:
        for side, pool in ((candidates, candidate_pool), (incumbents, incumbent_pool)):
            side.append(rng.choice(spare(pool)))
        return True

    def spare(pool: list[dict]) -> list[dict]:
        used = {id(r) for r in (*candidates, *incumbents)}
        return [r for r in pool if id(r) not in used]

    verdict, _ = trio.run(lambda: confirm_until_decided(
        decide_again(), max_pairs=confirm_pairs, measure_pair=measure_pair, decide_again=decide_again,
        can_afford_pair=lambda: bool(spare(candidate_pool) and spare(incumbent_pool))))
    return verdict, candidates, incumbents


def analyse(measurements: list[dict], trials: int, seed: int, *, learn_noise: bool = True,
            confirm_pairs: int = 2) -> dict:
    """A/B/A trials through the agent's decision, extended like the agent does: while only the noise gate
    fails, up to `confirm_pairs` more candidate/incumbent run pairs (other runs of the same variants).
    With `learn_noise`, the test's noise is what the agent learns in a run: the pooled between-run spread
    of the incumbent's repeated runs (here all of the incumbent variant's runs, from every process),
    t-inflated; without it, the fixed 0.2 % floor combined with each trial's own spread."""
    from orchestrator.decision.noise import BetweenRunNoise, noise_from_history
    from protocol.bundle import Budget, Case

    budget = Budget()
    rng = random.Random(seed)
    report: dict = {}
    for data in measurements:
        example = data["example"]
        runs = report.setdefault(example, {"runs": [], "kernel_us": []})
        runs["runs"].extend(data["runs"])
        runs["kernel_us"].append(data["kernel_us"])
    results = {}
    for example, data in report.items():
        case = Case(case_id="study")
        by_variant: dict[str, list[dict]] = {}
        for run in data["runs"]:
            by_variant.setdefault(run["variant"], []).append(run)
        medians = {v: [statistics.median(r["samples_us"]) for r in rs] for v, rs in by_variant.items()}
        a_logs = [math.log(m) for m in medians["A"] + medians["A2"]]
        noise = {"kernel_us": statistics.median(data["kernel_us"]),
                 "run_median_cv_A": statistics.pstdev(medians["A"]) / statistics.mean(medians["A"]),
                 "between_run_log_stdev": statistics.pstdev(a_logs),
                 "within_run_cv_median": statistics.median(
                     statistics.pstdev(r["samples_us"]) / statistics.mean(r["samples_us"]) for r in by_variant["A"]),
                 "runs_per_variant": len(by_variant["A"]),
                 "measured_gain": {g: statistics.median(medians[g]) / statistics.median(medians["A"]) for g in GAINS}}
        outcome = {}
        for name, incumbent_variant, candidate_variant in (("aa", "A", "A2"), *((g, g, "A") for g in GAINS)):
            promoted = confirmed = runs_used = 0
            between = (noise_from_history({"study": [medians[incumbent_variant]]}) if learn_noise
                       else BetweenRunNoise())
            for _ in range(trials):
                verdict, candidates, incumbents = trial(case, by_variant[candidate_variant], by_variant[incumbent_variant],
                                               between, budget, rng, confirm_pairs)
                confirmed += len(candidates) > 1
                runs_used += len(candidates) + len(incumbents)
                promoted += verdict.decision.status.value == "promoted"
            outcome[name] = {"trials": trials, "promoted": promoted, "rate": promoted / trials,
                             "confirmed_trials": confirmed, "mean_runs": runs_used / trials,
                             "noise": between.as_dict()}
        results[example] = {"noise": noise, "outcomes": outcome}
    return results


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
        rates = "".join(f" {outcome[k]['promoted']:>4}/{outcome[k]['trials']:<4}" for k in ("aa", "T2", "T3", "T5"))
        gains = " ".join(f"{g}={v:.4f}" for g, v in noise["measured_gain"].items())
        print(f"{example:<11} {noise['kernel_us']:>10.2f} {noise['run_median_cv_A']:>8.4f} "
              f"{noise['within_run_cv_median']:>9.4f}{rates}  {gains}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
