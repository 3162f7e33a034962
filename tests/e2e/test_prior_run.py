"""--prior-run: earlier source hashes dedup new proposals; the prior directory is never written."""

from __future__ import annotations

import hashlib

import pytest

from tests.conftest import run_cli, synthetic_args, synthetic_kernel, write_candidates

pytestmark = pytest.mark.timeout(180)


def _tree_digest(root):
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return digest.hexdigest()


def test_prior_run_sources_are_duplicates_and_prior_dir_is_untouched(tmp_path):
    faster = synthetic_kernel(50.0)
    first_out, second_out = tmp_path / "first", tmp_path / "second"
    first = run_cli(*synthetic_args(first_out, "--provider", "replay", "--replay-dir",
                                    write_candidates(tmp_path / "a", [faster])))
    assert first.returncode == 0, first.stderr
    before = _tree_digest(first_out)
    reworded = faster.replace("LATENCY_US = 50.0", "LATENCY_US = 50.0  # same code, new comment")
    second = run_cli(*synthetic_args(second_out, "--provider", "replay", "--replay-dir",
                                     write_candidates(tmp_path / "b", [reworded, synthetic_kernel(40.0)]),
                                     "--prior-run", first_out))
    assert second.returncode == 0, second.stderr
    assert "prior-run path=" in second.stderr
    assert second.decisions()["r001-c000"] == "duplicate"
    assert "a prior run" in second.experiment("r001-c000")["decision"]["reason"]
    assert second.decisions()["r001-c001"] == "promoted"  # the prior winner is never adopted: it was re-earned
    assert _tree_digest(first_out) == before


def test_invalid_prior_run_is_one_clear_error(tmp_path):
    run = run_cli(*synthetic_args(tmp_path / "out", "--provider", "replay", "--replay-dir",
                                  write_candidates(tmp_path / "a", [synthetic_kernel(50.0)]),
                                  "--prior-run", tmp_path / "missing"))
    assert run.returncode == 1
    assert "--prior-run" in run.stderr and "Traceback" not in run.stderr
