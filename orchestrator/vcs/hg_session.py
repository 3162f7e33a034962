"""Mercurial checkpoint commits through the ``hg`` command (``HGPLAIN=1``; the Python API is not stable).

Mercurial has no index, so committing only the agent's delta on a dirty kernel means: write the merged content,
``hg commit <that path only>``, and write the winner plus the user's edits back, in ``try/finally``. Before the
file is touched, the user's working content is copied to ``.hg/tlx-agent-wip/`` and removed once it is back, so
even a killed process leaves the user's edits recoverable. A ``precommit`` hook passed on the command line is
the compare-and-swap: it aborts the commit, inside hg's lock, if the working parent is not the expected one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.vcs.backend import (
    CommitOutcome,
    FileCommit,
    HeadState,
    ensure_still_expected,
    head_moved_reason,
)
from orchestrator.vcs.errors import CommitRefused, VcsError, VcsPrepareError
from orchestrator.vcs.worktree import read_bytes_or_none, write_atomically

FALLBACK_USER = "tlx-agent <tlx-agent@localhost>"
NULL_NODE = "0" * 40
UNFINISHED_STATE_FILES = {
    "rebasestate": "a rebase",
    "histedit-state": "a histedit",
    "graftstate": "a graft",
    "updatestate": "an interrupted update",
    "shelvedstate": "an unshelve",
}


def find_hg() -> Path | None:
    """The ``hg`` next to the running interpreter (a venv install), else the one on PATH."""
    beside = Path(sys.executable).parent / "hg"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("hg")
    return Path(found) if found else None


def require_hg() -> Path:
    hg = find_hg()
    if hg is None:
        raise VcsError("the hg command was not found next to Python or on PATH; install Mercurial")
    return hg


def run_hg(hg: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(hg), "--cwd", str(cwd), *args],
        env={**os.environ, "HGPLAIN": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )


def hg_root(directory: Path) -> Path | None:
    """The Mercurial root containing ``directory``; hg is only asked when a ``.hg`` directory is above."""
    if not any((parent / ".hg").is_dir() for parent in (directory, *directory.parents)):
        return None
    result = run_hg(require_hg(), directory, "root")
    out = result.stdout.decode("utf-8", "surrogateescape").strip()
    return Path(out).resolve() if result.returncode == 0 and out else None


def _message(result: subprocess.CompletedProcess[bytes]) -> str:
    text = (result.stderr or result.stdout).decode("utf-8", "replace")
    return next(
        (line.strip() for line in text.splitlines() if line.strip()), f"exit status {result.returncode}"
    )


class HgBackend:
    vcs = "hg"

    def __init__(self, root: Path, hg: Path | None = None) -> None:
        self.root = root
        self._hg = hg or require_hg()
        self._username_configured: bool | None = None

    def _call(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return run_hg(self._hg, self.root, *args)

    def _run(self, *args: str) -> bytes:
        result = self._call(*args)
        if result.returncode != 0:
            raise VcsError(f"hg {args[0]} failed: {_message(result)}")
        return result.stdout

    def head(self) -> HeadState | None:
        node, _, branch = self._run("log", "-r", ".", "-T", "{node} {branch}").decode().partition(" ")
        return None if node == NULL_NODE else HeadState(node, branch or None)

    def prepare_target(self, relpath: str, start_source: bytes) -> tuple[HeadState, bytes]:
        # Each hg call starts a Python interpreter (~0.2 s), so the checks share as few calls as possible.
        # ``start_source`` is not needed: hg applies no encode/decode filters unless configured to.
        parents = self._run("log", "-r", "parents()", "-T", "{node} {branch}\n").decode().splitlines()
        if not parents:
            raise VcsPrepareError(
                f"the Mercurial repository at {self.root} has no commit yet; commit the kernel first"
            )
        if len(parents) > 1:
            raise VcsPrepareError(
                f"an uncommitted merge is in progress in {self.root}; commit or abort it first"
            )
        for name, what in UNFINISHED_STATE_FILES.items():
            if (self.root / ".hg" / name).exists():
                raise VcsPrepareError(f"{what} is unfinished in {self.root}; finish or abort it first")
        if (self.root / ".hg" / "merge").is_dir():
            resolve = self._call("resolve", "--list")
            if any(line.startswith(b"U ") for line in resolve.stdout.splitlines()):
                raise VcsPrepareError(f"{self.root} has unresolved merge conflicts; resolve them first")
        node, _, branch = parents[0].partition(" ")
        committed = self._call("cat", "-r", node, f"path:{relpath}")
        if committed.returncode != 0:
            raise VcsPrepareError(
                f"{relpath} is not tracked at the working parent in {self.root}; commit it first"
            )
        return HeadState(node, branch or None), committed.stdout

    def committed_form(self, revision: str, relpath: str, working: bytes) -> bytes:
        return self._run("cat", "-r", revision, f"path:{relpath}")

    def own_commits(self, base_revision: str, marker: str) -> list[tuple[str, str]]:
        out = self._run("log", "-r", f"({base_revision}::.) - {base_revision}", "-T", "{node} {desc|json}\n")
        found = []
        for line in out.decode("utf-8", "surrogateescape").splitlines():
            revision, _, described = line.partition(" ")
            message = json.loads(described) if described else ""
            if revision and any(line.startswith(marker) for line in message.splitlines()):
                found.append((revision, message))
        return found

    def restage(self, relpath: str, parent: str, revision: str) -> list[str]:
        return []  # hg commits the working file itself: there is no index to bring along

    def _user_arguments(self) -> list[str]:
        """``-u`` only where hg would otherwise invent or refuse a username (asked once per session)."""
        if self._username_configured is None:
            self._username_configured = bool(
                os.environ.get("HGUSER") or self._call("config", "ui.username").stdout.strip()
            )
        return [] if self._username_configured else ["-u", FALLBACK_USER]

    def commit_file(self, commit: FileCommit) -> CommitOutcome:
        user = self._user_arguments()
        ensure_still_expected(self, commit)
        backup = self._save_backup(commit.expected_disk)
        result: subprocess.CompletedProcess[bytes] | None = None
        try:
            write_atomically(commit.kernel_path, commit.content)
            result = self._call(
                "commit", "-m", commit.message, *user,
                "--config", f"hooks.precommit.tlx-agent-cas=test \"$HG_PARENT1\" = {commit.base.revision}",
                "--", f"path:{commit.relpath}",
            )  # fmt: skip
        finally:
            committed = result is not None and result.returncode == 0
            restored = commit.working_content if committed else commit.expected_disk
            on_disk = read_bytes_or_none(commit.kernel_path)
            foreign_edit = on_disk not in (commit.content, restored)
            if not foreign_edit:
                if on_disk != restored:
                    write_atomically(commit.kernel_path, restored)
                backup.unlink()
        note = (
            f"kernel file {commit.relpath} changed on disk during hg commit and was left as is; the working "
            f"content from before the commit is saved in {backup}"
            if foreign_edit
            else ""
        )
        if not committed:
            assert result is not None  # an exception before hg ran has already propagated
            raise CommitRefused("; ".join(filter(None, [self._commit_failure(result, commit.base), note])))
        outcome = self._verify(commit)
        return CommitOutcome(outcome.revision, [*outcome.notes, *filter(None, [note])])

    def _save_backup(self, working: bytes) -> Path:
        """A copy of the user's working file for the moment the merged content stands in for it."""
        folder = self.root / ".hg" / "tlx-agent-wip"
        folder.mkdir(exist_ok=True)
        backup = folder / f"kernel-{os.getpid()}-{time.time_ns()}"
        backup.write_bytes(working)
        return backup

    def _commit_failure(self, result: subprocess.CompletedProcess[bytes], base: HeadState) -> str:
        if b"tlx-agent-cas" in result.stderr + result.stdout:
            return head_moved_reason(base, self.head())
        return f"hg commit failed: {_message(result)}"

    def _verify(self, commit: FileCommit) -> CommitOutcome:
        """Postcondition, in one call: the new working parent, its parent, and the committed bytes."""
        shown = self._run("cat", "-r", ".", f"path:{commit.relpath}", "-T", "{node} {p1.node}\n{data}")
        header, _, data = shown.partition(b"\n")
        node, _, parent = header.decode().partition(" ")
        notes = []
        if parent != commit.base.revision:
            notes.append(f"the new commit's parent is {parent[:12]}, not {commit.base.revision[:12]}")
        if data != commit.content:
            notes.append(f"{node[:12]} does not hold the merged content of {commit.relpath}")
        return CommitOutcome(node, notes)
