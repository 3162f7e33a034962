"""The run loop in-process: a fake evaluator that starts no worker, and a helper that runs the real loop on it.

`FakeEvaluator` has the shape the run's steps use (`orchestrator.run.evaluator.Evaluates`) and answers each
evaluation from a `respond` function: synthetic samples for a source's declared latency (`synthetic`, the CPU
bundle's model without its worker), or the evaluations a recorded run measured (`recorded`). Everything else is
the product: `OptimizationRun`, the referee, the ledger, the provider. What only a worker can show (isolation,
deadlines, crashes, the protocol) stays with the tests that start workers.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from orchestrator.bundle.inputs import FrozenBundle, Inputs, load_inputs
from orchestrator.decision.statistics import sample_stats
from orchestrator.ledger.artifacts import RunArtifacts, prepare_output_dir
from orchestrator.ledger.config import RunConfig
from orchestrator.ledger.evaluations import FinishedEvaluation, reusable_evaluations
from orchestrator.ledger.live_log import LiveLog
from orchestrator.providers.base import CandidateProvider
from orchestrator.run.commit_step import CommitStep
from orchestrator.run.loop import OptimizationRun
from orchestrator.run.resume.aside import move_aside_unfinished
from orchestrator.run.resume.rebuild import Resumption, resumption
from orchestrator.run.resume.record import read_recorded_run
from orchestrator.run.state import RunState
from orchestrator.worker.kernel_cache import SourceKernelCache
from protocol.bundle import Budget, Case
from protocol.results import (
    CaseMeasurement,
    Evaluation,
    EvaluationStatus,
    ExperimentRecord,
    RunResult,
    WorkerRecord,
)
from protocol.roles import Role


@dataclass(frozen=True)
class Request:
    """One evaluation the run asked for."""

    experiment_id: str
    tag: str
    role: Role
    source: str
    profile_level: str | None
    benchmark: bool
    profile_until: float | None = None  # trio time; with the run's deadline as `deadline` below
    deadline: float | None = None


Respond = Callable[[Request, list[Case]], Evaluation]


class FakeEvaluator:
    """`Evaluates` without workers: `respond` makes each evaluation; `requests` lists them in order."""

    def __init__(self, config: RunConfig, inputs: Inputs, bundle: FrozenBundle, artifacts: RunArtifacts,
                 log: LiveLog, spawner: object = None, *, respond: Respond) -> None:
        self.config, self.inputs, self.bundle, self.artifacts, self.log = config, inputs, bundle, artifacts, log
        self.reusable: dict[tuple[str, str], FinishedEvaluation] = {}
        self.kernel_cache = SourceKernelCache(artifacts.root / "kernel_cache")  # compile ahead keeps into it
        self.respond = respond
        self.requests: list[Request] = []

    def check_bundle(self, state: RunState) -> None:
        """No worker runs, so nothing can change the frozen bundle."""

    async def evaluate(self, state: RunState, *, role: Role, experiment_id: str, kernel_path: Path, tag: str,
                       deadline: float, profile_level: str | None = None, profile_reason: str = "candidate",
                       benchmark: bool = True, profile_until: float | None = None) -> Evaluation:
        request = Request(experiment_id, tag, role, kernel_path.read_text(encoding="utf-8"),
                          profile_level if self.config.profile else None, benchmark,
                          min(deadline, profile_until) if profile_until is not None else deadline, deadline)
        self.requests.append(request)
        await trio.lowlevel.checkpoint()
        return self.respond(request, list(self.inputs.cases))


# ---- synthetic evaluations: the CPU bundle's latency model ---------------------------------------------------

LATENCY = re.compile(r"^LATENCY_US = ([0-9.]+)$", re.MULTILINE)


def synthetic(*, drift: float = 0.001, noise: float = 0.003, samples: int = 30, seed: int = 0,
              wall_seconds: float = 0.5) -> Respond:
    """Samples of each source's `LATENCY_US` times a case's `cost`, with per-run drift and per-sample noise (the
    synthetic bundle's harness, tests/e2e/synthetic); a source that does not double its values is incorrect."""
    rng = random.Random(seed)

    def respond(request: Request, cases: list[Case]) -> Evaluation:
        found = LATENCY.search(request.source)
        correct = "v * 2.0" in request.source
        measured = []
        run_drift = 1.0 + rng.gauss(0.0, drift)
        for case in cases:
            values = []
            if request.benchmark and correct and found:
                latency = float(found.group(1)) * float(case.parameters.get("cost", 1.0))
                values = [latency * run_drift * (1.0 + rng.gauss(0.0, noise)) for _ in range(samples)]
            measured.append(CaseMeasurement(case_id=case.case_id, protected=case.protected, weight=case.weight,
                                            correct=correct, samples_us=values,
                                            stats=sample_stats(values) if values else None))
        status = EvaluationStatus.OK if correct else EvaluationStatus.INCORRECT
        return Evaluation(label=request.role.value, status=status, reason="" if correct else "wrong output",
                          cases=measured, worker=WorkerRecord(device="cpu", wall_seconds=wall_seconds))

    return respond


# ---- recorded evaluations: what a recorded run measured ------------------------------------------------------


def profiled(*, not_taken: set[tuple[str, str]] = frozenset(), failed: set[tuple[str, str]] = frozenset()):
    """Synthetic samples with a Proton profile that agrees with them (the source's latency) wherever a profile is
    asked for; for the (experiment, tag) pairs in `not_taken` the run's time allowed none, in `failed` the
    profiler failed."""
    honest = synthetic()

    def respond(request: Request, cases):
        evaluation = honest(request, cases)
        if request.profile_level is None:
            return evaluation
        latency = float(LATENCY.search(request.source).group(1))
        for case, measured in zip(cases, evaluation.cases, strict=True):
            kernel_us = latency * float(case.parameters.get("cost", 1.0))
            if (request.experiment_id, request.tag) in not_taken:
                measured.profile_not_taken = "budget"
            elif (request.experiment_id, request.tag) in failed:
                measured.profile = {"available": False, "error": "RuntimeError: the profiler crashed"}
            elif measured.correct:
                measured.profile = {"proton": {"available": True, "main_kernel_us": kernel_us,
                                               "non_main_kernel_us": 0.0, "total_kernel_us": kernel_us}}
        return evaluation

    return respond


def recorded(experiments: list[ExperimentRecord]) -> Respond:
    """Each evaluation a recorded run made, found by the experiment's id and the worker's tag: `<index>-<role>`
    is the record's evaluation at that index, `profile` and `deep-profile` its profiles, `baseline` the baseline's."""
    by_id = {record.experiment_id: record for record in experiments}
    profiles = {"profile": Role.PROFILE.value, "deep-profile": Role.DEEP_PROFILE.value}

    def respond(request: Request, cases: list[Case]) -> Evaluation:
        record = by_id[request.experiment_id]
        if request.tag == "baseline":
            return record.evaluations[0]
        if request.tag in profiles:
            return next(e for e in record.evaluations if e.label == profiles[request.tag])
        index, _, label = request.tag.partition("-")
        evaluation = record.evaluations[int(index)]
        assert evaluation.label == label == request.role.value, (request, evaluation.label)
        return evaluation

    return respond


# ---- running the loop ------------------------------------------------------------------------------------------


@dataclass
class InProcessRun:
    result: RunResult
    evaluator: FakeEvaluator
    output_dir: Path
    log_lines: list[str] = field(default_factory=list)

    def decisions(self) -> dict[str, str]:
        return {e.experiment_id: e.decision.status.value for e in self.result.experiments if e.decision}

    def experiment(self, experiment_id: str) -> ExperimentRecord:
        return next(e for e in self.result.experiments if e.experiment_id == experiment_id)


def make_config(bundle: Path, output_dir: Path, budget: Budget | None = None, **config: object) -> RunConfig:
    """The run's configuration on a bundle directory: no commits and fresh workers unless `config` says so."""
    paths = {name: bundle / f"{name}.{'py' if name in ('kernel', 'harness') else 'json'}"
             for name in ("kernel", "harness", "cases", "target")}
    settings = {"commit_winner": False, "worker_start": "fresh", **config}
    return RunConfig(**paths, output_dir=output_dir, budget=budget or Budget(max_total_seconds=3600),
                     **settings)  # type: ignore[arg-type]


def run_in_process(bundle: Path, output_dir: Path, provider: CandidateProvider, respond: Respond, *,
                   budget: Budget | None = None, test_seed: Callable[[str], int] | None = None,
                   **config: object) -> InProcessRun:
    """The real loop (`OptimizationRun.run`) on a bundle directory (kernel.py, harness.py, cases.json,
    target.json), its evaluations answered by `respond`; `config` sets RunConfig fields, `test_seed` the
    bootstrap's seed per experiment."""
    output_dir = prepare_output_dir(output_dir)
    run_config = make_config(bundle, output_dir, budget, **config)
    inputs = load_inputs(kernel=run_config.kernel, harness=run_config.harness, cases=run_config.cases,
                         target=run_config.target, budget=None, reference_kernel=None)
    return _run(run_config, inputs, provider, respond, test_seed=test_seed)


def resume_in_process(bundle: Path, output_dir: Path, provider: CandidateProvider, respond: Respond, *,
                      budget: Budget | None = None, **config: object) -> InProcessRun:
    """The loop resumed on a killed run's output directory as `tlx-agent optimize --resume` resumes it: the
    recorded run read back, unfinished experiments moved aside, the inputs from the frozen bundle."""
    recorded = read_recorded_run(output_dir)
    run_config = make_config(bundle, recorded.output_dir, budget, **config)
    frozen = recorded.bundle
    inputs = load_inputs(kernel=frozen.path("kernel.py"), harness=frozen.harness_path, cases=frozen.path("cases.json"),
                         target=frozen.path("target.json"), budget=None, reference_kernel=None)
    inputs.kernel_path = run_config.kernel
    point = resumption(recorded, run_config.budget.max_total_seconds, run_config.budget.candidates_per_round)
    count = recorded.resume_count + 1
    moved = move_aside_unfinished(recorded.output_dir, {r.experiment_id for r in recorded.experiments}, count)
    point.reusable, _ = reusable_evaluations(recorded.output_dir)
    RunArtifacts(recorded.output_dir).journal("run_resumed", argv=["tlx-agent"], resume_count=count,
                                              moved_aside=moved, budget_overrides={})
    return _run(run_config, inputs, provider, respond, resume=point)


def _run(run_config: RunConfig, inputs: Inputs, provider: CandidateProvider, respond: Respond, *,
         test_seed: Callable[[str], int] | None = None, resume: Resumption | None = None) -> InProcessRun:
    output_dir = run_config.output_dir
    log = LiveLog(stream=_Lines())
    log.attach_file(output_dir / "live.log")
    artifacts = RunArtifacts(output_dir)
    made: list[FakeEvaluator] = []

    def make_evaluator(*args: object) -> FakeEvaluator:
        made.append(FakeEvaluator(*args, respond=respond))  # type: ignore[arg-type]
        return made[-1]

    run = OptimizationRun(run_config, inputs, provider, log, artifacts,
                          CommitStep(run_config, run_config.kernel, log, artifacts), make_evaluator=make_evaluator,
                          resume=resume, **({"draw_test_seed": test_seed} if test_seed else {}))
    try:
        result = trio.run(run.run)
    finally:
        log.close()
    return InProcessRun(result, made[0], output_dir, log.stream.lines)  # type: ignore[attr-defined]


class _Lines:
    """The live log's stream, kept as lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self.lines += [line for line in text.splitlines() if line]

    def flush(self) -> None:
        pass


__all__ = ["FakeEvaluator", "InProcessRun", "Request", "recorded", "make_config", "resume_in_process", "run_in_process",
           "synthetic"]
