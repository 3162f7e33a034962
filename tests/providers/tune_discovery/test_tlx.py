"""TLX kernels (fixtures/tlx/: fbtriton's tutorials, copied unchanged): which knobs the tuner finds, their
domains and constraints, the edits it makes, and what it never touches (barriers, async task partitioning, a
loop's `num_stages=0`). Discovery is static, so the TLX sources need not import here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import trio

from orchestrator.providers.tune.discovery import discover
from orchestrator.providers.tune.edits import EditError
from orchestrator.providers.tune.explain import explain_missing_knobs
from orchestrator.providers.tune.knobs import apply_knob, apply_knobs, tunable_knobs
from orchestrator.providers.tune.search import FamilySearch
from protocol.autotune import AutotuneChoice
from protocol.worker import ScreenedVariant
from tests.providers.tune_discovery import changed_lines
from tests.providers.tune_discovery.test_family_search import Result

TLX = Path(__file__).resolve().parent / "fixtures" / "tlx"
PIPELINED = (TLX / "hopper_gemm_pipelined.py").read_text(encoding="utf-8")
WARP_SPECIALIZED = (TLX / "hopper_gemm_ws.py").read_text(encoding="utf-8")
ATTENTION = (TLX / "hopper_fa_ws_pipelined.py").read_text(encoding="utf-8")
FA_KERNEL = "_attn_fwd_ws_pipelined"


class Recording:
    """Times every variant alike (no family is fruitful) and keeps their sources."""

    def __init__(self) -> None:
        self.sources: list[str] = []

    async def __call__(self, variants, observe=False):
        self.sources += [source for _, source in variants]
        return [Result(label, source, ScreenedVariant(variant_id=f"v{index:02d}", status="ok",
                                                      medians_us={"case": 100.0}))
                for index, (label, source) in enumerate(variants)]


def knobs_of(source: str) -> dict[str, tuple[str, int, tuple[int, ...]]]:
    return {knob.key: (knob.kind, knob.value, knob.domain) for knob in tunable_knobs(source)}


def left_alone(source: str) -> dict[str, str]:
    """Sites with no edit, and why (grids, keys and config lists aside)."""
    return {site.key: site.note for site in discover(source).sites
            if not site.edits and site.kind not in ("grid", "key", "configs")}


def number_changed(before: str, after: str) -> tuple[str, str]:
    """The one run of digits that differs between two lines, as it reads in each (the rest is identical)."""
    start = next((i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b), min(len(before), len(after)))
    end = 0
    while end < min(len(before), len(after)) - start and before[-1 - end] == after[-1 - end]:
        end += 1
    while start and before[start - 1].isdigit():
        start -= 1
    while end and before[-end].isdigit():
        end -= 1
    return before[start:len(before) - end], after[start:len(after) - end]


def line_of(source: str, text: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if text in line)


TILES = (16, 32, 64, 128, 256)


def test_the_pipelined_gemm_tunes_its_single_config_and_never_its_hand_pipelined_loop():
    assert knobs_of(PIPELINED) == {
        "config:BLOCK_SIZE_M#0": ("tile", 128, TILES),
        "config:BLOCK_SIZE_N#0": ("tile", 256, TILES),
        "config:BLOCK_SIZE_K#0": ("tile", 64, TILES),
        "config:GROUP_SIZE_M#0": ("group", 8, (1, 2, 4, 8, 16, 32, 64)),
        # NUM_STAGES counts the buffers tlx.local_alloc makes; the kernel waits on NUM_STAGES - 2 groups
        "tlx_buffers:matmul_kernel_pipelined_hopper.NUM_STAGES#0": ("buffers", 3, (2, 3, 4, 5, 6)),
        "config:num_warps#0": ("warps", 8, (1, 2, 4, 8, 16, 32)),
    }  # the HIP configs' entries (another list, not the one autotune is given) are no knobs
    loop = line_of(PIPELINED, "num_stages=0):")
    assert left_alone(PIPELINED) == {
        "loop:matmul_kernel_pipelined_hopper.num_stages#0":
            f"the loop's num_stages=0 (line {loop}) stays: matmul_kernel_pipelined_hopper allocates its own stage "
            "buffers (tlx.local_alloc) and pipelines by hand"}
    buffers = next(k for k in tunable_knobs(PIPELINED) if k.kind == "buffers")
    assert buffers.where == "TLX buffer count in matmul_kernel_pipelined_hopper at line 16"
    reasons = [c.reason for c in buffers.site.constraints]
    assert any("NUM_STAGES - 2 at line" in reason and "wait-group depth cannot be negative" in reason
               for reason in reasons)
    with pytest.raises(EditError, match=r"NUM_STAGES#0 = 1: 1 breaks NUM_STAGES >= 2: NUM_STAGES - 1 at line \d+: a loop "
                                        r"unroll factor must be at least 1 .*NUM_STAGES - 2 at line \d+: a wait-group"):
        apply_knob(PIPELINED, buffers, 1)
    deeper = apply_knob(PIPELINED, buffers, 4)
    assert changed_lines(PIPELINED, deeper) == [
        "-            {'BLOCK_SIZE_M': 128, 'BLOCK_SIZE_N': 256, 'BLOCK_SIZE_K': 64, 'GROUP_SIZE_M': 8, 'NUM_STAGES': 3},",
        "+            {'BLOCK_SIZE_M': 128, 'BLOCK_SIZE_N': 256, 'BLOCK_SIZE_K': 64, 'GROUP_SIZE_M': 8, 'NUM_STAGES': 4},"]
    ast.parse(deeper)


def test_each_pipelined_knob_edit_changes_only_its_value():
    for knob in tunable_knobs(PIPELINED):
        value = next(v for v in knob.domain if v != knob.value)
        edited = apply_knob(PIPELINED, knob, value)
        removed, added = changed_lines(PIPELINED, edited)
        assert number_changed(removed[1:], added[1:]) == (str(knob.value), str(value)), knob.key
        assert {k.key: k.value for k in tunable_knobs(edited)} == {
            **{k.key: k.value for k in tunable_knobs(PIPELINED)}, knob.key: value}
        ast.parse(edited)


def test_the_warp_specialized_gemm_tunes_its_tiles_buffers_and_groups_but_not_its_task_partitioning():
    """`matmul_kernel_tlx_ws` autotunes over a comprehension: each value of a literal loop list is a knob. Its
    consumer task is `replicate=2` as written and its accumulator `BM // 2`: two MMA groups, so BM splits into
    two parts of whole 64-row warpgroups; NUM_MMA_GROUPS, NUM_MMA_WARPS and the launch options are literals of
    the config dict no loop varies. Of its two boolean loops, EPILOGUE_SUBTILE (`if EPILOGUE_SUBTILE:` stores
    the accumulator in two halves) is a switch; USE_WARP_BARRIER chooses its barriers and stays as written."""
    kernel = "matmul_kernel_tlx_ws"
    assert knobs_of(WARP_SPECIALIZED) == {
        f"config:{kernel}.BM#0": ("tile", 128, (128, 256)),
        f"config:{kernel}.BM#1": ("tile", 256, (128, 256)),
        f"config:{kernel}.BN#0": ("tile", 128, TILES),
        f"config:{kernel}.BN#1": ("tile", 256, TILES),
        f"config:{kernel}.BK#0": ("tile", 64, TILES),
        f"tlx_buffers:{kernel}.NUM_STAGES#0": ("buffers", 2, (1, 2, 3, 4, 5, 6)),
        f"tlx_buffers:{kernel}.NUM_STAGES#1": ("buffers", 3, (1, 2, 3, 4, 5, 6)),
        f"tlx_buffers:{kernel}.NUM_STAGES#2": ("buffers", 4, (1, 2, 3, 4, 5, 6)),
        f"config:{kernel}.GROUP_SIZE_M#0": ("group", 1, (1, 2, 4, 8, 16, 32, 64)),
        f"config:{kernel}.GROUP_SIZE_M#1": ("group", 8, (1, 2, 4, 8, 16, 32, 64)),
        f"config:{kernel}.GROUP_SIZE_M#2": ("group", 64, (1, 2, 4, 8, 16, 32, 64)),
        f"config:{kernel}.EPILOGUE_SUBTILE#0": ("switch", 1, (0, 1)),  # the list [True, False]
        f"config:{kernel}.EPILOGUE_SUBTILE#1": ("switch", 0, (0, 1)),
    }
    barrier = left_alone(WARP_SPECIALIZED)[f"config:{kernel}.USE_WARP_BARRIER#0"]
    assert barrier.startswith(f"USE_WARP_BARRIER chooses how {kernel} synchronizes (a branch of it calls "
                              f"alloc_warp_barrier, line {line_of(WARP_SPECIALIZED, 'tlx.alloc_warp_barrier(')})")
    subtile = next(k for k in tunable_knobs(WARP_SPECIALIZED) if k.key == f"config:{kernel}.EPILOGUE_SUBTILE#1")
    assert changed_lines(WARP_SPECIALIZED, apply_knob(WARP_SPECIALIZED, subtile, 1)) == [
        "-        for epilogue in [True, False]", "+        for epilogue in [True, True]"]
    with pytest.raises(EditError, match="EPILOGUE_SUBTILE 2 is neither False nor True"):
        apply_knob(WARP_SPECIALIZED, subtile, 2)
    bm = next(k for k in tunable_knobs(WARP_SPECIALIZED) if k.key == f"config:{kernel}.BM#0")
    with pytest.raises(EditError, match=r"BM // NUM_MMA_GROUPS \(line \d+\) is a whole multiple of 64 rows"):
        apply_knob(WARP_SPECIALIZED, bm, 64)
    edited = apply_knob(WARP_SPECIALIZED, bm, 256)
    assert changed_lines(WARP_SPECIALIZED, edited) == ["-        for BM in [128, 256]", "+        for BM in [256, 256]"]
    # the two skinny kernels pipeline by hand too: their loops keep num_stages=0
    assert sorted(key for key in left_alone(WARP_SPECIALIZED) if key.startswith("loop:")) == [
        "loop:_skinny_matmul_kernel.num_stages#0", "loop:_skinny_tma_kernel.num_stages#0"]
    configs = discover(WARP_SPECIALIZED).site(f"autotune:{kernel}.configs#0")
    assert configs.note.endswith("EPILOGUE_SUBTILE in [True, False]; GROUP_SIZE_M in [1, 8, 64]; USE_WARP_BARRIER in "
                                 "[False, True] (NUM_CTAS in [1, 2] left as written)")  # the barrier's: pinned above


def test_the_flash_attention_couples_its_tile_to_the_mma_groups_and_leaves_its_tasks_alone():
    """Two configs: one MMA group of 4 warps, two groups of 8 warps (`replicate=NUM_MMA_GROUPS`,
    `num_warps=NUM_MMA_WARPS // NUM_MMA_GROUPS`)."""
    assert knobs_of(ATTENTION) == {
        "config:BLOCK_M#0": ("tile", 128, (64, 128, 256)),  # one group: whole 64-row warpgroups
        "config:BLOCK_N#0": ("tile", 128, (16, 32, 64, 128)),  # tl.static_assert(BLOCK_N <= HEAD_DIM)
        f"tlx_buffers:{FA_KERNEL}.NUM_BUFFERS#0": ("buffers", 2, (1, 2, 3, 4, 5, 6)),
        "config:BLOCK_M#1": ("tile", 128, (128, 256)),  # two groups as written
        "config:BLOCK_N#1": ("tile", 128, (16, 32, 64, 128)),
        f"tlx_buffers:{FA_KERNEL}.NUM_BUFFERS#1": ("buffers", 2, (1, 2, 3, 4, 5, 6)),
        f"config:{FA_KERNEL}.NUM_MMA_GROUPS#1": ("group", 2, (1, 2)),  # 8 warps: 1 or 2 warpgroup pairs
    }
    left = left_alone(ATTENTION)
    task = line_of(ATTENTION, "with tlx.async_task(num_warps=NUM_MMA_WARPS")
    assert left[f"config:{FA_KERNEL}.NUM_MMA_WARPS#1"] == (
        f"NUM_MMA_WARPS sets the num_warps of an async task (line {task}): task partitioning, which the tuner "
        "never edits")
    assert left[f"config:{FA_KERNEL}.NUM_MMA_GROUPS#0"].startswith("NUM_MMA_GROUPS stays 1: each of the")
    assert left[f"config:{FA_KERNEL}.num_warps#0"].startswith(f"{FA_KERNEL} is warp-specialized (tlx.async_tasks)")
    assert left[f"config:{FA_KERNEL}.num_stages#1"].startswith(f"{FA_KERNEL} is warp-specialized (tlx.async_tasks)")
    (coupling,) = discover(ATTENTION).couplings
    assert coupling.sites == (f"config:{FA_KERNEL}.BLOCK_M#1", f"config:{FA_KERNEL}.NUM_MMA_GROUPS#1")
    with pytest.raises(EditError, match="BLOCK_M#1 = 64 with .*NUM_MMA_GROUPS#1 = 2 breaks"):
        apply_knobs(ATTENTION, {"config:BLOCK_M#1": 64})
    one_group = apply_knobs(ATTENTION, {"config:BLOCK_M#1": 64, f"config:{FA_KERNEL}.NUM_MMA_GROUPS#1": 1})
    assert changed_lines(ATTENTION, one_group) == [
        "-    triton.Config({'BLOCK_M': 128, 'BLOCK_N': 128, 'NUM_BUFFERS': 2, 'NUM_MMA_WARPS': 8, 'NUM_MMA_GROUPS': 2},",
        "+    triton.Config({'BLOCK_M': 64, 'BLOCK_N': 128, 'NUM_BUFFERS': 2, 'NUM_MMA_WARPS': 8, 'NUM_MMA_GROUPS': 1},"]
    explanation = explain_missing_knobs(ATTENTION)
    autotune = next(c for c in explanation.categories if c.category == "triton.autotune")
    assert any("task partitioning" in entry for entry in autotune.found)


@pytest.mark.parametrize("source", [PIPELINED, WARP_SPECIALIZED, ATTENTION], ids=["pipelined", "ws", "attention"])
def test_a_screened_family_changes_config_values_only(source):
    """Every variant of a family differs from the kernel only inside its autotune configurations: no barrier,
    async task, loop or kernel line changes, and each variant keeps every relation its code states."""
    knobs = tunable_knobs(source)
    screens = Recording()

    async def family() -> None:
        await FamilySearch(seed=5).next_screened(knobs, source, screens, family_size=4, excluded=lambda s: False)

    trio.run(family)
    variants = screens.sources[:4]
    assert len(variants) == 4 and variants[0] == source  # the incumbent is the control
    config_lines = {knob.line for knob in knobs}
    kernel_lines = {line for kernel in ast.walk(ast.parse(source)) if isinstance(kernel, ast.FunctionDef)
                    and any("jit" in ast.unparse(d) for d in kernel.decorator_list)
                    for line in range(kernel.lineno, kernel.end_lineno + 1)}
    for variant in variants[1:]:
        lines = list(zip(source.splitlines(), variant.splitlines(), strict=True))  # values change, lines stay
        changed = [number for number, (before, after) in enumerate(lines, 1) if before != after]
        assert changed and set(changed) <= config_lines and not set(changed) & kernel_lines
        edited = {k.key: k.value for k in tunable_knobs(variant)}
        assert set(edited) == {k.key for k in knobs}
        assert not [c for c in discover(variant).couplings if c.broken(edited)]


def test_one_proposal_reads_the_incumbent_once():
    """The source is scanned once per proposal: knobs, constraints, edits, tables and metadata share it."""
    from orchestrator.providers.tune import TuneProvider
    from orchestrator.providers.tune.discovery import locate
    from tests.providers.conftest import context

    source = ATTENTION.replace("'NUM_BUFFERS': 2, 'NUM_MMA_WARPS': 4", "'NUM_BUFFERS': 3, 'NUM_MMA_WARPS': 4")
    locate.cache_clear()
    trio.run(TuneProvider().propose, context(source=source))
    assert locate.cache_info().misses == 1


WS_KERNEL = "matmul_kernel_tlx_ws"


def ws_choice(case_ids: list[str], **changed: object) -> AutotuneChoice:
    """A choice as the trusted step records one for the warp-specialized GEMM (its H200 choice for 4096^3)."""
    kwargs = {"BM": 128, "BN": 256, "BK": 64, "GROUP_SIZE_M": 8, "NUM_STAGES": 3, "NUM_MMA_WARPS": 8,
              "NUM_MMA_GROUPS": 2, "EPILOGUE_SUBTILE": False, "NUM_CTAS": 1, "USE_WARP_BARRIER": True, **changed}
    return AutotuneChoice(kernel=WS_KERNEL, key=[4096, 4096, 4096], key_values={"M": 4096, "N": 4096, "K": 4096},
                          case_ids=case_ids, config={"kwargs": kwargs, "num_warps": 4, "num_stages": 1, "num_ctas": 1,
                                                     "ctas_per_cga": [1, 1, 1], "maxnreg": None},
                          configs_listed=288, configs_tried=96)


def written_decorator(source: str) -> str:
    """The warp-specialized GEMM's autotune decorator as the tuner wrote it (its list spelled out)."""
    decorator = source[source.index("@triton.autotune(\n    configs=["):]
    return decorator[:decorator.index("@triton.jit")]


