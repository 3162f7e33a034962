"""Where verdicts are computed when the judge cannot take the untouched kernel.

`verdict_process: "auto"` asks for the judge (docs/security.md): per call on the CPU interpreter, record and
replay on a GPU. A kernel whose untouched version the judge cannot verify (a wrapper doing torch work on the
GPU, a harness that initialises CUDA at import, cases larger than the shared arena) would otherwise stop the
run. Instead the baseline is evaluated once more with the harness's own functions in the candidate's
process; when that passes, the whole run stays there, said in the live log and both result files. Only the
untouched kernel decides this: a candidate that the judge cannot take is rejected, never moved.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from orchestrator.text import one_line
from protocol.bundle import Target, runs_on_gpu
from protocol.results import Evaluation, EvaluationStatus

CANDIDATE_PROCESS = "candidate"


def may_fall_back(target: Target, judged_baseline: Evaluation) -> bool:
    """True when `auto` put the untouched kernel in front of the judge and it did not pass there. A worker
    that ran the harness's own functions anyway (no `JUDGE` in the harness) says `candidate` and has nothing
    to fall back to; a worker that failed before `ready` (CUDA initialised at import) says nothing."""
    return (target.verdict_process == "auto" and judged_baseline.status is not EvaluationStatus.OK
            and judged_baseline.worker.verdict_process != CANDIDATE_PROCESS)


def in_candidate_process(target: Target) -> Target:
    return target.model_copy(update={"verdict_process": CANDIDATE_PROCESS})


def worker_target(target: Target, fallback: str) -> Target:
    """The target as workers get it: the bundle's, or with verdicts in the candidate's process after a fallback."""
    return in_candidate_process(target) if fallback else target


async def settle_verdict_process(target: Target, judged: Evaluation, say: Callable[[str], None],
                                 again: Callable[[str], Awaitable[Evaluation]]) -> tuple[Evaluation, str]:
    """The untouched kernel's evaluation to go on with, and the fallback reason ("" for none). When the judge
    could not take it, `say` gets the reason and `again(reason)` evaluates it in the candidate's process; the
    fallback stands only if that passes (if it fails there too, the failure is the kernel's own)."""
    if not may_fall_back(target, judged):
        return judged, ""
    reason = fallback_reason(judged)
    say(reason)
    evaluation = await again(reason)
    return evaluation, reason if evaluation.status is EvaluationStatus.OK else ""


def fallback_reason(judged_baseline: Evaluation) -> str:
    """The sentence for the live log and result.json: what the judge said, what it means, what to change."""
    return (f"the judge could not take the untouched kernel ({judged_baseline.status.value}: "
            f"{one_line(judged_baseline.reason, 300)}); verify and benchmark run in the candidate's process for this "
            "run, where a dishonest candidate can reach the timer: make the wrapper judgeable (docs/harness.md, "
            "\"verdict_process\") or set \"verdict_process\": \"candidate\" in target.json to choose this knowingly")


def screening_target(target: Target) -> Target:
    """A screening worker's target. A GPU judge cannot fork a candidate process per variant once CUDA is up,
    so a GPU worker screens in its own process whatever the target says (screening ranks; the judged gate
    decides): it is started without a judge that would sit idle. The CPU judge screens each variant in a
    candidate process of its own, so CPU targets keep theirs."""
    return in_candidate_process(target) if runs_on_gpu(target.backend) else target
