"""Discovery finds the knobs where each style keeps them, with their kind, domain, constraints and edits."""

from __future__ import annotations

import ast
import json

from orchestrator.providers.tune.constraints import kernel_facts
from orchestrator.providers.tune.discovery import discover
from orchestrator.providers.tune.domains import DOMAINS
from orchestrator.providers.tune.edits import set_literal, set_scaled
from orchestrator.providers.tune.forms import AutotuneConfig
from tests.providers.conftest import VECTOR_ADD
from tests.providers.tune_discovery import changed_lines, drop_lines, kernel


def by_key(source: str):
    return {site.key: site for site in discover(source).sites}


def relations(site) -> dict[str, str]:
    return {c.relation: c.at_launch or c.bound for c in site.constraints}


def test_layer_norm_block_is_pinned_by_the_wrapper_check_and_num_warps_is_an_expression_knob():
    sites = by_key(kernel("layer_norm"))
    block, warps = sites["wrapper:layer_norm.BLOCK_SIZE#0"], sites["wrapper:layer_norm.num_warps#0"]
    assert (block.kind, block.expression, block.edits) == ("block", "min(MAX_FUSED_SIZE, triton.next_power_of_2(N))", ())
    assert relations(block) == {"power_of_two": "", "at_least": "N"}
    assert "layer_norm() raises unless N <= BLOCK_SIZE (line 42)" in block.note
    assert "smallest power of two" in block.note
    assert (warps.kind, warps.site, warps.expression, warps.value) == ("warps", "wrapper",
                                                                       "min(max(BLOCK_SIZE // 256, 1), 8)", None)
    assert warps.edits == ("literal", "table", "scale") and warps.domain == DOMAINS["warps"] == (1, 2, 4, 8, 16, 32)
    # N first: the expression reads BLOCK_SIZE, which reads N
    assert warps.dimensions == ("N", "M") and relations(warps) == {"one_of": "1, 2, 4, 8, 16, 32"}
    assert (warps.line, warps.scope, warps.kernel) == (45, "layer_norm", "layer_norm_fwd")


def test_a_looping_kernel_without_the_wrapper_check_may_shrink_its_block():
    unchecked = drop_lines(kernel("layer_norm"), "if N > BLOCK_SIZE", 'raise RuntimeError("This layer norm')
    block = by_key(unchecked)["wrapper:layer_norm.BLOCK_SIZE#0"]
    assert block.edits == ("literal", "table", "scale") and relations(block) == {"power_of_two": ""}


def test_softmax_block_must_cover_the_row_and_num_warps_is_the_wrapper_literal():
    sites = by_key(kernel("softmax"))
    block, warps = sites["wrapper:softmax.BLOCK_SIZE#0"], sites["wrapper:softmax.num_warps#0"]
    assert block.edits == () and relations(block)["at_least"] == "n_cols"
    assert "masked by col_offsets < n_cols (line 15) with no loop over it" in block.note
    assert (warps.value, warps.edits, warps.line) == (8, ("literal", "table"), 28)
    assert warps.dimensions == ("n_cols", "n_rows")
    grid = sites["grid:softmax.grid#0"]
    assert (grid.kind, grid.expression, grid.edits, grid.note) == ("grid", "(n_rows,)", (), "no size divides it")


def test_matmul_autotune_list_reached_through_its_function_with_its_key_and_grid():
    sites = by_key(kernel("matmul_autotune"))
    configs = sites["autotune:matmul_kernel.configs#0"]
    assert configs.edits == ("configs",) and configs.line == 10
    assert configs.configs == (AutotuneConfig.of({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 16,
                                                  "GROUP_SIZE_M": 4}, num_warps=2, num_stages=2),)
    key = sites["autotune_key:matmul_kernel.key#0"]
    assert (key.expression, key.edits, key.note) == ("['M', 'N', 'K']", (), "re-tunes when M, N, K change")
    entries = {site.name: (site.kind, site.value) for site in sites.values() if site.site == "config"}
    assert entries == {"BLOCK_SIZE_M": ("tile", 32), "BLOCK_SIZE_N": ("tile", 32), "BLOCK_SIZE_K": ("tile", 16),
                       "GROUP_SIZE_M": ("group", 4), "num_stages": ("stages", 2), "num_warps": ("warps", 2)}
    grid = sites["grid:matmul.grid#0"]
    assert grid.expression.startswith("lambda META: (triton.cdiv(M, META['BLOCK_SIZE_M'])")
    assert grid.note == "work per program set by BLOCK_SIZE_M, BLOCK_SIZE_N"


