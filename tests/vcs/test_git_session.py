"""Git checkpoints on real repositories: what lands in HEAD, the index and the working tree."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from orchestrator.vcs import (
    ATTRIBUTION,
    CommitSession,
    Repository,
    VcsPrepareError,
    detect_repository,
    format_commit_event,
)
from tests.vcs.conftest import TEST_USER_EMAIL, TEST_USER_NAME, GitRepo, edit_line, kernel_text

KERNEL = "src/kernel.py"


def start(repo: GitRepo, committed: bytes, wip: bytes | None = None) -> CommitSession:
    """Commit ``committed``, leave ``wip`` (if any) uncommitted in the working file, prepare a session."""
    repo.write(KERNEL, committed)
    repo.commit_all("add kernel")
    source = committed if wip is None else wip
    kernel = repo.write(KERNEL, source)
    repository = detect_repository(kernel, "auto")
    assert repository == Repository("git", repo.root.resolve())
    return CommitSession.prepare(repository, kernel, source)


def promote(
    session: CommitSession, winner: bytes, subject: str = "Vectorize loads", experiment: str = "r001-c000"
):
    plan = session.plan_checkpoint(winner)
    assert plan.ok, plan.reason
    return plan, session.apply_checkpoint(plan, subject, "Performance table here.", experiment)


def test_clean_target_commit_holds_the_winner_and_nothing_else(git_repo: GitRepo) -> None:
    base = kernel_text()
    session = start(git_repo, base)
    before, count = git_repo.head(), git_repo.commit_count()
    assert session.vcs == "git" and session.relpath == KERNEL and not session.dirty_at_start
    assert session.base_revision == before and session.repository_root == git_repo.root.resolve()

    winner = edit_line(base, 10, "x10 = tl.load(ptr + 10, cache_modifier='.cg')")
    plan, record = promote(session, winner)

    assert plan.merged_source == winner and not plan.needs_revalidation
    assert record.status == "committed" and record.kind == "promotion" and record.reason == ""
    assert record.revision == git_repo.head() and record.base_revision == before
    assert (record.vcs, record.file, record.experiment_id) == ("git", KERNEL, "r001-c000")
    assert git_repo.commit_count() == count + 1
    assert git_repo.git("rev-parse", "HEAD^").strip() == before
    assert git_repo.show("HEAD", KERNEL) == winner
    assert git_repo.read(KERNEL) == winner
    assert git_repo.status() == []
    assert git_repo.changed_files() == [KERNEL]
    message = git_repo.message()
    assert message.splitlines()[0] == "Vectorize loads"
    assert message.rstrip("\n").splitlines()[-1] == ATTRIBUTION
    assert message.count(ATTRIBUTION) == 1
    assert session.checkpoints == [record] and session.base_revision == record.revision
    assert format_commit_event(record) == (
        f"commit status=committed vcs=git revision={record.revision} repository={git_repo.root.resolve()} "
        f'file={KERNEL} subject="Vectorize loads"'
    )


def test_dirty_target_commits_head_plus_agent_delta_and_keeps_user_edits_uncommitted(
    git_repo: GitRepo,
) -> None:
    committed = kernel_text()
    wip = edit_line(committed, 2, "x2 = load(ptr + 2)  # user's uncommitted edit")
    session = start(git_repo, committed, wip)
    assert session.dirty_at_start

    winner = edit_line(wip, 20, "x20 = load(ptr + 20)  # agent")
    plan, record = promote(session, winner)

    expected_commit = edit_line(committed, 20, "x20 = load(ptr + 20)  # agent")
    assert plan.merged_source == expected_commit and plan.needs_revalidation
    assert record.status == "committed"
    assert git_repo.show("HEAD", KERNEL) == expected_commit
    assert (
        git_repo.staged(KERNEL) == expected_commit
    )  # the index entry moved with HEAD: no fake staged revert
    assert git_repo.read(KERNEL) == winner  # user's edit + agent's change
    assert git_repo.status() == [f" M {KERNEL}"]
    unstaged = git_repo.git("diff", "--", KERNEL)
    assert "+x2 = load(ptr + 2)  # user's uncommitted edit" in unstaged and "agent" not in unstaged


def test_overlapping_edits_are_refused_and_nothing_changes(git_repo: GitRepo) -> None:
    committed = kernel_text()
    wip = edit_line(committed, 5, "x5 = load(ptr + 5) * 2  # user")
    session = start(git_repo, committed, wip)
    head, index = git_repo.head(), git_repo.index()

    plan = session.plan_checkpoint(edit_line(wip, 5, "x5 = tl.load(ptr + 5) * 2  # agent"))
    record = session.apply_checkpoint(plan, "Tune loads", "", "r001-c000")

    assert not plan.ok and plan.merged_source is None and "overlaps uncommitted edits" in plan.reason
    assert record.status == "failed" and record.reason == plan.reason and record.revision is None
    assert git_repo.head() == head and git_repo.index() == index and git_repo.read(KERNEL) == wip
    assert session.checkpoints == []
    event = format_commit_event(record)
    assert (
        event.startswith("commit status=failed vcs=git revision=none ") and 'reason="winner overlaps' in event
    )


def test_unrelated_staged_modified_and_untracked_files_stay_as_they_were(git_repo: GitRepo) -> None:
    git_repo.write("staged.txt", b"one\n")
    git_repo.write("modified.txt", b"one\n")
    git_repo.write("both.txt", b"one\n")
    git_repo.write("deleted.txt", b"gone soon\n")
    committed = kernel_text()
    git_repo.write(KERNEL, committed)
    git_repo.commit_all("initial")
    git_repo.write("staged.txt", b"staged change\n")
    git_repo.git("add", "staged.txt")
    git_repo.write("modified.txt", b"unstaged change\n")
    git_repo.write("both.txt", b"staged part\n")
    git_repo.git("add", "both.txt")
    git_repo.write("both.txt", b"staged part\nunstaged part\n")
    git_repo.write("new-staged.txt", b"new file\n")
    git_repo.git("add", "new-staged.txt")
    (git_repo.root / "deleted.txt").unlink()
    git_repo.write("untracked.txt", b"scratch\n")
    others = ["staged.txt", "modified.txt", "both.txt", "new-staged.txt", "untracked.txt"]
    files_before = {name: git_repo.read(name) for name in others}
    status_before = [line for line in git_repo.status() if KERNEL not in line]
    index_before = [line for line in git_repo.index().splitlines() if KERNEL not in line]
    assert status_before == [
        "MM both.txt",
        " D deleted.txt",
        " M modified.txt",
        "A  new-staged.txt",
        "M  staged.txt",
        "?? untracked.txt",
    ]

    kernel = git_repo.root / KERNEL
    session = CommitSession.prepare(detect_repository(kernel, "git"), kernel, committed)
    _, record = promote(session, edit_line(committed, 0, "x0 = 0  # agent"))

    assert record.status == "committed"
    assert git_repo.changed_files() == [KERNEL]
    assert {name: git_repo.read(name) for name in others} == files_before
    assert not (git_repo.root / "deleted.txt").exists()
    assert git_repo.status() == status_before
    assert [line for line in git_repo.index().splitlines() if KERNEL not in line] == index_before


def test_head_moved_before_planning_refuses(git_repo: GitRepo) -> None:
    base = kernel_text()
    session = start(git_repo, base)
    git_repo.write("other.txt", b"user work\n")
    moved = git_repo.commit_all("user commits during the run")

    plan = session.plan_checkpoint(edit_line(base, 3, "x3 = 3"))

    assert not plan.ok and "HEAD moved" in plan.reason
    assert git_repo.head() == moved and git_repo.read(KERNEL) == base


def test_head_moved_between_plan_and_apply_refuses(git_repo: GitRepo) -> None:
    base = kernel_text()
    session = start(git_repo, base)
    plan = session.plan_checkpoint(edit_line(base, 3, "x3 = 3"))
    assert plan.ok
    git_repo.write("other.txt", b"user work\n")
    moved = git_repo.commit_all("user commits during the run")

    record = session.apply_checkpoint(plan, "s", "b", "r001-c000")

    assert record.status == "failed" and "HEAD moved" in record.reason
    assert git_repo.head() == moved and git_repo.read(KERNEL) == base and git_repo.status() == []
    assert session.checkpoints == []


def test_branch_switch_counts_as_head_moved(git_repo: GitRepo) -> None:
    base = kernel_text()
    session = start(git_repo, base)
    git_repo.git("checkout", "-q", "-b", "elsewhere")

    plan = session.plan_checkpoint(edit_line(base, 3, "x3 = 3"))

    assert not plan.ok and "HEAD moved" in plan.reason and "elsewhere" in plan.reason


def test_kernel_changed_on_disk_is_never_overwritten(git_repo: GitRepo) -> None:
    base = kernel_text()
    session = start(git_repo, base)
    early_plan = session.plan_checkpoint(edit_line(base, 3, "x3 = 3"))
    users_edit = edit_line(base, 25, "x25 = 25  # user edits during the run")
    git_repo.write(KERNEL, users_edit)
    head = git_repo.head()

    plan = session.plan_checkpoint(edit_line(base, 3, "x3 = 3"))
    record = session.apply_checkpoint(early_plan, "s", "b", "r001-c000")

    assert not plan.ok and "changed on disk since the run started" in plan.reason
    assert record.status == "failed" and "changed on disk" in record.reason
    assert git_repo.read(KERNEL) == users_edit and git_repo.head() == head


def test_two_promotions_then_rollback(git_repo: GitRepo) -> None:
    base = kernel_text()
    session = start(git_repo, base)
    start_head, count = git_repo.head(), git_repo.commit_count()
    first = edit_line(base, 4, "x4 = 4  # promotion 1")
    second = edit_line(first, 14, "x14 = 14  # promotion 2")
    _, one = promote(session, first, "First", "r001-c000")
    plan, two = promote(session, second, "Second", "r002-c001")
    assert plan.merged_source == second

    rollback = session.commit_rollback(
        "Revert TLX agent promotions", f"Final revalidation failed.\n{ATTRIBUTION}"
    )

    assert [one.status, two.status, rollback.status] == ["committed"] * 3
    assert rollback.kind == "rollback" and rollback.base_revision == two.revision
    assert git_repo.commit_count() == count + 3
    assert git_repo.git("rev-parse", "HEAD~3").strip() == start_head
    assert [git_repo.message(f"HEAD~{n}").count(ATTRIBUTION) for n in (2, 1, 0)] == [1, 1, 0]
    assert git_repo.message().startswith("Revert TLX agent promotions\n\nFinal revalidation failed.")
    assert git_repo.show("HEAD~1", KERNEL) == second
    assert git_repo.show("HEAD", KERNEL) == base
    assert git_repo.read(KERNEL) == base and git_repo.status() == []
    assert session.checkpoints == [one, two]


def test_rollback_to_an_earlier_checkpoint_keeps_exactly_its_content(git_repo: GitRepo) -> None:
    """A later finalist failed revalidation and an earlier promotion held: one forward commit returns the file
    to what that promotion's checkpoint committed, with a trailer naming it; a reopened session adopts it."""
    base = kernel_text()
    git_repo.write(KERNEL, base)
    git_repo.commit_all("add kernel")
    session = CommitSession.prepare(detect_repository(git_repo.root / KERNEL, "auto"), git_repo.root / KERNEL, base,
                                    "run-1")
    first = edit_line(base, 4, "x4 = 4  # promotion 1")
    second = edit_line(first, 14, "x14 = 14  # promotion 2")
    promote(session, first, "First", "r001-c000")
    _, two = promote(session, second, "Second", "r002-c001")

    rollback = session.commit_rollback("Revert after r001-c000", "r002-c001 failed revalidation", to="r001-c000")

    assert (rollback.status, rollback.kind, rollback.experiment_id) == ("committed", "rollback", "r001-c000")
    assert rollback.base_revision == two.revision
    assert git_repo.show("HEAD", KERNEL) == first and git_repo.read(KERNEL) == first and git_repo.status() == []
    assert "TLX-Agent-Run: run-1 rollback:r001-c000" in git_repo.message()
    again = session.commit_rollback("Revert", "", to="r001-c000")
    assert again.status == "skipped" and "already equals its content at the checkpoint of r001-c000" in again.reason
    assert session.commit_rollback("Revert", "", to="r009-c000").status == "failed"

    reopened = CommitSession.reopen(detect_repository(git_repo.root / KERNEL, "auto"), git_repo.root / KERNEL, base,
                                    session.start_head, "run-1", {"r001-c000": first, "r002-c001": second})
    assert [(r.kind, r.experiment_id) for r in reopened.adopted] == [
        ("promotion", "r001-c000"), ("promotion", "r002-c001"), ("rollback", "r001-c000")]
    assert reopened.commit_rollback("Revert", "", to="r001-c000").status == "skipped"
    assert reopened.commit_rollback("Revert", "").status == "committed"
    assert git_repo.show("HEAD", KERNEL) == base


