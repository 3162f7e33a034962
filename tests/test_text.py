"""Clipping text: one line with an exact bound, the tail of a stream, a capped block that says what it cut."""

from __future__ import annotations

import pytest

from orchestrator.text import ELLIPSIS, cap_block, one_line, tail_lines


def test_one_line_collapses_whitespace_and_strips_nul() -> None:
    assert one_line("  a\tb\n\n c\x00d  ", 80) == "a b cd"


def test_one_line_keeps_text_that_fits_exactly() -> None:
    assert one_line("x" * 10, 10) == "x" * 10


def test_one_line_clips_to_exactly_the_limit_with_one_ellipsis() -> None:
    clipped = one_line("x" * 11, 10)
    assert clipped == "x" * 9 + ELLIPSIS and len(clipped) == 10


def test_one_line_drops_the_space_before_the_ellipsis() -> None:
    assert one_line("word " * 40, 10) == "word word" + ELLIPSIS
    assert one_line("word " * 40, 11) == "word word" + ELLIPSIS  # the cut lands after a space


def test_one_line_formats_any_object() -> None:
    assert one_line(ValueError("bad\nvalue"), 80) == "bad value"
    assert one_line(None, 80) == "None"


def test_one_line_refuses_a_limit_without_room_for_the_ellipsis() -> None:
    with pytest.raises(ValueError, match="limit must be >= 1"):
        one_line("text", 0)


def test_tail_lines_keeps_the_last_non_blank_lines_stripped() -> None:
    stream = "first\n\n  second  \r\nthird\x00\n   \nfourth\n"
    assert tail_lines(stream, 2) == ["third", "fourth"]
    assert tail_lines(stream, 10) == ["first", "second", "third", "fourth"]
    assert tail_lines("\n \n", 3) == []


def test_tail_lines_refuses_a_count_below_one() -> None:
    with pytest.raises(ValueError, match="count must be >= 1"):
        tail_lines("a\nb", 0)


def test_cap_block_keeps_line_breaks_and_says_how_much_was_cut() -> None:
    block = "line one\nline two\n" + "z" * 100
    assert cap_block(block, len(block), "guidance") == block
    capped = cap_block(block, 18, "guidance")
    assert capped == f"line one\nline two\n{ELLIPSIS} ({len(block) - 18} more characters of guidance omitted)"


def test_cap_block_strips_nul_before_measuring() -> None:
    assert cap_block("a\x00b", 2, "log") == "ab"