def test_heuristics_entries_are_expression_knobs_keyed_on_the_kernel_arguments():
    discovery = discover(kernel("row_sum_heuristics"))
    sites = {site.key: site for site in discovery.sites}
    block, warps = sites["heuristic:row_sum_kernel.BLOCK_SIZE#0"], sites["heuristic:row_sum_kernel.num_warps#0"]
    assert block.expression == 'min(triton.next_power_of_2(args["n_cols"]), 1024)' and block.kind == "block"
    assert warps.expression == '4 if args["n_cols"] <= 2048 else 8' and warps.kind == "warps"
    assert block.edits == warps.edits == ("literal", "table", "scale")
    assert block.dimensions == warps.dimensions == ('args["n_cols"]',)
    assert discovery.ignored == ("the triton.heuristics entry EVEN_COLS of row_sum_kernel (not a size, warps, "
                                 "stages or group)",)


def test_grouped_matmul_grid_floor_division_makes_the_tiles_divide_the_problem():
    sites = by_key(kernel("grouped_matmul"))
    block_m = sites["wrapper:grouped_matmul.BLOCK_M#0"]  # from `BLOCK_M, BLOCK_N = 32, 32`
    assert (block_m.kind, block_m.value, block_m.edits) == ("tile", 32, ("literal", "table"))
    assert relations(block_m) == {"power_of_two": "", "divides": "M"}
    assert "the grid computes (M // BLOCK_M) (line 36), which drops the remainder" in block_m.constraints[1].reason
    assert {key for key, site in sites.items() if site.site == "launch"} == {
        "launch:grouped_matmul.BLOCK_K#0", "launch:grouped_matmul.GROUP_M#0", "launch:grouped_matmul.num_warps#0"}
    assert sites["grid:grouped_matmul.grid#0"].note == "work per program set by BLOCK_M, BLOCK_N"


def test_persistent_softmax_follows_warmup_and_positional_constexprs_to_the_program_count():
    discovery = discover(kernel("softmax_persistent"))
    sites = {site.key: site for site in discovery.sites}
    assert [launch.arguments for launch in discovery.launches] == [
        ("BLOCK_SIZE=BLOCK_SIZE", "num_stages=num_stages", "num_warps=num_warps"),
        ("BLOCK_SIZE=BLOCK_SIZE", "num_stages=num_stages")]  # the second passes them by position
    assert sites["wrapper:softmax.BLOCK_SIZE#0"].edits == ()
    stages = sites["wrapper:softmax.num_stages#0"]
    assert (stages.kind, stages.expression, stages.edits) == ("stages", "4 if n_cols > 2048 else 2",
                                                              ("literal", "table", "scale"))
    programs = [site for site in discovery.sites if site.kind == "programs"]
    assert [(site.variable, site.expression) for site in programs] == [
        ("num_programs", "NUM_SM * occupancy"), ("num_programs", "min(num_programs, n_rows)")]


def test_the_occupancy_behind_a_persistent_program_count_does_not_constrain_num_warps():
    # the fused-softmax tutorial sizes its persistent grid from the registers the compiled kernel uses
    tutorial = kernel("softmax_persistent").replace("NUM_SM = 132\n", "NUM_SM = 132\nNUM_REGS = 65536\nWARP_SIZE = 32\n")
    tutorial = tutorial.replace("    occupancy = 4\n", "    n_regs = kernel.n_regs\n"
                                "    occupancy = NUM_REGS // (n_regs * WARP_SIZE * num_warps)\n")
    sites = by_key(tutorial)
    warps = sites["wrapper:softmax.num_warps#0"]
    assert relations(warps) == {"one_of": "1, 2, 4, 8, 16, 32"} and warps.edits == ("literal", "table")
    assert sites["grid:softmax.grid#0"].constraints == ()
    assert [site.expression for site in sites.values() if site.kind == "programs"] == [
        "NUM_SM * occupancy", "min(num_programs, n_rows)"]


