"""Property: over random repository states, a checkpoint changes no byte of the user's unrelated work.

Each example builds a real git repository with other files in every state (clean, modified, staged, staged
and modified, deleted, untracked), a kernel with or without uncommitted (possibly staged) user edits, and an
agent winner whose edits may overlap them. The commit is made exactly when no agent edit lands on or next to a
user edit, and refused otherwise; either way the other files' bytes, index entries and status stay exactly as
they were, and a made commit changes only the kernel, by the agent's delta.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.vcs import CommitSession, Repository
from tests.vcs.conftest import GitRepo

KERNEL = "kernel.py"
KERNEL_LINES = 16
OTHER_STATES = ("clean", "modified", "staged", "staged+modified", "deleted", "untracked")

other_files = st.dictionaries(
    keys=st.sampled_from(["a.txt", "b.bin", "dir/c.py", "dir/d e.txt"]),
    values=st.tuples(st.sampled_from(OTHER_STATES), st.binary(min_size=0, max_size=40)),
    max_size=4,
)
line_edits = st.sets(st.integers(0, KERNEL_LINES - 1), max_size=4)


def kernel_lines(user: set[int] = frozenset(), agent: set[int] = frozenset()) -> bytes:
    lines = [f"v{i} = tl.load(p + {i})\n" for i in range(KERNEL_LINES)]
    for i in user:
        lines[i] = f"v{i} = tl.load(p + {i}) * user\n"
    for i in agent:
        lines[i] = lines[i].rstrip("\n") + "  # agent\n"
    return "".join(lines).encode()


def build_other_files(repo: GitRepo, files: dict[str, tuple[str, bytes]]) -> None:
    for name, (state, data) in files.items():
        if state != "untracked":
            repo.write(name, b"committed " + data)
    repo.write(KERNEL, kernel_lines())
    repo.commit_all("initial")
    for name, (state, data) in files.items():
        if state == "untracked":
            repo.write(name, data)
        elif state == "deleted":
            (repo.root / name).unlink()
        elif state in ("modified", "staged", "staged+modified"):
            repo.write(name, b"changed " + data)
            if state != "modified":
                repo.git("add", "--", name)
            if state == "staged+modified":
                repo.write(name, b"changed again " + data)


def snapshot(repo: GitRepo, names: list[str]) -> tuple[dict[str, bytes | None], list[str], list[str]]:
    files = {name: (repo.root / name).read_bytes() if (repo.root / name).exists() else None for name in names}
    index = [line for line in repo.index().splitlines() if not line.endswith(f"\t{KERNEL}")]
    status = [line for line in repo.status() if not line.endswith(f" {KERNEL}")]
    return files, index, status


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(other_files, line_edits, line_edits, st.booleans())
def test_checkpoint_never_changes_unrelated_work(
    files: dict[str, tuple[str, bytes]], user_edits: set[int], agent_edits: set[int], stage_kernel: bool
) -> None:
    agent_edits = agent_edits or {KERNEL_LINES // 2}
    with tempfile.TemporaryDirectory(prefix="tlx-vcs-property-") as scratch:
        repo = GitRepo(Path(scratch) / "repo")
        build_other_files(repo, files)
        start_source = kernel_lines(user_edits)
        kernel = repo.write(KERNEL, start_source)
        if stage_kernel:
            repo.git("add", "--", KERNEL)
        names = sorted(files)
        before = snapshot(repo, names)
        head, full_index = repo.head(), repo.index()

        session = CommitSession.prepare(Repository("git", repo.root.resolve()), kernel, start_source)
        winner = kernel_lines(user_edits, agent_edits)
        plan = session.plan_checkpoint(winner)
        record = session.apply_checkpoint(plan, "Property checkpoint", "", "r001-c000")

        assert snapshot(repo, names) == before
        # the merge is conservative: an agent edit on or next to a user-edited line is a conflict
        separated = all(abs(i - j) > 1 for i in user_edits for j in agent_edits)
        assert record.status == ("committed" if separated else "failed"), record.reason
        if separated:
            assert repo.changed_files() == [KERNEL]
            assert repo.show("HEAD", KERNEL) == kernel_lines(set(), agent_edits)
            assert repo.git("rev-parse", "HEAD^").strip() == head
            assert kernel.read_bytes() == winner
            assert repo.staged(KERNEL) == (winner if stage_kernel else kernel_lines(set(), agent_edits))
        else:
            assert "overlaps" in record.reason
            assert repo.head() == head and repo.index() == full_index and kernel.read_bytes() == start_source
