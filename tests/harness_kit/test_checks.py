"""harness_kit.checks: each known way a candidate fakes its output is tried with plain torch "kernels"."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from sandbox_worker.harness_kit import checks, context  # noqa: E402

N = 257  # not a power of two


@pytest.fixture(autouse=True)
def seeded():
    context.set_command_context(seed=1234, phase="verify")
    yield
    context.set_command_context(seed=None, phase=None)


def make_pair(salt: int) -> tuple:
    generator = checks.make_generator("cpu", salt=salt)
    return (
        checks.random_tensor((N,), torch.float32, "cpu", generator),
        checks.random_tensor((N,), torch.float32, "cpu", generator),
    )


def add_reference(a, b):
    return a + b


def add_into(a, b, out):
    torch.add(a, b, out=out)


def empty_like_first(a, b):
    return torch.empty_like(a)


# ---- inputs from the evaluation seed --------------------------------------------------------------


def draw(seed: int, salt: int = 0):
    context.set_command_context(seed=seed, phase="verify")
    return checks.random_tensor((64,), torch.float32, "cpu", checks.make_generator("cpu", salt=salt))


def test_same_seed_gives_same_inputs_and_different_seeds_differ():
    assert torch.equal(draw(7), draw(7))
    assert not torch.equal(draw(7), draw(8))
    assert not torch.equal(draw(7, salt=0), draw(7, salt=1))
    assert not torch.equal(draw(7, salt=1), draw(8, salt=0))  # hashed, so (s, 1) != (s + 1, 0)


def test_generator_refuses_to_run_without_a_seed():
    context.set_command_context(seed=None, phase=None)
    with pytest.raises(RuntimeError, match="no evaluation seed"):
        checks.make_generator("cpu")


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.uint8, torch.bool]
)
def test_random_tensor_has_dtype_shape_and_varied_values(dtype):
    tensor = checks.random_tensor((3, 50), dtype, "cpu", checks.make_generator("cpu"))
    assert tensor.dtype == dtype and tensor.shape == (3, 50)
    assert tensor.unique().numel() > 1
    if dtype.is_floating_point:
        assert float(tensor.float().abs().max()) <= 1.0
    if dtype == torch.uint8:
        assert int(tensor.min()) >= 0


def test_poison_fills_nan_and_integer_sentinels():
    floats, ints, unsigned = (
        torch.zeros(4),
        torch.zeros(4, dtype=torch.int32),
        torch.zeros(4, dtype=torch.uint8),
    )
    assert checks.poison_((floats, [ints, {"u": unsigned}]))[0] is floats
    assert torch.isnan(floats).all()
    assert (ints == torch.iinfo(torch.int32).min).all()
    assert (unsigned == 255).all()


# ---- tolerances -----------------------------------------------------------------------------------


def test_tolerance_depends_on_dtype_and_scales_with_magnitude():
    expected = torch.tensor([0.5, -200.0, 3.0])
    atol32, rtol32 = checks.tolerance_for(torch.float32, expected)
    atol16, rtol16 = checks.tolerance_for(torch.float16, expected.half())
    atolbf, _ = checks.tolerance_for(torch.bfloat16, expected.bfloat16())
    assert atol32 == pytest.approx(1e-4 * 200) and rtol32 == 1e-4
    assert atol32 < atol16 < atolbf and rtol32 < rtol16
    assert checks.tolerance_for(torch.int32, expected.int()) == (0.0, 0.0)
    assert checks.tolerance_for(torch.float32, expected * 1000)[0] == pytest.approx(1000 * atol32)


def test_large_output_with_small_relative_error_passes_and_small_output_with_same_error_fails():
    generator = checks.make_generator("cpu")
    large = checks.random_tensor((N,), torch.float32, "cpu", generator, low=1e4, high=2e4)
    absolute_error = 1e-2  # 1e-6 of the large values
    assert checks.compare(large + absolute_error, large)["passed"]
    small = checks.random_tensor((N,), torch.float32, "cpu", generator, low=1e-3, high=2e-3)
    verdict = checks.compare(small + absolute_error, small)
    assert not verdict["passed"]
    assert "outside atol" in verdict["diagnostics"]
    assert verdict["metrics"]["max_abs_err"] == pytest.approx(absolute_error, rel=1e-3)


def test_fp16_shortcut_of_an_fp32_result_is_caught():
    expected = draw(3)
    assert not checks.compare(expected.half().float(), expected)["passed"]


def test_integers_must_match_exactly():
    expected = torch.arange(N, dtype=torch.int32)
    assert checks.compare(expected.clone(), expected)["passed"]
    off_by_one = expected.clone()
    off_by_one[5] += 1
    verdict = checks.compare(off_by_one, expected)
    assert not verdict["passed"] and verdict["metrics"]["max_abs_err"] == 1.0


# ---- NaN, constant, metadata, aliasing ------------------------------------------------------------


def test_nan_in_output_fails_and_metrics_are_not_zero():
    expected = draw(1)
    actual = expected.clone()
    actual[10] = float("nan")
    verdict = checks.compare(actual, expected)
    assert not verdict["passed"]
    assert "NaN" in verdict["diagnostics"]
    assert verdict["metrics"]["nan_count"] == 1


def test_nan_never_matches_nan_unless_allowed():
    expected = draw(1)
    expected[3] = float("nan")
    actual = expected.clone()
    assert not checks.compare(actual, expected)["passed"]
    assert checks.compare(actual, expected, allow_nan=True)["passed"]
    actual[4] = float("nan")  # a NaN where the reference has a number still fails
    assert not checks.compare(actual, expected, allow_nan=True)["passed"]


def test_infinities_must_match_exactly():
    expected = draw(1)
    expected[0] = float("inf")
    actual = expected.clone()
    assert checks.compare(actual, expected)["passed"]
    actual[0] = 1e30
    assert not checks.compare(actual, expected)["passed"]


def test_constant_output_is_rejected():
    verdict = checks.verify_call(lambda a, b: torch.zeros_like(a), add_reference, make_pair)
    assert not verdict["passed"]
    assert "constant" in verdict["diagnostics"]


def test_near_constant_reference_is_reported_as_a_weak_case():
    def tiny_variation(a, b):
        return 5.0 + 1e-7 * a

    verdict = checks.verify_call(lambda a, b: torch.full_like(a, 5.0), tiny_variation, make_pair)
    assert not verdict["passed"]
    assert "reference output is (near-)constant" in verdict["diagnostics"]


class LazyTensor(torch.Tensor):
    pass


@pytest.mark.parametrize(
    ("make_actual", "message"),
    [
        (lambda e: e.double(), "dtype"),
        (lambda e: e.reshape(1, -1).clone(), "shape"),
        (lambda e: e.clone().as_subclass(LazyTensor), "not exactly torch.Tensor"),
        (lambda e: e.tolist(), "not exactly torch.Tensor"),
    ],
)
def test_wrong_dtype_shape_or_type_is_rejected(make_actual, message):
    expected = draw(2)
    verdict = checks.compare(make_actual(expected), expected)
    assert not verdict["passed"]
    assert message in verdict["diagnostics"]


def test_non_contiguous_output_is_rejected_when_required():
    expected = torch.randn(8, 16, generator=checks.make_generator("cpu"))
    transposed = expected.t().contiguous().t()
    assert checks.compare(transposed, expected)["passed"]
    verdict = checks.compare(transposed, expected, require_contiguous=True)
    assert not verdict["passed"] and "contiguous" in verdict["diagnostics"]


def test_output_aliasing_an_input_is_rejected():
    verdict = checks.verify_call(lambda a, b: a.add_(b), add_reference, make_pair, allow_input_mutation=True)
    assert not verdict["passed"]
    assert "input 0" in verdict["diagnostics"]
    view_verdict = checks.verify_call(lambda a, b: b[:].mul_(0).add_(a), add_reference, make_pair)
    assert not view_verdict["passed"]


def test_output_that_is_the_reference_output_is_rejected():
    expected = draw(4)
    verdict = checks.compare(expected, expected)
    assert not verdict["passed"] and "reference output" in verdict["diagnostics"]


def test_mutating_inputs_is_rejected():
    def add_then_zero(a, b):
        out = a + b
        a.zero_()
        return out

    verdict = checks.verify_call(add_then_zero, add_reference, make_pair)
    assert not verdict["passed"]
    assert "input 0 was modified" in verdict["diagnostics"]


def test_tuple_outputs_are_compared_pairwise():
    a, b = make_pair(0)
    assert checks.compare((a + b, a - b), (a + b, a - b))["passed"]
    verdict = checks.compare((a + b, a + b), (a + b, a - b))
    assert not verdict["passed"] and "output[1]" in verdict["diagnostics"]
    assert not checks.compare(a + b, (a + b, a - b))["passed"]


# ---- whole-call verification ----------------------------------------------------------------------


def test_honest_candidate_passes_with_standard_metrics():
    verdict = checks.verify_call(lambda a, b: torch.add(a, b), add_reference, make_pair)
    assert verdict["passed"], verdict["diagnostics"]
    assert set(verdict["metrics"]) >= {"max_abs_err", "max_rel_err", "atol", "rtol"}
    assert verdict["metrics"]["atol"] > 0


def test_honest_candidate_writing_into_a_preallocated_output_passes():
    verdict = checks.verify_call(add_into, add_reference, make_pair, output_factory=empty_like_first)
    assert verdict["passed"], verdict["diagnostics"]


def test_poisoned_output_left_untouched_fails():
    verdict = checks.verify_call(
        lambda a, b, out: None, add_reference, make_pair, output_factory=empty_like_first
    )
    assert not verdict["passed"]
    assert "NaN" in verdict["diagnostics"]


def test_writing_once_then_skipping_is_caught_by_the_second_poisoning():
    calls = []

    def lazy_add_into(a, b, out):
        if not calls:
            torch.add(a, b, out=out)
        calls.append(1)

    verdict = checks.verify_call(lazy_add_into, add_reference, make_pair, output_factory=empty_like_first)
    assert not verdict["passed"]
    assert len(calls) == 2


def test_output_cached_by_buffer_address_is_rejected():
    cache: dict[int, torch.Tensor] = {}

    def memoizing_add(a, b):
        key = a.data_ptr()
        if key not in cache:
            cache[key] = a + b
        return cache[key].clone()

    verdict = checks.verify_call(memoizing_add, add_reference, make_pair)
    assert not verdict["passed"]
    assert "does not depend on input" in verdict["diagnostics"]


def test_input_dependence_check_without_reference():
    cache: list[torch.Tensor] = []

    def first_answer_forever(a, b):
        if not cache:
            cache.append(a + b)
        return cache[0].clone()

    assert not checks.check_input_dependence(first_answer_forever, make_pair)["passed"]
    assert checks.check_input_dependence(add_reference, make_pair)["passed"]


def test_input_independent_reference_is_reported():
    def arange_reference(a, b):
        return torch.arange(a.numel(), dtype=a.dtype)

    verdict = checks.check_input_dependence(arange_reference, make_pair, reference=arange_reference)
    assert not verdict["passed"]
    assert "reference output does not depend on input" in verdict["diagnostics"]
    verdict = checks.verify_call(arange_reference, arange_reference, make_pair)
    assert not verdict["passed"] and "reference output does not depend" in verdict["diagnostics"]


# ---- re-checking the last timed output ------------------------------------------------------------


def test_last_output_check_accepts_the_right_output_and_raises_on_a_wrong_one():
    a, b = make_pair(0)
    check = checks.last_output_check(add_reference, (a, b))
    check(a + b)
    with pytest.raises(checks.OutputCheckFailed) as failure:
        check(a - b)
    assert not failure.value.verdict["passed"]
    assert failure.value.verdict["diagnostics"].startswith("last timed output")


def test_last_output_check_uses_preallocated_outputs_and_detects_mutated_inputs():
    a, b = make_pair(0)
    out = torch.empty_like(a)
    check = checks.last_output_check(add_reference, (a, b), outputs=out)
    torch.add(a, b, out=out)
    check(None)
    a.zero_()
    torch.add(a, b, out=out)  # consistent with the mutated input, not with the inputs it was given
    with pytest.raises(checks.OutputCheckFailed):
        check(None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_verify_call_on_cuda_with_a_device_generator():
    def make_cuda_pair(salt: int) -> tuple:
        generator = checks.make_generator("cuda", salt=salt)
        return tuple(checks.random_tensor((N,), torch.float16, "cuda", generator) for _ in range(2))

    assert checks.verify_call(add_into, add_reference, make_cuda_pair, output_factory=empty_like_first)[
        "passed"
    ]
    skipped = checks.verify_call(
        lambda a, b, out: None, add_reference, make_cuda_pair, output_factory=empty_like_first
    )
    assert not skipped["passed"]
