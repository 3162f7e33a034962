"""Every document a command writes has a schema in `tlx-agent schema`, and every file written matches it.

The slow test runs the real CLI on the synthetic bundle (tests/e2e/synthetic) in the runs that write every
kind of document: a validated bundle optimized in a git checkout with an uncommitted user edit (promotion
commit, commit revalidation, diagnostic profiles), a finalist that fails revalidation (rollback commit,
built-in preflight under validation/), and a baseline that cannot build (the error document, run_aborted).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from orchestrator.cli.main import main
from orchestrator.cli.output import fail
from orchestrator.ledger.artifacts import RunArtifacts
from orchestrator.providers.replay import ReplayProvider
from protocol.bundle import Budget
from protocol.outcome import ExitCode, StoppingReason
from protocol.schema import SCHEMA_SOURCES, document_name
from tests.conftest import SYNTHETIC, run_cli, synthetic_args, synthetic_kernel, write_candidates
from tests.e2e.test_commit_cli import git, make_repo
from tests.run.fake_evaluator import profiled, run_in_process

DOCUMENT_NAMES = {
    "result.json", "experiments.json", "experiments/<id>/result.json", "run.json", "journal.jsonl",
    "bundle.lock.json", "promotion_commits.json", "auto_commit.json", "rollback_commit.json",
    "baseline_profile.json", "best_profile.json", "experiments/<id>/profile.json",
    "experiments/<id>/diagnostic_profile.json", "experiments/<id>/commit_revalidation.json",
    "experiments/<id>/evaluations/<tag>.json",
    "bundle/cases.json", "bundle/target.json", "bundle/budget.json",
}
MODEL_NAMES = {"case", "cases", "target", "budget", "profile_request", "worker_command", "worker_event",
               "sample_stats", "case_measurement", "evaluation", "experiment", "run_result", "error_document",
               "batch_manifest", "batch.json"}  # the batch's, written by tests/batch
USER_EDIT = "    return [v * 2.0 for v in values]  # user's uncommitted note\n"


def schemas_from_cli(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["schema"]) == 0
    return json.loads(capsys.readouterr().out)


def test_schema_names_every_document_and_every_model(capsys):
    schemas = schemas_from_cli(capsys)
    missing = (DOCUMENT_NAMES | MODEL_NAMES) - set(schemas)
    assert not missing, f"`tlx-agent schema` lacks {sorted(missing)}"
    titles = {name: schemas[name].get("title") for name in ("run.json", "bundle.lock.json", "result.json",
                                                             "error_document", "auto_commit.json")}
    assert titles == {"run.json": "RunManifest", "bundle.lock.json": "BundleLock", "result.json": "RunResult",
                      "error_document": "ErrorDocument", "auto_commit.json": "CommitRecord"}
    assert schemas["journal.jsonl"]["discriminator"]["propertyName"] == "event"
    assert set(schemas["journal.jsonl"]["discriminator"]["mapping"]) == {
        "run_started", "evaluation", "experiment", "commit", "run_finished", "run_aborted", "run_interrupted",
        "commit_prepared", "rounds_ended", "run_resumed",  # these three: what --resume reads (docs/resume.md)
        "provider_failure", "finalist_fallback", "proposal_refused"}


def test_document_names_match_paths_with_one_segment_per_id():
    assert document_name("experiments/r001-c000/result.json") == "experiments/<id>/result.json"
    assert document_name("result.json") == "result.json"
    assert document_name("validation/bundle/cases.json") == "validation/bundle/cases.json"
    assert document_name("experiments/a/b/result.json") is None
    assert document_name("experiments/r001-c000/notes.json") is None


def test_the_journal_refuses_an_event_it_does_not_describe(tmp_path):
    artifacts = RunArtifacts(tmp_path)
    with pytest.raises(ValidationError, match="no_such_event"):
        artifacts.journal("no_such_event", detail=1)
    with pytest.raises(ValidationError, match="wall_seconds"):
        artifacts.journal("evaluation", experiment_id="baseline", label="baseline", tag="baseline", status="ok",
                          reason="")
    assert not artifacts.journal_path.exists()
    artifacts.journal("run_finished", exit_code=ExitCode.NO_WINNER, stopping_reason=StoppingReason.PROVIDER_EXHAUSTED)
    line = json.loads(artifacts.journal_path.read_text())
    assert (line["event"], line["exit_code"], line["stopping_reason"]) == ("run_finished", 2, "provider_exhausted")


def test_the_error_document_prints_only_the_fields_given(capsys):
    assert fail("no kernel") == ExitCode.ERROR
    assert json.loads(capsys.readouterr().out) == {"success": False, "exit_code": 1, "error": "no kernel"}
    assert fail("stopped", ExitCode.INTERRUPTED, output_dir="/out", stopping_reason=None) == 130
    assert json.loads(capsys.readouterr().out) == {"success": False, "exit_code": 130, "error": "stopped",
                                                   "output_dir": "/out", "stopping_reason": None}
    with pytest.raises(ValidationError, match="outputdir"):
        fail("typo", outputdir="/out")


def check_documents(root: Path, names: set[str]) -> set[str]:
    """Validate every *.json and *.jsonl under `root` against its named schema; returns the names used."""
    found: set[str] = set()
    paths = sorted([*root.rglob("*.json"), *root.rglob("*.jsonl")])
    assert paths, f"{root} holds no JSON documents"
    for path in paths:
        relative = path.relative_to(root).as_posix()
        name = document_name(relative, names)
        assert name is not None, f"{path}: no schema in `tlx-agent schema` names this file"
        adapter = TypeAdapter(SCHEMA_SOURCES[name])
        text = path.read_text(encoding="utf-8")
        for document in text.splitlines() if path.suffix == ".jsonl" else [text]:
            try:
                adapter.validate_json(document)
            except ValidationError as exc:
                pytest.fail(f"{path} does not match the schema {name!r}: {exc}")
        found.add(name)
    return found


def _optimize_args(out: Path, replay: Path, kernel: Path, *extra: str | Path) -> list[str | Path]:
    args = synthetic_args(out, "--provider", "replay", "--replay-dir", replay, "--max-rounds", "1", *extra,
                          kernel=kernel)
    args.remove("--no-commit-winner")
    return args


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_every_file_the_commands_write_matches_its_schema(tmp_path, capsys):
    names = set(schemas_from_cli(capsys))
    found: set[str] = set()

    # validate, then optimize with its lock: a dirty checkout makes the commit re-verify the merged source.
    (tmp_path / "promote").mkdir()
    repo = make_repo(tmp_path / "promote")
    kernel = repo / "kernel.py"
    dirty = kernel.read_text().replace("    return [v * 2.0 for v in values]\n", USER_EDIT)
    kernel.write_text(dirty)
    budget = tmp_path / "budget.json"
    budget.write_text(json.dumps({"min_speedup": 1.02}))
    inputs = ["--harness", SYNTHETIC / "harness.py", "--cases", SYNTHETIC / "cases.json",
              "--target", SYNTHETIC / "target.json", "--budget", budget]
    validated = run_cli("validate", "--kernel", kernel, *inputs, "--output-dir", tmp_path / "validated")
    assert validated.returncode == 0, validated.stderr
    TypeAdapter(SCHEMA_SOURCES["bundle.lock.json"]).validate_python(validated.result)
    found |= check_documents(tmp_path / "validated", names)

    replay = write_candidates(tmp_path / "cands", [dirty.replace("LATENCY_US = 100.0", "LATENCY_US = 50.0")])
    out = tmp_path / "promoted"
    run = run_cli(*_optimize_args(out, replay, kernel, "--budget", budget, "--diagnostic-instrumentation",
                                  "--bundle-lock", tmp_path / "validated" / "bundle.lock.json"))
    assert run.returncode == 0, run.stderr
    committed = (SYNTHETIC / "kernel.py").read_text().replace("LATENCY_US = 100.0", "LATENCY_US = 50.0")
    assert git(repo, "show", "HEAD:kernel.py") == committed  # the agent's change, without the user's edit
    TypeAdapter(SCHEMA_SOURCES["result.json"]).validate_python(run.result)
    assert json.loads((out / "run.json").read_text())["bundle_lock"]["mode"] == "lock"
    found |= check_documents(out, names)

    # A finalist that is slower when measured again: the promotion commit is rolled back.
    (tmp_path / "rollback").mkdir()
    repo = make_repo(tmp_path / "rollback")
    marker = tmp_path / "already-measured"
    flaky = synthetic_kernel("LATENCY", prelude=(
        f"import os\nMARKER = {str(marker)!r}\nLATENCY = 300.0 if os.path.exists(MARKER) else 40.0\n"
        "if not os.path.exists(MARKER):\n    open(MARKER, 'w').close()\n"))
    out = tmp_path / "rolled-back"
    run = run_cli(*_optimize_args(out, write_candidates(tmp_path / "flaky", [flaky]), repo / "kernel.py",
                                  "--isolation", "off", "--no-triage"))  # A/B/A times the flaky one once
    assert run.returncode == 2, run.stderr
    assert run.result["stopping_reason"] == "finalist_revalidation_failed"
    found |= check_documents(out, names)

    # A baseline that cannot build: the error document names the output dir and why the run stopped.
    broken = tmp_path / "broken" / "kernel.py"
    broken.parent.mkdir()
    broken.write_text('"""No scale()."""\n\nLATENCY_US = 1.0\n')
    out = tmp_path / "aborted"
    run = run_cli(*synthetic_args(out, "--skip-validation", kernel=broken))
    assert run.returncode == 1, run.stderr
    error = TypeAdapter(SCHEMA_SOURCES["error_document"]).validate_python(run.result)
    assert (error.output_dir, error.stopping_reason) == (str(out), "baseline_failed")
    assert [json.loads(line)["event"] for line in (out / "journal.jsonl").read_text().splitlines()] == [
        "run_started", "evaluation", "run_aborted"]
    found |= check_documents(out, names)

    # A run whose untouched kernel a profiler measured (none exists on a CPU: the real loop in-process, each
    # worker's profile made up by the fake evaluator): a candidate promoted on its runs is profiled, profile.json.
    out = tmp_path / "profiled"
    profiled_run = run_in_process(
        SYNTHETIC, out, ReplayProvider(write_candidates(tmp_path / "profiled-cands", [synthetic_kernel(50.0)])),
        profiled(), budget=Budget(max_rounds=1, candidates_per_round=1, max_total_seconds=3600), profile=True)
    assert profiled_run.decisions()["r001-c000"] == "promoted"
    found |= check_documents(out, names)

    expected = DOCUMENT_NAMES | {f"validation/{name}" for name in ("bundle.lock.json", "bundle/cases.json",
                                                                 "bundle/target.json")}
    assert found == expected, f"documents never written by these runs: {sorted(expected - found)}"
