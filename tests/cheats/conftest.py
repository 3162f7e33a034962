"""Prints what each candidate of the cheat corpus got (status, reason, decision) at the end of a run."""

from __future__ import annotations

import pytest

from tests.cheats.runner import OUTCOMES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not OUTCOMES:
        return
    terminalreporter.write_sep("-", f"cheat corpus: {len(OUTCOMES)} run(s)")
    for line in OUTCOMES:
        terminalreporter.write_line(line)
