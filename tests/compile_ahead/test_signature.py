"""`signature_from_launch` types a launch as Triton does, read with `ast` only; `kernel_scope` keys the store."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from orchestrator.compile_ahead import CompileTarget, SignatureError, kernel_scope, signature_from_launch

KERNELS = Path(__file__).resolve().parent / "kernels"
MATMUL = (KERNELS / "matmul.py").read_text(encoding="utf-8")
TYPED = (KERNELS / "typed.py").read_text(encoding="utf-8")
FP16 = {"dtype": "float16", "shape": [4096, 4096]}
# a, b, c, M, N, K and the strides of row-major a, b, c
MATMUL_ARGS = [FP16, FP16, FP16, 4096, 4001, 4096, 4096, 1, 4001, 1, 4001, 1]
TILES = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}
# x, y, n, n_steady (do_not_specialize), big, scale, flag, count: tl.int64, nothing, ACT
TYPED_ARGS = [{"dtype": "torch.float32", "shape": [1000]}, {"dtype": "float32", "shape": [1000], "aligned": False},
              1000, 1, 2**40, 0.5, True, 1, None, "relu"]


def test_a_matmul_launch_is_typed_like_triton_types_it():
    signature = signature_from_launch(MATMUL, "matmul_kernel", MATMUL_ARGS, {**TILES, "num_warps": 8})
    assert signature.types == {
        "a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
        "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
        "stride_cm": "i32", "stride_cn": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
        "BLOCK_K": "constexpr"}
    assert signature.constexprs == {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, **TILES}
    assert signature.divisible_by_16 == ["a_ptr", "b_ptr", "c_ptr", "M", "K", "stride_am"]  # not 4001
    assert signature.launch_options == {"num_warps": 8}
    assert signature.parameters[:3] == ["a_ptr", "b_ptr", "c_ptr"]


def test_annotations_do_not_specialize_and_defaults_are_honoured():
    signature = signature_from_launch(TYPED, "typed_kernel", TYPED_ARGS)
    assert signature.types == {
        "x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "n_steady": "i32", "big": "i64", "scale": "fp32",
        "flag": "u1", "count": "i64", "nothing": "constexpr", "ACT": "constexpr", "BLOCK": "constexpr"}
    assert signature.constexprs == {"nothing": None, "ACT": "relu", "BLOCK": 128}
    assert signature.divisible_by_16 == ["x_ptr", "big"]
    assert signature.notes == ["BLOCK = 128 from its default"]


def _triton_typing(path: Path, name: str, args: list, kwargs: dict) -> tuple[dict, set]:
    """Triton's own binder on real CPU tensors: (types with constexpr values, 16-divisible parameters)."""
    torch = pytest.importorskip("torch")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    spec = importlib.util.spec_from_file_location(f"compile_ahead_test_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # a test kernel of ours, not a candidate
    kernel = getattr(module, name)
    binder = create_function_from_signature(kernel.signature, kernel.params, make_backend(GPUTarget("cuda", 90, 32)))

    def real(value):
        if not isinstance(value, dict):
            return value
        tensor = torch.empty(value["shape"], dtype=getattr(torch, value["dtype"].removeprefix("torch.")))
        return tensor[1:] if value.get("aligned") is False else tensor  # an element in: 4 bytes off alignment

    _bound, specialization, _options = binder(*map(real, args), **{k: real(v) for k, v in kwargs.items()})
    types = {param.name: kind for param, (kind, _key) in zip(kernel.params, specialization, strict=True)}
    divisible = {param.name for param, (_kind, key) in zip(kernel.params, specialization, strict=True) if key == "D"}
    return types, divisible


@pytest.mark.parametrize(("file", "name", "args", "kwargs"), [
    ("matmul.py", "matmul_kernel", MATMUL_ARGS, TILES),
    ("typed.py", "typed_kernel", TYPED_ARGS, {}),
])
def test_the_typing_matches_tritons_own_binder(file, name, args, kwargs):
    source = (KERNELS / file).read_text(encoding="utf-8")
    ours = signature_from_launch(source, name, args, kwargs)
    theirs, divisible = _triton_typing(KERNELS / file, name, args, kwargs)
    assert ours.types == theirs
    assert set(ours.divisible_by_16) == divisible


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    (MATMUL_ARGS[:5], TILES, "no example value for parameter 'K' of matmul_kernel"),
    (MATMUL_ARGS, {**TILES, "BLOCK_Q": 4}, "has no parameter 'BLOCK_Q' and it is not a launch option"),
    (MATMUL_ARGS, {**TILES, "M": 5}, "'M' given by position and by keyword"),
    (MATMUL_ARGS, {**TILES, "BLOCK_M": FP16}, "constexpr parameter 'BLOCK_M' cannot take a tensor"),
    ([{"dtype": "complex64"}, *MATMUL_ARGS[1:]], TILES, "unknown dtype 'complex64'"),
    ([*MATMUL_ARGS[:3], "4096", *MATMUL_ARGS[4:]], TILES, "parameter 'M' is not constexpr"),
    ([*MATMUL_ARGS, 1, 2, 3, 4], {}, "16 positional arguments for 15 parameters"),
])
def test_arguments_that_do_not_fit_are_refused_by_name(args, kwargs, message):
    with pytest.raises(SignatureError, match=message):
        signature_from_launch(MATMUL, "matmul_kernel", args, kwargs)


def test_a_missing_kernel_is_refused():
    with pytest.raises(SignatureError, match="no module-level function 'mm'"):
        signature_from_launch(MATMUL, "mm", [])


def test_the_scope_follows_the_kernel_text_and_the_target():
    hopper, blackwell = CompileTarget(arch=90), CompileTarget(arch=100)
    scope = kernel_scope(MATMUL, "matmul_kernel", hopper)
    assert scope.startswith("matmul_kernel:") and scope.endswith(":cuda:sm_90")
    elsewhere = MATMUL + "\n\nBLOCK_M = 256  # a knob edit outside the kernel\n"
    assert kernel_scope(elsewhere, "matmul_kernel", hopper) == scope
    commented = MATMUL.replace("    pid_m = tl.program_id(0)", "    # rows\n    pid_m = tl.program_id(0)")
    assert kernel_scope(commented, "matmul_kernel", hopper) == scope
    changed = MATMUL.replace("acc.to(tl.float16)", "acc.to(tl.bfloat16)")
    assert kernel_scope(changed, "matmul_kernel", hopper) != scope
    assert kernel_scope(MATMUL, "matmul_kernel", blackwell) != scope
