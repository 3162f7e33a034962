"""A provider's exception is that proposal's failure, never the run's end.

Whatever a provider raises where the run calls it (`propose`, and with it the screening the tuner asks for
through its context; `resume_from`; `aclose`), other than the two exceptions its contract names
(`ProposalError`, `ProviderExhausted`), is written with its traceback to `provider_failures/<call>.txt`,
named in the live log and the journal (`provider_failure`), and counted in result.json
(`report.provider_failures`). A failed `propose` becomes a `failed` experiment and the run goes on.

The bound: after `MAX_CONSECUTIVE` failed calls with no proposal in between, the run stops with
`provider_exhausted` and the last failure as its detail. A provider that fails the same way every time would
otherwise spend every slot of the round budget on nothing (and with `--max-rounds 1000`, a thousand
tracebacks). A `RunAborted` raised inside the provider (its screening found the bundle changed, or a leftover
process) still ends the run as it would anywhere else.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from orchestrator.ledger.artifacts import RunArtifacts
from orchestrator.ledger.live_log import LiveLog, quote
from orchestrator.providers.base import ProposalError
from orchestrator.providers.redaction import environment_secret_values, redact_secrets
from orchestrator.run.state import RunAborted
from orchestrator.text import one_line

MAX_CONSECUTIVE = 3
DIRECTORY = "provider_failures"


class ProviderFailed(ProposalError):
    """A proposal whose provider raised: the experiment fails with this message; the traceback is in `path`."""

    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


def _run_abort(exc: BaseException) -> RunAborted | None:
    """The RunAborted inside `exc` (itself, or a leaf of trio's exception groups), if any."""
    pending = [exc]
    while pending:
        current = pending.pop()
        if isinstance(current, RunAborted):
            return current
        nested = getattr(current, "exceptions", None)
        if isinstance(nested, tuple):
            pending.extend(nested)
    return None


class ProviderFailures:
    """Contains one run's provider failures: each written, logged, journalled and counted."""

    def __init__(self, provider_name: str, artifacts: RunArtifacts, log: LiveLog) -> None:
        self.provider_name = provider_name
        self.artifacts = artifacts
        self.log = log
        self.directory = artifacts.root / DIRECTORY
        # a resumed run counts the failures its first life recorded (one file each)
        self.count = len(list(self.directory.glob("*.txt"))) if self.directory.is_dir() else 0
        self.consecutive = 0
        self.last = ""

    @property
    def exhausted(self) -> bool:
        """MAX_CONSECUTIVE failed calls with no proposal in between: the run asks the provider no more."""
        return self.consecutive >= MAX_CONSECUTIVE

    def exhausted_detail(self) -> str:
        return (f"the {self.provider_name} provider failed {self.consecutive} times in a row with no proposal in "
                f"between; the last: {self.last} (tracebacks in {self.directory})")

    def succeeded(self) -> None:
        """The provider returned a proposal: failures before it no longer count towards the bound."""
        self.consecutive = 0

    def failed(self, call: str, exc: Exception) -> ProviderFailed:
        """Record `exc`, raised by the provider during `call` (an experiment id, `resume` or `aclose`), and
        return the failure the proposal becomes; a RunAborted inside it is raised again instead."""
        aborted = _run_abort(exc)
        if aborted is not None:
            raise aborted from exc
        self.count += 1
        self.consecutive += 1
        error = one_line(f"{type(exc).__name__}: {exc}", 300)
        self.last = error
        path = self._write(call, error, exc)
        self.log.event(f"{call} status=provider_failed provider={self.provider_name} error={quote(error, 300)} "
                       f"traceback={str(path)!r} consecutive={self.consecutive}/{MAX_CONSECUTIVE}")
        self.artifacts.journal("provider_failure", call=call, provider=self.provider_name, error=error,
                               traceback_path=str(path), consecutive=self.consecutive)
        return ProviderFailed(f"the {self.provider_name} provider raised {error} (traceback: {path})", path)

    def _write(self, call: str, error: str, exc: Exception) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{call}.txt"
        attempt = 1
        while path.exists():  # the same slot failed again after a resume: keep both
            attempt += 1
            path = self.directory / f"{call}-{attempt}.txt"
        text = (f"provider: {self.provider_name}\ncall: {call}\nerror: {error}\n\n"
                + "".join(traceback.format_exception(exc)))
        path.write_text(redact_secrets(text, environment_secret_values()), encoding="utf-8")
        return path
