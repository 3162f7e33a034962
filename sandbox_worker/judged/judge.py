"""The judge: verify and time a candidate that runs in another process, on inputs it never sees early.

For every call, verify, warm-up or timed alike, the judge draws fresh inputs from the command's seed (never
sent to the candidate) and a salt of its own, writes them into a slot of the shared memory, computes the
reference on private copies and poisons the outputs while the candidate is stopped; then it resumes the
candidate, sends `call`, takes the reply, stops it again, and checks what the slot now holds: the output
values against the reference (`comparison.compare`), the inputs against its private copies, and what the
candidate says it returned. The clock is the judge's; a sample is the time from resuming the candidate
to its reply. Every timed call is checked, so a call that skipped or deferred its work fails, and a
failure after verification passed is reported as a cheat (`CheatDetected`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sandbox_worker.autotune_guard import sanitized_activity
from sandbox_worker.harness_kit import checks
from sandbox_worker.harness_kit.sampling import SamplingLimits, collect, warm_up
from sandbox_worker.judged.process import CandidateBrokeProtocol, CandidateProcess
from sandbox_worker.judged.slots import SlotLayout, plan_layout, require_fit, slot_views
from sandbox_worker.judged.step_clock import StepClock

SLOTS = 2  # calls alternate between two slots, so an address-keyed cache sees two addresses, both refilled
CACHE_POLICY_JUDGED = "judged_cpu_round_trip"
VERIFY_SALTS = (0, 1)
BENCHMARK_SALT_BASE = 1_000
WARMUP_SECONDS = 0.025
TARGET_RSE = 0.005
MAX_SAMPLES = 10_000


class CheatDetected(Exception):
    """A check the honest kernel always passes failed after verification passed; names the check."""

    def __init__(self, check: str, detail: str) -> None:
        super().__init__(f"{check}: {detail}")
        self.check = check


class CandidateRaised(Exception):
    """The candidate's call raised; `failure` is the failure event its process built."""

    def __init__(self, failure: dict[str, Any]) -> None:
        super().__init__(str(failure.get("message", "")))
        self.failure = failure


class SandboxAttempts(Exception):
    """The candidate process attempted what the sandbox refused (its attempt monitor's report)."""

    def __init__(self, attempts: list[str]) -> None:
        super().__init__("; ".join(attempts))
        self.attempts = attempts


@dataclass
class PreparedCall:
    slot: int
    arguments: tuple[Any, ...]  # the judge's private inputs
    expected: tuple[Any, ...]