def test_an_unmasked_tile_the_grid_does_not_divide_by_is_pinned():
    discovery = discover(kernel("head_copy"))
    (size,) = [site for site in discovery.sites if site.name == "D"]
    assert (size.site, size.expression, size.edits) == ("launch", "x.shape[1]", ())
    assert "its grid (x.shape[0],) does not divide by it" in size.note
    # what is left to tune is the num_warps its launch leaves to Triton (no loop: no num_stages)
    (warps,) = discovery.tunable
    assert (warps.key, warps.value, warps.expression, warps.edits) == ("launch:head_copy.num_warps#0", 4, "4", ("literal",))
    assert warps.note == "not passed: Triton's default 4 applies"


def test_module_constants_as_before_and_every_site_is_json():
    source = drop_lines(kernel("softmax"), "BLOCK_SIZE = triton.next_power_of_2")
    source = source.replace("import triton.language as tl\n", "import triton.language as tl\n\nBLOCK_SIZE = 1024\n")
    sites = by_key(source)
    constant = sites["constant:BLOCK_SIZE#0"]
    assert (constant.value, constant.edits, relations(constant)["at_least"]) == (1024, ("literal",), "n_cols")
    json.dumps([site.to_json() for site in sites.values()])
    assert sites["wrapper:softmax.num_warps#0"].to_json()["where"] == "wrapper assignment in softmax at line 29"


def test_a_source_that_does_not_parse_has_no_sites_and_says_why():
    discovery = discover("def softmax(x:\n    return x\n")
    assert discovery.sites == () and discovery.parse_error.endswith("line 1")


def test_a_grid_read_through_a_name_still_divides_by_the_tile():
    source = kernel("head_copy").replace(
        "    head_copy_kernel[(x.shape[0],)](x, out, D=x.shape[1])",
        "    D = 64\n    num_blocks = triton.cdiv(x.numel(), D)\n    head_copy_kernel[(num_blocks,)](x, out, D=D)")
    sites = by_key(source)
    assert sites["wrapper:head_copy.D#0"].edits == ("literal", "table")
    assert sites["grid:head_copy.grid#0"].note == "work per program set by D"


def test_a_wrapper_written_as_an_autograd_function_method():
    lines = kernel("layer_norm").replace("def layer_norm(x, weight, bias, eps=1e-5):",
                                         "class LayerNorm(torch.autograd.Function):\n    @staticmethod\n"
                                         "    def forward(ctx, x, weight, bias, eps=1e-5):").splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("class LayerNorm")) + 3
    source = "".join(lines[:start] + ["    " + line if line.strip() else line for line in lines[start:]])
    sites = by_key(source)
    assert sites["wrapper:forward.num_warps#0"].edits == ("literal", "table", "scale")
    assert sites["wrapper:forward.BLOCK_SIZE#0"].edits == ()


def test_a_comprehension_of_configs_through_filter_gives_each_listed_value_its_own_site():
    source = kernel("attention_comprehension").replace("for BM in [16]", "for BM in [64, 128]")
    sites = by_key(source)
    configs = sites["autotune:_attn_fwd.configs#0"]
    assert configs.edits == () and configs.configs == ()
    assert configs.note == ("a comprehension of triton.Config entries over BLOCK_M in [64, 128]; BLOCK_N in [16]; "
                            "num_warps in [1] (num_stages in STAGE_CHOICES left as written)")
    listed = {key: (site.kind, site.value, site.edits) for key, site in sites.items() if site.site == "config"}
    assert listed == {"config:_attn_fwd.BLOCK_M#0": ("tile", 64, ("literal",)),
                      "config:_attn_fwd.BLOCK_M#1": ("tile", 128, ("literal",)),
                      "config:_attn_fwd.BLOCK_N#0": ("tile", 16, ("literal",)),
                      "config:_attn_fwd.num_warps#0": ("warps", 1, ("literal",))}
    assert relations(sites["config:_attn_fwd.BLOCK_M#1"]) == {"power_of_two": ""}
    assert sites["autotune_key:_attn_fwd.key#0"].note == "re-tunes when N_CTX, HEAD_DIM change"
    fixed = by_key(source.replace("STAGE_CHOICES = [1] if torch.version.hip else [2]", "STAGE_CHOICES = [2, 3]"))
    stages = {key: (site.value, site.line) for key, site in fixed.items() if site.name == "num_stages"}
    assert stages == {"config:_attn_fwd.num_stages#0": (2, 10), "config:_attn_fwd.num_stages#1": (3, 10)}


