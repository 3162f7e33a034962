"""Each edit kind gives source that parses with a minimal diff, and none may break a constraint in the code."""

from __future__ import annotations

import ast

import pytest

from orchestrator.providers.tune.discovery import discover
from orchestrator.providers.tune.edits import EditError, set_configs, set_literal, set_scaled, set_table
from orchestrator.providers.tune.forms import AutotuneConfig
from tests.providers.tune_discovery import changed_lines, kernel

LAYER_NORM = kernel("layer_norm")
WARPS = "wrapper:layer_norm.num_warps#0"
HEURISTICS = kernel("row_sum_heuristics")
# A softmax whose wrapper computes the row's power of two another way: the discovery cannot tell it is already the
# smallest legal value, so the block is editable, but never below n_cols.
BIT_LENGTH_SOFTMAX = kernel("softmax").replace("BLOCK_SIZE = triton.next_power_of_2(n_cols)",
                                                "BLOCK_SIZE = 1 << (n_cols - 1).bit_length()")
BLOCK = "wrapper:softmax.BLOCK_SIZE#0"


def edited(before: str, after: str) -> list[str]:
    ast.parse(after)
    return changed_lines(before, after)


def test_scaling_an_expression_wraps_it_whole_and_step_zero_restores_it_byte_for_byte():
    doubled = set_scaled(LAYER_NORM, WARPS, 1)
    assert edited(LAYER_NORM, doubled) == ["-    num_warps = min(max(BLOCK_SIZE // 256, 1), 8)",
                                           "+    num_warps = min(2 * (min(max(BLOCK_SIZE // 256, 1), 8)), 32)"]
    quartered = set_scaled(doubled, WARPS, -2)  # the factor is rewritten, not wrapped again
    assert edited(LAYER_NORM, quartered)[1] == "+    num_warps = max((min(max(BLOCK_SIZE // 256, 1), 8)) // 4, 1)"
    assert discover(quartered).site(WARPS).step == -2
    assert set_scaled(quartered, WARPS, 0) == LAYER_NORM
    stages = set_scaled(kernel("softmax_persistent"), "wrapper:softmax.num_stages#0", -1)
    assert edited(kernel("softmax_persistent"), stages)[1] == "+    num_stages = max((4 if n_cols > 2048 else 2) - 1, 1)"


def test_a_per_shape_table_keeps_the_expression_as_its_fallback():
    table = set_table(LAYER_NORM, WARPS, "N", {4096: 8, 8192: 16})
    assert edited(LAYER_NORM, table) == [
        "-    num_warps = min(max(BLOCK_SIZE // 256, 1), 8)",
        "+    num_warps = {4096: 8, 8192: 16}.get(N, min(max(BLOCK_SIZE // 256, 1), 8))"]
    again = set_table(table, WARPS, "N", {8192: 32})  # a new table replaces the old one, same fallback
    assert edited(LAYER_NORM, again)[1] == "+    num_warps = {8192: 32}.get(N, min(max(BLOCK_SIZE // 256, 1), 8))"
    heuristic = set_table(HEURISTICS, "heuristic:row_sum_kernel.num_warps#0", 'args["n_cols"]', {8192: 16})
    assert edited(HEURISTICS, heuristic) == [
        '-    "num_warps": lambda args: 4 if args["n_cols"] <= 2048 else 8,',
        '+    "num_warps": lambda args: {8192: 16}.get(args["n_cols"], 4 if args["n_cols"] <= 2048 else 8),']
    with pytest.raises(EditError, match="a key the site can see"):
        set_table(LAYER_NORM, WARPS, "n_cols", {4096: 8})  # not a name of layer_norm()
    with pytest.raises(EditError, match="a key the site can see"):
        set_table(HEURISTICS, "heuristic:row_sum_kernel.num_warps#0", "n_cols", {4096: 8})


def test_a_literal_replaces_a_value_or_an_expression_and_keeps_the_comment():
    softmax = kernel("softmax")
    fewer = set_literal(softmax, "wrapper:softmax.num_warps#0", 4)
    assert edited(softmax, fewer) == ["-    num_warps = 8  # a trick: ask the compiler for more threads per row",
                                      "+    num_warps = 4  # a trick: ask the compiler for more threads per row"]
    assert edited(LAYER_NORM, set_literal(LAYER_NORM, WARPS, 16)) == [
        "-    num_warps = min(max(BLOCK_SIZE // 256, 1), 8)", "+    num_warps = 16"]
    grouped = kernel("grouped_matmul")
    assert edited(grouped, set_literal(grouped, "wrapper:grouped_matmul.BLOCK_M#0", 16)) == [
        "-    BLOCK_M, BLOCK_N = 32, 32", "+    BLOCK_M, BLOCK_N = 16, 32"]


