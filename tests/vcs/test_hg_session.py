"""Mercurial checkpoints on real repositories, through the hg command from the venv (or PATH).

Every hg call starts an interpreter (~0.2 s), so each test checks several facts per repository.
"""

from __future__ import annotations

import pytest

from orchestrator.vcs import ATTRIBUTION, CommitSession, Repository, VcsPrepareError, detect_repository
from orchestrator.vcs.backend import HeadState
from orchestrator.vcs.hg_session import FALLBACK_USER, HgBackend
from tests.vcs.conftest import TEST_USER_EMAIL, TEST_USER_NAME, HgRepo, edit_line, kernel_text

KERNEL = "kernels/kernel.py"


def start(repo: HgRepo, committed: bytes, wip: bytes | None = None) -> CommitSession:
    repo.write(KERNEL, committed)
    repo.commit_all("add kernel")
    source = committed if wip is None else wip
    kernel = repo.write(KERNEL, source)
    return CommitSession.prepare(Repository("hg", repo.root.resolve()), kernel, source)


def promote(session: CommitSession, winner: bytes, subject: str = "Vectorize loads"):
    plan = session.plan_checkpoint(winner)
    assert plan.ok, plan.reason
    return plan, session.apply_checkpoint(plan, subject, "Performance table here.", "r001-c000")


def test_clean_target_commits_only_the_kernel_and_keeps_other_work(hg_repo: HgRepo) -> None:
    hg_repo.write("modified.txt", b"one\n")
    base = kernel_text()
    hg_repo.write(KERNEL, base)
    before = hg_repo.commit_all("add kernel")
    hg_repo.write("modified.txt", b"user change\n")
    hg_repo.write("untracked.txt", b"scratch\n")
    kernel = hg_repo.root / KERNEL
    repository = detect_repository(kernel, "auto")
    assert repository == Repository("hg", hg_repo.root.resolve())
    session = CommitSession.prepare(repository, kernel, base)
    assert (session.vcs, session.relpath, session.base_revision, session.dirty_at_start) == (
        "hg",
        KERNEL,
        before,
        False,
    )

    winner = edit_line(base, 10, "x10 = 10  # agent")
    _, record = promote(session, winner)

    assert record.status == "committed" and record.vcs == "hg" and record.reason == ""
    facts = hg_repo.commit_facts()
    assert record.revision == facts["node"] and record.base_revision == before == facts["parent"]
    assert facts["files"] == KERNEL
    assert facts["author"] == FALLBACK_USER  # no username configured anywhere
    description = facts["description"]
    assert description.splitlines()[0] == "Vectorize loads" and description.splitlines()[-1] == ATTRIBUTION
    assert description.count(ATTRIBUTION) == 1
    assert hg_repo.cat(".", KERNEL) == winner and hg_repo.read(KERNEL) == winner
    assert hg_repo.read("modified.txt") == b"user change\n" and hg_repo.read("untracked.txt") == b"scratch\n"
    assert hg_repo.status() == ["M modified.txt", "? untracked.txt"]
    backups = hg_repo.root / ".hg" / "tlx-agent-wip"
    assert list(backups.iterdir()) == []  # made for the commit, emptied after it


def test_dirty_target_commits_parent_plus_agent_delta_with_the_configured_user(make_hg_repo) -> None:
    repo = make_hg_repo(username=True)
    committed = kernel_text()
    wip = edit_line(committed, 2, "x2 = 2  # user's uncommitted edit")
    session = start(repo, committed, wip)
    assert session.dirty_at_start

    winner = edit_line(wip, 20, "x20 = 20  # agent")
    plan, record = promote(session, winner)

    expected_commit = edit_line(committed, 20, "x20 = 20  # agent")
    assert plan.needs_revalidation and plan.merged_source == expected_commit
    assert record.status == "committed"
    assert repo.cat(".", KERNEL) == expected_commit
    assert repo.read(KERNEL) == winner
    assert repo.commit_facts()["author"] == f"{TEST_USER_NAME} <{TEST_USER_EMAIL}>"
    diff = repo.hg("diff", KERNEL)
    assert "+x2 = 2  # user's uncommitted edit" in diff and "agent" not in diff


