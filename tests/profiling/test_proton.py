"""Hatchet parsing (real H200 trees), trace summaries and CPU-only unavailability of Proton."""

from __future__ import annotations

import json
import time

import pytest

from sandbox_worker.harness_kit import proton
from sandbox_worker.harness_kit.proton import parse_hatchet, summarize_chrome_trace


def test_fixture_with_main_scope(fixtures):
    result = parse_hatchet(fixtures / "h200_vector_add.hatchet", main_scope="add_kernel")
    assert result["available"] is True
    assert result["kernels"] == [{"name": "add_kernel", "time_us": pytest.approx(921.25), "count": 5,
                                  "per_launch_us": pytest.approx(184.25), "is_main": True}]
    # no per-call scopes: one main launch per call is assumed (and said), wrapper time is not measurable
    assert result["calls"] == 5
    assert result["main_kernel_us"] == pytest.approx(184.25)
    assert result["non_main_kernel_us"] == 0.0  # measured: the tree holds no other kernel
    assert result["wrapper_us"] is None
    assert any("wrapper_us" in line and "null" in line for line in result["diagnostics"])
    assert result["device"] == {"backend": "CUDA", "arch": "90", "num_sms": 132}


def test_fixture_without_main_scope(fixtures):
    payload = json.loads((fixtures / "h200_vector_add.hatchet").read_text())
    result = parse_hatchet(payload)
    assert result["kernels"][0]["per_launch_us"] == pytest.approx(184.25)
    assert result["kernels"][0]["is_main"] is False
    assert result["main_kernel_us"] is None and result["non_main_kernel_us"] is None
    assert result["wrapper_us"] is None and result["calls"] is None
    assert any("main_scope is not set" in line for line in result["diagnostics"])


def test_fixture_with_explicit_calls_and_unknown_main_scope(fixtures):
    result = parse_hatchet(fixtures / "h200_vector_add.hatchet", main_scope="matmul_kernel", calls=5)
    assert result["main_kernel_us"] is None
    assert result["non_main_kernel_us"] == pytest.approx(184.25)
    assert result["total_kernel_us"] == pytest.approx(184.25)
    assert any("matched no kernel" in line and "add_kernel" in line for line in result["diagnostics"])


def test_real_call_scopes_give_per_call_medians(fixtures):
    result = parse_hatchet(fixtures / "h200_vector_add_call_scopes.hatchet", main_scope="add_kernel")
    payload = json.loads((fixtures / "h200_vector_add_call_scopes.hatchet").read_text())
    scopes = payload[0]["children"]
    cpu = sorted(node["metrics"]["cpu_time (ns)"] for node in scopes)
    kernel = sorted(node["children"][0]["metrics"]["time (ns)"] for node in scopes)
    wrapper = sorted(node["metrics"]["cpu_time (ns)"] - node["children"][0]["metrics"]["time (ns)"] for node in scopes)
    assert result["calls"] == 10
    assert result["call_us"] == pytest.approx((cpu[4] + cpu[5]) / 2000)
    assert result["main_kernel_us"] == pytest.approx((kernel[4] + kernel[5]) / 2000)
    assert result["wrapper_us"] == pytest.approx((wrapper[4] + wrapper[5]) / 2000)
    assert result["non_main_kernel_us"] == 0.0
    assert result["kernels"][0]["count"] == 10
    assert result["diagnostics"] == []


def _kernel(name: str, ns: int, count: int = 1) -> dict:
    return {"frame": {"name": name, "type": "function"}, "children": [],
            "metrics": {"count": count, "device_id": "0", "device_type": "CUDA", "time (ns)": ns}}


def _call(index: int, cpu_ns: int | None, *kernels: dict) -> dict:
    metrics = {} if cpu_ns is None else {"cpu_time (ns)": cpu_ns}
    return {"frame": {"name": f"tlx_agent_call_{index}", "type": "function"}, "metrics": metrics,
            "children": list(kernels)}