def test_a_pinned_list_is_written_as_its_choice_and_that_configuration_is_tuned():
    """Editing the entries of a list whose choice the run pins cannot change what runs (on the H200 55 such
    variants were screened for nothing). The tuner writes the list as the choice for the cases that weigh
    most, a list of one Triton never autotunes, with the entry's own hook, and moves that configuration's
    values; every other line stays."""
    from orchestrator.providers.tune import TuneProvider
    from tests.providers.conftest import CASES, context

    heavy, light = sorted(CASES, key=lambda case: case.weight, reverse=True)[:2]
    choices = (ws_choice([light.case_id]), ws_choice([heavy.case_id]))  # both keys chose alike
    proposal = trio.run(TuneProvider().propose, context(source=WARP_SPECIALIZED, autotune_choices=choices))
    decorator = written_decorator(proposal.source)
    assert "prune_configs_by" not in decorator and decorator.count("triton.Config(") == 1
    assert "pre_hook=matmul_tma_set_block_size_hook" in decorator and "ctas_per_cga=(1, 1, 1)" in decorator
    written = {name: int(value) for name, value in re.findall(r"'(BM|BN|BK|GROUP_SIZE_M|NUM_STAGES)': (\d+)", decorator)}
    assert sum(written[name] != value for name, value in
               {"BM": 128, "BN": 256, "BK": 64, "GROUP_SIZE_M": 8, "NUM_STAGES": 3}.items()) >= 1  # a move of it
    assert f"{WS_KERNEL}'s autotune list written as the one configuration its autotune chose for " \
           f"{heavy.case_id}, {light.case_id}" in proposal.metadata.change
    # NUM_MMA_WARPS, written out now, is read by nothing (the consumer tasks' warps are literals): no knob
    assert f"config:{WS_KERNEL}.NUM_MMA_WARPS#0" in left_alone(proposal.source)
    assert not any("NUM_MMA_WARPS" in knob.key for knob in tunable_knobs(proposal.source))
    # the choice's booleans are literals now: the epilogue's is a switch, written back as False or True;
    # the barrier's stays as written
    subtile = next(k for k in tunable_knobs(proposal.source) if k.name == "EPILOGUE_SUBTILE")
    assert (subtile.kind, subtile.domain) == ("switch", (0, 1)) and "'EPILOGUE_SUBTILE': False" in decorator
    flipped = written_decorator(apply_knob(proposal.source, subtile, 1 - subtile.value))
    assert flipped == decorator.replace("'EPILOGUE_SUBTILE': False", "'EPILOGUE_SUBTILE': True")
    assert f"config:{WS_KERNEL}.USE_WARP_BARRIER#0" in left_alone(proposal.source)

    def around(source: str, opening: str) -> tuple[str, str]:
        return source[:source.index(opening)], source[source.index(f"@triton.jit\ndef {WS_KERNEL}"):]

    assert around(proposal.source, "@triton.autotune(\n    configs=[") == around(
        WARP_SPECIALIZED, "@triton.autotune(\n    configs=get_autotune_configs()")
    # another kernel's choice leaves this list as it is, its entries tuned as before
    untouched = trio.run(TuneProvider().propose, context(source=WARP_SPECIALIZED, autotune_choices=(
        ws_choice([heavy.case_id]).model_copy(update={"kernel": "other_kernel"}),)))
    assert "configs=get_autotune_configs()" in untouched.source


