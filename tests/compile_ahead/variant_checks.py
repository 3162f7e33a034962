"""Matmul variants of the examples, compiled ahead for sm_90 by the real launch child, once per session.

The variants are what the tuner screens: examples/matmul/kernel.py with its module constants edited, and the
Triton tutorial's matmul (examples/tutorials/matmul.py) with its autotune list grown. The harness is the
example's own (examples/matmul/harness.py), the case the H200 bundle's largest.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import trio

from orchestrator.compile_ahead.variants import VariantCheck, VariantJob, check_variants
from orchestrator.worker.kernel_cache import SourceKernelCache

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "examples" / "matmul" / "harness.py"
KERNEL = (ROOT / "examples" / "matmul" / "kernel.py").read_text()
TUTORIAL = (ROOT / "examples" / "tutorials" / "matmul.py").read_text()
CASES = json.loads((ROOT / "examples" / "matmul" / "h200" / "cases.json").read_text())[:1]  # 4096 x 4096 x 4096


def constants(**values: int) -> str:
    """The example kernel with module constants set, as the tuner's edits leave it."""
    source = KERNEL
    for name, value in values.items():
        line = next(line for line in source.splitlines() if line.startswith(f"{name} = "))
        source = source.replace(line, f"{name} = {value}", 1)
    return source


TUTORIAL_CONFIG = """        triton.Config({'BLOCK_SIZE_M': 64, 'BLOCK_SIZE_N': 64, 'BLOCK_SIZE_K': 32, 'GROUP_SIZE_M': 8}, num_stages=3,
                      num_warps=4),
"""
# 6 stages of (256 + 128) x 64 fp16 tiles: 294912 B, the H200's own OutOfResources figure
HUGE_CONFIG = """        triton.Config({'BLOCK_SIZE_M': 256, 'BLOCK_SIZE_N': 128, 'BLOCK_SIZE_K': 64, 'GROUP_SIZE_M': 8}, num_stages=6,
                      num_warps=8),
"""
assert TUTORIAL_CONFIG in TUTORIAL

VARIANTS = {
    "baseline": KERNEL,
    "huge": constants(BLOCK_M=256, BLOCK_N=128, BLOCK_K=64, NUM_STAGES=6, NUM_WARPS=8),
    "autotune": TUTORIAL.replace(TUTORIAL_CONFIG, TUTORIAL_CONFIG + HUGE_CONFIG),
    "raises_at_import": KERNEL + "\nraise ValueError('a broken edit')\n",
    "asks_the_gpu_at_import": KERNEL + "\nSMS = torch.cuda.get_device_properties(0).multi_processor_count\n",
    "asks_an_h200_its_sm_count": KERNEL + "\nSMS = torch.cuda.get_device_properties(0).multi_processor_count\n",
}
# what the run passes for a target whose device protocol/devices.py lists (compile_ahead/ahead.py)
DEVICE_PROPERTIES = {"asks_an_h200_its_sm_count": {"multiprocessor_count": 132}}


@functools.cache
def kept_kernels(directory: str) -> SourceKernelCache:
    """The run's kernel cache the checks below hand their compiles to (orchestrator/worker/kernel_cache.py)."""
    return SourceKernelCache(Path(directory) / "kernel_cache")


@functools.cache
def checked(directory: str) -> dict[str, VariantCheck]:
    """Every variant above compiled ahead (one lane: the CI machine has two cores), what each compiled kept in
    `kept_kernels(directory)` as a run keeps it."""
    paths = []
    for name, source in VARIANTS.items():
        path = Path(directory) / f"{name}.py"
        path.write_text(source)
        paths.append(path)
    jobs = [VariantJob(source_path=path, harness_path=HARNESS, cases=CASES,
                       device_properties=DEVICE_PROPERTIES.get(path.stem, {})) for path in paths]
    checks = trio.run(lambda: check_variants(jobs, seconds_per_variant=240, max_parallel=1,
                                             keep_kernels=kept_kernels(directory).keep))
    return dict(zip(VARIANTS, checks, strict=True))
