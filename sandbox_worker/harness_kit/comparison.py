"""Magnitude-aware comparison of a candidate's output with the reference, as verify-contract verdicts.

The rule is |actual - expected| <= atol + rtol * |expected| elementwise, with atol scaled to the output's
magnitude (`tolerance_for`), so returning zeros cannot pass on small outputs under a loose absolute
tolerance. Beyond values, `compare` rejects tensor subclasses, a changed shape, dtype or device, outputs
that share memory with an input or the reference, unmatched NaN, constant outputs and references that
are (near-)constant for the inputs. Only the standard library is imported at module level; torch is
imported inside the functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

# (atol factor, rtol) per dtype. The atol factor is multiplied by the output's magnitude (max |expected|).
# fp32 allows 1e-4: room for a different summation order, yet an fp16 or bf16 shortcut of an fp32
# result (a precision downgrade) shows up as errors of 5e-4 and 4e-3 of the magnitude. Each 16- and 8-bit entry allows
# about one unit in the last place of that format. Integers and bool are exact.
BASE_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
    "float8_e4m3fn": (1.25e-1, 1.25e-1),
    "float8_e4m3fnuz": (1.25e-1, 1.25e-1),
    "float8_e5m2": (2.5e-1, 2.5e-1),
    "float8_e5m2fnuz": (2.5e-1, 2.5e-1),
    "complex64": (1e-4, 1e-4),
    "complex128": (1e-7, 1e-7),
}


# ---- tolerances -----------------------------------------------------------------------------------


def base_tolerance(dtype: Any) -> tuple[float, float]:
    """(atol factor, rtol) for `dtype` from `BASE_TOLERANCES`; (0, 0) for integers and bool."""
    name = str(dtype).removeprefix("torch.")
    if name in BASE_TOLERANCES:
        return BASE_TOLERANCES[name]
    if getattr(dtype, "is_floating_point", False):
        raise ValueError(f"no default tolerance for {dtype}: pass atol and rtol")
    return (0.0, 0.0)


def output_scale(expected: Any) -> float:
    """max |expected| over its finite elements (0.0 when there are none)."""
    import torch

    if expected.numel() == 0:
        return 0.0
    magnitude = expected.detach().abs()
    if magnitude.is_floating_point():
        magnitude = magnitude[torch.isfinite(magnitude)]
        if magnitude.numel() == 0:
            return 0.0
    return float(magnitude.max().double())


def tolerance_for(
    dtype: Any, expected: Any, *, base: tuple[float, float] | None = None
) -> tuple[float, float]:
    """(atol, rtol) for an output of `dtype`: atol = atol factor x max|expected|, rtol as given.

    The rule: |actual - expected| <= atol + rtol * |expected| elementwise. Scaling atol by the
    magnitude (without the common `max(1, ...)` floor) matters for small outputs: a softmax row of
    100k elements has entries near 1e-5, and an unscaled atol of 1e-2 lets zeros pass (GitHub issue
    ScalingIntelligence/KernelBench#165). Pass `base` (atol factor, rtol) to loosen or tighten,
    e.g. (1e-2, 1e-2) for tf32 dots.
    """
    atol_factor, rtol = base if base is not None else base_tolerance(dtype)
    if atol_factor == 0:
        return 0.0, rtol
    return atol_factor * output_scale(expected), rtol


# ---- comparing outputs ----------------------------------------------------------------------------


def verdict(passed: bool, diagnostics: str = "", **metrics: Any) -> dict:
    """A verify-contract dict; the four standard metrics are always present (None when unknown)."""
    base = {"max_abs_err": None, "max_rel_err": None, "atol": None, "rtol": None}
    base.update(metrics)
    return {"passed": bool(passed), "diagnostics": diagnostics, "metrics": base}


def merge_verdicts(verdicts: Sequence[dict]) -> dict:
    """All must pass; diagnostics are joined; numeric metrics keep the worst (largest) value."""
    metrics: dict[str, Any] = {}
    for item in verdicts:
        for key, value in item["metrics"].items():
            metrics[key] = _worse(metrics.get(key), value)
    diagnostics = "; ".join(item["diagnostics"] for item in verdicts if item["diagnostics"])
    return verdict(all(item["passed"] for item in verdicts), diagnostics, **metrics)


def _worse(old: Any, new: Any) -> Any:
    if old is None:
        return new
    if new is None:
        return old
    if isinstance(old, bool) or isinstance(new, bool):
        return bool(old) or bool(new)
    if isinstance(old, (int, float)) and isinstance(new, (int, float)):
        if isinstance(old, float) and math.isnan(old):
            return old
        if isinstance(new, float) and math.isnan(new):
            return new
        return max(old, new)
    return new


def compare(
    actual: Any,
    expected: Any,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    base: tuple[float, float] | None = None,
    inputs: Sequence[Any] = (),
    require_contiguous: bool = False,
    allow_nan: bool = False,
    allow_constant: bool = False,
) -> dict:
    """Check `actual` against `expected` (a tensor, or a tuple/list of tensors, pairwise).

    `atol`/`rtol` are absolute overrides; otherwise `tolerance_for(dtype, expected, base=base)` per
    output. `inputs` are checked for memory sharing with the output. `allow_nan` lets NaN match NaN
    at the same positions only; `allow_constant` skips the constant-output and degenerate-reference
    checks (for outputs that really are constant).
    """
    import torch

    if isinstance(expected, torch.Tensor):
        pairs = [("output", actual, expected)]
    elif isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            found = type(actual).__name__ + (
                f" of {len(actual)}" if isinstance(actual, (tuple, list)) else ""
            )
            return verdict(False, f"expected a sequence of {len(expected)} outputs, got {found}")
        pairs = [(f"output[{i}]", a, e) for i, (a, e) in enumerate(zip(actual, expected, strict=True))]
    else:
        raise TypeError(
            f"expected output must be a tensor or a tuple/list of tensors, got {type(expected).__name__}"
        )
    aliases = [(f"input {i}", t) for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)]
    aliases += [("the reference output", e) for _, _, e in pairs]
    results = [
        _compare_one(
            label,
            a,
            e,
            atol=atol,
            rtol=rtol,
            base=base,
            aliases=aliases,
            require_contiguous=require_contiguous,
            allow_nan=allow_nan,
            allow_constant=allow_constant,
        )
        for label, a, e in pairs
    ]
    return merge_verdicts(results)


def _compare_one(
    label: str,
    actual: Any,
    expected: Any,
    *,
    atol: float | None,
    rtol: float | None,
    base: tuple[float, float] | None,
    aliases: Sequence[tuple[str, Any]],
    require_contiguous: bool,
    allow_nan: bool,
    allow_constant: bool,
) -> dict:
    problem = _metadata_problem(actual, expected, require_contiguous) or _alias_problem(actual, aliases)
    if problem:
        return verdict(False, f"{label}: {problem}")
    default_atol, default_rtol = tolerance_for(expected.dtype, expected, base=base)
    atol = default_atol if atol is None else float(atol)
    rtol = default_rtol if rtol is None else float(rtol)
    result = _compare_values(actual, expected, atol=atol, rtol=rtol, allow_nan=allow_nan)
    problem = None if allow_constant else _constant_problem(actual, expected, atol=atol, rtol=rtol)
    if problem:  # said first: it is the cause, the value mismatches are its symptom
        result = verdict(
            False, "; ".join(filter(None, [problem, result["diagnostics"]])), **result["metrics"]
        )
    if result["diagnostics"]:
        result["diagnostics"] = f"{label}: {result['diagnostics']}"
    return result


def _metadata_problem(actual: Any, expected: Any, require_contiguous: bool) -> str | None:
    import torch

    if type(expected) is not torch.Tensor:
        raise TypeError(f"reference output must be a torch.Tensor, got {type(expected).__name__}")
    if type(actual) is not torch.Tensor:
        return f"type is {type(actual).__module__}.{type(actual).__qualname__}, not exactly torch.Tensor (subclasses are rejected)"
    if actual.device != expected.device:
        return f"device is {actual.device}, expected {expected.device}"
    if actual.dtype != expected.dtype:
        return f"dtype is {actual.dtype}, expected {expected.dtype}"
    if actual.shape != expected.shape:
        return f"shape is {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    if require_contiguous and not actual.is_contiguous():
        return f"not contiguous (strides {tuple(actual.stride())})"
    return None


def shares_memory(a: Any, b: Any) -> bool:
    """True when the storages of tensors `a` and `b` overlap (views of one buffer included)."""
    if a.device != b.device:
        return False
    storage_a, storage_b = a.untyped_storage(), b.untyped_storage()
    if storage_a.nbytes() == 0 or storage_b.nbytes() == 0:
        return False
    start_a, start_b = storage_a.data_ptr(), storage_b.data_ptr()
    return start_a < start_b + storage_b.nbytes() and start_b < start_a + storage_a.nbytes()


def _alias_problem(actual: Any, aliases: Sequence[tuple[str, Any]]) -> str | None:
    for name, other in aliases:
        if other is actual:
            return f"is the very tensor object of {name}"
        if shares_memory(actual, other):
            return f"shares memory with {name}; outputs must be fresh buffers"
    return None


def _work_dtype(dtype: Any) -> Any:
    """fp32/fp64 compare in fp64, narrower floats in fp32, complex in complex128."""
    import torch

    if dtype.is_complex:
        return torch.complex128
    if dtype in (torch.float64, torch.float32):
        return torch.float64
    return torch.float32


def _compare_values(actual: Any, expected: Any, *, atol: float, rtol: float, allow_nan: bool) -> dict:
    """Elementwise |a - e| <= atol + rtol * |e| for floats (NaN fails unless allowed and matched;
    infinities must match exactly), exact equality for integers and bool."""
    import torch

    if actual.numel() == 0:
        return verdict(
            True, "", max_abs_err=0.0, max_rel_err=0.0, atol=atol, rtol=rtol, mismatches=0, numel=0
        )
    if expected.is_floating_point() or expected.is_complex():
        work = _work_dtype(expected.dtype)
        a, e = actual.detach().to(work), expected.detach().to(work)
        a_nan, e_nan = torch.isnan(a), torch.isnan(e)
        nan_pairs = a_nan & e_nan
        e_inf = torch.isinf(e)
        diff = torch.where((e_inf & (a == e)) | nan_pairs, 0.0, (a - e).abs())
        bound = torch.where(e_inf, 0.0, atol + rtol * e.abs())
        mismatch = ~(diff <= bound)  # a NaN difference is a mismatch
        mismatch = mismatch & ~nan_pairs if allow_nan else mismatch | e_nan
    else:  # integers and bool: exact
        a_nan = e_nan = torch.zeros(actual.shape, dtype=torch.bool, device=actual.device)
        nan_pairs = a_nan
        mismatch = actual != expected
        e = expected.detach().to(torch.float64)
        diff = (actual.detach().to(torch.float64) - e).abs()
    relative = diff / torch.clamp(e.abs(), min=max(atol, torch.finfo(diff.dtype).tiny))
    metrics = {
        # NaN where the reference has a number makes these NaN: reported as null, never as 0.
        "max_abs_err": float(diff.max()),
        "max_rel_err": float(torch.where(nan_pairs, 0.0, relative).max()),
        "atol": atol,
        "rtol": rtol,
        "mismatches": int(mismatch.sum()),
        "nan_count": int(a_nan.sum()),
        "numel": int(actual.numel()),
    }
    if not bool(mismatch.any()):
        return verdict(True, "", **metrics)
    message = _mismatch_message(
        actual, expected, mismatch, int(a_nan.sum()), int(e_nan.sum()), allow_nan, atol, rtol
    )
    return verdict(False, message, **metrics)


def _mismatch_message(
    actual: Any,
    expected: Any,
    mismatch: Any,
    nan_count: int,
    expected_nan_count: int,
    allow_nan: bool,
    atol: float,
    rtol: float,
) -> str:
    first = tuple(int(i) for i in mismatch.nonzero()[0])
    at = f"first at index {first}: got {actual[first].item()!r}, expected {expected[first].item()!r}"
    if nan_count:
        return f"{nan_count} NaN values in the output (NaN never matches; a poisoned output left unwritten?); {at}"
    if expected_nan_count and not allow_nan:
        return f"the reference has {expected_nan_count} NaN values and NaN never matches unless allow_nan=True; {at}"
    count, total = int(mismatch.sum()), mismatch.numel()
    return f"{count}/{total} elements outside atol={atol:.3g} + rtol={rtol:.3g}*|expected|; {at}"


def _is_constant(tensor: Any) -> bool:
    flat = tensor.detach().reshape(-1)
    return bool((flat == flat[0]).all())


def _constant_problem(actual: Any, expected: Any, *, atol: float, rtol: float) -> str | None:
    """A case where a constant would pass cannot catch a constant-output kernel; say so. Then
    reject a constant output (it would usually fail the values anyway, but this says why)."""
    import torch

    if expected.numel() < 2:
        return None
    e = expected.detach().to(_work_dtype(expected.dtype) if expected.is_floating_point() else torch.float64)
    if e.is_complex():
        e = e.abs()
    finite = e[torch.isfinite(e)]
    if finite.numel() >= 2:
        spread = float(finite.max() - finite.min())
        if spread / 2 <= atol + rtol * float(finite.abs().max()):
            return (
                "the reference output is (near-)constant for these inputs, so a constant output would pass: "
                "change the inputs or the case (or pass allow_constant=True if this is intended)"
            )
    if _is_constant(actual):  # an all-NaN output is not "constant": NaN != NaN
        return f"output is constant (every element is {actual.reshape(-1)[0].item()!r})"
    return None
