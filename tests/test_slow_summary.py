"""The session summary counts the `slow` tests that ran and their time (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT

TESTS = '''
import time

import pytest


@pytest.mark.slow
def test_slow_one():
    time.sleep(0.3)


@pytest.mark.slow
def test_slow_two():
    time.sleep(0.3)


@pytest.mark.slow
def test_slow_skipped():
    pytest.skip("not run, not counted")


def test_fast():
    pass
'''


@pytest.mark.timeout(60)
def test_summary_counts_the_slow_tests_that_ran_and_their_time(tmp_path):
    (tmp_path / "test_sample.py").write_text(TESTS)
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.conftest", "-o", "markers=slow: slow",
         "--rootdir", str(tmp_path), "-q", str(tmp_path / "test_sample.py")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert completed.returncode == 0, completed.stdout + completed.stderr
    match = re.search(r"slow tests: (\d+) ran, ([\d.]+)s in all", completed.stdout)
    assert match, completed.stdout
    assert int(match[1]) == 2  # the skipped one and the unmarked one are not counted
    assert 0.6 <= float(match[2]) < 5.0
