"""The invalid and incorrect kernels the preflight's negative tests evaluate."""

from __future__ import annotations

import ast
import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from orchestrator.preflight.negative_variants import (
    NegativeVariantError,
    incorrect_variant,
    invalid_variant,
    public_entry_functions,
)
from orchestrator.python_template import read_template
from tests.conftest import SYNTHETIC

_counter = itertools.count()


def _load(source: str, tmp_path: Path) -> ModuleType:
    name = f"negative_variant_{next(_counter)}"
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_invalid_variant_keeps_the_kernel_and_does_not_parse() -> None:
    source = (SYNTHETIC / "kernel.py").read_text()
    variant = invalid_variant(source)
    assert variant.startswith(source.rstrip("\n"))
    with pytest.raises(SyntaxError):
        ast.parse(variant)


def test_public_entry_functions_skip_private_names_and_triton_kernels() -> None:
    tree = ast.parse("import triton\n@triton.jit\ndef k(x): pass\n@triton.autotune(configs=[], key=[])\n"
                     "@triton.jit\ndef k2(x): pass\ndef _helper(x): pass\ndef entry(x): pass\nclass C: pass\n")
    assert public_entry_functions(tree) == ["entry"]


def test_python_outputs_are_perturbed_and_the_source_is_kept(tmp_path: Path) -> None:
    source = (SYNTHETIC / "kernel.py").read_text()
    variant, how = incorrect_variant(source)
    assert variant.startswith(source.rstrip("\n")) and "scale" in how
    module = _load(variant, tmp_path)
    assert module.scale([1.0, -2.0]) == [1.0 * 2 + 0.02 + 1.0, -4.0 + 0.04 + 1.0]
    assert module.LATENCY_US == 100.0 and module.TLX_AGENT_NEGATIVE_TEST_WRAPPED == ["scale"]


def test_tensor_outputs_and_output_arguments_are_perturbed_once(tmp_path: Path) -> None:
    source = '''
import torch


def add(x, y):
    return x + y


def add_into(x, y, out):
    out.copy_(x + y)


def positive(x):
    return is_positive(x)


def is_positive(x):
    return x > 0


def counts(x):
    return (x > 0).to(torch.int32), len(x)
'''
    module = _load(incorrect_variant(source)[0], tmp_path)
    x, y = torch.tensor([1.0, -3.0]), torch.tensor([0.5, 0.5])
    # float output: + 1e-2 * max|out| + 1.0 = + 1.025
    assert torch.allclose(module.add(x, y), torch.tensor([1.5 + 1.025, -2.5 + 1.025]))
    out = torch.full((2,), float("nan"))
    x_before, y_before = x.clone(), y.clone()
    assert module.add_into(x, y, out) is None
    assert torch.allclose(out, torch.tensor([2.525, -1.475]))
    assert torch.equal(x, x_before) and torch.equal(y, y_before), "inputs the call did not write stay untouched"
    # a public helper called by a public entry point is perturbed once, not twice (two negations cancel)
    assert module.positive(x).tolist() == [False, True]
    assert module.is_positive(x).tolist() == [False, True]
    ints, length = module.counts(x)
    assert ints.tolist() == [2, 1] and length == 3


def test_a_kernel_without_python_functions_gets_its_stores_shifted() -> None:
    source = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef copy_kernel(src, dst, n):\n"
              "    offsets = tl.arange(0, 16)\n    tl.store(dst + offsets, tl.load(src + offsets))\n")
    variant, how = incorrect_variant(source)
    assert how == "1 tl.store value(s) shifted by +1"
    assert "tl.store(dst + offsets, tl.load(src + offsets) + 1)" in variant
    with pytest.raises(NegativeVariantError, match="no public Python function to wrap and no tl.store"):
        incorrect_variant("import triton\n\n\n@triton.jit\ndef noop(x):\n    pass\n")
    with pytest.raises(NegativeVariantError, match="does not parse"):
        incorrect_variant("def broken(:\n")


def test_the_perturbing_block_is_a_template_file_that_works_alone(tmp_path: Path) -> None:
    """orchestrator/preflight/templates/perturb_outputs.py imports on its own and wraps nothing there."""
    module = _load(read_template("orchestrator.preflight", "perturb_outputs.py"), tmp_path)
    assert module.TLX_AGENT_NEGATIVE_TEST_WRAPPED == []
    assert not hasattr(module, "_tlx_agent_make_outputs_wrong")
    variant, _how = incorrect_variant("def f(x):\n    return x\n")
    assert "\n\n\n# ---- tlx-agent validate: negative test." in variant and "# template:" not in variant
    assert variant.rstrip().endswith("_tlx_agent_make_outputs_wrong(['f'])\ndel _tlx_agent_make_outputs_wrong")
