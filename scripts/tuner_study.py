#!/usr/bin/env python3
"""How close does `--provider tune` get to the best configuration of the same knobs? (H200 script)

Enumerates the knob grid that the tuner itself searches (`orchestrator.providers.tune.find_knobs` and
`DOMAINS`, restricted per kind by --values), measures every configuration in ONE process through the
example's own harness on every case of its h200 bundle (build, verify, benchmark), and measures the tuner's
winner (`best_kernel.py` of a tune run) in the same process, so the ratio is side by side. Configurations
are ranked by the promotion gate's objective: the weighted geometric mean over the cases of the median
relative to the untouched kernel's (`objective`, lower is faster); the first case's own best is reported
too (`best_first_case`), since a configuration best there may regress the others (`--first-case-only`
measures that case alone, as the earlier studies did). The grid is
walked in a fixed random order under a time cap; the report says how much of it was covered.
`--values tile=64,128,256 warps=4,8` narrows a kind's values (the report records the grid used);
`--compile-workers N` first compiles the grid in N parallel processes (build + verify fill the shared
Triton cache), so the timed walk is not spent compiling (matmul configurations take seconds each, one compile
per case whose shapes specialize differently); `--compile-seconds S` stops them after S seconds (the walk
compiles the rest as it goes). `--seconds` caps the walk alone, counted from the end of the compiles: on the
H200 (2026-12-02) compiling 50 matmul configurations for three cases took 117.6 s of a 130 s cap that used to
include it, and only 20 were measured.
Every measured configuration is appended to `OUT/tuner_study_EXAMPLE.jsonl` as it is measured, so a
command cut short keeps what it walked; `--resume THAT_FILE` walks only the configurations it lacks (the
compile workers too) and re-measures its `--remeasure K` best beside the tuned kernel, so a grid too large
for one device command is covered in two while every ranking stays side by side in one process.
`--autotune` also measures, in the same process, the example under `@triton.autotune` over the same
launchable configurations (`scripts/autotune_kernels/EXAMPLE.py`): its tuning time (build and the first
verified call, during which Triton benchmarks every configuration) and its speed afterwards.

  python3 scripts/tuner_study.py --example softmax --tuned RUN/best_kernel.py --out DIR [--seconds 90]
"""

from __future__ import annotations

import argparse
import itertools
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
GRID = {"block": (64, 128, 256, 512, 1024, 2048, 4096), "tile": (32, 64, 128, 256), "warps": (1, 2, 4, 8, 16),
        "stages": (1, 2, 3, 4), "group": (1, 8)}


def narrowed_grid(items: list[str]) -> dict[str, tuple[int, ...]]:
    """`GRID` with the kinds `--values KIND=V1,V2 ...` names narrowed to those values (ValueError saying the form)."""
    values_by_kind = dict(GRID)
    for item in items:
        kind, _, values = item.partition("=")
        try:
            if kind not in GRID or not values:
                raise ValueError
            values_by_kind[kind] = tuple(int(v) for v in values.split(","))
        except ValueError:
            raise ValueError(f"--values {item!r}: use KIND=V1,V2 with integers and KIND one of {sorted(GRID)}") from None
    return values_by_kind


