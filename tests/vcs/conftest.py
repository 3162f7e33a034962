"""Real temporary git and Mercurial repositories, isolated from the machine's own VCS configuration."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

TEST_USER_NAME = "Test User"
TEST_USER_EMAIL = "test@example.com"
IDENTITY_VARIABLES = (
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "EMAIL",
    "HGUSER",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
)


def kernel_text(lines: int = 30, tag: str = "base") -> bytes:
    """A kernel-like file whose lines are all different, so edits are easy to place."""
    return "".join(f"x{i} = load(ptr + {i})  # {tag}\n" for i in range(lines)).encode()


def edit_line(source: bytes, index: int, text: str) -> bytes:
    lines = source.decode().splitlines(keepends=True)
    lines[index] = text + "\n"
    return "".join(lines).encode()


@pytest.fixture(autouse=True)
def isolated_vcs_environment(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """No global or system git/hg configuration and no identity from the environment leaks into a test."""
    home = tmp_path_factory.mktemp("home")
    (home / ".hgrc").write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HGRCPATH", str(home / ".hgrc"))
    for name in IDENTITY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return home


class GitRepo:
    """A real git work tree plus the observations tests assert on."""

    def __init__(self, root: Path, *, identity: bool = True) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        if identity:
            self.git("config", "user.name", TEST_USER_NAME)
            self.git("config", "user.email", TEST_USER_EMAIL)

    def git(self, *args: str, check: bool = True) -> str:
        return self.git_bytes(*args, check=check).decode()

    def git_bytes(self, *args: str, check: bool = True) -> bytes:
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": TEST_USER_NAME,
            "GIT_AUTHOR_EMAIL": TEST_USER_EMAIL,
            "GIT_COMMITTER_NAME": TEST_USER_NAME,
            "GIT_COMMITTER_EMAIL": TEST_USER_EMAIL,
        }
        result = subprocess.run(["git", *args], cwd=self.root, env=env, capture_output=True, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {result.stderr.decode()}")
        return result.stdout

    def write(self, relpath: str, data: bytes) -> Path:
        path = self.root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    def read(self, relpath: str) -> bytes:
        return (self.root / relpath).read_bytes()

    def commit_all(self, message: str = "user commit") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def show(self, revision: str, relpath: str) -> bytes:
        return self.git_bytes("show", f"{revision}:{relpath}")

    def staged(self, relpath: str) -> bytes:
        return self.git_bytes("show", f":{relpath}")

    def status(self) -> list[str]:
        return self.git("status", "--porcelain=v1", "--untracked-files=all").splitlines()

    def index(self) -> str:
        return self.git("ls-files", "-s")

    def commit_count(self) -> int:
        return int(self.git("rev-list", "--count", "HEAD"))

    def message(self, revision: str = "HEAD") -> str:
        return self.git("log", "-1", "--format=%B", revision)

    def changed_files(self, revision: str = "HEAD") -> list[str]:
        return self.git("diff-tree", "--no-commit-id", "--name-only", "-r", revision).split()


class HgRepo:
    """A real Mercurial working copy driven through the hg from the venv."""

    def __init__(self, root: Path, hg: Path, *, username: bool = False) -> None:
        self.root = root
        self.hg_path = hg
        root.mkdir(parents=True, exist_ok=True)
        self.hg("init")
        if username:
            (root / ".hg" / "hgrc").write_text(f"[ui]\nusername = {TEST_USER_NAME} <{TEST_USER_EMAIL}>\n")

    def hg(self, *args: str, check: bool = True) -> str:
        return self.hg_bytes(*args, check=check).decode()

    def hg_bytes(self, *args: str, check: bool = True) -> bytes:
        env = {**os.environ, "HGPLAIN": "1"}
        result = subprocess.run(
            [str(self.hg_path), *args], cwd=self.root, env=env, capture_output=True, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(f"hg {' '.join(args)} failed: {result.stderr.decode()}")
        return result.stdout

    def write(self, relpath: str, data: bytes) -> Path:
        path = self.root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    def read(self, relpath: str) -> bytes:
        return (self.root / relpath).read_bytes()

    def commit_all(self, message: str = "user commit") -> str:
        self.hg("commit", "-A", "-u", f"{TEST_USER_NAME} <{TEST_USER_EMAIL}>", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.hg("log", "-r", ".", "-T", "{node}")

    def cat(self, revision: str, relpath: str) -> bytes:
        return self.hg_bytes("cat", "-r", revision, relpath)

    def status(self) -> list[str]:
        return self.hg("status").splitlines()

    def commit_count(self) -> int:
        return len(self.hg("log", "-T", "{node}\n").split())

    def description(self, revision: str = ".") -> str:
        return self.hg("log", "-r", revision, "-T", "{desc}")

    def commit_facts(self, revision: str = ".") -> dict[str, str]:
        """node, parent, files, author and description of one commit, from a single hg call."""
        keys = ("node", "parent", "files", "author", "description")
        template = "{node}\\0{p1.node}\\0{files}\\0{author}\\0{desc}"
        return dict(zip(keys, self.hg("log", "-r", revision, "-T", template).split("\0"), strict=True))


def find_test_hg() -> Path | None:
    beside = Path(sys.executable).parent / "hg"
    if beside.is_file():
        return beside
    found = shutil.which("hg")
    return Path(found) if found else None


@pytest.fixture
def make_git_repo(tmp_path: Path) -> Callable[..., GitRepo]:
    def make(name: str = "repo", *, identity: bool = True) -> GitRepo:
        return GitRepo(tmp_path / name, identity=identity)

    return make


@pytest.fixture
def git_repo(make_git_repo: Callable[..., GitRepo]) -> GitRepo:
    return make_git_repo()


@pytest.fixture
def hg_executable() -> Path:
    hg = find_test_hg()
    if hg is None:
        pytest.skip("Mercurial's hg was found neither next to the Python interpreter nor on PATH")
    return hg


@pytest.fixture
def make_hg_repo(tmp_path: Path, hg_executable: Path) -> Callable[..., HgRepo]:
    def make(name: str = "hgrepo", *, username: bool = False) -> HgRepo:
        return HgRepo(tmp_path / name, hg_executable, username=username)

    return make


@pytest.fixture
def hg_repo(make_hg_repo: Callable[..., HgRepo]) -> HgRepo:
    return make_hg_repo()
