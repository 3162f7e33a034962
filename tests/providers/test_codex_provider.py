"""The codex provider against an executable that honours the `codex exec` 0.171 command line."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import psutil
import pytest
import trio

from orchestrator.providers.base import ProposalError, ProviderConfigError
from orchestrator.providers.codex import CodexProvider, codex_command
from tests.providers.conftest import VECTOR_ADD, context

FAKE_BIN = Path(__file__).parent / "bin"


@pytest.fixture
def codex_env(monkeypatch, tmp_path):
    """The fake codex first on PATH (with this venv's python3 next), plus credentials codex must not see."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(FAKE_BIN), str(Path(sys.executable).parent), os.environ["PATH"]]))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "not-a-repo"))
    monkeypatch.setenv("GIT_ASKPASS", "/bin/true")
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    monkeypatch.setenv("GH_TOKEN", "ghp_notarealtokennotarealtoken")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-real")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-for-codex-000000")
    return tmp_path


def propose(provider: CodexProvider, mode: str, record: Path, **kwargs):
    guidance = f"FAKE_CODEX_MODE={mode} FAKE_CODEX_RECORD={record}"
    return trio.run(provider.propose, context(guidance=guidance, **kwargs))


def gone(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_success_edits_candidate_in_a_scrubbed_temporary_workspace(codex_env):
    record = codex_env / "seen.json"
    workspaces = codex_env / "workspaces"
    provider = CodexProvider("gpt-test", timeout_seconds=30)
    proposal = propose(provider, "ok", record, workspace_root=workspaces)

    assert proposal.source == VECTOR_ADD.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 128")
    assert proposal.metadata.change == "BLOCK_SIZE 64 -> 128"
    seen = json.loads(record.read_text())
    argv = seen["argv"]
    assert argv[:6] == ["exec", "--skip-git-repo-check", "--ephemeral", "--sandbox", "workspace-write", "--cd"]
    assert "--full-auto" not in argv and argv[argv.index("--model") + 1] == "gpt-test"
    workspace = Path(argv[argv.index("--cd") + 1])
    assert workspace.parent == workspaces.resolve() and Path(seen["cwd"]) == workspace
    assert argv[argv.index("--output-last-message") + 1] == str(workspace / "last_message.txt")
    assert "candidate.py" in seen["prompt"] and "median=4210 µs" in seen["prompt"]
    assert "OPENAI_API_KEY" in seen["env"] and "PATH" in seen["env"]
    for dropped in ("GIT_DIR", "GIT_ASKPASS", "SSH_AUTH_SOCK", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY"):
        assert dropped not in seen["env"]
    assert not workspace.exists()  # temporary: removed after the proposal


def test_workspace_files_are_kept_on_request(codex_env):
    record = codex_env / "seen.json"
    provider = CodexProvider(None, timeout_seconds=30, keep_workspaces=True)
    propose(provider, "ok", record, workspace_root=codex_env / "ws")
    argv = json.loads(record.read_text())["argv"]
    assert "--model" not in argv
    workspace = Path(argv[argv.index("--cd") + 1])
    names = {path.name for path in workspace.iterdir()}
    assert {"candidate.py", "original.py", "evidence.md", "candidate_metadata.schema.json",
            "candidate_metadata.json", "last_message.txt", "codex.stdout.log", "codex.stderr.log"} <= names
    assert (workspace / "original.py").read_text() == VECTOR_ADD
    schema = json.loads((workspace / "candidate_metadata.schema.json").read_text())
    assert schema["required"] == ["hypothesis", "evidence", "change", "expected_effect", "risk"]
    assert "Raised BLOCK_SIZE" in (workspace / "codex.stdout.log").read_text()


def test_metadata_may_come_from_the_last_message(codex_env):
    proposal = propose(CodexProvider(None, timeout_seconds=30), "message-only", codex_env / "seen.json")
    assert proposal.metadata.hypothesis.startswith("Raising BLOCK_SIZE")


def test_modified_original_is_rejected(codex_env):
    with pytest.raises(ProposalError, match="modified the immutable original.py"):
        propose(CodexProvider(None, timeout_seconds=30), "modify-original", codex_env / "seen.json")


def test_symlinked_candidate_is_rejected(codex_env):
    with pytest.raises(ProposalError, match="not a regular file"):
        propose(CodexProvider(None, timeout_seconds=30), "symlink", codex_env / "seen.json")


def test_non_zero_exit_reports_the_last_stderr_lines(codex_env):
    with pytest.raises(ProposalError) as caught:
        propose(CodexProvider(None, timeout_seconds=30), "fail", codex_env / "seen.json")
    message = str(caught.value)
    assert message.startswith("codex exited with code 7: ")
    assert "progress line 19" in message and "progress line 5" not in message
    assert "stream disconnected" in message and "sk-abcdefghijklmnopqrstuvwx" not in message


@pytest.mark.parametrize("mode", ["hang", "stubborn"])
def test_hung_codex_is_killed_as_a_group_at_the_deadline(codex_env, mode):
    record = codex_env / "seen.json"
    started = time.monotonic()
    with pytest.raises(ProposalError, match="did not finish within the 1 s candidate deadline"):
        propose(CodexProvider(None, timeout_seconds=30), mode, record, deadline_seconds=1.0,
                workspace_root=codex_env / "ws")
    elapsed = time.monotonic() - started
    pids = json.loads(Path(f"{record}.pids").read_text())
    assert all(gone(pid) for pid in pids.values()), pids
    assert elapsed < (4.0 if mode == "hang" else 8.0)
    assert list((codex_env / "ws").iterdir()) == []


def test_concurrent_proposals_use_separate_workspaces(codex_env):
    provider = CodexProvider(None, timeout_seconds=30)
    assert provider.concurrent is True
    results = []

    async def one(slot):
        guidance = f"FAKE_CODEX_RECORD={codex_env / f'seen{slot}.json'}"
        results.append(await provider.propose(context(slot_index=slot, guidance=guidance)))

    async def main():
        async with trio.open_nursery() as nursery:
            for slot in range(2):
                nursery.start_soon(one, slot)

    trio.run(main)
    cds = {json.loads((codex_env / f"seen{slot}.json").read_text())["argv"][6] for slot in range(2)}
    assert len(results) == 2 and len(cds) == 2


def test_missing_binary_is_a_configuration_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProviderConfigError) as caught:
        CodexProvider(None, timeout_seconds=30)
    assert str(caught.value) == (
        "codex executable not found on PATH; install @openai/codex or use --provider tune or --provider replay"
    )


def test_command_line_shape():
    argv = codex_command("/opt/codex", Path("/tmp/ws"), "m1", "do it")
    assert argv == ["/opt/codex", "exec", "--skip-git-repo-check", "--ephemeral", "--sandbox", "workspace-write",
                    "--cd", "/tmp/ws", "--output-last-message", "/tmp/ws/last_message.txt", "--model", "m1", "do it"]


def test_outer_cancellation_also_kills_the_group(codex_env):
    record = codex_env / "seen.json"
    provider = CodexProvider(None, timeout_seconds=30)
    guidance = f"FAKE_CODEX_MODE=hang FAKE_CODEX_RECORD={record}"

    async def main():
        with trio.move_on_after(1.0) as scope:
            await provider.propose(context(guidance=guidance))
        return scope.cancelled_caught

    assert trio.run(main) is True
    pids = json.loads(Path(f"{record}.pids").read_text())
    assert all(gone(pid) for pid in pids.values()), pids