def test_a_pinned_list_whose_keys_chose_differently_keeps_one_configuration_per_key():
    from orchestrator.providers.tune import TuneProvider
    from tests.providers.conftest import CASES, context

    heavy, light = sorted(CASES, key=lambda case: case.weight, reverse=True)[:2]
    other_key = ws_choice([light.case_id], NUM_STAGES=4).model_copy(
        update={"key": [8192, 8192, 1024], "key_values": {"M": 8192, "N": 8192, "K": 1024}})
    proposal = trio.run(TuneProvider().propose, context(source=WARP_SPECIALIZED,
                                                        autotune_choices=(other_key, ws_choice([heavy.case_id]))))
    decorator = written_decorator(proposal.source)
    assert decorator.count("triton.Config(") == 2
    assert "one_per_key={(8192, 8192, 1024): 1}" in decorator and "preprocess_configs" not in decorator
    assert f"configuration its autotune chose for each key (2, one per key by its own prune; another key takes " \
           f"the one for {heavy.case_id})" in proposal.metadata.change


def test_a_pinned_list_that_cannot_be_written_as_one_configuration_is_not_tuned_by_its_entries():
    """A hook that depends on the comprehension's variables cannot be written for one configuration: the
    kernel stays as written, and with nothing else to move the tune ends at once, saying why."""
    from orchestrator.providers.base import ProviderExhausted
    from orchestrator.providers.tune import TuneProvider
    from tests.providers.conftest import CASES, context

    hooked = WARP_SPECIALIZED.replace("pre_hook=matmul_tma_set_block_size_hook,",
                                      "pre_hook=[matmul_tma_set_block_size_hook][num_ctas - num_ctas],")
    assert hooked != WARP_SPECIALIZED
    with pytest.raises(ProviderExhausted) as refused:
        trio.run(TuneProvider().propose, context(source=hooked, autotune_choices=(ws_choice([CASES[0].case_id]),)))
    said = str(refused.value)
    assert f"entries of the autotune list of {WS_KERNEL}" in said and "pins that kernel's own choice" in said


