"""The compiled kernels a GPU judge replays, loaded in its own CUDA context from the payloads a record ships.

A payload (binary, metadata, signature) comes from the candidate process and is hostile data: it is written to
a private directory (`<directory>/<hash>/kernel.cubin`, `kernel.json`, `signature.json`) and loaded as a Triton
`CompiledKernel`; no candidate Python runs here. The name a kernel is known by is its binary's own
(`cubin.kernel_entries`): a payload whose metadata names a function the binary does not define is refused.

No file the candidate process could have written is loaded here after it ran. The worker's Triton cache and
temporary directories are writable by the candidate process (it compiles there), and Triton builds a kernel's
launcher (a C extension) through its file cache and loads whatever it finds under the launcher's key, which a
candidate can compute: so the judge builds and loads launchers in a fresh directory holding only files it can
vouch for (`TrustedTritonCache`, captured before any candidate code ran and kept in the judge's memory), while
the candidate process is stopped; and the ncu child gets fresh copies of the kernels and of that cache
(`KernelLibrary.export`, `TrustedTritonCache.materialize`), written from memory when it starts.
Standard library at module level; triton inside.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sandbox_worker.judged.errors import RecordRefused


class _ReplaySource:
    """What Triton's launcher reads of a kernel's source: its signature (and no constants)."""

    def __init__(self, signature: dict[str, str]) -> None:
        self.signature = signature
        self.constants: dict[Any, Any] = {}
        self.fn = SimpleNamespace(arg_names=list(signature))


LAUNCHER_PREFIX = "__triton_launcher."  # Triton's launcher module, `__triton_launcher<EXT_SUFFIX>`
TRUSTED_CACHE_LIMIT_BYTES = 256 << 20  # the driver module and launchers: a few MiB; more is not a Triton cache


class TrustedTritonCache:
    """Triton cache files the judge vouches for, held in its memory: the loadable modules the worker's cache held
    before any candidate code ran (the run's seed, the driver module), and the launchers the judge built itself."""

    def __init__(self, files: dict[str, bytes] | None = None) -> None:
        self.files: dict[str, bytes] = dict(files or {})  # path relative to the cache root -> content
        self.captured = frozenset(self.files)  # what it held before the judge built anything

    @classmethod
    def capture(cls, directory: str | os.PathLike[str] | None) -> TrustedTritonCache:
        """The regular files under `directory` (symbolic links are skipped), read now."""
        return cls(_read_tree(Path(directory)) if directory and Path(directory).is_dir() else {})

    def built_launchers(self) -> dict[str, bytes]:
        """The launchers the judge built itself (Triton's `__triton_launcher` modules it did not find): the run
        keeps them for its later workers, whose judge and candidate process then find them built
        (orchestrator/worker/launcher_store.py). Built here from a kernel's signature by Triton's own code, never
        read from a directory the candidate process could write."""
        return {path: content for path, content in self.files.items()
                if path not in self.captured and Path(path).name.startswith(LAUNCHER_PREFIX)}

    def materialize(self, directory: Path) -> None:
        for relative, content in self.files.items():
            path = directory / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)

    @contextlib.contextmanager
    def private(self) -> Iterator[Path]:
        """Triton's cache is a fresh directory holding only these files while the block runs; what Triton
        builds there (a launcher) is kept, and the directory is removed afterwards."""
        directory = Path(tempfile.mkdtemp(prefix="tlx-judge-triton-"))
        self.materialize(directory)
        previous = os.environ.get("TRITON_CACHE_DIR")
        os.environ["TRITON_CACHE_DIR"] = str(directory)  # Triton reads it at every cache lookup
        try:
            yield directory
        finally:
            if previous is None:
                os.environ.pop("TRITON_CACHE_DIR", None)
            else:
                os.environ["TRITON_CACHE_DIR"] = previous
            self.files.update(_read_tree(directory))
            shutil.rmtree(directory, ignore_errors=True)