def test_rollback_on_dirty_target_restores_start_content_with_user_edits(git_repo: GitRepo) -> None:
    committed = kernel_text()
    wip = edit_line(committed, 1, "x1 = 1  # user")
    session = start(git_repo, committed, wip)
    promote(session, edit_line(wip, 12, "x12 = 12  # agent"))

    rollback = session.commit_rollback("", "")

    assert rollback.status == "committed"
    assert rollback.subject == "Revert TLX agent promotions after failed final revalidation"
    assert git_repo.show("HEAD", KERNEL) == committed
    assert git_repo.read(KERNEL) == wip
    assert git_repo.staged(KERNEL) == committed and git_repo.status() == [f" M {KERNEL}"]


def test_rollback_without_checkpoint_is_skipped(git_repo: GitRepo) -> None:
    session = start(git_repo, kernel_text())
    count = git_repo.commit_count()

    record = session.commit_rollback("Revert", "")

    assert record.status == "skipped" and record.kind == "rollback" and record.reason
    assert git_repo.commit_count() == count


def test_detached_head_gets_the_commit_and_no_branch_moves(git_repo: GitRepo) -> None:
    base = kernel_text()
    git_repo.write(KERNEL, base)
    main = git_repo.commit_all("add kernel")
    git_repo.git("checkout", "-q", "--detach")
    kernel = git_repo.root / KERNEL
    session = CommitSession.prepare(detect_repository(kernel, "auto"), kernel, base)

    _, record = promote(session, edit_line(base, 7, "x7 = 7"))

    assert record.status == "committed"
    assert git_repo.head() == record.revision
    assert git_repo.git("symbolic-ref", "-q", "HEAD", check=False) == ""  # still detached
    assert git_repo.git("rev-parse", "main").strip() == main


