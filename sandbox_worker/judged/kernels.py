"""The compiled kernels a GPU judge replays, loaded in its own CUDA context from the payloads a record ships.

A payload (binary, metadata, signature) comes from the candidate process and is hostile data: it is written to
a private directory (`<directory>/<hash>/kernel.cubin`, `kernel.json`, `signature.json`: what `open` loads again
in the ncu replay child) and loaded as a Triton `CompiledKernel`; no candidate Python runs here. The name a
kernel is known by is its binary's own (`cubin.kernel_entries`): a payload whose metadata names a function the
binary does not define is refused. Standard library at module level; triton inside.
"""

from __future__ import annotations

import base64
import json
import tempfile
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


class KernelLibrary:
    """Compiled kernels the judge has loaded, by hash, from payloads written to a private directory
    (`<directory>/<hash>/kernel.cubin`, `kernel.json`, `signature.json`: what `open` loads again in the ncu
    replay child). The name each kernel is known by is the binary's own (`cubin.kernel_entries`): a payload whose
    metadata names a function the binary does not define is refused."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or Path(tempfile.mkdtemp(prefix="tlx-replay-"))
        self.kernels: dict[str, Any] = {}
        self.names: dict[str, str] = {}  # hash -> the kernel's name as its binary defines it

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
        folder = self.directory / key
        folder.mkdir(exist_ok=True)
        (folder / "kernel.json").write_text(json.dumps(metadata))
        (folder / "kernel.cubin").write_bytes(data)
        (folder / "signature.json").write_text(json.dumps({str(k): v for k, v in signature.items()}))
        self._load_folder(key, folder)

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
        try:
            kernel = CompiledKernel(_ReplaySource({str(k): v for k, v in signature.items()}), group, key)
            kernel._init_handles()
        except Exception as exc:  # noqa: BLE001 - a payload the driver refuses is the candidate's problem
            raise RecordRefused(f"kernel {key[:16]} did not load: {type(exc).__name__}: {str(exc)[:300]}") from None
        self.kernels[key] = kernel
        self.names[key] = str(name)

    def signature_length(self, key: str) -> int:
        return len(self.kernels[key].src.signature)


