"""The GPU judge in this process on an example's H200 bundle, with every byte of its CUDA memory scanned.

For each case: build, verify, benchmark and profile (Proton and ncu) the given kernel through `GpuJudge`, as a
worker does. While benchmark runs, the first replayed calls are scanned at the moment their kernels would start:
every segment the CUDA caching allocator holds (active and free blocks alike: all memory a kernel of this
context can read without faulting) is searched for the first 16 values of this call's answer and of its first
input. The judge's promise is that neither a reference nor a private copy of the inputs exists then: the answer
is found nowhere, the input once (the call's own). Prints one line per case and a table last.

    python3 scripts/gpu/judge_memory_scan.py --example vector_add [--kernel FILE] [--cases FILE] [--out DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import secrets
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SCANNED_CALLS = 4


class _Raw:
    """A float32 view of device memory the allocator holds (zero-copy, through __cuda_array_interface__)."""

    def __init__(self, address: int, count: int) -> None:
        self.__cuda_array_interface__ = {"shape": (count,), "typestr": "<f4", "data": (address, False), "version": 3}


def occurrences(pattern: Any, exclude: list[tuple[int, int]]) -> int:
    """How often the 16 values of `pattern` lie, 4-byte aligned, in any allocator segment outside `exclude`."""
    import torch

    found = 0
    for segment in torch.cuda.memory_snapshot():
        address, size = int(segment["address"]), int(segment["total_size"])
        memory = torch.as_tensor(_Raw(address, size // 4), device="cuda")
        for index in torch.nonzero(memory == pattern[0]).flatten().tolist()[:10_000]:
            where = address + 4 * index
            if index + 16 > memory.numel() or any(low <= where < high for low, high in exclude):
                continue
            if torch.equal(memory[index:index + 16], pattern):
                found += 1
    return found


def pageable_memory_access() -> dict[str, int | None]:
    """Whether kernels of this device can dereference ordinary host memory (HMM/ATS): the CUDA driver's
    PAGEABLE_MEMORY_ACCESS (88) and ..._USES_HOST_PAGE_TABLES (100) attributes of device 0."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return {"pageable_memory_access": None, "uses_host_page_tables": None}
    values = {}
    for name, attribute in (("pageable_memory_access", 88), ("uses_host_page_tables", 100)):
        value = ctypes.c_int(-1)
        status = cuda.cuDeviceGetAttribute(ctypes.byref(value), attribute, 0)
        values[name] = value.value if status == 0 else None
    return values


