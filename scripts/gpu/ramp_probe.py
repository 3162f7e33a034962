#!/usr/bin/env python3
"""Does a kernel run slower in the first fraction of a second of load after the GPU idled? (H200 probe)

Compiles the untuned example matmul (4096^3 fp16, ~1.4 ms a call), lets the GPU idle for `--idle`
seconds, then times back-to-back calls with CUDA events for `--seconds` and prints the median of each
100 ms window relative to the last 0.5 s. The timing kit's settle warm-up (`SETTLE_SECONDS`) exists
because the measurement study saw each process's first runs 0.8-1.4 % slow.

  python3 scripts/gpu/ramp_probe.py [--idle 3] [--seconds 2]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--idle", type=float, default=3.0)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("ramp_matmul", ROOT / "examples/matmul/kernel.py")
    kernel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernel)
    a = torch.rand((4096, 4096), dtype=torch.float16, device="cuda")
    b = torch.rand((4096, 4096), dtype=torch.float16, device="cuda")
    kernel.matmul(a, b)  # compile
    torch.cuda.synchronize()
    time.sleep(args.idle)
    timeline = []
    started = time.perf_counter()
    while time.perf_counter() - started < args.seconds:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        kernel.matmul(a, b)
        end.record()
        end.synchronize()
        timeline.append((time.perf_counter() - started, begin.elapsed_time(end) * 1000.0))
    steady = statistics.median(us for t, us in timeline if t >= args.seconds - 0.5)
    windows = []
    for index in range(int(args.seconds / 0.1)):
        window = [us for t, us in timeline if index * 0.1 <= t < (index + 1) * 0.1]
        if window:
            windows.append({"from_s": round(index * 0.1, 1), "calls": len(window),
                            "median_us": statistics.median(window), "vs_steady": statistics.median(window) / steady})
    print(f"ramp probe: matmul 4096^3 fp16 after {args.idle:g} s idle; steady (last 0.5 s) {steady:.1f} us")
    print(" ".join(f"{w['from_s']:.1f}s:{(w['vs_steady'] - 1) * 100:+.2f}%" for w in windows))
    if args.json:
        args.json.write_text(json.dumps({"steady_us": steady, "windows": windows, "calls": timeline}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
