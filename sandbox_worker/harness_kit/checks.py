"""Correctness checks for harness `verify` functions, hardened against the ways a candidate can pass a
naive check without computing its output (and, through `last_output_check`, against work it skips or
gets wrong once timing starts).

What the helpers enforce, and why:
- inputs are fresh random values drawn from the orchestrator's per-command seed
  (`context.evaluation_seed()`), never a fixed seed, so outputs cannot be memoized across runs
  (`seeded_inputs`);
- preallocated outputs are poisoned (NaN, or a sentinel for integers) before every call, so a kernel
  that skips work or reads uninitialized memory leaves poison behind (`poison`);
- NaN never matches, not even a NaN in the reference, unless the harness allows it (a NaN
  wildcard lets a candidate "poison the expected");
- tolerances depend on the dtype and are scaled to the output's magnitude (see `tolerance_for`), so
  returning zeros cannot pass on small outputs under a loose absolute tolerance;
- the output must be exactly `torch.Tensor` (no lazy subclasses), with the expected shape, dtype
  (no precision downgrade of the result), device and, optionally, contiguity; it must not share
  memory with an input or the reference, and inputs must not be mutated;
- constant outputs are rejected, and so are references that are (near-)constant for the inputs,
  because such a case cannot tell a kernel from a constant;
- the output must change when the inputs change *in place* (same buffers, new values), which
  catches caches keyed on `data_ptr` or `id`.

The value rules live in `comparison`. This module calls candidates (`verify_call`,
`check_input_dependence`) and re-checks timed outputs (`last_output_check`); it re-exports the names of
`seeded_inputs`, `comparison` and `poison`, so harnesses import all of them from `checks`.

Verdicts use the verify contract: `{"passed": bool, "diagnostics": str, "metrics": {"max_abs_err",
"max_rel_err", "atol", "rtol", ...}}`. Calling convention for `verify_call`: `make_inputs(salt)` returns
a tuple of arguments (tensors drawn from `make_generator(device, salt=salt)`, plus any plain values);
the reference is called as `reference(*inputs)` and returns the expected output (a tensor or a tuple
of tensors); the candidate is called as `candidate(*inputs)` and returns its output, or, with an
`output_factory`, as `candidate(*inputs, *outputs)` writing into `outputs = output_factory(*inputs)`.

Only the standard library is imported at module level; torch is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sandbox_worker.harness_kit.comparison import (
    BASE_TOLERANCES,
    base_tolerance,
    compare,
    merge_verdicts,
    output_scale,
    shares_memory,
    tolerance_for,
    verdict,
)
from sandbox_worker.harness_kit.poison import poison_
from sandbox_worker.harness_kit.seeded_inputs import (
    DEFAULT_INT_RANGE,
    derive_seed,
    make_generator,
    random_tensor,
)

__all__ = [
    "BASE_TOLERANCES",
    "DEFAULT_INT_RANGE",
    "OutputCheckFailed",
    "base_tolerance",
    "check_input_dependence",
    "clone_args",
    "compare",
    "derive_seed",
    "inputs_unchanged",
    "last_output_check",
    "make_generator",
    "merge_verdicts",
    "output_scale",
    "outputs_equal",
    "poison_",
    "random_tensor",
    "recheck_output",
    "shares_memory",
    "tolerance_for",
    "verdict",
    "verify_call",
]


class OutputCheckFailed(AssertionError):
    """Raised by `last_output_check` when the re-checked output is wrong; carries the verdict."""

    def __init__(self, verdict: dict) -> None:
        super().__init__(verdict["diagnostics"])
        self.verdict = verdict


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
    """Verdict: every tensor in `inputs` still equals its snapshot (a candidate that zeroes its
    inputs makes a later reference run agree with it)."""
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
    alive, so the caching allocator cannot hand its memory to the candidate), poisons
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
    """A `check_last` for `timing.measure`: re-checks the output of the last timed call (a
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
