#!/usr/bin/env bash
# On the GPU host: join the parts of Meta's Triton wheel (fbtriton, with TLX) found in /tmp/fb/part* and install it
# into /tmp/fbvenv, whose other packages (torch, numpy) come from the host's Python. The parts are cut here with
# `split -b 50M -d fbtriton-3.7.4-...whl part` (a device command takes at most 64 MiB of files, the tree included)
# and sent one per command to /tmp/fb/. SHA256, when given, is checked against the joined wheel.
#   usage: SHA256=<hex> bash scripts/gpu/install_fbtriton.sh   -> /tmp/fbvenv/bin/python imports triton's TLX
set -euo pipefail
name=${FBTRITON_WHEEL:-fbtriton-3.7.4-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl}
cat /tmp/fb/part* > "/tmp/fb/$name"
if [ -n "${SHA256:-}" ]; then
  echo "$SHA256  /tmp/fb/$name" | sha256sum -c --quiet || { echo "fbtriton wheel: sha256 differs"; exit 1; }
fi
host_sp=$(python3 -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
[ -x /tmp/fbvenv/bin/python ] || python3 -m venv /tmp/fbvenv
/tmp/fbvenv/bin/pip install -q --no-index --no-deps --force-reinstall "/tmp/fb/$name"
echo "$host_sp" > "$(/tmp/fbvenv/bin/python -c 'import site; print(site.getsitepackages()[0])')/host_packages.pth"
/tmp/fbvenv/bin/python -c "import torch, triton, triton.language.extra.tlx; print('torch', torch.__version__, 'triton', triton.__version__, 'TLX ok')"