def test_config_lists_are_followed_through_list_tuple_and_sorted_but_not_other_calls():
    source = kernel("attention_comprehension")
    for wrapped in ("tuple(configs)", "sorted(configs, key=str)", "list(configs)", "configs"):
        changed = source.replace("list(filter(keep, configs))", wrapped)
        assert "config:_attn_fwd.BLOCK_M#0" in by_key(changed), wrapped
    unknown = by_key(source.replace("list(filter(keep, configs))", "prune(configs)"))
    assert "config:_attn_fwd.BLOCK_M#0" not in unknown
    assert unknown["autotune:_attn_fwd.configs#0"].note == "the config list is built in a way the discovery does not follow"
    not_configs = by_key(source.replace("triton.Config({'BLOCK_M': BM, 'BLOCK_N': BN}, num_stages=s, num_warps=w)",
                                        "make_config(BM, BN, s, w)"))
    assert not_configs["autotune:_attn_fwd.configs#0"].note == (
        "a comprehension whose entries are not triton.Config(...) calls")


def test_a_launch_that_reads_its_knobs_from_a_dict_of_configurations_scales_or_replaces_each_read():
    source = kernel("persistent_matmul")
    sites = by_key(source)
    reads = {site.name: (site.kind, site.expression, site.edits) for site in sites.values() if site.site == "launch"}
    assert reads == {name: (kind, f'configs[dtype]["{name}"]', ("literal", "table", "scale")) for name, kind in (
        ("BLOCK_SIZE_M", "tile"), ("BLOCK_SIZE_N", "tile"), ("BLOCK_SIZE_K", "tile"), ("GROUP_SIZE_M", "group"),
        ("num_stages", "stages"), ("num_warps", "warps"))}
    assert changed_lines(source, set_literal(source, "launch:matmul_persistent.BLOCK_SIZE_K#0", 128)) == [
        '-        BLOCK_SIZE_K=configs[dtype]["BLOCK_SIZE_K"],', "+        BLOCK_SIZE_K=128,"]
    assert changed_lines(source, set_scaled(source, "launch:matmul_persistent.num_warps#0", -1)) == [
        '-        num_warps=configs[dtype]["num_warps"],', '+        num_warps=max((configs[dtype]["num_warps"]) // 2, 1),']
    assert sites["grid:matmul_persistent.grid#0"].note == "work per program set by BLOCK_SIZE_M, BLOCK_SIZE_N"


def test_a_kernel_whose_programs_stride_by_its_own_parameter_frees_its_tiles_but_not_its_program_count():
    """Triton's grouped-GEMM style: each program walks the tiles of every problem (`tile_idx += NUM_SM`) and the
    grid launches `META['NUM_SM']` programs. Any tile size covers the work; the program count must stay the
    stride, so it is no knob."""
    source = kernel("grouped_gemm_persistent")
    sites = by_key(source)
    for name in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"):
        site = sites[f"config:grouped_matmul_kernel.{name}#0"]
        assert site.edits == ("literal",) and relations(site) == {"power_of_two": ""}, (name, site.constraints)
    assert not [key for key, site in sites.items() if site.kind == "programs"]
    assert sites["grid:group_gemm_fn.grid#0"].note == "no size divides it"
    # stepping by a literal is no persistent walk: the tiles offset programs the grid does not count, pinned
    stepped = by_key(source.replace("tile_idx += NUM_SM", "tile_idx += 1"))
    assert relations(stepped["config:grouped_matmul_kernel.BLOCK_SIZE_M#0"])["pinned"].startswith("lambda META")
    # Triton's persistent matmul strides a `tl.range` by NUM_SMS: persistent too, its grid still divides by tiles
    facts = kernel_facts(ast.parse(kernel("persistent_matmul")))
    assert [name for name, fact in facts.items() if fact.persistent] == ["matmul_kernel_persistent"]


SCALE_KERNEL = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)
'''


def test_a_wrapper_parameter_default_is_a_knob_edited_where_it_is_written():
    """`def scale(x, block_size=1024, num_warps=4)`: the launch and the grid read the parameter, so its default
    is the knob (a table cannot go there: the shapes are not in scope when a default is evaluated)."""
    source = SCALE_KERNEL + '''

def scale(x, block_size=1024, num_warps=4):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, block_size),)](x, out, n, BLOCK=block_size, num_warps=num_warps)
    return out