def test_user_staged_kernel_edit_stays_staged(git_repo: GitRepo) -> None:
    committed = kernel_text()
    wip = edit_line(committed, 1, "x1 = 1  # user, staged")
    session = start(git_repo, committed, wip)
    git_repo.git("add", KERNEL)

    winner = edit_line(wip, 20, "x20 = 20  # agent")
    _, record = promote(session, winner)

    assert record.status == "committed" and record.reason == ""
    assert git_repo.show("HEAD", KERNEL) == edit_line(committed, 20, "x20 = 20  # agent")
    assert git_repo.staged(KERNEL) == winner
    assert git_repo.status() == [f"M  {KERNEL}"]


def test_executable_bit_is_kept(git_repo: GitRepo) -> None:
    base = kernel_text()
    path = git_repo.write(KERNEL, base)
    path.chmod(0o755)
    git_repo.commit_all("executable kernel")
    session = CommitSession.prepare(detect_repository(path, "auto"), path, base)

    promote(session, edit_line(base, 2, "x2 = 2"))

    assert git_repo.git("ls-tree", "HEAD", "--", KERNEL).startswith("100755 blob ")
    assert os.access(path, os.X_OK) and git_repo.status() == []


def test_commit_uses_the_repository_identity(git_repo: GitRepo) -> None:
    base = kernel_text()
    promote(start(git_repo, base), edit_line(base, 2, "x2 = 2"))

    assert git_repo.git("log", "-1", "--format=%an <%ae>|%cn <%ce>") == (
        f"{TEST_USER_NAME} <{TEST_USER_EMAIL}>|{TEST_USER_NAME} <{TEST_USER_EMAIL}>\n"
    )