def _tree(*children: dict) -> list:
    return [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {"count": 0, "time (ns)": 0},
             "children": list(children)}, {}]


def test_main_and_non_main_split_per_call():
    tree = _tree(*(_call(i, 100_000, _kernel("main_k", 40_000), _kernel("fill", 5_000), _kernel("fill", 5_000))
                   for i in range(3)))
    result = parse_hatchet(tree, main_scope="main_k")
    assert result["main_kernel_us"] == pytest.approx(40.0)
    assert result["non_main_kernel_us"] == pytest.approx(10.0)
    assert result["wrapper_us"] == pytest.approx(50.0)
    assert [k["name"] for k in result["kernels"]] == ["main_k", "fill"]
    assert result["kernels"][1]["count"] == 6


def test_call_scopes_without_cpu_time_leave_wrapper_null():
    result = parse_hatchet(_tree(_call(0, None, _kernel("k", 1000))), main_scope="k")
    assert result["main_kernel_us"] == pytest.approx(1.0)
    assert result["wrapper_us"] is None
    assert any("cpu_time" in line for line in result["diagnostics"])


def test_malformed_payload_is_unavailable():
    result = parse_hatchet([], main_scope="k")
    assert result["available"] is False and result["diagnostics"]


def test_chrome_trace_summary():
    trace = {"traceEvents": [
        {"name": "load", "ph": "X", "ts": 0, "dur": 10, "pid": "k Core0 CTA0", "tid": "warp 0 (line 3)"},
        {"name": "load", "ph": "X", "ts": 0, "dur": 30, "pid": "k Core0 CTA0", "tid": "warp 1 (line 3)"},
        {"name": "store", "ph": "X", "ts": 40, "dur": 5, "pid": "k Core0 CTA0", "tid": "warp 0 (line 9)"},
        {"name": "meta", "ph": "M"},
    ]}
    summary = summarize_chrome_trace(trace)
    assert summary["events"] == 3 and summary["lanes"] == 3
    assert summary["scopes"][0] == {"name": "load", "count": 2, "total": 40.0, "max": 30.0}


def test_an_empty_trace_file_names_the_missing_scope_markers(tmp_path):
    empty = tmp_path / "proton_instrumentation.chrome_trace"
    empty.write_text("")
    with pytest.raises(ValueError, match="no proton.language scope markers"):
        summarize_chrome_trace(empty)
    full = tmp_path / "full.chrome_trace"
    full.write_text('{"traceEvents": [{"name": "s", "ph": "X", "dur": 4, "pid": "p", "tid": "t"}]}')
    assert summarize_chrome_trace(full)["events"] == 1


def test_instrumentation_rejects_granularities_other_than_warp(tmp_path):
    for granularity in ("warp_group", "cta", "warp_2"):
        with pytest.raises(ValueError, match="warp"):
            proton.collect_instrumentation_trace(lambda: None, artifacts_dir=str(tmp_path), granularity=granularity)


def test_cpu_only_collection_is_unavailable_with_nulls(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    calls = []
    started = time.monotonic()
    result = proton.collect_launch_attribution(lambda: calls.append(1), artifacts_dir=str(tmp_path),
                                               main_scope="k")
    assert time.monotonic() - started < 5
    assert result["available"] is False and calls == []
    assert result["wrapper_us"] is None and result["main_kernel_us"] is None and result["non_main_kernel_us"] is None
    assert "TRITON_INTERPRET" in result["diagnostics"][0]
    trace = proton.collect_instrumentation_trace(lambda: calls.append(1), artifacts_dir=str(tmp_path))
    assert trace["diagnostic_only"] is True and trace["available"] is False and calls == []


def test_no_cuda_device_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    result = proton.collect_launch_attribution(lambda: None, artifacts_dir=str(tmp_path))
    assert result["available"] is False
    assert any("CUDA" in line for line in result["diagnostics"])
