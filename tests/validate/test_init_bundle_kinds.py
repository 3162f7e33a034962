"""init-bundle on kernels written as a user writes them (tests/validate/kernels/): the kind, shapes, scalars and
reference it infers, the guesses it reports, and (slow) validate on the starter it writes.

A starter either is a correct harness for its kernel (validate passes, and verify rejects the incorrect variant)
or validate fails on verify with a message saying what to edit. The validate runs use default settings (on the
CPU interpreter, benchmark stability is reported, not judged) plus `--no-profile`; the command init-bundle
prints is also run exactly as printed.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.bundle.entry_signature import read_entry
from orchestrator.bundle.init_bundle import render_harness
from orchestrator.bundle.starter_plan import StarterPlan, plan_starter
from protocol.bundle import load_cases_file
from tests.conftest import PROJECT_ROOT, run_cli
from tests.validate import check

pytestmark = pytest.mark.timeout(300)

KERNELS = PROJECT_ROOT / "tests" / "validate" / "kernels"
GUESSED = "[tlx-agent] init-bundle guessed "
ROWS = {"x": ["rows", "cols"], "weight": ["cols"], "bias": ["cols"]}


@dataclass(frozen=True)
class Expected:
    kernel: str
    entry: str
    kind: str
    shapes: dict[str, list[str]]
    scalars: dict[str, str]
    reference: str
    dimensions: frozenset[str]

    def __str__(self) -> str:
        return f"{self.kernel.removesuffix('.py')}.{self.entry}"


EXPECTED = [
    Expected("gemm.py", "matmul", "gemm", {"a": ["m", "k"], "b": ["k", "n"]}, {}, "matmul", frozenset("mnk")),
    Expected("layer_norm.py", "layer_norm", "norm", ROWS, {"eps": "float"}, "layer_norm", frozenset({"rows", "cols"})),
    Expected("layer_norm.py", "normalize_rows", "norm", ROWS, {"eps": "float"}, "todo", frozenset({"rows", "cols"})),
    Expected("row_sum.py", "row_sum", "reduction", {"x": ["rows", "cols"]}, {}, "row_sum", frozenset({"rows", "cols"})),
    Expected("scaled_add.py", "scaled_add", "elementwise", {"x": ["n"], "y": ["n"]}, {"alpha": "float", "n": "dim:n"},
             "kernel", frozenset({"n"})),
    Expected("bmm.py", "bmm", "bmm", {"a": ["batch", "m", "k"], "b": ["batch", "k", "n"]}, {}, "bmm",
             frozenset({"batch", "m", "n", "k"})),
    Expected("layer_norm_autograd.py", "layer_norm", "norm", ROWS, {"eps": "float"}, "layer_norm",
             frozenset({"rows", "cols"})),
]
CORRECT = [expected for expected in EXPECTED if expected.reference != "todo"]


def _init_bundle(expected: Expected, out: Path) -> tuple[dict, str]:
    made = run_cli("init-bundle", "--kernel", KERNELS / expected.kernel, "--entry", expected.entry, "--out", out)
    assert made.returncode == 0, made.stderr
    return json.loads(made.stdout), made.stderr


def _header(harness: str) -> str:
    """The comment block above the docstring, unwrapped to one line."""
    lines = []
    for line in harness.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return " ".join(lines)


@pytest.mark.parametrize("expected", EXPECTED, ids=str)
def test_init_bundle_infers_kind_shapes_scalars_and_reference(expected: Expected, tmp_path: Path) -> None:
    reply, stderr = _init_bundle(expected, tmp_path / "bundle")
    assert (reply["kind"], reply["kind_source"], reply["shapes"], reply["scalars"], reply["reference"]) == (
        expected.kind, "inferred", expected.shapes, expected.scalars, expected.reference)
    cases = load_cases_file(tmp_path / "bundle" / "cases.json")
    assert all(set(case.parameters) - {"budget_seconds"} == expected.dimensions for case in cases)
    # every guess is said three times: one stderr line each, the JSON, the comment block of harness.py
    printed = [line.removeprefix(GUESSED) for line in stderr.splitlines() if line.startswith(GUESSED)]
    assert printed == reply["guesses"]
    assert {guess.split(":")[0] for guess in printed} >= {"kind", "reference", *reply["inputs"]}
    header = _header((tmp_path / "bundle" / "harness.py").read_text())
    assert all(f"- {guess}" in header for guess in printed)


def test_the_guesses_say_where_each_inference_came_from(tmp_path: Path) -> None:
    reply, _ = _init_bundle(EXPECTED[0], tmp_path / "gemm")
    guesses = dict(guess.split(": ", 1) for guess in reply["guesses"])
    assert guesses["kind"].startswith("gemm (`matmul` in its name)")
    assert guesses["a"].startswith("a tensor of shape (m, k) (`M, K = a.shape` in matmul()")
    assert guesses["b"].startswith("a tensor of shape (k, n) (`K2, N = b.shape` in matmul()")
    assert guesses["activation"].startswith("not passed: keeps its default ''")
    reply, _ = _init_bundle(EXPECTED[1], tmp_path / "norm")
    guesses = dict(guess.split(": ", 1) for guess in reply["guesses"])
    assert guesses["eps"].startswith("a Python float drawn in [0.5, 2) for every call (passed to _layer_norm_fwd as "
                                     "eps, which the kernel uses as a value)")
    assert guesses["weight"].startswith("a tensor of shape (cols,) (passed to _layer_norm_fwd as W, which the kernel "
                                        "loads or stores through; a per-column vector")
    reply, _ = _init_bundle(EXPECTED[4], tmp_path / "add")
    guesses = dict(guess.split(": ", 1) for guess in reply["guesses"])
    assert guesses["alpha"].startswith("a Python float drawn in [0.5, 2) for every call (annotated `float`)")
    assert guesses["n"].startswith("an int, the case's n (annotated `int`; named like that dimension)")
    assert guesses["reference"].startswith("the untouched kernel, embedded in harness.py (init-bundle cannot know "
                                           "what an elementwise kernel computes)")


def _plan(source: str, entry: str, kind: str | None = None, dtype: str | None = None,
          backend: str = "cpu") -> StarterPlan:
    return plan_starter(read_entry(ast.parse(source), entry, Path("/k/kernel.py")), kind=kind, dtype=dtype,
                        backend=backend)


HEADER = "import torch\nimport triton\nimport triton.language as tl\n\n\n"
MM_KERNEL = HEADER + "@triton.jit\ndef mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K):\n    pass\n\n\n"
NORM_KERNEL = HEADER + ("@triton.jit\ndef norm_kernel(X, Y, W, B, N, eps):\n"
                        "    tl.store(Y, tl.load(X) * tl.load(W) + tl.load(B) + eps)\n\n\n")


def test_the_kind_flag_wins_and_a_rank_it_contradicts_is_reported() -> None:
    plan = _plan((KERNELS / "scaled_add.py").read_text(), "scaled_add", kind="rowwise")
    assert (plan.kind, plan.kind_source, plan.shapes, plan.scalars) == (
        "rowwise", "--kind", {"x": ("rows", "cols"), "y": ("rows", "cols")}, {"alpha": "float", "n": "dim:cols"})
    plan = _plan((KERNELS / "gemm.py").read_text(), "matmul", kind="elementwise")
    guess = next(g.line() for g in plan.guesses if g.subject == "a")
    assert "but the entry expects 2 axes (`M, K = a.shape` in matmul()): pass --kind" in guess
    assert plan.reference == "kernel" and not any(g.subject == "kind" for g in plan.guesses)


def test_a_transposed_b_gets_its_shape_and_a_todo_reference() -> None:
    source = MM_KERNEL + ("def matmul(a, b):\n    M, K = a.shape\n    N, K = b.shape\n    c = torch.empty((M, N))\n"
                          "    mm_kernel[(1,)](a, b, c, M, N, K)\n    return c\n")
    plan = _plan(source, "matmul")
    assert (plan.kind, plan.shapes["b"], plan.reference) == ("gemm", ("n", "k"), "todo")
    assert "b is (n, k): whether the kernel computes a @ b.T is for you to say" in plan.reference_reason


def test_gemm_is_inferred_from_the_equated_dimension_without_a_telling_name() -> None:
    source = MM_KERNEL + ("def product(x, y):\n    if x.shape[1] != y.shape[0]:\n        raise ValueError('shapes')\n"
                          "    M, K = x.shape\n    K2, N = y.shape\n    out = torch.empty((M, N))\n"
                          "    mm_kernel[(1,)](x, y, out, M, N, K)\n    return out\n")
    plan = _plan(source, "product")
    assert plan.kind == "gemm" and plan.guesses[0].line().startswith("kind: gemm (x and y are 2-D and "
                                                                     "x.shape[1] == y.shape[0])")
    assert plan.reference == "todo" and "does not say matmul, gemm, mm or bmm" in plan.reference_reason


def test_a_defaulted_eps_is_not_passed_and_the_reference_uses_its_value() -> None:
    source = NORM_KERNEL + ("def layer_norm(x, weight, bias, eps=1e-5):\n    y = torch.empty_like(x)\n"
                            "    M, N = x.shape\n    norm_kernel[(M,)](x, y, weight, bias, N, eps)\n    return y\n")
    plan = _plan(source, "layer_norm")
    assert (plan.kind, plan.reference, plan.scalars, plan.reference_arguments["eps"]) == (
        "norm", "layer_norm", {}, "1e-05")
    signature = read_entry(ast.parse(source), "layer_norm", Path("/k/kernel.py"))
    harness = render_harness(kernel_file="kernel.py", signature=signature, plan=plan, source=source,
                             harness_path="/b/harness.py")
    assert "def reference(x, weight, bias):" in harness
    assert "layer_norm(x.double(), x.shape[-1:], weight.double(), bias.double(), 1e-05)" in harness
    assert "REFERENCE_SOURCE" not in harness and "_reference_module" not in harness
    assert any(g.line().startswith("eps: not passed: keeps its default 1e-05") for g in plan.guesses)


@pytest.mark.parametrize(("entry", "reason"), [
    ("layer_norm_stats", "layer_norm_stats() returns a tuple"),
    ("layer_norm_fixed_eps", "layer_norm_fixed_eps() has no eps parameter, so the kernel's epsilon is unknown"),
    ("rms_norm", None),
    ("fused_norm", "its name `fused_norm` says neither layer norm nor RMS norm"),
])
def test_a_norm_gets_standard_math_only_when_its_name_and_signature_say_which(entry: str, reason: str | None) -> None:
    source = NORM_KERNEL + "".join(
        f"def {name}(x, {params}):\n    y = torch.empty_like(x)\n    M, N = x.shape\n"
        f"    norm_kernel[(M,)](x, y, {weights}, N, {eps})\n    return {returned}\n\n\n"
        for name, params, weights, eps, returned in [
            ("layer_norm_stats", "weight, bias, eps", "weight, bias", "eps", "y, M"),
            ("layer_norm_fixed_eps", "weight, bias", "weight, bias", "1e-6", "y"),
            ("rms_norm", "weight, eps", "weight, weight", "eps", "y"),
            ("fused_norm", "weight, bias, eps", "weight, bias", "eps", "y")])
    plan = _plan(source, entry)
    assert plan.kind == "norm"
    if reason is None:
        assert (plan.reference, plan.reference_arguments) == ("rms_norm", {"x": "x", "weight": "weight", "eps": "eps"})
    else:
        assert plan.reference == "todo" and reason in plan.reference_reason


def test_the_tutorial_layer_norm_signature_gets_a_shape_tuple_and_a_none_for_an_unused_parameter() -> None:
    source = NORM_KERNEL + (
        "def layer_norm(x, normalized_shape, weight, bias, eps, unused):\n    y = torch.empty_like(x)\n"
        "    x_arg = x.reshape(-1, x.shape[-1])\n    M, N = x_arg.shape\n"
        "    mean = torch.empty((M, ), dtype=torch.float32, device=x.device)\n"
        "    norm_kernel[(M,)](x_arg, y, weight, bias, N, eps)\n    return y\n")
    plan = _plan(source, "layer_norm")
    assert (plan.kind, plan.dtype, plan.reference) == ("norm", "float32", "layer_norm")
    assert plan.inputs == {"x": ("rows", "cols"), "normalized_shape": "shape:cols", "weight": ("cols",),
                           "bias": ("cols",), "eps": "float", "unused": "none"}
    assert next(g.line() for g in plan.guesses if g.subject == "unused").startswith(
        "unused: None (layer_norm() never uses it)")


def test_an_autograd_function_entry_is_read_as_its_forward_and_named_when_missing(tmp_path: Path) -> None:
    source = (KERNELS / "layer_norm_autograd.py").read_text()
    signature = read_entry(ast.parse(source), "layer_norm", KERNELS / "layer_norm_autograd.py")
    assert (signature.name, signature.inputs, signature.kernels) == ("layer_norm", ["x", "weight", "bias", "eps"],
                                                                    ["_layer_norm_fwd"])
    made = run_cli("init-bundle", "--kernel", KERNELS / "layer_norm_autograd.py", "--entry", "norm",
                   "--out", tmp_path / "bundle")
    assert made.returncode != 0
    assert "defines no top-level function 'norm'; public functions: layer_norm" in made.stdout + made.stderr


def test_a_reduction_into_a_preallocated_output_gets_one_value_per_row() -> None:
    source = HEADER + ("@triton.jit\ndef max_kernel(x_ptr, out_ptr, n_cols):\n    pass\n\n\n"
                       "def row_max(x, out):\n    n_rows, n_cols = x.shape\n    max_kernel[(n_rows,)](x, out, n_cols)\n")
    plan = _plan(source, "row_max")
    assert (plan.kind, plan.shapes, plan.reference) == (
        "reduction", {"x": ("rows", "cols"), "out": ("rows",)}, "row_max")


def test_the_dtype_comes_from_the_returned_allocation_unless_given() -> None:
    source = MM_KERNEL + ("def matmul(a, b):\n    M, K = a.shape\n    K, N = b.shape\n"
                          "    c = torch.empty((M, N), device=a.device, dtype=torch.float16)\n"
                          "    mm_kernel[(1,)](a, b, c, M, N, K)\n    return c\n")
    plan = _plan(source, "matmul")
    assert plan.dtype == "float16"
    assert any(g.line().startswith("dtype: float16 (matmul() returns `torch.empty((M, N), device=a.device, "
                                   "dtype=torch.float16)`)") for g in plan.guesses)
    plan = _plan(source, "matmul", dtype="float32")
    assert plan.dtype == "float32" and not any(g.subject == "dtype" for g in plan.guesses)
    cuda = _plan(source, "matmul", dtype="float32", backend="cuda")
    assert cuda.compare == {"base": (1e-2, 1e-2)} and any(g.subject == "tolerance" for g in cuda.guesses)


def test_the_todo_message_is_one_string_literal_that_names_the_edit(tmp_path: Path) -> None:
    expected = EXPECTED[2]
    _init_bundle(expected, tmp_path / "bundle")
    harness = (tmp_path / "bundle" / "harness.py").read_text()
    namespace: dict = {}
    exec(compile(ast.parse(harness), "harness", "exec"), namespace)  # noqa: S102 - our own generated file
    assert namespace["REFERENCE_TODO"] == (
        f"reference() in {tmp_path / 'bundle' / 'harness.py'} is a TODO: init-bundle cannot tell what "
        "normalize_rows() computes (its name `normalize_rows` says neither layer norm nor RMS norm). Write it in "
        "PyTorch for (x (rows, cols), weight (cols,), bias (cols,), eps (float)) to return what normalize_rows() "
        "returns, a (rows, cols) tensor; then set REFERENCE_TODO = None and run validate again")
    assert namespace["verify"]({}, {})["diagnostics"] == namespace["REFERENCE_TODO"]
    with pytest.raises(NotImplementedError, match="is a TODO"):
        namespace["reference"](None, None, None, 1.0)


# ---- validate on the starters (slow) -----------------------------------------------------------------------


def _validate(kernel: Path, bundle: Path, out: Path):
    return run_cli("validate", "--kernel", kernel, "--harness", bundle / "harness.py", "--cases", bundle / "cases.json",
                   "--target", bundle / "target.json", "--output-dir", out, "--arch", "cpu",
                   "--no-profile", timeout=280)


@pytest.mark.slow
@pytest.mark.parametrize("expected", CORRECT, ids=str)
def test_a_starter_for_a_recognised_kernel_passes_validate(expected: Expected, tmp_path: Path) -> None:
    _init_bundle(expected, tmp_path / "bundle")
    run = _validate(KERNELS / expected.kernel, tmp_path / "bundle", tmp_path / "out")
    assert run.returncode == 0, run.stderr[-4000:]
    lock = json.loads(run.stdout)
    assert lock["passed"] is True
    assert check(lock, "verify")["status"] == "passed"
    assert check(lock, "negative_incorrect_output")["status"] == "passed"


@pytest.mark.slow
def test_a_todo_starter_fails_validate_saying_what_to_edit_and_passes_once_edited(tmp_path: Path) -> None:
    expected = EXPECTED[2]
    bundle, kernel = tmp_path / "bundle", KERNELS / expected.kernel
    _init_bundle(expected, bundle)
    run = _validate(kernel, bundle, tmp_path / "out-todo")
    assert run.returncode == 1
    verify = check(json.loads(run.stdout), "verify")
    assert verify["status"] == "failed" and f"reference() in {bundle / 'harness.py'} is a TODO" in verify["message"]
    assert "then set REFERENCE_TODO = None and run validate again" in verify["message"]
    # doing what the message says is enough
    harness = (bundle / "harness.py").read_text()
    harness = re.sub(r"REFERENCE_TODO = \(\n(?:    .*\n)+\)", "REFERENCE_TODO = None", harness)
    harness = harness.replace(
        "raise NotImplementedError(REFERENCE_TODO)",
        "return torch.nn.functional.layer_norm(x.double(), x.shape[-1:], weight.double(), bias.double(), eps)"
        ".to(x.dtype)")
    (bundle / "harness.py").write_text(harness)
    run = _validate(kernel, bundle, tmp_path / "out-written")
    assert run.returncode == 0, run.stderr[-4000:]
    assert json.loads(run.stdout)["passed"] is True


@pytest.mark.slow
def test_the_printed_validate_command_works_as_printed(tmp_path: Path) -> None:
    """init-bundle run with relative paths from a directory; its printed command pasted into a shell there."""
    shutil.copy(KERNELS / "row_sum.py", tmp_path / "row_sum.py")
    made = run_cli("init-bundle", "--kernel", "row_sum.py", "--entry", "row_sum", "--out", "starter", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    printed = next(line for line in made.stderr.splitlines() if "init-bundle next:" in line).split("then run: ", 1)[1]
    assert printed == shlex.join(json.loads(made.stdout)["validate_command"])
    environment = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "TMPDIR": str(tmp_path),
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    completed = subprocess.run(["bash", "-c", printed], cwd=tmp_path, env=environment, capture_output=True, text=True,
                               timeout=280, stdin=subprocess.DEVNULL)
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert json.loads(completed.stdout)["passed"] is True
