"""The tune provider moves the new knob sites, one small diff at a time, never past a bound the code states, and
explains a kernel without knobs in a structure the run can put in result.json."""

from __future__ import annotations

import ast
import json
import re

import pytest
import trio

from orchestrator.providers.base import Proposal, ProviderExhausted
from orchestrator.providers.tune import TuneProvider, discover
from orchestrator.providers.tune.explain import NoKnobFound
from tests.providers.conftest import VECTOR_ADD, context
from tests.providers.test_tune import digest_record
from tests.providers.tune_discovery import changed_lines, drop_lines, kernel
from tests.providers.tune_discovery.test_edits import BIT_LENGTH_SOFTMAX


def neutral_walk(source: str, limit: int = 200) -> list[Proposal]:
    """Every proposal until the tuner is exhausted, each one fed back as rejected at 1.0x."""
    provider, proposals, history = TuneProvider(), [], []
    with pytest.raises(ProviderExhausted, match="no untried configuration"):
        for index in range(limit):
            proposal = trio.run(provider.propose, context(source=source, history=tuple(history),
                                                          round_index=index // 2 + 1, slot_index=index % 2))
            proposals.append(proposal)
            history.append(digest_record(f"r{index // 2 + 1:03d}-c{index % 2:03d}", proposal.source, speedup=1.0))
    return proposals


def moved_lines(source: str, proposals: list[Proposal]) -> set[str]:
    """The source lines any proposal changed (each proposal parses and is new)."""
    assert len({p.source for p in proposals}) == len(proposals)
    lines = set()
    for proposal in proposals:
        ast.parse(proposal.source)
        lines |= {line[1:] for line in changed_lines(source, proposal.source) if line.startswith("-")}
    return lines


def test_softmax_tunes_the_wrapper_num_warps_and_leaves_the_row_block_alone():
    source = kernel("softmax")
    first = trio.run(TuneProvider().propose, context(source=source))
    assert changed_lines(source, first.source) == [
        "-    num_warps = 8  # a trick: ask the compiler for more threads per row",
        "+    num_warps = 16  # a trick: ask the compiler for more threads per row"]
    assert first.metadata.change == "num_warps 8 -> 16 (wrapper assignment in softmax at line 28); nothing else changes"
    proposals = neutral_walk(source)
    assert moved_lines(source, proposals) == {"    num_warps = 8  # a trick: ask the compiler for more threads per row"}
    assert len(proposals) == 5  # 1, 2, 4, 16, 32


def test_layer_norm_scales_its_num_warps_heuristic_and_learns_from_the_result():
    source = kernel("layer_norm")
    provider = TuneProvider()
    first = trio.run(provider.propose, context(source=source))
    assert changed_lines(source, first.source)[1] == "+    num_warps = min(2 * (min(max(BLOCK_SIZE // 256, 1), 8)), 32)"
    assert first.metadata.hypothesis.startswith(
        "Raising num_warps (min(max(BLOCK_SIZE // 256, 1), 8)) from x1 to x2 keeps the number of programs")
    history = (digest_record("r001-c000", first.source, speedup=0.9),)
    second = trio.run(provider.propose, context(source=source, history=history, round_index=2))
    assert "num_warps x1->x2 rejected at 0.900x" in second.metadata.evidence
    assert "2 * (" not in second.source  # the rejected direction is not proposed again
    # its launch leaves num_stages to Triton (default 3) and the kernel loops over the columns: a knob too
    assert moved_lines(source, neutral_walk(source)) == {"    num_warps = min(max(BLOCK_SIZE // 256, 1), 8)",
                                                         "                         BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)"}


def test_heuristics_are_tuned_inside_their_lambdas():
    source = kernel("row_sum_heuristics")
    assert moved_lines(source, neutral_walk(source)) == {
        '    "BLOCK_SIZE": lambda args: min(triton.next_power_of_2(args["n_cols"]), 1024),',
        '    "num_warps": lambda args: 4 if args["n_cols"] <= 2048 else 8,'}


def test_constrained_knobs_are_never_proposed_below_their_bound_or_above_a_divisor():
    block_lines = [line for p in neutral_walk(BIT_LENGTH_SOFTMAX)
                   for line in changed_lines(BIT_LENGTH_SOFTMAX, p.source) if "BLOCK_SIZE =" in line]
    assert block_lines and all("//" not in line for line in block_lines)
    assert {line for line in block_lines if line.startswith("+")} == {
        "+    BLOCK_SIZE = 2 * (1 << (n_cols - 1).bit_length())", "+    BLOCK_SIZE = 4 * (1 << (n_cols - 1).bit_length())"}

    constant = drop_lines(kernel("softmax"), "BLOCK_SIZE = triton.next_power_of_2")
    constant = constant.replace("import triton.language as tl\n", "import triton.language as tl\n\nBLOCK_SIZE = 1024\n")
    sizes = {int(m.group(1)) for p in neutral_walk(constant) if (m := re.search(r"^BLOCK_SIZE = (\d+)$", p.source, re.M))}
    assert sizes == {1024, 2048, 4096, 8192}  # 1024 where another knob moved

    grouped = kernel("grouped_matmul")
    tiles = [line for p in neutral_walk(grouped) for line in changed_lines(grouped, p.source)
             if line.startswith("+    BLOCK_M, BLOCK_N")]
    assert sorted(tiles) == ["+    BLOCK_M, BLOCK_N = 16, 32", "+    BLOCK_M, BLOCK_N = 32, 16"]


def test_a_kernel_without_knobs_gets_a_structured_explanation():
    # head_copy's only size is pinned; with its launch options behind **options (a helper's dict, not
    # followed) not even Triton's default num_warps can be offered
    hidden = kernel("head_copy").replace("D=x.shape[1])", "D=x.shape[1], **launch_options(x))")
    with pytest.raises(NoKnobFound) as raised:
        trio.run(TuneProvider().propose, context(source=hidden))
    explanation = raised.value.explanation
    data = json.loads(json.dumps(explanation.to_json()))
    assert [c["category"] for c in data["categories"]] == ["module constants", "launch arguments",
                                                           "wrapper assignments", "triton.autotune",
                                                           "triton.heuristics", "launch grids"]
    found = {c["category"]: c["found"] for c in data["categories"]}
    assert found["launch arguments"][0] == ("the launch of head_copy_kernel in head_copy at line 18 passes D=x.shape[1] "
                                            "and *args/**kwargs")
    assert found["launch arguments"][1].startswith("D=x.shape[1] (launch argument in head_copy at line 18): D stays as "
                                                   "written: head_copy_kernel offsets each program by a multiple of D")
    assert found["module constants"] == found["triton.autotune"] == []
    assert data["suggestions"] == ["pass the launch options of head_copy_kernel at line 18 as keywords "
                                   "(num_warps=..., BLOCK_SIZE=...) instead of through *args or **kwargs"]
    message = str(raised.value)
    assert message.startswith("tune found no tunable knob in the incumbent: it looked for module constants, launch "
                              "arguments, wrapper assignments, triton.autotune, triton.heuristics, launch grids; "
                              "found only D in head_copy() at line 18 (pinned by D stays as written)")


def test_a_launch_that_leaves_num_warps_to_triton_is_tuned_from_triton_s_default():
    """head_copy's size is pinned and its launch passes no num_warps: Triton's default 4 is the knob, and the
    edit adds the keyword; a kernel without a loop has nothing for num_stages to pipeline."""
    source = kernel("head_copy")
    proposal = trio.run(TuneProvider().propose, context(source=source))
    assert changed_lines(source, proposal.source) == [
        "-    head_copy_kernel[(x.shape[0],)](x, out, D=x.shape[1])",
        "+    head_copy_kernel[(x.shape[0],)](x, out, D=x.shape[1], num_warps=8)"]
    assert proposal.metadata.change.startswith("num_warps 4 -> 8 (launch argument in head_copy at line 18)")
    assert "num_stages" not in neutral_walk(source)[-1].source


def test_assignments_that_reach_no_launch_are_named_with_the_edit_that_would_pass_them():
    # the keywords come from a helper's return value, which the discovery does not follow (a dict written
    # where the launch can see it is followed: test_a_launch_unpacking_a_dict_...)
    hidden = kernel("softmax").replace(
        "    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, num_warps=num_warps, BLOCK_SIZE=BLOCK_SIZE)",
        "    options = launch_options(num_warps, BLOCK_SIZE)\n"
        "    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, **options)") + (
        "\n\ndef launch_options(num_warps, BLOCK_SIZE):\n"
        '    return {"num_warps": num_warps, "BLOCK_SIZE": BLOCK_SIZE}\n')
    with pytest.raises(NoKnobFound) as raised:
        trio.run(TuneProvider().propose, context(source=hidden))
    suggestions = raised.value.explanation.suggestions
    assert suggestions[:2] == (
        "pass BLOCK_SIZE (assigned at line 27 in softmax()) to the launch of softmax_kernel as BLOCK_SIZE=BLOCK_SIZE, "
        "or move it to a module constant passed there",
        "pass num_warps (assigned at line 28 in softmax()) to the launch of softmax_kernel as num_warps=num_warps, or "
        "move it to a module constant passed there")
    assert "as keywords (num_warps=..., BLOCK_SIZE=...) instead of through *args or **kwargs" in suggestions[2]
    wrapper = next(c for c in raised.value.explanation.categories if c.category == "wrapper assignments")
    assert wrapper.found == ("BLOCK_SIZE (line 27 in softmax()) reaches no launch",
                             "num_warps (line 28 in softmax()) reaches no launch")


def test_a_file_without_a_launch_and_one_that_does_not_parse():
    with pytest.raises(NoKnobFound, match=r"launch the kernel from this file as kernel\[grid\]"):
        trio.run(TuneProvider().propose, context(source="def f():\n    return 1\n"))
    with pytest.raises(NoKnobFound) as raised:
        trio.run(TuneProvider().propose, context(source="def f(:\n    return 1\n"))
    assert raised.value.explanation.parse_error == "invalid syntax, line 1"
    assert str(raised.value).endswith("the source does not parse (invalid syntax, line 1), so it has no knob the tuner "
                                      "can read")


# These replace the two tests in tests/providers/test_tune_texts.py written when only upper-case literals counted.
ROW_SCALE = '''\
import triton
import triton.language as tl


@triton.jit
def row_scale(x_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK)
    values = tl.load(x_ptr + row * n_cols + columns, mask=columns < n_cols)
    tl.store(x_ptr + row * n_cols + columns, values * 2, mask=columns < n_cols)


def scale_rows(x):
    width = triton.next_power_of_2(x.shape[1])
    row_scale[(x.shape[0],)](x, x.shape[1], BLOCK=width)
    return x
'''


def test_a_block_computed_to_cover_the_row_is_pinned_and_the_launch_options_left_to_triton_are_tuned():
    pinned = next(site for site in discover(ROW_SCALE).sites if site.variable == "width")
    assert pinned.edits == () and "BLOCK >= x.shape[1]" in pinned.note
    proposal = trio.run(TuneProvider().propose, context(source=ROW_SCALE))
    assert changed_lines(ROW_SCALE, proposal.source)[1] == "+    row_scale[(x.shape[0],)](x, x.shape[1], BLOCK=width, num_warps=8)"
    with_warps = ROW_SCALE.replace("BLOCK=width)", "BLOCK=width, num_warps=4)")  # the same knob, written out
    proposal = trio.run(TuneProvider().propose, context(source=with_warps))
    assert changed_lines(with_warps, proposal.source)[1] == "+    row_scale[(x.shape[0],)](x, x.shape[1], BLOCK=width, num_warps=8)"


def test_any_module_constant_a_launch_passes_is_a_knob_whatever_its_name():
    lowercase = VECTOR_ADD.replace("BLOCK_SIZE = 64", "block_size = 64").replace("BLOCK_SIZE=BLOCK_SIZE",
                                                                                    "BLOCK_SIZE=block_size")
    lowercase = lowercase.replace("cdiv(n, BLOCK_SIZE)", "cdiv(n, block_size)")
    proposal = trio.run(TuneProvider().propose, context(source=lowercase))
    assert changed_lines(lowercase, proposal.source) == ["-block_size = 64", "+block_size = 128"]
    assert proposal.metadata.hypothesis.startswith("Raising BLOCK_SIZE from 64 to 128 halves the number of programs")
    unnamed = VECTOR_ADD.replace("BLOCK_SIZE = 64", "BS = 64").replace("BLOCK_SIZE=BLOCK_SIZE", "BLOCK_SIZE=BS")
    unnamed = unnamed.replace("cdiv(n, BLOCK_SIZE)", "cdiv(n, BS)")
    assert changed_lines(unnamed, trio.run(TuneProvider().propose, context(source=unnamed)).source) == [
        "-BS = 64", "+BS = 128"]


def test_attention_tunes_the_choices_of_its_config_comprehension_one_list_value_at_a_time():
    source = kernel("attention_comprehension")
    first = trio.run(TuneProvider().propose, context(source=source))
    assert changed_lines(source, first.source) == ["-    for BM in [16]\\", "+    for BM in [32]\\"]
    assert first.metadata.change == "BLOCK_M 16 -> 32 (triton.Config entry in _attn_fwd at line 14); nothing else changes"
    moved = moved_lines(source, neutral_walk(source))
    assert moved == {"    for BM in [16]\\", "    for BN in [16]\\", "    for w in [1]\\"}
