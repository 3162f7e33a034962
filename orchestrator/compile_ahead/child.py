"""The compile child: imports one candidate file and compiles its kernel for an explicit target, config by config.

Run by path (`python child.py REQUEST.json`) by orchestrator/compile_ahead/compile.py, never imported by the
orchestrator: the candidate's module code runs here. It uses the standard library, Triton and the worker's
isolation layers (sandbox_worker/isolation/) only, and prints JSON lines that the parent validates.

Order matters. The isolation layers come first, while the process is single-threaded (the network namespace
needs that): rlimits, a private network namespace (else a seccomp deny of inet sockets; with neither the child
refuses), writes confined to the scratch directory, the seccomp escape filter. Then GPUs are hidden and a
compile-only Triton driver is made active, so module code that asks the driver for the target or the device's
properties (as the Triton tutorials do at import) gets the target's answers and no CUDA context is ever made.
Then the candidate is imported, and each config compiled with `triton.compile(ASTSource(...), target=...)`.

Events, one JSON object per line on a private copy of stdout (fd 1 itself is pointed at stderr, so prints of
Triton or of the candidate cannot interleave): `ready`, `refused`, `source_error`, then per config `start`
and `result`, and `finished` last.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MESSAGE_LIMIT = 6000  # characters of an error or log kept; the head names the error, the tail the ptxas lines


def clip(text: str, limit: int = MESSAGE_LIMIT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters left out ...]\n{text[-half:]}"


class Events:
    """The result channel: a duplicate of the original stdout, one flushed JSON line per event."""

    def __init__(self) -> None:
        self.stream = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
        os.dup2(2, 1)

    def emit(self, event: str, **fields: Any) -> None:
        self.stream.write(json.dumps({"event": event, **fields}) + "\n")
        self.stream.flush()


def isolate(config: dict[str, Any]) -> dict[str, str]:
    """Every layer the compile needs, in the worker's order; the PID namespace is left out (the parent ends
    the child's process group, and nothing here outlives a compile)."""
    from sandbox_worker.isolation import layers, rlimits

    return {"stdin": layers.check_stdin(), "rlimits": rlimits.apply_rlimits(config),
            "network": layers.isolate_network(config), "filesystem": layers.confine_writes(config),
            "seccomp": layers.deny_escape_syscalls()}


class DeviceProperties(dict):
    """The device properties module code may read; a key the caller did not give says so by name."""

    def __missing__(self, key: str) -> Any:
        raise KeyError(f"{key!r} is not known to the compile-only driver (compile ahead runs without a GPU)")


def compile_only_driver(target: Any, properties: dict[str, Any]) -> Any:
    """A stand-in for Triton's active driver that answers from the target and never touches a device."""

    class Utils:
        @staticmethod
        def get_device_properties(device: int = 0) -> dict[str, Any]:
            return DeviceProperties(properties)

    class CompileOnlyDriver:
        utils = Utils()

        @staticmethod
        def is_active() -> bool:
            return False

        def get_current_target(self) -> Any:
            return target

        def get_current_device(self) -> int:
            return 0

        def set_current_device(self, device: int) -> None:
            return None

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

        def get_active_torch_device(self) -> Any:
            import torch  # a device object only; CUDA is not initialised by making one

            return torch.device("cuda", 0)

        def get_device_interface(self) -> Any:
            raise RuntimeError("compile-only driver: no device to run on")

        def get_benchmarker(self) -> Any:
            raise RuntimeError("compile-only driver: no device to run on")

    return CompileOnlyDriver()


def import_file(path: str | Path, module_name: str) -> Any:
    """The module at `path`, registered as `module_name` (dataclasses and pickling look modules up there)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def load_kernel(path: str, name: str) -> Any:
    """The module's `@triton.jit` function `name`, unwrapped from `triton.autotune` / `triton.heuristics`."""
    import triton

    module = import_file(path, Path(path).stem)
    kernel = getattr(module, name, None)
    if kernel is None:
        raise LookupError(f"the kernel file defines no {name!r}")
    while not isinstance(kernel, triton.runtime.JITFunction) and hasattr(kernel, "fn"):
        kernel = kernel.fn
    if not isinstance(kernel, triton.runtime.JITFunction):
        raise TypeError(f"{name!r} is a {type(kernel).__name__}, not a @triton.jit function")
    return kernel


class SharedOverLimit(Exception):
    """Raised after shared memory is allocated (the LLVM IR stage), so PTX and ptxas are skipped."""

    def __init__(self, shared: int) -> None:
        super().__init__(f"shared memory {shared} B")
        self.shared = shared


def install_shared_memory_stop(limit: int | None) -> None:
    """Stop a compile as soon as its shared memory is known to exceed `limit`, through Triton's stage hook.

    Triton 3.9 also calls the hook with no arguments for a cache-key suffix; 3.6 only with the stages."""
    import triton

    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    if limit is None or runtime is None or not hasattr(runtime, "add_stages_inspection_hook"):
        return

    def hook(*args: Any) -> Any:
        if not args:
            return "compile-ahead-shared-stop", "compile-ahead-shared-stop"
        stages = args[1]
        lower = stages.get("llir")
        if lower is None:
            return None

        def llir_then_check(src: Any, metadata: dict[str, Any]) -> Any:
            result = lower(src, metadata)
            shared = metadata.get("shared")
            if isinstance(shared, int) and shared > limit:
                raise SharedOverLimit(shared)
            return result

        stages["llir"] = llir_then_check
        return None

    runtime.add_stages_inspection_hook = hook


