#!/usr/bin/env bash
# Create .venv if missing, install the local CPU torch wheel when no torch is importable, then the project
# with its dev extras. Idempotent: a stamp of pyproject.toml skips the reinstall when nothing changed.
#
#   scripts/setup_env.sh                      upstream Triton (a dependency of the project)
#   scripts/setup_env.sh --tlx                Meta's Triton with TLX (PyPI `fbtriton`, 3.7.4) in place of it
#   scripts/setup_env.sh --tlx --tlx-version V | --tlx-wheel FILE   another version, or a wheel on disk
#
# fbtriton is published for CPython 3.12 only: --tlx refuses any other interpreter before changing anything
# (PYTHON=python3.12 picks the one that creates .venv). Once installed, TLX stays: a later run of this script
# puts fbtriton back if a reinstall of the project brought upstream Triton in (.venv/.tlx-agent-tlx records it;
# remove .venv to go back to upstream Triton).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() { sed -n '5,7p' "${BASH_SOURCE[0]}" | sed 's/^#  *//'; }
tlx="" tlx_version="3.7.4" tlx_wheel=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tlx) tlx=1 ;;
    --tlx-version|--tlx-wheel)
      if [ $# -lt 2 ] || [ -z "$2" ] || [ "${2#--}" != "$2" ]; then
        echo "[setup] error: $1 needs a value" >&2; usage >&2; exit 2
      fi
      if [ "$1" = --tlx-version ]; then tlx_version="$2"; else tlx_wheel="$2"; fi
      tlx=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "[setup] error: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
cd "$root"
python_bin="${PYTHON:-python3}"
if [ -n "$tlx_wheel" ] && [ ! -f "$tlx_wheel" ]; then
  echo "[setup] error: --tlx-wheel $tlx_wheel does not exist; pass the path of an fbtriton .whl" >&2
  exit 1
fi
if [ -n "$tlx" ]; then
  # Before anything is created or installed: the interpreter .venv has, or the one that would create it.
  if [ -x .venv/bin/python ]; then interpreter=.venv/bin/python where=".venv"; else interpreter="$python_bin" where="$python_bin"; fi
  version="$("$interpreter" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || echo unknown)"
  if [ "${version%.*}" != "3.12" ]; then
    if [ "$where" = .venv ]; then
      fix="remove .venv, then run PYTHON=python3.12 scripts/setup_env.sh --tlx"
    else
      fix="run PYTHON=python3.12 scripts/setup_env.sh --tlx (any CPython 3.12 interpreter)"
    fi
    echo "[setup] error: Meta's Triton with TLX (fbtriton) is published for CPython 3.12 only, and $where runs Python $version: $fix" >&2
    exit 1
  fi
fi
# pip warns once per package about find-links folders this machine's pip config names but does not have;
# they say nothing about this project, so they are filtered (every other line of pip's output is kept).
quiet_pip() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
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
marker=".venv/.tlx-agent-tlx"
if [ -n "$tlx" ]; then
  if [ -n "$tlx_wheel" ]; then tlx_wheel="$(cd "$(dirname "$tlx_wheel")" && pwd)/$(basename "$tlx_wheel")"; echo "$tlx_wheel"; else echo "fbtriton==$tlx_version"; fi > "$marker"
fi
if [ -f "$marker" ] && .venv/bin/python -c "import importlib.metadata as m; m.distribution('triton')" >/dev/null 2>&1; then
  # upstream Triton and fbtriton both own the `triton` package: remove the one, then (re)install the other whole
  spec="$(cat "$marker")"
  echo "[setup] installing Meta's Triton with TLX ($spec) in place of upstream Triton" >&2
  quiet_pip .venv/bin/python -m pip uninstall -q -y triton >&2
  quiet_pip .venv/bin/python -m pip install -q --no-deps --force-reinstall "$spec" >&2
fi
if [ -f "$marker" ]; then
  .venv/bin/python -c "import triton, triton.language.extra.tlx; print('[setup] triton', triton.__version__, '(fbtriton) with TLX')" >&2
fi
