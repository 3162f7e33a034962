"""A provider's exception fails its proposal, never the run (orchestrator/run/provider_failures.py).

The loop runs in this process (`OptimizationRun` under trio) on the synthetic bundle, whose pure-Python worker
takes about a second: only the baseline runs in a worker, every proposal here fails or is a duplicate.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from orchestrator.bundle.budget import resolve_budget
from orchestrator.bundle.inputs import load_inputs
from orchestrator.ledger.artifacts import RunArtifacts, prepare_output_dir
from orchestrator.ledger.config import RunConfig
from orchestrator.ledger.live_log import LiveLog
from orchestrator.providers.factory import create_provider
from orchestrator.run.commit_step import CommitStep
from orchestrator.run.loop import OptimizationRun
from orchestrator.run.provider_failures import MAX_CONSECUTIVE, ProviderFailures
from orchestrator.run.state import RunAborted
from protocol.outcome import ExitCode, StoppingReason
from protocol.results import DecisionStatus, RunResult
from tests.conftest import SYNTHETIC

pytestmark = pytest.mark.timeout(180)

# The synthetic kernel with a module constant the tuner moves, so its first proposal screens a family.
BLOCKED_KERNEL = '''"""Synthetic kernel with a block size."""

LATENCY_US = 100.0
BLOCK_SIZE = 64


def scale(values):
    out = []
    for start in range(0, len(values), BLOCK_SIZE):
        out += [v * 2.0 for v in values[start:start + BLOCK_SIZE]]
    return out
'''


def optimize_in_process(tmp_path: Path, provider: str, kernel_source: str, *, replay_dir: Path | None = None,
                        before: Callable[[Path], None] = lambda output_dir: None) -> tuple[RunResult, str, Path]:
    """One run of the loop in this process, set up as `tlx-agent optimize` sets it up (no preflight, no commits);
    `before` gets the prepared output directory. Returns the result, the live log and the output directory."""
    kernel = tmp_path / "kernel.py"
    kernel.write_text(kernel_source)
    output_dir = prepare_output_dir(tmp_path / "out")
    before(output_dir)
    config = RunConfig(kernel=kernel, harness=SYNTHETIC / "harness.py", cases=SYNTHETIC / "cases.json",
                       target=SYNTHETIC / "target.json", output_dir=output_dir, provider=provider,
                       replay_dir=replay_dir, profile=False, commit_winner=False, worker_start="fresh",
                       worker_python=sys.executable, argv=["tlx-agent", "optimize"])
    inputs = load_inputs(kernel=config.kernel, harness=config.harness, cases=config.cases, target=config.target,
                         budget=None, reference_kernel=None)
    config.budget, config.budget_sources = resolve_budget(
        inputs.target, {"max_rounds": 5, "candidates_per_round": 2, "max_candidate_seconds": 60,
                        "max_total_seconds": 600}, {})
    stream = io.StringIO()
    log = LiveLog(stream)
    log.attach_file(output_dir / "live.log")
    artifacts = RunArtifacts(output_dir)
    run = OptimizationRun(config, inputs, create_provider(config), log, artifacts,
                          CommitStep(config, kernel, log, artifacts))
    result = trio.run(run.run)
    log.close()
    return result, stream.getvalue(), output_dir


def journal_events(output_dir: Path, name: str) -> list[dict]:
    events = map(json.loads, (output_dir / "journal.jsonl").read_text().splitlines())
    return [event for event in events if event["event"] == name]


def test_a_tuner_whose_screening_raises_stops_with_provider_exhausted_after_the_bound(tmp_path):
    """The tuner's proposals screen a family first, and the screening callback raises: its directory is taken by
    a file. Each proposal fails with its traceback kept; the MAX_CONSECUTIVE-th stops the run with exit 2."""
    result, live, output_dir = optimize_in_process(
        tmp_path, "tune", BLOCKED_KERNEL, before=lambda out: (out / "screening").write_text("not a directory\n"))

    assert result.exit_code is ExitCode.NO_WINNER
    assert result.stopping_reason is StoppingReason.PROVIDER_EXHAUSTED
    assert result.report.provider_failures == MAX_CONSECUTIVE
    assert f"failed {MAX_CONSECUTIVE} times in a row" in result.stopping_detail
    assert "NotADirectoryError" in result.stopping_detail
    failed = [e for e in result.experiments if e.round_index >= 1]
    assert [e.experiment_id for e in failed] == ["r001-c000", "r001-c001", "r002-c000"]
    assert all(e.decision is not None and e.decision.status is DecisionStatus.FAILED for e in failed)
    for number, experiment in enumerate(failed, start=1):
        path = output_dir / "provider_failures" / f"{experiment.experiment_id}.txt"
        text = path.read_text()
        assert text.startswith(f"provider: tune\ncall: {experiment.experiment_id}\nerror: NotADirectoryError")
        assert "Traceback (most recent call last)" in text and "orchestrator/run/screening.py" in text
        assert str(path) in experiment.decision.reason
        line = next(line for line in live.splitlines()
                    if line.startswith(f"[tlx-agent] {experiment.experiment_id} status=provider_failed "))
        assert line.startswith(f"[tlx-agent] {experiment.experiment_id} status=provider_failed provider=tune "
                               "error=\"NotADirectoryError: [Errno 20] Not a directory: ")
        assert line.endswith(f"traceback={str(path)!r} consecutive={number}/{MAX_CONSECUTIVE}")
    assert [(e["call"], e["consecutive"]) for e in journal_events(output_dir, "provider_failure")] == [
        ("r001-c000", 1), ("r001-c001", 2), ("r002-c000", 3)]
    assert "r002-c000 status=provider_exhausted reason=" in live
    written = json.loads((output_dir / "journal.jsonl").read_text().splitlines()[-1])
    assert written["event"] == "rounds_ended" and written["stopping_reason"] == "provider_exhausted"


def test_a_replay_provider_that_raises_fails_one_proposal_and_the_run_goes_on(tmp_path):
    """A replayed candidate whose metadata nests deeper than Python's recursion limit makes the replay provider
    raise RecursionError: that proposal fails, the next file is proposed, and the run ends as the directory
    runs out (exit 2), the failure counted once."""
    replay = tmp_path / "replay"
    replay.mkdir()
    source = (SYNTHETIC / "kernel.py").read_text()
    (replay / "001.py").write_text(source.replace("100.0", "50.0"))
    (replay / "001.json").write_text("[" * 100_000 + "]" * 100_000)
    (replay / "002.py").write_text(source)  # the baseline again: a duplicate, so no worker runs
    result, live, output_dir = optimize_in_process(tmp_path, "replay", source, replay_dir=replay)

    assert result.exit_code is ExitCode.NO_WINNER
    assert result.stopping_reason is StoppingReason.PROVIDER_EXHAUSTED
    assert result.stopping_detail == "replay directory exhausted after 2 candidates"
    assert result.report.provider_failures == 1
    decisions = {e.experiment_id: e.decision.status for e in result.experiments if e.decision is not None}
    assert decisions == {"baseline": DecisionStatus.BASELINE, "r001-c000": DecisionStatus.FAILED,
                         "r001-c001": DecisionStatus.DUPLICATE}
    text = (output_dir / "provider_failures" / "r001-c000.txt").read_text()
    assert "error: RecursionError: maximum recursion depth exceeded" in text
    assert "orchestrator/providers/replay.py" in text
    assert "[tlx-agent] r001-c000 status=provider_failed provider=replay error='RecursionError: maximum" in live
    assert [e["call"] for e in journal_events(output_dir, "provider_failure")] == ["r001-c000"]


def test_a_run_abort_inside_a_provider_still_ends_the_run(tmp_path):
    """A RunAborted raised inside the provider (its screening found the bundle changed), alone or inside
    trio's exception groups, is not a proposal's failure: it is raised again, and nothing is counted."""
    artifacts = RunArtifacts(prepare_output_dir(tmp_path / "out"))
    failures = ProviderFailures("tune", artifacts, LiveLog(io.StringIO()))
    aborted = RunAborted(ExitCode.ERROR, "bundle changed", StoppingReason.BUNDLE_TAMPERED)

    async def abort_beside_another_failure() -> None:
        async def abort() -> None:
            raise aborted

        async def other() -> None:
            raise ValueError("other")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(abort)
            nursery.start_soon(other)

    with pytest.raises(Exception) as grouped:  # noqa: PT011 - trio's exception group, whatever its class
        trio.run(abort_beside_another_failure)
    assert grouped.value is not aborted
    for raised in (aborted, grouped.value):
        with pytest.raises(RunAborted) as caught:
            failures.failed("r001-c000", raised)
        assert caught.value is aborted
    assert failures.count == 0 and not (tmp_path / "out" / "provider_failures").exists()


def test_a_resumed_run_counts_the_failures_its_first_life_recorded(tmp_path):
    """The count in result.json covers the whole run: a resumed run starts from the failure files on disk, and
    a slot that fails again keeps both tracebacks."""
    output_dir = prepare_output_dir(tmp_path / "out")
    first = ProviderFailures("replay", RunArtifacts(output_dir), LiveLog(io.StringIO()))
    first.failed("r001-c000", KeyError("a"))
    second = ProviderFailures("replay", RunArtifacts(output_dir), LiveLog(io.StringIO()))
    assert second.count == 1 and second.consecutive == 0
    second.failed("r001-c000", KeyError("b"))
    assert second.count == 2
    assert sorted(p.name for p in (output_dir / "provider_failures").iterdir()) == ["r001-c000-2.txt",
                                                                                     "r001-c000.txt"]