def _read_tree(root: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    for path in sorted(root.rglob("*")):
        # loadable modules only (the driver module, launchers): the judge never reads a kernel from a cache, and
        # the run copies compiled kernels of the worker's own source in (orchestrator/worker/kernel_cache.py)
        if path.is_symlink() or not path.is_file() or path.suffix != ".so":
            continue
        content = path.read_bytes()
        total += len(content)
        if total > TRUSTED_CACHE_LIMIT_BYTES:
            break
        files[str(path.relative_to(root))] = content
    return files


class KernelLibrary:
    """Compiled kernels the judge has loaded, by hash, from payloads written to a private directory
    (`<directory>/<hash>/kernel.cubin`, `kernel.json`, `signature.json`: what `open` loads again in the ncu
    replay child). The name each kernel is known by is the binary's own (`cubin.kernel_entries`): a payload whose
    metadata names a function the binary does not define is refused."""

    def __init__(self, directory: Path | None = None, trusted_cache: TrustedTritonCache | None = None) -> None:
        self.directory = directory or Path(tempfile.mkdtemp(prefix="tlx-replay-"))
        self.kernels: dict[str, Any] = {}
        self.names: dict[str, str] = {}  # hash -> the kernel's name as its binary defines it
        self.files: dict[str, dict[str, bytes]] = {}  # hash -> its three files, as loaded (for `export`)
        # None: this process's Triton cache is its own (the ncu child's, made fresh for it)
        self.trusted_cache = trusted_cache

    def __contains__(self, key: str) -> bool:
        return key in self.kernels

    def load(self, key: str, payload: Any) -> None:
        if not isinstance(payload, dict) or payload.get("hash") != key:
            raise RecordRefused(f"kernel {key[:16]}: the payload is for another kernel")
        metadata, signature, binary = payload.get("metadata"), payload.get("signature"), payload.get("binary")
        if not isinstance(metadata, dict) or not isinstance(signature, dict) or not isinstance(binary, str):
            raise RecordRefused(f"kernel {key[:16]}: metadata, signature or binary missing")
        try:
            data = base64.b64decode(binary, validate=True)
        except ValueError:
            raise RecordRefused(f"kernel {key[:16]}: the binary is not base64") from None
        files = {"kernel.json": json.dumps(metadata).encode(), "kernel.cubin": data,
                 "signature.json": json.dumps({str(k): v for k, v in signature.items()}).encode()}
        folder = self.directory / key
        _write_folder(folder, files)
        self._load_folder(key, folder)
        self.files[key] = files

    def export(self, directory: Path) -> None:
        """Fresh copies of the loaded kernels' files under `directory`, from memory (for the ncu child: the
        library's own directory is writable by the candidate process)."""
        for key, files in self.files.items():
            _write_folder(directory / key, files)

    @classmethod
    def open(cls, directory: Path, keys: list[str]) -> KernelLibrary:
        """The kernels a judge wrote to `directory`, loaded again (the ncu replay child's library)."""
        library = cls(directory)
        for key in keys:
            if not key.isalnum():
                raise RecordRefused(f"kernel {key[:16]}: not a kernel hash")
            library._load_folder(key, directory / key)
        return library

    def _load_folder(self, key: str, folder: Path) -> None:
        from triton.compiler.compiler import CompiledKernel

        from sandbox_worker.judged.cubin import NotACudaBinary, kernel_entries

        metadata = json.loads((folder / "kernel.json").read_text())
        signature = json.loads((folder / "signature.json").read_text())
        if not isinstance(signature, dict) or any(not isinstance(v, str) for v in signature.values()):
            raise RecordRefused(f"kernel {key[:16]}: its signature is malformed")
        try:
            entries = kernel_entries((folder / "kernel.cubin").read_bytes())
        except NotACudaBinary as exc:
            raise RecordRefused(f"kernel {key[:16]}: the binary is not a CUDA kernel: {exc}") from None
        name = metadata.get("name") if isinstance(metadata, dict) else None
        if name not in entries:
            raise RecordRefused(f"kernel {key[:16]}: its metadata names {str(name)[:80]!r}, which the binary does "
                                f"not define (it defines {', '.join(entries[:4]) or 'no kernel'})")
        group = {"kernel.json": str(folder / "kernel.json"), "kernel.cubin": str(folder / "kernel.cubin")}
        launcher_cache = self.trusted_cache.private() if self.trusted_cache is not None else contextlib.nullcontext()
        try:
            kernel = CompiledKernel(_ReplaySource({str(k): v for k, v in signature.items()}), group, key)
            with launcher_cache:
                kernel._init_handles()
        except Exception as exc:  # noqa: BLE001 - a payload the driver refuses is the candidate's problem
            raise RecordRefused(f"kernel {key[:16]} did not load: {type(exc).__name__}: {str(exc)[:300]}") from None
        self.kernels[key] = kernel
        self.names[key] = str(name)

    def signature_length(self, key: str) -> int:
        return len(self.kernels[key].src.signature)




def _write_folder(folder: Path, files: dict[str, bytes]) -> None:
    if folder.is_symlink():  # whatever was there (a planted link, a folder) goes first
        folder.unlink()
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name).write_bytes(content)