'''
    sites = by_key(source)
    block, warps = sites["wrapper:scale.BLOCK#0"], sites["wrapper:scale.num_warps#0"]
    assert (block.kind, block.value, block.edits, relations(block)) == ("block", 1024, ("literal",), {"power_of_two": ""})
    assert (warps.kind, warps.value, warps.edits) == ("warps", 4, ("literal",))
    assert changed_lines(source, set_literal(source, "wrapper:scale.BLOCK#0", 4096)) == [
        "-def scale(x, block_size=1024, num_warps=4):", "+def scale(x, block_size=4096, num_warps=4):"]
    # a parameter without a default is no knob: its value is the caller's
    no_default = by_key(source.replace("block_size=1024, num_warps=4", "block_size, num_warps=4"))
    assert "wrapper:scale.BLOCK#0" not in no_default and no_default["wrapper:scale.num_warps#0"].value == 4


def test_a_launch_unpacking_a_dict_written_where_it_can_see_passes_each_keyword_as_a_knob():
    module_dict = SCALE_KERNEL + '''

META = dict(BLOCK=1024, num_warps=4, num_stages=2)


def scale(x):
    out = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    scale_kernel[grid](x, out, n, **META)
    return out
'''
    sites = by_key(module_dict)
    assert {(s.name, s.kind, s.value, s.edits) for s in sites.values() if s.site == "launch"} == {
        ("BLOCK", "block", 1024, ("literal",)), ("num_warps", "warps", 4, ("literal",)),
        ("num_stages", "stages", 2, ("literal",))}
    block_key = next(key for key, site in sites.items() if site.name == "BLOCK")
    assert changed_lines(module_dict, set_literal(module_dict, block_key, 256)) == [
        "-META = dict(BLOCK=1024, num_warps=4, num_stages=2)", "+META = dict(BLOCK=256, num_warps=4, num_stages=2)"]
    # a dict literal in the wrapper whose values are the wrapper's own names: followed to those assignments
    local_dict = SCALE_KERNEL + '''

def scale(x):
    out = torch.empty_like(x)
    n = x.numel()
    block = 512
    options = {"BLOCK": block, "num_warps": 2}
    scale_kernel[(triton.cdiv(n, block),)](x, out, n, **options)
    return out
'''
    local = by_key(local_dict)
    assert local["wrapper:scale.BLOCK#0"].value == 512 and local["wrapper:scale.BLOCK#0"].edits == ("literal", "table")
    assert local["launch:scale.num_warps#0"].value == 2


def test_launch_options_left_to_triton_are_knobs_only_where_nothing_else_is_tunable():
    """Triton's defaults (num_warps 4, num_stages 3) become knobs of a kernel with no tunable size, num_stages
    only where the kernel loops; never beside a tunable size, under autotune, through **kwargs, or where a
    heuristic sets the option."""
    copy = kernel("head_copy")
    assert [site.key for site in discover(copy).tunable] == ["launch:head_copy.num_warps#0"]
    layer_norm = by_key(kernel("layer_norm"))  # BLOCK_SIZE pinned, num_warps passed, a loop over the columns
    stages = layer_norm["launch:layer_norm.num_stages#0"]
    assert (stages.value, stages.expression, stages.edits, relations(stages)) == (3, "3", ("literal",), {"at_least": "1"})
    assert "launch:layer_norm.num_warps#0" not in layer_norm  # passed: the wrapper's assignment is the knob
    without = kernel("softmax").replace("num_warps=num_warps, ", "")  # a row block, no loop: num_warps alone
    assert [site.key for site in discover(without).tunable] == ["launch:softmax.num_warps#0"]
    assert not any(site.name in ("num_warps", "num_stages") for site in discover(VECTOR_ADD).sites)  # sized
    starred = copy.replace("D=x.shape[1])", "D=x.shape[1], **options)")
    assert discover(starred).tunable == ()
    heuristic = copy.replace("@triton.jit", "@triton.heuristics({'num_warps': lambda args: 2})\n@triton.jit")
    assert [site.key for site in discover(heuristic).tunable] == ["heuristic:head_copy_kernel.num_warps#0"]


def test_adding_a_launch_option_keeps_every_other_byte_and_the_key():
    multiline = kernel("head_copy").replace("head_copy_kernel[(x.shape[0],)](x, out, D=x.shape[1])",
                                            "head_copy_kernel[(x.shape[0],)](\n        x, out,\n        D=x.shape[1],\n    )")
    edited = set_literal(multiline, "launch:head_copy.num_warps#0", 8)
    assert changed_lines(multiline, edited) == ["-        D=x.shape[1],", "+        D=x.shape[1], num_warps=8,"]
    ast.parse(edited)
    again = by_key(edited)["launch:head_copy.num_warps#0"]
    assert (again.value, again.expression, again.note) == (8, "8", "")


def test_a_walk_by_a_parameter_inside_a_three_argument_range_loop_is_persistent():
    """`tile += NUM_SM` directly in `for _ in range(0, n_steps, 1)`: the range's own start is no program id,
    and the walk inside the same loop is still found."""
    source = '''\