def load_harness(path: Path) -> Any:
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("tlx_agent_harness", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["tlx_agent_harness"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="vector_add")
    parser.add_argument("--kernel", type=Path, default=None, help="the kernel file (default: the example's)")
    parser.add_argument("--cases", type=Path, default=None, help="cases.json (default: the example's h200/)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/judge-scan"))
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    example = ROOT / "examples" / args.example
    harness_path = example / "harness.py"
    kernel = (args.kernel or example / "kernel.py").resolve()
    cases = json.loads((args.cases or example / "h200" / "cases.json").read_text())
    target = json.loads((example / "h200" / "target.json").read_text())
    harness = load_harness(harness_path)

    from sandbox_worker.harness_kit import checks, context
    from sandbox_worker.judged import fresh_calls
    from sandbox_worker.judged.gpu_judge import GpuJudge

    judge = GpuJudge.start(harness.JUDGE, target, str(kernel), writable_dirs=None, own_pid_namespace=False,
                           harness_path=str(harness_path))
    scan = {"calls": 0, "answers": 0, "input_copies": 0}
    original_prepare = fresh_calls.CallSource.prepare

    def scanning_prepare(self: Any, drawn: Any = None) -> Any:
        import torch

        call = original_prepare(self, drawn)
        if scan["calls"] >= SCANNED_CALLS or drawn is not None:
            return call
        scan["calls"] += 1
        torch.cuda.synchronize()
        inputs = call.drawn.tensors
        clones = checks.clone_args(inputs)
        expected = self.spec.reference(*clones)
        expected = expected[0] if isinstance(expected, (tuple, list)) else expected
        answer = expected.detach().flatten()[:16].float().cpu()
        checks.poison_([expected, *clones])  # the scan's own reference and copies are gone before it looks
        del expected, clones
        torch.cuda.synchronize()
        answer_pattern = answer.cuda()
        input_pattern = inputs[0].flatten()[:16].float().clone()
        own = [(p.data_ptr(), p.data_ptr() + 64) for p in (answer_pattern, input_pattern)]
        if inputs[0].dtype == torch.float32:
            scan["answers"] += occurrences(answer_pattern, own) if answer.dtype == torch.float32 else 0
            start = inputs[0].data_ptr()
            scan["input_copies"] += occurrences(input_pattern, own + [(start, start + 64)])
        return call

    fresh_calls.CallSource.prepare = scanning_prepare
    rows = []
    try:
        context.set_command_context(seed=secrets.randbits(64), phase="build")
        print("build", judge.build(), flush=True)
        for case in cases:
            row: dict[str, Any] = {"case": case["case_id"]}
            context.set_command_context(seed=secrets.randbits(64), phase="verify")
            started = time.perf_counter()
            verdict = judge.verify(case)
            row["verify"] = verdict["passed"]
            row["verify_s"] = round(time.perf_counter() - started, 2)
            if not verdict["passed"]:
                print(case["case_id"], "verify failed:", verdict["diagnostics"][:400], flush=True)
                rows.append(row)
                continue
            scan.update(calls=0, answers=0, input_copies=0)
            context.set_command_context(seed=secrets.randbits(64), phase="benchmark")
            started = time.perf_counter()
            try:
                result = judge.benchmark(case, 10)
            except Exception as exc:  # noqa: BLE001 - a cheat caught is a row, not a crash of the script
                row.update(error=f"{type(exc).__name__}: {str(exc)[:300]}")
                print(case["case_id"], "benchmark:", row["error"], flush=True)
                rows.append(row)
                continue
            samples = sorted(result["samples_us"])
            metrics = result["metrics"]
            median = samples[len(samples) // 2]
            row.update(benchmark_s=round(time.perf_counter() - started, 2), median_us=round(median, 2),
                       n=len(samples), mode=metrics["mode"], calls=metrics["calls"], checked=metrics["checked_calls"],
                       scanned=scan["calls"], answers_found=scan["answers"], input_copies_found=scan["input_copies"],
                       copy_tb_s=round((metrics.get("device.copy_bytes_per_s") or math.nan) / 1e12, 2),
                       kernels=metrics.get("replayed_kernels"))
            if metrics.get("bytes"):
                row["tb_s"] = round(metrics["bytes"] / median / 1e6, 2)
            if metrics.get("flops"):
                row["tflop_s"] = round(metrics["flops"] / median / 1e6, 1)
            if not args.no_profile and case is cases[0]:
                context.set_command_context(seed=secrets.randbits(64), phase="profile")
                directory = args.out / args.example / case["case_id"]
                directory.mkdir(parents=True, exist_ok=True)
                started = time.perf_counter()
                profile = judge.profile(case, {"level": "summary", "tools": ["proton_launch", "ncu"],
                                               "artifacts_dir": str(directory)})
                proton = profile.get("proton") or {}
                ncu = profile.get("ncu") or {}
                row.update(profile_s=round(time.perf_counter() - started, 1),
                           proton_us=proton.get("total_kernel_us"), ncu_us=(ncu.get("summary") or {}).get("duration_us"),
                           ncu_status=ncu.get("status"))
                if ncu.get("status") != "ok":
                    print("ncu diagnostics:", (ncu.get("diagnostics") or [])[:3], flush=True)
                if not proton.get("available"):
                    print("proton diagnostics:", (proton.get("diagnostics") or [])[:3], flush=True)
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        fresh_calls.CallSource.prepare = original_prepare
        judge.close()
    print("\n== judge memory scan:", args.example, kernel.name, json.dumps(pageable_memory_access()))
    for row in rows:
        print("  " + " ".join(f"{key}={value}" for key, value in row.items()))
    clean = all(row.get("answers_found", 0) == 0 and row.get("input_copies_found", 0) == 0 for row in rows)
    print("  RESULT:", "no answer and no second copy of the inputs was resident during any scanned call" if clean
          else "FOUND judge data during a call")
    return 0 if clean else 3


if __name__ == "__main__":
    raise SystemExit(main())