def test_commit_without_any_identity_uses_the_agent_identity(make_git_repo) -> None:
    repo = make_git_repo(identity=False)
    base = kernel_text()
    promote(start(repo, base), edit_line(base, 2, "x2 = 2"))

    assert repo.git("log", "-1", "--format=%an <%ae>") == "tlx-agent <tlx-agent@localhost>\n"
    assert repo.git("config", "--get", "user.name", check=False) == ""  # the user's config is not modified


def test_a_held_index_lock_is_waited_out(git_repo: GitRepo) -> None:
    committed = kernel_text()
    wip = edit_line(committed, 1, "x1 = 1  # user")
    session = start(git_repo, committed, wip)
    lock = git_repo.root / ".git" / "index.lock"
    lock.write_bytes(b"")
    releaser = threading.Timer(0.3, lock.unlink)
    releaser.start()
    try:
        _, record = promote(session, edit_line(wip, 20, "x20 = 20"))
    finally:
        releaser.join()

    assert record.status == "committed" and record.reason == ""
    assert git_repo.staged(KERNEL) == git_repo.show("HEAD", KERNEL)


def test_a_stale_plan_is_not_applied(git_repo: GitRepo) -> None:
    base = kernel_text()
    session = start(git_repo, base)
    first = session.plan_checkpoint(edit_line(base, 1, "x1 = 1"))
    promote(session, edit_line(base, 2, "x2 = 2"))
    head = git_repo.head()

    record = session.apply_checkpoint(first, "s", "b", "r001-c001")

    assert record.status == "failed" and "earlier checkpoint" in record.reason and git_repo.head() == head


