"""Edited kernels still compute the right thing: each edit kind, run under the Triton interpreter on tiny shapes,
matches torch (one child process for all of them, since TRITON_INTERPRET must be set before triton loads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.providers.tune.edits import set_configs, set_literal, set_scaled, set_table
from orchestrator.providers.tune.forms import AutotuneConfig
from tests.providers.tune_discovery import drop_lines, kernel

ROOT = Path(__file__).resolve().parents[3]
UNCHECKED_LAYER_NORM = drop_lines(kernel("layer_norm"), "if N > BLOCK_SIZE", 'raise RuntimeError("This layer norm')
EDITED = {
    "softmax__as_written": kernel("softmax"),
    "softmax__warps_4": set_literal(kernel("softmax"), "wrapper:softmax.num_warps#0", 4),
    "layer_norm__warps_x2": set_scaled(kernel("layer_norm"), "wrapper:layer_norm.num_warps#0", 1),
    "layer_norm__warps_table": set_table(kernel("layer_norm"), "wrapper:layer_norm.num_warps#0", "N", {300: 2}),
    # 512 / 4 = 128 columns per step: three loop steps over the 300 columns
    # launch options the launch left to Triton, added as keywords
    "layer_norm__stages_added": set_literal(kernel("layer_norm"), "launch:layer_norm.num_stages#0", 2),
    "head_copy__warps_added": set_literal(kernel("head_copy"), "launch:head_copy.num_warps#0", 2),
    "layer_norm__block_quartered": set_scaled(UNCHECKED_LAYER_NORM, "wrapper:layer_norm.BLOCK_SIZE#0", -2),
    "row_sum_heuristics__block_halved": set_scaled(kernel("row_sum_heuristics"),
                                                   "heuristic:row_sum_kernel.BLOCK_SIZE#0", -1),
    "row_sum_heuristics__block_table": set_table(kernel("row_sum_heuristics"), "heuristic:row_sum_kernel.BLOCK_SIZE#0",
                                                 'args["n_cols"]', {300: 64}),
    # one config, so the autotuner has nothing to time (the interpreter cannot)
    "matmul_autotune__configs": set_configs(kernel("matmul_autotune"), "autotune:matmul_kernel.configs#0", [
        AutotuneConfig.of({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 2},
                          num_warps=1, num_stages=1)]),
    "attention_comprehension__as_written": kernel("attention_comprehension"),
    # the comprehension's lists, edited in place: autotune's one choice becomes a 32 x 32 tile on two warps
    "attention_comprehension__tiles_32": set_literal(set_literal(set_literal(
        kernel("attention_comprehension"), "config:_attn_fwd.BLOCK_M#0", 32), "config:_attn_fwd.BLOCK_N#0", 32),
        "config:_attn_fwd.num_warps#0", 2),
    # a persistent kernel's tiles, which no grid divides: 32 x 16 x 16 tiles walked by 3 programs
    "grouped_gemm_persistent__configs": set_configs(
        kernel("grouped_gemm_persistent"), "autotune:grouped_matmul_kernel.configs#0",
        [AutotuneConfig.of({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "NUM_SM": 3})]),
    "grouped_matmul__tiles_16": set_literal(set_literal(kernel("grouped_matmul"), "wrapper:grouped_matmul.BLOCK_M#0", 16),
                                            "wrapper:grouped_matmul.BLOCK_N#0", 16),
}


@pytest.mark.slow
def test_edited_kernels_match_torch_under_the_interpreter(tmp_path):
    paths = []
    for name, source in EDITED.items():
        path = tmp_path / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        paths.append(str(path))
    environment = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    child = subprocess.run([sys.executable, "-m", "tests.providers.tune_discovery.interpret_child", *paths],
                           capture_output=True, text=True, env=environment, cwd=ROOT, timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
    errors = json.loads(child.stdout.splitlines()[-1])
    assert set(errors) == {f"{name}.py" for name in EDITED}
    assert all(error < 1e-4 for error in errors.values()), errors
