"""The judge on a GPU target: record the candidate's launches in its process, replay them in the judge's.

Per case, verify asks the candidate process to record its entry on two fresh inputs (`recording.py`; the
inputs cross as bytes in the shared slot, the candidate copies them to its GPU), checks each record
(`replay.parse_record`), loads the compiled kernels it names into the judge's own CUDA context, and replays
the launches on the judge's own CUDA inputs (drawn again from the same salts) and its own output buffers,
poisoned first. The outputs are compared with the reference here; the two records must be the same (the
launches may not depend on the data), and the outputs must follow the inputs. Benchmark times the replay
with the timing kit (events with an L2 flush, or CUDA graphs under ~20 µs), rotating over input sets drawn
fresh for it and checking every set afterwards. Profiles run Proton over the same replay (and ncu over the
candidate's own launch in a sandboxed child, as evidence that can only veto). The candidate's
Python never runs in this process, and its process is stopped (SIGSTOP) whenever the judge is measuring.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_worker.harness_kit import checks, timing
from sandbox_worker.harness_kit.entry_point import budget_seconds, timing_mode
from sandbox_worker.judged.judge import (
    SLOTS,
    VERIFY_SALTS,
    CandidateRaised,
    CheatDetected,
    Judge,
    compare_to_reference,
    input_dependence,
    returned_problem,
)
from sandbox_worker.judged.replay import KernelLibrary, Recording, RecordRefused, ReplayPlan, parse_record
from sandbox_worker.judged.slots import plan_layout

BENCHMARK_SALT_BASE = 1_000
ROTATION = 3  # input sets the timed calls rotate over, each checked after timing
PROFILE_SALT = 2_000
VERDICT_MODE = "judge_replay"


class CudaAlreadyInitialized(Exception):
    """The harness initialised CUDA at import: a forked candidate process could not use the GPU."""


@dataclass
class GpuCall:
    """One call as the judge holds it, all on the judge's GPU: the arguments (and, for an entry that writes into
    output arguments, the output tensors passed after them), the reference outputs, private copies of the
    inputs. Nothing is kept on the host: checks compare on the GPU, and only a recorded call's inputs cross
    to the candidate (through the slot)."""

    arguments: tuple[Any, ...]  # contiguous
    expected: tuple[Any, ...]
    snapshot: tuple[Any, ...]  # private copies of the CUDA tensor inputs
    out_arguments: tuple[Any, ...] = ()  # outputs_are_arguments: where the entry writes

    @property
    def tensors(self) -> list[Any]:
        return [a for a in self.arguments if _is_tensor(a)]

    @property
    def replay_tensors(self) -> list[Any]:
        """The storages the record names as inputs, in order: tensor arguments, then output arguments."""
        return [*self.tensors, *self.out_arguments]


@dataclass
class GpuJudge(Judge):
    device: str = "cuda"
    library: KernelLibrary = field(default_factory=KernelLibrary)
    plans: dict[str, ReplayPlan] = field(default_factory=dict)
    recorded_slot: int = 0
    # the harness file for ncu's replay child (it defines `run_case`); None: the harness has no run_case
    ncu_harness_path: str | None = None
    records_launches = True

    @classmethod
    def start(cls, spec: Any, target: dict[str, Any], kernel_path: str, *, writable_dirs: list[str] | None,
              own_pid_namespace: bool, ncu_harness_path: str | None = None) -> GpuJudge:
        import torch

        if torch.cuda.is_initialized():
            raise CudaAlreadyInitialized(
                "the harness initialised CUDA when it was imported; judged mode forks the candidate's process "
                "first, so create CUDA tensors inside make_inputs and reference, not at module level")
        from sandbox_worker.harness_kit.device import activate_triton_cuda
        from sandbox_worker.harness_kit.entry_point import device_for
        from sandbox_worker.judged.process import CandidateProcess

        process = CandidateProcess.fork(writable_dirs, own_pid_namespace)
        activate_triton_cuda()  # after the fork: the candidate process initialises CUDA on its own
        return cls(spec=spec, target=target, kernel_path=kernel_path, writable_dirs=writable_dirs,
                   process=process, device=device_for(target), ncu_harness_path=ncu_harness_path)

    def for_variant(self, kernel_path: str) -> GpuJudge:
        """Never: a candidate process must be forked before the judge initialises CUDA, so a GPU worker
        screens in process (`Worker.on_screen`; screening ranks, it never decides)."""
        raise RecordRefused("a GPU judge cannot fork another candidate process once CUDA is initialised")

    # ---- verify ----------------------------------------------------------------------------------------

    def _verify_trials(self, case: dict[str, Any]) -> dict[str, Any]:
        trials, structures, verdicts = [], [], []
        for salt in VERIFY_SALTS:
            call = self._draw(case, salt)
            try:
                recording, described = self._record(call)
                plan = ReplayPlan(recording, self.library)
                plan.check_arity()
                outputs = self._replay_once(plan, call)
            except RecordRefused as exc:
                return checks.verdict(False, str(exc))
            verdict = self._check_replay(call, described if described is not None else [], outputs)
            if not verdict["passed"]:
                own = self._own_outputs_problem(call)
                if own is None:
                    verdict["diagnostics"] += (" (the entry's own call was correct, its replayed launches were not: "
                                               "the wrapper does work between launches that replay cannot repeat)")
                return verdict
            structures.append(recording.structure())
            trials.append((call.expected, tuple(o.detach().clone() for o in outputs)))
            verdicts.append(verdict)
            self.plans[str(case.get("case_id"))] = plan
        if structures[0] != structures[1]:
            verdicts.append(checks.verdict(False, "the launches differ between two inputs of the same case "
                                                  "(grid, scalar arguments, kernels or buffers depend on the data); "
                                                  "the judge replays one recording per case"))
        return checks.merge_verdicts(verdicts + input_dependence(trials))

    def _draw(self, case: dict[str, Any], salt: int) -> GpuCall:
        """Inputs from the case and salt on the judge's GPU, and the reference computed on private copies."""
        raw = tuple(self.spec.make_inputs(case, self.device, salt))
        arguments = tuple(a.contiguous() if _is_tensor(a) else a for a in raw)
        expected = self.spec.reference(*checks.clone_args(arguments))
        expected = tuple(e.detach() for e in (expected if isinstance(expected, (tuple, list)) else (expected,)))
        out_arguments = tuple(e.new_empty(e.shape) for e in expected) if self.spec.outputs_are_arguments else ()
        return GpuCall(arguments=arguments, expected=expected,
                       snapshot=tuple(a.clone() for a in arguments if _is_tensor(a)), out_arguments=out_arguments)

    def _record(self, call: GpuCall) -> tuple[Recording, Any]:
        """The candidate records its entry on this call's inputs (copied through the slot); kernels it names
        that the judge has not loaded are fetched and loaded."""
        layout = plan_layout(call.arguments, call.expected, outputs_are_arguments=self.spec.outputs_are_arguments)
        if layout != self.layout:
            self._map(layout)
        slot = self.next_slot
        self.next_slot = (slot + 1) % SLOTS
        inputs, outputs = self.slot_views[slot]
        for view, argument in zip(inputs, call.tensors, strict=True):
            view.copy_(argument)  # device to the shared host slot
        checks.poison_(outputs)
        self.recorded_slot = slot
        reply = self._request({"kind": "record", "slot": slot}, ("recorded", "raised"))[0]
        if reply["kind"] == "raised":
            raise CandidateRaised(reply["failure"] if isinstance(reply.get("failure"), dict) else {})
        recording = parse_record(reply.get("record"), len(inputs) + (len(outputs) if self.spec.outputs_are_arguments else 0))
        for key in recording.kernel_hashes:
            if key not in self.library:
                payload = self._request({"kind": "kernel", "hash": key}, ("kernel",))[0]
                self.library.load(key, payload.get("payload"))
        return recording, reply.get("outputs")

    def _replay_once(self, plan: ReplayPlan, call: GpuCall) -> tuple[Any, ...]:
        return self._replay_checked_call(plan.bind(call.replay_tensors), call)

    def _replay_checked_call(self, bound: Any, call: GpuCall) -> tuple[Any, ...]:
        """One replay with its outputs poisoned first, synchronized; returns what the check reads."""
        import torch

        checks.poison_([*bound.outputs, *call.out_arguments])
        outputs = bound()
        torch.cuda.synchronize(self.device)
        return call.out_arguments if self.spec.outputs_are_arguments else outputs

    def _check_replay(self, call: GpuCall, described: Any, outputs: tuple[Any, ...]) -> dict[str, Any]:
        """Verdict on a replay: what the entry said it returned (when `described` is given), the values
        against the reference, and the inputs against the judge's private copies."""
        if described is not None and not self.spec.outputs_are_arguments:
            problem = returned_problem(described, call.expected, self.spec.compare, device="cuda")
            if problem is not None:
                return checks.verdict(False, problem)
        result = compare_to_reference(self.spec, tuple(o.detach() for o in outputs), call.expected, call.arguments)
        if self.spec.compare.get("allow_input_mutation"):
            return result
        return checks.merge_verdicts([result, checks.inputs_unchanged(call.tensors, call.snapshot)])

    def _own_outputs_problem(self, call: GpuCall) -> str | None:
        """Whether the candidate's own recorded call (its outputs, copied to the slot) was wrong; None if right."""
        own = tuple(o.to(self.device) for o in self._read_outputs(self.recorded_slot))
        result = compare_to_reference(self.spec, own, call.expected, call.arguments)
        return None if result["passed"] else result["diagnostics"]

    # ---- benchmark -------------------------------------------------------------------------------------

    def benchmark(self, case: dict[str, Any], repetitions: int) -> dict[str, Any]:
        plan = self._plan_for(case)
        calls = [self._draw(case, BENCHMARK_SALT_BASE + index) for index in range(ROTATION)]
        bound = [plan.bind(call.replay_tensors) for call in calls]
        turn = itertools.count()
        last = {"index": 0}

        def replay() -> tuple[Any, ...]:
            index = next(turn) % ROTATION
            last["index"] = index
            outputs = bound[index]()
            return calls[index].out_arguments if self.spec.outputs_are_arguments else outputs

        def check_last(output: Any) -> None:
            self._raise_if_wrong(calls[last["index"]], output, "the last timed call")

        mode = timing_mode(case, self.device)
        result = timing.measure(replay, repetitions=repetitions, device=self.device, mode=mode,  # type: ignore[arg-type]
                                budget_seconds=budget_seconds(case), check_last=check_last)
        for index, (call, replayed) in enumerate(zip(calls, bound, strict=True)):
            self._raise_if_wrong(call, self._replay_checked_call(replayed, call), f"input set {index} after timing")
        result["metrics"].update({"verdict": VERDICT_MODE, "rotation": ROTATION,
                                  "replayed_launches": sum("launch" in s for s in plan.recording.steps)})
        if self.spec.work is not None:
            result["metrics"].update(self.spec.work(case))
        return result

    def _raise_if_wrong(self, call: GpuCall, outputs: Any, what: str) -> None:
        verdict = self._check_replay(call, None, outputs if isinstance(outputs, tuple) else (outputs,))
        if not verdict["passed"]:
            raise CheatDetected("judge's check of the replayed calls", f"{what}: {verdict['diagnostics']}")

    def _plan_for(self, case: dict[str, Any]) -> ReplayPlan:
        plan = self.plans.get(str(case.get("case_id")))
        if plan is None:  # benchmark without verify in this worker: record once on inputs of its own
            recording, _ = self._record(self._draw(case, BENCHMARK_SALT_BASE - 1))
            plan = ReplayPlan(recording, self.library)
            plan.check_arity()
            self.plans[str(case.get("case_id"))] = plan
        return plan

    # ---- profile ---------------------------------------------------------------------------------------

    def profile(self, case: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        from sandbox_worker.harness_kit.profile_kit import profile_with_kit

        plan = self._plan_for(case)
        bound = plan.bind(self._draw(case, PROFILE_SALT).replay_tensors)
        result = profile_with_kit(bound, request=request, case=case, kernel_name=self.spec.kernel_name,
                                  main_scope=self.target.get("main_scope") or self.spec.kernel_name,
                                  ncu_replay=self._ncu_replay())
        result["diagnostics"].append(
            "judged mode: Proton timed the judge's replay of the recorded launches; ncu profiled the candidate's "
            "own launch in a sandboxed child (its figures are evidence and can only veto, never promote)"
            if self.ncu_harness_path else
            "judged mode: Proton timed the judge's replay; ncu needs the harness to define run_case")
        return result

    def _ncu_replay(self) -> dict[str, Any] | None:
        """How ncu's child rebuilds and launches the candidate. It runs the candidate's Python (a child of this
        sandboxed worker, every layer inherited), so nothing it reports can make a candidate faster: the
        benchmark verdict is the judge's replay, and ncu's numbers only ever veto."""
        if self.ncu_harness_path is None:
            return None
        source = Path(self.kernel_path).read_text(encoding="utf-8")
        return {"harness_path": self.ncu_harness_path, "kernel_source": source, "target": self.target,
                "entry": "run_case"}


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)
