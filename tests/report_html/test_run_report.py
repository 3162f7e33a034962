"""`tlx-agent report OUT --format html` on a real run through the real CLI (replay provider: one slower
candidate, one faster), and `report DIR --format html` on a batch directory built from that run."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.report_html import HtmlBatchDocument, HtmlRunDocument
from protocol.batch import BatchSummary, JobStatus, JobSummary
from tests.conftest import run_cli, synthetic_args, synthetic_kernel, write_candidates
from tests.report_html.page_parsing import external_references, parse_page

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # one real optimize run, over 5 s

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "headless_shell")
HOSTILE = "<script>alert('x')</script> & more"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("html-run")
    replay = write_candidates(
        root / "cands",
        [synthetic_kernel(150.0), synthetic_kernel(50.0)],
        [
            {"hypothesis": HOSTILE, "change": "LATENCY_US 100.0 -> 150.0"},
            {"hypothesis": "fewer cycles", "change": "LATENCY_US 100.0 -> 50.0"},
        ],
    )
    out = root / "out"
    run = run_cli(*synthetic_args(out, "--provider", "replay", "--replay-dir", replay, "--max-rounds", "2"))
    assert run.returncode == 0, run.stderr
    return out


@pytest.fixture(scope="module")
def html_run(run_dir: Path) -> tuple[dict, str]:
    report = run_cli("report", run_dir, "--format", "html")
    assert report.returncode == 0, report.stderr
    document = json.loads(report.stdout)
    return document, Path(document["html"]).read_text(encoding="utf-8")


def test_stdout_is_the_completion_report_plus_the_page_path(run_dir, html_run):
    document, _ = html_run
    HtmlRunDocument.model_validate(document)
    assert document["html"] == str((run_dir / "report.html").resolve())
    plain = json.loads(run_cli("report", run_dir).stdout)
    assert {key: value for key, value in document.items() if key != "html"} == plain
    assert "html" not in plain


def test_experiments_appear_in_record_order_with_their_decisions(run_dir, html_run):
    page = parse_page(html_run[1])
    experiments = json.loads((run_dir / "experiments.json").read_text())
    path = page.table_with("knob moved")
    header = path[0]
    ids = [row[header.index("experiment")] for row in path[1:]]
    assert (
        ids
        == [record["experiment_id"] for record in experiments]
        == ["baseline", "r001-c000", "r001-c001", "final"]
    )
    decisions = {row[0]: (row[header.index("decision")], row[header.index("promoted")]) for row in path[1:]}
    assert decisions["r001-c000"] == ("rejected", "no") and decisions["r001-c001"] == ("promoted", "yes")
    reason = next(row[header.index("reason")] for row in path[1:] if row[0] == "r001-c000")
    assert reason == experiments[1]["decision"]["reason"] and reason.startswith("triaged on its first run")
    assert (
        next(row[header.index("knob moved")] for row in path[1:] if row[0] == "r001-c001")
        == "LATENCY_US 100.0 -> 50.0"
    )


def test_candidate_speedups_match_the_comparisons_and_show_the_threshold(run_dir, html_run):
    page = parse_page(html_run[1])
    min_speedup = json.loads((run_dir / "run.json").read_text())["budget"]["min_speedup"]
    assert f"Promotion threshold (min_speedup): {min_speedup:g}x" in page.text
    speedups = page.table_with("incumbent µs")
    header = speedups[0]
    shown = {(row[0], row[header.index("case")]): row[header.index("speedup")] for row in speedups[1:]}
    for record in json.loads((run_dir / "experiments.json").read_text())[1:]:
        for comparison in record["comparisons"]:
            assert shown[(record["experiment_id"], comparison["case_id"])] == f"{comparison['speedup']:.4f}x"


def test_baseline_and_final_latencies_match_result_json(run_dir, html_run):
    page = parse_page(html_run[1])
    workload = json.loads((run_dir / "result.json").read_text())["report"]["workload"]
    latencies = page.table_with("baseline µs")
    header = latencies[0]
    rows = {row[0]: row for row in latencies[1:]}
    assert set(rows) == {case["case_id"] for case in workload}
    for case in workload:
        row = rows[case["case_id"]]
        assert row[header.index("baseline µs")] == f"{case['baseline_median_us']:.3f}"
        assert row[header.index("final µs")] == f"{case['final_median_us']:.3f}"
        assert row[header.index("final GB/s")] == "-"  # the synthetic harness reports no bytes
    assert "No peaks are known for device cpu (protocol/devices.py has no entry for it)" in page.text
    assert "No case's metrics carry bytes or flops" in page.text


def test_header_and_profile_note(run_dir, html_run):
    page = parse_page(html_run[1])
    result = json.loads((run_dir / "result.json").read_text())
    assert f"winner {result['winner_experiment_id']}" in page.text
    assert f"{result['report']['aggregate_speedup']:.4f}x (weighted geometric mean)" in page.text
    assert "stopping reason provider_exhausted" in page.text and str(run_dir.resolve()) in page.text
    # the synthetic harness has no profile(): both files exist, with nothing to compare
    assert "No kernel-time figure is present in both" in page.text


def test_page_is_self_contained_with_inline_svg_and_escaped_text(html_run):
    document = html_run[1]
    page = parse_page(document)
    assert sum(1 for tag, _ in page.tags if tag == "svg") == 3  # progress, speedups, latencies
    assert external_references(page) == []
    assert "<script" not in document.lower().replace("&lt;script", "")
    assert (
        HOSTILE not in document and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; more" in document
    )
    assert HOSTILE in page.text  # shown as text, never run


def test_output_flag_moves_the_page_and_other_formats_refuse_it(run_dir, tmp_path):
    target = tmp_path / "elsewhere.html"
    report = run_cli("report", run_dir, "--format", "html", "--output", target)
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["html"] == str(target.resolve()) and target.stat().st_size > 10_000
    refused = run_cli("report", run_dir, "--output", target)
    assert refused.returncode == 1 and "--output applies to --format html only" in refused.stderr


def test_batch_page_lists_jobs_and_links_their_reports(run_dir, html_run, tmp_path):
    batch_dir = tmp_path / "batch"
    shutil.copytree(run_dir, batch_dir / "fast")
    summary = BatchSummary(
        manifest=str(tmp_path / "batch.toml"),
        output_dir=str(batch_dir),
        started="2026-12-01T00:00Z",
        finished="2026-12-01T00:05Z",
        exit_code=1,
        jobs=[
            JobSummary(
                job_id="fast",
                kernel="kernel.py",
                status=JobStatus.IMPROVED,
                exit_code=0,
                speedup=2.0,
                output_dir=str(batch_dir / "fast"),
                gpu="0",
                attempts=1,
                wall_seconds=14.5,
            ),
            JobSummary(
                job_id="broken",
                kernel="other.py",
                status=JobStatus.FAILED,
                exit_code=1,
                output_dir=str(batch_dir / "broken"),
                error=HOSTILE,
                attempts=1,
            ),
        ],
    )
    (batch_dir / "batch.json").write_text(summary.model_dump_json(indent=2))
    report = run_cli("report", batch_dir, "--format", "html")
    assert report.returncode == 0, report.stderr
    document = HtmlBatchDocument.model_validate_json(report.stdout)
    assert document.html == str((batch_dir / "report.html").resolve()) and document.batch == summary
    text = Path(document.html).read_text(encoding="utf-8")
    page = parse_page(text)
    jobs = page.table_with("exit code")
    header = jobs[0]
    assert [row[0] for row in jobs[1:]] == ["fast", "broken"]
    fast, broken = jobs[1:]
    assert (fast[header.index("status")], fast[header.index("speedup")], fast[header.index("gpu")]) == (
        "improved",
        "2.0000x",
        "0",
    )
    assert (broken[header.index("report")], broken[header.index("error")]) == ("-", HOSTILE)
    links = [attributes["href"] for tag, attributes in page.tags if tag == "a"]
    assert links == ["fast/report.html"] and (batch_dir / links[0]).is_file()
    assert sum(1 for tag, _ in page.tags if tag == "svg") == 1
    assert external_references(page) == [] and HOSTILE not in text


def test_screenshot_in_a_headless_browser(html_run, tmp_path):
    browser = next((found for name in BROWSERS if (found := shutil.which(name))), None)
    if browser is None:
        pytest.skip(f"no headless browser on PATH (looked for {', '.join(BROWSERS)})")
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            f"--screenshot={shot}",
            "--window-size=1280,2000",
            Path(html_run[0]["html"]).as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_a_case_short_of_the_copy_ceiling_says_what_stops_it(run_dir, html_run, tmp_path):
    assert "below 85 % of the copy ceiling" not in parse_page(html_run[1]).text  # the synthetic cases move no bytes
    copied = tmp_path / "out"
    shutil.copytree(run_dir, copied)
    result = json.loads((copied / "result.json").read_text())
    gap = "41 % of the copy ceiling: occupancy: 46 % of the warps an SM holds were active (1 warp(s) per program)"
    result["report"]["workload"][0]["copy_gap"] = gap
    (copied / "result.json").write_text(json.dumps(result))
    report = run_cli("report", copied, "--format", "html")
    assert report.returncode == 0, report.stderr
    text = parse_page(Path(json.loads(report.stdout)["html"]).read_text(encoding="utf-8")).text
    assert "Memory-bound cases below 85 % of the copy ceiling, and what stops each:" in text
    assert f"{result['report']['workload'][0]['case_id']}: {gap}" in text
