"""The process ncu profiles for a judged candidate: the judge's replay of the record, never the candidate's code.

    python -m sandbox_worker.judged.ncu_child --spec /abs/artifacts/ncu_replay_spec.json

The spec (written by `ncu.collect_ncu_profile` from `GpuJudge._ncu_replay`) names the frozen harness (for the
case's inputs and `JUDGE`), the record the judge replays, the folder of kernel binaries the judge loaded, the
case and the seed. Like every judged call, each launch here is a fresh input set with poisoned buffers and
outputs (`fresh_calls`); ncu flushes the caches before each profiled kernel itself. Warm-up calls run before
cudaProfilerStart (`--profile-from-start off`), the profiled ones inside. Exit status and error lines as in
`harness_kit/ncu_replay.py`.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

from sandbox_worker.harness_kit import context
from sandbox_worker.harness_kit.ncu_replay import (
    ReplayError,
    _profiler_gate,
    _synchronize,
    import_harness,
    run_child,
)

NCU_SALT_BASE = 4_000_000
PROBE_SALT = 4_999_999


def load_spec(path: str) -> dict[str, Any]:
    try:
        spec = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReplayError(2, f"cannot read replay spec {path}: {exc}") from None
    if not isinstance(spec, dict):
        raise ReplayError(2, "replay spec must be a JSON object")
    for key in ("harness_path", "record_path"):
        if not isinstance(spec.get(key), str) or not Path(spec[key]).is_file():
            raise ReplayError(2, f"replay spec {key} is missing or not a file: {spec.get(key)!r}")
    if not isinstance(spec.get("kernels_dir"), str) or not Path(spec["kernels_dir"]).is_dir():
        raise ReplayError(2, f"replay spec kernels_dir is missing or not a folder: {spec.get('kernels_dir')!r}")
    if not isinstance(spec.get("kernels"), list) or not isinstance(spec.get("case", {}), dict):
        raise ReplayError(2, "replay spec kernels must be a list and case an object")
    return spec


def replay(spec: dict[str, Any]) -> int:
    """Load the judge's kernels, bind the record to fresh inputs, warm up, then run the profiled calls."""
    from sandbox_worker.harness_kit.device import activate_triton_cuda
    from sandbox_worker.harness_kit.entry_point import JudgedEntry, device_for
    from sandbox_worker.judged.fresh_calls import CallSource, output_specs_for
    from sandbox_worker.judged.replay import KernelLibrary, RecordRefused, ReplayPlan, parse_record

    if isinstance(spec.get("triton_cache_dir"), str):
        # the judge's fresh copy of the Triton files it vouches for, not the worker's cache, which the candidate
        # process can write (kernels.py); Triton reads the variable at every cache lookup
        os.environ["TRITON_CACHE_DIR"] = spec["triton_cache_dir"]
    context.set_command_context(seed=spec.get("seed"), phase="ncu_replay")
    harness = import_harness(spec["harness_path"])
    judged = getattr(harness, "JUDGE", None)
    if not isinstance(judged, JudgedEntry):
        raise ReplayError(4, "the harness declares no JUDGE: the judged ncu replay needs its make_inputs")
    case = spec.get("case") or {}
    device = device_for(spec.get("target") or {})
    activate_triton_cuda()
    source = CallSource(spec=judged, case=case, device=device,
                        output_specs=output_specs_for(judged, case, device, PROBE_SALT),
                        salts=itertools.count(NCU_SALT_BASE))
    try:
        recording = parse_record(json.loads(Path(spec["record_path"]).read_text(encoding="utf-8")),
                                 len(source.draw().replay_tensors))
        plan = ReplayPlan(recording, KernelLibrary.open(Path(spec["kernels_dir"]), [str(k) for k in spec["kernels"]]))
        plan.check_arity()
    except RecordRefused as exc:
        raise ReplayError(3, f"the judge's record cannot be replayed here: {exc}") from None
    source.bind = plan.bind
    warmup_calls = int(spec.get("warmup_calls", 3))
    profiled_calls = int(spec.get("profiled_calls", 1))
    gated = spec.get("gate", "cuda_profiler_api") == "cuda_profiler_api"
    for _ in range(warmup_calls):
        source.prepare().bound()
    _synchronize()
    if gated:
        _profiler_gate(True)
    for _ in range(profiled_calls):
        call = source.prepare()  # fresh inputs and poison; ncu profiles only the kernels it filters on
        call.bound()
        _synchronize()
    if gated:
        _profiler_gate(False)
    _synchronize()
    return warmup_calls + profiled_calls


def main(argv: list[str] | None = None) -> int:
    return run_child(argv, prog="ncu_child", description=__doc__.splitlines()[0], load=load_spec, run=replay)


if __name__ == "__main__":
    raise SystemExit(main())
