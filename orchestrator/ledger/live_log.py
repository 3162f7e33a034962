"""The `[tlx-agent]` live log: one event per line on stderr, flushed, mirrored to live.log.

On a TTY a progress line (round, candidate, phase) is kept at the bottom and redrawn after each event;
it never goes to live.log. Kernel source never appears here: patches go to files and the log names them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from orchestrator.text import one_line

PREFIX = "[tlx-agent] "


def quote(value: object, limit: int = 240) -> str:
    return repr(one_line(value, limit))


class LiveLog:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.file: TextIO | None = None
        self.pending: list[str] = []
        self._progress = ""
        self.is_tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def attach_file(self, path: Path) -> None:
        """Start mirroring to live.log, including lines emitted before the output dir existed."""
        self.file = path.open("a", encoding="utf-8")
        for line in self.pending:
            self.file.write(line + "\n")
        self.pending.clear()
        self.file.flush()

    def event(self, text: str) -> None:
        line = PREFIX + text
        if self.is_tty and self._progress:
            self.stream.write("\r\x1b[K")
        self.stream.write(line + "\n")
        if self.is_tty and self._progress:
            self.stream.write(self._progress)
        self.stream.flush()
        if self.file is not None:
            self.file.write(line + "\n")
            self.file.flush()
        else:
            self.pending.append(line)

    def progress(self, text: str) -> None:
        if not self.is_tty:
            return
        self._progress = f"{PREFIX}{text}"
        self.stream.write("\r\x1b[K" + self._progress)
        self.stream.flush()

    def close(self) -> None:
        if self.is_tty and self._progress:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._progress = ""
        if self.file is not None:
            self.file.close()
            self.file = None
