"""`tlx-agent init-bundle`: the signature it reads, the files it writes, the inputs it refuses."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from orchestrator.bundle.alignment import aligned_size, async_copy_evidence
from orchestrator.bundle.entry_signature import read_entry
from orchestrator.bundle.init_bundle import render_harness
from orchestrator.bundle.starter_plan import plan_starter
from orchestrator.python_template import read_template, render_template
from protocol.bundle import BundleError, load_cases_file, load_target_file
from tests.conftest import PROJECT_ROOT, run_cli

pytestmark = pytest.mark.timeout(120)

VECTOR_ADD = PROJECT_ROOT / "examples" / "vector_add" / "kernel.py"
KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.jit
def other_kernel(x_ptr):
    pass


def scaled(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, factor: float = 2.0, *, block: int = 64) -> None:
    scale_kernel[(1,)](x, w, out, x.numel(), BLOCK=block)


def with_text(x, mode: str):
    return x


def only_scalars(alpha: float, n: int):
    return alpha * n


def misplaced(out, x):
    return x


def variadic(*tensors):
    return tensors[0]


def nothing():
    return None
'''


def _entry(name: str, source: str = KERNEL):
    return read_entry(ast.parse(source), name, Path("/k/kernel.py"))


def test_the_signature_gives_inputs_outputs_and_the_launched_kernel() -> None:
    signature = _entry("scaled")
    assert (signature.inputs, signature.outputs, signature.kernels) == (["x", "w"], ["out"], ["scale_kernel"])
    assert signature.main_scope == "scale_kernel"
    vector_add = read_entry(ast.parse(VECTOR_ADD.read_text()), "vector_add", VECTOR_ADD)
    assert (vector_add.inputs, vector_add.outputs, vector_add.main_scope) == (["x", "y"], [], "add_kernel")


@pytest.mark.parametrize(("entry", "message"), [
    ("missing", "defines no top-level function 'missing'; public functions: scaled, with_text, only_scalars"),
    ("scale_kernel", "'scale_kernel' in /k/kernel.py is a Triton kernel; pass the Python function that launches it"),
    ("with_text", "required parameter(s) mode of a type init-bundle cannot draw"),
    ("misplaced", "output parameter(s) out must come after every input"),
    ("variadic", "variadic entry points cannot be inferred"),
    ("nothing", "takes no input tensor"),
])
def test_entries_that_cannot_be_inferred_are_refused(entry: str, message: str) -> None:
    with pytest.raises(BundleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _entry(entry)


def test_an_entry_of_scalars_only_has_no_tensor_to_draw() -> None:
    with pytest.raises(BundleError, match=r"only_scalars\(\) takes no input tensor \(alpha: float, n: int\)"):
        plan_starter(_entry("only_scalars"), kind=None, dtype=None, backend="cpu")


def test_the_written_bundle_loads_and_the_harness_embeds_the_untouched_kernel(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    run = run_cli("init-bundle", "--kernel", VECTOR_ADD, "--entry", "vector_add", "--out", out)
    assert run.returncode == 0, run.stderr
    reply = json.loads(run.stdout)
    assert reply["inputs"] == ["x", "y"] and reply["main_scope"] == "add_kernel"
    assert reply["validate_command"][:2] == ["tlx-agent", "validate"] and "--arch" in reply["validate_command"]
    assert "init-bundle next:" in run.stderr
    cases = load_cases_file(out / "cases.json")
    assert [c.case_id for c in cases] == ["n2048", "ragged_1001"] and all(c.protected for c in cases)
    target = load_target_file(out / "target.json")
    assert (target.backend, target.architecture, target.environment, target.main_scope) == (
        "cpu", "interpreter", {"TRITON_INTERPRET": "1"}, "add_kernel")
    harness = (out / "harness.py").read_text()
    namespace: dict = {}
    exec(compile(ast.parse(harness), "harness", "exec"), namespace)  # noqa: S102 - our own generated file
    assert namespace["REFERENCE_SOURCE"] == VECTOR_ADD.read_text()
    assert namespace["INPUTS"] == {"x": ("n",), "y": ("n",)} and namespace["OUTPUTS"] == {}
    assert all(callable(namespace[name]) for name in ("build", "verify", "benchmark", "profile", "run_case"))

    again = run_cli("init-bundle", "--kernel", VECTOR_ADD, "--entry", "vector_add", "--out", out)
    assert again.returncode == 1 and "already exist(s); choose another --out or pass --force" in again.stderr
    forced = run_cli("init-bundle", "--kernel", VECTOR_ADD, "--entry", "vector_add", "--out", out, "--force",
                     "--kind", "rowwise")
    assert forced.returncode == 0, forced.stderr
    assert json.loads((out / "cases.json").read_text())[0]["parameters"] == {"rows": 8, "cols": 128,
                                                                             "budget_seconds": 0.3}


def test_a_cuda_bundle_names_its_architecture_and_production_shapes(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    run = run_cli("init-bundle", "--kernel", VECTOR_ADD, "--entry", "vector_add", "--out", out, "--backend", "cuda")
    assert run.returncode == 1 and "--backend cuda needs --arch" in run.stderr and not out.exists()
    run = run_cli("init-bundle", "--kernel", VECTOR_ADD, "--entry", "vector_add", "--out", out, "--backend", "cuda",
                  "--arch", "cpu")
    assert run.returncode == 1 and "is not a known CUDA architecture" in run.stderr
    run = run_cli("init-bundle", "--kernel", VECTOR_ADD, "--entry", "vector_add", "--out", out, "--backend", "cuda",
                  "--arch", "h200", "--dtype", "bfloat16")
    assert run.returncode == 0, run.stderr
    target = load_target_file(out / "target.json")
    assert (target.backend, target.architecture, target.device, target.environment) == ("cuda", "h200", "cuda:0", {})
    assert load_cases_file(out / "cases.json")[0].parameters == {"n": 16777216}
    assert "DTYPE = torch.bfloat16" in (out / "harness.py").read_text()


def test_a_kernel_that_copies_asynchronously_gets_a_ragged_case_it_can_compile(tmp_path: Path) -> None:
    # fbtriton's pipelined TLX GEMM does not compile on 4097x3001x1000 (cp.async needs 16-byte rows): the
    # example's bundle is what init-bundle writes for it, and its ragged case still masks every tile of 128
    tlx_gemm = PROJECT_ROOT / "examples" / "tlx_gemm"
    out = tmp_path / "bundle"
    run = run_cli("init-bundle", "--kernel", tlx_gemm / "kernel.py", "--entry", "matmul", "--out", out,
                  "--backend", "cuda", "--arch", "h200", "--dtype", "float16")
    assert run.returncode == 0, run.stderr
    assert json.loads((out / "cases.json").read_text()) == json.loads((tlx_gemm / "h200" / "cases.json").read_text())
    ragged = load_cases_file(out / "cases.json")[1].parameters
    assert ragged["m"] % 2 == 1 and all(ragged[d] % 16 == 0 and ragged[d] % 128 for d in ("n", "k"))
    assert "cases: the ragged case keeps its outer dimension odd" in run.stderr
    assert "`tlx.async_load` at line" in (out / "harness.py").read_text().replace("\n#   ", " ")
    # a kernel without asynchronous copies keeps the odd ragged case
    plain = tmp_path / "plain"
    run = run_cli("init-bundle", "--kernel", PROJECT_ROOT / "examples" / "matmul" / "kernel.py", "--entry", "matmul",
                  "--out", plain, "--backend", "cuda", "--arch", "h200")
    assert run.returncode == 0, run.stderr
    assert load_cases_file(plain / "cases.json")[1].case_id == "ragged_4097x3001x1000"


@pytest.mark.parametrize(("size", "aligned"), [(3001, 3008), (1000, 1008), (999, 1008), (128, 144), (16, 16),
                                               (10000003, 10000016)])
def test_aligned_sizes_are_16_element_multiples_no_tile_of_128_divides(size: int, aligned: int) -> None:
    assert aligned_size(size) == aligned


def test_async_copies_are_found_by_their_call_names() -> None:
    found = async_copy_evidence(ast.parse("import x\n\ndef f(d):\n    return x.tlx.async_descriptor_load(d)\n"))
    assert found == "`x.tlx.async_descriptor_load` at line 4"
    assert async_copy_evidence(ast.parse("desc = TensorDescriptor(a, a.shape, a.stride(), [64, 64])")) is not None
    assert async_copy_evidence(ast.parse("y = tl.load(p + offsets, mask=mask)")) is None


def test_bad_init_bundle_input_is_one_line(tmp_path: Path) -> None:
    run = run_cli("init-bundle", "--kernel", tmp_path / "nope.py", "--entry", "f", "--out", tmp_path / "b")
    assert run.returncode == 1 and "nope.py does not exist" in run.stderr and run.stderr.count("\n") == 1
    run = run_cli("init-bundle", "--kernel", VECTOR_ADD, "--entry", "add_kernel", "--out", tmp_path / "b")
    assert run.returncode == 1 and "is a Triton kernel" in run.stderr
    run = run_cli("init-bundle", "--kernel", VECTOR_ADD, "--entry", "vector_add", "--out", tmp_path / "b",
                  "--dtype", "bfloat16")
    assert run.returncode == 1 and "no bf16 arithmetic" in run.stderr
    assert not (tmp_path / "b").exists()


def _render(entry: str, kind: str | None, dtype: str | None = None) -> str:
    signature = _entry(entry)
    plan = plan_starter(signature, kind=kind, dtype=dtype, backend="cpu")
    return render_harness(kernel_file="kernel.py", signature=signature, plan=plan, source=KERNEL,
                          harness_path="/b/harness.py")


def test_rendered_harness_names_outputs_after_inputs() -> None:
    harness = _render("scaled", "rowwise", "float16")
    assert "OUTPUTS = {'out': ('rows', 'cols')}" in harness
    assert "INPUTS = {'x': ('rows', 'cols'), 'w': ('rows', 'cols')}" in harness
    assert "Output: out (rows, cols) (preallocated outputs, passed last)." in " ".join(harness.split())
    assert "MAIN_SCOPE = 'scale_kernel'" in harness and "DTYPE = torch.float16" in harness
    ast.parse(harness)


def test_the_harness_template_is_a_working_module_with_example_values() -> None:
    """orchestrator/bundle/templates/harness.py runs as it is; its example kernel builds on the CPU."""
    template = read_template("orchestrator.bundle", "harness.py")
    namespace: dict = {}
    exec(compile(template, "harness_template", "exec"), namespace)  # noqa: S102 - our own template
    assert (namespace["ENTRY_POINT"], namespace["INPUTS"], namespace["OUTPUTS"]) == ("entry", {"x": ("n",)}, {})
    built = namespace["build"](namespace["REFERENCE_SOURCE"], {"backend": "cpu"})
    assert built["success"] and built["artifact"]["fn"](21) == 42
    for kind in ("elementwise", "gemm"):  # the untouched kernel as the reference, and a function put in its place
        rendered = _render("scaled", kind)
        assert "# template:" in template and "# template:" not in rendered and "${" not in rendered
        assert ("REFERENCE_SOURCE" in rendered) == (kind == "elementwise")
        ast.parse(rendered)


def test_render_template_refuses_a_template_that_does_not_match_its_renderer() -> None:
    template = '"""For ${who}."""\n\nA = 1  # kept\n# template: dropped\nB = (\n    2\n)\n'
    assert render_template(template, {"A": "'x'", "B": "[3]"}, {"who": "me"}) == \
        '"""For me."""\n\nA = \'x\'  # kept\nB = [3]\n'
    with pytest.raises(ValueError, match="no top-level assignment to C"):
        render_template(template, {"C": "1"})
    with pytest.raises(ValueError, match="assigns A more than once"):
        render_template(template + "A = 2\n", {"A": "3"})
    with pytest.raises(ValueError, match="the field 'who', which has no value"):
        render_template(template, {}, {})


def test_render_template_replaces_and_drops_functions_and_assignments() -> None:
    template = ('"""Doc."""\n\nA = 1\nC: list = []  # dropped with its comment\n\n\n@decorated\ndef f(x):\n'
                '    return x\n\n\ndef g():\n    pass\n')
    assert render_template(template, {"A": "2"}, functions={"f": "def f(y):\n    return y * 2\n"}, drop=["C", "g"]) == \
        '"""Doc."""\n\nA = 2\n\n\ndef f(y):\n    return y * 2\n'
    with pytest.raises(ValueError, match="no top-level function A"):
        render_template(template, {}, functions={"A": "def A(): pass"})
    with pytest.raises(ValueError, match="no top-level statement Z"):
        render_template(template, {}, drop=["Z"])
    with pytest.raises(ValueError, match="f: replace a statement or drop it, not both"):
        render_template(template, {}, functions={"f": "def f(): pass"}, drop=["f"])
