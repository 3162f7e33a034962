"""What an evaluation is for. Its role, stored as `Evaluation.label`, decides how the run treats it."""

from __future__ import annotations

from enum import Enum


class Role(str, Enum):
    BASELINE = "baseline"  # the user's kernel, measured and deep-profiled once at the start
    CANDIDATE = "candidate"  # a proposal, measured side by side with the incumbent
    INCUMBENT = "incumbent"  # the current best, re-measured next to each candidate (A/B/A)
    FINAL = "final"  # the finalist, revalidated next to fresh baseline runs
    PROFILE = "profile"  # a candidate promoted on its runs, profiled (summary) for its evidence; never timed
    DEEP_PROFILE = "deep_profile"  # an extra profiling worker, never timed for a decision
    COMMIT_REVALIDATION = "commit_revalidation"  # verify-only check of a merged source before a commit
    DIAGNOSTIC = "diagnostic"  # intra-kernel instrumentation: never benchmarked, decided on or committed
    VALIDATE = "validate"  # a preflight worker of `tlx-agent validate` or optimize's built-in preflight
    SCREENING = "screening"  # many variants briefly timed in one worker, to rank them; never decides

    @property
    def decides(self) -> bool:
        """Its samples may enter a promotion decision."""
        return self in (Role.CANDIDATE, Role.INCUMBENT, Role.FINAL, Role.BASELINE)

    @property
    def names_the_experiment_log(self) -> bool:
        """Its worker log is the experiment's `worker.log` (the others get `worker-<tag>.log`)."""
        return self in (Role.CANDIDATE, Role.BASELINE, Role.FINAL)
