"""Screening: many variants of one source built, verified and briefly timed in one worker, to rank them.

Each variant goes through the steps a full evaluation takes, with the same code (the harness's own
functions, or in judged mode the judge with a fresh candidate process per variant): build, verify on every
case, then `seconds_per_case` of benchmark per case. A variant that fails a step drops out with its reason.
Nothing here decides a promotion: the orchestrator sends the fastest few through the full evaluation, with
its A/B/A schedule, confirmation pairs and revalidation (orchestrator/run/screening.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from sandbox_worker.failures import failure_event
from sandbox_worker.harness_contract import normalize_benchmark, normalize_build, normalize_verify
from sandbox_worker.harness_kit import context
from sandbox_worker.harness_kit.seeded_inputs import derive_seed
from sandbox_worker.observe import LocalsObserver


class VariantSteps(Protocol):
    def build(self) -> dict[str, Any]: ...
    def verify(self, case: dict[str, Any]) -> dict[str, Any]: ...
    def benchmark(self, case: dict[str, Any], repetitions: int) -> dict[str, Any]: ...
    def close(self) -> None: ...


class InProcessSteps:
    """A variant run by the harness's own build/verify/benchmark in this process (GPU targets)."""

    observes_locals = True  # its wrapper runs here, where a profile hook sees it (judged steps: elsewhere)

    def __init__(self, harness: ModuleType, target: dict[str, Any], kernel_path: str) -> None:
        self.harness = harness
        self.target = target
        self.kernel_path = kernel_path
        self.artifact: Any = None

    def build(self) -> dict[str, Any]:
        value, self.artifact = normalize_build(
            self.harness.build(Path(self.kernel_path).read_text(encoding="utf-8"), self.target))
        return value

    def verify(self, case: dict[str, Any]) -> dict[str, Any]:
        return normalize_verify(self.harness.verify(self.artifact, case))

    def benchmark(self, case: dict[str, Any], repetitions: int) -> dict[str, Any]:
        return normalize_benchmark(self.harness.benchmark(self.artifact, case, repetitions))

    def close(self) -> None:
        self.artifact = None


def screen_variants(steps_for: Callable[[str], VariantSteps], variants: list[dict[str, Any]],
                    cases: list[dict[str, Any]], *, seconds_per_case: float, repetitions: int,
                    seed: int, budget_seconds: float = 600.0, observe_locals: bool = False) -> dict[str, Any]:
    """The ScreenValue for `variants` ({variant_id, kernel_path}), in order. A variant that could not finish
    within `budget_seconds` (judged by the slowest one so far) is not started: it comes back `failed`,
    unscreened, so that what was measured still counts. With `observe_locals`, each case's verify also
    records the integer locals of the variant's own functions (sandbox_worker/observe.py), where the steps
    run in this process."""
    started = time.monotonic()
    results = []
    longest = 0.0  # the slowest variant so far: the next one may take as long
    for index, variant in enumerate(variants):
        if time.monotonic() - started + longest >= budget_seconds:
            results.append({"variant_id": variant["variant_id"], "status": "failed", "medians_us": {}, "samples": {},
                            "reason": f"not screened: the screening's {budget_seconds:.0f} s were spent"})
            continue
        variant_started = time.monotonic()
        results.append(_screen_one(steps_for, variant, cases, seconds_per_case=seconds_per_case,
                                   repetitions=repetitions, seed=derive_seed(seed, index),
                                   observe_locals=observe_locals))
        longest = max(longest, time.monotonic() - variant_started)
        _record_progress(results[-1])
    return {"variants": results}


PROGRESS_FILE = "screening_progress.jsonl"


def _record_progress(result: dict[str, Any]) -> None:
    """One line per screened variant in the scratch dir: if the screening is stopped at its deadline, the
    orchestrator still ranks what was measured (orchestrator/run/screening.py)."""
    with open(context.scratch_dir() / PROGRESS_FILE, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(result, allow_nan=False) + "\n")


def _screen_one(steps_for: Callable[[str], VariantSteps], variant: dict[str, Any], cases: list[dict[str, Any]], *,
                seconds_per_case: float, repetitions: int, seed: int, observe_locals: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"variant_id": variant["variant_id"], "status": "ok", "reason": "",
                              "medians_us": {}, "samples": {}, "observed": {}}
    step = "build"
    steps: VariantSteps | None = None
    try:
        steps = steps_for(variant["kernel_path"])
        context.set_command_context(seed=derive_seed(seed, 0), phase="build")
        built = steps.build()
        if not built["success"]:
            return {**result, "status": "build_failed", "reason": _clip(f"build failed: {built['diagnostics']}")}
        observing = observe_locals and getattr(steps, "observes_locals", False)
        source = Path(variant["kernel_path"]).read_text(encoding="utf-8") if observing else ""
        for number, case in enumerate(cases, start=1):
            step = f"verify (case {case['case_id']})"
            context.set_command_context(seed=derive_seed(seed, number), phase="verify")
            if observing:
                with LocalsObserver(source) as observer:
                    verdict = steps.verify(case)
                result["observed"][case["case_id"]] = observer.observed()
            else:
                verdict = steps.verify(case)
            if not verdict["passed"]:
                return {**result, "status": "incorrect", "reason": _clip(f"{step}: {verdict['diagnostics']}")}
        for number, case in enumerate(cases, start=1):
            step = f"benchmark (case {case['case_id']})"
            brief = {**case, "parameters": {**case["parameters"], "budget_seconds": seconds_per_case}}
            context.set_command_context(seed=derive_seed(seed, 1000 + number), phase="benchmark")
            timing = steps.benchmark(brief, repetitions)
            samples = sorted(timing["samples_us"])
            result["medians_us"][case["case_id"]] = samples[len(samples) // 2]
            result["samples"][case["case_id"]] = len(samples)
    except BaseException as exc:  # noqa: BLE001 - a variant's failure drops the variant, never the screen
        if isinstance(exc, KeyboardInterrupt):
            raise
        relayed = getattr(exc, "failure", None)  # judged mode: the candidate process's own failure event
        event = relayed if isinstance(relayed, dict) else failure_event(None, "screen", exc)
        status = "build_failed" if event["category"] == "build" else "failed"
        return {**result, "status": status, "medians_us": {}, "samples": {}, "observed": {},
                "reason": _clip(f"{step} raised {event['error_type']}: {event['message']}")}
    finally:
        context.set_command_context(seed=None, phase=None)
        if steps is not None:
            steps.close()
    return result


def _clip(text: str, limit: int = 1500) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
