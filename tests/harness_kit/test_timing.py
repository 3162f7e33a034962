"""harness_kit.timing: the CPU fallback and the stopping rule here; the CUDA paths run on a GPU only."""

from __future__ import annotations

import math
import statistics
import time

import pytest

from sandbox_worker.harness_kit import timing

CONTRACT_KEYS = {"samples_us", "warmup_count", "cache_policy", "metrics"}
METRIC_KEYS = {"rse", "mode", "flush_bytes", "stopped_by"}


@pytest.fixture(autouse=True)
def no_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def spin(microseconds: float) -> None:
    """Busy-wait (sleep granularity is too coarse and too noisy for µs-level tests)."""
    deadline = time.perf_counter() + microseconds / 1e6
    while time.perf_counter() < deadline:
        pass


class Counter:
    def __init__(self, work_us: float = 0.0) -> None:
        self.calls = 0
        self.work_us = work_us

    def __call__(self) -> int:
        self.calls += 1
        if self.work_us:
            spin(self.work_us)
        return self.calls


# ---- pure parts ----------------------------------------------------------------------------------


def test_running_stats_match_the_statistics_module():
    values = [3.0, 5.5, 4.25, 10.0, 7.0, 6.5]
    stats = timing.RunningStats()
    for value in values:
        stats.add(value)
    assert stats.n == len(values)
    assert stats.mean == pytest.approx(statistics.fmean(values))
    assert stats.stdev == pytest.approx(statistics.stdev(values))
    assert stats.rse == pytest.approx(
        statistics.stdev(values) / math.sqrt(len(values)) / statistics.fmean(values)
    )
    assert timing.RunningStats().rse == math.inf


def stats_of(values):
    stats = timing.RunningStats()
    for value in values:
        stats.add(value)
    return stats


def test_stop_rule_order_min_samples_then_cap_then_rse_then_budget():
    steady = stats_of([10.0] * 20)
    noisy = stats_of([1.0, 100.0] * 10)
    rule = {"min_samples": 10, "max_samples": 30, "target_rse": 0.005, "budget_seconds": 1.0}
    assert timing.stop_reason(stats_of([10.0] * 9), 99.0, **rule) is None  # minimum beats the budget
    assert timing.stop_reason(steady, 0.0, **rule) == "rse"
    assert timing.stop_reason(noisy, 0.5, **rule) is None
    assert timing.stop_reason(noisy, 1.0, **rule) == "budget"
    assert timing.stop_reason(stats_of([1.0, 100.0] * 15), 0.0, **rule) == "max_samples"
    few = stats_of([10.0] * (timing.MIN_SAMPLES_FOR_RSE - 1))
    assert timing.stop_reason(few, 0.0, **{**rule, "min_samples": 1}) is None  # too few for the rse rule


# ---- the CPU fallback ----------------------------------------------------------------------------


def test_cpu_measure_returns_the_benchmark_contract_in_microseconds():
    fn = Counter(work_us=200.0)
    result = timing.measure(fn, repetitions=12, device="cpu", budget_seconds=0.5)
    assert set(result) == CONTRACT_KEYS
    assert set(result["metrics"]) >= METRIC_KEYS
    samples = result["samples_us"]
    assert len(samples) >= 12
    assert all(isinstance(s, float) and s > 0 for s in samples)
    assert 150.0 < statistics.median(samples) < 5_000.0  # µs, not ns or s
    assert result["cache_policy"] == timing.CACHE_POLICY_CPU
    assert result["metrics"]["mode"] == "cpu" and result["metrics"]["flush_bytes"] is None
    assert result["warmup_count"] >= 1
    assert fn.calls == result["warmup_count"] + len(samples)


def test_warm_up_lasts_about_warmup_seconds():
    fn = Counter(work_us=100.0)
    result = timing.measure(fn, repetitions=3, device="cpu", warmup_seconds=0.05, budget_seconds=0.01)
    # 50 ms of 100 µs calls: at most 500 (+1), and far more than the minimum of one.
    assert 10 < result["warmup_count"] <= 0.05 * 1e6 / 100.0 + 1


