"""`tlx-agent report RUN`: the completion report of an `optimize` run, the block an agent quotes to the user.

RUN is the run's output directory, or the JSON document `optimize` printed on stdout, saved to a file (a
result, or an error document). stdout: one JSON document, the `CompletionReport` (protocol/completion.py),
as for every subcommand; `--format text` also prints it as a readable block on stderr, as `doctor` and
`simulate` print their tables, so a script can keep reading stdout while the agent quotes the block.

A run that did not finish (no result.json) still gets a report, saying so with the error: from the error
document when RUN is one, else from the journal (`run_aborted`, `run_interrupted`), else from the built-in
preflight's failed lock (`validation/bundle.lock.json`), else the last live-log line. Exit 0 whenever a
report was made, whatever the run's own outcome (that is the report's `exit_code`); 1 when RUN is no run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from orchestrator.cli.output import emit, fail
from orchestrator.cli.report_text import format_text
from orchestrator.text import one_line
from protocol.bundle import Case
from protocol.completion import CaseOutcome, CompletionReport
from protocol.errors import ErrorDocument
from protocol.journal import JOURNAL_EVENT_ADAPTER
from protocol.manifest import InputPaths
from protocol.outcome import ExitCode, StoppingReason
from protocol.results import CommitRecord, RunReport

CASES_ADAPTER: TypeAdapter[list[Case]] = TypeAdapter(list[Case])


class ReportError(Exception):
    """RUN is not something a report can be made from; the message names the file and why."""


class _ResultView(BaseModel):
    """The parts of result.json a report reads (the experiments and evaluations are left out)."""

    model_config = ConfigDict(extra="ignore")
    report: RunReport
    success: bool
    exit_code: ExitCode
    stopping_reason: StoppingReason
    stopping_detail: str = ""
    winner_experiment_id: str
    best_kernel_path: str
    commits: list[CommitRecord] = Field(default_factory=list)
    wall_seconds: float | None = None
    output_dir: str


class _ManifestView(BaseModel):
    """The parts of run.json a report reads; a run.json from another version still gives what it has."""

    model_config = ConfigDict(extra="ignore")
    inputs: InputPaths | None = None
    device: str | None = None
    budget: dict[str, Any] = Field(default_factory=dict)
    target: dict[str, Any] = Field(default_factory=dict)
    bundle: dict[str, Any] = Field(default_factory=dict)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, metavar="RUN",
                        help="the run's --output-dir, or the JSON document optimize printed on stdout, saved to a file")
    parser.add_argument("--format", choices=("json", "text", "html"), default="json",
                        help="json: the report on stdout only; text: also a readable block on stderr "
                             "(stdout stays the one JSON document); html: also a self-contained page "
                             "(RUN/report.html; a batch directory gets its batch page), its path in `html` "
                             "(default: %(default)s)")
    parser.add_argument("--output", type=Path, metavar="FILE", help="html: write the page here instead")
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


# ---- reading ------------------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path} cannot be read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def _manifest(output_dir: Path | None) -> tuple[_ManifestView | None, Path | None]:
    path = output_dir / "run.json" if output_dir is not None else None
    if path is None or not path.is_file():
        return None, None
    try:
        return _ManifestView.model_validate(_read_json(path)), path
    except ValidationError as exc:
        raise ReportError(f"{path} is not a run.json: {one_line(exc, 300)}") from None


def _frozen_cases(manifest: _ManifestView | None, output_dir: Path | None) -> tuple[list[CaseOutcome], Path | None]:
    """The workload of a run without result.json, from the frozen bundle (no measurements)."""
    directory = manifest.bundle.get("directory") if manifest else None
    candidates = [Path(directory) / "cases.json"] if directory else []
    if output_dir is not None:
        candidates.append(output_dir / "bundle" / "cases.json")
    for path in candidates:
        if path.is_file():
            try:
                cases = CASES_ADAPTER.validate_python(_read_json(path))
            except ValidationError as exc:
                raise ReportError(f"{path} is not a cases.json: {one_line(exc, 300)}") from None
            return [CaseOutcome(case_id=case.case_id, parameters=case.parameters, weight=case.weight,
                                protected=case.protected, baseline_median_us=None, final_median_us=None, speedup=None,
                                baseline_cv=None, final_cv=None, correct=None)
                    for case in cases], path
    return [], None


def _journal_end(output_dir: Path) -> tuple[str | None, ExitCode | None, StoppingReason | None, bool]:
    """(error, exit code, stopping reason, started) from journal.jsonl; a line that does not parse is skipped
    (a crash can tear the last one)."""
    path = output_dir / "journal.jsonl"
    if not path.is_file():
        return None, None, None, False
    error: str | None = None
    exit_code: ExitCode | None = None
    reason: StoppingReason | None = None
    started = False
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = JOURNAL_EVENT_ADAPTER.validate_json(line)
        except ValidationError:
            continue
        if event.event == "run_started":
            started = True
        elif event.event == "run_aborted":
            error, exit_code = event.message, event.exit_code
        elif event.event == "run_interrupted":
            error, exit_code, reason = "interrupted", ExitCode.INTERRUPTED, StoppingReason.INTERRUPTED
    return error, exit_code, reason, started


def _preflight_failure(output_dir: Path) -> str | None:
    """The failed checks of optimize's built-in preflight, which stops a run before its journal exists."""
    path = output_dir / "validation" / "bundle.lock.json"
    if not path.is_file():
        return None
    lock = _read_json(path)
    if not isinstance(lock, dict) or lock.get("passed", True):
        return None
    failed = [f"{check.get('name')}: {check.get('message')}" for check in lock.get("checks", [])
              if isinstance(check, dict) and check.get("status") == "failed"]
    return f"bundle preflight failed: {'; '.join(failed) or ', '.join(lock.get('failed_checks', []))} (details: {path})"


