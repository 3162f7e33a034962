"""The synthetic bundle (tests/e2e/synthetic: pure-Python "kernels" whose latency is declared in the source) with
a profiler: `profile` reports the kernel time the kernel file declares (`PROFILED_US`, by default the latency its
benchmark measures), or fails when the file sets `PROFILE_FAILS`; it takes `PROFILE_SECONDS` per case when the file
sets that (a profile the run's time may cut).

It stands in for Proton on a machine without a GPU, so the run's rules about profile evidence (required once the
untouched kernel was profiled; a missing profile, or one that disagrees with the benchmark, blocks a promotion)
can be shown on CPU. A frozen harness is one file, so the synthetic functions are repeated here.
"""

import random
import time

from sandbox_worker.harness_kit.context import evaluation_seed
from sandbox_worker.harness_kit.loader import load_kernel_module


def build(kernel_source, target):
    module = load_kernel_module(kernel_source)
    if not callable(getattr(module, "scale", None)):
        return {"success": False, "diagnostics": "kernel does not define scale(values)"}
    return {"success": True, "artifact": module}


def _inputs(case, salt):
    rng = random.Random(evaluation_seed() * 7 + salt)
    return [rng.uniform(-10.0, 10.0) for _ in range(int(case["parameters"]["n"]))]


def verify(module, case):
    values = _inputs(case, 1)
    out = module.scale(list(values))
    bad = [i for i, (o, v) in enumerate(zip(out, values, strict=True)) if abs(o - 2.0 * v) > 1e-9 * max(1.0, abs(v))]
    return {"passed": not bad, "diagnostics": f"{len(bad)} wrong elements" if bad else ""}


def _latency(module, case, name="LATENCY_US"):
    return float(getattr(module, name, module.LATENCY_US)) * float(case["parameters"].get("cost", 1.0))


def benchmark(module, case, repetitions):
    rng = random.Random(evaluation_seed())
    drift = 1.0 + rng.gauss(0.0, 0.001)
    samples = [_latency(module, case) * drift * (1.0 + rng.gauss(0.0, 0.003)) for _ in range(max(repetitions, 30))]
    return {"samples_us": samples, "warmup_count": 0, "cache_policy": "synthetic"}


def profile(module, case, request=None):
    if getattr(module, "PROFILE_FAILS", False):
        raise RuntimeError("the profiler crashed on this kernel")
    time.sleep(float(getattr(module, "PROFILE_SECONDS", 0.0)))  # a profiler that takes this long per case
    kernel_us = _latency(module, case, "PROFILED_US")
    return {"level": (request or {}).get("level", "summary"), "tools": ["proton_launch"],
            "proton": {"available": True, "main_kernel_us": kernel_us, "non_main_kernel_us": 0.0,
                       "total_kernel_us": kernel_us, "calls": 10, "diagnostics": []},
            "ncu": None, "diagnostics": [], "artifacts": {}}
