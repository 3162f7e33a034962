"""More runs for a candidate that only the noise test holds back (sequential confirmation).

An A/B/A triple gives the test three runs; when between-process drift is large (0.8 % was seen on the
H200 for a 1.4 ms matmul) a real 3 % gain can sit inside that noise. Rejecting it would throw the gain
away; promoting it would be a guess. So while a verdict fails only its noise gate, another candidate run
and another incumbent run are measured and the verdict is taken again on all of them, up to a bound.
The A/A false-promotion rate this adds is small because only candidates whose point estimate already
reaches the minimum speedup are extended (`tests/test_confirmation.py` and the measurement study).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from orchestrator.decision.gates import Verdict, needs_confirmation


async def confirm_until_decided(
    verdict: Verdict,
    *,
    max_pairs: int,
    measure_pair: Callable[[int], Awaitable[bool]],
    decide_again: Callable[[], Verdict],
    can_afford_pair: Callable[[], bool] = lambda: True,
    on_skip: Callable[[str], None] = lambda reason: None,
) -> tuple[Verdict, int]:
    """Returns the final verdict and how many extra pairs were measured.

    `measure_pair(n)` measures pair n (1-based) and returns False when a run of it failed (the verdict is
    then taken as is: a failed run decides nothing more); `decide_again()` re-decides on every run so far.
    """
    pairs = 0
    while pairs < max_pairs and needs_confirmation(verdict):
        if not can_afford_pair():
            on_skip("two more runs do not fit before the deadline")
            break
        pairs += 1
        if not await measure_pair(pairs):
            break
        verdict = decide_again()
    return verdict, pairs
