"""Tests of the bundle preflight (`tlx-agent validate`), the lock, `--arch` matching and `init-bundle`.

Shared helpers live here: a private copy of the fast synthetic bundle that a test may break on purpose.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import SYNTHETIC

GOOD_KERNEL = '"""Synthetic kernel."""\n\nLATENCY_US = 100.0\n\n\ndef scale(values):\n    return [v * 2.0 for v in values]\n'

# Appended to the synthetic harness: later definitions replace the originals.
VERIFY_ACCEPTS_EVERYTHING = "\n\ndef verify(module, case):\n    return True\n"
BUILD_ACCEPTS_INVALID_SOURCE = f'''

_strict_build = build


def build(kernel_source, target):
    """Falls back to a known-good kernel when the source does not parse: the candidate is never measured."""
    try:
        compile(kernel_source, "kernel", "exec")
    except SyntaxError:
        kernel_source = {GOOD_KERNEL!r}
    return _strict_build(kernel_source, target)
'''
UNSTABLE_BENCHMARK = '''

def benchmark(module, case, repetitions):
    rng = random.Random(evaluation_seed())
    scale_factor = rng.uniform(0.5, 2.0)  # each worker lands somewhere else, and samples scatter wildly
    return {"samples_us": [100.0 * scale_factor * rng.uniform(0.2, 5.0) for _ in range(max(repetitions, 30))],
            "warmup_count": 0, "cache_policy": "synthetic"}
'''
FAKE_PROFILE = '''

def profile(module, case, request=None):
    """A Proton-shaped reply, as profile_kit returns on a GPU: per-kernel leaves and the main/non-main split."""
    kernels = KERNELS
    main = next((k["time_us"] / k["count"] for k in kernels if k["name"] == MAIN), None)
    return {"level": "summary", "tools": ["proton_launch"], "ncu": None, "diagnostics": [],
            "proton": {"available": True, "schema": "tlx_proton_launch_v1", "main_scope": MAIN, "kernels": kernels,
                       "main_kernel_us": main, "non_main_kernel_us": 0.0, "wrapper_us": 1.0, "diagnostics": []}}
'''


def fake_profile(kernels: list[dict], main_scope: str | None) -> str:
    return f"\nKERNELS = {kernels!r}\nMAIN = {main_scope!r}\n" + FAKE_PROFILE


def make_bundle(directory: Path, *, harness_extra: str = "", kernel: str | None = None,
                cases: list[dict] | None = None, target: dict | None = None) -> dict[str, Path]:
    """A private copy of tests/e2e/synthetic, optionally broken; returns role -> path."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("harness.py", "kernel.py", "cases.json", "target.json"):
        shutil.copyfile(SYNTHETIC / name, directory / name)
    if harness_extra:
        with (directory / "harness.py").open("a", encoding="utf-8") as handle:
            handle.write(harness_extra)
    if kernel is not None:
        (directory / "kernel.py").write_text(kernel, encoding="utf-8")
    if cases is not None:
        (directory / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    if target is not None:  # the synthetic harness has no JUDGE: its verdicts run in the candidate's process, by name
        (directory / "target.json").write_text(json.dumps({"verdict_process": "candidate", **target}),
                                               encoding="utf-8")
    return {"kernel": directory / "kernel.py", "harness": directory / "harness.py", "cases": directory / "cases.json",
            "target": directory / "target.json"}


def bundle_args(bundle: dict[str, Path], output_dir: Path | None, *extra: str | Path) -> list[str | Path]:
    args: list[str | Path] = ["--kernel", bundle["kernel"], "--harness", bundle["harness"], "--cases", bundle["cases"],
                              "--target", bundle["target"]]
    if output_dir is not None:
        args += ["--output-dir", output_dir]
    return [*args, *extra]


def check(lock: dict, name: str) -> dict:
    return next(c for c in lock["checks"] if c["name"] == name)
