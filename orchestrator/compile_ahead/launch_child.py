"""The launch compile child: runs a variant's entry point on the harness's own inputs, compiling without launching.

Run by path (`python launch_child.py REQUEST.json`) by orchestrator/compile_ahead/variants.py. Where child.py
compiles configs it is given, this one finds them: it imports the frozen harness (its `JUDGE`, an
`entry_point.JudgedEntry`, says the entry and how to draw a case's inputs) and the variant, turns Triton's JIT
into compile-without-launch (`JITFunction.run` always with `warmup=True`; `Autotuner.run` compiles every config
of its list instead of timing them), and calls the entry once per case on CPU tensors. Every compile Triton
makes is reported with the kernel's name, constexprs and options as the real launch produced them: wrapper
heuristics, grid lambdas, module constants and autotune lists need no modelling here.

Isolation, the compile-only driver, the shared-memory early stop and the ptxas log are child.py's (same order,
same layers). Events, one JSON line each on the private result channel: `ready`, `refused`, `harness_error`,
`source_error`, then per case `case`, per compile `compiled`, a `case_error` when the entry raised for another
reason than a compile, and `finished` last.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import runpy
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

# The sibling script, by path: the worker environment sets PYTHONSAFEPATH (no script directory on sys.path),
# and importing the orchestrator package would need what the worker's interpreter may not have. runpy needs
# no loader of ours; child.import_file then loads the harness and the variant.
child = SimpleNamespace(**runpy.run_path(str(Path(__file__).resolve().with_name("child.py")),
                                         run_name="tlx_compile_ahead_child"))
Events, SharedOverLimit, clip = child.Events, child.SharedOverLimit, child.clip
resource_usage = child.resource_usage


def scalar(value: Any) -> Any:
    """A constexpr value as JSON: numbers, bools, strings and None as they are, anything else (a dtype) by str."""
    value = getattr(value, "value", value)  # tl.constexpr wraps its value
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


def declared_constexprs(src: Any) -> dict[str, Any]:
    """The values of the parameters the kernel declares `tl.constexpr`; the arguments Triton specialised to
    constants (a stride equal to 1) are the launch's, not the config's, and are left out."""
    fn = src.fn
    declared = set(fn.constexprs)
    return {fn.arg_names[path[0]]: scalar(value) for path, value in src.constants.items()
            if isinstance(path, tuple) and len(path) == 1 and path[0] in declared}


class CompileFailed(Exception):
    """A compile this child reported already; the entry call that caused it ends, the case goes on."""


class Recorder:
    """Reports every compile Triton makes while the entry runs; a compile that failed is not tried twice."""

    def __init__(self, events: Events) -> None:
        self.events = events
        self.group: str | None = None  # set while an autotune list is compiled: its configs form one group
        self.numbers = itertools.count()
        self.failed: dict[str, dict[str, Any]] = {}

    def compile(self, original: Any, src: Any, target: Any = None, options: Any = None, **rest: Any) -> Any:
        constexprs = declared_constexprs(src)
        options = dict(options or {})
        kernel = src.name
        config = {"constexprs": constexprs, "num_warps": int(options.get("num_warps") or 4),
                  "num_stages": int(options.get("num_stages") or 3), "maxnreg": options.get("maxnreg")}
        key = repr((kernel, sorted(constexprs.items(), key=str), getattr(src, "signature", None), config))
        if key in self.failed:
            raise CompileFailed(self.failed[key]["message"])
        group = self.group or f"launch:{next(self.numbers)}"
        printed = io.StringIO()
        started = time.monotonic()
        fields = {"group": group, "kernel": kernel, "config": config}
        try:
            with contextlib.redirect_stdout(printed):
                compiled = original(src, target=target, options=options, **rest)
        except SharedOverLimit as stop:
            result = {"status": "shared_over_limit", "shared": stop.shared}
            self.failed[key] = {"message": str(stop)}
        except Exception as exc:  # noqa: BLE001 - a failed compile is this config's result, named by its type
            result = {"status": "compile_error", "error_type": type(exc).__name__, "message": clip(str(exc))}
            self.failed[key] = {"message": f"{type(exc).__name__}: {exc}"}
        else:
            metadata = compiled.metadata
            log = printed.getvalue()
            usage = ""
            if "registers" not in log and "cubin" in compiled.asm:
                try:
                    usage = resource_usage(compiled.asm["cubin"])
                except OSError as exc:
                    usage = f"cuobjdump failed: {exc}"
            self.events.emit("compiled", seconds=round(time.monotonic() - started, 3), status="compiled",
                             shared=metadata.shared, num_warps=metadata.num_warps, log=clip(log),
                             resource_usage=clip(usage), **fields)
            return compiled
        self.events.emit("compiled", seconds=round(time.monotonic() - started, 3), **result, **fields)
        raise CompileFailed(self.failed[key]["message"])


def compile_without_launching(recorder: Recorder) -> None:
    """Triton's JIT compiles and never launches; an autotune list is compiled config by config, each failure
    its own (as Triton's autotuner skips a config that is out of resources), never timed."""
    import triton
    import triton.compiler
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    original_compile = triton.compiler.compile

    def recorded_compile(src: Any, target: Any = None, options: Any = None, **rest: Any) -> Any:
        return recorder.compile(original_compile, src, target, options, **rest)

    triton.compiler.compile = recorded_compile  # JITFunction.create_binder imports it from here at first launch
    original_run = JITFunction.run

    def compile_only(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        return original_run(self, *args, grid=grid, warmup=True, **kwargs)

    def compile_every_config(self: Any, *args: Any, **kwargs: Any) -> None:
        self.nargs = dict(zip(self.arg_names, args, strict=False))
        outer, recorder.group = recorder.group, f"autotune:{next(recorder.numbers)}"
        try:
            for config in self.configs:
                try:
                    self.fn.run(*args, **kwargs, **config.all_kwargs())
                except CompileFailed:
                    continue
        finally:
            recorder.group = outer
            self.nargs = None

    JITFunction.run = compile_only
    Autotuner.run = compile_every_config


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    events = Events()
    started = child.start_compile_only(request, events)
    if started is None:
        return 3
    driver, statuses = started
    import torch
    import triton

    driver.get_active_torch_device = lambda: torch.device("cpu")  # a wrapper's own allocations stay on the host
    child.answer_device_queries(request["target"], request["device_properties"])  # before the variant imports
    recorder = Recorder(events)
    compile_without_launching(recorder)
    try:
        judge = getattr(child.import_file(request["harness_path"], "tlx_harness"), "JUDGE", None)
        if judge is None or not callable(getattr(judge, "make_inputs", None)):
            raise LookupError("the harness declares no JUDGE (entry_point.JudgedEntry): its inputs are unknown")
    except BaseException as exc:  # noqa: BLE001 - a harness this child cannot use leaves the GPU worker to decide
        events.emit("harness_error", error_type=type(exc).__name__, message=clip(str(exc)))
        return 2
    try:
        entry = getattr(child.import_file(request["source_path"], Path(request["source_path"]).stem), judge.entry, None)
        if not callable(entry):
            raise LookupError(f"the kernel file does not export {judge.entry}{judge.signature}")
    except BaseException as exc:  # noqa: BLE001 - whatever the module raises at import is reported, not raised
        events.emit("source_error", error_type=type(exc).__name__, message=clip(str(exc)))
        return 2
    from sandbox_worker.harness_kit import context

    context.set_command_context(seed=request["salt"], phase="build")  # what make_inputs draws its tensors from
    events.emit("ready", triton_version=triton.__version__, isolation=statuses)
    for case in request["cases"]:
        events.emit("case", case_id=str(case.get("case_id")))
        try:
            inputs = list(judge.make_inputs(case, "cpu", request["salt"]))
            if judge.outputs_are_arguments:
                outputs = judge.reference(*inputs)
                inputs += list(outputs) if isinstance(outputs, tuple | list) else [outputs]
            with contextlib.redirect_stdout(io.StringIO()):
                entry(*inputs)
        except CompileFailed:
            continue  # reported with its compile
        except Exception as exc:  # noqa: BLE001 - the case's entry failed here; the GPU worker decides
            events.emit("case_error", case_id=str(case.get("case_id")), error_type=type(exc).__name__,
                        message=clip(str(exc)))
    events.emit("finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
