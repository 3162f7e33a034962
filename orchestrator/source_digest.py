"""Source digests for dedup: a comment-only or whitespace-only change is the same candidate."""

from __future__ import annotations

import hashlib
import io
import tokenize


def raw_digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def normalized_source(source: str) -> str:
    """The token stream without comments, blank lines or trailing whitespace.

    Falls back to whitespace normalization for source that does not tokenize (it will fail to build
    anyway, and must still dedup deterministically).
    """
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
                  if t.type not in (tokenize.COMMENT, tokenize.NL)]
        text = tokenize.untokenize((t.type, t.string) for t in tokens)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        text = source
    lines = (line.rstrip() for line in text.splitlines())
    return "\n".join(line for line in lines if line.strip()) + "\n"


def normalized_digest(source: str) -> str:
    return hashlib.sha256(normalized_source(source).encode("utf-8")).hexdigest()
