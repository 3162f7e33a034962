"""What the commit session needs from a VCS: the seam between session logic and git/Mercurial mechanics."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from orchestrator.vcs.errors import CommitRefused
from orchestrator.vcs.worktree import read_bytes_or_none


@dataclass(frozen=True)
class HeadState:
    """Where commits go: the checked-out revision and, for git, the branch ref (None when detached)."""

    revision: str
    ref: str | None = None

    def describe(self) -> str:
        where = self.ref.removeprefix("refs/heads/") if self.ref else "detached HEAD"
        return f"{self.revision[:12]} ({where})"


@dataclass(frozen=True)
class FileCommit:
    """One commit that changes only ``relpath`` from the content at ``base`` to ``content``.

    The working file holds ``expected_disk`` before and must hold ``working_content`` after a success (and
    still ``expected_disk`` after a failure).
    """

    kernel_path: Path
    relpath: str
    base: HeadState
    content: bytes
    expected_disk: bytes
    working_content: bytes
    message: str


@dataclass(frozen=True)
class CommitOutcome:
    revision: str
    notes: list[str] = field(default_factory=list)


class VcsBackend(Protocol):
    vcs: str
    root: Path

    def prepare_target(self, relpath: str, start_source: bytes) -> tuple[HeadState, bytes]:
        """HEAD and ``relpath`` as committed there, in working-tree form (``start_source`` itself when it is
        what HEAD holds); VcsPrepareError when the checkout cannot take the commit."""

    def head(self) -> HeadState | None:
        """The current HEAD, or None when the repository has no commit."""

    def commit_file(self, commit: FileCommit) -> CommitOutcome:
        """Commit ``commit.content`` on top of ``commit.base`` (compare-and-swap) or raise CommitRefused."""

    def committed_form(self, revision: str, relpath: str, working: bytes) -> bytes:
        """``relpath`` as committed at ``revision`` in working-tree form (``working`` itself when it is that)."""

    def own_commits(self, base_revision: str, marker: str) -> list[tuple[str, str]]:
        """(revision, message) of every commit after ``base_revision`` on HEAD's history with a message line
        starting with ``marker``, oldest first: how a resumed run finds the commits it made before it died."""

    def restage(self, relpath: str, parent: str, revision: str) -> list[str]:
        """Finish what a commit of ``relpath`` (``parent`` -> ``revision``) does after moving HEAD, for a run
        killed in between: the index entry follows the commit. Returns notes; idempotent."""


def head_moved_reason(expected: HeadState, current: HeadState | None) -> str:
    now = current.describe() if current is not None else "no commit"
    return f"HEAD moved from {expected.describe()} to {now} during the run"


def ensure_still_expected(backend: VcsBackend, commit: FileCommit) -> None:
    """Right before a commit: HEAD is where the run left it and the kernel file holds what it wrote.

    Raises CommitRefused otherwise; the live file is never overwritten behind the user's back.
    """
    current = backend.head()
    if current != commit.base:
        raise CommitRefused(head_moved_reason(commit.base, current))
    if read_bytes_or_none(commit.kernel_path) != commit.expected_disk:
        raise CommitRefused(f"kernel file {commit.relpath} changed on disk while committing; not overwritten")
