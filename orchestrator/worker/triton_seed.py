"""A trusted build of Triton's CUDA driver module, copied into each worker's private Triton cache.

Why: every worker gets a fresh `TRITON_CACHE_DIR` (a candidate must never leave compiled files for the next
one), so each GPU worker builds Triton's `cuda_utils` C module with the host's C compiler when it makes
Triton's CUDA driver active; a judged worker does that at setup, before `ready`. A run builds the module once,
in a child of its own that imports Triton and nothing of the bundle, and its spawner copies the result into
each worker's cache before the worker starts. The copy is the worker's own: what a candidate does to it
reaches no other worker, which gets a fresh copy of the seed.

The build needs a CUDA driver library on the host; without one (a CPU host) there is no seed and workers
build what they need themselves, as before.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import trio

from orchestrator.worker.environment import build_worker_environment, make_scratch_dirs
from orchestrator.worker.launcher_store import LauncherStore
from orchestrator.worker.process import SpawnedWorker, Spawner, WorkerLaunch

BUILD_SECONDS = 120.0
BUILD_SCRIPT = "from triton.backends.nvidia.driver import CudaUtils; CudaUtils()"
REASON_CHARACTERS = 300


@dataclass(frozen=True)
class TritonSeed:
    cache: Path | None  # the seed's Triton cache directory; None: nothing was built
    reason: str  # what was built, or why nothing was


async def build_seed(python: str, parent_env: Mapping[str, str], directory: Path, *,
                     deadline_seconds: float = BUILD_SECONDS) -> TritonSeed:
    """Build Triton's CUDA driver module into `directory`/triton_cache in a child with a worker's environment."""
    shutil.rmtree(directory, ignore_errors=True)
    make_scratch_dirs(directory)
    env, _refused = build_worker_environment(parent_env, None, scratch=directory, token="triton-seed")
    cache = directory / "triton_cache"
    with trio.move_on_after(deadline_seconds) as scope:
        completed = await trio.run_process([python, "-s", "-c", BUILD_SCRIPT], env=env, cwd=directory,
                                           stdin=subprocess.DEVNULL, capture_stdout=True, capture_stderr=True,
                                           check=False)
    if scope.cancelled_caught:
        return TritonSeed(None, f"building Triton's CUDA driver module took over {deadline_seconds:.0f} s")
    built = sorted(path.name for path in cache.rglob("*") if path.is_file())
    if completed.returncode != 0 or not built:
        last = (completed.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        return TritonSeed(None, f"no CUDA driver module to seed (exit {completed.returncode}): "
                                f"{last[:REASON_CHARACTERS]}")
    return TritonSeed(cache, f"Triton's CUDA driver module built once for every worker ({', '.join(built)})")


def seed_cache(seed: Path, cache_dir: Path) -> None:
    """Copy the seed into a worker's Triton cache (a copy, never a link: the worker may change its own)."""
    shutil.copytree(seed, cache_dir, dirs_exist_ok=True, symlinks=False)


class SeededSpawner:
    """Another spawner whose workers start with the seed in their Triton cache, and with the launchers the run's
    judges built so far (`launchers`, orchestrator/worker/launcher_store.py)."""

    def __init__(self, inner: Spawner, seed: Path, launchers: LauncherStore | None = None) -> None:
        self.inner = inner
        self.seed = seed
        self.launchers = launchers

    async def spawn(self, launch: WorkerLaunch) -> SpawnedWorker:
        cache_dir = launch.env.get("TRITON_CACHE_DIR")
        if cache_dir:
            seed_cache(self.seed, Path(cache_dir))
            if self.launchers is not None:
                with contextlib.suppress(OSError):  # without them the worker builds its own launchers
                    self.launchers.seed(Path(cache_dir))
        return await self.inner.spawn(launch)

    def __getattr__(self, name: str):  # the inner spawner's statistics, fallback reason, ...
        return getattr(self.inner, name)
