"""The uid-65534 /proc test of test_layers.py, run in a fresh clone as a new user gets one.

The clone of this repository's committed HEAD sits under a `mktemp -d` directory: as created (0700, like
/root) and opened to others (0755). What the test must do there is worked out here from the directories'
mode bits, not from its own guard (which asks uid 65534 itself, through the kernel): without root or a system
python3 it skips for that; when a directory above the clone or its temp dir is closed to uid 65534 it skips
naming that directory; otherwise it passes.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
TEST = "tests/isolation/test_layers.py::test_a_non_root_worker_may_write_proc_so_children_can_use_cuda"
NEEDS_ROOT = "needs root (to switch uid) and a system python3 that uid 65534 can run"


def mode_allows_65534(path: Path, owner: int, group: int, other: int) -> bool:
    """POSIX mode bits as they apply to uid/gid 65534 (no ACL is set on these paths)."""
    status = path.stat()
    if status.st_uid == NOBODY:
        return bool(status.st_mode & owner)
    return bool(status.st_mode & (group if status.st_gid == NOBODY else other))


def first_closed_directory(path: Path) -> Path | None:
    """The first directory above `path`, from /, that uid 65534 may not search."""
    closed = (d for d in reversed(path.parents) if not mode_allows_65534(d, stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH))
    return next(closed, None)


def expected_outcome(clone: Path, temp_dir: Path) -> tuple[str, str]:
    """("passed", "") or ("skipped", the reason the test must give, as a glob) for a run in `clone`."""
    if os.geteuid() != 0 or not os.access("/usr/bin/python3", os.X_OK):
        return "skipped", NEEDS_ROOT
    package = clone / "sandbox_worker" / "__init__.py"
    if closed := first_closed_directory(package):
        return "skipped", f"uid {NOBODY} cannot read the checkout at {clone}: {closed} is not traversable"
    if not mode_allows_65534(package, stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH):
        return "skipped", f"uid {NOBODY} cannot read the checkout at {clone}: {package}: Permission denied"
    if closed := first_closed_directory(temp_dir / "tlx-isolation-"):  # the test's scratch goes there
        return "skipped", (f"uid {NOBODY} cannot reach its scratch at {temp_dir}/tlx-isolation-*/scratch: "
                           f"{closed} is not traversable")
    return "passed", ""


def run_in_clone(clone: Path) -> tuple[str, str]:
    """The test's outcome in `clone` and its skip reason, run with this interpreter on the clone's packages."""
    env = {**{k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}, "PYTHONPATH": str(clone)}
    completed = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", TEST],
                               cwd=clone, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=120)
    output = completed.stdout + completed.stderr
    counts = re.search(r"^1 (passed|skipped|failed|error)\b", completed.stdout, re.MULTILINE)
    assert counts, output
    reason = re.search(r"^SKIPPED \[1\] \S+: (.*)$", completed.stdout, re.MULTILINE)
    return counts[1], (reason[1] if reason else output)


@pytest.mark.parametrize("mode", [0o700, 0o755], ids=["private", "world-readable"])
def test_a_fresh_clone_passes_or_names_the_directory_closed_to_uid_65534(mode: int) -> None:
    if not (PROJECT_ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("the project is not a git checkout here (or git is missing): nothing to clone")
    with tempfile.TemporaryDirectory() as made:  # what `mktemp -d` makes: mode 0700
        parent = Path(made)
        assert stat.S_IMODE(parent.stat().st_mode) == 0o700
        clone = parent / "checkout"
        subprocess.run(["git", "clone", "--quiet", str(PROJECT_ROOT), str(clone)], check=True, timeout=60,
                       stdin=subprocess.DEVNULL, capture_output=True)
        parent.chmod(mode)
        expected, expected_reason = expected_outcome(clone, Path(tempfile.gettempdir()))
        outcome, reason = run_in_clone(clone)
    if expected == "passed" and outcome == "skipped" and "not available on this kernel" in reason:
        pytest.skip(f"in the clone, {reason}: this kernel cannot show the test passing")
    assert outcome == expected, f"expected {expected} {expected_reason}, got:\n{reason}"
    if expected == "skipped":
        assert fnmatch.fnmatchcase(reason, expected_reason), (reason, expected_reason)
