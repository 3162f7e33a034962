"""The judge on a GPU target: record the candidate's launches in its process, replay them in the judge's.

Per case, verify asks the candidate process to record its entry on two fresh input sets (`recording.py`; the
inputs cross as bytes in the shared slot, the candidate copies them to its GPU), checks each record
(`replay.parse_record`), loads the compiled kernels it names into the judge's own CUDA context (under the
names their binaries define, `cubin.py`), and replays the launches on the judge's own copy of those inputs and
on its own output buffers. The two records must be the same (the launches may not depend on the data), and
the outputs must follow the inputs.

Every replayed call, in verify, benchmark and profile alike, is a `fresh_calls.Call`: an input set drawn for
it alone from the command's seed, the wrapper's buffers refilled with unpredictable bytes and the outputs with
NaN first, and the reference and the private copy of the inputs computed only after its kernels finished.
While a candidate kernel runs, nothing of the verdict exists in the context it can read. Benchmark times the
replays in the mode the orchestrator fixed for the case (`replay_timing.py`) and checks calls drawn at random
after they ran; Proton profiles the same kind of calls, and ncu profiles them in a child that runs the judge's
replay, never the candidate's Python (`ncu_child.py`). The candidate's Python never runs in this process, and
its process is stopped (SIGSTOP) whenever the judge is measuring.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_worker.harness_kit import checks
from sandbox_worker.harness_kit.entry_point import budget_seconds, timing_mode
from sandbox_worker.judged.fresh_calls import Call, CallCheckFailed, CallSource, Drawn, output_specs_for
from sandbox_worker.judged.judge import (
    SLOTS,
    VERIFY_SALTS,
    CandidateRaised,
    CheatDetected,
    Judge,
    input_dependence,
    returned_problem,
)
from sandbox_worker.judged.kernels import TrustedTritonCache
from sandbox_worker.judged.replay import KernelLibrary, Recording, RecordRefused, ReplayPlan, parse_record
from sandbox_worker.judged.slots import plan_layout
from sandbox_worker.judged.step_clock import candidate_reported

BENCHMARK_SALT_BASE = 1_000_000
PROFILE_SALT_BASE = 2_000_000
PROBE_SALT = 3_000_000  # the input set whose reference tells the outputs' shapes; never replayed
VERDICT_MODE = "judge_replay"


# what a `finished` event carries of the judge's launchers: well inside one protocol line (4 MiB) and the
# orchestrator's limits (protocol/worker.py FinishedEvent); a launcher module is some tens of KiB
REPORTED_LAUNCHERS = 16
REPORTED_LAUNCHER_BYTES = 2 << 20


class CudaAlreadyInitialized(Exception):
    """The harness initialised CUDA at import: a forked candidate process could not use the GPU."""


@dataclass
class GpuJudge(Judge):
    device: str = "cuda"
    library: KernelLibrary = field(default_factory=KernelLibrary)
    plans: dict[str, ReplayPlan] = field(default_factory=dict)
    output_specs: dict[str, tuple[tuple[tuple[int, ...], Any], ...]] = field(default_factory=dict)
    recorded_slot: int = 0
    harness_path: str | None = None  # the frozen harness, which the ncu child imports for the case's inputs
    records_launches = True

    @classmethod
    def start(cls, spec: Any, target: dict[str, Any], kernel_path: str, *, writable_dirs: list[str] | None,
              own_pid_namespace: bool, harness_path: str | None = None) -> GpuJudge:
        import torch

        if torch.cuda.is_initialized():
            raise CudaAlreadyInitialized(
                "the harness initialised CUDA when it was imported; judged mode forks the candidate's process "
                "first, so create CUDA tensors inside make_inputs and reference, not at module level")
        from sandbox_worker.harness_kit.device import activate_triton_cuda
        from sandbox_worker.harness_kit.entry_point import device_for
        from sandbox_worker.judged.process import CandidateProcess
        from sandbox_worker.judged.recording import warm_dispatch_mode
        from sandbox_worker.judged.warm import warm_triton_key

        warm_dispatch_mode()  # the candidate process records through it; warm here (no-op after the fork server's)
        warm_triton_key()  # and keys its kernels by it (likewise)
        process = CandidateProcess.fork(writable_dirs, own_pid_namespace)
        activate_triton_cuda()  # after the fork: the candidate process initialises CUDA on its own
        # before any candidate code runs, the worker's Triton cache holds only the run's seed and what the line
        # above built: the judge keeps it in memory and never reads that directory again (kernels.py)
        trusted = TrustedTritonCache.capture(os.environ.get("TRITON_CACHE_DIR"))
        return cls(spec=spec, target=target, kernel_path=kernel_path, writable_dirs=writable_dirs,
                   process=process, device=device_for(target), harness_path=harness_path,
                   library=KernelLibrary(trusted_cache=trusted))

    def built_launchers(self) -> dict[str, str]:
        """The launchers this judge built, base64 by path under the cache root, for the `finished` event: at
        most REPORTED_LAUNCHERS of them and REPORTED_LAUNCHER_BYTES in all (the event is one protocol line)."""
        trusted = self.library.trusted_cache
        reported: dict[str, str] = {}
        total = 0
        for path, content in sorted((trusted.built_launchers() if trusted is not None else {}).items()):
            encoded = base64.b64encode(content).decode("ascii")
            if len(reported) >= REPORTED_LAUNCHERS or total + len(encoded) > REPORTED_LAUNCHER_BYTES:
                break
            reported[path] = encoded
            total += len(encoded)
        return reported

    def for_variant(self, kernel_path: str) -> GpuJudge:
        """Never: a candidate process must be forked before the judge initialises CUDA, so a GPU worker
        screens in process (`Worker.on_screen`; screening ranks, it never decides)."""
        raise RecordRefused("a GPU judge cannot fork another candidate process once CUDA is initialised")

    # ---- calls ---------------------------------------------------------------------------------------

    def _source(self, case: dict[str, Any], salt_base: int, plan: ReplayPlan | None = None) -> CallSource:
        return CallSource(spec=self.spec, case=case, device=self.device,
                          bind=plan.bind if plan is not None else None,
                          output_specs=self._output_specs(case), salts=itertools.count(salt_base))

    def _output_specs(self, case: dict[str, Any]) -> tuple[tuple[tuple[int, ...], Any], ...]:
        """(shape, dtype) of each output, from the reference on an input set drawn only for this (never
        replayed, and gone before any candidate kernel runs)."""
        key = str(case.get("case_id"))
        if key not in self.output_specs:
            self.output_specs[key] = output_specs_for(self.spec, case, self.device, PROBE_SALT)
        return self.output_specs[key]

    # ---- verify ----------------------------------------------------------------------------------------

    def _verify_trials(self, case: dict[str, Any]) -> dict[str, Any]:
        clock = self.clock
        with clock.step("output_probe"):  # the reference that tells the outputs' shapes, once per case
            source = self._source(case, 0)
        with clock.step("inputs"):
            problem = source.require_deterministic_inputs(VERIFY_SALTS[0])
        if problem is not None:
            return checks.verdict(False, problem)
        trials, structures, verdicts = [], [], []
        for index, salt in enumerate(VERIFY_SALTS):
            try:
                with clock.step("inputs"):  # the input set, drawn on the judge's GPU
                    drawn = source.draw(salt)
                recording, described = self._record(drawn, case, "record_first" if index == 0 else "record")
                plan = ReplayPlan(recording, self.library)
                plan.check_arity()
                source.bind = plan.bind
                with clock.step("inputs"):  # the wrapper's buffers and the outputs poisoned
                    call = source.prepare(drawn)
                with clock.step("replay"):
                    returned = self._replay_synchronized(call)
            except RecordRefused as exc:
                return checks.verdict(False, str(exc))
            with clock.step("check"):  # the reference on the private copy, then the comparison
                verdict, expected = source.check(call, returned, keep_expected=True)
            if described is not None and not self.spec.outputs_are_arguments:
                problem = returned_problem(described, expected, self.spec.compare, device="cuda")
                if problem is not None:  # what the entry said it returned is wrong: say that first
                    verdict = checks.verdict(False, problem)
            if not verdict["passed"]:
                own = self._own_outputs_problem(expected, drawn)
                if own is None:
                    verdict["diagnostics"] += (" (the entry's own call was correct, its replayed launches were not: "
                                               "the wrapper does work between launches that replay cannot repeat)")
                return verdict
            structures.append(recording.structure())
            trials.append((expected, tuple(o.detach().clone() for o in call.outputs(returned))))
            verdicts.append(verdict)
            self.plans[str(case.get("case_id"))] = plan
        if structures[0] != structures[1]:
            verdicts.append(checks.verdict(False, "the launches differ between two inputs of the same case "
                                                  "(grid, scalar arguments, kernels or buffers depend on the data); "
                                                  "the judge replays one recording per case"))
        return checks.merge_verdicts(verdicts + input_dependence(trials))

    def _replay_synchronized(self, call: Call) -> Any:
        import torch

        returned = call.bound()
        torch.cuda.synchronize(self.device)
        return returned

    def _record(self, drawn: Drawn, case: dict[str, Any], step: str = "record") -> tuple[Recording, Any]:
        """The candidate records its entry on this input set (copied through the slot); kernels it names
        that the judge has not loaded are fetched and loaded. Timed as `step` and `kernel_load`."""
        import torch

        shapes = self._output_specs(case)
        layout = plan_layout(drawn.arguments, tuple(torch.empty(shape, dtype=dtype, device="meta")
                                                    for shape, dtype in shapes),
                             outputs_are_arguments=self.spec.outputs_are_arguments)
        if layout != self.layout:
            self._map(layout)
        slot = self.next_slot
        self.next_slot = (slot + 1) % SLOTS
        inputs, outputs = self.slot_views[slot]
        for view, argument in zip(inputs, drawn.tensors, strict=True):
            view.copy_(argument)  # device to the shared host slot
        checks.poison_(outputs)
        self.recorded_slot = slot
        with self.clock.step(step):
            reply = self._request({"kind": "record", "slot": slot}, ("recorded", "raised"))[0]
        if reply["kind"] == "raised":
            raise CandidateRaised(reply["failure"] if isinstance(reply.get("failure"), dict) else {})
        for name, seconds in candidate_reported(reply.get("timings")).items():
            self.clock.add(f"{step}.{name}", seconds)  # the candidate's own word: a record, never a verdict
        recording = parse_record(reply.get("record"), len(inputs) + (len(outputs) if self.spec.outputs_are_arguments else 0))
        with self.clock.step("kernel_load"):
            for key in recording.kernel_hashes:
                if key not in self.library:
                    payload = self._request({"kind": "kernel", "hash": key}, ("kernel",))[0]
                    self.library.load(key, payload.get("payload"))
        return recording, reply.get("outputs")

    def _own_outputs_problem(self, expected: tuple[Any, ...], drawn: Drawn) -> str | None:
        """Whether the candidate's own recorded call (its outputs, copied to the slot) was wrong; None if right."""
        from sandbox_worker.judged.judge import compare_to_reference

        own = tuple(o.to(self.device) for o in self._read_outputs(self.recorded_slot))
        result = compare_to_reference(self.spec, own, expected, drawn.arguments)
        return None if result["passed"] else result["diagnostics"]

    # ---- benchmark -------------------------------------------------------------------------------------

    def benchmark(self, case: dict[str, Any], repetitions: int) -> dict[str, Any]:
        from sandbox_worker.judged.device_figures import device_figures
        from sandbox_worker.judged.replay_timing import measure_replays

        plan = self._plan_for(case)
        source = self._source(case, BENCHMARK_SALT_BASE, plan)
        mode = timing_mode(case, self.device)  # the orchestrator's choice for the case, else auto
        try:
            result = measure_replays(source, repetitions=repetitions, device=self.device, mode=mode,
                                     budget_seconds=budget_seconds(case))
        except CallCheckFailed as exc:
            raise CheatDetected("judge's check of calls drawn at random", str(exc)) from None
        result["metrics"].update({"verdict": VERDICT_MODE, "fresh_inputs_per_call": True,
                                  "replayed_launches": sum("launch" in s for s in plan.recording.steps),
                                  "replayed_kernels": [self.library.names[s["launch"]] for s in plan.recording.steps
                                                       if "launch" in s],
                                  **device_figures(self.device)})
        if self.spec.work is not None:
            result["metrics"].update(self.spec.work(case))
        return result

    def _plan_for(self, case: dict[str, Any]) -> ReplayPlan:
        plan = self.plans.get(str(case.get("case_id")))
        if plan is None:  # benchmark without verify in this worker: verify first (it records and checks)
            verdict = self._verify_trials(case)
            if not verdict["passed"]:
                raise RecordRefused(f"the case cannot be replayed: {verdict['diagnostics']}")
            plan = self.plans[str(case.get("case_id"))]
        return plan

    # ---- profile ---------------------------------------------------------------------------------------

    def profile(self, case: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        """Proton over fresh, poisoned, flushed calls of the replay (as benchmark times them); ncu over the
        same in a child that runs the judge's replay (`ncu_child.py`), never the candidate's Python."""
        from sandbox_worker.harness_kit.profile_kit import profile_with_kit
        from sandbox_worker.judged.replay_timing import L2Flush

        plan = self._plan_for(case)
        source = self._source(case, PROFILE_SALT_BASE, plan)
        flush = L2Flush(self.device)
        holder: dict[str, Call] = {}

        def prepare() -> None:  # outside Proton's per-call scope: a fresh call, poisoned, and a cold L2
            holder["call"] = source.prepare()
            flush()

        names = sorted({self.library.names[s["launch"]] for s in plan.recording.steps if "launch" in s})
        main_scope = self.target.get("main_scope") or self.spec.kernel_name
        result = profile_with_kit(lambda: holder["call"].bound(), prepare=prepare, request=request, case=case,
                                  kernel_name=main_scope, main_scope=main_scope,
                                  ncu_replay=self._ncu_replay(plan, case, request))
        result["replayed_kernels"] = names
        proton = result.get("proton")
        if isinstance(proton, dict) and proton.get("available"):
            # no wrapper runs in a replay, and a call's wall time here includes the profiler resuming after the
            # paused preparation: only the kernel times mean something
            proton.update(wrapper_us=None, call_us=None)
            proton.setdefault("diagnostics", []).append("judged replay: wrapper_us is null (no wrapper runs here)")
        result["diagnostics"].append(
            "judged mode: Proton and ncu timed the judge's replay of the recorded launches on fresh, poisoned inputs "
            "with a cold L2, as benchmark does; kernel names are the ones their binaries define")
        return result

    def _ncu_replay(self, plan: ReplayPlan, case: dict[str, Any], request: dict[str, Any]) -> dict[str, Any] | None:
        """How ncu's child replays the case: the harness (for its inputs), the record and the kernels this judge
        loaded; no candidate Python."""
        if self.harness_path is None:
            return None
        directory = Path(request.get("artifacts_dir") or self.library.directory)
        directory.mkdir(parents=True, exist_ok=True)
        record_path = directory / "ncu_replay_record.json"
        record_path.write_text(json.dumps(plan.recording.to_record()), encoding="utf-8")
        # fresh copies, written from the judge's memory while the candidate process is stopped: the library's
        # folder and the worker's Triton cache are writable by the candidate process
        kernels_dir = Path(tempfile.mkdtemp(prefix="tlx-ncu-kernels-"))
        self.library.export(kernels_dir)
        triton_cache_dir = Path(tempfile.mkdtemp(prefix="tlx-ncu-triton-"))
        trusted = self.library.trusted_cache
        if trusted is not None:
            trusted.materialize(triton_cache_dir)
        return {"module": "sandbox_worker.judged.ncu_child", "harness_path": self.harness_path,
                "record_path": str(record_path), "kernels_dir": str(kernels_dir),
                "triton_cache_dir": str(triton_cache_dir),
                "kernels": plan.recording.kernel_hashes, "target": self.target}
