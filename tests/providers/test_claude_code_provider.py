"""The claude provider against an executable that honours the `claude -p` command line (tests/providers/bin/claude)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import trio

from orchestrator.providers.base import ProposalError, ProviderConfigError
from orchestrator.providers.claude_code import ClaudeCodeProvider, claude_command
from tests.providers.conftest import VECTOR_ADD, context

FAKE_BIN = Path(__file__).parent / "bin"
SECRETS = {
    "GH_TOKEN": "ghp_notarealtokennotarealtoken",
    "AWS_SECRET_ACCESS_KEY": "aws-not-real-secret-value",
    "OPENAI_API_KEY": "sk-openai-must-not-reach-claude-0000",
    "HF_TOKEN": "hf_notarealtokennotarealtoken",
}
ANTHROPIC_KEY = "sk-ant-fake-for-claude-000000"


@pytest.fixture
def claude_env(monkeypatch, tmp_path):
    """The fake claude first on PATH (with this venv's python3 next), plus credentials claude must not see."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(FAKE_BIN), str(Path(sys.executable).parent), os.environ["PATH"]]))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "not-a-repo"))
    monkeypatch.setenv("GIT_ASKPASS", "/bin/true")
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    return tmp_path


def propose(provider: ClaudeCodeProvider, mode: str, record: Path, **kwargs):
    guidance = f"FAKE_CLAUDE_MODE={mode} FAKE_CLAUDE_RECORD={record}"
    return trio.run(provider.propose, context(guidance=guidance, **kwargs))


def gone(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_success_edits_candidate_in_a_scrubbed_temporary_workspace(claude_env):
    record = claude_env / "seen.json"
    workspaces = claude_env / "workspaces"
    proposal = propose(ClaudeCodeProvider("claude-test-model", timeout_seconds=30), "ok", record,
                       workspace_root=workspaces)

    assert proposal.source == VECTOR_ADD.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 128")
    assert proposal.metadata.change == "BLOCK_SIZE 64 -> 128"
    seen = json.loads(record.read_text())
    argv = seen["argv"]
    assert argv[:4] == ["-p", "--output-format", "json", "--permission-mode"]
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert argv[argv.index("--model") + 1] == "claude-test-model"
    assert argv[-2] == "--" and argv[-1] == seen["prompt"]
    assert seen["options"]["allowed"] == ["Read,Edit,Write,Glob,Grep"]
    assert "Bash" in seen["options"]["disallowed"][0] and seen["options"]["add_dir"] == []
    workspace = Path(seen["cwd"])
    assert workspace.parent == workspaces.resolve()
    assert "candidate.py" in seen["prompt"] and "median=4210 µs" in seen["prompt"]
    env = seen["env"]
    assert env["ANTHROPIC_API_KEY"] == ANTHROPIC_KEY and env["CLAUDE_CONFIG_DIR"] == str(claude_env / "claude-config")
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and "PATH" in env and "HOME" in env
    for dropped in ("GIT_DIR", "GIT_ASKPASS", "SSH_AUTH_SOCK", "ANTHROPIC_BASE_URL", *SECRETS):
        assert dropped not in env
    leaked = [name for name, value in env.items() if any(secret in value for secret in SECRETS.values())]
    assert leaked == []
    assert not workspace.exists()  # temporary: removed after the proposal


def test_workspace_files_and_bounded_logs_are_kept_on_request(claude_env):
    record = claude_env / "seen.json"
    provider = ClaudeCodeProvider(None, timeout_seconds=30, keep_workspaces=True, max_turns=7)
    propose(provider, "ok", record, workspace_root=claude_env / "ws")
    seen = json.loads(record.read_text())
    assert "--model" not in seen["argv"] and seen["options"]["max_turns"] == "7"
    workspace = Path(seen["cwd"])
    names = {path.name for path in workspace.iterdir()}
    assert {"candidate.py", "original.py", "evidence.md", "candidate_metadata.schema.json",
            "candidate_metadata.json", "claude.stdout.log", "claude.stderr.log"} <= names
    assert (workspace / "original.py").read_text() == VECTOR_ADD
    result = json.loads((workspace / "claude.stdout.log").read_text())
    assert result["type"] == "result" and result["subtype"] == "success"


def test_base_url_reaches_claude_as_its_endpoint_variable(claude_env):
    record = claude_env / "seen.json"
    propose(ClaudeCodeProvider(None, timeout_seconds=30, base_url="http://127.0.0.1:9"), "ok", record)
    assert json.loads(record.read_text())["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"


def test_metadata_may_come_from_the_result_text(claude_env):
    proposal = propose(ClaudeCodeProvider(None, timeout_seconds=30), "message-only", claude_env / "seen.json")
    assert proposal.metadata.hypothesis.startswith("Raising BLOCK_SIZE")


def test_a_candidate_that_does_not_parse_is_rejected(claude_env):
    with pytest.raises(ProposalError, match="candidate source does not parse"):
        propose(ClaudeCodeProvider(None, timeout_seconds=30), "broken", claude_env / "seen.json")


def test_modified_original_is_rejected(claude_env):
    with pytest.raises(ProposalError, match="claude modified the immutable original.py"):
        propose(ClaudeCodeProvider(None, timeout_seconds=30), "modify-original", claude_env / "seen.json")


def test_an_error_result_is_reported_from_the_json_result(claude_env):
    with pytest.raises(ProposalError) as caught:
        propose(ClaudeCodeProvider(None, timeout_seconds=30), "max-turns", claude_env / "seen.json")
    assert str(caught.value) == "claude ended with error_max_turns after 40 turns: Reached max turns"


def test_non_zero_exit_reports_the_last_stderr_lines_redacted(claude_env):
    with pytest.raises(ProposalError) as caught:
        propose(ClaudeCodeProvider(None, timeout_seconds=30), "fail", claude_env / "seen.json")
    message = str(caught.value)
    assert message.startswith("claude exited with code 1: ")
    assert "progress line 19" in message and "progress line 5" not in message
    assert "Invalid API key" in message and "sk-ant-abcdefghijklmnopqrstuvwx" not in message


@pytest.mark.parametrize("mode", ["hang", "stubborn"])
def test_hung_claude_is_killed_as_a_group_at_the_deadline(claude_env, mode):
    record = claude_env / "seen.json"
    started = time.monotonic()
    with pytest.raises(ProposalError, match="claude did not finish within the 1 s candidate deadline"):
        propose(ClaudeCodeProvider(None, timeout_seconds=30), mode, record, deadline_seconds=1.0,
                workspace_root=claude_env / "ws")
    elapsed = time.monotonic() - started
    pids = json.loads(Path(f"{record}.pids").read_text())
    assert all(gone(pid) for pid in pids.values()), pids
    assert elapsed < (4.0 if mode == "hang" else 8.0)
    assert list((claude_env / "ws").iterdir()) == []


def test_outer_cancellation_also_kills_the_group(claude_env):
    record = claude_env / "seen.json"
    provider = ClaudeCodeProvider(None, timeout_seconds=30)
    guidance = f"FAKE_CLAUDE_MODE=hang FAKE_CLAUDE_RECORD={record}"

    async def main():
        with trio.move_on_after(1.0) as scope:
            await provider.propose(context(guidance=guidance))
        return scope.cancelled_caught

    assert trio.run(main) is True
    pids = json.loads(Path(f"{record}.pids").read_text())
    assert all(gone(pid) for pid in pids.values()), pids


def test_concurrent_proposals_use_separate_workspaces(claude_env):
    provider = ClaudeCodeProvider(None, timeout_seconds=30)
    assert provider.concurrent is True
    results = []

    async def one(slot):
        guidance = f"FAKE_CLAUDE_RECORD={claude_env / f'seen{slot}.json'}"
        results.append(await provider.propose(context(slot_index=slot, guidance=guidance)))

    async def main():
        async with trio.open_nursery() as nursery:
            for slot in range(2):
                nursery.start_soon(one, slot)

    trio.run(main)
    cwds = {json.loads((claude_env / f"seen{slot}.json").read_text())["cwd"] for slot in range(2)}
    assert len(results) == 2 and len(cwds) == 2


def test_missing_binary_is_a_configuration_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProviderConfigError) as caught:
        ClaudeCodeProvider(None, timeout_seconds=30)
    assert str(caught.value) == (
        "claude executable not found on PATH; install Claude Code (@anthropic-ai/claude-code) "
        "or use --provider anthropic, tune or replay"
    )


def test_command_line_shape():
    argv = claude_command("/opt/claude", "m1", 12, "do it")
    assert argv == ["/opt/claude", "-p", "--output-format", "json", "--permission-mode", "acceptEdits",
                    "--no-session-persistence", "--max-turns", "12", "--model", "m1",
                    "--allowedTools", "Read,Edit,Write,Glob,Grep",
                    "--disallowedTools", "Bash,WebFetch,WebSearch,Task,NotebookEdit", "--", "do it"]


def run_fake(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    (cwd / "evidence.md").write_text("evidence\n")
    (cwd / "candidate.py").write_text(VECTOR_ADD)
    return subprocess.run([sys.executable, str(FAKE_BIN / "claude"), *argv], cwd=cwd, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=30)


def test_the_stand_in_parses_like_claude_code(tmp_path):
    """Without `--` the variadic tool list swallows the prompt; unknown flags are refused."""
    swallowed = run_fake(["-p", "--output-format", "json", "--disallowedTools", "Bash", "do it"], tmp_path)
    assert swallowed.returncode == 1
    assert 'Permission rule "do" matches no known tool' in swallowed.stderr
    assert "Input must be provided either through stdin or as a prompt argument" in swallowed.stderr
    unknown = run_fake(["-p", "--full-auto", "--", "do it"], tmp_path)
    assert unknown.returncode == 1 and "unknown option '--full-auto'" in unknown.stderr
    argv = claude_command("claude", None, 3, "FAKE_CLAUDE_MODE=message-only")[1:]
    accepted = run_fake(argv, tmp_path)
    assert accepted.returncode == 0, accepted.stderr
    assert json.loads(accepted.stdout)["subtype"] == "success"
