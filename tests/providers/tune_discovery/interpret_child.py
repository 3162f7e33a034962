"""Run kernel files under the Triton interpreter and print each one's largest error against torch, as JSON.

Usage: TRITON_INTERPRET=1 python -m tests.providers.tune_discovery.interpret_child FILE... ; a file's name starts
with the fixture it was edited from (`layer_norm__warps_x2.py`), which picks its inputs and reference.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import torch


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _error(path: Path) -> float:
    module, style = _load(path), path.stem.split("__")[0]
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(5, 300, generator=generator)
    a, b = torch.randn(64, 48, generator=generator), torch.randn(48, 32, generator=generator)
    if style == "softmax":
        got, want = module.softmax(x), torch.softmax(x, dim=-1)
    elif style == "layer_norm":
        weight, bias = torch.randn(300, generator=generator), torch.randn(300, generator=generator)
        got, want = module.layer_norm(x, weight, bias), torch.nn.functional.layer_norm(x, (300,), weight, bias)
    elif style == "head_copy":  # D must equal the row length, a power of two
        rows = torch.randn(5, 64, generator=generator)
        got, want = module.head_copy(rows), rows
    elif style == "row_sum_heuristics":
        got, want = module.row_sum(x), x.sum(dim=-1)
    elif style == "matmul_autotune":
        got, want = module.matmul(a, b), a @ b
    elif style == "attention_comprehension":
        q, k, v = (torch.randn(40, 16, generator=generator) for _ in range(3))
        got, want = module.attention(q, k, v), (q @ k.T) @ v
    elif style == "grouped_matmul":
        got, want = module.grouped_matmul(a, b), a @ b
    elif style == "grouped_gemm_persistent":
        # small integers: every product and sum is exact in fp16, so any tile or order gives the same answer
        shapes = ((64, 32, 64), (32, 64, 48))  # (M, K, N), multiples of the tiles: the kernel has no masks
        group_a = [torch.randint(-2, 3, (m, k), generator=generator).half() for m, k, _ in shapes]
        group_b = [torch.randint(-2, 3, (k, n), generator=generator).half() for _, k, n in shapes]
        got = torch.cat([c.float().flatten() for c in module.group_gemm_fn(group_a, group_b)])
        want = torch.cat([(a_.float() @ b_.float()).flatten() for a_, b_ in zip(group_a, group_b, strict=True)])
    else:
        raise ValueError(f"no reference for {path.name}")
    return float((got - want).abs().max())


if __name__ == "__main__":
    print(json.dumps({Path(name).name: _error(Path(name)) for name in sys.argv[1:]}))
