"""`tlx-agent doctor`, beyond the sandbox: the tools a run needs, each found or not, with a fix where it fails.

torch, Triton (its version, its build: upstream `triton`, Meta's `fbtriton` or PyTorch's `pytorch-triton`;
whether `triton.language.extra.tlx` imports), Proton and the CUDA device are what the *workers* import, so they
are asked of the worker interpreter (`--worker-python`) in a child process, as a worker would import them;
`ncu`, `codex` and `claude` are programs the run starts from PATH, asked for their version here. Nothing is
installed or changed: each check says what it found, and where it found nothing, what to do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from protocol.commands import ToolCheck

CHILD_TIMEOUT_SECONDS = 120.0  # importing torch and triton and creating a CUDA context can take a while
VERSION_TIMEOUT_SECONDS = 20.0
TLX_WHEEL = "fbtriton"  # Meta's Triton build, the one with TLX (PyPI, cp312 only)

# Runs in the worker interpreter: the standard library, then each import in its own try, one JSON line out.
PROBE_SOURCE = r'''
import importlib, importlib.metadata as md, json, sys
out = {"python": sys.version.split()[0], "executable": sys.executable}
def attempt(name, fn):
    try:
        out[name] = fn()
    except BaseException as exc:
        out[name] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
def torch_facts():
    import torch
    facts = {"version": torch.__version__, "cuda_build": torch.version.cuda}
    facts["cuda_available"] = bool(torch.cuda.is_available())
    if facts["cuda_available"]:
        index = torch.cuda.current_device()
        facts["device"] = torch.cuda.get_device_name(index)
        facts["capability"] = list(torch.cuda.get_device_capability(index))
        facts["device_count"] = torch.cuda.device_count()
    return facts
def triton_facts():
    import triton
    owners = md.packages_distributions().get("triton", [])
    return {"version": getattr(triton, "__version__", None), "path": triton.__file__, "distributions": owners,
            "distribution_versions": {name: md.version(name) for name in owners}}
def module(name):
    def load():
        importlib.import_module(name)
        return {"imported": True}
    return load
attempt("torch", torch_facts)
attempt("triton", triton_facts)
attempt("tlx", module("triton.language.extra.tlx"))
attempt("proton", module("triton.profiler"))
print(json.dumps(out))
'''

def _child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What a worker sees that matters to these imports (CUDA devices, library paths), never credentials."""
    keep = ("PATH", "HOME", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "PYTHONPATH",
            "TRITON_HOME", "TRITON_CACHE_DIR", "LANG", "LC_ALL")
    return {name: environ[name] for name in keep if name in environ}


def probe_worker_python(python: str, environ: Mapping[str, str] | None = None,
                        timeout: float = CHILD_TIMEOUT_SECONDS) -> dict[str, Any]:
    """The facts the worker interpreter reports; `{"error": ...}` when it cannot say (missing, crashed, silent)."""
    try:
        completed = subprocess.run([python, "-c", PROBE_SOURCE], capture_output=True, text=True, timeout=timeout,
                                   stdin=subprocess.DEVNULL, env=_child_environment(environ or os.environ),
                                   check=False)
    except FileNotFoundError:
        return {"error": f"{python} does not exist"}
    except PermissionError:
        return {"error": f"{python} is not executable"}
    except subprocess.TimeoutExpired:
        return {"error": f"{python} gave no answer within {timeout:.0f} s"}
    lines = [line for line in completed.stdout.splitlines() if line.strip()]
    try:
        facts = json.loads(lines[-1]) if lines else None
    except ValueError:
        facts = None
    if not isinstance(facts, dict):
        tail = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"{python} exited {completed.returncode} without a report: {tail[:300]}"}
    return facts


def _failed(section: Any) -> str | None:
    return section.get("error") if isinstance(section, dict) and "error" in section else None


def python_checks(facts: Mapping[str, Any], python: str) -> list[ToolCheck]:
    """torch, Triton, TLX, Proton and the CUDA device from the worker interpreter's report."""
    if "error" in facts:
        fix = f"pass --worker-python with an interpreter that exists and imports torch (now: {python})"
        return [ToolCheck(name=name, status="missing", detail=f"not asked: {facts['error']}", fix=fix)
                for name in ("torch", "triton", "tlx", "proton", "cuda_device")]
    checks = [_torch_check(facts.get("torch"), facts.get("python", "?")), _triton_check(facts.get("triton")),
              _tlx_check(facts.get("tlx"), facts.get("triton"), facts.get("python", "?")),
              _proton_check(facts.get("proton")), _device_check(facts.get("torch"))]
    return checks


def _torch_check(torch: Any, python_version: str) -> ToolCheck:
    error = _failed(torch)
    if error or not isinstance(torch, dict):
        return ToolCheck(name="torch", status="missing", detail=f"not importable: {error}",
                         fix="install PyTorch into the worker interpreter (pip install torch, or the CUDA build "
                             "from pytorch.org for your driver)")
    build = f"CUDA {torch['cuda_build']}" if torch.get("cuda_build") else "CPU-only build"
    return ToolCheck(name="torch", status="ok", detail=f"torch {torch['version']} ({build}), python {python_version}",
                     facts=torch)


def triton_build(triton: Mapping[str, Any]) -> str:
    """Which distribution installed the `triton` package: Meta's (fbtriton), PyTorch's or upstream."""
    owners = triton.get("distributions") or []
    if TLX_WHEEL in owners:
        return "Meta's fbtriton"
    if "pytorch-triton" in owners:
        return "PyTorch's pytorch-triton"
    if "triton" in owners:
        return "upstream triton"
    return "unknown distribution (not installed by pip: a source checkout or PYTHONPATH)"


