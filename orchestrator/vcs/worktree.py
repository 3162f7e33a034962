"""Reading and replacing the user's kernel file without ever leaving it half written."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path


def read_bytes_or_none(path: Path) -> bytes | None:
    """The file's bytes, or None when it is missing or not a regular file."""
    try:
        if path.is_symlink() or not path.is_file():
            return None
        return path.read_bytes()
    except OSError:
        return None


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` through a sibling temp file: a crash leaves the old or the new bytes.

    The file's permission bits (the executable bit in particular) are kept.
    """
    handle, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tlx-agent")
    try:
        with os.fdopen(handle, "wb") as temp:
            temp.write(data)
            temp.flush()
            os.fsync(temp.fileno())
        if path.exists():
            shutil.copymode(path, temp_name)
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise


def replace_if_unchanged(path: Path, expected: bytes, new: bytes) -> bool:
    """Write ``new`` only while the file still holds ``expected``: someone else's edit is never overwritten."""
    current = read_bytes_or_none(path)
    if current != expected:
        return False
    if new != current:
        write_atomically(path, new)
    return True
