"""`tlx-agent report`: the completion report of a finished run, and of runs that stopped with an error
document (the report says so, with the output directory and the error, and exits 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.cli.main import main
from orchestrator.cli.report import TEXT_LABELS
from protocol.completion import CompletionReport
from tests.conftest import PROJECT_ROOT, run_cli, synthetic_args, write_candidates
from tests.validate import VERIFY_ACCEPTS_EVERYTHING, make_bundle

H200_RESULT = PROJECT_ROOT / "docs" / "data" / "h200-vector-add-result.json"


def _report(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, dict, str]:
    code = main(["report", *map(str, args)])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def _labels(text: str) -> list[str]:
    return [line.split(":", 1)[0] for line in text.splitlines()[1:] if not line.startswith("  ")]


def test_a_recorded_h200_result_gives_every_completion_field(capsys):
    code, report, text = _report(capsys, H200_RESULT, "--format", "text")
    recorded = json.loads(H200_RESULT.read_text())
    assert code == 0
    CompletionReport.model_validate(report)
    assert report["finished"] is True and report["exit_code"] == 0 and report["error"] is None
    assert report["output_dir"] == recorded["output_dir"] == "/root/out/va_run"
    assert (report["device"], report["backend"], report["architecture"]) == ("NVIDIA H200", "cuda", "H200")
    # every recorded field as recorded; the rates and percent of peak a newer result states are null in this one
    assert [{key: case[key] for key in old} for case, old in zip(report["workload"], recorded["report"]["workload"],
                                                               strict=True)] == recorded["report"]["workload"]
    assert all(case[key] is None for case in report["workload"] for key in case
               if key not in recorded["report"]["workload"][0])
    assert report["aggregate_speedup"] == recorded["report"]["aggregate_speedup"]
    assert report["worst_final_cv"] == max(case["final_cv"] for case in recorded["report"]["workload"])
    assert report["all_protected_correct"] is True
    assert (report["stopping_reason"], report["commit"]) == ("provider_exhausted", "disabled (--no-commit-winner)")
    assert report["sources"] == [str(H200_RESULT)]

    assert _labels(text) == list(TEXT_LABELS)
    assert "outcome: finished, exit 0: a winner was promoted and survived revalidation" in text
    assert "device: NVIDIA H200 (backend cuda, architecture H200)" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("n16M "))
    assert row.split() == ["n16M", "n=16777216", "2", "yes", "161.424", "51.408", "3.1415x", "0.0009", "0.0407", "yes"]
    assert "aggregate speedup: 3.0909x (weighted geometric mean); winner r001-c000" in text


def test_json_format_prints_nothing_on_stderr(capsys):
    code, report, text = _report(capsys, H200_RESULT)
    assert code == 0 and report["finished"] is True and text == ""


def test_an_error_document_from_before_the_output_dir_is_reported_as_not_finished(tmp_path: Path, capsys):
    missing = tmp_path / "no-such-kernel.py"
    code = main(["optimize", "--kernel", str(missing), "--harness", "h.py", "--cases", "c.json", "--target", "t.json",
                 "--output-dir", str(tmp_path / "out")])
    saved = tmp_path / "optimize.json"
    saved.write_text(capsys.readouterr().out)
    error = json.loads(saved.read_text())
    assert code == 1 and "output_dir" not in error

    code, report, text = _report(capsys, saved, "--format", "text")
    assert code == 0
    assert (report["finished"], report["exit_code"], report["output_dir"]) == (False, 1, None)
    assert report["error"] == error["error"] and str(missing) in report["error"]
    assert report["workload"] == [] and report["sources"] == [str(saved)]
    assert f"outcome: NOT finished, exit 1: invalid input or internal error; error: {error['error']}" in text
    assert "output directory: - (the run failed before creating it)" in text


def test_something_that_is_no_run_is_an_error(tmp_path: Path, capsys):
    code, document, _ = _report(capsys, tmp_path)
    assert code == 1 and "is not a tlx-agent output directory" in document["error"]
    not_a_run = tmp_path / "other.json"
    not_a_run.write_text('{"kind": "something else"}')
    code, document, _ = _report(capsys, not_a_run)
    assert code == 1 and "neither a result nor an error document" in document["error"]
    code, document, _ = _report(capsys, tmp_path / "absent")
    assert code == 1 and "does not exist" in document["error"]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_run_stopped_by_the_builtin_preflight(tmp_path: Path, capsys):
    """A harness whose verify accepts anything fails optimize's negative test: exit 1, no result.json."""
    bundle = make_bundle(tmp_path / "bundle", harness_extra=VERIFY_ACCEPTS_EVERYTHING)
    out = tmp_path / "out"
    args = synthetic_args(out, "--provider", "replay", "--replay-dir", write_candidates(tmp_path / "c", ["x = 1\n"]),
                          "--max-rounds", "1")
    for flag in ("--kernel", "--harness", "--cases", "--target"):
        args[args.index(flag) + 1] = bundle[flag.removeprefix("--")]
    run = run_cli(*args)
    assert run.returncode == 1 and not (out / "result.json").exists(), run.stderr
    assert run.result["output_dir"] == str(out)

    code, report, text = _report(capsys, out, "--format", "text")
    assert code == 0 and report["finished"] is False and report["exit_code"] == 1
    assert report["output_dir"] == str(out)
    assert report["error"].startswith("bundle preflight failed: negative_incorrect_output: ")
    assert "NOT finished, exit 1" in text and str(out) in text

    saved = tmp_path / "optimize.json"
    saved.write_text(run.stdout)
    code, from_stdout, _ = _report(capsys, saved)
    assert code == 0 and from_stdout["error"] == run.result["error"] and from_stdout["output_dir"] == str(out)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_run_aborted_at_the_baseline(tmp_path: Path, capsys):
    """A kernel without the entry point: the baseline fails, the journal says why, the frozen cases remain."""
    broken = tmp_path / "kernel.py"
    broken.write_text('"""No scale()."""\n\nLATENCY_US = 1.0\n')
    out = tmp_path / "out"
    run = run_cli(*synthetic_args(out, "--skip-validation", kernel=broken))
    assert run.returncode == 1 and run.result["stopping_reason"] == "baseline_failed", run.stderr

    code, report, text = _report(capsys, out, "--format", "text")
    journal = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    assert code == 0 and report["finished"] is False and report["exit_code"] == 1
    assert report["error"] == journal[-1]["message"] == run.result["error"]
    assert report["kernel"] == str(broken) and report["inputs"]["kernel"] == str(broken)
    frozen = json.loads((out / "bundle" / "cases.json").read_text())
    assert [case["case_id"] for case in report["workload"]] == [case["case_id"] for case in frozen]
    assert all(case["baseline_median_us"] is None for case in report["workload"])
    assert f"workload: {len(frozen)} case(s)" in text

    saved = tmp_path / "optimize.json"
    saved.write_text(run.stdout)
    code, from_stdout, _ = _report(capsys, saved)
    assert code == 0 and from_stdout["stopping_reason"] == "baseline_failed" and from_stdout["kernel"] == str(broken)


def test_what_weakens_a_runs_verdicts_is_said_right_after_its_outcome(capsys, tmp_path):
    recorded = json.loads(H200_RESULT.read_text())
    recorded["report"]["warnings"] = ["verdicts ran in the candidate's process: the judge could not take the "
                                      "untouched kernel (incorrect: ...)"]
    path = tmp_path / "result.json"
    path.write_text(json.dumps(recorded))
    code, report, text = _report(capsys, path, "--format", "text")
    assert code == 0 and report["warnings"] == recorded["report"]["warnings"]
    lines = text.splitlines()
    assert lines[1].startswith("outcome: finished") and lines[2] == \
        "  warning: verdicts ran in the candidate's process: the judge could not take the untouched kernel (incorrect: ...)"
    assert _labels(text) == list(TEXT_LABELS)
