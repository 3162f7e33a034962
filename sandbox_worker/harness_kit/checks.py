"""Correctness checks for harness `verify` functions, hardened against the cheats in
`reference/peers.md` §3b (and the timing-side #9/#11 through `last_output_check`).

What the helpers enforce, and why:
- inputs are fresh random values drawn from the orchestrator's per-command seed
  (`context.evaluation_seed()`), never a fixed seed, so outputs cannot be memoized across runs;
- preallocated outputs are poisoned (NaN, or a sentinel for integers) before every call, so a kernel
  that skips work or reads uninitialized memory leaves poison behind (#16);
- NaN never matches, not even a NaN in the reference, unless the harness allows it (#18: a NaN
  wildcard lets a candidate "poison the expected");
- tolerances depend on the dtype and are scaled to the output's magnitude (see `tolerance_for`), so
  returning zeros cannot pass on small outputs under a loose absolute tolerance (#14);
- the output must be exactly `torch.Tensor` (no lazy subclasses, #3), with the expected shape, dtype
  (no precision downgrade of the result, #17), device and, optionally, contiguity; it must not share
  memory with an input or the reference (#12, #18), and inputs must not be mutated (#13);
- constant outputs are rejected, and so are references that are (near-)constant for the inputs,
  because such a case cannot tell a kernel from a constant (#14, #15);
- the output must change when the inputs change *in place* (same buffers, new values), which
  catches caches keyed on `data_ptr` or `id` (#9).

Verdicts use the verify contract: `{"passed": bool, "diagnostics": str, "metrics": {"max_abs_err",
"max_rel_err", "atol", "rtol", ...}}`. Calling convention for `verify_call`: `make_inputs(salt)` returns
a tuple of arguments (tensors drawn from `make_generator(device, salt=salt)`, plus any plain values);
the reference is called as `reference(*inputs)` and returns the expected output (a tensor or a tuple
of tensors); the candidate is called as `candidate(*inputs)` and returns its output, or, with an
`output_factory`, as `candidate(*inputs, *outputs)` writing into `outputs = output_factory(*inputs)`.

Only the standard library is imported at module level; torch is imported inside the functions.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any

from sandbox_worker.harness_kit.context import evaluation_seed

# (atol factor, rtol) per dtype. The atol factor is multiplied by the output's magnitude (max |expected|).
# fp32 allows 1e-4: room for a different summation order, yet an fp16 or bf16 shortcut of an fp32
# result (#17) shows up as errors of 5e-4 and 4e-3 of the magnitude. Each 16- and 8-bit entry allows
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
DEFAULT_INT_RANGE = (-100, 100)


class OutputCheckFailed(AssertionError):
    """Raised by `last_output_check` when the re-checked output is wrong; carries the verdict."""

    def __init__(self, verdict: dict) -> None:
        super().__init__(verdict["diagnostics"])
        self.verdict = verdict


# ---- inputs ---------------------------------------------------------------------------------------


def derive_seed(seed: int, salt: int) -> int:
    """A 63-bit seed from (seed, salt); hashed so that (s, 1) and (s + 1, 0) do not collide."""
    digest = hashlib.sha256(f"tlx-agent:{seed}:{salt}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def make_generator(device: Any, *, salt: int = 0) -> Any:
    """A `torch.Generator` on `device` seeded from the orchestrator's evaluation seed and `salt`.

    Raises outside a worker unless a seed was set (`context.set_command_context`): a silently fixed
    seed is what a memoizing candidate exploits. Use different salts for different tensors or trials.
    """
    import torch

    generator = torch.Generator(device=torch.device(device))
    generator.manual_seed(derive_seed(evaluation_seed(), salt))
    return generator


def random_tensor(
    shape: Sequence[int],
    dtype: Any,
    device: Any,
    generator: Any,
    *,
    low: float | None = None,
    high: float | None = None,
) -> Any:
    """Uniform random values in [low, high): floats default to [-1, 1) (never all zeros), integers to
    [-100, 100) clipped to the dtype's range, bool to {False, True}. Low-precision floats are drawn in
    fp32 and rounded, so every dtype gets the same distribution."""
    import torch

    shape = tuple(shape)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator, device=device).bool()
    if dtype.is_floating_point:
        low = -1.0 if low is None else low
        high = 1.0 if high is None else high
        draw_dtype = torch.float64 if dtype == torch.float64 else torch.float32
        values = torch.rand(shape, generator=generator, device=device, dtype=draw_dtype)
        return (values * (high - low) + low).to(dtype)
    if dtype.is_complex:
        raise TypeError("random_tensor does not draw complex values; draw real and imaginary parts")
    info = torch.iinfo(dtype)
    int_low = max(int(DEFAULT_INT_RANGE[0] if low is None else low), info.min)
    int_high = min(int(DEFAULT_INT_RANGE[1] if high is None else high), info.max)
    values = torch.randint(int_low, int_high, shape, generator=generator, device=device, dtype=torch.int64)
    return values.to(dtype)


def _int_sentinel(dtype: Any) -> int:
    import torch

    info = torch.iinfo(dtype)
    return info.min if info.min < 0 else info.max


def poison_(outputs: Any) -> Any:
    """Fill output buffers in place with values no kernel should leave: NaN for floating point, the
    most negative value (unsigned: the largest) for integers, True for bool. Accepts a tensor or a
    tuple/list/dict of them (other values are left alone); returns its argument."""
    import torch

    if isinstance(outputs, torch.Tensor):
        if outputs.is_floating_point() or outputs.is_complex():
            outputs.fill_(math.nan)
        elif outputs.dtype == torch.bool:
            outputs.fill_(True)
        else:
            outputs.fill_(_int_sentinel(outputs.dtype))
    elif isinstance(outputs, (tuple, list)):
        for item in outputs:
            poison_(item)
    elif isinstance(outputs, dict):
        for item in outputs.values():
            poison_(item)
    return outputs


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
    100k elements has entries near 1e-5, and an unscaled atol of 1e-2 lets zeros pass (KernelBench
    #165). Pass `base` (atol factor, rtol) to loosen or tighten, e.g. (1e-2, 1e-2) for tf32 dots.
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


# ---- calling candidates ---------------------------------------------------------------------------


def clone_args(args: Sequence[Any]) -> tuple:
    """Private copies of the tensors in `args` (other values passed through)."""
    import torch

    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _as_tuple(outputs: Any) -> tuple:
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)


def _call(
    candidate: Callable, inputs: tuple, output_factory: Callable | None, outputs: Any = None
) -> tuple[Any, Any]:
    """Call the candidate; returns (its output, the preallocated outputs or None)."""
    if output_factory is None:
        return candidate(*inputs), None
    if outputs is None:
        outputs = output_factory(*inputs)
    poison_(outputs)
    candidate(*inputs, *_as_tuple(outputs))
    return outputs, outputs


def _refill_in_place(inputs: tuple, fresh: tuple) -> tuple:
    """New values into the *same* tensors (so an address-keyed cache sees a hit and serves stale
    output); non-tensor arguments take their new value."""
    import torch

    if len(fresh) != len(inputs):
        raise ValueError("make_inputs(salt) must return the same number of arguments for every salt")
    refilled = []
    for old, new in zip(inputs, fresh, strict=True):
        if isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor):
            if old.shape != new.shape:
                raise ValueError("make_inputs(salt) must return the same shapes for every salt")
            old.copy_(new)
            refilled.append(old)
        else:
            refilled.append(new)
    return tuple(refilled)


def outputs_equal(a: Any, b: Any) -> bool:
    """Bitwise equality of two outputs (tensors or sequences of tensors), NaN equal to NaN."""
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b) or _equal_nan(a, b))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(outputs_equal(x, y) for x, y in zip(a, b, strict=True))
    return a is b


def _equal_nan(a: Any, b: Any) -> bool:
    import torch

    if not (a.is_floating_point() or a.is_complex()):
        return False
    return bool(torch.isclose(a, b, rtol=0.0, atol=0.0, equal_nan=True).all())


def _clone_outputs(outputs: Any) -> Any:
    import torch

    if isinstance(outputs, torch.Tensor):
        return outputs.detach().clone()
    if isinstance(outputs, (tuple, list)):
        return tuple(_clone_outputs(o) for o in outputs)
    return outputs


def inputs_unchanged(inputs: Sequence[Any], snapshot: Sequence[Any]) -> dict:
    """Verdict: every tensor in `inputs` still equals its snapshot (KernelBench #13: a candidate that
    zeroes its inputs makes a later reference run agree with it)."""
    import torch

    for index, (now, before) in enumerate(zip(inputs, snapshot, strict=True)):
        if isinstance(now, torch.Tensor) and not outputs_equal(now, before):
            return verdict(False, f"input {index} was modified by the candidate")
    return verdict(True)


def check_input_dependence(
    fn: Callable,
    make_inputs: Callable[[int], Sequence[Any]],
    *,
    reference: Callable | None = None,
    output_factory: Callable | None = None,
) -> dict:
    """Verdict: the output changes when the inputs change in place.

    Calls `fn` on `make_inputs(0)`, refills the same input buffers with `make_inputs(1)` and calls it
    again (re-poisoning any preallocated outputs). Identical outputs mean "output does not depend on
    input" (or a cache keyed on buffer addresses). With `reference`, a reference that itself gives
    identical outputs fails the case instead: it cannot detect memoized outputs.
    """
    inputs = tuple(make_inputs(0))
    first, outputs = _call(fn, inputs, output_factory)
    first = _clone_outputs(first)
    expected_first = reference(*clone_args(inputs)) if reference is not None else None
    inputs = _refill_in_place(inputs, tuple(make_inputs(1)))
    second, _ = _call(fn, inputs, output_factory, outputs)
    if reference is not None and outputs_equal(expected_first, reference(*clone_args(inputs))):
        return verdict(
            False, "reference output does not depend on input: the case cannot detect memoized outputs"
        )
    if outputs_equal(first, second):
        return verdict(
            False,
            "output does not depend on input: identical outputs for two different inputs "
            "(refilled in place, so a cache keyed on buffer addresses looks the same)",
        )
    return verdict(True)


def verify_call(
    candidate: Callable,
    reference: Callable,
    make_inputs: Callable[[int], Sequence[Any]],
    *,
    output_factory: Callable | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    base: tuple[float, float] | None = None,
    require_contiguous: bool = False,
    allow_nan: bool = False,
    allow_constant: bool = False,
    allow_input_mutation: bool = False,
) -> dict:
    """All checks in one: two trials on seeded random inputs, the second refilling the first's buffers.

    Each trial computes the reference on private copies of the inputs first (and keeps its result
    alive, so the caching allocator cannot hand its memory to the candidate, #12), poisons
    preallocated outputs, calls the candidate, then checks type/shape/dtype/device/aliasing, values
    (`compare`), constant outputs and unmodified inputs. The second trial also requires the output to
    differ from the first trial's. Returns the merged verdict (worst metrics of both trials).
    """
    compare_options = {
        "atol": atol,
        "rtol": rtol,
        "base": base,
        "require_contiguous": require_contiguous,
        "allow_nan": allow_nan,
        "allow_constant": allow_constant,
    }
    inputs = tuple(make_inputs(0))
    first = _trial(candidate, reference, inputs, output_factory, None, allow_input_mutation, compare_options)
    if not first["verdict"]["passed"]:
        return first["verdict"]
    inputs = _refill_in_place(inputs, tuple(make_inputs(1)))
    second = _trial(
        candidate, reference, inputs, output_factory, first["outputs"], allow_input_mutation, compare_options
    )
    verdicts = [first["verdict"], second["verdict"]]
    if outputs_equal(first["expected"], second["expected"]):
        verdicts.append(
            verdict(
                False, "reference output does not depend on input: the case cannot detect memoized outputs"
            )
        )
    elif outputs_equal(first["actual"], second["actual"]):
        verdicts.append(
            verdict(
                False,
                "output does not depend on input: it did not change when the inputs were refilled in place "
                "(memoized, or cached by buffer address?)",
            )
        )
    return merge_verdicts(verdicts)


def _trial(
    candidate: Callable,
    reference: Callable,
    inputs: tuple,
    output_factory: Callable | None,
    outputs: Any,
    allow_input_mutation: bool,
    compare_options: dict,
) -> dict:
    snapshot = clone_args(inputs)
    expected = reference(*clone_args(inputs))
    actual, outputs = _call(candidate, inputs, output_factory, outputs)
    result = compare(actual, expected, inputs=inputs, **compare_options)
    if not allow_input_mutation:
        result = merge_verdicts([result, inputs_unchanged(inputs, snapshot)])
    return {"verdict": result, "expected": expected, "actual": _clone_outputs(actual), "outputs": outputs}


# ---- re-checking timed outputs -------------------------------------------------------------------


def recheck_output(actual: Any, reference: Callable, inputs: Sequence[Any], **compare_options: Any) -> dict:
    """Verdict for an output produced during benchmarking: `reference(*inputs)` computed now, on
    private copies, compared with `compare` (options passed through)."""
    expected = reference(*clone_args(inputs))
    return compare(actual, expected, inputs=tuple(inputs), **compare_options)


def last_output_check(
    reference: Callable,
    inputs: Sequence[Any],
    *,
    outputs: Any = None,
    **compare_options: Any,
) -> Callable[[Any], None]:
    """A `check_last` for `timing.measure`: re-checks the output of the last timed call (#11: a
    kernel correct for the verify gate that drifts or skips work once timing starts).

    The expected output comes from a snapshot of `inputs` taken now, so inputs mutated during the
    benchmark also fail. For kernels that write into preallocated buffers pass them as `outputs`;
    they are checked instead of the callable's return value. Raises `OutputCheckFailed`.
    """
    snapshot = clone_args(inputs)

    def check(last_output: Any) -> None:
        actual = outputs if outputs is not None else last_output
        result = recheck_output(actual, reference, snapshot, **compare_options)
        result = merge_verdicts([result, inputs_unchanged(inputs, snapshot)])
        if not result["passed"]:
            raise OutputCheckFailed(
                verdict(False, "last timed output: " + result["diagnostics"], **result["metrics"])
            )

    return check
