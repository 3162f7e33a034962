"""profile_with_kit on a CPU-only machine: every requested tool unavailable, nulls and diagnostics, fast."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sandbox_worker.harness_kit import profile_kit
from sandbox_worker.harness_kit.profile_kit import (
    build_replay_spec,
    profile_with_kit,
    resolve_tools,
    safe_case_id,
)

CASE = {"case_id": "n=1024", "parameters": {"n": 1024}, "weight": 1, "protected": True}


def _request(tmp_path: Path, **overrides) -> dict:
    return {"level": "summary", "tools": ["proton_launch", "ncu"], "experiment_id": "r001-c000",
            "artifacts_dir": str(tmp_path / "artifacts"), "reason": "candidate", "diagnostic_only": False,
            **overrides}


@pytest.mark.parametrize("interpret", ["1", None])
def test_cpu_request_returns_nulls_and_diagnostics_quickly(tmp_path, monkeypatch, interpret):
    if interpret is None:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            pytest.skip("a CUDA device is present")
    else:
        monkeypatch.setenv("TRITON_INTERPRET", interpret)
    launched = []
    started = time.monotonic()
    result = profile_with_kit(lambda: launched.append(1), request=_request(tmp_path), case=CASE,
                              kernel_name="add_kernel", main_scope="add_kernel",
                              ncu_replay={"harness_path": __file__, "kernel_source": "x = 1\n"})
    assert time.monotonic() - started < 10
    assert launched == []
    json.dumps(result, allow_nan=False)  # plain JSON
    assert result["level"] == "summary" and result["tools"] == ["proton_launch", "ncu"]
    assert result["scope"] == {"experiment_id": "r001-c000", "case_id": "n=1024", "kernel": "add_kernel"}
    proton, ncu = result["proton"], result["ncu"]
    assert proton["available"] is False
    assert proton["wrapper_us"] is None and proton["main_kernel_us"] is None and proton["non_main_kernel_us"] is None
    assert ncu["available"] is False and ncu["summary"]["duration_us"] is None
    assert all(value is None for value in ncu["summary"].values())
    assert result["instrumentation"] is None
    assert any(line.startswith("proton: ") for line in result["diagnostics"])
    assert any(line.startswith("ncu: ") for line in result["diagnostics"])
    assert Path(result["artifacts"]["artifacts_dir"]).is_dir()


def test_legacy_request_uses_default_tools_and_resolves_native_profiler(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("TLX_WORKER_SCRATCH", str(tmp_path))
    result = profile_with_kit(lambda: None, request=None, case=CASE, kernel_name=None, main_scope="k",
                              ncu_replay=None)
    assert result["level"] == "summary"
    assert result["tools"] == ["proton_launch", "ncu"]
    assert result["scope"]["kernel"] == "k"
    assert result["artifacts"]["artifacts_dir"].startswith(str(tmp_path))
    assert result["ncu"]["available"] is False


def test_deep_ncu_only_request(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    result = profile_with_kit(lambda: None, request=_request(tmp_path, level="deep", tools=["ncu"]), case=CASE,
                              kernel_name="k", main_scope=None, ncu_replay=None)
    assert result["proton"] is None
    assert result["ncu"]["level"] == "deep"
    assert result["ncu"]["stalls"] is not None and all(v is None for v in result["ncu"]["stalls"].values())


def test_instrumentation_requires_diagnostic_only(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    result = profile_with_kit(lambda: None, request=_request(tmp_path, tools=["proton_intra_kernel"]), case=CASE,
                              kernel_name="k", main_scope="k", ncu_replay=None)
    assert result["instrumentation"] is None
    assert any("not diagnostic_only" in line for line in result["diagnostics"])
    request = _request(tmp_path, tools=["proton_intra_kernel"], diagnostic_only=True, granularity="warp")
    result = profile_with_kit(lambda: None, request=request, case=CASE, kernel_name="k", main_scope="k",
                              ncu_replay=None)
    assert result["instrumentation"]["diagnostic_only"] is True
    assert result["instrumentation"]["available"] is False


def test_bad_requests_are_rejected(tmp_path):
    with pytest.raises(ValueError):
        profile_with_kit(lambda: None, request=_request(tmp_path, level="full"), case=CASE, kernel_name="k",
                         main_scope="k", ncu_replay=None)
    with pytest.raises(ValueError):
        profile_with_kit(lambda: None, request=_request(tmp_path, artifacts_dir="relative"), case=CASE,
                         kernel_name="k", main_scope="k", ncu_replay=None)


def test_ncu_path_reports_missing_kernel_name_and_replay(tmp_path, monkeypatch):
    monkeypatch.setattr(profile_kit, "cuda_unavailable_reason", lambda: None)
    result = profile_with_kit(lambda: None, request=_request(tmp_path, tools=["ncu"]), case=CASE,
                              kernel_name=None, main_scope=None, ncu_replay=None)
    assert any("kernel_name" in line for line in result["ncu"]["diagnostics"])
    result = profile_with_kit(lambda: None, request=_request(tmp_path, tools=["ncu"]), case=CASE,
                              kernel_name="k", main_scope=None, ncu_replay=None)
    assert any("ncu_replay" in line for line in result["ncu"]["diagnostics"])
    result = profile_with_kit(lambda: None, request=_request(tmp_path, tools=["ncu"]), case=CASE,
                              kernel_name="k", main_scope=None, ncu_replay={"harness_path": "/nonexistent.py"})
    assert result["ncu"]["available"] is False
    assert any("harness_path" in line for line in result["ncu"]["diagnostics"])


def test_build_replay_spec_writes_the_kernel_source(tmp_path):
    spec, problem = build_replay_spec(
        {"harness_path": __file__, "kernel_source": "SOURCE\n", "target": {"backend": "cuda"}, "entry": "launch",
         "profiled_calls": 2},
        case=CASE, seed=9, artifacts_dir=tmp_path)
    assert problem is None and spec is not None
    assert Path(spec["kernel_path"]).read_text() == "SOURCE\n"
    assert spec["case"] == CASE and spec["seed"] == 9 and spec["entry"] == "launch"
    assert spec["warmup_calls"] == 3 and spec["profiled_calls"] == 2 and spec["gate"] == "cuda_profiler_api"
    spec, problem = build_replay_spec({"harness_path": __file__, "bogus": 1}, case=CASE, seed=None,
                                      artifacts_dir=tmp_path)
    assert spec is None and "bogus" in problem
    spec, problem = build_replay_spec({"harness_path": __file__}, case=CASE, seed=None, artifacts_dir=tmp_path)
    assert spec is None and "kernel_source" in problem


def test_resolve_tools_and_safe_case_id():
    assert resolve_tools(["native_profiler", "ncu", "proton_launch"], True) == (["ncu", "proton_launch"], [])
    tools, diagnostics = resolve_tools(["nsys"], True)
    assert tools == [] and "nsys" in diagnostics[0]
    assert safe_case_id("m4096_n4096") == "m4096_n4096"
    converted = safe_case_id("n=2^24 fp32")
    assert converted.startswith("n-2-24-fp32-") and len(converted) == len("n-2-24-fp32-") + 8
