"""A worker starts with what earlier workers of its exact source compiled, and nothing any other source's process
wrote (orchestrator/worker/kernel_cache.py). The kernels here are compiled by real Triton for sm_90 on this CPU
host (its own ptxas), in child processes with their own TRITON_CACHE_DIR, as workers compile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.worker.kernel_cache import SourceKernelCache, complete_groups

SOURCE_A, SOURCE_B = "a" * 64, "b" * 64

COMPILE = r'''
import json, sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

@triton.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out + offsets, tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask), mask=mask)

hits = []
triton.knobs.compilation.listener = lambda **event: hits.append(event["cache_hit"])
for block in map(int, sys.argv[1:]):
    source = ASTSource(add_kernel, signature={"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32",
                                              "BLOCK": "constexpr"}, constexprs={"BLOCK": block})
    triton.compile(source, target=GPUTarget("cuda", 90, 32))
print(json.dumps(hits))
'''


def _compile(cache: Path, *blocks: int) -> list[bool]:
    """Compile add_kernel for each block size in a fresh process over `cache`: whether each was a cache hit."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache)}
    env.pop("TRITON_INTERPRET", None)
    script = cache.parent / "compile_add.py"  # Triton reads a kernel's source from its file
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(COMPILE, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), *map(str, blocks)], env=env, capture_output=True,
                          text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    """A worker's Triton cache after it compiled two configurations, beside its driver module."""
    cache = tmp_path_factory.mktemp("worker-a") / "triton_cache"
    assert _compile(cache, 256, 1024) == [False, False]
    (cache / "DRIVERKEY").mkdir()
    (cache / "DRIVERKEY" / "cuda_utils.so").write_bytes(b"a loadable module")
    return cache


def test_a_later_worker_of_the_same_source_compiles_nothing_again(compiled, tmp_path):
    kept = SourceKernelCache(tmp_path / "kept")
    assert kept.keep(SOURCE_A, compiled) == 2
    assert kept.keep(SOURCE_A, compiled) == 0  # kept once
    later = tmp_path / "worker-a2" / "triton_cache"
    assert kept.fill(SOURCE_A, later) == 2
    assert not list(later.rglob("*.so"))  # a loadable module is never carried from one worker to another
    for group in complete_groups(later):  # the group files name the copies, not the first worker's files
        paths = json.loads((later / group.key / group.group_file).read_text())["child_paths"].values()
        assert all(Path(path).parent == later / group.key for path in paths)
    assert _compile(later, 256, 1024, 512) == [True, True, False]


def test_another_source_gets_nothing_another_source_compiled(compiled, tmp_path):
    kept = SourceKernelCache(tmp_path / "kept")
    kept.keep(SOURCE_A, compiled)
    other = tmp_path / "worker-b" / "triton_cache"
    assert kept.fill(SOURCE_B, other) == 0
    assert not other.exists() or not any(other.iterdir())


def test_a_kept_file_changed_on_disk_is_never_given_to_a_worker(compiled, tmp_path):
    kept = SourceKernelCache(tmp_path / "kept")
    kept.keep(SOURCE_A, compiled)
    planted = next((tmp_path / "kept" / SOURCE_A).rglob("*.cubin"))
    planted.write_bytes(b"\x7fELF a slow binary planted by another process")
    later = tmp_path / "worker-a2" / "triton_cache"
    assert kept.fill(SOURCE_A, later) == 1  # the untouched group only
    assert b"planted" not in b"".join(path.read_bytes() for path in later.rglob("*.cubin"))


def _group(root: Path, key: str, members: dict[str, bytes]) -> Path:
    directory = root / key
    directory.mkdir(parents=True)
    for name, content in members.items():
        (directory / name).write_bytes(content)
    (directory / "__grp__k.json").write_text(json.dumps({"child_paths": {
        name: str(directory / name) for name in members}}))
    return directory


def test_groups_that_could_carry_code_or_point_elsewhere_are_never_kept(tmp_path):
    cache = tmp_path / "triton_cache"
    _group(cache, "GOOD", {"k.json": b"{}", "k.cubin": b"\x7fELF", "k.ptx": b"//"})
    _group(cache, "MODULE", {"k.json": b"{}", "launcher.so": b"code"})  # a launcher listed as a kernel file
    _group(cache, "UNKNOWN", {"k.json": b"{}", "k.pyc": b"code"})
    linked = _group(cache, "LINK", {"k.json": b"{}"})
    (tmp_path / "elsewhere.cubin").write_bytes(b"\x7fELF")
    (linked / "k.cubin").symlink_to(tmp_path / "elsewhere.cubin")
    (linked / "__grp__k.json").write_text(json.dumps({"child_paths": {
        "k.json": str(linked / "k.json"), "k.cubin": str(linked / "k.cubin")}}))
    missing = _group(cache, "MISSING", {"k.json": b"{}"})
    (missing / "__grp__k.json").write_text(json.dumps({"child_paths": {
        "k.json": str(missing / "k.json"), "k.cubin": str(missing / "k.cubin")}}))
    renamed = _group(cache, "RENAMED", {"k.json": b"{}"})
    (renamed / "__grp__k.json").write_text(json.dumps({"child_paths": {"k.json": "/etc/passwd"}}))
    (cache / "GARBAGE").mkdir()
    (cache / "GARBAGE" / "__grp__k.json").write_text("not json")
    assert [group.key for group in complete_groups(cache)] == ["GOOD"]


def test_the_limits_keep_what_fits(tmp_path):
    cache = tmp_path / "triton_cache"
    _group(cache, "ONE", {"k.json": b"{}", "k.cubin": b"x" * 600})
    _group(cache, "TWO", {"k.json": b"{}", "k.cubin": b"x" * 600})
    kept = SourceKernelCache(tmp_path / "kept", source_limit_bytes=1000)
    assert kept.keep(SOURCE_A, cache) == 1
    assert kept.keep(SOURCE_B, cache) == 1  # the limit is per source


def test_a_digest_names_a_directory_and_nothing_else(tmp_path):
    with pytest.raises(ValueError, match="not a source digest"):
        SourceKernelCache(tmp_path).fill("../" + "a" * 61, tmp_path / "worker")
