"""What the GPU judge says when a record cannot be replayed (shared by the record reader and the kernel library)."""

from __future__ import annotations


class RecordRefused(Exception):
    """The record cannot be replayed (malformed, or work replay cannot repeat); the message says why."""
