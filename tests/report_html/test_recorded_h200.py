"""The HTML report of a run recorded on the H200 (docs/data/h200-records-2026-12-01/va_replay): profile deltas
from real Proton and NCU profiles, and the measured H200 ceilings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.cli.main import main
from tests.conftest import PROJECT_ROOT
from tests.report_html.page_parsing import external_references, parse_page

RECORDED = PROJECT_ROOT / "docs" / "data" / "h200-records-2026-12-01" / "va_replay"


@pytest.fixture
def page_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    target = tmp_path / "va.html"
    code = main(["report", str(RECORDED), "--format", "html", "--output", str(target)])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["html"] == str(target)
    return target.read_text(encoding="utf-8")


def test_profile_deltas_come_from_both_recorded_profiles(page_text):
    baseline = json.loads((RECORDED / "baseline_profile.json").read_text())
    best = json.loads((RECORDED / "best_profile.json").read_text())
    table = parse_page(page_text).table_with("finalist")
    rows = {(row[0], row[1]): row for row in table[1:]}
    assert set(rows) == {
        (case, metric) for case in baseline for metric in ("ncu.duration_us", "proton.main_kernel_us")
    }
    for case in baseline:
        before, after = (
            baseline[case]["ncu"]["summary"]["duration_us"],
            best[case]["ncu"]["summary"]["duration_us"],
        )
        assert rows[(case, "ncu.duration_us")][2:5] == [
            f"{before:.3f}",
            f"{after:.3f}",
            f"{after - before:+.3f}",
        ]
        main_before = baseline[case]["proton"]["main_kernel_us"]
        assert rows[(case, "proton.main_kernel_us")][2] == f"{main_before:.3f}"


def test_an_h200_run_names_its_measured_ceiling(page_text):
    page = parse_page(page_text)
    assert "Ceilings for H200: bandwidth 4300 GB/s" in page.text and "FLOP/s -" in page.text
    assert [row[0] for row in page.table_with("knob moved")[1:]] == ["baseline", "r001-c000", "final"]
    assert external_references(page) == []


def test_achieved_bandwidth_is_the_harnesss_bytes_over_the_median(page_text):
    result = json.loads((RECORDED / "result.json").read_text())
    table = parse_page(page_text).table_with("final GB/s")
    header, rows = table[0], {row[0]: row for row in table[1:]}
    for case in result["report"]["workload"]:
        n = int(case["parameters"]["n"])
        row = rows[case["case_id"]]
        final_gbs = 12.0 * n / (case["final_median_us"] * 1e-6) / 1e9  # the harness's bytes: read x, y, write out
        assert row[header.index("final GB/s")] == f"{final_gbs:.1f}"
        assert row[header.index("of bandwidth ceiling")] == f"{100 * final_gbs / 4300:.1f} %"
