"""GPU check (stdlib only, runs where trio/pydantic are missing): drive one real sandbox worker through
setup/build/verify/benchmark/profile/shutdown and print every event, to see that the audit-hook monitor
flags nothing on the honest CUDA path (Triton compile, event timing, Proton, ncu) and flags a write.

    python3 tests/faults/drive_worker_gpu.py KERNEL.py [--cpu]

`--cpu` uses the interpreter target and a small case (a smoke test of this script without a GPU).
Not yet run on the H200: the session that wrote it had no device time left.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vector_add"


def main() -> int:
    kernel = Path(sys.argv[1]).resolve()
    on_cpu = "--cpu" in sys.argv[2:]
    scratch = Path(tempfile.mkdtemp(prefix="tlx-drive-"))
    for sub in ("home", "tmp", "triton_cache"):
        (scratch / sub).mkdir()
    profile_dir = scratch.parent / (scratch.name + "-profile")
    profile_dir.mkdir()
    parent, child = socket.socketpair()
    keep = ("PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NCCL_NVLS_ENABLE",
            "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update({"TLX_PROTOCOL_FD": str(child.fileno()), "TLX_WORKER_TOKEN": "drive", "TLX_WORKER_SCRATCH": str(scratch),
                "HOME": str(scratch / "home"), "TMPDIR": str(scratch / "tmp"),
                "TRITON_CACHE_DIR": str(scratch / "triton_cache"), "PYTHONPATH": str(ROOT), "PYTHONSAFEPATH": "1",
                "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "PYTHONUNBUFFERED": "1"})
    target = json.loads((EXAMPLE / ("target.json" if on_cpu else "h200/target.json")).read_text())
    env.update(target.get("environment", {}))
    log = open(scratch.parent / (scratch.name + ".log"), "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-s", "-m", "sandbox_worker"], env=env, cwd=scratch,
                            pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    child.close()
    reader = parent.makefile("rb")

    def send(message: dict) -> None:
        parent.sendall(json.dumps(message).encode() + b"\n")

    def receive(label: str) -> dict:
        line = reader.readline()
        event = json.loads(line) if line else {"kind": "EOF"}
        shown = {k: (v if k != "traceback" else v[-600:]) for k, v in event.items()}
        print(label, json.dumps(shown)[:1500], flush=True)
        return event

    n = 256 if on_cpu else 16777216
    case = {"case_id": f"n{n}", "parameters": {"n": n, "budget_seconds": 0.5}, "weight": 1.0, "protected": True}
    receive("hello")
    send({"kind": "setup", "run_id": "drive", "experiment_id": "e", "harness_path": str(EXAMPLE / "harness.py"),
          "kernel_path": str(kernel), "target": target,
          "isolation": {"mode": "standard", "scratch_dir": str(scratch), "writable_dirs": [str(scratch), str(profile_dir)],
                        "data_limit_bytes": None, "cpu_seconds": 600, "file_size_bytes": 1 << 30, "open_files": 4096,
                        "network": False}})
    receive("setup")
    send({"kind": "build", "command_id": 1})
    if receive("build").get("kind") == "reply":
        send({"kind": "verify", "command_id": 2, "case": case, "seed": 7})
        receive("verify")
        send({"kind": "benchmark", "command_id": 3, "case": case, "repetitions": 10, "seed": 8})
        receive("benchmark")
        request = {"level": "summary", "tools": ["proton_launch", "ncu"], "experiment_id": "e",
                   "artifacts_dir": str(profile_dir / case["case_id"]), "reason": "drive", "diagnostic_only": False,
                   "granularity": None}
        send({"kind": "profile", "command_id": 4, "case": case, "request": request, "seed": 9})
        receive("profile")
    send({"kind": "shutdown"})
    receive("shutdown")
    print("exit", proc.wait(timeout=60), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
