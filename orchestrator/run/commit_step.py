"""The run's VCS step: prepare before the first candidate, checkpoint each promotion, roll back if needed.

The VCS mechanics live in `orchestrator.vcs`; this module decides when to call them, re-verifies a merged
source when the user's kernel was dirty, and writes every attempt to the live log and the JSON records.
"""

from __future__ import annotations

from pathlib import Path

import trio

from orchestrator.ledger.artifacts import RunArtifacts, write_json
from orchestrator.ledger.config import RunConfig
from orchestrator.ledger.live_log import LiveLog
from orchestrator.run.evaluator import Evaluator
from orchestrator.run.state import RunState
from orchestrator.vcs import (
    CommitSession,
    HeadState,
    PerformanceRow,
    VcsError,
    build_commit_message,
    detect_repository,
    format_commit_event,
)
from protocol.results import CommitRecord, EvaluationStatus, ExperimentRecord
from protocol.roles import Role


class CommitStep:
    def __init__(self, config: RunConfig, kernel_path: Path, log: LiveLog, artifacts: RunArtifacts) -> None:
        self.config = config
        self.kernel_path = kernel_path
        self.log = log
        self.artifacts = artifacts
        self.session: CommitSession | None = None
        self.records: list[CommitRecord] = []
        self.failed = False
        self.state_note = "disabled (--no-commit-winner)" if not config.commit_winner else "no winner to commit"

    def prepare(self, start_source: str, run_id: str | None = None) -> None:
        """Raise VcsError (exit 3) when the checkout cannot take checkpoint commits."""
        repository = self._repository()
        if repository is None:
            return
        self.session = CommitSession.prepare(repository, self.kernel_path, start_source.encode("utf-8"), run_id)
        self.artifacts.journal("commit_prepared", vcs=self.session.vcs, repository=str(self.session.repository_root),
                               file=self.session.relpath, base_revision=self.session.base_revision,
                               ref=self.session.start_head.ref)
        self._log_prepared()

    def reopen(self, start_source: str, run_id: str, prepared: dict | None, commits: list[CommitRecord],
               winners: dict[str, str]) -> None:
        """A resumed run's session: where the dead run's `commit_prepared` said commits go, with the commits
        it made (found by their trailer) adopted. Without a `commit_prepared` the run died before preparing:
        prepare now, as a fresh run would."""
        self.records = list(commits)
        self.failed = any(record.status == "failed" for record in commits)
        repository = self._repository()
        if repository is None:
            return
        if prepared is None:
            self.prepare(start_source, run_id)
            return
        start = HeadState(prepared["base_revision"], prepared.get("ref"))
        self.session = CommitSession.reopen(repository, self.kernel_path, start_source.encode("utf-8"), start, run_id,
                                            {k: v.encode("utf-8") for k, v in winners.items()})
        journaled = {(r.kind, r.experiment_id) for r in commits if r.status == "committed"}
        for adopted in self.session.adopted:
            if (adopted.kind, adopted.experiment_id) not in journaled:
                self._save(adopted)  # committed just before the run died, journaled only now
        self._log_prepared()

    def _repository(self):
        if not self.config.commit_winner:
            self.log.event("commit status=disabled reason='--no-commit-winner: artifacts only'")
            return None
        repository = detect_repository(self.kernel_path, self.config.vcs)
        if repository is None:
            self.state_note = "not committed: the kernel is in no git or Mercurial repository"
            self.log.event(f"commit status=skipped reason='kernel {self.kernel_path} is in no git or Mercurial "
                           "repository; the winner stays an artifact (best_kernel.py)'")
        return repository

    def _log_prepared(self) -> None:
        assert self.session is not None
        if self.session.checkpoints:
            self.state_note = f"committed {self.session.checkpoints[-1].revision} ({self.session.vcs})"
        self.log.event(f"commit status=prepared vcs={self.session.vcs} repository={str(self.session.repository_root)!r} "
                       f"file={self.session.relpath!r} base_revision={self.session.base_revision} "
                       f"dirty_target={str(self.session.dirty_at_start).lower()}")

    def _save(self, record: CommitRecord) -> None:
        self.records.append(record)
        self.log.event(format_commit_event(record))
        self.artifacts.journal("commit", record=record)
        promotions = [r for r in self.records if r.kind == "promotion"]
        if promotions:
            write_json(self.artifacts.root / "promotion_commits.json", promotions)
        write_json(self.artifacts.root / "auto_commit.json", record)
        if record.kind == "rollback":
            write_json(self.artifacts.root / "rollback_commit.json", record)
        if record.status == "failed":
            self.failed = True

    def _message(self, record: ExperimentRecord) -> tuple[str, str]:
        subject = self.config.commit_message or record.metadata.change or f"Optimize {self.kernel_path.name} with tlx-agent"
        rows = [PerformanceRow(case_id=row.case_id, baseline_us=row.incumbent_median_us, winner_us=row.candidate_median_us,
                               speedup=row.speedup, baseline_cv=row.incumbent_cv, winner_cv=row.candidate_cv,
                               correct=bool(row.correct))
                for row in record.comparisons]
        heading = f"Promotion evaluation for {record.experiment_id} (against the incumbent {record.parent_id}):"
        return build_commit_message(subject, rows, record.aggregate_speedup, heading)

    async def checkpoint(self, state: RunState, record: ExperimentRecord, winner_source: str,
                         evaluator: Evaluator) -> bool:
        """Commit a promotion before the next candidate; False stops the run (the commit failed)."""
        if self.session is None:
            return True
        session = self.session
        subject, body = self._message(record)
        if any(c.experiment_id == record.experiment_id and c.kind == "promotion" for c in session.checkpoints):
            return True  # committed before a resume (adopted from the history): a commit is made at most once
        plan = await trio.to_thread.run_sync(session.plan_checkpoint, winner_source.encode("utf-8"))
        if not plan.ok and getattr(plan, "nothing_to_commit", False):
            self._save(CommitRecord(status="skipped", vcs=session.vcs, repository=str(session.repository_root),
                                    file=session.relpath, subject=subject, base_revision=session.base_revision,
                                    reason=plan.reason, kind="promotion", experiment_id=record.experiment_id))
            return True
        if not plan.ok:
            self._save(CommitRecord(status="failed", vcs=session.vcs, repository=str(session.repository_root),
                                    file=session.relpath, subject=subject, base_revision=session.base_revision,
                                    reason=plan.reason, kind="promotion", experiment_id=record.experiment_id))
            return False
        if plan.needs_revalidation:
            merged_path = self.artifacts.experiment_dir(record.experiment_id) / "commit_merged_kernel.py"
            merged_path.write_bytes(plan.merged_source or b"")
            check = await evaluator.evaluate(state, role=Role.COMMIT_REVALIDATION, experiment_id=record.experiment_id,
                                       kernel_path=merged_path, tag="commit-revalidation", deadline=state.deadline,
                                       benchmark=False)
            write_json(self.artifacts.experiment_dir(record.experiment_id) / "commit_revalidation.json", check)
            if check.status is not EvaluationStatus.OK:
                self._save(CommitRecord(
                    status="failed", vcs=session.vcs, repository=str(session.repository_root), file=session.relpath,
                    subject=subject, base_revision=session.base_revision, kind="promotion",
                    experiment_id=record.experiment_id,
                    reason=f"merged source (your uncommitted edits + the winner) failed verification: {check.reason}"))
                return False
        committed = await trio.to_thread.run_sync(session.apply_checkpoint, plan, subject, body, record.experiment_id)
        self._save(committed)
        if committed.status == "committed":
            self.state_note = f"committed {committed.revision} ({committed.vcs})"
        return committed.status == "committed"

    async def rollback(self, reason: str, keep: str | None = None) -> bool:
        """Undo the checkpoints after a failed final revalidation: all of them, or (`keep`, an earlier promotion
        that was revalidated instead) those after the last checkpoint up to `keep`, so the checkout ends with
        exactly the revalidated winner's content. One forward commit, made at most once (also across a resume)."""
        if self.session is None or not self.session.checkpoints:
            return True
        to = self.restore_point(keep)
        if any(r.kind == "rollback" and r.status == "committed" and r.experiment_id == to for r in self.records):
            return True  # rolled back before a resume
        if to is None:
            subject = "Revert tlx-agent promotions after failed final revalidation"
            body = f"Final revalidation rejected the finalist: {reason}"
        else:
            subject = f"Revert tlx-agent promotions after {to}: they failed final revalidation"
            body = f"Final revalidation rejected the later finalist(s) and revalidated {keep}: {reason}"
        record = await trio.to_thread.run_sync(self.session.commit_rollback, subject, body, to)
        if record.status == "skipped":
            return True
        self._save(record)
        self.state_note = (f"rolled back ({record.status})" if to is None else
                           f"rolled back to {to} ({record.status}{', ' + record.revision if record.revision else ''})")
        return record.status == "committed"

    def restore_point(self, keep: str | None) -> str | None:
        """The checkpoint a rollback that keeps `keep` returns to: the last promotion committed up to `keep`
        (a promotion with nothing to commit left the content as the one before it); None: the start."""
        if keep is None:
            return None
        promotions = [r for r in self.records if r.kind == "promotion"]
        upto = next((i for i, r in enumerate(promotions) if r.experiment_id == keep), None)
        if upto is None:
            return None
        return next((r.experiment_id for r in reversed(promotions[:upto + 1]) if r.status == "committed"), None)

    def finalize(self) -> None:
        if self.session is None:
            return
        restored = next((r for r in reversed(self.records) if r.kind == "rollback" and r.status == "committed"), None)
        if restored is not None and restored.experiment_id:
            self.log.event(f"commit status=final revision={restored.revision} restored={restored.experiment_id} "
                           f"checkpoints={len(self.session.checkpoints)}")
        elif self.session.checkpoints:
            last = self.session.checkpoints[-1]
            self.log.event(f"commit status=final revision={last.revision} checkpoints={len(self.session.checkpoints)}")

    def summary(self) -> str:
        return self.state_note


__all__ = ["CommitStep", "VcsError"]
