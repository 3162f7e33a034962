"""`tlx-agent optimize --resume OUT` after a real SIGKILL of the orchestrator.

Each kill waits until journal.jsonl holds k lines, then SIGKILLs the orchestrator process (its workers and
fork server are left to die on their own, as after a real crash). The resumed run must decide what an
uninterrupted run of the same candidates decides (synthetic kernels have deterministic latencies), complete
no experiment twice, leave every finished experiment's files byte-identical and commit each promotion at
most once. A run killed before its bundle was frozen (point 1) has no run.json: its resume is refused. Kill points: the default set runs 5 replay (git commits on) + 3 tune points; `slow` adds 9 + 5,
for 22 in all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT, SYNTHETIC, run_cli, synthetic_kernel, write_candidates

REPLAY_LATENCIES = [80.0, 120.0, 60.0, 60.0, 50.0]  # promote, reject, promote, duplicate, promote
TUNE_KERNEL = '''"""Synthetic kernel with one tunable knob: larger blocks are faster up to 256."""

BLOCK_SIZE = 64
LATENCY_US = 100.0 * (64 / min(BLOCK_SIZE, 256)) + (BLOCK_SIZE > 256) * 50.0


def scale(values):
    return [v * 2.0 for v in values]
'''


def bundle_args(kernel: Path, out: Path, *extra: str | Path) -> list[str | Path]:
    return ["--kernel", kernel, "--harness", SYNTHETIC / "harness.py", "--cases", SYNTHETIC / "cases.json",
            "--target", SYNTHETIC / "target.json", "--output-dir", out, "--max-candidate-seconds", "30",
            "--max-total-seconds", "240", *extra]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def git_checkout(root: Path, source: str) -> Path:
    """A real repository with the kernel committed; returns the kernel's path."""
    root.mkdir(parents=True)
    git(root, "init", "-q")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.com")
    kernel = root / "kernel.py"
    kernel.write_text(source)
    git(root, "add", "kernel.py")
    git(root, "commit", "-q", "-m", "start")
    return kernel


def replay_setup(tmp: Path, name: str) -> list[str | Path]:
    candidates = write_candidates(tmp / "candidates", [synthetic_kernel(x) for x in REPLAY_LATENCIES])
    kernel = git_checkout(tmp / f"{name}-repo", (SYNTHETIC / "kernel.py").read_text())
    return bundle_args(kernel, tmp / name, "--provider", "replay", "--replay-dir", candidates, "--max-rounds", "3")


def tune_setup(tmp: Path, name: str) -> list[str | Path]:
    kernel = tmp / f"{name}-kernel" / "kernel.py"
    kernel.parent.mkdir(parents=True)
    kernel.write_text(TUNE_KERNEL)
    return bundle_args(kernel, tmp / name, "--provider", "tune", "--max-rounds", "3", "--candidates-per-round", "1",
                       "--no-commit-winner")


