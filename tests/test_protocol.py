"""Every message shape the (standard-library) worker can emit parses against the protocol models."""

from __future__ import annotations

import errno
import json

import pytest
from pydantic import ValidationError

from orchestrator.worker.process import ProtocolViolation, parse_event
from protocol.worker import (
    PROTOCOL_VERSION,
    WORKER_COMMAND_ADAPTER,
    BenchmarkValue,
    BuildValue,
    IsolationConfig,
    SetupCommand,
    VerifyValue,
)
from sandbox_worker import server


def _roundtrip(message: dict) -> object:
    return parse_event(json.dumps(message).encode())


def test_worker_messages_parse():
    assert server.PROTOCOL_VERSION == PROTOCOL_VERSION
    _roundtrip({"kind": "hello", "protocol_version": server.PROTOCOL_VERSION, "pid": 12, "python": "3.11.7"})
    _roundtrip({"kind": "ready", "isolation": {"stdin": "active"}, "harness_functions": ["build", "verify"],
                "profile_arity": 3, "versions": {"python": "3.11.7", "torch": None}, "device": None,
                "setup_seconds": 0.1})
    _roundtrip({"kind": "reply", "command_id": 1, "value": {"success": True, "diagnostics": ""}, "seconds": 0.2})
    _roundtrip({"kind": "finished"})
    for exc in (ValueError("bad"), SystemExit(3), MemoryError(), OSError(errno.EACCES, "denied"),
                OSError(errno.EFBIG, "too big")):
        for phase in ("setup", "build", "verify", "benchmark", "profile"):
            _roundtrip(server._failure(1 if phase != "setup" else None, phase, exc))


def test_failure_categories():
    assert server._failure(1, "verify", MemoryError())["category"] == "resource_limit"
    assert server._failure(1, "verify", OSError(errno.EACCES, "x"))["category"] == "sandbox_violation"
    assert "SystemExit(3)" in server._failure(1, "verify", SystemExit(3))["message"]


@pytest.mark.parametrize(("value", "model"), [
    (server.normalize_build({"success": False, "diagnostics": "x", "artifact": 1})[0], BuildValue),
    (server.normalize_build(object())[0], BuildValue),
    (server.normalize_verify(True), VerifyValue),
    (server.normalize_verify({"passed": True, "metrics": {"err": float("nan"), "n": 3}}), VerifyValue),
    (server.normalize_benchmark([1.0, 2.0]), BenchmarkValue),
    (server.normalize_benchmark({"samples_us": [3.5], "warmup_count": 2, "cache_policy": "l2"}), BenchmarkValue),
])
def test_normalized_harness_values_validate(value, model):
    model.model_validate(json.loads(json.dumps(value, allow_nan=False)))


def test_verify_passes_only_on_true():
    assert server.normalize_verify({"passed": 1})["passed"] is False  # truthy is not True
    with pytest.raises(server.HarnessContractError):
        server.normalize_verify("yes")


@pytest.mark.parametrize("samples", [[], [0.0], [-1.0], [float("inf")], ["x"]])
def test_bad_benchmark_samples_are_a_contract_error(samples):
    with pytest.raises(server.HarnessContractError):
        server.normalize_benchmark(samples)


def test_model_rejects_impossible_samples():
    with pytest.raises(ValidationError):
        BenchmarkValue.model_validate({"samples_us": [1e13]})


@pytest.mark.parametrize("line", [b"not json", b"[1,2]", b'{"kind": "reply"}', b'{"kind": "nope"}',
                                  b'{"kind": "finished", "extra": 1}'])
def test_malformed_events_are_protocol_violations(line):
    with pytest.raises(ProtocolViolation):
        parse_event(line)


def test_commands_roundtrip():
    setup = SetupCommand(run_id="r", experiment_id="e", harness_path="/h.py", kernel_path="/k.py", target={},
                         isolation=IsolationConfig(scratch_dir="/tmp/x"))
    assert WORKER_COMMAND_ADAPTER.validate_json(setup.model_dump_json()) == setup
