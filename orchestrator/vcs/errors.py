"""Errors the VCS layer raises; every message is one line that says what to do."""

from __future__ import annotations


class VcsError(Exception):
    """A repository problem the user can fix (detection, a missing tool, a refused commit)."""


class VcsPrepareError(VcsError):
    """The checkout cannot take checkpoint commits; the run stops before optimizing (exit 3)."""


class CommitRefused(VcsError):
    """A commit was not made because the repository or the kernel file is not as the session expects."""
