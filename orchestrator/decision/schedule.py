"""The order in which incumbent (a) and candidate (b) are measured for one decision, e.g. "aba"."""

from __future__ import annotations

SIDE_NAMES = {"a": "incumbent", "b": "candidate"}
MAX_SCHEDULE_LENGTH = 6


def measurement_schedule(pattern: str) -> list[str]:
    """Parse an order like "aba" into worker labels; interleaving lets drift hit both sides."""
    letters = pattern.strip().lower()
    if not letters:
        raise ValueError(
            "measurement order is empty: use letters a (incumbent) and b (candidate), e.g. 'aba'"
        )
    unknown = sorted(set(letters) - set(SIDE_NAMES))
    if unknown:
        raise ValueError(
            f"measurement order {pattern!r} has letters {unknown}: only a (incumbent) and b (candidate) are allowed"
        )
    if len(letters) > MAX_SCHEDULE_LENGTH:
        raise ValueError(
            f"measurement order {pattern!r} has {len(letters)} runs: at most {MAX_SCHEDULE_LENGTH} are allowed"
        )
    if "a" not in letters or "b" not in letters:
        raise ValueError(
            f"measurement order {pattern!r} must measure both the incumbent (a) and the candidate (b)"
        )
    return [SIDE_NAMES[letter] for letter in letters]
