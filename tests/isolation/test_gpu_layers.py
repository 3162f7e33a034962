"""Isolation layers on a GPU host: CUDA, a freshly JIT-compiled Triton kernel and ncu under the sandbox.

Skipped where there is no NVIDIA device. On the H200 host (no pytest there) run it directly:
`python3 tests/isolation/test_gpu_layers.py` prints one JSON report per scenario and exits non-zero when
CUDA or Triton break under the layers.
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
NOBODY = 65534

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

# Applies the layers (all, or all but `skip`), then runs the kernel in-process and, optionally, under ncu.
CHILD = textwrap.dedent("""
    import errno, json, os, subprocess, sys, time
    from sandbox_worker.isolation import layers as isolation
    config, ncu, skip = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
    if skip == [""]:
        statuses = isolation.apply_layers(config)
    else:
        steps = {"rlimits": lambda: isolation.rlimits.apply_rlimits(config),
                 "network": lambda: isolation.isolate_network(config),
                 "filesystem": lambda: isolation.confine_writes(config),
                 "seccomp": isolation.deny_escape_syscalls}
        statuses = {name: ("skipped" if name in skip else step()) for name, step in steps.items()}
    report = {"statuses": statuses, "euid": os.geteuid()}
    scratch = config["scratch_dir"]
    started = time.perf_counter()
    sys.path.insert(0, scratch)
    try:
        import kernel_script
        report["triton_ok"] = kernel_script.run()
    except Exception as exc:
        report["triton_ok"] = False
        report["triton_error"] = str(exc)[-300:]
    report["cuda_seconds"] = round(time.perf_counter() - started, 2)
    try:
        open(config["outside"] + "/escape.txt", "w").close()
        report["outside_write"] = "ok"
    except OSError as exc:
        report["outside_write"] = errno.errorcode[exc.errno]
    if ncu:
        command = [ncu, "--clock-control", "none", "--target-processes", "all", "--kernel-name", "regex:add_kernel",
                   "--launch-count", "1", "--section", "SpeedOfLight", "--export", scratch + "/prof",
                   "--force-overwrite", sys.executable, scratch + "/kernel_script.py"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=scratch)
        report["ncu_returncode"] = done.returncode
        report["ncu_report_exists"] = os.path.exists(scratch + "/prof.ncu-rep")
        report["ncu_tail"] = (done.stdout + done.stderr)[-600:]
    print(json.dumps(report))
""")


def run_gpu_check(use_ncu: bool = True, skip: tuple[str, ...] = (), user: int | None = None) -> dict[str, Any]:
    """One scenario in a fresh child; `user` runs it under that uid/gid (scratch and package copied for it)."""
    with tempfile.TemporaryDirectory(prefix="tlx-gpu-isolation-") as root:
        os.chmod(root, 0o755)
        scratch, outside = Path(root) / "scratch", Path(root) / "outside"
        for sub in ("home", "tmp", "triton_cache"):
            (scratch / sub).mkdir(parents=True)
        outside.mkdir()
        (scratch / "kernel_script.py").write_text(KERNEL_SCRIPT)
        package_root = PROJECT_ROOT
        if user is not None:
            package_root = Path(root) / "package"
            shutil.copytree(PROJECT_ROOT / "sandbox_worker", package_root / "sandbox_worker")
            for path in (scratch, *scratch.rglob("*")):
                os.chown(path, user, user)
            for path in (package_root, *package_root.rglob("*")):
                path.chmod(0o755 if path.is_dir() else 0o644)
        config = {"mode": "strict", "scratch_dir": str(scratch), "outside": str(outside),
                  "writable_dirs": [str(scratch / s) for s in ("home", "tmp", "triton_cache")],
                  "data_limit_bytes": None, "cpu_seconds": 600, "file_size_bytes": 1 << 30, "open_files": 4096}
        env = {**os.environ, "PYTHONPATH": str(package_root), "HOME": str(scratch / "home"),
               "TMPDIR": str(scratch / "tmp"), "TRITON_CACHE_DIR": str(scratch / "triton_cache")}
        ncu = (shutil.which("ncu") or "") if use_ncu else ""
        identity: dict[str, Any] = {} if user is None else {"user": user, "group": user, "extra_groups": []}
        completed = subprocess.run([sys.executable, "-c", CHILD, json.dumps(config), ncu, ",".join(skip)], env=env,
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=420,
                                   cwd=scratch, **identity)
        if completed.returncode != 0:
            return {"error": completed.stderr[-4000:], "returncode": completed.returncode}
        return json.loads(completed.stdout.strip().splitlines()[-1])


def check(report: dict[str, Any]) -> list[str]:
    """What is wrong with an all-layers report (empty when CUDA, Triton and every layer work together)."""
    if "error" in report:
        return [f"child failed: {report['error']}"]
    problems = [f"{layer}: {status}" for layer, status in report["statuses"].items() if status != "active"]
    if not report["triton_ok"]:
        problems.append(f"Triton kernel failed: {report.get('triton_error', 'wrong result')}")
    if report["outside_write"] != "EACCES":  # Landlock's refusal (and DAC's, for uid 65534 on a root-owned dir)
        problems.append(f"write outside scratch after CUDA init gave {report['outside_write']}")
    return problems


def test_cuda_and_triton_work_under_every_layer() -> None:
    import pytest

    if not os.path.exists("/dev/nvidiactl"):
        pytest.skip("no NVIDIA device on this machine")
    report = run_gpu_check(use_ncu=False)
    assert check(report) == [], report


if __name__ == "__main__":
    use_ncu = "--no-ncu" not in sys.argv
    scenarios = {
        "root, every layer": run_gpu_check(use_ncu),
        "root, every layer but filesystem": run_gpu_check(use_ncu, skip=("filesystem",)),
        "uid 65534, every layer": run_gpu_check(use_ncu, user=NOBODY),
    }
    failed = False
    for name, result in scenarios.items():
        issues = check(result)
        failed = failed or (name != "root, every layer but filesystem" and bool(issues))
        print(f"== {name}\n{json.dumps(result, indent=1)}\nissues: {issues or 'none'}")
    sys.exit(1 if failed else 0)
