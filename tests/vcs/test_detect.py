"""Repository detection from the kernel path: deepest root wins, ties and mismatches name the flag to pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.vcs import Repository, VcsError, detect_repository
from tests.vcs.conftest import GitRepo, HgRepo


def test_kernel_outside_any_repository(tmp_path: Path) -> None:
    kernel = tmp_path / "loose" / "kernel.py"
    kernel.parent.mkdir()
    kernel.write_text("pass\n")

    assert detect_repository(kernel, "auto") is None
    with pytest.raises(VcsError, match="--vcs git was passed") as raised:
        detect_repository(kernel, "git")
    assert "\n" not in str(raised.value)


def test_git_repository_from_a_relative_path(git_repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    git_repo.write("sub/kernel.py", b"pass\n")
    monkeypatch.chdir(git_repo.root / "sub")

    assert detect_repository(Path("kernel.py"), "auto") == Repository("git", git_repo.root.resolve())
    assert detect_repository(Path("kernel.py"), "git") == Repository("git", git_repo.root.resolve())


def test_deepest_root_wins_and_equal_depth_is_ambiguous(tmp_path: Path, hg_executable: Path) -> None:
    outer_git = GitRepo(tmp_path / "outer")
    inner_hg = HgRepo(outer_git.root / "vendor", hg_executable)
    kernel = inner_hg.write("kernel.py", b"pass\n")
    outer_kernel = outer_git.write("kernel.py", b"pass\n")
    both = GitRepo(tmp_path / "both")
    HgRepo(both.root, hg_executable)
    tied_kernel = both.write("kernel.py", b"pass\n")

    assert detect_repository(kernel, "auto") == Repository("hg", inner_hg.root.resolve())
    assert detect_repository(kernel, "git") == Repository("git", outer_git.root.resolve())
    assert detect_repository(outer_kernel, "auto") == Repository("git", outer_git.root.resolve())
    with pytest.raises(VcsError, match="--vcs hg was passed"):
        detect_repository(outer_kernel, "hg")
    with pytest.raises(VcsError, match="ambiguous VCS repository.*pass --vcs git or --vcs hg"):
        detect_repository(tied_kernel, "auto")
    assert detect_repository(tied_kernel, "hg") == Repository("hg", both.root.resolve())


def test_unknown_vcs_names_the_choices(git_repo: GitRepo) -> None:
    with pytest.raises(VcsError, match="--vcs auto, --vcs git or --vcs hg"):
        detect_repository(git_repo.write("kernel.py", b"pass\n"), "svn")  # type: ignore[arg-type]
