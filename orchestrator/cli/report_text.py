"""The completion report as the block an agent quotes to the user (`tlx-agent report --format text`).

Every line starts with one of `TEXT_LABELS` (tests/skill/ checks a real run's block has each one, in order), is an
indented table row, an indented warning under the outcome (what weakens the run's verdicts), or an indented
finalist under the stopping reason (each finalist revalidated, in order, and how its revalidation ended).
"""

from __future__ import annotations

import json
from typing import Any

from orchestrator.text import one_line
from protocol.completion import CompletionReport
from protocol.outcome import ExitCode

# What each exit code of `optimize` means, in the words of README.md.
EXIT_MEANINGS = {
    ExitCode.OK: "a winner was promoted and survived revalidation",
    ExitCode.ERROR: "invalid input or internal error",
    ExitCode.NO_WINNER: "no qualifying winner",
    ExitCode.COMMIT_FAILED: "a commit failed",
    ExitCode.HUMAN_REVIEW: "a person should review a candidate",
    ExitCode.SOME_IMPROVED: "some jobs of a batch improved",
    ExitCode.INTERRUPTED: "interrupted",
}
# The labels of the text block, in order; tests/skill/ checks that a real run's block has each one.
TEXT_LABELS = ("outcome", "output directory", "kernel", "bundle", "device", "workload", "aggregate speedup", "CV",
               "correctness", "stopping reason", "commit", "best kernel", "wall time")



def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def _parameters(parameters: dict[str, Any]) -> str:
    return " ".join(f"{key}={json.dumps(value) if not isinstance(value, str) else value}"
                    for key, value in parameters.items()) or "-"


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def _outcome(report: CompletionReport) -> str:
    code = f"exit {int(report.exit_code)}" if report.exit_code is not None else "exit code unknown"
    meaning = EXIT_MEANINGS.get(report.exit_code, "") if report.exit_code is not None else ""
    if report.finished:
        return f"finished, {code}: {meaning}"
    return f"NOT finished, {code}{': ' + meaning if meaning else ''}; error: {report.error}"


def _correctness(report: CompletionReport) -> str:
    if report.all_protected_correct is None:
        return "not established (no verdict for every protected case)"
    if report.all_protected_correct:
        return "every protected case correct"
    failing = [case.case_id for case in report.workload if case.protected and case.correct is False]
    return "protected case(s) INCORRECT: " + ", ".join(failing)


def _commit_lines(report: CompletionReport) -> list[str]:
    lines = [f"commit: {report.commit or '-'}"]
    for record in report.commits:
        detail = record.subject or record.reason
        lines.append(f"  {record.kind} {record.status}: vcs={record.vcs or '-'} revision={record.revision or '-'} "
                     f"repository={record.repository or '-'}" + (f" ({one_line(detail, 160)})" if detail else ""))
    return lines


def format_text(report: CompletionReport) -> str:
    """The report as a block to quote; every line starts with one of TEXT_LABELS (or is a table row)."""
    inputs = report.inputs
    bundle = (f"harness={inputs.harness} cases={inputs.cases} target={inputs.target}"
              + (f" budget={inputs.budget}" if inputs.budget else "")
              + (f" reference_kernel={inputs.reference_kernel}" if inputs.reference_kernel else "")) if inputs else "-"
    platform = ", ".join(part for part in (f"backend {report.backend}" if report.backend else "",
                                            f"architecture {report.architecture}" if report.architecture else "")
                         if part)
    lines = [
        "TLX kernel optimization agent: completion report",
        f"outcome: {_outcome(report)}",
        *(f"  warning: {warning}" for warning in report.warnings),
        f"output directory: {report.output_dir or '- (the run failed before creating it)'}",
        f"kernel: {report.kernel or '-'}",
        f"bundle: {bundle}",
        f"device: {report.device or 'unknown'}" + (f" ({platform})" if platform else ""),
        f"workload: {len(report.workload)} case(s)",
    ]
    if report.workload:
        rows = [("case", "parameters", "weight", "protected", "baseline_us", "final_us", "speedup", "baseline_cv",
                 "final_cv", "correct")]
        rows += [(case.case_id, _parameters(case.parameters), f"{case.weight:g}", _yes(case.protected),
                  _num(case.baseline_median_us, ".3f"), _num(case.final_median_us, ".3f"),
                  _num(case.speedup, ".4f") + ("x" if case.speedup is not None else ""),
                  _num(case.baseline_cv, ".4f"), _num(case.final_cv, ".4f"), _yes(case.correct))
                 for case in report.workload]
        lines += _table(rows)
    speedup = f"{report.aggregate_speedup:.4f}x (weighted geometric mean)" if report.aggregate_speedup is not None \
        else "-"
    if report.winner_experiment_id:
        speedup += f"; winner {report.winner_experiment_id}"
    lines += [
        f"aggregate speedup: {speedup}",
        f"CV: worst final {_num(report.worst_final_cv, '.4f')} (max_cv {_num(report.max_cv, 'g')})",
        f"correctness: {_correctness(report)}",
        f"stopping reason: {report.stopping_reason.value if report.stopping_reason else '-'}"
        + (f" ({report.stopping_detail})" if report.stopping_detail else ""),
        *(f"  finalist {attempt.experiment_id} ({attempt.revalidation_id}): {attempt.status}"
          + (f", {_num(attempt.aggregate_speedup, '.4f')}x" if attempt.aggregate_speedup is not None else "")
          + (f": {one_line(attempt.reason, 200)}" if attempt.status != "revalidated" else "")
          for attempt in report.finalists),
        *_commit_lines(report),
        f"best kernel: {report.best_kernel_path or '-'}",
        f"wall time: {_num(report.wall_seconds, '.1f')} s" if report.wall_seconds is not None else "wall time: -",
    ]
    return "\n".join(lines) + "\n"


