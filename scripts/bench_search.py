"""Benchmarks of the tuner's search, side by side in one run on one machine (results: docs/tuner.md links them).

    python scripts/bench_search.py ready --bundle examples/vector_add --cases examples/vector_add/h200/cases.json \
        --target examples/vector_add/h200/target.json --count 20
        worker start-to-ready: a fresh interpreter vs the per-run fork server, alternating, median of COUNT
    python scripts/bench_search.py runs OUT_DIR...
        per tuner run: the revalidated winner's speedup, candidates, screened configurations and configurations
        screened per minute of screening worker time (from result.json and screening.jsonl)
    python scripts/bench_search.py compare --example softmax --run TUNE_OUT --out DIR [tuner_study options]
        the tuner's revalidated winner (a finished `optimize --provider tune` run in TUNE_OUT) against the
        exhaustive grid of the same knobs and against `@triton.autotune` over the same configurations, all
        three measured in one process by scripts/tuner_study.py on the example's first h200 case; one row
        with the tuner's wall time and the autotuner's tuning time

Start-to-ready is what run_evaluation waits for before the first command: spawn, `hello`, `setup` with every
isolation layer (standard mode), the harness import, `ready` (which names the device, so CUDA is initialised
on a GPU host).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.worker.environment import build_worker_environment, make_scratch_dirs  # noqa: E402
from orchestrator.worker.forkserver import make_spawner  # noqa: E402
from orchestrator.worker.process import Spawner, WorkerConnection, WorkerLaunch  # noqa: E402
from orchestrator.worker.process_tree import kill_tree  # noqa: E402
from protocol.bundle import load_target_file, runs_on_gpu  # noqa: E402
from protocol.worker import HelloEvent, IsolationConfig, ReadyEvent, SetupCommand, ShutdownCommand  # noqa: E402


async def start_to_ready(spawner: Spawner, harness: Path, kernel: Path, target_path: Path, scratch: Path) -> tuple[float, dict]:
    import os

    target = load_target_file(target_path)
    make_scratch_dirs(scratch)
    token = uuid.uuid4().hex
    env, _ = build_worker_environment(dict(os.environ), target.environment, scratch=scratch, token=token)
    launch = WorkerLaunch(argv=[sys.executable, "-s", "-m", "sandbox_worker"], env=env, cwd=scratch,
                          log_path=scratch / "worker.log", token=token)
    with trio.fail_after(180):
        started = time.perf_counter()
        spawned = await spawner.spawn(launch)
        connection = WorkerConnection(spawned)
        hello = await connection.receive_event()
        assert isinstance(hello, HelloEvent), hello
        await connection.send(SetupCommand(
            run_id="bench", experiment_id="e0", harness_path=str(harness), kernel_path=str(kernel),
            target=target.model_dump(),
            isolation=IsolationConfig(mode="standard", scratch_dir=str(scratch), writable_dirs=[str(scratch)])))
        ready = await connection.receive_event()
        seconds = time.perf_counter() - started
        if not isinstance(ready, ReadyEvent):
            raise SystemExit(f"worker did not get ready: {ready}")
        await connection.send(ShutdownCommand())
        await connection.receive_event()
    await kill_tree(spawned.process, launch.token)  # type: ignore[arg-type]
    return seconds, {"isolation": ready.isolation, "device": ready.device}


def ready_main(args: argparse.Namespace) -> None:
    bundle = Path(args.bundle).resolve()
    harness, kernel = bundle / "harness.py", bundle / "kernel.py"
    cases_target = Path(args.target).resolve()
    times: dict[str, list[float]] = {"fresh": [], "forkserver": []}
    facts: dict[str, dict] = {}
    target = load_target_file(cases_target)

    async def main() -> None:
        with tempfile.TemporaryDirectory() as temporary:
            directory = Path(temporary)
            async with make_spawner("forkserver", parent_env=dict(__import__("os").environ),
                                    scratch=directory / "server", python=sys.executable,
                                    target_environment=target.environment,
                                    log_path=directory / "forkserver.log", notify=print,
                                    triton_seed=runs_on_gpu(target.backend)
                                    ) as forked:
                from orchestrator.worker.process import SubprocessSpawner

                fresh = SubprocessSpawner()
                for index in range(args.count):
                    for kind, spawner in (("fresh", fresh), ("forkserver", forked)):
                        seconds, fact = await start_to_ready(spawner, harness, kernel, cases_target,
                                                             directory / f"{kind}-{index}")
                        times[kind].append(seconds)
                        facts[kind] = fact
                        print(f"{kind:<10} #{index:02d} {seconds:.3f} s", flush=True)
                statistics_line = getattr(forked, "statistics", None)
                if callable(statistics_line):
                    print("fork server:", statistics_line())

    trio.run(main)
    same = facts["fresh"]["isolation"] == facts["forkserver"]["isolation"]
    print(f"\nstart-to-ready, median of {args.count} ({facts['fresh']['device']}), isolation identical: {same}")
    for kind, values in times.items():
        print(f"  {kind:<10} median {statistics.median(values):.3f} s  min {min(values):.3f}  max {max(values):.3f}")
    print(f"  isolation: {facts['forkserver']['isolation']}")


def runs_main(args: argparse.Namespace) -> None:
    print(f"{'run':<28} {'exit':>4} {'speedup':>8} {'cands':>5} {'screened':>8} {'cfg/min':>7} {'wall s':>7}")
    for directory in map(Path, args.out_dirs):
        try:
            result = json.loads((directory / "result.json").read_text())
        except (OSError, ValueError) as exc:
            print(f"{directory.name:<28} no result.json ({exc})")
            continue
        screened = []
        path = directory / "screening.jsonl"
        if path.exists():
            screened = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        worker_seconds = sum({line["screen_id"]: line["worker_seconds"] for line in screened}.values())
        rate = len(screened) / worker_seconds * 60 if worker_seconds else 0.0
        candidates = sum(1 for e in result["experiments"] if e["experiment_id"].startswith("r"))
        speedup = result["report"]["aggregate_speedup"]
        print(f"{directory.name:<28} {result['exit_code']:>4} {speedup or 0:>8.3f} {candidates:>5} "
              f"{len(screened):>8} {rate:>7.1f} {result['wall_seconds']:>7.0f}")


def compare_main(args: argparse.Namespace, study_options: list[str]) -> None:
    run = Path(args.run)
    result = json.loads((run / "result.json").read_text())
    command = [sys.executable, str(ROOT / "scripts" / "tuner_study.py"), "--example", args.example,
               "--tuned", str(run / "best_kernel.py"), *([] if args.no_autotune else ["--autotune"]),
               "--out", args.out, *study_options]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"compare-{args.example}.log").write_text(completed.stdout + completed.stderr)
    if completed.returncode != 0 or not completed.stdout.strip():
        raise SystemExit(f"tuner_study failed (exit {completed.returncode}): {completed.stderr[-2000:]}")
    study = json.loads(completed.stdout.strip().splitlines()[-1])
    print(compare_row(args.example, result, study))


def compare_row(example: str, result: dict, study: dict) -> str:
    """One line: the tuner's winner and the autotuner as shares of the grid's best on the promotion gate's
    objective (weighted over the bundle's cases), then on the first case alone (µs there)."""
    best, best_first = study.get("best") or {}, study.get("best_first_case") or {}
    autotune = study.get("autotune") or {}
    first = study["case"]

    def share(value: float | None) -> str:
        return f"{value:.1%}" if value else "n/a"

    def micros(us: float | None) -> str:
        return f"{us:.2f}us" if us else "n/a"

    def on_first(us: float | None) -> str:
        return f"{micros(us)} ({share(best_first.get('median_us') / us if us and best_first else None)})"

    autotuned = (f"{share(autotune.get('vs_best'))} of the grid best, {first}: {on_first(autotune.get('median_us'))}; "
                 f"tuning {autotune.get('tuning_seconds') or 0:.1f} s over {autotune.get('configurations', 0)} "
                 "configurations" if autotune else "not measured")
    resumed = (f", {study['resumed']} of them by an earlier command whose {study['remeasured']} best were measured "
               "again here" if study.get("resumed") else "")
    return (f"{example} over {len(study.get('cases') or {first: 1})} case(s) | tuner: {share(study.get('tuned_vs_best'))} "
            f"of the grid best (run {result['wall_seconds']:.0f} s, revalidated "
            f"{result['report']['aggregate_speedup'] or 0:.3f}x, exit {result['exit_code']}), {first}: "
            f"{on_first(study.get('tuned_us'))} | grid best: {best.get('config')} "
            f"{1 / best['objective'] if best.get('objective') else 0:.3f}x over the untouched kernel, first-case best "
            f"{best_first.get('config')} {micros(best_first.get('median_us'))} "
            f"({study['measured']} of {study['launchable']} launchable measured, {study['grid_size']} in the grid{resumed}; "
            f"{study['seconds']:.0f} s, {study.get('compile_seconds') or 0:.0f} s of it compiling ahead; untouched "
            f"{micros(study.get('baseline_us'))}) | autotune: {autotuned}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ready = sub.add_parser("ready")
    ready.add_argument("--bundle", required=True, help="directory with harness.py and kernel.py")
    ready.add_argument("--target", required=True)
    ready.add_argument("--cases", help="unused; for symmetry with optimize")
    ready.add_argument("--count", type=int, default=20)
    runs = sub.add_parser("runs")
    runs.add_argument("out_dirs", nargs="+")
    compare = sub.add_parser("compare", help="the rest of the arguments go to scripts/tuner_study.py")
    compare.add_argument("--example", required=True)
    compare.add_argument("--run", required=True, help="output directory of a finished tune run")
    compare.add_argument("--out", required=True)
    compare.add_argument("--no-autotune", action="store_true", help="leave @triton.autotune out (it takes minutes)")
    args, rest = parser.parse_known_args()
    if args.command == "compare":
        compare_main(args, rest)
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    else:
        (ready_main if args.command == "ready" else runs_main)(args)


if __name__ == "__main__":
    main()