import triton
import triton.language as tl


@triton.jit
def walk(x_ptr, n_steps, NUM_SM: tl.constexpr, BLOCK: tl.constexpr):
    tile = tl.program_id(0)
    for _ in range(0, n_steps, 1):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)
        tile += NUM_SM
'''
    facts = kernel_facts(ast.parse(source))["walk"]
    assert facts.strided_axes == frozenset({0}) and facts.persistent


def test_a_comprehension_over_itertools_product_follows_each_factor_that_is_a_literal_list():
    # The style of scripts/gpu/autotune_compile_threads.py's list, common in kernel libraries: each factor of the
    # product is followed as its own loop would be.
    loops = "    for BM in [16]\\\n    for BN in [16]\\\n    for s in STAGE_CHOICES\\\n    for w in [1]\\\n"
    source = kernel("attention_comprehension")
    assert loops in source
    product = "import itertools\n" + source.replace(
        loops, "    for BM, BN, s, w in itertools.product([16, 32], [16], STAGE_CHOICES, [1, 2])\\\n")
    sites = by_key(product)
    listed = sorted((site.name, site.value) for site in sites.values() if site.site == "config")
    assert listed == [("BLOCK_M", 16), ("BLOCK_M", 32), ("BLOCK_N", 16), ("num_warps", 1), ("num_warps", 2)]
    assert sites["autotune:_attn_fwd.configs#0"].note == (
        "a comprehension of triton.Config entries over BLOCK_M in [16, 32]; BLOCK_N in [16]; num_warps in [1, 2] "
        "(num_stages in STAGE_CHOICES left as written)")
    assert changed_lines(product, set_literal(product, "config:_attn_fwd.BLOCK_M#1", 64)) == [
        "-    for BM, BN, s, w in itertools.product([16, 32], [16], STAGE_CHOICES, [1, 2])\\",
        "+    for BM, BN, s, w in itertools.product([16, 64], [16], STAGE_CHOICES, [1, 2])\\"]
    # values that go together, (BM, BN) pairs, stay as written; the other factors are still followed
    paired = "import itertools\n" + source.replace(
        loops, "    for (BM, BN), s, w in itertools.product([(16, 16), (32, 16)], STAGE_CHOICES, [1, 2])\\\n")
    names = sorted((site.name, site.value) for site in by_key(paired).values() if site.site == "config")
    assert names == [("num_warps", 1), ("num_warps", 2)]


NEVER_READ = '''
import triton
import triton.language as tl


def set_hooked(nargs):
    nargs["out"].fill_(nargs["HOOKED_BLOCK"] * 0)


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 64, "UNUSED_BLOCK": 32, "HOOKED_BLOCK": 16}, num_warps=4,
                                        pre_hook=set_hooked)], key=["n"])
@triton.jit
def copy_kernel(x, out, n, BLOCK_SIZE: tl.constexpr, UNUSED_BLOCK: tl.constexpr, HOOKED_BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(out + offsets, tl.load(x + offsets, mask=offsets < n), mask=offsets < n)


def copy(x, out):
    copy_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK_SIZE"]),)](x, out, x.numel())
    return out
'''


def test_a_config_entry_the_kernel_never_reads_is_left_as_written_with_the_reason():
    """A value nothing reads changes nothing that runs (fbtriton's warp-specialized GEMM carries NUM_MMA_WARPS
    so, its tasks' warps written as literals): a search slot spent on it is wasted. An entry a hook reads by its
    string stays a knob."""
    sites = by_key(NEVER_READ)
    unused = sites["config:copy_kernel.UNUSED_BLOCK#0"]
    assert unused.edits == () and unused.note.startswith("UNUSED_BLOCK is a parameter of copy_kernel that its body "
                                                         "never reads, and no other code of the file names it")
    assert sites["config:copy_kernel.BLOCK_SIZE#0"].edits and sites["config:copy_kernel.HOOKED_BLOCK#0"].edits
