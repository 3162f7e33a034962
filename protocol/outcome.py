"""How a command ends: its exit code and, for a run, why it stopped. One home for both contracts."""

from __future__ import annotations

from enum import Enum, IntEnum


class ExitCode(IntEnum):
    """Exit codes of every `tlx-agent` subcommand, one meaning each (also the `exit_code` field of result.json and
    batch.json). A code a subcommand cannot reach is simply not returned by it."""

    # optimize: a winner was promoted and survived revalidation; validate/init-bundle: every check passed;
    # batch: every job improved its kernel
    OK = 0
    ERROR = 1  # invalid input or internal error; one message names what to fix
    NO_WINNER = 2  # optimize: the run finished without a qualifying winner; batch: no job improved
    COMMIT_FAILED = 3  # optimize: a promotion or rollback commit failed
    # Reserved for "a candidate was caught lying about its work or speed: a person should look". Nothing returns
    # it yet: the checks that would request it are not built (docs/security.md, "What is still open").
    HUMAN_REVIEW = 4
    SOME_IMPROVED = 5  # batch: some jobs improved their kernel, the others did not or failed
    INTERRUPTED = 130  # Ctrl-C / SIGINT (batch: SIGTERM too; --resume continues)


class StoppingReason(str, Enum):
    """Why a run stopped asking for candidates (or ended early)."""

    ROUND_BUDGET_EXHAUSTED = "round_budget_exhausted"
    TIME_BUDGET_EXHAUSTED = "time_budget_exhausted"
    PROVIDER_EXHAUSTED = "provider_exhausted"
    FINALIST_REVALIDATION_FAILED = "finalist_revalidation_failed"
    PROMOTION_COMMIT_FAILED = "promotion_commit_failed"
    ROLLBACK_COMMIT_FAILED = "rollback_commit_failed"
    HUMAN_REVIEW_REQUESTED = "human_review_requested"
    INTERRUPTED = "interrupted"
    BUNDLE_TAMPERED = "bundle_tampered"
    BASELINE_FAILED = "baseline_failed"
    PREFLIGHT_FAILED = "preflight_failed"
    LEFTOVER_PROCESS = "leftover_process"  # a process of an earlier evaluation survived SIGKILL
    DEVICE_CHANGED = "device_changed"  # a worker reported another device than the run's (a resume elsewhere)
