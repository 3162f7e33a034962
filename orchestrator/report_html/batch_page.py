"""The HTML page of a batch of optimize jobs: one row per job and a bar plot of their speedups (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.report_html.data import BatchRow
from orchestrator.report_html.markup import Safe, definitions, figure, num, page, table, tag
from protocol.batch import BatchSummary


def _report_cell(row: BatchRow) -> Safe:
    return tag("a", "report", href=row.report_link) if row.report_link else Safe("-")


def render_batch_page(summary: BatchSummary, rows: Sequence[BatchRow], speedup_svg: str | None) -> str:
    header = definitions(
        [
            ("batch directory", summary.output_dir),
            ("manifest", summary.manifest),
            ("engine", summary.engine),
            ("started", summary.started),
            ("finished", summary.finished or "not finished"),
            ("exit code", "-" if summary.exit_code is None else str(summary.exit_code)),
            ("jobs", str(len(rows))),
        ]
    )
    cells = [
        [
            row.job_id,
            row.kernel,
            row.status,
            "-" if row.exit_code is None else str(row.exit_code),
            num(row.speedup, ".4f", "x"),
            row.gpu or "-",
            num(row.wall_seconds, ".1f", " s"),
            _report_cell(row),
            row.error or "-",
        ]
        for row in rows
    ]
    body = [
        tag("h1", "TLX kernel optimization batch report"),
        header,
        tag("h2", "Speedups"),
        figure(
            speedup_svg,
            "Aggregate speedup of each job over its baseline (jobs without one are left out)",
            "No job has a speedup to plot yet.",
        ),
        tag("h2", "Jobs"),
        table(
            ["job", "kernel", "status", "exit code", "speedup", "gpu", "wall", "report", "error"],
            cells,
            [row.status for row in rows],
        ),
    ]
    return page(f"tlx-agent batch report: {summary.output_dir}", body)
