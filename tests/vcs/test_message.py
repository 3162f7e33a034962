"""Commit messages and the live-log commit event."""

from __future__ import annotations

from orchestrator.vcs import ATTRIBUTION, PerformanceRow, build_commit_message, format_commit_event
from orchestrator.vcs.message import compose_message
from protocol.results import CommitRecord

ROWS = [
    PerformanceRow("small", 12.3456, 10.0, 1.23456, 0.0123, 0.0098, True),
    PerformanceRow("large-4096", 1500.0, None, None, 0.05, None, None),
]


def test_body_has_the_table_the_aggregate_and_ends_with_the_attribution_once() -> None:
    subject, body = build_commit_message(
        "Use cache modifiers\nLonger explanation.\ntlx AGENT authored",
        ROWS,
        1.1,
        "Promotion evaluation for r001-c000:",
    )

    assert subject == "Use cache modifiers"
    lines = body.splitlines()
    assert lines[0] == "Longer explanation."
    assert lines[-1] == ATTRIBUTION and lines[-2] == ""
    assert sum(line.strip().casefold() == ATTRIBUTION.casefold() for line in lines) == 1
    heading = lines.index("Promotion evaluation for r001-c000:")
    assert lines[heading + 1].split(" | ") == [
        "Case      ",
        "Baseline us",
        "Winner us",
        "Speedup",
        "Base CV",
        "Winner CV",
        "Correct",
    ]
    assert (
        lines[heading + 3] == "small      |       12.35 |     10.00 | 1.2346x |   1.23% |     0.98% |     yes"
    )
    assert (
        lines[heading + 4] == "large-4096 |     1500.00 |       n/a |     n/a |   5.00% |       n/a |     n/a"
    )
    assert "Weighted aggregate speedup: 1.1000x." in lines
    assert all(line == line.rstrip() for line in lines)


def test_subject_is_one_line_of_at_most_72_characters() -> None:
    subject, _ = build_commit_message("  " + "word " * 40, [], None, "")
    assert len(subject) == 72 and subject.endswith("\u2026") and "\n" not in subject

    default, body = build_commit_message(ATTRIBUTION, [], None, "")
    assert default == "Optimize kernel with TLX agent"
    assert "Weighted aggregate speedup: n/a." in body and body.count(ATTRIBUTION) == 1


def test_composed_messages_attribute_only_checkpoints() -> None:
    subject, body = build_commit_message("Fuse loads", ROWS, 1.2, "Heading")
    checkpoint = compose_message(subject, body, attributed=True)
    rollback = compose_message("Revert", f"Revalidation failed.\n{ATTRIBUTION}", attributed=False)

    assert checkpoint.startswith("Fuse loads\n\n") and checkpoint.endswith(f"\n\n{ATTRIBUTION}\n")
    assert checkpoint.count(ATTRIBUTION) == 1
    assert rollback == "Revert\n\nRevalidation failed.\n"


def test_commit_event_is_one_line_with_escaped_subject_and_reason() -> None:
    committed = CommitRecord(
        status="committed",
        vcs="git",
        revision="abc123",
        repository="/work/repo",
        file="src/k.py",
        subject="Fuse",
    )
    failed = CommitRecord(
        status="failed",
        vcs="hg",
        repository="/work/my repo",
        file="k.py",
        subject='Say "hi"\nthere\u2028',
        reason="HEAD moved",
    )

    assert format_commit_event(committed) == (
        'commit status=committed vcs=git revision=abc123 repository=/work/repo file=src/k.py subject="Fuse"'
    )
    event = format_commit_event(failed)
    assert event == (
        'commit status=failed vcs=hg revision=none repository="/work/my repo" file=k.py '
        'subject="Say \\"hi\\"\\nthere\\u2028" reason="HEAD moved"'
    )
    assert len(event.splitlines()) == 1