def test_the_tlx_gemm_example_is_the_tutorial_with_an_h200_bundle():
    """examples/tlx_gemm: the pipelined tutorial under its licence header, and the bundle init-bundle wrote for
    it (`--backend cuda --arch h200 --dtype float16`): it loads, and the tuner offers the tutorial's knobs."""
    from orchestrator.bundle.inputs import load_inputs

    example = Path(__file__).resolve().parents[3] / "examples" / "tlx_gemm"
    kernel = (example / "kernel.py").read_text(encoding="utf-8")
    assert kernel.splitlines()[3:] == PIPELINED.splitlines()[3:]  # the same tutorial below each header
    assert (example / "LICENSE").read_text() == (TLX / "LICENSE").read_text()
    inputs = load_inputs(kernel=example / "kernel.py", harness=example / "h200" / "harness.py",
                         cases=example / "h200" / "cases.json", target=example / "h200" / "target.json",
                         budget=None, reference_kernel=None)
    assert (inputs.target.backend, inputs.target.architecture, inputs.target.main_scope) == (
        "cuda", "h200", "matmul_kernel_pipelined_hopper")
    assert {knob.name: knob.value for knob in tunable_knobs(kernel)} == {
        "BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8, "NUM_STAGES": 3,
        "num_warps": 8}