def main() -> int:
    from orchestrator.decision.statistics import weighted_geomean
    from orchestrator.providers.tune import apply_knobs, find_knobs
    from sandbox_worker.harness_kit import context

    parser = argparse.ArgumentParser()
    parser.add_argument("--example", required=True)
    parser.add_argument("--tuned", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--values", nargs="*", default=[], metavar="KIND=V1,V2", help="narrow a knob kind's values")
    parser.add_argument("--compile-workers", type=int, default=0)
    parser.add_argument("--compile-seconds", type=float, help="stop the compile workers after this long")
    parser.add_argument("--budget-seconds", type=float, default=0.2, help="sampling budget per configuration")
    parser.add_argument("--skip-smem-over", type=float, metavar="KIB",
                        help="skip matmul configurations whose pipelined fp16 tiles need more shared memory "
                             "(NUM_STAGES x (BLOCK_M*BLOCK_K + BLOCK_K*BLOCK_N) x 2 bytes): they cannot launch")
    parser.add_argument("--bundle", default="h200", help="bundle dir under the example ('.' = the CPU bundle)")
    parser.add_argument("--autotune", action="store_true",
                        help="also measure @triton.autotune over the same configurations (scripts/autotune_kernels)")
    parser.add_argument("--first-case-only", action="store_true", help="measure and rank on the first case alone")
    parser.add_argument("--resume", type=Path, metavar="JSONL",
                        help="an earlier study's tuner_study_EXAMPLE.jsonl: walk only what it lacks")
    parser.add_argument("--remeasure", type=int, default=5,
                        help="with --resume: re-measure its K best here, beside the tuned kernel")
    parser.add_argument("--warm-shard", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        grid_values = narrowed_grid(args.values)
    except ValueError as exc:
        parser.error(str(exc))
    import importlib.util

    example = ROOT / "examples" / args.example
    spec = importlib.util.spec_from_file_location("study_harness", example / "harness.py")
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    target = json.loads((example / args.bundle / "target.json").read_text())
    cases = json.loads((example / args.bundle / "cases.json").read_text())
    cases = cases[:1] if args.first_case_only else cases
    for case in cases:
        case["parameters"]["budget_seconds"] = args.budget_seconds
    first = cases[0]["case_id"]
    source = (example / "kernel.py").read_text()
    knobs = find_knobs(source)
    grid = list(itertools.product(*(grid_values[k.kind] for k in knobs)))
    random.Random(0).shuffle(grid)
    full_grid_size = len(grid)
    names = [k.name for k in knobs]
    if args.skip_smem_over:
        def smem_kib(values) -> float:
            c = dict(zip(names, values, strict=True))
            return c["NUM_STAGES"] * (c["BLOCK_M"] * c["BLOCK_K"] + c["BLOCK_K"] * c["BLOCK_N"]) * 2 / 1024

        grid = [values for values in grid if smem_kib(values) <= args.skip_smem_over]

    def values_of(result: dict) -> tuple[int, ...]:
        return tuple(result["config"][name] for name in names)

    earlier = read_results(args.resume) if args.resume else []
    covered = {values_of(r) for r in earlier}
    # the earlier walk's best, each once, by its latest measurement (walk 0 is the newest)
    latest = {values_of(r): r for r in sorted(earlier, key=lambda r: -r.get("walk", 0))}
    remeasured = [values for values, r in sorted(latest.items(), key=lambda item: item[1]["objective"] or math.inf)
                  if r["objective"]][:args.remeasure]
    grid = remeasured + [values for values in grid if values not in covered]

    def configured(values) -> str:
        return apply_knobs(source, {knob.key: value for knob, value in zip(knobs, values, strict=True)})

    def measure(text: str, *, time_it: bool = True) -> dict[str, float] | None:
        return measure_timed(text, time_it=time_it)[0]

    def measure_timed(text: str, *, time_it: bool = True) -> tuple[dict[str, float] | None, float]:
        """The median in µs per case (None: did not build, verify or launch on every case) and the seconds
        until every case had a verified call."""
        started = time.perf_counter()
        try:
            built = harness.build(text, target)
            if not built.get("success", True):
                return None, time.perf_counter() - started
            artifact = built.get("artifact", built)
            for case in cases:
                context.set_command_context(seed=random.randrange(2**31), phase="verify")
                if not harness.verify(artifact, case)["passed"]:
                    return None, time.perf_counter() - started
            verified = time.perf_counter() - started
            if not time_it:
                return None, verified
            medians = {}
            for case in cases:
                context.set_command_context(seed=random.randrange(2**31), phase="benchmark")
                medians[case["case_id"]] = statistics.median(harness.benchmark(artifact, case, 10)["samples_us"])
            return medians, verified
        except Exception:  # noqa: BLE001 - an illegal configuration (resources) is just skipped
            return None, time.perf_counter() - started

    weights = {case["case_id"]: float(case.get("weight", 1.0)) for case in cases}

    def objective(medians: dict[str, float] | None, reference: dict[str, float] | None) -> float | None:
        """The gate's aggregate form: weighted geometric mean over the cases of median / reference median."""
        if not medians or not reference:
            return None
        return weighted_geomean({c: medians[c] / reference[c] for c in weights}, weights) or None

    if args.warm_shard is not None:  # a compile worker: fill the Triton cache with its share of the grid
        for values in grid[args.warm_shard::args.compile_workers]:
            measure(configured(values), time_it=False)
        return 0
    started = time.time()
    if args.compile_workers:
        command = [sys.executable, __file__, *sys.argv[1:]]
        workers = [subprocess.Popen([*command, "--warm-shard", str(index)]) for index in range(args.compile_workers)]
        for worker in workers:
            left = None if args.compile_seconds is None else max(0.1, started + args.compile_seconds - time.time())
            try:
                worker.wait(timeout=left)
            except subprocess.TimeoutExpired:
                worker.kill()  # ours; what it compiled so far stays in the cache
                worker.wait()
    compiled_seconds = time.time() - started
    walk_started = time.time()
    results = []
    baseline = measure(source)
    tuned = measure(args.tuned.read_text()) if args.tuned and args.tuned.exists() else None
    args.out.mkdir(parents=True, exist_ok=True)
    record = args.out / f"tuner_study_{args.example}.jsonl"
    with record.open("w") as lines:  # the earlier walk first (read above), then each result as it lands
        for result in earlier:
            lines.write(json.dumps({**result, "walk": result.get("walk", 0) + 1}) + "\n")
        for values in grid:
            if time.time() - walk_started > args.seconds:
                break
            medians = measure(configured(values))
            results.append({"config": dict(zip(names, values, strict=True)), "medians_us": medians,
                            "median_us": medians[first] if medians else None,
                            "objective": objective(medians, baseline), "walk": 0})
            lines.write(json.dumps(results[-1]) + "\n")
            lines.flush()
    walked = time.time() - walk_started
    valid = [r for r in results if r["objective"]]
    best = min(valid, key=lambda r: r["objective"]) if valid else None
    best_first = min(valid, key=lambda r: r["median_us"]) if valid else None
    tuned_objective = objective(tuned, baseline)
    autotuned = None
    if args.autotune:
        configurations = [dict(zip((k.name for k in knobs), values, strict=True)) for values in grid]
        medians, tuning = measure_timed(autotune_source(args.example, configurations))
        autotuned = {"configurations": len(configurations), "tuning_seconds": tuning, "medians_us": medians,
                     "median_us": medians[first] if medians else None, "objective": objective(medians, baseline),
                     "vs_best": share(best, objective(medians, baseline))}
    report = {"example": args.example, "case": first, "cases": weights, "knobs": [k.name for k in knobs],
              "grid": {k.name: grid_values[k.kind] for k in knobs},
              "grid_size": full_grid_size, "launchable": len(grid) - len(remeasured) + len(covered),
              "measured": len(covered | {values_of(r) for r in results}),
              "valid": len(valid), "resumed": len(covered), "remeasured": len(remeasured),
              "compile_seconds": compiled_seconds, "walk_seconds": walked,
              "baseline_us": baseline[first] if baseline else None, "baseline_medians_us": baseline,
              "tuned_us": tuned[first] if tuned else None, "tuned_medians_us": tuned, "tuned_objective": tuned_objective,
              "best": best, "best_first_case": best_first,
              "tuned_vs_best": share(best, tuned_objective),
              "tuned_vs_best_first_case": (best_first["median_us"] / tuned[first]) if best_first and tuned else None,
              "autotune": autotuned,
              "seconds": time.time() - started}
    (args.out / f"tuner_study_{args.example}.json").write_text(json.dumps({**report, "results": results}, indent=1))
    print(json.dumps(report))
    return 0


def read_results(path: Path) -> list[dict]:
    """An earlier study's results, one JSON object a line; a line cut by a kill mid-write is left out."""
    results = []
    for line in path.read_text().splitlines():
        try:
            results.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return results


def share(best: dict | None, objective: float | None) -> float | None:
    """A speed as a share of the best configuration's, on the objective (1.0: as fast as the best)."""
    return best["objective"] / objective if best and objective else None


def autotune_source(example: str, configurations: list[dict[str, int]]) -> str:
    """scripts/autotune_kernels/EXAMPLE.py with its `GRID` set to `configurations`."""
    template = (ROOT / "scripts" / "autotune_kernels" / f"{example}.py").read_text()
    marker = "GRID: list[dict[str, int]] = []"
    if marker not in template:
        raise SystemExit(f"scripts/autotune_kernels/{example}.py has no `{marker}` line to fill")
    return template.replace(marker, f"GRID: list[dict[str, int]] = {json.dumps(configurations)}", 1)


if __name__ == "__main__":
    raise SystemExit(main())
