"""The integer locals of the kernel file's functions as each call returned: what a per-shape table is keyed
on (the wrapper's `N`) and what a computed knob came to on each case (its `num_warps`).

Screening asks for them while a variant verifies (orchestrator/providers/tune/tables.py composes a table
from them). Only frames of the variant's own file count, found by content, whatever module name the
harness loaded it under; a name that took two values in one case (a kernel's loop variable under the
interpreter, a wrapper called twice with different shapes) is dropped, since no single value describes the
case. The numbers only shape a proposal: the proposal still goes through the whole promotion gate.
Standard library only (this runs in the worker).
"""

from __future__ import annotations

import os
import stat
import sys
from types import FrameType
from typing import Any

MAX_NAMES = 64  # per case: a wrapper has a handful; more is a kernel body under the interpreter
LIMIT = 2**62  # what the protocol carries as an integer without surprise


class LocalsObserver:
    """A profile hook, installed for a `with` block, that records `function.local` -> int per call return."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.values: dict[str, int] = {}
        self.conflicted: set[str] = set()
        self._files: dict[str, bool] = {}
        self._previous: Any = None

    def __enter__(self) -> LocalsObserver:
        self._previous = sys.getprofile()
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc_info: object) -> None:
        sys.setprofile(self._previous)

    def observed(self) -> dict[str, int]:
        """The names that took one value, at most MAX_NAMES of them (sorted: the same ones every time)."""
        kept = sorted(name for name in self.values if name not in self.conflicted)
        return {name: self.values[name] for name in kept[:MAX_NAMES]}

    def _ours(self, filename: str) -> bool:
        known = self._files.get(filename)
        if known is None:
            known = self._same_text(filename)
            self._files[filename] = known
        return known

    def _same_text(self, filename: str) -> bool:
        """Whether `filename` is a regular file holding the variant's source. A code object may name any
        path (a FIFO, /dev/zero): only a regular file of the source's size is read, and no further."""
        expected = self.source.encode("utf-8")
        try:
            if not stat.S_ISREG(os.stat(filename).st_mode):
                return False
            with open(filename, "rb") as handle:
                return handle.read(len(expected) + 1) == expected
        except (OSError, ValueError):
            return False

    def _hook(self, frame: FrameType, event: str, _arg: object) -> None:
        if event != "return" or not self._ours(frame.f_code.co_filename):
            return
        function = frame.f_code.co_name
        for name, value in frame.f_locals.items():
            if type(value) is not int or not -LIMIT < value < LIMIT:
                continue
            key = f"{function}.{name}"
            if self.values.setdefault(key, value) != value:
                self.conflicted.add(key)
