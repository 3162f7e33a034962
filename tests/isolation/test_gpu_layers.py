"""All isolation layers on a GPU host: CUDA, a freshly JIT-compiled Triton kernel and ncu must still work.

Skipped where there is no NVIDIA device. On the H200 host (no pytest there) run it directly:
`python3 tests/isolation/test_gpu_layers.py` prints the child's JSON report and exits non-zero on failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[2]

KERNEL_SCRIPT = textwrap.dedent("""
    import sys, torch, triton, triton.language as tl

    @triton.jit
    def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out + offsets, tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask), mask=mask)

    def run(n=1 << 20):
        x = torch.rand(n, device="cuda"); y = torch.rand(n, device="cuda"); out = torch.empty_like(x)
        add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        torch.cuda.synchronize()
        return bool(torch.allclose(out, x + y))

    if __name__ == "__main__":
        sys.exit(0 if run() else 1)
""")

CHILD = textwrap.dedent("""
    import errno, json, os, subprocess, sys, time
    from sandbox_worker import isolation
    config, ncu = json.loads(sys.argv[1]), sys.argv[2]
    report = {"statuses": isolation.apply_layers(config)}
    scratch = config["scratch_dir"]
    started = time.perf_counter()
    sys.path.insert(0, scratch)
    import kernel_script
    report["triton_ok"] = kernel_script.run()
    report["cuda_seconds"] = round(time.perf_counter() - started, 2)
    import torch
    report["device"] = torch.cuda.get_device_name(0)
    try:
        open(config["outside"] + "/escape.txt", "w").close()
        report["outside_write"] = "ok"
    except OSError as exc:
        report["outside_write"] = errno.errorcode[exc.errno]
    report["cache_files"] = sum(len(f) for _, _, f in os.walk(os.environ["TRITON_CACHE_DIR"]))
    if ncu:
        command = [ncu, "--clock-control", "none", "--target-processes", "all", "--kernel-name", "regex:add_kernel",
                   "--launch-count", "1", "--section", "SpeedOfLight", "--export", scratch + "/prof",
                   "--force-overwrite", sys.executable, scratch + "/kernel_script.py"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=scratch)
        report["ncu_returncode"] = done.returncode
        report["ncu_report_exists"] = os.path.exists(scratch + "/prof.ncu-rep")
        report["ncu_tail"] = (done.stdout + done.stderr)[-1500:]
    print(json.dumps(report))
""")


def run_gpu_check(use_ncu: bool = True) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tlx-gpu-isolation-") as root:
        scratch, outside = Path(root) / "scratch", Path(root) / "outside"
        for sub in ("home", "tmp", "triton_cache"):
            (scratch / sub).mkdir(parents=True)
        outside.mkdir()
        (scratch / "kernel_script.py").write_text(KERNEL_SCRIPT)
        config = {"mode": "strict", "scratch_dir": str(scratch), "outside": str(outside),
                  "writable_dirs": [str(scratch / s) for s in ("home", "tmp", "triton_cache")],
                  "data_limit_bytes": None, "cpu_seconds": 600, "file_size_bytes": 1 << 30, "open_files": 4096}
        env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "HOME": str(scratch / "home"),
               "TMPDIR": str(scratch / "tmp"), "TRITON_CACHE_DIR": str(scratch / "triton_cache")}
        ncu = (shutil.which("ncu") or "") if use_ncu else ""
        completed = subprocess.run([sys.executable, "-c", CHILD, json.dumps(config), ncu], env=env,
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=420,
                                   cwd=scratch)
        if completed.returncode != 0:
            return {"error": completed.stderr[-4000:], "returncode": completed.returncode}
        return json.loads(completed.stdout.strip().splitlines()[-1])


def check(report: dict[str, Any]) -> list[str]:
    """What is wrong with a report (empty when CUDA, Triton and every layer work together)."""
    if "error" in report:
        return [f"child failed: {report['error']}"]
    problems = [f"{layer}: {status}" for layer, status in report["statuses"].items() if status != "active"]
    if not report["triton_ok"]:
        problems.append("Triton kernel result wrong")
    if report["outside_write"] not in ("EACCES", "EPERM"):
        problems.append(f"write outside scratch after CUDA init gave {report['outside_write']}")
    if "ncu_returncode" in report and not report["ncu_report_exists"]:
        problems.append(f"ncu under the sandbox failed ({report['ncu_returncode']}): {report['ncu_tail']}")
    return problems


def test_cuda_triton_and_ncu_work_under_every_layer() -> None:
    import pytest

    if not os.path.exists("/dev/nvidiactl"):
        pytest.skip("no NVIDIA device on this machine")
    report = run_gpu_check()
    assert check(report) == [], report


if __name__ == "__main__":
    result = run_gpu_check(use_ncu="--no-ncu" not in sys.argv)
    print(json.dumps(result, indent=1))
    issues = check(result)
    print("\n".join(issues) if issues else "OK: CUDA + Triton + ncu work with every isolation layer active")
    sys.exit(1 if issues else 0)