def resource_usage(cubin: bytes) -> str:
    """`cuobjdump --dump-resource-usage` of the cubin: registers and stack when no ptxas log was printed."""
    import triton

    tool = triton.knobs.nvidia.cuobjdump.path
    with tempfile.NamedTemporaryFile(suffix=".cubin") as handle:
        handle.write(cubin)
        handle.flush()
        completed = subprocess.run([tool, "--dump-resource-usage", handle.name], capture_output=True, text=True,
                                   timeout=60, check=False)
    return completed.stdout


def compile_config(kernel: Any, request: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """One config: the metadata Triton records, the ptxas log, or the error, never raised."""
    import triton
    from triton.backends.compiler import GPUTarget

    signature = dict(request["types"])
    constexprs = {**request["constexprs"], **config["constexprs"]}
    signature.update(dict.fromkeys(constexprs, "constexpr"))
    missing = [name for name in kernel.arg_names if name not in signature]
    extra = sorted(set(signature) - set(kernel.arg_names))
    if missing or extra:  # the file's kernel is not the one the signature was taken from: not this config's fault
        return {"status": "signature_error", "error_type": "SignatureError",
                "message": f"the kernel's parameters differ from the signature: missing {', '.join(missing) or '-'}; "
                           f"unknown {', '.join(extra) or '-'}"}
    attrs = {(kernel.arg_names.index(name),): [["tt.divisibility", 16]]
             for name in request["divisible_by_16"] if signature.get(name) != "constexpr"}
    options = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    if config.get("maxnreg") is not None:
        options["maxnreg"] = config["maxnreg"]
    target = request["target"]
    printed = io.StringIO()
    try:
        source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
        with contextlib.redirect_stdout(printed):
            compiled = triton.compile(source, target=GPUTarget(target["backend"], target["arch"],
                                                               target["warp_size"]), options=options)
    except SharedOverLimit as stop:
        return {"status": "shared_over_limit", "shared": stop.shared}
    except Exception as exc:  # noqa: BLE001 - a failed compile is this config's result, named by its type
        return {"status": "compile_error", "error_type": type(exc).__name__, "message": clip(str(exc))}
    metadata = compiled.metadata
    log = printed.getvalue()
    usage = ""
    if "registers" not in log and "cubin" in compiled.asm:
        try:
            usage = resource_usage(compiled.asm["cubin"])
        except (OSError, subprocess.SubprocessError) as exc:
            usage = f"cuobjdump failed: {exc}"
    return {"status": "compiled", "shared": metadata.shared, "num_warps": metadata.num_warps,
            "log": clip(log), "resource_usage": clip(usage)}


class TorchDeviceProperties:
    """What `torch.cuda.get_device_properties` returns in a compile child: the target's figures. Any other
    attribute raises RuntimeError, never AttributeError (which would call the variant broken): a question only a
    GPU answers leaves the variant to a GPU worker, as without these figures."""

    def __init__(self, figures: dict[str, Any]) -> None:
        self.__dict__.update(figures)

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"torch.cuda.get_device_properties(...).{name} is not known to compile ahead, which runs "
                           "without a GPU")


def answer_device_queries(target: dict[str, Any], properties: dict[str, Any]) -> None:
    """`torch.cuda.get_device_properties` answered from the target where its SM count is known (a persistent
    kernel's wrapper or hook sizes its grid by `multi_processor_count`); without it torch raises as it would."""
    count = properties.get("multiprocessor_count")
    if not count:
        return
    import torch

    arch = int(target["arch"])
    figures = {"multi_processor_count": int(count), "major": arch // 10, "minor": arch % 10,
               "name": f"compile ahead for sm_{arch}", "warp_size": int(target.get("warp_size", 32)),
               "shared_memory_per_block_optin": properties.get("max_shared_mem")}
    torch.cuda.get_device_properties = lambda device=None: TorchDeviceProperties(figures)


def start_compile_only(request: dict[str, Any], events: Events) -> tuple[Any, dict[str, str]] | None:
    """Isolate this child, then make Triton compile for the request's target without a GPU: the compile-only
    driver (active) and the isolation statuses, or None (after a `refused` event) without network isolation."""
    statuses = isolate(request["isolation"])
    if statuses["network"].startswith("unavailable"):
        events.emit("refused", reason=f"no network isolation: {statuses['network']}", isolation=statuses)
        return None
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # belt and braces: even the candidate's own torch.cuda sees no GPU
    os.environ["TRITON_DUMP_PTXAS_LOG"] = "1"  # ptxas -v lines (registers, spills) are printed, and captured
    os.environ["TRITON_ALWAYS_COMPILE"] = "1"  # a cache hit would skip ptxas and its log
    import triton
    from triton.backends.compiler import GPUTarget

    target = request["target"]
    driver = compile_only_driver(GPUTarget(target["backend"], target["arch"], target["warp_size"]),
                                 request["device_properties"])
    triton.runtime.driver.set_active(driver)
    install_shared_memory_stop(request.get("stop_above_shared_bytes"))
    return driver, statuses


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    events = Events()
    started = start_compile_only(request, events)
    if started is None:
        return 3
    _, statuses = started
    import triton

    try:
        kernel = load_kernel(request["source_path"], request["kernel_name"])
    except BaseException as exc:  # noqa: BLE001 - whatever the module raises at import is reported, not raised
        events.emit("source_error", error_type=type(exc).__name__, message=clip(str(exc)))
        return 2
    events.emit("ready", triton_version=triton.__version__, isolation=statuses)
    for config in request["configs"]:
        events.emit("start", index=config["index"])
        started = time.monotonic()
        result = compile_config(kernel, request, config)
        events.emit("result", index=config["index"], seconds=round(time.monotonic() - started, 3), **result)
    events.emit("finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
