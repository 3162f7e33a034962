"""Git checkpoint commits built from plumbing, so the user's index, branch and other files stay as they are.

A commit is a blob of the merged kernel, a tree from a temporary index (``GIT_INDEX_FILE``) seeded from the
base commit, ``commit-tree``, and ``update-ref <ref> <new> <old>``: a compare-and-swap that fails if HEAD moved.
Only then does the kernel's entry in the real index advance to the committed blob (merged with whatever the
user staged for it), so ``git status`` shows only the user's own edits, and the working file receives the winner
plus the user's uncommitted edits. Plumbing runs no commit hooks; ``commit.gpgsign`` is honoured with ``-S``.

Detached HEAD: commits are made on it, as ``git commit`` would, and HEAD moves by compare-and-swap; no branch
is touched. A branch checkout moves exactly the branch that was checked out when the run started.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.vcs.backend import (
    CommitOutcome,
    FileCommit,
    HeadState,
    ensure_still_expected,
)
from orchestrator.vcs.errors import CommitRefused, VcsError, VcsPrepareError
from orchestrator.vcs.merge import merge_three_way
from orchestrator.vcs.worktree import replace_if_unchanged

FALLBACK_NAME = "tlx-agent"
FALLBACK_EMAIL = "tlx-agent@localhost"
LOCK_ATTEMPTS = 6
LOCK_COLLISION = ".lock': File exists"
OPERATIONS_IN_PROGRESS = {
    "MERGE_HEAD": "a merge",
    "CHERRY_PICK_HEAD": "a cherry-pick",
    "REVERT_HEAD": "a revert",
    "rebase-merge": "a rebase",
    "rebase-apply": "a rebase or git am",
}


class GitCommandFailed(VcsError):
    def __init__(self, args: tuple[str, ...], stderr: str) -> None:
        super().__init__(f"git {args[0]} failed: {first_line(stderr) or 'no message'}")
        self.stderr = stderr


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    blob: str


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def load_gitpython() -> Any:
    """Import gitpython lazily: it refuses to import without a git executable, and hg users may have none."""
    try:
        import git
    except ImportError as exc:
        raise VcsError(f"git is not usable (gitpython: {first_line(str(exc))})") from exc
    return git


def git_toplevel(directory: Path) -> Path | None:
    """The work-tree root containing ``directory``, or None outside any git work tree."""
    gitpython = load_gitpython()
    command = gitpython.Git(str(directory))
    status, out, _ = command.execute(
        [gitpython.Git.GIT_PYTHON_GIT_EXECUTABLE or "git", "rev-parse", "--show-toplevel"],
        with_extended_output=True,
        with_exceptions=False,
    )
    return Path(out.strip()).resolve() if status == 0 and out.strip() else None


class GitBackend:
    """Git mechanics for one work tree; every command runs with literal pathspecs."""

    vcs = "git"

    def __init__(self, root: Path) -> None:
        gitpython = load_gitpython()
        self.root = root
        self._git = gitpython.Git(str(root))
        self._executable = gitpython.Git.GIT_PYTHON_GIT_EXECUTABLE or "git"

    # -- command plumbing -------------------------------------------------------------------------------

    def _call(
        self, *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None
    ) -> tuple[int, bytes, str]:
        options: dict[str, Any] = {
            "with_extended_output": True,
            "with_exceptions": False,
            "stdout_as_string": False,
            "strip_newline_in_stdout": False,
            "env": {"GIT_LITERAL_PATHSPECS": "1", **(env or {})},
        }
        if stdin is None:
            status, out, err = self._git.execute([self._executable, *args], **options)
        else:
            with tempfile.TemporaryFile() as feed:
                feed.write(stdin)
                feed.seek(0)
                status, out, err = self._git.execute([self._executable, *args], istream=feed, **options)
        return status, out or b"", err or ""

    def _run(self, *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None) -> bytes:
        status, out, err = self._call(*args, env=env, stdin=stdin)
        if status != 0:
            raise GitCommandFailed(args, err)
        return out

    def _text(self, *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None) -> str:
        return self._run(*args, env=env, stdin=stdin).decode("utf-8", "surrogateescape").strip()

    def _run_retrying_locks(self, *args: str) -> None:
        """Run a command that takes ``index.lock`` or a ref lock, waiting out another git process."""
        for attempt in range(LOCK_ATTEMPTS):
            status, _, err = self._call(*args)
            if status == 0:
                return
            if LOCK_COLLISION not in err or attempt == LOCK_ATTEMPTS - 1:
                raise GitCommandFailed(args, err)
            time.sleep(0.05 * 2**attempt)

    def _config(self, key: str, *, boolean: bool = False) -> str | None:
        status, out, _ = self._call("config", *(["--bool"] if boolean else []), "--get", key)
        return out.decode("utf-8", "surrogateescape").strip() if status == 0 else None

    # -- state ----------------------------------------------------------------------------------------------

    def head(self) -> HeadState | None:
        status, out, _ = self._call("rev-parse", "--verify", "-q", "HEAD^{commit}")
        if status != 0:
            return None
        ref_status, ref, _ = self._call("symbolic-ref", "-q", "HEAD")
        return HeadState(out.decode().strip(), ref.decode().strip() if ref_status == 0 else None)

    def prepare_target(self, relpath: str, start_source: bytes) -> tuple[HeadState, bytes]:
        head = self.head()
        if head is None:
            raise VcsPrepareError(
                f"the git repository at {self.root} has no commit yet; commit the kernel first"
            )
        names = list(OPERATIONS_IN_PROGRESS)
        git_paths = self._text(
            "rev-parse", *(arg for name in names for arg in ("--git-path", name))
        ).splitlines()
        for name, git_path in zip(names, git_paths, strict=True):
            if (self.root / git_path).exists():
                raise VcsPrepareError(
                    f"{OPERATIONS_IN_PROGRESS[name]} is in progress in {self.root}; finish or abort it first"
                )
        if self._run("ls-files", "-u", "-z"):
            raise VcsPrepareError(
                f"the index of {self.root} has unresolved merge conflicts; resolve them first"
            )
        entry = self._tree_entry(head.revision, relpath)
        if entry is None:
            raise VcsPrepareError(f"{relpath} is not tracked at HEAD in {self.root}; commit it first")
        if entry.mode not in ("100644", "100755"):
            raise VcsPrepareError(f"{relpath} is not a regular file at HEAD (mode {entry.mode})")
        return head, self.committed_form(head.revision, relpath, start_source)

    def committed_form(self, revision: str, relpath: str, working: bytes) -> bytes:
        entry = self._tree_entry(revision, relpath)
        if entry is not None and self._blob_id(working, relpath, write=False) == entry.blob:
            return working  # clean, even where eol or smudge filters make the bytes differ
        return self.committed_source(revision, relpath)

    def own_commits(self, base_revision: str, marker: str) -> list[tuple[str, str]]:
        out = self._run("log", "--reverse", "--format=%H%x00%B%x1e", f"{base_revision}..HEAD")
        found = []
        for record in out.decode("utf-8", "surrogateescape").split("\x1e"):
            revision, _, message = record.strip("\n").partition("\0")
            if revision and any(line.startswith(marker) for line in message.splitlines()):
                found.append((revision, message))
        return found

    def restage(self, relpath: str, parent: str, revision: str) -> list[str]:
        old, new = self._tree_entry(parent, relpath), self._tree_entry(revision, relpath)
        if old is None or new is None:
            return [f"{relpath} is not tracked at {parent[:12]} or {revision[:12]}; the index was left as is"]
        return self._stage_committed_blob(relpath, old.blob, new.blob)

    def committed_source(self, revision: str, relpath: str) -> bytes:
        # --filters gives the working-tree form (eol conversion, smudge), comparable with the file on disk.
        return self._run("cat-file", "--filters", f"{revision}:{relpath}")

    def _tree_entry(self, revision: str, relpath: str) -> TreeEntry | None:
        for record in self._run("ls-tree", "-z", revision, "--", relpath).split(b"\0"):
            meta, _, path = record.partition(b"\t")
            fields = meta.decode().split()
            if (
                path.decode("utf-8", "surrogateescape") == relpath
                and len(fields) == 3
                and fields[1] == "blob"
            ):
                return TreeEntry(fields[0], fields[2])
        return None

    def _index_entry(self, relpath: str) -> TreeEntry | None:
        """The stage-0 entry of ``relpath`` in the user's real index."""
        for record in self._run("ls-files", "-s", "-z", "--", relpath).split(b"\0"):
            meta, _, path = record.partition(b"\t")
            fields = meta.decode().split()
            if path.decode("utf-8", "surrogateescape") == relpath and len(fields) == 3 and fields[2] == "0":
                return TreeEntry(fields[0], fields[1])
        return None

    def _blob(self, blob: str) -> bytes:
        return self._run("cat-file", "blob", blob)

    def _blob_id(self, content: bytes, relpath: str | None, *, write: bool = True) -> str:
        """The blob id (stored unless ``write`` is off); with ``relpath`` its clean filters apply, as for git add."""
        where = [f"--path={relpath}"] if relpath is not None else ["--no-filters"]
        return self._text("hash-object", *(["-w"] if write else []), *where, "--stdin", stdin=content)

    # -- commit ----------------------------------------------------------------------------------------------

    def commit_file(self, commit: FileCommit) -> CommitOutcome:
        base_entry = self._tree_entry(commit.base.revision, commit.relpath)
        if base_entry is None:
            raise CommitRefused(f"{commit.relpath} is not tracked at {commit.base.revision[:12]}")
        new_blob = self._blob_id(commit.content, commit.relpath)
        tree = self._tree_with_blob(commit.base.revision, commit.relpath, base_entry.mode, new_blob)
        revision = self._commit_tree(tree, commit.base.revision, commit.message)

        ensure_still_expected(self, commit)
        self._move_head(commit.base, revision, commit.message)

        notes = self._stage_committed_blob(commit.relpath, base_entry.blob, new_blob)
        try:
            if not replace_if_unchanged(commit.kernel_path, commit.expected_disk, commit.working_content):
                notes.append(
                    f"kernel file {commit.relpath} changed on disk while committing; it was left as is"
                )
        except OSError as exc:
            notes.append(f"could not write the winner to {commit.relpath}: {exc}")
        committed = self._tree_entry(revision, commit.relpath)
        if committed is None or committed.blob != new_blob:
            notes.append(f"{revision[:12]} does not hold the expected blob for {commit.relpath}")
        return CommitOutcome(revision, notes)

    def _tree_with_blob(self, base: str, relpath: str, mode: str, blob: str) -> str:
        """The tree of ``base`` with one entry replaced, built in a throwaway index (never the user's)."""
        with tempfile.TemporaryDirectory(prefix="tlx-agent-index-") as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            self._run("read-tree", base, env=env)
            self._run("update-index", "--add", "--cacheinfo", f"{mode},{blob},{relpath}", env=env)
            return self._text("write-tree", env=env)

    def _commit_tree(self, tree: str, parent: str, message: str) -> str:
        signing = ["-S"] if self._config("commit.gpgsign", boolean=True) == "true" else []
        return self._text(
            "commit-tree", "-p", parent, "-F", "-", *signing, tree,
            env=self._identity_env(), stdin=message.encode("utf-8"),
        )  # fmt: skip

    def _identity_env(self) -> dict[str, str]:
        """The user's identity (environment, then config); the agent's own only where none is configured."""
        user_name, user_email = self._config("user.name"), self._config("user.email")
        env: dict[str, str] = {}
        for role in ("author", "committer"):
            upper = role.upper()
            env[f"GIT_{upper}_NAME"] = (
                os.environ.get(f"GIT_{upper}_NAME")
                or self._config(f"{role}.name")
                or user_name
                or FALLBACK_NAME
            )
            env[f"GIT_{upper}_EMAIL"] = (
                os.environ.get(f"GIT_{upper}_EMAIL")
                or self._config(f"{role}.email")
                or user_email
                or os.environ.get("EMAIL")
                or FALLBACK_EMAIL
            )
        return env

    def _move_head(self, base: HeadState, revision: str, message: str) -> None:
        """Compare-and-swap the ref HEAD pointed at when the run started (or detached HEAD itself)."""
        subject = message.splitlines()[0] if message else ""
        target = [base.ref] if base.ref else ["--no-deref", "HEAD"]
        try:
            self._run_retrying_locks(
                "update-ref", "-m", f"tlx-agent checkpoint: {subject}", *target, revision, base.revision
            )
        except GitCommandFailed as exc:
            raise CommitRefused(f"HEAD moved during the commit ({first_line(exc.stderr)})") from exc

    def _stage_committed_blob(self, relpath: str, old_blob: str, new_blob: str) -> list[str]:
        """Advance only the kernel's real index entry, keeping anything the user staged for it."""
        entry = self._index_entry(relpath)
        if entry is None:
            return [f"{relpath} has no index entry; the index was left as is"]
        if entry.blob == new_blob:
            return []
        staged = new_blob
        if entry.blob != old_blob:
            merged = merge_three_way(self._blob(entry.blob), self._blob(old_blob), self._blob(new_blob))
            if merged.merged is None:
                return [
                    f"the staged version of {relpath} overlaps the agent's change; its index entry was left as is"
                ]
            staged = self._blob_id(merged.merged, None)
        try:
            self._run_retrying_locks("update-index", "--cacheinfo", f"{entry.mode},{staged},{relpath}")
        except GitCommandFailed as exc:
            return [f"the index entry of {relpath} was not updated ({exc})"]
        return []