def test_a_winner_that_adds_nothing_to_the_commit_is_skipped(git_repo: GitRepo) -> None:
    committed = kernel_text()
    wip = edit_line(committed, 8, "x8 = 8  # user")
    session = start(git_repo, committed, wip)
    count = git_repo.commit_count()

    plan = session.plan_checkpoint(committed)  # the "winner" only undoes the user's edit
    record = session.apply_checkpoint(plan, "s", "b", "r001-c000")

    assert not plan.ok and plan.nothing_to_commit and "adds nothing" in plan.reason
    assert record.status == "skipped" and git_repo.commit_count() == count and git_repo.read(KERNEL) == wip


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("untracked", "not tracked at HEAD"),
        ("no-commit", "no commit yet"),
        ("conflict", "in progress"),
        ("changed", "changed since it was read"),
    ],
)
def test_prepare_refuses_with_a_reason(git_repo: GitRepo, setup: str, expected: str) -> None:
    kernel = git_repo.root / KERNEL
    source = kernel_text()
    if setup != "no-commit":
        git_repo.write("README", b"readme\n")
        git_repo.commit_all("readme")
    git_repo.write(KERNEL, source)
    if setup == "conflict":
        git_repo.commit_all("kernel")
        git_repo.git("checkout", "-q", "-b", "side")
        git_repo.write(KERNEL, edit_line(source, 0, "side"))
        git_repo.commit_all("side")
        git_repo.git("checkout", "-q", "main")
        git_repo.write(KERNEL, edit_line(source, 0, "main"))
        git_repo.commit_all("main")
        git_repo.git("merge", "-q", "side", check=False)
        source = git_repo.read(KERNEL)
    if setup == "changed":
        git_repo.commit_all("kernel")

    with pytest.raises(VcsPrepareError, match=expected):
        CommitSession.prepare(
            Repository("git", git_repo.root.resolve()), kernel, source + b"#" * (setup == "changed")
        )


def test_symlinked_directory_to_the_kernel_is_resolved(git_repo: GitRepo, tmp_path: Path) -> None:
    base = kernel_text()
    git_repo.write(KERNEL, base)
    git_repo.commit_all("kernel")
    link = tmp_path / "link"
    link.symlink_to(git_repo.root / "src")

    session = CommitSession.prepare(detect_repository(link / "kernel.py", "auto"), link / "kernel.py", base)
    _, record = promote(session, edit_line(base, 2, "x2 = 2"))

    assert session.relpath == KERNEL and record.status == "committed"


def test_eol_conversion_does_not_make_a_clean_kernel_look_dirty(git_repo: GitRepo) -> None:
    git_repo.git("config", "core.autocrlf", "true")
    base = kernel_text()
    git_repo.write(KERNEL, base)
    git_repo.commit_all("kernel with LF in the repository")
    (git_repo.root / KERNEL).unlink()
    git_repo.git("checkout", "--", KERNEL)
    start_source = git_repo.read(KERNEL)
    assert start_source == base.replace(b"\n", b"\r\n")
    session = CommitSession.prepare(Repository("git", git_repo.root), git_repo.root / KERNEL, start_source)
    assert not session.dirty_at_start

    winner = edit_line(base, 3, "x3 = 3").replace(b"\n", b"\r\n")
    plan, record = promote(session, winner)

    assert not plan.needs_revalidation and record.status == "committed"
    assert git_repo.show("HEAD", KERNEL) == edit_line(base, 3, "x3 = 3")
    assert git_repo.read(KERNEL) == winner and git_repo.status() == []
