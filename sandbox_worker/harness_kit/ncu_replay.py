"""The process ncu profiles: rebuild the candidate with the frozen harness, then launch one case.

    python -m sandbox_worker.harness_kit.ncu_replay --spec /abs/artifacts/ncu_replay_spec.json

The spec (written by `ncu.collect_ncu_profile`) holds `harness_path`, `kernel_path`, `target`, `case`,
`seed`, `entry` (a harness function `entry(artifact, case)` that launches the case once), `warmup_calls`,
`profiled_calls` and `gate`. With `gate="cuda_profiler_api"` (the default) the warm-up calls, which may
compile and autotune, run before cudaProfilerStart and ncu (started with `--profile-from-start off`)
sees only the profiled calls. The harness draws its inputs from `evaluation_seed()` as in the worker.

Exit status: 0 ran, 1 the harness or candidate raised, 2 bad spec, 3 build failed, 4 entry missing, 5 profiler gate unavailable. Errors go
to stderr prefixed `[tlx-ncu-replay]` so `ncu.classify_ncu_output` can quote them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from sandbox_worker.harness_kit import context

HARNESS_MODULE = "tlx_agent_harness"  # the name the worker imports the harness under
DEFAULT_ENTRY = "run_case"
PREFIX = "[tlx-ncu-replay]"


class ReplayError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def load_spec(path: str) -> dict[str, Any]:
    try:
        spec = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReplayError(2, f"cannot read replay spec {path}: {exc}") from None
    if not isinstance(spec, dict):
        raise ReplayError(2, "replay spec must be a JSON object")
    for key in ("harness_path", "kernel_path"):
        if not isinstance(spec.get(key), str) or not Path(spec[key]).is_file():
            raise ReplayError(2, f"replay spec {key} is missing or not a file: {spec.get(key)!r}")
    if not isinstance(spec.get("case", {}), dict):
        raise ReplayError(2, "replay spec case must be an object")
    return spec


def import_harness(path: str) -> ModuleType:
    """Import the harness as the worker does: its folder on sys.path, module name `tlx_agent_harness`."""
    harness_path = Path(path).resolve()
    sys.path.insert(0, str(harness_path.parent))
    module_spec = importlib.util.spec_from_file_location(HARNESS_MODULE, harness_path)
    if module_spec is None or module_spec.loader is None:
        raise ReplayError(2, f"cannot import harness {harness_path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[HARNESS_MODULE] = module
    module_spec.loader.exec_module(module)
    return module


def build_artifact(harness: ModuleType, spec: dict[str, Any]) -> Any:
    source = Path(spec["kernel_path"]).read_text(encoding="utf-8")
    value = harness.build(source, spec.get("target") or {})
    if isinstance(value, dict) and "success" in value:
        if not value["success"]:
            raise ReplayError(3, f"harness build failed in the replay: {str(value.get('diagnostics', ''))[:500]}")
        return value.get("artifact")
    return value


def _synchronize() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()


def _profiler_gate(start: bool) -> None:
    """cudaProfilerStart/Stop through torch: the range ncu profiles under `--profile-from-start off`."""
    try:
        import torch
    except ImportError:
        raise ReplayError(5, "gate cuda_profiler_api needs torch to call cudaProfilerStart") from None
    if not torch.cuda.is_available():
        raise ReplayError(5, "gate cuda_profiler_api needs a CUDA device")
    torch.cuda.synchronize()
    if start:
        torch.cuda.profiler.start()
    else:
        torch.cuda.profiler.stop()


def replay(spec: dict[str, Any]) -> int:
    """Build, warm up, then run the profiled calls inside the gate; returns the number of calls made."""
    context.set_command_context(seed=spec.get("seed"), phase="ncu_replay")
    harness = import_harness(spec["harness_path"])
    artifact = build_artifact(harness, spec)
    entry_name = spec.get("entry") or DEFAULT_ENTRY
    entry = getattr(harness, entry_name, None)
    if not callable(entry):
        raise ReplayError(4, f"harness defines no {entry_name}(artifact, case) for the ncu replay")
    case = spec.get("case") or {}
    warmup_calls = int(spec.get("warmup_calls", 3))
    profiled_calls = int(spec.get("profiled_calls", 1))
    gated = spec.get("gate", "cuda_profiler_api") == "cuda_profiler_api"
    for _ in range(warmup_calls):
        entry(artifact, case)
    _synchronize()
    if gated:
        _profiler_gate(True)
    for _ in range(profiled_calls):
        entry(artifact, case)
    if gated:
        _profiler_gate(False)
    _synchronize()
    return warmup_calls + profiled_calls


def run_child(argv: list[str] | None, *, prog: str, description: str,
              load: Callable[[str], dict[str, Any]], run: Callable[[dict[str, Any]], int]) -> int:
    """A replay child's command line: `--spec FILE`, then `run(load(FILE))`; exit status and error lines as above."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--spec", required=True, help="absolute path of the replay spec JSON")
    args = parser.parse_args(argv)
    try:
        calls = run(load(args.spec))
    except ReplayError as exc:
        sys.stderr.write(f"{PREFIX} error: {exc}\n")
        return exc.status
    except Exception as exc:  # noqa: BLE001 - the harness or candidate failed; say so in one quotable line
        traceback.print_exc()
        sys.stderr.write(f"{PREFIX} error: replay raised {type(exc).__name__}: {str(exc)[:500]}\n")
        return 1
    sys.stderr.write(f"{PREFIX} ran {calls} calls\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_child(argv, prog="ncu_replay", description=__doc__.splitlines()[0], load=load_spec, run=replay)


if __name__ == "__main__":
    raise SystemExit(main())