@dataclass
class Judge:
    spec: Any  # harness_kit.entry_point.JudgedEntry
    target: dict[str, Any]
    kernel_path: str
    process: CandidateProcess
    layout: SlotLayout | None = None
    slot_views: list[tuple[list[Any], list[Any]]] = field(default_factory=list)
    next_slot: int = 0
    writable_dirs: list[str] | None = None
    # what the candidate process says its Triton autotuners did (sandbox_worker/autotune_guard.py): a record of
    # its own word, never a verdict
    candidate_autotune: dict[str, Any] | None = None
    records_launches = False  # GpuJudge: replays recorded launches instead of calling the candidate per sample
    clock: StepClock = field(default_factory=StepClock)  # the current verify's seconds per step

    @classmethod
    def start(cls, spec: Any, target: dict[str, Any], kernel_path: str, *, writable_dirs: list[str] | None,
              own_pid_namespace: bool) -> Judge:
        return cls(spec=spec, target=target, kernel_path=kernel_path, writable_dirs=writable_dirs,
                   process=CandidateProcess.fork(writable_dirs, own_pid_namespace))

    def close(self) -> None:
        self.process.close()

    def for_variant(self, kernel_path: str) -> Judge:
        """A judge of the same harness for another source, with a candidate process of its own (screening)."""
        return Judge.start(self.spec, self.target, kernel_path, writable_dirs=self.writable_dirs,
                           own_pid_namespace=self.process.own_pid_namespace)

    # ---- the harness contract ------------------------------------------------------------------------

    def build(self) -> dict[str, Any]:
        reply = self._request({"kind": "build", "kernel_path": self.kernel_path, "entry": self.spec.entry,
                               "signature": self.spec.signature}, ("built", "raised"))[0]
        if reply["kind"] == "raised":
            raise CandidateRaised(reply["failure"] if isinstance(reply.get("failure"), dict) else {})
        return {"success": reply.get("success") is True, "diagnostics": str(reply.get("diagnostics", ""))[:20_000]}

    def verify(self, case: dict[str, Any]) -> dict[str, Any]:
        """Two trials on fresh inputs in the same slots; the outputs must follow the inputs."""
        if self.spec.verify_blocker:
            return checks.verdict(False, self.spec.verify_blocker)
        self.clock = StepClock()
        result = self._verify_trials(case)
        if not result["passed"] and self.spec.failure_note:
            result["diagnostics"] += f" ({self.spec.failure_note})"
        result["metrics"].update(self.clock.metrics())
        return result

    def _verify_trials(self, case: dict[str, Any]) -> dict[str, Any]:
        trials, verdicts = [], []
        for index, salt in enumerate(VERIFY_SALTS):
            with self.clock.step("inputs"):  # the inputs, the reference on private copies, the poisoned slot
                prepared = self._prepare(case, salt)
            with self.clock.step("call_first" if index == 0 else "call"):
                reply = self._call(prepared)[0]
            with self.clock.step("check"):
                verdict = self._check(prepared, reply)
            if not verdict["passed"]:
                return verdict
            trials.append((prepared.expected, self._read_outputs(prepared.slot)))
            verdicts.append(verdict)
        return checks.merge_verdicts(verdicts + input_dependence(trials))

    def benchmark(self, case: dict[str, Any], repetitions: int) -> dict[str, Any]:
        budget = float(case["parameters"].get("budget_seconds", 2.0))
        limits = SamplingLimits(min_samples=repetitions, max_samples=max(MAX_SAMPLES, repetitions),
                                target_rse=TARGET_RSE, budget_seconds=budget, warmup_seconds=WARMUP_SECONDS)
        counter = {"calls": 0}

        def take_sample() -> tuple[float, Any]:
            counter["calls"] += 1
            prepared = self._prepare(case, BENCHMARK_SALT_BASE + counter["calls"])
            reply, elapsed_ns = self._call(prepared)
            verdict = self._check(prepared, reply)
            if not verdict["passed"]:
                raise CheatDetected("judge's check of every timed call",
                                    f"call {counter['calls']} (after verify passed): {verdict['diagnostics']}")
            return max(elapsed_ns, 1) / 1000.0, None

        warmup = warm_up(take_sample, warmup_seconds=limits.warmup_seconds, min_calls=1,
                         max_calls=limits.max_samples)
        samples, _, reason, stats = collect(take_sample, limits)
        metrics: dict[str, Any] = {"rse": stats.rse, "mode": "judged_cpu", "flush_bytes": None,
                                   "stopped_by": reason, "checked_calls": counter["calls"]}
        if self.spec.work is not None:
            metrics.update(self.spec.work(case))
        return {"samples_us": samples, "warmup_count": len(warmup), "cache_policy": CACHE_POLICY_JUDGED,
                "metrics": metrics}

    # ---- one call -----------------------------------------------------------------------------------

    def _prepare(self, case: dict[str, Any], salt: int) -> PreparedCall:
        """Fresh inputs in the next slot, the reference on private copies, poisoned outputs."""
        arguments = tuple(self.spec.make_inputs(case, "cpu", salt))
        expected = self.spec.reference(*checks.clone_args(arguments))
        expected = tuple(expected) if isinstance(expected, (tuple, list)) else (expected,)
        layout = plan_layout(arguments, expected, outputs_are_arguments=self.spec.outputs_are_arguments)
        if layout != self.layout:
            self._map(layout)
        slot = self.next_slot
        self.next_slot = (slot + 1) % SLOTS
        inputs, outputs = self.slot_views[slot]
        for view, argument in zip(inputs, (a for a in arguments if _is_tensor(a)), strict=True):
            view.copy_(argument)
        checks.poison_(outputs)
        return PreparedCall(slot=slot, arguments=arguments, expected=expected)

    def _map(self, layout: SlotLayout) -> None:
        require_fit(self.process.arena, layout, SLOTS)
        self.slot_views = slot_views(self.process.arena, layout, SLOTS)
        self._request({"kind": "layout", "layout": layout.to_json(), "slots": SLOTS}, ("mapped",))
        self.layout = layout

    def _call(self, prepared: PreparedCall) -> tuple[dict[str, Any], int]:
        reply, elapsed = self._request({"kind": "call", "slot": prepared.slot}, ("called", "raised"))
        if reply["kind"] == "raised":
            failure = reply.get("failure")
            raise CandidateRaised(failure if isinstance(failure, dict) else {"message": "raised"})
        return reply, elapsed

    def _request(self, message: dict[str, Any], expected: tuple[str, ...]) -> tuple[dict[str, Any], int]:
        try:
            reply, elapsed = self.process.request(message, expected)
        except CandidateBrokeProtocol as exc:
            raise CheatDetected("candidate process's channel", str(exc)) from None
        if "autotune" in reply:
            self.candidate_autotune = sanitized_activity(reply["autotune"])
        attempts = reply.get("attempts")
        if isinstance(attempts, list) and attempts:
            raise SandboxAttempts([str(a)[:500] for a in attempts[:20]])
        return reply, elapsed

    def _read_outputs(self, slot: int) -> tuple[Any, ...]:
        return tuple(view.clone() for view in self.slot_views[slot][1])

    def _check(self, prepared: PreparedCall, reply: dict[str, Any]) -> dict[str, Any]:
        """Verdict on the slot after the call: what was returned, the values, the inputs."""
        described = reply.get("outputs")
        problem = None if self.spec.outputs_are_arguments else returned_problem(described, prepared.expected,
                                                                                 self.spec.compare)
        if problem is not None:
            return checks.verdict(False, problem)
        result = compare_to_reference(self.spec, self._read_outputs(prepared.slot), prepared.expected,
                                      prepared.arguments)
        if self.spec.compare.get("allow_input_mutation"):
            return result
        inputs = self.slot_views[prepared.slot][0]
        private = tuple(a for a in prepared.arguments if _is_tensor(a))
        return checks.merge_verdicts([result, checks.inputs_unchanged(inputs, private)])