def test_a_switch_move_is_said_as_false_and_true_and_every_kind_has_its_reasons():
    """A proposal moving the epilogue switch reads False -> True, not 0 -> 1; every knob kind the domains know
    has a rationale and a risk each way (a kind without them would fail the proposal that moves it)."""
    from orchestrator.providers.tune import metadata
    from orchestrator.providers.tune.domains import DOMAINS
    from orchestrator.providers.tune.knobs import DOWN, UP

    subtile = next(k for k in tunable_knobs(WARP_SPECIALIZED) if k.key == f"config:{WS_KERNEL}.EPILOGUE_SUBTILE#1")
    said = metadata.proposal_metadata(subtile, UP, 1, "memory", "dram 80 %", [])
    assert said["hypothesis"].startswith("Turning on EPILOGUE_SUBTILE from False to True")
    assert said["change"].startswith("EPILOGUE_SUBTILE False -> True (")
    assert all((kind, direction) in metadata._RATIONALE and (kind, direction) in metadata._RISK
               for kind in DOMAINS for direction in (UP, DOWN))


def test_a_flag_written_true_or_false_at_the_launch_is_a_switch_and_the_callers_data_is_not():
    """A boolean the kernel reads only as an `if` test, passed as `False` at the launch: the author's choice, so
    a switch; passed as the caller's data (`c.is_contiguous()`), it stays theirs."""
    flagged = PIPELINED.replace("                                   NUM_STAGES: tl.constexpr  #\n",
                                "                                   NUM_STAGES: tl.constexpr,  #\n"
                                "                                   EVICT_C: tl.constexpr = False,  #\n", 1)
    flagged = flagged.replace("    tl.store(c_ptrs, c, mask=c_mask)",
                              "    if EVICT_C:\n        tl.store(c_ptrs, c, mask=c_mask, eviction_policy='evict_first')\n"
                              "    else:\n        tl.store(c_ptrs, c, mask=c_mask)", 1)
    launch_end = "            c.stride(1),\n        )\n    return c"
    at = flagged.rindex(launch_end)
    flagged = flagged[:at] + launch_end.replace("        )", "            EVICT_C=False,\n        )") + \
        flagged[at + len(launch_end):]
    assert flagged.count("EVICT_C") == 3
    (switch,) = [k for k in tunable_knobs(flagged) if k.name == "EVICT_C"]
    assert (switch.key, switch.kind, switch.value, switch.domain) == ("launch:matmul.EVICT_C#0", "switch", 0, (0, 1))
    assert changed_lines(flagged, apply_knob(flagged, switch, 1)) == ["-            EVICT_C=False,",
                                                                     "+            EVICT_C=True,"]
    data = flagged.replace("EVICT_C=False,\n        )", "EVICT_C=c.is_contiguous(),\n        )")
    assert data != flagged and not [k for k in tunable_knobs(data) if k.name == "EVICT_C"]
