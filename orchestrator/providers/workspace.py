"""The workspace contract shared by coding-agent providers (`codex exec`, `claude -p`).

An agent never sees the user's checkout, VCS credentials or a terminal. Each proposal gets a throwaway
directory holding `candidate.py` (to edit), a read-only `original.py`, `evidence.md` and the metadata JSON
Schema; the agent runs there with stdin from /dev/null and an allow-listed environment, in its own session
(process group), under a trio deadline. On expiry, on cancellation and on a normal exit alike, the group
and every descendant are ended by `end_process_group` (orchestrator/worker/process_tree.py) inside a
shielded, bounded cleanup, because a native agent that retries forever is orphaned by a plain timeout.
Output is kept as a bounded tail; what the agent wrote is read back with symlinks and oversized files
refused, and checked by the one candidate contract (contract.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import trio

from orchestrator.providers.base import Proposal, ProposalContext, ProposalError
from orchestrator.providers.contract import (
    METADATA_KEYS,
    fenced_blocks,
    metadata_from_json_text,
    metadata_json_schema,
    validate_proposal,
)
from orchestrator.providers.prompt import build_prompt, evidence_terms
from orchestrator.providers.redaction import redact_secrets
from orchestrator.text import one_line, tail_lines
from orchestrator.worker.process_tree import end_process_group

CANDIDATE_FILE = "candidate.py"
ORIGINAL_FILE = "original.py"
EVIDENCE_FILE = "evidence.md"
METADATA_FILE = "candidate_metadata.json"
SCHEMA_FILE = "candidate_metadata.schema.json"

MAX_LOG_BYTES = 256 * 1024  # per stream; older output is dropped, the tail is what explains a failure
MAX_CANDIDATE_BYTES = 4 * 1024 * 1024
MAX_METADATA_BYTES = 64 * 1024
MAX_INLINE_PROMPT_BYTES = 100_000  # Linux caps one argv string at 128 KiB
TERMINATE_GRACE_SECONDS = 2.0
DRAIN_GRACE_SECONDS = 0.5

# What any agent needs to run at all: find itself, its home and locale, a proxy and CA certificates.
# Each provider adds its own credentials; everything else is dropped (GIT_*, SSH_AUTH_SOCK, GH_TOKEN,
# cloud credentials, the other vendor's API key, ...).
BASE_ENV = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "TZ", "LANG", "LANGUAGE",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "XDG_CONFIG_HOME",
    }
)

AGENT_INSTRUCTIONS = f"""\
You are improving one Triton/TLX kernel in this directory.
- Edit {CANDIDATE_FILE} in place: it must remain the complete kernel file. Do not create other source files.
- {ORIGINAL_FILE} is the unmodified incumbent, for comparison only. Never modify, move or delete it.
- Write {METADATA_FILE}: a JSON object matching {SCHEMA_FILE}, with the keys {", ".join(METADATA_KEYS)}
  (single lines, at most 240 characters; evidence quotes measured numbers, case ids or metrics).
