"""Every message shape the (standard-library) worker can emit parses against the protocol models."""

from __future__ import annotations

import errno
import json
import os
import platform
import socket
import subprocess
import sys

import pytest
from pydantic import ValidationError

from orchestrator.worker.environment import build_worker_environment
from orchestrator.worker.process import ProtocolViolation, parse_event
from protocol.worker import (
    PROTOCOL_VERSION,
    WORKER_COMMAND_ADAPTER,
    BenchmarkValue,
    BuildCommand,
    BuildValue,
    FinishedEvent,
    HelloEvent,
    IsolationConfig,
    ReadyEvent,
    ReplyEvent,
    SetupCommand,
    ShutdownCommand,
    VerifyValue,
)
from sandbox_worker import server
from sandbox_worker.isolation.layers import LAYERS
from tests.conftest import PROJECT_ROOT

HARNESS_FUNCTIONS = {
    "build": "def build(source, target):\n    return {'success': True, 'diagnostics': ''}\n",
    "verify": "def verify(artifact, case):\n    return True\n",
    "benchmark": "def benchmark(artifact, case, repetitions):\n    return [1.0] * repetitions\n",
}


def _read_event(reader, expected: type) -> object:
    line = reader.readline()
    assert line, "the worker closed the protocol socket"
    event = parse_event(line.rstrip(b"\n"))
    assert isinstance(event, expected), event
    return event


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("profile_source", "functions", "arity"), [
    ("def profile(artifact, case, request):\n    return {}\n", ["build", "verify", "benchmark", "profile"], 3),
    ("def profile(artifact, case):\n    return {}\n", ["build", "verify", "benchmark", "profile"], 2),
    ("", ["build", "verify", "benchmark"], None),
], ids=["profile-3", "profile-2", "no-profile"])
def test_a_real_worker_speaks_the_protocol_models(tmp_path, profile_source, functions, arity):
    """hello, ready, a reply and finished, as `python -m sandbox_worker` sends them, parse as the orchestrator
    parses them; nothing here copies a message by hand, so a shape that drifts from protocol.worker fails."""
    scratch, harness, kernel = tmp_path / "scratch", tmp_path / "harness.py", tmp_path / "kernel.py"
    harness.write_text("".join(HARNESS_FUNCTIONS.values()) + profile_source)
    kernel.write_text("LATENCY_US = 1.0\n")
    env, _refused = build_worker_environment(os.environ, {}, scratch=scratch, token="t",
                                             pythonpath=str(PROJECT_ROOT))
    scratch.mkdir()
    parent, child = socket.socketpair()
    with parent, parent.makefile("rb") as reader:
        worker = subprocess.Popen([sys.executable, "-m", "sandbox_worker"],
                                  env={**env, "TLX_PROTOCOL_FD": str(child.fileno())}, cwd=scratch,
                                  pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        child.close()
        try:
            parent.settimeout(30)
            hello = _read_event(reader, HelloEvent)
            assert (hello.protocol_version, hello.pid, hello.python) == (
                PROTOCOL_VERSION, worker.pid, platform.python_version())
            setup = SetupCommand(run_id="r", experiment_id="e", harness_path=str(harness), kernel_path=str(kernel),
                                 target={}, isolation=IsolationConfig(scratch_dir=str(scratch)))
            for command in (setup, BuildCommand(command_id=1), ShutdownCommand()):
                parent.sendall(command.model_dump_json().encode() + b"\n")
            ready = _read_event(reader, ReadyEvent)
            assert (ready.harness_functions, ready.profile_arity, set(ready.isolation)) == (
                functions, arity, set(LAYERS))
            assert (ready.versions, ready.device) == (
                {"python": platform.python_version(), "executable": sys.executable, "torch": None, "triton": None,
                 "triton_tlx": None}, None)
            reply = _read_event(reader, ReplyEvent)
            assert BuildValue.model_validate(reply.value) == BuildValue(success=True)
            _read_event(reader, FinishedEvent)
            assert worker.wait(timeout=30) == 0
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()


def _roundtrip(message: dict) -> object:
    return parse_event(json.dumps(message).encode())


def test_every_failure_the_worker_builds_parses():
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
