"""Writing the report pages: read the records, shape them, draw them, and replace the file atomically."""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.autotune.lines import report_lines
from orchestrator.report_html import data, figures
from orchestrator.report_html.batch_page import render_batch_page
from orchestrator.report_html.ceilings import ceilings_for
from orchestrator.report_html.load import (
    REPORT_NAME,
    HtmlReportError,
    job_report_links,
    load_batch,
    load_run_records,
)
from orchestrator.report_html.run_page import RunPage, render_run_page
from protocol.base import StrictModel
from protocol.batch import BatchSummary
from protocol.completion import CompletionReport


class HtmlRunDocument(CompletionReport):
    """stdout of `report RUN --format html`: the completion report, plus where its page was written."""

    html: str  # absolute path of the page


class HtmlBatchDocument(StrictModel):
    """stdout of `report DIR --format html` for a batch directory."""

    html: str  # absolute path of the page
    batch: BatchSummary


def _write(path: Path, text: str) -> Path:
    """Replace `path` through a sibling temp file (a reader never sees half a page); the mode follows the
    umask, so the page is as readable as any file the user writes."""
    path = path.expanduser().resolve()
    if not path.parent.is_dir():
        raise HtmlReportError(f"cannot write {path}: {path.parent} is not a directory")
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise HtmlReportError(f"cannot write {path}: {exc}") from None
    return path


def run_page(completion: CompletionReport, run_dir: Path | None) -> str:
    """The page's HTML for one run; `run_dir` holds its records (None: only the completion report)."""
    records = load_run_records(run_dir)
    threshold = data.promotion_threshold(records.budget, records.experiments)
    allowance = data.max_case_regression(records.budget)
    protected = [case.case_id for case in completion.workload if case.protected] if completion.workload else None
    candidates = data.candidate_speedups(records.experiments, protected, allowance)
    ceilings = ceilings_for(completion.device, [records.baseline, records.final])
    latencies = data.case_latencies(
        completion.workload, data.work_figures([records.baseline, records.final]), ceilings, allowance
    )
    progress = data.progress(records.experiments, records.decision_seconds)
    have_profiles = records.baseline_profiles is not None and records.best_profiles is not None
    view = RunPage(
        completion=completion,
        threshold=threshold,
        candidates=candidates,
        steps=data.search_path(records.experiments),
        latencies=latencies,
        ceilings=ceilings,
        profile_deltas=data.profile_deltas(records.baseline_profiles, records.best_profiles)
        if have_profiles
        else None,
        speedup_svg=figures.speedup_figure(candidates, threshold, allowance),
        latency_svg=figures.latency_figure(latencies),
        allowance=allowance,
        progress=progress,
        progress_svg=figures.progress_figure(progress),
        timed_by_journal=bool(records.decision_seconds),
        notes=records.notes,
        autotune_lines=report_lines(records.autotune) if records.autotune is not None else [],
    )
    return render_run_page(view)


def write_run_report(
    completion: CompletionReport, run_dir: Path | None, output: Path | None
) -> HtmlRunDocument:
    """Write the run's page to `output` (default RUN_DIR/report.html) and say where."""
    if output is None:
        if run_dir is None:
            raise HtmlReportError("the run has no output directory to put report.html in; pass --output FILE")
        output = run_dir / REPORT_NAME
    path = _write(output, run_page(completion, run_dir))
    return HtmlRunDocument(**completion.model_dump(), html=str(path))


def write_batch_report(batch_dir: Path, output: Path | None) -> HtmlBatchDocument:
    """Write the batch's page to `output` (default DIR/report.html), linking each job's own report."""
    batch_dir = batch_dir.expanduser().resolve()
    summary = load_batch(batch_dir)
    output = (output or batch_dir / REPORT_NAME).expanduser().resolve()
    rows = data.batch_rows(summary, job_report_links(summary, batch_dir, output.parent))
    path = _write(output, render_batch_page(summary, rows, figures.batch_figure(rows)))
    return HtmlBatchDocument(html=str(path), batch=summary)
