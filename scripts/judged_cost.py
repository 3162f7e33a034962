"""Worker cost of judged mode, side by side in one run: the same kernels, the same cases, through
`run_evaluation` (what the run loop calls), once with the example's judged harness and once with the same
harness minus its `JUDGE` (the candidate called in the worker process, as before judged mode).

    .venv/bin/python scripts/judged_cost.py [--rounds 3] [--example vector_add]

Prints, per mode, the worker's wall seconds per evaluation, its setup seconds (isolation, harness import,
and in judged mode the fork of the candidate process), and per case the median sample and the number of
samples. Interpreter timings say nothing about GPU speed: this measures the judge's overhead on the CPU path.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation  # noqa: E402
from orchestrator.worker.process import SubprocessSpawner  # noqa: E402
from protocol.bundle import load_cases_file, load_target_file  # noqa: E402
from protocol.worker import IsolationConfig  # noqa: E402


def harness_copies(example: Path, directory: Path) -> dict[str, Path]:
    source = (example / "harness.py").read_text()
    if "\nJUDGE = " not in source:
        raise SystemExit(f"{example}/harness.py declares no JUDGE")
    judged = directory / "judged" / "harness.py"
    in_process = directory / "in_process" / "harness.py"
    for path, text in ((judged, source), (in_process, source.replace("\nJUDGE = ", "\nIN_PROCESS_ONLY = "))):
        path.parent.mkdir(parents=True)
        path.write_text(text)
    return {"judged": judged, "in_process": in_process}


async def evaluate(example: Path, harness: Path, kernel: Path, work_dir: Path) -> dict:
    plan = EvaluationPlan(
        label="candidate", experiment_id=work_dir.name, run_id="judged-cost", kernel_path=kernel,
        harness_path=harness, target=load_target_file(example / "target.json"),
        cases=load_cases_file(example / "cases.json"), repetitions=10, work_dir=work_dir,
        log_path=work_dir.with_suffix(".log"), deadline=trio.current_time() + 600.0, phase_seconds=300.0,
        log_limit_bytes=1 << 20,
        isolation=IsolationConfig(mode="standard", scratch_dir=str(work_dir), writable_dirs=[str(work_dir)]))
    evaluation = await run_evaluation(plan, SubprocessSpawner(), dict(os.environ))
    if evaluation.status.value != "ok":
        raise SystemExit(f"{harness}: {evaluation.status.value}: {evaluation.reason}")
    return {"wall": evaluation.worker.wall_seconds, "verdict": evaluation.worker.verdict_process,
            "cases": {c.case_id: (c.stats.median, c.stats.n) for c in evaluation.cases if c.stats}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--example", default="vector_add")
    args = parser.parse_args()
    example = ROOT / "examples" / args.example
    results: dict[str, list[dict]] = {"in_process": [], "judged": []}
    with tempfile.TemporaryDirectory() as temporary:
        directory = Path(temporary)
        harnesses = harness_copies(example, directory)
        for round_index in range(args.rounds):  # alternate, so drift hits both modes alike
            for mode, harness in harnesses.items():
                work_dir = directory / f"{mode}-{round_index}"
                result = trio.run(evaluate, example, harness, example / "kernel.py", work_dir)
                results[mode].append(result)
                print(f"round {round_index} {mode}: wall {result['wall']:.2f} s verdict={result['verdict']} "
                      + " ".join(f"{k}: median {m:.0f} us n={n}" for k, (m, n) in result["cases"].items()), flush=True)
    print(f"\n{args.example}, {args.rounds} round(s), median over rounds")
    print(f"{'mode':<11} {'wall s':>7}  per case: median us (samples)")
    for mode, rows in results.items():
        wall = statistics.median(r["wall"] for r in rows)
        cases = rows[0]["cases"].keys()
        per_case = "  ".join(
            f"{case} {statistics.median(r['cases'][case][0] for r in rows):.0f} "
            f"({statistics.median(r['cases'][case][1] for r in rows):.0f})" for case in cases)
        print(f"{mode:<11} {wall:>7.2f}  {per_case}")


if __name__ == "__main__":
    main()