def test_overlapping_edits_are_refused(hg_repo: HgRepo) -> None:
    committed = kernel_text()
    wip = edit_line(committed, 5, "x5 = 5  # user")
    session = start(hg_repo, committed, wip)
    head = session.base_revision

    plan = session.plan_checkpoint(edit_line(wip, 5, "x5 = 5  # user and agent"))

    assert not plan.ok and "overlaps uncommitted edits" in plan.reason
    assert session.apply_checkpoint(plan, "s", "b", "r001-c000").status == "failed"
    assert hg_repo.head() == head and hg_repo.read(KERNEL) == wip


def test_parent_moved_then_kernel_changed_during_the_run_refuses(hg_repo: HgRepo) -> None:
    base = kernel_text()
    session = start(hg_repo, base)
    plan = session.plan_checkpoint(edit_line(base, 3, "x3 = 3"))
    hg_repo.write("other.txt", b"user work\n")
    moved = hg_repo.commit_all("user commits during the run")

    record = session.apply_checkpoint(plan, "s", "b", "r001-c000")

    assert record.status == "failed" and "HEAD moved" in record.reason
    assert hg_repo.read(KERNEL) == base

    users_edit = edit_line(base, 9, "x9 = 9  # user edits during the run")
    hg_repo.write(KERNEL, users_edit)
    refused = session.plan_checkpoint(edit_line(base, 3, "x3 = 3"))
    assert not refused.ok and "changed on disk" in refused.reason
    assert hg_repo.read(KERNEL) == users_edit and hg_repo.head() == moved


def test_a_commit_racing_in_before_hg_commit_is_caught_by_the_hook(
    hg_repo: HgRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    committed = kernel_text()
    wip = edit_line(committed, 1, "x1 = 1  # user")
    session = start(hg_repo, committed, wip)
    plan = session.plan_checkpoint(edit_line(wip, 20, "x20 = 20  # agent"))
    stale = HeadState(session.base_revision, "default")
    hg_repo.write("other.txt", b"racing commit\n")
    moved = hg_repo.commit_all("racing commit")
    monkeypatch.setattr(HgBackend, "head", lambda self: stale)  # the pre-checks see the old parent

    record = session.apply_checkpoint(plan, "s", "b", "r001-c000")

    assert record.status == "failed" and "HEAD moved" in record.reason
    monkeypatch.undo()
    assert hg_repo.head() == moved
    assert hg_repo.read(KERNEL) == wip  # restored after the refused commit


def test_two_promotions_then_rollback(hg_repo: HgRepo) -> None:
    committed = kernel_text()
    wip = edit_line(committed, 0, "x0 = 0  # user")
    session = start(hg_repo, committed, wip)
    first = edit_line(wip, 10, "x10 = 10  # promotion 1")
    second = edit_line(first, 20, "x20 = 20  # promotion 2")
    _, one = promote(session, first, "First")
    _, two = promote(session, second, "Second")

    rollback = session.commit_rollback("Revert TLX agent promotions", "Final revalidation failed.")

    assert [one.status, two.status, rollback.status] == ["committed"] * 3
    history = hg_repo.hg("log", "-l", "4", "-T", "{node}\\0{desc}\\0\\0").split("\0\0")[:4]
    nodes = [entry.split("\0")[0] for entry in history]
    assert nodes == [rollback.revision, two.revision, one.revision, session.checkpoints[0].base_revision]
    assert [entry.count(ATTRIBUTION) for entry in history] == [0, 1, 1, 0]
    assert hg_repo.cat(".", KERNEL) == committed
    assert hg_repo.read(KERNEL) == wip


def test_prepare_refuses_an_untracked_kernel(hg_repo: HgRepo) -> None:
    hg_repo.write("README", b"readme\n")
    hg_repo.commit_all("readme")
    kernel = hg_repo.write(KERNEL, kernel_text())

    with pytest.raises(VcsPrepareError, match="not tracked"):
        CommitSession.prepare(Repository("hg", hg_repo.root.resolve()), kernel, kernel_text())
