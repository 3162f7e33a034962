"""Judged mode (sandbox_worker/judged/) in real workers: the candidate in its own process, the verdict in the judge.

Each kernel is a vector_add written to win one way if the verdict were computed in its own process; the
evaluation runs through `run_evaluation` (what the run loop calls) with the example's judged harness.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation
from orchestrator.worker.process import SubprocessSpawner
from protocol.bundle import load_cases_file, load_target_file
from protocol.results import Evaluation
from protocol.worker import IsolationConfig
from tests.conftest import VECTOR_ADD

pytestmark = pytest.mark.slow

CASES = Path(__file__).resolve().parents[1] / "faults" / "cases.json"  # one case, n=256, 0.2 s of sampling

KERNEL = '''
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def _launch(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(out.numel(), BLOCK_SIZE),)](x, y, out, out.numel(), BLOCK_SIZE=BLOCK_SIZE)
    return out
'''

HONEST = KERNEL + '''
def vector_add(x, y):
    return _launch(x, y)
'''

# From the first timed call on, the host's copy into the shared slot happens on a thread 5 ms after the reply
# (the judge stops the process on the reply: work deferred by less than its reaction time gains only that).
DEFERRED_STORE = KERNEL + '''
import sys, threading, time

_host = sys.modules["sandbox_worker.judged.candidate"]
_real_store = _host._store
_calls = []


def _deferred_store(returned, outputs, inputs):
    _calls.append(None)
    if len(_calls) <= 2:
        return _real_store(returned, outputs, inputs)
    threading.Thread(target=lambda: (time.sleep(0.005), _real_store(returned, outputs, inputs))).start()
    return [{"type": "Tensor", "shape": list(returned.shape), "dtype": "float32", "device": "cpu",
             "contiguous": True, "aliases_input": False}]


_host._store = _deferred_store


def vector_add(x, y):
    return _launch(x, y)
'''

# Verify calls the entry twice per case; from then on it serves the first answer again (no work at all).
MEMO_AFTER_VERIFY = KERNEL + '''
_answers = []


def vector_add(x, y):
    if len(_answers) >= 2:
        return _answers[0].clone()
    _answers.append(_launch(x, y))
    return _answers[-1]
'''

# Correct only if every way into the judge's process is closed: its memory, its environment, its fds.
REACHES_FOR_THE_JUDGE = KERNEL + '''
import ctypes, os

def _judge_reachable():
    judge = os.getppid()
    for path in (f"/proc/{judge}/mem", f"/proc/{judge}/environ"):
        try:
            with open(path, "rb") as handle:
                handle.read(1)
            return path
        except OSError:
            pass
    try:
        numbers = [int(name) for name in os.listdir(f"/proc/{judge}/fd")]
    except OSError:
        numbers = list(range(3, 32))
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(434, judge, 0)  # pidfd_open
    for number in numbers:
        try:
            return f"/proc/{judge}/fd/{number} -> " + os.readlink(f"/proc/{judge}/fd/{number}")
        except OSError:
            pass
        if pidfd >= 0 and libc.syscall(438, pidfd, number, 0) >= 0:  # pidfd_getfd
            return f"pidfd_getfd({judge}, {number})"
    if pidfd >= 0:
        return f"pidfd_open({judge})"
    # signal 0 only asks whether a signal would be delivered: a SIGSTOP or SIGKILL would be, just as well
    for target in (judge, 0, -1, -os.getpgid(judge)):
        try:
            os.kill(target, 0)
            return f"kill({target}, ...)"
        except OSError:
            pass
    if libc.syscall(234, judge, judge, 0) == 0:  # tgkill
        return f"tgkill({judge}, {judge}, ...)"
    return None


def vector_add(x, y):
    reachable = _judge_reachable()
    if reachable is not None:
        raise RuntimeError(f"the judge is reachable: {reachable}")
    return _launch(x, y)
'''

SEGFAULT_WHEN_TIMED = KERNEL + '''
import os, signal
_calls = []


def vector_add(x, y):
    _calls.append(None)
    if len(_calls) > 2:
        os.kill(os.getpid(), signal.SIGSEGV)
    return _launch(x, y)
'''


def evaluate(tmp_path: Path, source: str, **target_fields: str) -> Evaluation:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(source)
    work_dir = tmp_path / "worker"

    async def main() -> Evaluation:
        plan = EvaluationPlan(
            label="candidate", experiment_id="e001", run_id="judged", kernel_path=kernel,
            harness_path=VECTOR_ADD / "harness.py",
            target=load_target_file(VECTOR_ADD / "target.json").model_copy(update=target_fields),
            cases=load_cases_file(CASES), repetitions=5, work_dir=work_dir, log_path=tmp_path / "worker.log",
            deadline=trio.current_time() + 120.0, phase_seconds=60.0, log_limit_bytes=1 << 20,
            isolation=IsolationConfig(mode="standard", scratch_dir=str(work_dir), writable_dirs=[str(work_dir)]))
        return await run_evaluation(plan, SubprocessSpawner(), dict(os.environ))

    return trio.run(main)


def test_honest_kernel_is_judged_from_another_process(tmp_path):
    evaluation = evaluate(tmp_path, HONEST)
    assert evaluation.status.value == "ok", evaluation.reason
    assert evaluation.worker.verdict_process == "judge"
    case = evaluation.cases[0]
    assert case.cache_policy == "judged_cpu_round_trip"
    assert case.metrics["benchmark.checked_calls"] >= len(case.samples_us) >= 5
    # every command had a seed of its own, 64 bits wide, recorded once the evaluation was over
    assert [(s.phase, s.case_id) for s in evaluation.command_seeds] == [("verify", "n256"), ("benchmark", "n256")]
    assert all(0 <= s.seed < 2**64 for s in evaluation.command_seeds)
    assert max(s.seed for s in evaluation.command_seeds) >= 2**32
    # the judge timed its verify step by step, on its own clock: the inputs and reference, the candidate's two
    # calls (the first imports and runs the kernel for the first time), the checks; together at most the phase
    steps = {key: value for key, value in case.metrics.items() if key.startswith("verify.")}
    assert set(steps) == {"verify.inputs_seconds", "verify.call_first_seconds", "verify.call_seconds",
                          "verify.check_seconds"}, steps
    assert all(value > 0 for value in steps.values()), steps
    assert sum(steps.values()) <= case.phase_seconds["verify"]


def test_a_target_can_keep_the_verdict_in_the_candidates_process(tmp_path):
    evaluation = evaluate(tmp_path, HONEST, verdict_process="candidate")
    assert evaluation.status.value == "ok", evaluation.reason
    assert evaluation.worker.verdict_process == "candidate"
    assert evaluation.cases[0].cache_policy != "judged_cpu_round_trip"


def test_work_deferred_past_the_reply_is_caught(tmp_path):
    evaluation = evaluate(tmp_path, DEFERRED_STORE)
    assert evaluation.status.value == "cheat_detected", evaluation.reason
    assert "benchmark (case n256): cheat detected by the judge's check of every timed call: call " in evaluation.reason
    assert "a poisoned output left unwritten?" in evaluation.reason


def test_a_memoized_answer_after_verify_is_caught_on_the_first_timed_call(tmp_path):
    evaluation = evaluate(tmp_path, MEMO_AFTER_VERIFY)
    assert evaluation.status.value == "cheat_detected", evaluation.reason
    assert "call 1 (after verify passed): output:" in evaluation.reason


def test_the_judges_memory_fds_and_environment_are_out_of_reach(tmp_path):
    evaluation = evaluate(tmp_path, REACHES_FOR_THE_JUDGE)
    assert evaluation.status.value == "ok", evaluation.reason


def test_a_candidate_process_crash_is_reported_as_a_crash(tmp_path):
    evaluation = evaluate(tmp_path, SEGFAULT_WHEN_TIMED)
    assert evaluation.status.value == "crashed"
    assert evaluation.reason == "the candidate process killed by SIGSEGV during benchmark (case n256)"
