"""Commits that never lose the user's work: git and Mercurial checkpoints, rollback, conflicts.

The run loop calls these synchronously (from a worker thread):

- ``detect_repository(kernel_path, "auto"|"git"|"hg")`` -> ``Repository`` or None (no repository, auto);
- ``CommitSession.prepare(repository, kernel_path, start_source)`` before the first candidate
  (``VcsPrepareError`` -> exit 3);
- per promotion ``plan_checkpoint(winner)`` then, after re-verifying ``merged_source`` when
  ``needs_revalidation``, ``apply_checkpoint(plan, subject, body, experiment_id)``;
- after a failed final revalidation ``commit_rollback(subject, body)``;
- ``build_commit_message`` and ``format_commit_event`` for the message and the live-log line.
"""

from orchestrator.vcs.backend import HeadState
from orchestrator.vcs.detect import Repository, detect_repository
from orchestrator.vcs.errors import VcsError, VcsPrepareError
from orchestrator.vcs.merge import MergeResult, merge_three_way
from orchestrator.vcs.message import (
    ATTRIBUTION,
    DEFAULT_SUBJECT,
    ROLLBACK_SUBJECT,
    PerformanceRow,
    build_commit_message,
    default_subject,
    format_commit_event,
)
from orchestrator.vcs.session import CheckpointPlan, CommitSession

__all__ = [
    "ATTRIBUTION",
    "DEFAULT_SUBJECT",
    "ROLLBACK_SUBJECT",
    "CheckpointPlan",
    "CommitSession",
    "HeadState",
    "MergeResult",
    "PerformanceRow",
    "Repository",
    "VcsError",
    "VcsPrepareError",
    "build_commit_message",
    "default_subject",
    "detect_repository",
    "format_commit_event",
    "merge_three_way",
]
