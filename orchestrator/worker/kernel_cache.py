"""The run's compiled kernels, kept per source: a worker starts with what earlier workers of its exact source
compiled, so only the first worker of a source pays Triton's compile.

Why per source and never shared wider: a worker's Triton cache is writable by the candidate's code, which can
compute Triton's cache key of any kernel (the incumbent's included) and plant a slow binary there. Kept per exact
source digest, filled only from workers that evaluated that source alone, whatever a source plants reaches only
its own later workers: the incumbent's and the baseline's measurements never read a file another source's process
could have written. Compile ahead compiles one variant per child and keeps what that child compiled under the
variant's digest (orchestrator/compile_ahead/variants.py); screening (a family of sources in one process) feeds no
source's cache.

What is kept is Triton's kernel groups only (`<key>/__grp__<name>.json` and the stage files it lists: IR, PTX,
binary, metadata), copied: never a loadable module (`.so`; the run's driver module comes from its own seed,
`triton_seed.py`), never a link, never a group whose files are missing or of an unknown kind. A group's file
names absolute paths of the worker that wrote it; it is written anew for the cache the copy lands in. The judge
vouches only for loadable modules found before the candidate ran (sandbox_worker/judged/kernels.py), so kernel
groups planted here are never code it loads.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

GROUP_PREFIX = "__grp__"
# Triton's stage files of a compiled kernel (NVIDIA, AMD) and its metadata; anything else keeps its group out
STAGE_SUFFIXES = frozenset({".json", ".source", ".ttir", ".ttgir", ".llir", ".ptx", ".cubin", ".amdgcn", ".hsaco"})
SOURCE_LIMIT_BYTES = 512 << 20  # per source: a 300-configuration autotune list of large GEMMs fits
RUN_LIMIT_BYTES = 4 << 30


@dataclass(frozen=True)
class KernelGroup:
    key: str  # the directory under the cache root (Triton's hash of the kernel and its options)
    group_file: str  # `__grp__<name>.json`
    members: tuple[str, ...]  # the file names the group lists, each in the key's directory


def complete_groups(cache_dir: Path) -> list[KernelGroup]:
    """The kernel groups under `cache_dir` that may be kept: regular files only, every member present in the
    group's own directory and of a known stage kind."""
    groups: list[KernelGroup] = []
    if not cache_dir.is_dir() or cache_dir.is_symlink():
        return groups
    for key_dir in sorted(cache_dir.iterdir()):
        if key_dir.is_symlink() or not key_dir.is_dir():
            continue
        for group_path in sorted(key_dir.glob(f"{GROUP_PREFIX}*.json")):
            group = _group(key_dir, group_path)
            if group is not None:
                groups.append(group)
    return groups


def _group(key_dir: Path, group_path: Path) -> KernelGroup | None:
    if group_path.is_symlink() or not group_path.is_file():
        return None
    try:
        children = json.loads(group_path.read_text(encoding="utf-8")).get("child_paths")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(children, dict) or not children:
        return None
    members: list[str] = []
    for name, path in children.items():
        if not isinstance(name, str) or not isinstance(path, str) or Path(path).name != name:
            return None
        member = key_dir / name
        if name.startswith(GROUP_PREFIX) or Path(name).suffix not in STAGE_SUFFIXES or ".so" in Path(name).suffixes \
                or member.is_symlink() or not member.is_file():
            return None
        members.append(name)
    return KernelGroup(key=key_dir.name, group_file=group_path.name, members=tuple(sorted(members)))


def _read_member(path: Path) -> bytes:
    if path.is_symlink():
        raise OSError(f"{path} is a link")
    return path.read_bytes()


class SourceKernelCache:
    """The run's kept kernel groups, one directory per source digest under `root`. What was kept is known by
    content in this object's memory (`manifest`): a group whose files on disk differ from what was kept (another
    process wrote there, as it could with isolation off) is never copied into a worker."""

    def __init__(self, root: Path, *, source_limit_bytes: int = SOURCE_LIMIT_BYTES,
                 run_limit_bytes: int = RUN_LIMIT_BYTES) -> None:
        self.root = root
        self.source_limit_bytes = source_limit_bytes
        self.run_limit_bytes = run_limit_bytes
        # source digest -> (key, group file) -> member name -> sha256 of what was kept
        self.manifest: dict[str, dict[tuple[str, str], dict[str, str]]] = {}
        self.kept_bytes: dict[str, int] = {}

    def _directory(self, digest: str) -> Path:
        if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise ValueError(f"not a source digest: {digest!r}")
        return self.root / digest

    def fill(self, digest: str, worker_cache: Path) -> int:
        """Copy the groups kept for `digest` into a worker's Triton cache before it starts; how many."""
        directory = self._directory(digest)
        filled = 0
        for (key, group_file), members in self.manifest.get(digest, {}).items():
            try:
                contents = {name: _read_member(directory / key / name) for name in members}
            except OSError:
                continue
            if any(hashlib.sha256(content).hexdigest() != members[name] for name, content in contents.items()):
                continue
            target = worker_cache / key
            target.mkdir(parents=True, exist_ok=True)
            for name, content in contents.items():
                (target / name).write_bytes(content)
            paths = {name: str(target / name) for name in members}
            (target / group_file).write_text(json.dumps({"child_paths": paths}), encoding="utf-8")
            filled += 1
        return filled

    def keep(self, digest: str, worker_cache: Path) -> int:
        """After a worker that evaluated `digest` alone has ended: keep the groups it compiled that are not
        kept yet, within the limits; how many were added."""
        directory = self._directory(digest)
        known = self.manifest.setdefault(digest, {})
        added = 0
        for group in complete_groups(worker_cache):
            if (group.key, group.group_file) in known:
                continue
            try:
                contents = {name: _read_member(worker_cache / group.key / name) for name in group.members}
            except OSError:
                continue
            size = sum(len(content) for content in contents.values())
            kept = self.kept_bytes.get(digest, 0)
            if kept + size > self.source_limit_bytes or sum(self.kept_bytes.values()) + size > self.run_limit_bytes:
                break
            (directory / group.key).mkdir(parents=True, exist_ok=True)
            for name, content in contents.items():
                (directory / group.key / name).write_bytes(content)
            known[(group.key, group.group_file)] = {name: hashlib.sha256(content).hexdigest()
                                                    for name, content in contents.items()}
            self.kept_bytes[digest] = kept + size
            added += 1
        return added
