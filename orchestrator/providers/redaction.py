"""Secret redaction for text that leaves the process (prompts, provider errors, prior-run evidence).

API keys and tokens are recognised by shape, and the values of secret-looking environment variables are
replaced literally, so a key pasted into guidance or echoed by a provider is still caught.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

_SECRET_PATTERNS = (
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{16,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{16,}"),
    re.compile(r"\bglpat-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{16,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{5,}"),  # JWT
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)\b([A-Z0-9_]*(?:api[_-]?key|token|secret|password|passwd)[A-Z0-9_]*)\s*[=:]\s*\S+"),
)
_SECRET_ENV_NAME = re.compile(r"(?i)(key|token|secret|password|passwd|credential|auth)")
REDACTED = "<redacted>"


def environment_secret_values(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Values of secret-looking environment variables, so a key pasted into guidance is still caught."""
    source = os.environ if environ is None else environ
    return tuple(value for name, value in source.items() if _SECRET_ENV_NAME.search(name) and len(value) >= 8)


def redact_secrets(text: str, secret_values: Iterable[str] = ()) -> str:
    """Replace API keys, tokens and the given literal secret values by `<redacted>`."""
    for value in sorted(set(secret_values), key=len, reverse=True):
        if value:
            text = text.replace(value, REDACTED)
    for pattern in _SECRET_PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: f"{m.group(1)}={REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    return text
