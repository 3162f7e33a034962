"""Load candidate source as a module from a real file (`@triton.jit` needs `inspect.getsource`)."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from types import ModuleType

from sandbox_worker.harness_kit.context import scratch_dir


def load_kernel_module(kernel_source: str, *, name_prefix: str = "tlx_candidate") -> ModuleType:
    """Write `kernel_source` into the scratch dir and import it under a unique module name.

    Raises SyntaxError or whatever the module raises at import; harness `build` functions turn that
    into a failed build.
    """
    digest = hashlib.sha256(kernel_source.encode()).hexdigest()[:16]
    module_name = f"{name_prefix}_{digest}"
    directory = scratch_dir() / "candidate_modules"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{module_name}.py"
    path.write_text(kernel_source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load candidate module from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module
