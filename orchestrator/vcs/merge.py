"""Three-way merge of whole files, line by line.

The checkpoint commit must carry only the agent's delta (start -> winner) applied on top of the committed
content, so the user's uncommitted edits stay out of history. This is the diff3 algorithm of bzr/breezy's
``merge3`` in pure Python: it needs no external tool (Mercurial checkouts need not have git), is byte-exact
(lines keep their endings, a missing final newline is kept) and is conservative: a region that both sides
changed differently, including edits on adjacent lines, is a conflict and nothing is merged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher


@dataclass(frozen=True)
class MergeResult:
    """``merged`` is None exactly when ``conflicts`` > 0."""

    merged: bytes | None
    conflicts: int

    @property
    def clean(self) -> bool:
        return self.merged is not None


def split_lines(data: bytes) -> list[bytes]:
    """Split after every ``\\n`` so that ``b"".join(split_lines(x)) == x`` for every ``x``."""
    pieces = data.split(b"\n")
    lines = [piece + b"\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


def merge_three_way(current: bytes, base: bytes, other: bytes) -> MergeResult:
    """Apply the change ``base -> other`` onto ``current`` (``git merge-file current base other``)."""
    if current == base or other == current:
        return MergeResult(other, 0)
    if other == base:
        return MergeResult(current, 0)
    cur, bas, oth = split_lines(current), split_lines(base), split_lines(other)
    merged: list[bytes] = []
    conflicts = 0
    for kind, lines in _merge_regions(bas, cur, oth):
        if kind == "conflict":
            conflicts += 1
        else:
            merged.extend(lines)
    if conflicts:
        return MergeResult(None, conflicts)
    return MergeResult(b"".join(merged), 0)


_SyncRegion = tuple[int, int, int, int, int, int]


def _matching_blocks(base: Sequence[bytes], side: Sequence[bytes]) -> list[tuple[int, int, int]]:
    # autojunk would treat frequent lines (blank lines, closing brackets) as junk and misalign long files.
    return [tuple(block) for block in SequenceMatcher(None, base, side, autojunk=False).get_matching_blocks()]


def _sync_regions(base: Sequence[bytes], a: Sequence[bytes], b: Sequence[bytes]) -> list[_SyncRegion]:
    """Regions of ``base`` left unchanged by both sides, as (base, base_end, a, a_end, b, b_end)."""
    a_blocks, b_blocks = _matching_blocks(base, a), _matching_blocks(base, b)
    regions: list[_SyncRegion] = []
    ia = ib = 0
    while ia < len(a_blocks) and ib < len(b_blocks):
        a_base, a_start, a_len = a_blocks[ia]
        b_base, b_start, b_len = b_blocks[ib]
        start, end = max(a_base, b_base), min(a_base + a_len, b_base + b_len)
        if start < end:
            a_sub, b_sub = a_start + (start - a_base), b_start + (start - b_base)
            regions.append((start, end, a_sub, a_sub + end - start, b_sub, b_sub + end - start))
        if a_base + a_len < b_base + b_len:
            ia += 1
        else:
            ib += 1
    regions.append((len(base), len(base), len(a), len(a), len(b), len(b)))
    return regions


def _merge_regions(
    base: Sequence[bytes], a: Sequence[bytes], b: Sequence[bytes]
) -> Iterator[tuple[str, Sequence[bytes]]]:
    """Yield ("unchanged"|"a"|"b"|"same"|"conflict", lines) covering the merged file in order."""
    iz = ia = ib = 0
    for z_match, z_end, a_match, a_end, b_match, b_end in _sync_regions(base, a, b):
        if a_match > ia or b_match > ib or z_match > iz:
            base_part, a_part, b_part = base[iz:z_match], a[ia:a_match], b[ib:b_match]
            if a_part == b_part:
                yield "same", a_part
            elif a_part == base_part:
                yield "b", b_part
            elif b_part == base_part:
                yield "a", a_part
            else:
                yield "conflict", ()
        if z_end > z_match:
            yield "unchanged", base[z_match:z_end]
        iz, ia, ib = z_end, a_end, b_end
