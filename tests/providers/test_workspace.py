"""The shared agent workspace: bounded output, the allow-listed environment, the files an agent gets."""

from __future__ import annotations

import json
import stat
import sys

import pytest
import trio

from orchestrator.providers.base import ProposalError
from orchestrator.providers.workspace import (
    MAX_LOG_BYTES,
    TailBuffer,
    collect_proposal,
    prepare_workspace,
    run_agent,
    scrubbed_environment,
)
from tests.providers.conftest import VECTOR_ADD, context


def test_tail_buffer_keeps_the_last_bytes_and_counts_the_rest():
    buffer = TailBuffer(8)
    for chunk in (b"0123", b"4567", b"89ab"):
        buffer.add(chunk)
    assert bytes(buffer.data) == b"456789ab" and buffer.dropped == 4


def test_agent_output_is_kept_as_a_bounded_tail(tmp_path):
    flood = "import sys; sys.stdout.write('x' * (1 << 20) + 'END'); sys.stderr.write('e' * 10 + 'DONE')"
    outcome = trio.run(lambda: run_agent([sys.executable, "-c", flood], agent="flood", cwd=tmp_path,
                                         env={}, deadline_seconds=30))
    assert outcome.returncode == 0 and not outcome.timed_out
    assert len(outcome.stdout) == MAX_LOG_BYTES and outcome.stdout.endswith(b"xEND")
    assert outcome.stderr == b"e" * 10 + b"DONE"


def test_a_missing_executable_is_a_proposal_error(tmp_path):
    with pytest.raises(ProposalError, match=r"cannot start agent \(/nonexistent/agent\)"):
        trio.run(lambda: run_agent(["/nonexistent/agent"], agent="agent", cwd=tmp_path, env={}, deadline_seconds=5))


def test_environment_keeps_the_base_list_the_agents_own_names_and_locale_only():
    environ = {"PATH": "/bin", "HOME": "/home/u", "LC_ALL": "C.UTF-8", "AGENT_KEY": "k", "EXTRA": "e",
               "GH_TOKEN": "t", "SSH_AUTH_SOCK": "/s", "GIT_DIR": "/g", "AWS_SECRET_ACCESS_KEY": "a"}
    assert scrubbed_environment(environ, {"AGENT_KEY"}, ("EXTRA",)) == {
        "PATH": "/bin", "HOME": "/home/u", "LC_ALL": "C.UTF-8", "AGENT_KEY": "k", "EXTRA": "e"}


def test_workspace_holds_the_candidate_a_read_only_original_evidence_and_schema(tmp_path):
    workspace, prompt = prepare_workspace(context(workspace_root=tmp_path), agent="agent", max_prompt_chars=48_000)
    assert workspace.parent == tmp_path.resolve() and workspace.name.startswith("agent-r001-c000-")
    assert (workspace / "candidate.py").read_text() == (workspace / "original.py").read_text() == VECTOR_ADD
    assert not (workspace / "original.py").stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    assert "median=4210 µs" in (workspace / "evidence.md").read_text() and "median=4210 µs" in prompt
    assert json.loads((workspace / "candidate_metadata.schema.json").read_text())["additionalProperties"] is False


def test_an_oversized_candidate_is_refused(tmp_path):
    workspace, _ = prepare_workspace(context(workspace_root=tmp_path), agent="agent", max_prompt_chars=48_000)
    (workspace / "candidate.py").write_text("x = 1\n" * 800_000)
    with pytest.raises(ProposalError, match=r"candidate.py has 4800000 bytes; the limit is 4194304"):
        collect_proposal(workspace, context(), agent="agent", final_message=lambda: None)
