"""A fast synthetic bundle whose kernels declare a latency per case: a candidate can gain on some cases and
lose on another, as a real kernel does when a tile size suits the large shapes and not the ragged one.

The kernel module defines `scale(values)` (must return each value doubled) and `LATENCY_US`, a dict of
case id -> microseconds. Benchmark samples are that latency with a small per-run drift and per-sample noise
drawn from the evaluation seed, so the statistics and gates behave as on a quiet GPU.
"""

import random

from sandbox_worker.harness_kit.context import evaluation_seed
from sandbox_worker.harness_kit.loader import load_kernel_module


def build(kernel_source, target):
    module = load_kernel_module(kernel_source)
    if not callable(getattr(module, "scale", None)) or not isinstance(getattr(module, "LATENCY_US", None), dict):
        return {"success": False, "diagnostics": "kernel must define scale(values) and LATENCY_US {case: us}"}
    return {"success": True, "artifact": module}


def _inputs(case, salt):
    rng = random.Random(evaluation_seed() * 7 + salt)
    return [rng.uniform(-10.0, 10.0) for _ in range(int(case["parameters"]["n"]))]


def verify(module, case):
    values = _inputs(case, 1)
    out = module.scale(list(values))
    bad = [i for i, (o, v) in enumerate(zip(out, values, strict=True)) if abs(o - 2.0 * v) > 1e-9 * max(1.0, abs(v))]
    return {"passed": len(out) == len(values) and not bad, "diagnostics": f"{len(bad)} wrong elements" if bad else ""}


def benchmark(module, case, repetitions):
    rng = random.Random(evaluation_seed())
    values = _inputs(case, 2)
    latency = float(module.LATENCY_US[case["case_id"]])
    drift = 1.0 + rng.gauss(0.0, 0.001)
    samples = []
    for _ in range(max(repetitions, 30)):
        module.scale(values)
        samples.append(latency * drift * (1.0 + rng.gauss(0.0, 0.002)))
    return {"samples_us": samples, "warmup_count": 0, "cache_policy": "synthetic"}