def _triton_check(triton: Any) -> ToolCheck:
    error = _failed(triton)
    if error or not isinstance(triton, dict):
        return ToolCheck(name="triton", status="missing", detail=f"not importable: {error}",
                         fix="pip install triton (or scripts/setup_env.sh --tlx for Meta's build with TLX)")
    return ToolCheck(name="triton", status="ok",
                     detail=f"triton {triton.get('version')} ({triton_build(triton)}) at {triton.get('path')}",
                     facts=triton)


def _tlx_check(tlx: Any, triton: Any, python_version: str) -> ToolCheck:
    if not _failed(tlx) and isinstance(tlx, dict):
        return ToolCheck(name="tlx", status="ok", detail="triton.language.extra.tlx imports")
    why = _failed(tlx) or "not asked"
    where = triton_build(triton) if isinstance(triton, dict) and not _failed(triton) else "no Triton"
    fix = (f"TLX ships in Meta's Triton ({TLX_WHEEL}, PyPI wheel for CPython 3.12 only): scripts/setup_env.sh --tlx "
           "puts it in .venv in place of upstream Triton")
    if not python_version.startswith("3.12"):
        fix += f"; this interpreter is Python {python_version}, so use a 3.12 one (--worker-python)"
    return ToolCheck(name="tlx", status="warning",
                     detail=f"TLX kernels cannot run: {where} has no triton.language.extra.tlx ({why})", fix=fix)


def _proton_check(proton: Any) -> ToolCheck:
    if not _failed(proton) and isinstance(proton, dict):
        return ToolCheck(name="proton", status="ok", detail="triton.profiler (Proton) imports")
    return ToolCheck(name="proton", status="warning", detail=f"Proton not importable: {_failed(proton)}",
                     fix="Proton comes with Triton builds that include it (upstream triton wheels do); without it "
                         "profiles have no launch attribution: run with --no-profile, or install such a build")


def _device_check(torch: Any) -> ToolCheck:
    if not isinstance(torch, dict) or _failed(torch):
        return ToolCheck(name="cuda_device", status="missing", detail="no torch to ask",
                         fix="install torch first (see the torch check)")
    if not torch.get("cuda_build"):
        return ToolCheck(name="cuda_device", status="warning",
                         detail="no GPU: torch is a CPU-only build; GPU targets cannot run, CPU-interpreter targets "
                                "(TRITON_INTERPRET=1) can",
                         fix="install a CUDA build of torch (pytorch.org) to run GPU targets")
    if not torch.get("cuda_available"):
        return ToolCheck(name="cuda_device", status="warning",
                         detail=f"no GPU visible to torch {torch.get('version')} (CUDA {torch.get('cuda_build')}): "
                                "GPU targets cannot run",
                         fix="check nvidia-smi, the driver, and CUDA_VISIBLE_DEVICES")
    major, minor = torch.get("capability") or (None, None)
    return ToolCheck(name="cuda_device", status="ok",
                     detail=f"{torch.get('device')}, compute capability {major}.{minor} (sm_{major}{minor}), "
                            f"{torch.get('device_count')} visible", facts={"device": torch.get("device"),
                                                                          "capability": [major, minor]})


def program_version(path: str, arguments: Sequence[str] = ("--version",),
                    timeout: float = VERSION_TIMEOUT_SECONDS) -> str | None:
    """The last line a program prints that names a version, or None when it cannot say."""
    try:
        completed = subprocess.run([path, *arguments], capture_output=True, text=True, timeout=timeout,
                                   stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line.strip() for line in (completed.stdout + "\n" + completed.stderr).splitlines() if line.strip()]
    named = [line for line in lines if any(ch.isdigit() for ch in line)]
    return (named or lines or [None])[-1] if completed.returncode == 0 else None


PROGRAMS = {
    "ncu": ("native GPU profiles (NVIDIA Nsight Compute) and the profile veto",
            "install Nsight Compute (part of the CUDA toolkit) and put ncu on PATH, or run with --no-profile"),
    "codex": ("the codex provider (--provider codex)",
              "npm install -g @openai/codex, then `codex login`; or pick another --provider"),
    "claude": ("the claude provider (--provider claude)",
               "npm install -g @anthropic-ai/claude-code, then `claude login`; or pick another --provider"),
}


def program_check(name: str, path_variable: str | None = None) -> ToolCheck:
    purpose, fix = PROGRAMS[name]
    found = shutil.which(name, path=path_variable)
    if found is None:
        return ToolCheck(name=name, status="missing", detail=f"not on PATH; needed for {purpose}", fix=fix)
    version = program_version(found)
    if version is None:
        return ToolCheck(name=name, status="warning", detail=f"{found} does not answer `{name} --version`",
                         fix=f"check that {found} runs; {fix}", facts={"path": found})
    return ToolCheck(name=name, status="ok", detail=f"{found}: {version}", facts={"path": found, "version": version})


def toolchain_checks(python: str, environ: Mapping[str, str] | None = None) -> list[ToolCheck]:
    """Every check, in the order a run needs them."""
    environ = os.environ if environ is None else environ
    checks = python_checks(probe_worker_python(python, environ), python)
    return checks + [program_check(name, environ.get("PATH")) for name in PROGRAMS]


def format_checks(checks: Sequence[ToolCheck]) -> str:
    width = max((len(check.name) for check in checks), default=0)
    lines = ["tools:"]
    for check in checks:
        lines.append(f"  {check.name:<{width}}  {check.status:<7}  {check.detail}")
        if check.fix and check.status != "ok":
            lines.append(f"  {'':<{width}}  {'':<7}  fix: {check.fix}")
    return "\n".join(lines)
