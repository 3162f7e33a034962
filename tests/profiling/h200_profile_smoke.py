"""GPU smoke check of the profiling kit on an NVIDIA GPU (not collected by pytest; CPU CI cannot run it).

    python3 tests/profiling/h200_profile_smoke.py /abs/output/dir

Profiles the vector-add fixture (2^24 fp32) through the fixture harness's `profile()`: summary
(proton_launch + ncu), deep (ncu only), and diagnostic-only instrumentation. Writes each result as JSON
into the output dir and prints one log line per result. Needs torch, triton and ncu on PATH.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from orchestrator.decision.profile_rules import profile_deltas  # noqa: E402
from orchestrator.ledger.reporting import format_profile_for_log  # noqa: E402
from sandbox_worker.harness_kit import context, proton  # noqa: E402
from sandbox_worker.harness_kit.loader import load_kernel_module  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "gpu_smoke"


def _harness():
    spec = importlib.util.spec_from_file_location("tlx_agent_harness", FIXTURE / "harness.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["tlx_agent_harness"] = module
    spec.loader.exec_module(module)
    return module


def main(output: Path) -> int:
    output.mkdir(parents=True, exist_ok=True)
    harness = _harness()
    context.set_command_context(seed=1234, phase="profile")
    case = {"case_id": "n=2^24", "parameters": {"n": 1 << 24}, "weight": 1, "protected": True}
    artifact = harness.build((FIXTURE / "kernel.py").read_text(), {"backend": "cuda"})
    assert harness.verify(artifact, case), "vector add is wrong"
    samples = harness.benchmark(artifact, case, 10)
    print(f"benchmark median_us={sorted(samples)[len(samples) // 2]:.2f}", flush=True)
    results = {}
    for label, request in (
        ("summary", {"level": "summary", "tools": ["proton_launch", "ncu"], "experiment_id": "smoke"}),
        ("deep", {"level": "deep", "tools": ["ncu"], "experiment_id": "smoke"}),
    ):
        request["artifacts_dir"] = str(output / label)
        started = time.monotonic()
        results[label] = harness.profile(artifact, case, request)
        (output / f"{label}.json").write_text(json.dumps(results[label], indent=2))
        print(f"[{label}] {time.monotonic() - started:.1f}s "
              f"{format_profile_for_log(results[label], profile_deltas(results[label], results['summary']))}")
        print(f"[{label}] diagnostics: {results[label]['diagnostics']}", flush=True)
    from sandbox_worker.harness_kit.profile_kit import profile_with_kit

    missing = profile_with_kit(lambda: harness.run_case(artifact, case),
                               request={"level": "summary", "tools": ["ncu"], "experiment_id": "smoke",
                                        "artifacts_dir": str(output / "no_kernel")},
                               case=case, kernel_name="no_such_kernel", main_scope=None,
                               ncu_replay={"harness_path": str(FIXTURE / "harness.py"),
                                           "kernel_source": artifact.source, "entry": "run_case"})
    print(f"[no_kernel] status={missing['ncu']['status']} diagnostics={missing['diagnostics']}", flush=True)
    instrumented = load_kernel_module((FIXTURE / "kernel_instrumented.py").read_text())
    x, y = harness._tensors(case)
    trace = proton.collect_instrumentation_trace(lambda: instrumented.add(x, y),
                                                 artifacts_dir=str(output / "instrumentation"))
    (output / "instrumentation.json").write_text(json.dumps(trace, indent=2))
    print(f"[instrumentation] available={trace['available']} events={trace['events']} lanes={trace['lanes']} "
          f"scopes={[s['name'] for s in trace['scopes']]} diagnostics={trace['diagnostics']}", flush=True)
    ok = (results["summary"]["proton"]["main_kernel_us"] is not None
          and results["summary"]["ncu"]["summary"]["duration_us"] is not None
          and results["deep"]["ncu"]["summary"]["duration_us"] is not None
          and missing["ncu"]["status"] == "no_kernel")
    print("SMOKE", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tlx_profile_smoke").resolve()))
