"""Run by tests/autotune/test_guard.py in a subprocess with TRITON_INTERPRET=1: the guard on a real autotuned
kernel in Triton's interpreter, one scenario per call, its observations as one JSON document on stdout.

    python guard_child.py SCENARIO KERNEL_FILE [PINS_JSON]
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sandbox_worker import autotune_guard  # noqa: E402


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def call(module, n: int) -> bool:
    import torch

    x, y = torch.rand(n), torch.rand(n)
    return bool(torch.equal(module.vector_add(x, y), x + y))


def main() -> None:
    scenario, kernel = sys.argv[1], sys.argv[2]
    events: list[dict] = []
    report: dict = {}
    if scenario == "tune":  # two keys; the kernel also loaded before (a harness's reference) and after them
        guard = autotune_guard.install({"mode": "tune"}, interpreter=True, on_progress=events.append)
        first, early = load(kernel, "first"), load(kernel, "early")
        guard.case_id = "a"
        report["correct"] = [call(first, 300), call(early, 300), call(first, 300)]
        guard.case_id = "b"
        report["correct"] += [call(first, 129), call(early, 129)]
        second = load(kernel, "second")
        guard.case_id = "c"
        report["correct"].append(call(second, 300))
        report["choices"] = guard.take_choices()
    else:  # "pin": the pins given, then calls of the sizes asked for
        pins = json.loads(sys.argv[3])
        guard = autotune_guard.install({"mode": "pin", "pins": pins}, interpreter=True, on_progress=events.append)
        module = load(kernel, "pinned")
        report["calls"] = []
        for n in json.loads(sys.argv[4]):
            try:
                report["calls"].append({"n": n, "correct": call(module, n)})
            except autotune_guard.AutotuneRefused as exc:
                report["calls"].append({"n": n, "refused": str(exc)})
    report["activity"] = guard.activity()
    report["progress"] = events
    print(json.dumps(report))


if __name__ == "__main__":
    main()