def test_cpu_measure_stops_on_rse():
    fn = Counter(work_us=300.0)
    result = timing.measure(fn, repetitions=5, device="cpu", target_rse=0.5, budget_seconds=30.0)
    assert result["metrics"]["stopped_by"] == "rse"
    assert result["metrics"]["rse"] < 0.5
    # Usually right at the minimum; a scheduling hiccup on a busy machine may need a few more.
    assert max(5, timing.MIN_SAMPLES_FOR_RSE) <= len(result["samples_us"]) < 1_000


def test_cpu_measure_honours_the_budget():
    fn = Counter(work_us=1_000.0)
    started = time.perf_counter()
    result = timing.measure(
        fn, repetitions=3, device="cpu", target_rse=0.0, budget_seconds=0.1, warmup_seconds=0.0
    )
    elapsed = time.perf_counter() - started
    assert result["metrics"]["stopped_by"] == "budget"
    assert elapsed < 0.1 + 0.25  # the 25 ms warm-up default is off; one call past the budget at most
    assert 3 <= len(result["samples_us"]) <= 0.1 / 1e-3 + 1


def test_repetitions_are_a_lower_bound_even_past_the_budget():
    result = timing.measure(
        Counter(work_us=500.0), repetitions=40, device="cpu", target_rse=0.0, budget_seconds=0.0
    )
    assert len(result["samples_us"]) == 40
    assert result["metrics"]["stopped_by"] == "budget"


def test_max_samples_caps_sampling():
    result = timing.measure(
        Counter(), repetitions=3, device="cpu", target_rse=0.0, budget_seconds=60.0, max_samples=25
    )
    assert len(result["samples_us"]) == 25
    assert result["metrics"]["stopped_by"] == "max_samples"


def test_check_last_receives_the_output_of_the_last_timed_call():
    fn = Counter()
    seen = []
    timing.measure(fn, repetitions=10, device="cpu", check_last=seen.append)
    assert seen == [fn.calls]


def test_check_last_failure_propagates():
    def reject(output):
        raise AssertionError("wrong last output")

    with pytest.raises(AssertionError, match="wrong last output"):
        timing.measure(Counter(), repetitions=5, device="cpu", check_last=reject)


def test_check_last_sees_poison_when_a_call_skips_its_work():
    torch = pytest.importorskip("torch")
    buffer = torch.zeros(16)
    calls = []

    def compute_once_then_skip():
        if not calls:
            buffer.fill_(2.0)
        calls.append(1)
        return buffer

    seen = []
    timing.measure(
        compute_once_then_skip, repetitions=5, device="cpu", check_last=lambda out: seen.append(out.clone())
    )
    assert torch.isnan(seen[0]).all()