- Do not run benchmarks and do not print source code or patches; finish with a one-line summary.
The measured evidence and rules follow (also in {EVIDENCE_FILE}).
"""


def scrubbed_environment(
    environ: Mapping[str, str], kept: Iterable[str], passthrough: Iterable[str] = ()
) -> dict[str, str]:
    """The allow-listed part of the environment (locale `LC_*` included) plus explicitly named variables."""
    names = BASE_ENV | set(kept) | set(passthrough)
    return {name: value for name, value in environ.items() if name in names or name.startswith("LC_")}


@dataclass
class TailBuffer:
    """Keeps the last `limit` bytes of a stream and counts what it dropped."""

    limit: int
    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        excess = len(self.data) - self.limit
        if excess > 0:
            del self.data[:excess]
            self.dropped += excess


@dataclass(frozen=True)
class AgentOutcome:
    returncode: int | None
    timed_out: bool
    stdout: bytes
    stderr: bytes


async def _drain(stream: trio.abc.ReceiveStream, buffer: TailBuffer, done: trio.Event) -> None:
    try:
        while chunk := await stream.receive_some(65536):
            buffer.add(chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        done.set()


async def run_agent(
    argv: list[str], *, agent: str, cwd: Path, env: dict[str, str], deadline_seconds: float
) -> AgentOutcome:
    """Run the agent to completion or to the deadline; its process group never outlives this call."""
    stdout = TailBuffer(MAX_LOG_BYTES)
    stderr = TailBuffer(MAX_LOG_BYTES)
    try:
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(cwd),
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        raise ProposalError(f"cannot start {agent} ({argv[0]}): {exc}") from None
    timed_out = False
    try:
        async with trio.open_nursery() as nursery:
            drained = (trio.Event(), trio.Event())
            nursery.start_soon(_drain, process.stdout, stdout, drained[0])
            nursery.start_soon(_drain, process.stderr, stderr, drained[1])
            with trio.move_on_after(deadline_seconds) as deadline:
                await process.wait()
            if deadline.cancelled_caught:
                timed_out = True
                with trio.CancelScope(shield=True):
                    await end_process_group(process, grace_seconds=TERMINATE_GRACE_SECONDS)
            # A grandchild may still hold the pipes: collect what is there, never wait for EOF.
            with trio.move_on_after(DRAIN_GRACE_SECONDS):
                await drained[0].wait()
                await drained[1].wait()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            # Also on a normal exit: helpers the agent left behind in its group must not outlive the proposal.
            await end_process_group(process, grace_seconds=0.5)
            with trio.move_on_after(TERMINATE_GRACE_SECONDS):
                await process.wait()
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    with suppress(trio.ClosedResourceError, OSError):
                        await stream.aclose()
    return AgentOutcome(process.returncode, timed_out, bytes(stdout.data), bytes(stderr.data))


def prepare_workspace(context: ProposalContext, *, agent: str, max_prompt_chars: int) -> tuple[Path, str]:
    """Create the workspace files; returns the workspace and the prompt text for the command line."""
    evidence = build_prompt(context, max_chars=max_prompt_chars, include_source=False)
    if context.workspace_root is not None:
        context.workspace_root.mkdir(parents=True, exist_ok=True)
    workspace = Path(
        tempfile.mkdtemp(prefix=f"{agent}-{context.experiment_id}-", dir=context.workspace_root)
    ).resolve()
    (workspace / CANDIDATE_FILE).write_text(context.incumbent_source, encoding="utf-8")
    original = workspace / ORIGINAL_FILE
    original.write_text(context.incumbent_source, encoding="utf-8")
    original.chmod(0o444)
    (workspace / EVIDENCE_FILE).write_text(evidence, encoding="utf-8")
    (workspace / SCHEMA_FILE).write_text(json.dumps(metadata_json_schema(), indent=2), encoding="utf-8")
    prompt = f"{AGENT_INSTRUCTIONS}\n{evidence}"
    if len(prompt.encode("utf-8")) > MAX_INLINE_PROMPT_BYTES:
        prompt = f"{AGENT_INSTRUCTIONS}\nRead {EVIDENCE_FILE} first: it holds the measurements and rules."
    return workspace, prompt


def discard_workspace(workspace: Path) -> None:
    shutil.rmtree(workspace, ignore_errors=True)


def save_logs(workspace: Path, outcome: AgentOutcome, *, agent: str) -> None:
    (workspace / f"{agent}.stdout.log").write_bytes(outcome.stdout)
    (workspace / f"{agent}.stderr.log").write_bytes(outcome.stderr)


def read_workspace_file(path: Path, limit: int, what: str, *, agent: str) -> bytes:
    """Read a file the agent wrote, refusing symlinks, non-regular files and oversized files."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise ProposalError(f"{agent} did not leave {what} ({path.name}) in its workspace") from None
    if not path.is_file() or path.is_symlink():
        raise ProposalError(f"{agent} replaced {path.name} by something that is not a regular file")
    if info.st_size > limit:
        raise ProposalError(f"{path.name} has {info.st_size} bytes; the limit is {limit}")
    return path.read_bytes()


def stderr_tail(stderr: bytes, lines: int = 8) -> str:
    """The last stderr lines, joined on one line and redacted: what a failed agent said last."""
    tail = tail_lines(stderr.decode("utf-8", errors="replace"), lines)
    return redact_secrets(one_line(" | ".join(tail), 1200)) if tail else "(no stderr output)"


def raise_for_timeout(outcome: AgentOutcome, *, agent: str, deadline_seconds: float) -> None:
    if outcome.timed_out:
        raise ProposalError(
            f"{agent} did not finish within the {deadline_seconds:g} s candidate deadline; its process group was killed"
        )


def metadata_from_message(text: str, *, agent: str) -> str:
    """The single ```json block of the agent's final message: its metadata when it wrote no metadata file."""
    blocks = [body for language, body in fenced_blocks(text) if language == "json"]
    if len(blocks) != 1:
        raise ProposalError(f"{agent} wrote no {METADATA_FILE} and its last message has no single ```json block")
    return blocks[0]


def collect_proposal(
    workspace: Path, context: ProposalContext, *, agent: str, final_message: Callable[[], str | None]
) -> Proposal:
    """Validate what a finished agent left: the untouched original, the candidate and its metadata.

    The metadata comes from `candidate_metadata.json`, or else from a ```json block in the agent's final
    message, which `final_message` reads only then (None when the agent left no final message at all).
    """
    original = workspace / ORIGINAL_FILE
    if original.is_symlink() or not original.is_file() or original.read_bytes() != context.incumbent_source.encode("utf-8"):
        raise ProposalError(f"{agent} modified the immutable {ORIGINAL_FILE}; the candidate is discarded")
    source_bytes = read_workspace_file(workspace / CANDIDATE_FILE, MAX_CANDIDATE_BYTES, "the candidate", agent=agent)
    try:
        source = source_bytes.decode("utf-8")
    except UnicodeDecodeError:
        raise ProposalError(f"{CANDIDATE_FILE} is not valid UTF-8") from None
    metadata_path = workspace / METADATA_FILE
    if metadata_path.exists() or metadata_path.is_symlink():
        metadata_bytes = read_workspace_file(metadata_path, MAX_METADATA_BYTES, "metadata", agent=agent)
        metadata_text = metadata_bytes.decode("utf-8", "replace")
    elif (message := final_message()) is None:
        raise ProposalError(f"{agent} wrote neither {METADATA_FILE} nor a last message")
    else:
        metadata_text = metadata_from_message(message, agent=agent)
    metadata = metadata_from_json_text(metadata_text)
    return validate_proposal(source, metadata, context.incumbent_source, evidence_terms=evidence_terms(context))