def _last_log_line(output_dir: Path) -> str | None:
    path = output_dir / "live.log"
    if not path.is_file():
        return None
    lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else None


def _unfinished_error(output_dir: Path) -> tuple[str, ExitCode | None, StoppingReason | None]:
    error, exit_code, reason, started = _journal_end(output_dir)
    if error is not None:
        return error, exit_code, reason
    preflight = _preflight_failure(output_dir)
    if preflight is not None:
        return preflight, ExitCode.ERROR, None
    last = _last_log_line(output_dir)
    if not started and last is None and not (output_dir / "run.json").is_file():
        raise ReportError(f"{output_dir} is not a tlx-agent output directory (no result.json, run.json, "
                          "journal.jsonl or live.log)")
    return ("no result.json and no recorded error: the run is still going, or was killed; "
            f"last live-log line: {one_line(last or '(none)', 300)}"), None, None


def _finished(result: _ResultView, manifest: _ManifestView | None, sources: list[Path]) -> CompletionReport:
    report = result.report
    workload = [CaseOutcome(**case.model_dump()) for case in report.workload]
    protected = [case.correct for case in workload if case.protected]
    final_cvs = [case.final_cv for case in workload if case.final_cv is not None]
    return CompletionReport(
        finished=True, warnings=list(report.warnings), exit_code=result.exit_code, success=result.success, output_dir=result.output_dir, error=None,
        kernel=manifest.inputs.kernel if manifest and manifest.inputs else None,
        inputs=manifest.inputs if manifest else None, workload=workload,
        device=report.device or (manifest.device if manifest else None), backend=report.backend,
        architecture=report.architecture, aggregate_speedup=report.aggregate_speedup,
        worst_final_cv=max(final_cvs) if final_cvs else None,
        max_cv=manifest.budget.get("max_cv") if manifest else None,
        all_protected_correct=None if None in protected else all(protected),
        stopping_reason=result.stopping_reason, stopping_detail=result.stopping_detail,
        winner_experiment_id=result.winner_experiment_id,
        best_kernel_path=result.best_kernel_path, commit=report.commit, commits=result.commits,
        finalists=list(report.finalists), wall_seconds=result.wall_seconds, sources=[str(path) for path in sources])


