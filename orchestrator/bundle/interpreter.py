"""Which Triton the workers run, against the one the orchestrator's environment holds.

Workers run `--worker-python` with an environment of their own (`orchestrator/worker/environment.py`: the
parent's PYTHONPATH does not reach them), so a Triton the user put on PYTHONPATH, or installed into another
environment, is not the one the workers import. Meta's Triton with TLX (`fbtriton`) over a host's upstream Triton
is the usual case: the orchestrator sees TLX, every worker fails with "No module named
'triton.language.extra.tlx'". Where the orchestrator's environment holds a Triton, the workers' must be the same
build and version, or the run stops before the baseline, saying which is which. An orchestrator without Triton
(workers in another environment by design) is not compared. Reading facts here imports nothing.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path
from typing import Any

TRITON_DISTRIBUTIONS = ("fbtriton", "pytorch-triton", "triton")  # the first one installed owns `triton`


def triton_facts() -> dict[str, Any] | None:
    """The orchestrator's Triton: distribution, version, location, whether TLX is there; None without one."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    location = Path(next(iter(spec.submodule_search_locations)))
    distribution, version = None, None
    for name in TRITON_DISTRIBUTIONS:  # the distribution whose files hold this very `triton` folder
        try:
            found = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if Path(str(found.locate_file("triton"))).resolve() == location.resolve():
            distribution, version = name, found.version
            break
    return {"distribution": distribution, "version": version, "path": str(location),
            "tlx": (location / "language" / "extra" / "tlx" / "__init__.py").is_file()}


def describe(facts: dict[str, Any]) -> str:
    build = facts.get("distribution") or "triton"
    return (f"{build} {facts.get('version') or '(version unknown)'} at {facts.get('path')}, "
            f"{'with' if facts.get('tlx') else 'without'} TLX")


def triton_mismatch(own: dict[str, Any] | None, worker: dict[str, Any] | None, worker_python: str) -> str | None:
    """Why the workers' Triton is not the orchestrator's (one line naming both and what to do), or None."""
    if own is None or worker is None or worker.get("error"):
        return None
    same = (own.get("distribution"), own.get("version"), bool(own.get("tlx"))) == \
        (worker.get("distribution"), worker.get("version"), bool(worker.get("tlx")))
    if same:
        return None
    return (f"the workers' interpreter {worker_python} imports {describe(worker)}, but this environment has "
            f"{describe(own)}: workers do not inherit PYTHONPATH. Install the Triton the kernel needs into the "
            "workers' interpreter (scripts/setup_env.sh --tlx for Meta's Triton with TLX) or pass --worker-python "
            "with the interpreter that has it")
