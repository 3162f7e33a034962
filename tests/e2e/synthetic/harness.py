"""A fast synthetic bundle for loop tests: pure-Python "kernels" whose latency is declared in the source.

The kernel module defines `scale(values)` (must return each value doubled) and `LATENCY_US`. Benchmark
samples are LATENCY_US with a small per-run drift and per-sample noise drawn from the evaluation seed,
so statistics and gates behave as on real hardware while a worker costs milliseconds, not seconds.
"""

import random

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
    if not isinstance(out, list) or len(out) != len(values):
        return {"passed": False, "diagnostics": "wrong output length or type"}
    bad = [i for i, (o, v) in enumerate(zip(out, values, strict=True)) if abs(o - 2.0 * v) > 1e-9 * max(1.0, abs(v))]
    return {"passed": not bad, "diagnostics": f"{len(bad)} wrong elements" if bad else "",
            "metrics": {"wrong": len(bad)}}


def benchmark(module, case, repetitions):
    rng = random.Random(evaluation_seed())
    values = _inputs(case, 2)
    latency = float(module.LATENCY_US) * float(case["parameters"].get("cost", 1.0))
    drift = 1.0 + rng.gauss(0.0, 0.001)
    samples = []
    for _ in range(max(repetitions, 30)):
        module.scale(values)
        samples.append(latency * drift * (1.0 + rng.gauss(0.0, 0.003)))
    return {"samples_us": samples, "warmup_count": 0, "cache_policy": "synthetic"}