def _unfinished(output_dir: Path | None, error: str, exit_code: ExitCode | None,
                stopping_reason: StoppingReason | None, sources: list[Path]) -> CompletionReport:
    manifest, manifest_path = _manifest(output_dir)
    workload, cases_path = _frozen_cases(manifest, output_dir)
    sources += [path for path in (manifest_path, cases_path) if path is not None]
    return CompletionReport(
        finished=False, exit_code=exit_code, success=False,
        output_dir=str(output_dir) if output_dir is not None else None, error=error,
        kernel=manifest.inputs.kernel if manifest and manifest.inputs else None,
        inputs=manifest.inputs if manifest else None, workload=workload,
        device=manifest.device if manifest else None,
        backend=manifest.target.get("backend") if manifest else None,
        architecture=manifest.target.get("architecture") if manifest else None,
        aggregate_speedup=None, worst_final_cv=None, max_cv=manifest.budget.get("max_cv") if manifest else None,
        all_protected_correct=None, stopping_reason=stopping_reason, winner_experiment_id=None,
        best_kernel_path=None, commit=None, commits=[], wall_seconds=None, sources=[str(path) for path in sources])


def _from_result_document(document: dict[str, Any], path: Path) -> CompletionReport:
    try:
        result = _ResultView.model_validate(document)
    except ValidationError as exc:
        raise ReportError(f"{path} is not a result of tlx-agent optimize: {one_line(exc, 300)}") from None
    manifest, manifest_path = _manifest(Path(result.output_dir))
    if manifest is None and path.name == "result.json":  # a copied output dir: run.json sits next to it
        manifest, manifest_path = _manifest(path.parent)
    return _finished(result, manifest, [path, *([manifest_path] if manifest_path else [])])


def load_completion(run: Path) -> CompletionReport:
    """The completion report of RUN (an output directory or a saved stdout document); raises ReportError."""
    run = run.expanduser().resolve()
    if run.is_dir():
        result_path = run / "result.json"
        if result_path.is_file():
            return _from_result_document(_read_json(result_path), result_path)
        error, exit_code, reason = _unfinished_error(run)
        return _unfinished(run, error, exit_code, reason, [])
    if not run.is_file():
        raise ReportError(f"{run} does not exist; pass the run's --output-dir or its saved stdout document")
    document = _read_json(run)
    if isinstance(document, dict) and "report" in document:
        return _from_result_document(document, run)
    if isinstance(document, dict) and isinstance(document.get("result_json"), str):  # optimize's stdout summary
        result_path = Path(document["result_json"])
        if not result_path.is_file():
            raise ReportError(f"{run} is optimize's summary of a run whose {result_path} is not there (moved or "
                              "deleted); pass the run's output directory instead")
        return _from_result_document(_read_json(result_path), result_path)
    try:
        failure = ErrorDocument.model_validate(document)
    except ValidationError:
        raise ReportError(f"{run} is neither a result nor an error document of tlx-agent optimize") from None
    output_dir = Path(failure.output_dir) if failure.output_dir else None
    if output_dir is not None and (output_dir / "result.json").is_file():
        return _from_result_document(_read_json(output_dir / "result.json"), output_dir / "result.json")
    return _unfinished(output_dir, failure.error, failure.exit_code, failure.stopping_reason, [run])


def _html_main(args: argparse.Namespace) -> int:
    """The HTML page (docs/reports.md); stdout is the completion report plus `html`, or the batch's summary."""
    from orchestrator.report_html import HtmlReportError, is_batch_dir, write_batch_report, write_run_report

    try:
        if is_batch_dir(args.run):
            document = write_batch_report(args.run, args.output)
        else:
            report = load_completion(args.run)
            run_dir = args.run.expanduser().resolve() if args.run.is_dir() else None
            if run_dir is None and report.output_dir and Path(report.output_dir).is_dir():
                run_dir = Path(report.output_dir)
            document = write_run_report(report, run_dir, args.output)
    except (ReportError, HtmlReportError) as exc:
        return fail(str(exc))
    emit(document.model_dump(mode="json"))
    return ExitCode.OK


def report_main(args: argparse.Namespace) -> int:
    if args.format == "html":
        return _html_main(args)
    if args.output is not None:
        return fail("--output applies to --format html only")
    try:
        report = load_completion(args.run)
    except ReportError as exc:
        return fail(str(exc))
    if args.format == "text":
        sys.stderr.write(format_text(report))
        sys.stderr.flush()
    emit(report.model_dump(mode="json"))
    return ExitCode.OK


__all__ = ["CompletionReport", "ReportError", "add_arguments", "format_text", "load_completion", "report_main"]
