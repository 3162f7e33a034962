"""Commit messages and the one-line ``commit`` event: pure text functions.

A checkpoint message is a one-line subject, the per-case performance table, the weighted aggregate and, as the
very last line, ``TLX agent authored`` exactly once. A rollback message carries no attribution at all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.text import one_line
from protocol.results import CommitRecord

ATTRIBUTION = "TLX agent authored"
RUN_TRAILER = "TLX-Agent-Run"  # "TLX-Agent-Run: <run id> <experiment id | rollback>": a resumed run's own commits
SUBJECT_LIMIT = 72
DEFAULT_SUBJECT = "Optimize kernel with TLX agent"
ROLLBACK_SUBJECT = "Revert TLX agent promotions after failed final revalidation"
TABLE_HEADER = ("Case", "Baseline us", "Winner us", "Speedup", "Base CV", "Winner CV", "Correct")


@dataclass(frozen=True)
class PerformanceRow:
    """One case of the promotion (or final revalidation) evaluation, as the commit body shows it."""

    case_id: str
    baseline_us: float | None
    winner_us: float | None
    speedup: float | None
    baseline_cv: float | None
    winner_cv: float | None
    correct: bool | None


def default_subject(kernel_name: str) -> str:
    """The subject used when neither ``--commit-message`` nor the candidate names the change."""
    return f"Optimize {kernel_name} with TLX agent" if kernel_name else DEFAULT_SUBJECT


def strip_attribution(text: str) -> str:
    """Drop every line that is the attribution (any case), so the message ends up with it exactly once."""
    kept = [line for line in text.splitlines() if line.strip().casefold() != ATTRIBUTION.casefold()]
    return "\n".join(kept)


def split_subject(text: str, fallback: str = DEFAULT_SUBJECT) -> tuple[str, str]:
    """(subject line of at most ``SUBJECT_LIMIT`` chars, the remaining lines as a description paragraph)."""
    lines = [line.rstrip() for line in strip_attribution(text).splitlines()]
    while lines and not lines[0].strip():
        lines.pop(0)
    first = " ".join(lines[0].split()) if lines else ""
    rest = "\n".join(lines[1:]).strip("\n")
    return one_line(first or fallback, SUBJECT_LIMIT), rest


def format_performance_table(rows: Sequence[PerformanceRow]) -> str:
    """Fixed-width table: microseconds with 2 decimals, speedup with 4, CV as a percentage."""
    cells = [TABLE_HEADER] + [
        (
            row.case_id,
            _number(row.baseline_us, "{:.2f}"),
            _number(row.winner_us, "{:.2f}"),
            _number(row.speedup, "{:.4f}x"),
            _number(row.baseline_cv, "{:.2%}"),
            _number(row.winner_cv, "{:.2%}"),
            {True: "yes", False: "no", None: "n/a"}[row.correct],
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(TABLE_HEADER))]

    def render(line: Sequence[str]) -> str:
        padded = [line[0].ljust(widths[0])] + [
            cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True)
        ]
        return " | ".join(padded).rstrip()

    rule = "-+-".join("-" * width for width in widths)
    return "\n".join([render(cells[0]), rule, *(render(line) for line in cells[1:])])


def _number(value: float | None, pattern: str) -> str:
    return "n/a" if value is None else pattern.format(value)


def format_aggregate(aggregate: float | None) -> str:
    shown = "n/a" if aggregate is None else f"{aggregate:.4f}x"
    return f"Weighted aggregate speedup: {shown}."


def build_commit_message(
    subject: str, rows: Sequence[PerformanceRow], aggregate: float | None, heading: str
) -> tuple[str, str]:
    """(subject, body) for a checkpoint or final commit; the body's last line is the attribution.

    Lines after the first line of ``subject`` (a multi-line ``--commit-message``) open the body.
    """
    subject_line, description = split_subject(subject)
    heading = strip_attribution(heading).strip()
    performance = [heading] if heading else []
    performance += [format_performance_table(rows), format_aggregate(aggregate)]
    paragraphs = [description] if description else []
    paragraphs += ["\n".join(performance), ATTRIBUTION]
    return subject_line, "\n\n".join(paragraphs)


def run_trailer(run_id: str, what: str) -> str:
    """The line naming the run (and the experiment, or ``rollback``) a commit belongs to."""
    return f"{RUN_TRAILER}: {run_id} {what}"


def compose_message(subject: str, body: str, *, attributed: bool, fallback: str = DEFAULT_SUBJECT,
                    trailer: str | None = None) -> str:
    """The full text handed to the VCS; with ``attributed`` the last line is the attribution, exactly once.
    ``trailer`` (``run_trailer``) is the paragraph before it: a resumed run finds its own commits by it."""
    subject_line, description = split_subject(subject, fallback)
    body_text = strip_attribution(body).strip("\n")
    kept = "\n".join(line for line in body_text.splitlines() if not line.startswith(f"{RUN_TRAILER}:"))
    paragraphs = [subject_line] + [part for part in (description, kept, trailer or "") if part.strip()]
    if attributed:
        paragraphs.append(ATTRIBUTION)
    return "\n\n".join(paragraphs) + "\n"


def format_commit_event(record: CommitRecord) -> str:
    """``commit status=... vcs=... revision=... repository=... file=... subject="..."`` on one line.

    ``reason="..."`` follows whenever the record has one (always for failed and skipped attempts).
    """
    fields = [
        f"commit status={record.status}",
        f"vcs={record.vcs or 'none'}",
        f"revision={record.revision or 'none'}",
        f"repository={_bare_or_quoted(record.repository)}",
        f"file={_bare_or_quoted(record.file)}",
        f"subject={_quoted(record.subject or '')}",
    ]
    if record.reason:
        fields.append(f"reason={_quoted(record.reason)}")
    return " ".join(fields)


def _quoted(text: str) -> str:
    # json.dumps escapes control characters; the Unicode line separators are escaped too so the event stays one line.
    encoded = json.dumps(text, ensure_ascii=False)
    for separator in ("\u0085", "\u2028", "\u2029"):
        encoded = encoded.replace(separator, f"\\u{ord(separator):04x}")
    return encoded


def _bare_or_quoted(text: str | None) -> str:
    if not text:
        return "none"
    needs_quotes = any(ch.isspace() or ch in '"\\' or not ch.isprintable() for ch in text)
    return _quoted(text) if needs_quotes else text
