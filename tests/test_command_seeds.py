"""Command seeds: 64 bits from the operating system's CSPRNG, fresh per command, never derived from anything a
candidate could read (the evaluation's own seed is in its record), and recorded for the user after the fact."""

from __future__ import annotations

from pathlib import Path

import trio

from orchestrator.worker.evaluation import EvaluationPlan, _Session
from protocol.bundle import Case, Target


def _plan(seed: int) -> EvaluationPlan:
    return EvaluationPlan(label="candidate", experiment_id="r001-c000", run_id="seeds", kernel_path=Path("k.py"),
                          harness_path=Path("h.py"), target=Target(backend="cpu", architecture="interpreter"),
                          cases=[Case(case_id="a")], repetitions=5, work_dir=Path("w"), log_path=Path("w.log"),
                          deadline=0.0, phase_seconds=1.0, seed=seed)


def test_seeds_are_64_bits_wide_fresh_per_command_and_not_derived_from_the_evaluations_seed():
    trio.run(_seeds_are_64_bits_wide)


async def _seeds_are_64_bits_wide() -> None:
    # a session times its phases on trio's clock, so it lives inside a trio run
    first, second = _Session(_plan(7), connection=None), _Session(_plan(7), connection=None)  # type: ignore[arg-type]
    first.phase = "setup"  # a seed is recorded with the phase its command belongs to
    drawn = [first.seed("a") for _ in range(64)] + [second.seed("a") for _ in range(64)]
    assert len(set(drawn)) == 128  # the same evaluation seed gives no repeat: nothing derives them from it
    assert all(0 <= seed < 2**64 for seed in drawn)
    assert max(drawn) >= 2**63  # the top bit is used (for 128 draws of 64 bits, false with probability 2^-128)
    assert min(drawn).bit_length() > 31
    assert [(s.phase, s.case_id) for s in first.seeds[:1]] == [("setup", "a")]


def test_the_plan_seed_that_names_an_evaluation_is_64_bits_too():
    seeds = {_plan_default().seed for _ in range(32)}
    assert len(seeds) == 32 and max(seeds) >= 2**32


def _plan_default() -> EvaluationPlan:
    return EvaluationPlan(label="candidate", experiment_id="r001-c000", run_id="seeds", kernel_path=Path("k.py"),
                          harness_path=Path("h.py"), target=Target(backend="cpu", architecture="interpreter"),
                          cases=[Case(case_id="a")], repetitions=5, work_dir=Path("w"), log_path=Path("w.log"),
                          deadline=0.0, phase_seconds=1.0)
