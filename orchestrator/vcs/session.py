"""Checkpoint commits for one run: only the agent's delta, never the user's other work.

The session remembers what it expects: HEAD (``base_revision``), the committed kernel and the bytes on disk
(the start source, then each committed winner). A checkpoint commits ``merge(committed, expected disk,
winner)``, i.e. the committed content plus the agent's delta; anything else that moved (HEAD, the file on disk)
or an overlap with the user's uncommitted edits refuses the commit and leaves every file as it was. A rollback
is a forward commit back to the content committed before the first checkpoint, or, when an earlier promotion
won the final revalidation instead of the last, back to what that promotion's checkpoint committed.

Not thread-safe: the run loop calls one method at a time (from a worker thread).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from orchestrator.vcs.backend import FileCommit, HeadState, VcsBackend, head_moved_reason
from orchestrator.vcs.detect import Repository, kernel_location
from orchestrator.vcs.errors import CommitRefused, VcsError, VcsPrepareError
from orchestrator.vcs.git_session import GitBackend
from orchestrator.vcs.hg_session import HgBackend
from orchestrator.vcs.merge import merge_three_way
from orchestrator.vcs.message import ROLLBACK_SUBJECT, compose_message, default_subject, run_trailer
from orchestrator.vcs.worktree import read_bytes_or_none, replace_if_unchanged
from protocol.results import CommitRecord


@dataclass(frozen=True)
class CheckpointPlan:
    """What a checkpoint would commit, decided before anything is written.

    ``needs_revalidation``: the merged source differs from the measured winner (the target was dirty), so the
    run must verify the protected cases on ``merged_source`` before ``apply_checkpoint``.
    ``nothing_to_commit``: refused only because the merge adds nothing; applying it is a skip, not a failure.
    """

    ok: bool
    reason: str
    merged_source: bytes | None
    needs_revalidation: bool
    winner_source: bytes | None = None
    base_revision: str | None = None
    nothing_to_commit: bool = False


def backend_for(repository: Repository) -> VcsBackend:
    root = repository.root.resolve()
    return GitBackend(root) if repository.vcs == "git" else HgBackend(root)


class CommitSession:
    """Checkpoint, and if needed roll back, the agent's changes to one kernel file in one repository."""

    def __init__(
        self,
        backend: VcsBackend,
        kernel_path: Path,
        relpath: str,
        head: HeadState,
        committed_source: bytes,
        start_source: bytes,
        run_id: str | None = None,
    ) -> None:
        self._backend = backend
        self.run_id = run_id  # named in every commit's trailer, so a resumed run never commits twice
        self.start_head = head
        self.kernel_path = kernel_path
        self.relpath = relpath
        self._head = head
        self._committed = committed_source
        self._expected_disk = start_source
        self._start_committed = committed_source
        self._start_source = start_source
        self.dirty_at_start = committed_source != start_source
        self.checkpoints: list[CommitRecord] = []
        self.adopted: list[CommitRecord] = []  # commits of this run found in the history by `reopen`
        # experiment id -> (committed content, bytes on disk) right after its checkpoint: what a rollback to it restores
        self._after: dict[str, tuple[bytes, bytes]] = {}

    @classmethod
    def prepare(
        cls, repository: Repository, kernel_path: Path, start_source: bytes, run_id: str | None = None
    ) -> CommitSession:
        """Check the checkout can take checkpoint commits; VcsPrepareError says why not."""
        kernel = kernel_location(kernel_path)
        if kernel.is_symlink():
            raise VcsPrepareError(f"the kernel {kernel} is a symbolic link; pass the file it points to")
        if read_bytes_or_none(kernel) != start_source:
            raise VcsPrepareError(f"the kernel {kernel} is missing or changed since it was read; start again")
        try:
            relpath = kernel.relative_to(repository.root.resolve()).as_posix()
        except ValueError:
            raise VcsPrepareError(f"the kernel {kernel} is not inside {repository.root}") from None
        try:
            backend = backend_for(repository)
            head, committed = backend.prepare_target(relpath, start_source)
        except VcsPrepareError:
            raise
        except VcsError as exc:
            raise VcsPrepareError(str(exc)) from exc
        return cls(backend, kernel, relpath, head, committed, start_source, run_id)

    @classmethod
    def reopen(
        cls,
        repository: Repository,
        kernel_path: Path,
        start_source: bytes,
        start_head: HeadState,
        run_id: str,
        winners: dict[str, bytes],
    ) -> CommitSession:
        """The session of a run that died, as its commits left it: every commit after ``start_head`` whose
        trailer names ``run_id`` is adopted in order (``winners``: experiment id -> the measured source), and
        a commit cut short after HEAD moved is finished (working file, index). Commits of anyone else are
        never touched; one on top of the run's makes the next checkpoint refuse, as in a live run."""
        kernel = kernel_location(kernel_path)
        try:
            relpath = kernel.relative_to(repository.root.resolve()).as_posix()
            backend = backend_for(repository)
            committed = backend.committed_form(start_head.revision, relpath, start_source)
            session = cls(backend, kernel, relpath, start_head, committed, start_source, run_id)
            own = backend.own_commits(start_head.revision, run_trailer(run_id, ""))
        except ValueError:
            raise VcsPrepareError(f"the kernel {kernel} is not inside {repository.root}") from None
        except VcsError as exc:
            raise VcsPrepareError(str(exc)) from exc
        for revision, message in own:
            what = _trailer_value(message, run_id)
            restored = rollback_target(what)
            working = (start_source if what == ROLLBACK else winners.get(restored)) if restored is not None \
                else winners.get(what)
            if working is not None:
                session.adopt(revision, working, what)
        return session

    def find_own_commit(self, what: str) -> str | None:
        """The revision this run already committed for ``what`` (an experiment id or ``rollback``), if any."""
        if self.run_id is None:
            return None
        found = self._backend.own_commits(self.start_head.revision, run_trailer(self.run_id, what))
        exact = [revision for revision, message in found if _trailer_value(message, self.run_id) == what]
        return exact[-1] if exact else None

    def adopt(self, revision: str, working: bytes, what: str) -> CommitRecord:
        """Take over a commit this run made before it died, finishing what the commit left undone."""
        parent = self._head
        previous_disk = self._expected_disk
        self._head = HeadState(revision, parent.ref)
        self._committed = self._backend.committed_form(revision, self.relpath, working)
        self._expected_disk = working
        notes = self._backend.restage(self.relpath, parent.revision, revision)
        if read_bytes_or_none(self.kernel_path) == previous_disk and previous_disk != working:
            replace_if_unchanged(self.kernel_path, previous_disk, working)
            notes.append(f"the working file {self.relpath} was brought to the committed winner")
        restored = rollback_target(what)
        kind: Literal["promotion", "rollback"] = "rollback" if restored is not None else "promotion"
        record = self._record(
            "committed", kind, f"commit of {what} made before the run was resumed", revision=revision,
            base_revision=parent.revision, reason="; ".join(["adopted from the repository's history", *notes]),
            experiment_id=(restored or None) if kind == "rollback" else what,
        )  # fmt: skip
        if kind == "promotion":
            self.checkpoints.append(record)
            self._after[what] = (self._committed, self._expected_disk)
        self.adopted.append(record)
        return record

    @property
    def vcs(self) -> str:
        return self._backend.vcs

    @property
    def repository_root(self) -> Path:
        return self._backend.root

    @property
    def base_revision(self) -> str:
        return self._head.revision

    # -- checkpoints ---------------------------------------------------------------------------------------

    def plan_checkpoint(self, winner_source: bytes) -> CheckpointPlan:
        """Merge the agent's delta onto the committed kernel, or say why it cannot be committed."""
        try:
            refusal = self._drift()
        except (VcsError, OSError) as exc:
            refusal = f"the repository could not be inspected: {_one_line(exc)}"
        if refusal:
            return CheckpointPlan(False, refusal, None, False, winner_source, self.base_revision)
        merge = merge_three_way(self._committed, self._expected_disk, winner_source)
        if merge.merged is None:
            reason = (
                f"winner overlaps uncommitted edits to {self.relpath} ({merge.conflicts} conflicting "
                "region(s)); nothing was committed"
            )
            return CheckpointPlan(False, reason, None, False, winner_source, self.base_revision)
        if merge.merged == self._committed:
            reason = f"winner adds nothing to the committed {self.relpath}"
            return CheckpointPlan(False, reason, None, False, winner_source, self.base_revision, True)
        return CheckpointPlan(
            True, "", merge.merged, merge.merged != winner_source, winner_source, self.base_revision
        )

    def apply_checkpoint(
        self, plan: CheckpointPlan, subject: str, body: str, experiment_id: str
    ) -> CommitRecord:
        """Commit a plan (re-checking HEAD and the file first); the message ends with the attribution."""
        message = compose_message(
            subject, body, attributed=True, fallback=default_subject(self.kernel_path.name),
            trailer=run_trailer(self.run_id, experiment_id) if self.run_id else None,
        )  # fmt: skip
        record_subject = message.splitlines()[0]
        if not plan.ok or plan.merged_source is None or plan.winner_source is None:
            status: Literal["failed", "skipped"] = "skipped" if plan.nothing_to_commit else "failed"
            reason = plan.reason or "the plan holds nothing to commit"
            return self._record(
                status, "promotion", record_subject, reason=reason, experiment_id=experiment_id
            )
        if plan.base_revision != self.base_revision:
            reason = "the plan was made for an earlier checkpoint; plan again"
            return self._record(
                "failed", "promotion", record_subject, reason=reason, experiment_id=experiment_id
            )
        record = self._commit(plan.merged_source, plan.winner_source, message, "promotion", experiment_id)
        if record.status == "committed":
            self.checkpoints.append(record)
            self._after[experiment_id] = (self._committed, self._expected_disk)
        return record

    def commit_rollback(self, subject: str, body: str, to: str | None = None) -> CommitRecord:
        """Forward commit back to the content committed before the first checkpoint (no attribution), or,
        with ``to``, back to what the checkpoint of that experiment committed (the later checkpoints undone).

        The working file returns to the start source (or that checkpoint's winner), so the user's uncommitted
        edits survive. The trailer names what was restored, so a resumed run adopts the commit, never repeats it.
        """
        what = ROLLBACK if to is None else f"{ROLLBACK}:{to}"
        message = compose_message(
            subject, body, attributed=False, fallback=ROLLBACK_SUBJECT,
            trailer=run_trailer(self.run_id, what) if self.run_id else None,
        )  # fmt: skip
        record_subject = message.splitlines()[0]
        if not self.checkpoints:
            return self._record(
                "skipped", "rollback", record_subject, reason="no checkpoint commit to roll back", experiment_id=to
            )
        if to is not None and to not in self._after:
            return self._record(
                "failed", "rollback", record_subject, reason=f"no checkpoint commit of {to} to roll back to",
                experiment_id=to,
            )  # fmt: skip
        committed, working = (self._start_committed, self._start_source) if to is None else self._after[to]
        if self._committed == committed:
            before = "before the first checkpoint" if to is None else f"at the checkpoint of {to}"
            return self._record(
                "skipped", "rollback", record_subject,
                reason=f"the committed {self.relpath} already equals its content {before}", experiment_id=to,
            )  # fmt: skip
        return self._commit(committed, working, message, "rollback", to)

    # -- internals -----------------------------------------------------------------------------------------

    def _drift(self) -> str:
        """Why the repository or the file is no longer as the session expects ("" when it is)."""
        changed = self._disk_drift()
        if changed:
            return changed
        current = self._backend.head()
        if current != self._head:
            return head_moved_reason(self._head, current)
        return ""

    def _disk_drift(self) -> str:
        on_disk = read_bytes_or_none(self.kernel_path)
        if on_disk is None:
            return f"kernel file {self.relpath} is missing from the working tree; nothing was committed"
        if on_disk != self._expected_disk:
            since = "the last checkpoint" if self.checkpoints else "the run started"
            return f"kernel file {self.relpath} changed on disk since {since}; it was not overwritten"
        return ""

    def _commit(
        self,
        content: bytes,
        working: bytes,
        message: str,
        kind: Literal["promotion", "rollback"],
        experiment_id: str | None,
    ) -> CommitRecord:
        subject = message.splitlines()[0]
        try:
            refusal = self._disk_drift()  # the backend re-checks HEAD right before its compare-and-swap
            if refusal:
                return self._record("failed", kind, subject, reason=refusal, experiment_id=experiment_id)
            commit = FileCommit(
                self.kernel_path, self.relpath, self._head, content, self._expected_disk, working, message
            )
            outcome = self._backend.commit_file(commit)
        except (VcsError, OSError) as exc:
            reason = _one_line(exc)
            return self._record("failed", kind, subject, reason=reason, experiment_id=experiment_id)
        base = self._head.revision
        self._head = HeadState(outcome.revision, self._head.ref)
        self._committed = content
        self._expected_disk = working
        return self._record(
            "committed", kind, subject, revision=outcome.revision, base_revision=base,
            reason="; ".join(outcome.notes), experiment_id=experiment_id,
        )  # fmt: skip

    def _record(
        self,
        status: Literal["committed", "failed", "skipped"],
        kind: Literal["promotion", "final", "rollback"],
        subject: str,
        *,
        reason: str = "",
        revision: str | None = None,
        base_revision: str | None = None,
        experiment_id: str | None = None,
    ) -> CommitRecord:
        return CommitRecord(
            status=status,
            vcs=self.vcs,
            revision=revision,
            base_revision=base_revision or self.base_revision,
            repository=str(self.repository_root),
            file=self.relpath,
            subject=subject,
            reason=reason,
            kind=kind,
            experiment_id=experiment_id,
        )


ROLLBACK = "rollback"  # the trailer's word for a rollback; `rollback:<id>` restores that experiment's checkpoint


def rollback_target(what: str) -> str | None:
    """What a trailer's rollback restores: "" for the start, an experiment id, or None (not a rollback)."""
    if what == ROLLBACK:
        return ""
    head, colon, target = what.partition(":")
    return target if head == ROLLBACK and colon and target else None


def _trailer_value(message: str, run_id: str) -> str:
    """What a commit's trailer says it was for (an experiment id or ``rollback``)."""
    prefix = run_trailer(run_id, "")
    return next((line[len(prefix):].strip() for line in message.splitlines() if line.startswith(prefix)), "")


def _one_line(exc: BaseException) -> str:
    """A refusal reads as itself; anything unexpected keeps its type so the reader knows what broke."""
    text = str(exc) if isinstance(exc, CommitRefused) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())
