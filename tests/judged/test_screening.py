"""Screening in real workers: many variants built, verified and briefly timed in one worker, each dropping
out with its reason; in judged mode (the example's harness) and with the candidate in the worker process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from orchestrator.worker.evaluation import EvaluationPlan, run_evaluation
from orchestrator.worker.process import SubprocessSpawner
from protocol.bundle import load_cases_file, load_target_file
from protocol.worker import IsolationConfig, ScreenCommand, ScreenVariant
from tests.conftest import VECTOR_ADD
from tests.judged.test_judged_mode import CASES, HONEST, KERNEL, MEMO_AFTER_VERIFY

pytestmark = pytest.mark.slow

WIDE = HONEST.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 256")
WRONG = KERNEL + "\ndef vector_add(x, y):\n    return _launch(x, x)\n"
NO_ENTRY = KERNEL + "\ndef add(x, y):\n    return _launch(x, y)\n"
OUT_OF_RESOURCES = KERNEL + '''
from triton.runtime.errors import OutOfResources


def vector_add(x, y):
    raise OutOfResources(294912, 232448, "shared memory")
'''
VARIANTS = {"honest": HONEST, "wide": WIDE, "wrong": WRONG, "no_entry": NO_ENTRY,
            "out_of_resources": OUT_OF_RESOURCES, "memo": MEMO_AFTER_VERIFY}


def harness_for(tmp_path: Path, judged: bool) -> Path:
    source = (VECTOR_ADD / "harness.py").read_text()
    path = tmp_path / ("judged" if judged else "in_process") / "harness.py"
    path.parent.mkdir(parents=True)
    path.write_text(source if judged else source.replace("\nJUDGE = ", "\nIN_PROCESS_ONLY = "))
    return path


def screen(tmp_path: Path, harness: Path, budget_seconds: float = 600.0, variants: dict | None = None,
           deadline_seconds: float = 240.0, expect_ok: bool = True, observe: bool = False) -> tuple:
    variants = VARIANTS if variants is None else variants
    paths = []
    for name, source in variants.items():
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        paths.append(path)
    work_dir = tmp_path / "worker"
    cases = load_cases_file(CASES)
    command = ScreenCommand(command_id=0, variants=[ScreenVariant(variant_id=p.stem, kernel_path=str(p)) for p in paths],
                            cases=[c.model_dump() for c in cases], seconds_per_case=0.1, repetitions=3, seed=7,
                            budget_seconds=budget_seconds, observe_locals=observe)

    async def main():
        plan = EvaluationPlan(
            label="screening", experiment_id="s001", run_id="screen", kernel_path=paths[0], harness_path=harness,
            target=load_target_file(VECTOR_ADD / "target.json"), cases=cases, repetitions=3, work_dir=work_dir,
            log_path=tmp_path / "worker.log", deadline=trio.current_time() + deadline_seconds,
            phase_seconds=deadline_seconds,
            benchmark=False, screen=command,
            isolation=IsolationConfig(mode="standard", scratch_dir=str(work_dir), writable_dirs=[str(work_dir)]))
        return await run_evaluation(plan, SubprocessSpawner(), dict(os.environ))

    evaluation = trio.run(main)
    if not expect_ok:
        return command, evaluation, work_dir
    assert evaluation.status.value == "ok", evaluation.reason
    return {v.variant_id: v for v in evaluation.screening}, evaluation


@pytest.mark.parametrize("judged", [True, False], ids=["judged", "in_process"])
def test_one_worker_ranks_every_variant_and_drops_the_broken_with_their_reasons(tmp_path, judged):
    results, evaluation = screen(tmp_path, harness_for(tmp_path, judged))
    assert evaluation.worker.verdict_process == ("judge" if judged else "candidate")
    assert list(results) == list(VARIANTS)
    for name in ("honest", "wide"):
        assert results[name].status == "ok", results[name].reason
        assert set(results[name].medians_us) == {"n256"} and results[name].samples["n256"] >= 3
    assert results["wrong"].status == "incorrect"
    assert results["wrong"].reason.startswith("verify (case n256): output:")
    assert results["no_entry"].status == "build_failed"
    assert "kernel does not export vector_add" in results["no_entry"].reason
    assert results["out_of_resources"].status == "build_failed"
    assert "OutOfResources: out of resource: shared memory, Required: 294912" in results["out_of_resources"].reason
    if judged:  # every timed call is checked by the judge: the memoized answer drops out
        assert results["memo"].status == "failed"
        assert "cheat" not in results["honest"].reason
        assert "judge's check of every timed call" in results["memo"].reason


def test_variants_that_would_outlast_the_budget_come_back_unscreened_with_what_was_measured(tmp_path):
    # a budget the control alone outlasts on any machine: every later variant would outlast it too
    results, _ = screen(tmp_path, harness_for(tmp_path, judged=False), budget_seconds=0.001)
    assert results["honest"].status == "ok"  # the first always runs: it is the control
    unscreened = [name for name, r in results.items() if r.reason.startswith("not screened")]
    assert unscreened == list(VARIANTS)[1:]  # the rest of the family, in order, each failed with what was measured
    assert all(results[name].status == "failed" and not results[name].medians_us for name in unscreened)


def test_a_screening_stopped_at_its_deadline_keeps_what_it_measured(tmp_path):
    from orchestrator.run.screening import _progress
    from sandbox_worker.screening import PROGRESS_FILE

    hang = KERNEL + "\nimport time\n\ndef vector_add(x, y):\n    time.sleep(3600)\n"
    command, evaluation, work_dir = screen(tmp_path, harness_for(tmp_path, judged=False),
                                           variants={"honest": HONEST, "hang": hang, "wide": WIDE},
                                           deadline_seconds=25.0, expect_ok=False)
    assert evaluation.status.value == "timeout", evaluation.reason
    kept = _progress(work_dir / PROGRESS_FILE, command.variants)
    assert [(v.variant_id, v.status) for v in kept] == [("honest", "ok"), ("hang", "failed"), ("wide", "failed")]
    assert kept[0].medians_us["n256"] > 0
    assert kept[1].reason == "not screened: the screening was stopped at its deadline"


OBSERVED = KERNEL + '''
def vector_add(x, y):
    n = x.numel()
    blocks = triton.cdiv(n, BLOCK_SIZE)
    return _launch(x, y)
'''


@pytest.mark.parametrize("judged", [True, False], ids=["judged", "in_process"])
def test_screening_observes_the_wrappers_integer_locals_where_the_wrapper_runs_in_the_worker(tmp_path, judged):
    """What a per-shape table is keyed on (orchestrator/providers/tune/tables.py): the wrapper's `n` per case.
    In judged mode the wrapper runs in the candidate's own process, out of the hook's sight: nothing."""
    results, _ = screen(tmp_path, harness_for(tmp_path, judged), variants={"observed": OBSERVED, "wide": WIDE},
                        observe=True)
    assert results["observed"].status == "ok" and results["wide"].status == "ok"
    if judged:
        assert results["observed"].observed == {} and results["wide"].observed == {}
        return
    seen = results["observed"].observed["n256"]
    assert seen["vector_add.n"] == 256 and seen["vector_add.blocks"] == 4
    assert "vector_add.n" not in results["wide"].observed["n256"]  # its wrapper has no such local
