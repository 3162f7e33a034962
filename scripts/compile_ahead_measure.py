"""Seconds per variant compiled ahead: a tuner-like family of eight examples/matmul variants, for sm_90, on the
H200 bundle's first case, in LANES parallel children (`python scripts/compile_ahead_measure.py LANES`)."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.compile_ahead.variants import VariantJob, check_variants  # noqa: E402
from tests.compile_ahead.variant_checks import CASES, HARNESS, constants  # noqa: E402

FAMILY = [{}, {"BLOCK_M": 64, "BLOCK_N": 64},
          {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "NUM_STAGES": 3, "NUM_WARPS": 4},
          {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "NUM_STAGES": 4, "NUM_WARPS": 8},
          {"BLOCK_M": 64, "BLOCK_N": 128, "NUM_STAGES": 4},
          {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "NUM_STAGES": 6, "NUM_WARPS": 8},
          {"GROUP_M": 8, "NUM_WARPS": 4},
          {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "NUM_STAGES": 5, "NUM_WARPS": 8}]


def main(lanes: int) -> None:
    directory = Path(tempfile.mkdtemp(prefix="compile-ahead-family-"))
    jobs = []
    for index, values in enumerate(FAMILY):
        path = directory / f"v{index:02d}.py"
        path.write_text(constants(**values))
        jobs.append(VariantJob(source_path=path, harness_path=HARNESS, cases=CASES))
    started = time.monotonic()
    checks = trio.run(lambda: check_variants(jobs, seconds_per_variant=300, max_parallel=lanes))
    wall = time.monotonic() - started
    for values, check in zip(FAMILY, checks, strict=True):
        report = check.compiles[0].report if check.compiles else None
        figures = (f"compile={report.seconds}s shared={report.shared_memory_bytes} regs={report.registers_per_thread} "
                   f"spills={report.spill_store_bytes}") if report else "no compile"
        print(f"{values} {check.feasibility.verdict.value} child={check.seconds:.1f}s {figures}")
    compiles = [check.compiles[0].report.seconds for check in checks if check.compiles]
    print(f"lanes={lanes} variants={len(jobs)} wall={wall:.1f}s per_variant={wall / len(jobs):.2f}s "
          f"mean_compile={sum(compiles) / max(1, len(compiles)):.2f}s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