def compare_to_reference(spec: Any, actual: tuple[Any, ...], expected: tuple[Any, ...],
                         inputs: tuple[Any, ...]) -> dict[str, Any]:
    """`checks.compare` of a call's outputs with the reference, under the harness's comparison options."""
    options = {k: v for k, v in spec.compare.items() if k != "allow_input_mutation"}
    return checks.compare(actual[0] if len(actual) == 1 else actual, expected[0] if len(expected) == 1 else expected,
                          inputs=inputs, **options)


def input_dependence(trials: list[tuple[tuple[Any, ...], tuple[Any, ...]]]) -> list[dict[str, Any]]:
    """Failed verdicts for two verify trials (reference, output) whose outputs do not follow their inputs."""
    (first_expected, first_actual), (second_expected, second_actual) = trials
    if checks.outputs_equal(first_expected, second_expected):
        return [checks.verdict(False, "reference output does not depend on input: the case cannot detect "
                                      "memoized outputs")]
    if checks.outputs_equal(first_actual, second_actual):
        return [checks.verdict(False, "output does not depend on input: identical outputs for two different inputs")]
    return []


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def returned_problem(described: Any, expected: tuple[Any, ...], compare: dict[str, Any],
                      device: str = "cpu") -> str | None:
    """What is wrong with what the candidate says it returned, or None. Values are read from the slot."""
    if not isinstance(described, list) or len(described) != len(expected):
        count = len(described) if isinstance(described, list) else "?"
        return f"returned {count} output(s), expected {len(expected)}"
    for index, (facts, reference) in enumerate(zip(described, expected, strict=True)):
        where = f"output {index}" if len(expected) > 1 else "output"
        if not isinstance(facts, dict) or facts.get("type") != "Tensor":
            kind = facts.get("type") if isinstance(facts, dict) else "?"
            return f"{where} must be exactly torch.Tensor, got {str(kind)[:80]}"
        if list(facts.get("shape", [])) != list(reference.shape):
            return f"{where} has shape {facts.get('shape')}, expected {list(reference.shape)}"
        if facts.get("dtype") != str(reference.dtype).removeprefix("torch."):
            return f"{where} has dtype {facts.get('dtype')}, expected {str(reference.dtype).removeprefix('torch.')}"
        if str(facts.get("device", "")).split(":")[0] != device.split(":")[0]:
            return f"{where} is on {facts.get('device')}, expected {device}"
        if facts.get("aliases_input"):
            return f"{where} shares memory with an input"
        if compare.get("require_contiguous") and not facts.get("contiguous"):
            return f"{where} is not contiguous"
    return None