def run_killed_at(args: list[str | Path], out: Path, lines: int) -> bool:
    """Start the CLI, SIGKILL it once the journal holds `lines` lines; False when it finished first."""
    argv = [sys.executable, "-m", "orchestrator.cli", *map(str, args)]
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                               env=env, cwd=PROJECT_ROOT)
    journal = out / "journal.jsonl"
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        if journal.is_file() and journal.read_bytes().count(b"\n") >= lines:
            os.kill(process.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    process.wait(timeout=60)
    return process.returncode == -signal.SIGKILL


def finished_artifacts(out: Path) -> dict[str, bytes]:
    """Every file of every experiment experiments.json records as finished."""
    listing = out / "experiments.json"
    finished = [e["experiment_id"] for e in json.loads(listing.read_text())] if listing.is_file() else []
    return {str(path.relative_to(out)): path.read_bytes() for experiment in finished
            for path in sorted((out / "experiments" / experiment).rglob("*")) if path.is_file()}


def decisions(result: dict) -> dict[str, str | None]:
    return {e["experiment_id"]: (e.get("decision") or {}).get("status") for e in result["experiments"]}


def journal_events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Uninterrupted runs of the same candidates: what every resumed run must decide."""
    tmp = tmp_path_factory.mktemp("reference")
    found = {}
    for kind, setup in (("replay", replay_setup), ("tune", tune_setup)):
        run = run_cli(*setup(tmp / kind, "out"))
        assert run.returncode == 0, run.stderr[-2000:]
        found[kind] = run.result
    return found


def kill_and_resume(tmp: Path, kind: str, lines: int, reference: dict) -> None:
    setup = replay_setup if kind == "replay" else tune_setup
    args = setup(tmp, "out")
    out = tmp / "out"
    killed = run_killed_at(args, out, lines)
    before = finished_artifacts(out)
    resumed = run_cli("--resume", out, timeout=240)
    if not killed:  # finished before the k-th line: a resume of a finished run is refused
        assert resumed.returncode == 1 and "already finished" in resumed.result["error"]
        return
    if not (out / "run.json").exists():  # died before the freeze: nothing recorded, refused with the reason
        assert resumed.returncode == 1 and "run.json does not exist" in resumed.result["error"]
        return
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = resumed.result
    assert decisions(result) == decisions(reference[kind])
    assert result["winner_experiment_id"] == reference[kind]["winner_experiment_id"]
    assert (out / "best_kernel.py").read_text() == Path(reference[kind]["best_kernel_path"]).read_text()
    events = journal_events(out)
    completed = Counter(e["experiment_id"] for e in events if e["event"] == "experiment")
    assert all(count == 1 for count in completed.values()), completed
    # no finished evaluation of a source ran again (a tune experiment in flight may be proposed anew, another source)
    ran = Counter((e["experiment_id"], e["tag"], e.get("source_sha256")) for e in events
                  if e["event"] == "evaluation" and not e.get("reused"))
    assert all(count == 1 for count in ran.values()), ran
    assert sum(e["event"] == "run_resumed" for e in events) == 1
    after = {name: (out / name).read_bytes() for name in before}
    assert after == before  # no finished experiment's file lost or rewritten
    ids = [e["experiment_id"] for e in result["experiments"]]
    assert len(ids) == len(set(ids))
    if kind == "replay":
        run_id = json.loads((out / "run.json").read_text())["run_id"]
        repo = Path(args[args.index("--kernel") + 1]).parent
        trailers = [line for line in git(repo, "log", "--format=%B").splitlines()
                    if line.startswith(f"TLX-Agent-Run: {run_id} ")]
        promoted = sorted(i for i, status in decisions(result).items() if status == "promoted")
        assert sorted(line.split()[-1] for line in trailers) == promoted  # each promotion committed exactly once
        assert (repo / "kernel.py").read_text() == (out / "best_kernel.py").read_text()
        assert git(repo, "status", "--porcelain") == ""


# journal lines of the replay run: 1 run_started, 2 commit_prepared, 3 baseline, 4-6 r001-c000 (its runs
# candidate first, then promoted), 7 its commit, 8-9 r001-c001 (rejected on its first run), 10-13 r002-c000 and
# its commit, 14 the duplicate, 15-18 r003-c000 and its commit, 19 rounds_ended, 20-22 the finalist's runs,
# 23 run_finished; of the tune run: 1 run_started, 2 baseline, 3 a screening, 4-6 r001-c000, 7 a screening,
# 8-10 r002-c000, 11 rounds_ended, 12-14 the finalist's runs, 15 run_finished
REPLAY_POINTS = [3, 6, 7, 12, 21]
REPLAY_SLOW_POINTS = [1, 2, 5, 8, 10, 15, 17, 19, 22]
TUNE_POINTS = [2, 5, 10]
TUNE_SLOW_POINTS = [1, 4, 7, 9, 13]


@pytest.mark.parametrize("lines", REPLAY_POINTS)
def test_replay_run_with_commits_resumes_after_sigkill(tmp_path, reference, lines):
    kill_and_resume(tmp_path, "replay", lines, reference)


@pytest.mark.slow
@pytest.mark.parametrize("lines", REPLAY_SLOW_POINTS)
def test_replay_run_resumes_after_sigkill_at_more_points(tmp_path, reference, lines):
    kill_and_resume(tmp_path, "replay", lines, reference)


@pytest.mark.parametrize("lines", TUNE_POINTS)
def test_tune_run_resumes_after_sigkill(tmp_path, reference, lines):
    kill_and_resume(tmp_path, "tune", lines, reference)


@pytest.mark.slow
@pytest.mark.parametrize("lines", TUNE_SLOW_POINTS)
def test_tune_run_resumes_after_sigkill_at_more_points(tmp_path, reference, lines):
    kill_and_resume(tmp_path, "tune", lines, reference)


# ---- refusals: exit 1 and one message saying why -------------------------------------------------------------

@pytest.fixture
def killed_run(tmp_path) -> Path:
    args = replay_setup(tmp_path, "out")
    assert run_killed_at(args, tmp_path / "out", 5)
    return tmp_path / "out"


def assert_refused(out: Path, *extra: str, reason: str) -> None:
    run = run_cli("--resume", out, *extra)
    assert run.returncode == 1, run.stderr[-2000:]
    assert reason in run.result["error"], run.result["error"]


def test_a_changed_frozen_bundle_is_refused(killed_run):
    cases = killed_run / "bundle" / "cases.json"
    os.chmod(killed_run / "bundle", 0o755)
    os.chmod(cases, 0o644)
    cases.write_text(cases.read_text().replace('"cost": 4.0', '"cost": 5.0'))
    assert_refused(killed_run, reason="no longer matches its sha256")


def test_a_finished_run_is_refused(tmp_path, reference):
    out = Path(reference["tune"]["output_dir"])
    assert_refused(out, reason="already finished")


def test_an_unknown_record_format_is_refused(killed_run):
    manifest = json.loads((killed_run / "run.json").read_text())
    manifest["record_format"] = 99
    (killed_run / "run.json").write_text(json.dumps(manifest))
    assert_refused(killed_run, reason="record format 99")


def test_a_record_of_a_run_before_resume_existed_is_refused(killed_run):
    manifest = json.loads((killed_run / "run.json").read_text())
    del manifest["record_format"]
    (killed_run / "run.json").write_text(json.dumps(manifest))
    assert_refused(killed_run, reason="record format 0")


def test_a_corrupted_experiments_json_is_refused(killed_run):
    (killed_run / "experiments.json").write_text('[{"experiment_id": "baseline", "evaluations": 3}]')
    assert_refused(killed_run, reason="experiments.json")


def test_another_device_is_refused(tmp_path):
    killed_run = tmp_path / "out"
    assert run_killed_at(replay_setup(tmp_path, "out"), killed_run, 9)
    manifest = json.loads((killed_run / "run.json").read_text())
    records = json.loads((killed_run / "experiments.json").read_text())
    assert manifest["device"] == records[0]["evaluations"][0]["worker"]["device"]
    # the record says the run measured on an H200: the CPU worker of this resume is another device
    for record in records:
        for evaluation in record["evaluations"]:
            evaluation["worker"]["device"] = "NVIDIA H200"
    (killed_run / "experiments.json").write_text(json.dumps(records))
    for record in records:
        (killed_run / "experiments" / record["experiment_id"] / "result.json").write_text(json.dumps(record))
    assert_refused(killed_run, reason="a run continues only on the device it started on")


def test_flags_other_than_the_budget_are_refused(killed_run):
    assert_refused(killed_run, "--provider", "tune", reason="--provider cannot be given with it")


def test_a_torn_last_journal_line_is_dropped_with_a_warning(killed_run):
    journal = killed_run / "journal.jsonl"
    with journal.open("ab") as handle:
        handle.write(b'{"event": "evaluation", "experiment_id": "r00')
    run = run_cli("--resume", killed_run)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "last line was torn" in run.stderr
    assert (killed_run / "journal.jsonl.torn-1").read_bytes().startswith(b'{"event": "evaluation"')
    assert all(json.loads(line) for line in journal.read_text().splitlines())


def test_a_user_commit_after_the_kill_is_never_touched(tmp_path):
    args = replay_setup(tmp_path, "out")
    out = tmp_path / "out"
    assert run_killed_at(args, out, 9)  # after r001-c000's promotion commit
    repo = Path(args[args.index("--kernel") + 1]).parent
    (repo / "notes.txt").write_text("mine\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-q", "-m", "user work")
    user_head = git(repo, "rev-parse", "HEAD").strip()
    run = run_cli("--resume", out)
    assert run.returncode == 3, run.stderr[-2000:]  # the next checkpoint refuses: HEAD moved, as in a live run
    assert git(repo, "rev-parse", "HEAD").strip() == user_head
    assert (repo / "notes.txt").read_text() == "mine\n"


def test_finished_evaluations_of_the_experiment_in_flight_are_taken_from_the_record(tmp_path, reference):
    """Killed between r001-c000's workers (journal line 5: its first two evaluations have ended): the resumed
    run takes those two from experiments/r001-c000.interrupted-1/evaluations/ and runs only the rest."""
    args = replay_setup(tmp_path, "out")
    out = tmp_path / "out"
    assert run_killed_at(args, out, 5)
    resumed = run_cli("--resume", out, timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert decisions(resumed.result) == decisions(reference["replay"])
    reused = [e for e in journal_events(out) if e["event"] == "evaluation" and e.get("reused")]
    assert reused and {e["experiment_id"] for e in reused} == {"r001-c000"}
    kept = sorted(p.name for p in (out / "experiments" / "r001-c000.interrupted-1" / "evaluations").iterdir())
    assert sorted(f"{e['tag']}.json" for e in reused) == kept
    assert "evaluation=" in resumed.stderr and "reused: it had finished before the run was resumed" in resumed.stderr