def test_replacing_the_autotune_configs_keeps_the_list_layout():
    matmul = kernel("matmul_autotune")
    configs = [AutotuneConfig.of({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8},
                                 num_warps=8, num_stages=3),
               AutotuneConfig.of({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8},
                                 num_warps=4, num_stages=4)]
    replaced = set_configs(matmul, "autotune:matmul_kernel.configs#0", configs)
    assert edited(matmul, replaced) == [
        "-        triton.Config({'BLOCK_SIZE_M': 32, 'BLOCK_SIZE_N': 32, 'BLOCK_SIZE_K': 16, 'GROUP_SIZE_M': 4}, "
        "num_stages=2,",
        "-                      num_warps=2),",
        "+        triton.Config({'BLOCK_SIZE_M': 128, 'BLOCK_SIZE_N': 256, 'BLOCK_SIZE_K': 64, 'GROUP_SIZE_M': 8}, "
        "num_warps=8, num_stages=3),",
        "+        triton.Config({'BLOCK_SIZE_M': 64, 'BLOCK_SIZE_N': 64, 'BLOCK_SIZE_K': 32, 'GROUP_SIZE_M': 8}, "
        "num_warps=4, num_stages=4),"]
    assert discover(replaced).site("autotune:matmul_kernel.configs#0").configs == tuple(configs)
    inline = kernel("matmul_autotune").replace("configs=get_autotune_config(),",
                                               "configs=[triton.Config({'BLOCK_SIZE_M': 32}, num_warps=2)],")
    one_line = set_configs(inline, "autotune:matmul_kernel.configs#0", configs[1:])
    assert edited(inline, one_line)[1] == ("+    configs=[triton.Config({'BLOCK_SIZE_M': 64, 'BLOCK_SIZE_N': 64, "
                                           "'BLOCK_SIZE_K': 32, 'GROUP_SIZE_M': 8}, num_warps=4, num_stages=4)],")
    with pytest.raises(EditError, match="BLOCK_SIZE_M is a power of two"):
        set_configs(matmul, "autotune:matmul_kernel.configs#0", [AutotuneConfig.of({"BLOCK_SIZE_M": 48})])
    with pytest.raises(EditError, match="num_warps 3 is not one of"):
        set_configs(matmul, "autotune:matmul_kernel.configs#0", [AutotuneConfig.of({"BLOCK_SIZE_M": 64}, num_warps=3)])


def test_illegal_values_are_refused_with_the_constraint_that_forbids_them():
    with pytest.raises(EditError, match=r"12 breaks num_warps in \{1, 2, 4, 8, 16, 32\}"):
        set_literal(LAYER_NORM, WARPS, 12)
    with pytest.raises(EditError, match="takes no edits, not scale: BLOCK_SIZE >= N"):
        set_scaled(LAYER_NORM, "wrapper:layer_norm.BLOCK_SIZE#0", 1)
    with pytest.raises(EditError, match="takes literal, table edits, not scale"):
        set_scaled(kernel("softmax"), "wrapper:softmax.num_warps#0", 1)
    grouped = kernel("grouped_matmul")
    with pytest.raises(EditError, match="cannot show that 64 keeps BLOCK_M divides M"):
        set_literal(grouped, "wrapper:grouped_matmul.BLOCK_M#0", 64)
    assert "BLOCK_M, BLOCK_N = 64, 32" in set_literal(grouped, "wrapper:grouped_matmul.BLOCK_M#0", 64, {"M": 128})
    with pytest.raises(EditError, match=r"64 breaks BLOCK_M divides M.*\(M = 96\)"):
        set_literal(grouped, "wrapper:grouped_matmul.BLOCK_M#0", 64, {"M": 96})
    with pytest.raises(KeyError, match="no knob site 'wrapper:softmax.BLOCK#0'"):
        set_literal(kernel("softmax"), "wrapper:softmax.BLOCK#0", 64)


def test_a_block_that_must_cover_the_row_is_never_set_below_it():
    assert discover(BIT_LENGTH_SOFTMAX).site(BLOCK).edits == ("literal", "table", "scale")
    with pytest.raises(EditError, match="scaling BLOCK_SIZE down may break BLOCK_SIZE >= n_cols"):
        set_scaled(BIT_LENGTH_SOFTMAX, BLOCK, -1)
    assert "BLOCK_SIZE = 2 * (1 << (n_cols - 1).bit_length())" in set_scaled(BIT_LENGTH_SOFTMAX, BLOCK, 1)
    with pytest.raises(EditError, match="cannot show that 512 keeps BLOCK_SIZE >= n_cols"):
        set_literal(BIT_LENGTH_SOFTMAX, BLOCK, 512)  # the cases' n_cols are not known
    with pytest.raises(EditError, match=r"256 breaks BLOCK_SIZE >= n_cols.*\(n_cols = 300\)"):
        set_literal(BIT_LENGTH_SOFTMAX, BLOCK, 256, {"n_cols": 300})
    assert "BLOCK_SIZE = 512" in set_literal(BIT_LENGTH_SOFTMAX, BLOCK, 512, {"n_cols": 300})
    with pytest.raises(EditError, match=r"at n_cols = 300: 256 breaks BLOCK_SIZE >= n_cols"):
        set_table(BIT_LENGTH_SOFTMAX, BLOCK, "n_cols", {300: 256, 100: 128})
    table = set_table(BIT_LENGTH_SOFTMAX, BLOCK, "n_cols", {300: 512, 100: 128})
    assert "BLOCK_SIZE = {100: 128, 300: 512}.get(n_cols, 1 << (n_cols - 1).bit_length())" in table