def test_triton_interpreter_forces_cpu_timing(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    result = timing.measure(Counter(), repetitions=5, device="cuda")
    assert result["metrics"]["mode"] == "cpu"
    with pytest.raises(ValueError, match="needs a CUDA device"):
        timing.measure(Counter(), repetitions=5, mode="events")


def test_gpu_modes_are_refused_on_a_cpu_device():
    for mode in ("events", "cuda_graph"):
        with pytest.raises(ValueError, match="needs a CUDA device"):
            timing.measure(Counter(), repetitions=5, device="cpu", mode=mode)
    with pytest.raises(ValueError, match="unknown timing mode"):
        timing.measure(Counter(), repetitions=5, device="cpu", mode="wallclock")
    with pytest.raises(ValueError, match="repetitions"):
        timing.measure(Counter(), repetitions=0, device="cpu")


def test_cuda_available_is_a_bool():
    assert isinstance(timing.cuda_available(), bool)


def test_stream_escape_adds_hidden_work_back_into_the_samples():
    honest_drains = [3.0, 3.2, 2.9, 3.1]
    samples, info = timing._stream_escape([10.0, 10.0, 10.0], [3.1, 3.0, 3.2], honest_drains)
    assert samples == [10.0, 10.0, 10.0] and info["stream_escape_detected"] is False
    samples, info = timing._stream_escape([10.0, 10.0, 10.0], [503.0, 403.0, 603.0], honest_drains)
    assert info["stream_escape_detected"] is True
    assert samples == pytest.approx([10.0 + 503.0 - 3.05, 10.0 + 403.0 - 3.05, 10.0 + 603.0 - 3.05])


# ---- CUDA (skipped on CPU-only machines; run on the H200 host) ------------------------------------

torch = pytest.importorskip("torch")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def on_gpu(n: int):
    """Random data made on the CPU: a failed graph capture can leave the CUDA generator unusable."""
    return torch.randn(n).cuda()


def cuda_add(n: int):
    x, y = on_gpu(n), on_gpu(n)
    return lambda: x + y


@needs_cuda
def test_events_mode_flushes_twice_the_l2_and_returns_microseconds():
    result = timing.measure(cuda_add(1 << 24), repetitions=20, mode="events", budget_seconds=0.5)
    l2_bytes = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    assert result["cache_policy"] == timing.CACHE_POLICY_EVENTS
    assert result["metrics"]["flush_bytes"] >= 2 * l2_bytes
    assert len(result["samples_us"]) >= 20 and min(result["samples_us"]) > 1.0
    assert result["metrics"]["stream_escape_detected"] is False


@needs_cuda
def test_only_the_first_measurement_on_a_device_in_a_process_settles(monkeypatch):
    monkeypatch.setattr(timing, "_settled_devices", set())
    first = timing.measure(cuda_add(1 << 20), repetitions=5, mode="events", budget_seconds=0.1, settle_seconds=0.3)
    second = timing.measure(cuda_add(1 << 20), repetitions=5, mode="events", budget_seconds=0.1, settle_seconds=0.3)
    assert first["metrics"]["warmup_seconds"] >= 0.3
    assert second["metrics"]["warmup_seconds"] < 0.2


@needs_cuda
def test_auto_picks_cuda_graph_for_short_kernels_and_events_for_long_ones():
    short = timing.measure(cuda_add(1 << 12), repetitions=20, budget_seconds=0.5)
    long = timing.measure(cuda_add(1 << 26), repetitions=20, budget_seconds=0.5)
    assert short["metrics"]["mode"] == "cuda_graph"
    assert short["cache_policy"] == timing.CACHE_POLICY_CUDA_GRAPH
    assert long["metrics"]["mode"] == "events"
    assert statistics.median(short["samples_us"]) < statistics.median(long["samples_us"])


@needs_cuda
def test_cuda_graph_mode_removes_launch_latency():
    fn = cuda_add(1 << 12)
    events = timing.measure(fn, repetitions=50, mode="events", budget_seconds=0.5)
    graph = timing.measure(fn, repetitions=50, mode="cuda_graph", budget_seconds=0.5)
    assert 0 < statistics.median(graph["samples_us"]) < statistics.median(events["samples_us"])


@needs_cuda
def test_cuda_graph_mode_checks_the_replayed_output():
    x = on_gpu(1 << 12)
    seen = []
    timing.measure(
        lambda: x * 2, repetitions=10, mode="cuda_graph", check_last=lambda out: seen.append(out.clone())
    )
    torch.testing.assert_close(seen[0], x * 2)


@needs_cuda
def test_cuda_graph_work_done_only_at_capture_leaves_poison_or_fails():
    x = on_gpu(1 << 12)
    side = torch.cuda.Stream()
    seen = []

    def eager_on_unjoined_stream():
        result = torch.empty_like(x)
        with torch.cuda.stream(side):
            torch.mul(x, 2, out=result)
        side.synchronize()
        return result

    try:
        timing.measure(
            eager_on_unjoined_stream,
            repetitions=5,
            mode="cuda_graph",
            check_last=lambda out: seen.append(out.clone()),
        )
    except RuntimeError as exc:  # the capture refused the unjoined stream: a failed benchmark too
        assert "capture" in str(exc).lower()
        return
    assert torch.isnan(seen[0]).all()


@needs_cuda
def test_work_hidden_on_a_side_stream_is_detected_and_paid_for():
    big = on_gpu(1 << 26)
    small = on_gpu(1 << 20)
    side = torch.cuda.Stream()

    def cheat():
        out = small * 2
        with torch.cuda.stream(side):
            for _ in range(5):
                big.mul_(1.0)  # the "real" work, on a stream the events do not see
        return out

    honest = timing.measure(lambda: small * 2, repetitions=20, mode="events", budget_seconds=0.3)
    cheating = timing.measure(cheat, repetitions=20, mode="events", budget_seconds=0.3)
    assert honest["metrics"]["stream_escape_detected"] is False
    assert cheating["metrics"]["stream_escape_detected"] is True
    assert statistics.median(cheating["samples_us"]) > 5 * statistics.median(honest["samples_us"])
