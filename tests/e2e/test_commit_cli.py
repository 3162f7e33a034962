"""The commit step through the real CLI: a git checkout gets one checkpoint commit touching only the kernel."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import SYNTHETIC, run_cli, synthetic_args, synthetic_kernel, write_candidates

pytestmark = pytest.mark.timeout(180)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.name", "Kernel Engineer")
    git(repo, "config", "user.email", "engineer@example.com")
    (repo / "kernel.py").write_text((SYNTHETIC / "kernel.py").read_text())
    (repo / "notes.txt").write_text("committed notes\n")
    git(repo, "add", "kernel.py", "notes.txt")
    git(repo, "commit", "-q", "-m", "baseline")
    return repo


def _args(out: Path, replay: Path, kernel: Path) -> list:
    args = synthetic_args(out, "--provider", "replay", "--replay-dir", replay, kernel=kernel)
    args.remove("--no-commit-winner")
    return args


def test_winner_is_committed_with_only_the_kernel_and_attribution(tmp_path):
    repo = make_repo(tmp_path)
    (repo / "notes.txt").write_text("uncommitted user edit\n")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "untracked.txt").write_text("untracked\n")
    status_before = git(repo, "status", "--porcelain")
    replay = write_candidates(tmp_path / "cands", [synthetic_kernel(50.0)],
                              [{"change": "halve the declared latency"}])
    run = run_cli(*_args(tmp_path / "out", replay, repo / "kernel.py"))
    assert run.returncode == 0, run.stderr
    log = git(repo, "log", "--format=%s%n%b%n--END--", "-1")
    assert log.startswith("halve the declared latency")
    body_lines = [line for line in log.split("--END--")[0].strip().splitlines()]
    assert body_lines[-1] == "TLX agent authored"
    assert log.count("TLX agent authored") == 1
    assert "Weighted aggregate speedup" in log
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["kernel.py"]
    assert git(repo, "show", "HEAD:kernel.py") == synthetic_kernel(50.0)
    assert git(repo, "status", "--porcelain") == status_before  # staged, modified, untracked: as they were
    assert (repo / "notes.txt").read_text() == "uncommitted user edit\n"
    assert "commit status=committed vcs=git" in run.stderr
    assert run.result["commits"][0]["status"] == "committed"
    assert (tmp_path / "out" / "promotion_commits.json").exists() and (tmp_path / "out" / "auto_commit.json").exists()


def test_no_commit_winner_commits_nothing(tmp_path):
    repo = make_repo(tmp_path)
    head = git(repo, "rev-parse", "HEAD")
    replay = write_candidates(tmp_path / "cands", [synthetic_kernel(50.0)])
    run = run_cli(*_args(tmp_path / "out", replay, repo / "kernel.py"), "--no-commit-winner")
    assert run.returncode == 0, run.stderr
    assert git(repo, "rev-parse", "HEAD") == head
    assert (repo / "kernel.py").read_text() == (SYNTHETIC / "kernel.py").read_text()


def test_kernel_outside_any_repository_keeps_artifacts(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "kernel.py").write_text((SYNTHETIC / "kernel.py").read_text())
    replay = write_candidates(tmp_path / "cands", [synthetic_kernel(50.0)])
    run = run_cli(*_args(tmp_path / "out", replay, plain / "kernel.py"), env={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert run.returncode == 0, run.stderr
    assert "is in no git or Mercurial repository" in run.stderr
    assert (tmp_path / "out" / "best_kernel.py").read_text() == synthetic_kernel(50.0)
    assert (plain / "kernel.py").read_text() == (SYNTHETIC / "kernel.py").read_text()


def test_untracked_kernel_exits_3_before_optimizing(tmp_path):
    repo = make_repo(tmp_path)
    (repo / "other.py").write_text((SYNTHETIC / "kernel.py").read_text())
    replay = write_candidates(tmp_path / "cands", [synthetic_kernel(50.0)])
    run = run_cli(*_args(tmp_path / "out", replay, repo / "other.py"))
    assert run.returncode == 3, run.stderr
    assert "cannot prepare commits" in run.stderr
    assert not (tmp_path / "out" / "experiments" / "r001-c000").exists()
