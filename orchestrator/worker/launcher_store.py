"""Triton launchers a run's judges built, kept for its later workers so that none builds the same one again.

Why: Triton launches a compiled kernel through a small C module (`__triton_launcher`, keyed by a hash of its
source, which depends on the kernel's argument types only) that it builds with the host's C compiler at a
process's first call of the kernel. A GPU worker built it twice, once in the candidate process and once in its
judge, and every worker of a run built the same one again (workers start with fresh Triton caches).

Trust: a launcher is loadable code, and a candidate process can write its worker's Triton cache, so a launcher is
kept only as a judge built it: in the judge's own memory, from Triton's code and the kernel's argument types,
never read back from a directory the candidate process could write (sandbox_worker/judged/kernels.py
`TrustedTritonCache.built_launchers`), and reported on the worker's protocol socket, which the candidate
process cannot reach, in its `finished` event. The orchestrator takes launchers only from a worker whose
verdicts were the judge's (in the other modes the candidate shares the worker's process), keeps the first
build of each key (a later report never replaces one), checks each path's shape and that each module is an
ELF file, and bounds their count and size. Each worker gets a copy in its own cache before it starts, as the
run's seed (`triton_seed.py`); what a candidate does to its copy reaches no other worker. Its judge captures the
copies with the seed before any candidate code runs, so both find the launcher built.
"""

from __future__ import annotations

import base64
import binascii
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from sandbox_worker.judged.kernels import LAUNCHER_PREFIX

# `<key>/__triton_launcher<EXT_SUFFIX>`: Triton's cache key (base32 or hex) and the module's file name, named as
# the judge names what it reports
LAUNCHER_PATH = re.compile(rf"[A-Za-z0-9_-]{{16,128}}/{re.escape(LAUNCHER_PREFIX)}[A-Za-z0-9_.-]{{1,64}}\.so")
MAX_LAUNCHER_BYTES = 4 << 20
MAX_LAUNCHERS = 64
ELF_MAGIC = b"\x7fELF"


class LauncherStore:
    """The run's launchers under `directory`, in Triton's cache layout."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def paths(self) -> list[str]:
        return sorted(str(path.relative_to(self.directory)) for path in self.directory.glob("*/*.so")
                      if path.is_file() and not path.is_symlink())

    def keep(self, reported: Mapping[str, str]) -> list[str]:
        """Keep the launchers a judged worker reported (base64 by path); returns the paths newly kept."""
        kept: list[str] = []
        known = set(self.paths())
        for path, encoded in sorted(reported.items()):
            if path in known or len(known) >= MAX_LAUNCHERS or not LAUNCHER_PATH.fullmatch(path):
                continue
            try:
                content = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                continue
            if not content.startswith(ELF_MAGIC) or len(content) > MAX_LAUNCHER_BYTES:
                continue
            target = self.directory / path
            target.parent.mkdir(exist_ok=True)
            partial = target.with_name(target.name + ".partial")
            partial.write_bytes(content)
            partial.rename(target)  # whole or absent: a worker seeded meanwhile never copies half of one
            known.add(path)
            kept.append(path)
        return kept

    def seed(self, cache_dir: Path) -> int:
        """Copy every kept launcher into a worker's Triton cache (copies, never links); returns how many."""
        paths = self.paths()
        for path in paths:
            target = cache_dir / path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.directory / path, target)
        return len(paths)
