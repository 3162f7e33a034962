"""The screening worker's record of a variant's integer locals (sandbox_worker/observe.py), on real modules
loaded from files as the harness kit loads a candidate."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from sandbox_worker.observe import MAX_NAMES, LocalsObserver

WRAPPER = '''
def helper(n):
    doubled = 2 * n
    return doubled


def wrapper(x, flag=True):
    M, N = x
    BLOCK = 1 << (N - 1).bit_length()
    name = "not an int"
    for step in range(3):
        pass
    return helper(N) + M + BLOCK
'''


def load(path: Path, source: str):
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_variants_own_functions_report_one_value_per_name(tmp_path):
    module = load(tmp_path / "tlx_candidate_x.py", WRAPPER)
    with LocalsObserver(WRAPPER) as observer:
        module.wrapper((64, 1000))
    assert observer.observed() == {"wrapper.M": 64, "wrapper.N": 1000, "wrapper.BLOCK": 1024,
                                   "wrapper.step": 2, "helper.n": 1000, "helper.doubled": 2000}


def test_a_name_that_took_two_values_in_one_case_is_dropped(tmp_path):
    module = load(tmp_path / "variant.py", WRAPPER)
    with LocalsObserver(WRAPPER) as observer:
        module.wrapper((64, 1000))
        module.wrapper((64, 4096))
    assert observer.observed() == {"wrapper.M": 64, "wrapper.step": 2}


def test_another_file_with_the_same_functions_is_not_the_variant(tmp_path):
    other = load(tmp_path / "other.py", WRAPPER + "\n# another file\n")
    with LocalsObserver(WRAPPER) as observer:
        other.wrapper((64, 1000))
    assert observer.observed() == {}


def test_the_hook_is_removed_and_the_record_is_bounded(tmp_path):
    many = "def wide():\n" + "".join(f"    v{i:03d} = {i}\n" for i in range(MAX_NAMES + 10)) + "    return 0\n"
    module = load(tmp_path / "many.py", many)
    with LocalsObserver(many) as observer:
        module.wide()
    assert len(observer.observed()) == MAX_NAMES
    assert sys.getprofile() is None


def test_a_wrapper_that_is_an_autograd_functions_forward_reports_under_its_own_name(tmp_path):
    """The Triton tutorials launch from `torch.autograd.Function.forward`; discovery names that scope
    `forward`, and so does the record."""
    source = WRAPPER + '''

class Norm:
    @staticmethod
    def forward(ctx, x):
        M, N = x
        return M * N
'''
    module = load(tmp_path / "autograd_style.py", source)
    with LocalsObserver(source) as observer:
        module.Norm.forward(None, (4097, 1000))
    assert observer.observed() == {"forward.M": 4097, "forward.N": 1000}


def run_compiled_as(filename: str) -> dict[str, int]:
    """WRAPPER compiled under `filename` (any path a code object may name) and called under the observer."""
    namespace: dict = {}
    exec(compile(WRAPPER, filename, "exec"), namespace)  # noqa: S102 - the test's own source
    with LocalsObserver(WRAPPER) as observer:
        namespace["wrapper"]((64, 1000))
    return observer.observed()


@pytest.mark.timeout(30)
def test_a_code_object_naming_a_fifo_or_a_device_is_not_read(tmp_path):
    """A candidate may compile code under any file name; the observer reads only a regular file, and no
    more of it than the source's length: a FIFO without a writer (open would block) or /dev/zero (a read
    without end) is not the variant, and neither hangs the worker."""
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    assert run_compiled_as(str(fifo)) == {}
    assert run_compiled_as("/dev/zero") == {}
    longer = tmp_path / "longer.py"
    longer.write_text(WRAPPER + "\n" * 10_000)
    assert run_compiled_as(str(longer)) == {}
    same = tmp_path / "same.py"
    same.write_text(WRAPPER)
    assert run_compiled_as(str(same))["wrapper.N"] == 1000
