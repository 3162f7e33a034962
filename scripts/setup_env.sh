#!/usr/bin/env bash
# Create .venv if missing, install the local CPU torch wheel when no torch is importable, then the project
# with its dev extras. Idempotent: a stamp of pyproject.toml skips the reinstall when nothing changed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# pip warns once per package about find-links folders this machine's pip config names but does not have;
# they say nothing about this project, so they are filtered (every other line of pip's output is kept).
quiet_pip() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
python_bin="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $("$python_bin" --version 2>&1)" >&2
  "$python_bin" -m venv .venv
  quiet_pip .venv/bin/python -m pip install -q --upgrade pip >&2
fi
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  # The pinned CPU build installs from local disk; an unpinned torch would pull a multi-GB CUDA build.
  echo "[setup] installing torch==2.13.0 (CPU build)" >&2
  quiet_pip .venv/bin/python -m pip install -q "torch==2.13.0" >&2
fi
stamp=".venv/.tlx-agent-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || ! .venv/bin/python -c "import orchestrator, trio, pydantic, triton" >/dev/null 2>&1; then
  echo "[setup] installing tlx-agent and its dev extras into .venv" >&2
  # setuptools' editable build prints a boxed BuildBackendWarning about package-named folders (ours are the
  # packages themselves); Python warnings are off for this one install, pip's own errors still show
  PYTHONWARNINGS=ignore quiet_pip .venv/bin/python -m pip install -q -e ".[dev]" >&2
  echo "$want" > "$stamp"
fi
