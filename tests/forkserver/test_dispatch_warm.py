"""A GPU run's fork server warms torch's Python dispatch before it forks (sandbox_worker/judged/recording.py
`warm_dispatch_mode`): each candidate process records its entry through a TorchDispatchMode, and the first one a
process enters imports about 900 modules (2.3 s of every worker's verify on the H200). It also computes Triton's
cache key (sandbox_worker/judged/warm.py), which every process hashed at its first kernel call. A worker forked
from the warm server enters its first mode and keys its first kernel at once; the server stays single-threaded
and never initialises CUDA.

Real processes: a fork server started as a GPU run starts it, a forked worker whose harness times its own first
dispatch mode at import.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import trio

from orchestrator.worker.forkserver import ForkServer, ForkServerSpawner
from tests.conftest import SYNTHETIC, synthetic_kernel
from tests.forkserver.workers import PASSING_HARNESS_FUNCTIONS, Bundle, start_to_ready, stop, worker_launch

# The harness enters a dispatch mode once at import, as the candidate process's first recording does, and says
# how long that took (worker setup imports the harness after every isolation layer).
TIMING_HARNESS = textwrap.dedent('''
    import json, os, tempfile, time

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Through(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    _started = time.perf_counter()
    with _Through():
        torch.ones(2).mul_(3)
    _first_mode = time.perf_counter() - _started

    from triton.runtime.cache import triton_key
    _key_cached = triton_key.cache_info().currsize
    _started = time.perf_counter()
    triton_key()
    with open(os.path.join(os.environ["TLX_WORKER_SCRATCH"], "dispatch.json"), "w") as out:
        json.dump({"first_mode_seconds": _first_mode, "triton_key_cached": _key_cached,
                   "triton_key_seconds": time.perf_counter() - _started,
                   "threads": len(os.listdir("/proc/self/task")),
                   "tempdir": tempfile.gettempdir(), "TMPDIR": os.environ.get("TMPDIR")}, out)

''') + PASSING_HARNESS_FUNCTIONS


def timing_bundle(directory: Path) -> Bundle:
    directory.mkdir(parents=True)
    (directory / "harness.py").write_text(TIMING_HARNESS)
    (directory / "kernel.py").write_text(synthetic_kernel(100.0))
    (directory / "target.json").write_text((SYNTHETIC / "target.json").read_text())
    return Bundle.in_directory(directory)


def test_a_warm_server_forks_workers_whose_first_dispatch_mode_costs_nothing(tmp_path):
    bundle = timing_bundle(tmp_path / "bundle")
    found: dict = {}

    async def main() -> None:
        server = ForkServer.start(python=sys.executable, parent_env=dict(os.environ), target_environment=None,
                                  scratch=tmp_path / "server", log_path=tmp_path / "server.log", warm_ups=True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.serve)
            spawner = ForkServerSpawner(server, python=sys.executable, notify=found.setdefault("said", []).append)
            try:
                assert await spawner.wait_ready(), spawner.statistics()
                found["ready"] = server.ready
                found["server_threads"] = len(os.listdir(f"/proc/{server.popen.pid}/task"))
                launch = worker_launch(sys.executable, dict(os.environ), bundle, tmp_path / "forked")
                started = await start_to_ready(spawner, launch, bundle)
                found["worker"] = json.loads((tmp_path / "forked" / "dispatch.json").read_text())
                await stop(started)
            finally:
                with trio.CancelScope(shield=True):
                    await server.aclose()
                nursery.cancel_scope.cancel()

    trio.run(main)
    ready = found["ready"]
    # the server paid the imports once (over a second here, cold), before any fork; a CPU tensor, no CUDA
    assert ready.dispatch_warm_seconds is not None and ready.dispatch_warm_seconds > 0.2
    assert ready.missing == {} and ready.problem is None and ready.cuda_initialized is False
    assert found["server_threads"] == 1
    # the forked worker's own first mode: the imports are already there (a cold one takes over a second)
    assert found["worker"]["first_mode_seconds"] < 0.2, found["worker"]
    # Triton's cache key (a hash of its files and its 400 MB libtriton.so: 0.6 s here) came computed with the fork
    assert ready.triton_key_seconds is not None and ready.triton_key_seconds > 0.1
    assert found["worker"]["triton_key_cached"] == 1 and found["worker"]["triton_key_seconds"] < 0.01, found["worker"]
    # the warm-up's imports cache the server's temporary folder in `tempfile`; the worker writes in its own
    # (on the H100, Triton's .ptx files went to the server's and the sandbox refused every worker)
    assert found["worker"]["TMPDIR"] and found["worker"]["tempdir"] == found["worker"]["TMPDIR"], found["worker"]
    # the run's live log says so once, at its first forked worker
    assert len(found["said"]) == 1 and f"dispatch_warm_s={ready.dispatch_warm_seconds:.2f}" in found["said"][0]
    assert f"triton_key_s={ready.triton_key_seconds:.2f}" in found["said"][0]


def test_a_server_not_asked_to_warm_leaves_dispatch_cold(tmp_path):
    async def main() -> ForkServer:
        server = ForkServer.start(python=sys.executable, parent_env=dict(os.environ), target_environment=None,
                                  scratch=tmp_path / "server", log_path=None)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.serve)
            try:
                await server.wait_ready()
            finally:
                with trio.CancelScope(shield=True):
                    await server.aclose()
                nursery.cancel_scope.cancel()
        return server

    server = trio.run(main)
    assert server.ready is not None and server.ready.dispatch_warm_seconds is None
    assert server.ready.triton_key_seconds is None
