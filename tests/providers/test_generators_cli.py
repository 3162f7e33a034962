"""`--provider claude` and `--provider anthropic` through the real CLI, real workers and the synthetic bundle.

The claude run uses the stand-in on PATH (tests/providers/bin/claude); the anthropic run talks to a
Messages API server on loopback. Each proposes one candidate that halves the declared latency, which must
be promoted and revalidated (exit 0).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import SYNTHETIC, run_cli, synthetic_args, synthetic_kernel
from tests.providers.test_anthropic_provider import FakeAnthropic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

FAKE_BIN = Path(__file__).parent / "bin"
METADATA = {
    "hypothesis": "Half the declared latency halves every case",
    "evidence": "case large median 400 us",
    "change": "LATENCY_US halved",
    "expected_effect": "2x lower median on every case",
    "risk": "none for a synthetic kernel",
}


def bundle_with_guidance(tmp_path: Path, guidance: str) -> Path:
    bundle = tmp_path / "bundle"
    shutil.copytree(SYNTHETIC, bundle)
    target = json.loads((bundle / "target.json").read_text())
    (bundle / "target.json").write_text(json.dumps({**target, "optimization_guidance": guidance}))
    return bundle


def one_candidate_args(out: Path, bundle: Path, *provider: str) -> list:
    args = synthetic_args(out, *provider, "--max-rounds", "1", "--candidates-per-round", "1",
                          kernel=bundle / "kernel.py")
    args[args.index("--target") + 1] = bundle / "target.json"
    return args


def assert_promoted(run) -> None:
    assert run.returncode == 0, run.stderr
    assert run.decisions() == {"baseline": "baseline", "r001-c000": "promoted", "final": "revalidated"}
    assert run.experiment("r001-c000")["metadata"]["change"] == "LATENCY_US halved"
    assert run.result["winner_experiment_id"] == "r001-c000"


def test_claude_provider_through_the_cli(tmp_path):
    record = tmp_path / "seen.json"
    bundle = bundle_with_guidance(tmp_path, f"FAKE_CLAUDE_MODE=halve-latency FAKE_CLAUDE_RECORD={record}")
    path = os.pathsep.join([str(FAKE_BIN), str(Path(sys.executable).parent), os.environ["PATH"]])
    run = run_cli(*one_candidate_args(tmp_path / "out", bundle, "--provider", "claude", "--model", "claude-m"),
                  env={"PATH": path, "ANTHROPIC_API_KEY": "sk-ant-fake-cli-000000", "GH_TOKEN": "ghp_notarealtoken00000000"})
    assert_promoted(run)
    seen = json.loads(record.read_text())
    assert seen["options"]["model"] == "claude-m"
    assert Path(seen["cwd"]).parent == (tmp_path / "out" / "provider_workspaces").resolve()
    assert "GH_TOKEN" not in seen["env"] and seen["env"]["ANTHROPIC_API_KEY"] == "sk-ant-fake-cli-000000"


def test_anthropic_provider_through_the_cli(tmp_path):
    candidate = synthetic_kernel(50.0)
    reply = f"```json\n{json.dumps(METADATA)}\n```\n```python\n{candidate}```\n"
    bundle = bundle_with_guidance(tmp_path, "synthetic")
    with FakeAnthropic([("ok", reply)]) as server:
        args = one_candidate_args(tmp_path / "out", bundle, "--provider", "anthropic", "--model", "claude-m",
                                  "--base-url", server.url)
        run = run_cli(*args, env={"ANTHROPIC_API_KEY": "sk-ant-fake-cli-000000"})
    assert_promoted(run)
    assert [request["model"] for request in server.requests] == ["claude-m"]


def test_anthropic_without_a_key_exits_1_with_one_line(tmp_path):
    args = one_candidate_args(tmp_path / "out", bundle_with_guidance(tmp_path, "synthetic"),
                              "--provider", "anthropic", "--model", "claude-m")
    run = run_cli(*args, env={"ANTHROPIC_API_KEY": ""})  # empty counts as missing
    assert run.returncode == 1
    error_lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(error_lines) == 1 and "needs ANTHROPIC_API_KEY" in error_lines[0], run.stderr
