"""The three-way merge that isolates the agent's delta: byte-exact, conservative on overlaps."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.vcs.merge import merge_three_way, split_lines

LINE = st.sampled_from([b"a\n", b"b\n", b"c\n", b"\n", b"}\n", b"x = 1\r\n", b"tail"])
TEXT = st.lists(LINE, max_size=12).map(b"".join)
BYTES = st.binary(max_size=200)


def numbered(count: int) -> list[bytes]:
    return [f"line {i}\n".encode() for i in range(count)]


@given(BYTES)
def test_split_lines_round_trips_every_byte(data: bytes) -> None:
    assert b"".join(split_lines(data)) == data


@given(TEXT, TEXT)
def test_one_sided_changes_are_taken_verbatim(base: bytes, changed: bytes) -> None:
    assert merge_three_way(base, base, changed).merged == changed
    assert merge_three_way(changed, base, base).merged == changed
    assert merge_three_way(changed, base, changed).merged == changed


@settings(max_examples=200)
@given(
    st.integers(min_value=4, max_value=40).flatmap(
        lambda n: st.tuples(
            st.just(n), st.sets(st.integers(0, n - 1), max_size=5), st.sets(st.integers(0, n - 1), max_size=5)
        )
    )
)
def test_edits_on_separated_lines_both_survive(case: tuple[int, set[int], set[int]]) -> None:
    count, user_lines, agent_lines = case
    agent_lines = {i for i in agent_lines if all(abs(i - j) > 1 for j in user_lines)}
    base = numbered(count)
    user = [f"user {i}\n".encode() if i in user_lines else line for i, line in enumerate(base)]
    agent = [f"agent {i}\n".encode() if i in agent_lines else line for i, line in enumerate(base)]
    both = [
        f"agent {i}\n".encode() if i in agent_lines else f"user {i}\n".encode() if i in user_lines else line
        for i, line in enumerate(base)
    ]

    result = merge_three_way(b"".join(user), b"".join(base), b"".join(agent))

    assert result.clean and result.merged == b"".join(both)


def test_different_edits_to_one_line_conflict() -> None:
    base = b"".join(numbered(5))
    result = merge_three_way(base.replace(b"line 2", b"user"), base, base.replace(b"line 2", b"agent"))
    assert not result.clean and result.merged is None and result.conflicts == 1


def test_edits_on_adjacent_lines_are_a_conflict() -> None:
    base = b"".join(numbered(5))
    result = merge_three_way(base.replace(b"line 2", b"user"), base, base.replace(b"line 3", b"agent"))
    assert not result.clean


def test_identical_edits_merge_cleanly() -> None:
    base = b"".join(numbered(5))
    same = base.replace(b"line 2", b"both")
    assert merge_three_way(same + b"user tail\n", base, same).merged == same + b"user tail\n"


def test_missing_final_newline_and_crlf_are_kept() -> None:
    base = b"a\r\nb\r\nc\r\nd\r\ne"
    user = b"A\r\nb\r\nc\r\nd\r\ne"
    agent = b"a\r\nb\r\nc\r\nd\r\nE"
    assert merge_three_way(user, base, agent).merged == b"A\r\nb\r\nc\r\nd\r\nE"


def test_agrees_with_git_merge_file_on_a_realistic_kernel(tmp_path: Path) -> None:
    base = b"".join(f"    acc += tl.load(ptr + {i})\n".encode() for i in range(40))
    user = base.replace(b"ptr + 3)", b"ptr + 3, mask=m)").replace(b"ptr + 30)", b"ptr + 30) * scale")
    agent = base.replace(b"ptr + 10)", b"ptr + 10, cache_modifier='.cg')") + b"    return acc\n"
    for name, data in {"user": user, "base": base, "agent": agent}.items():
        (tmp_path / name).write_bytes(data)
    git = subprocess.run(
        ["git", "merge-file", "-p", "user", "base", "agent"], cwd=tmp_path, capture_output=True
    )

    assert git.returncode == 0
    assert merge_three_way(user, base, agent).merged == git.stdout
