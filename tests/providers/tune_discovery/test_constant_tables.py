"""Per-shape tables for module constants: a constant a wrapper's launch passes by name (`num_warps=NUM_WARPS`)
and the file reads nowhere else takes its tables at that launch argument, since the module cannot see the
shapes. That is where `@triton.autotune` beat every single configuration of the softmax example on the H200
(it picks one per row length): the tuner can now write that choice as code.

The landscape stands in for the GPU: each row length has its best warps, and what screening observed of the
wrapper's locals is what `sandbox_worker/observe.py` records (`softmax.n_cols`). Discovery, the composition
and the edits are real.
"""

from __future__ import annotations

import ast

import trio

from orchestrator.providers.tune.discovery import discover
from orchestrator.providers.tune.knobs import apply_knobs, tunable_knobs
from orchestrator.providers.tune.search import FamilySearch
from orchestrator.providers.tune.tables import Run, compose_table, takes_tables
from protocol.worker import ScreenedVariant
from tests.providers.tune_discovery.test_family_search import Result

KERNEL = '''\
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 1


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * stride + columns, mask=columns < n_cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + columns, e / tl.sum(e, axis=0), mask=columns < n_cols)


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](x, out, n_cols, x.stride(0), BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
    return out
'''

CASES = {"square": (4096, 4096), "long": (8192, 1000), "ragged": (3001, 777)}  # case -> (rows, columns)
BEST_WARPS = {4096: 8, 1000: 2, 777: 2}
WARPS_KEY = "constant:NUM_WARPS#0"


def launched(source: str, n_cols: int) -> dict[str, int]:
    """What the launch passes for an input of `n_cols` columns: its keywords evaluated over the module's
    constants (a per-shape table as written)."""
    tree = ast.parse(source)
    names: dict[str, object] = {"n_cols": n_cols}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant):
            names[statement.targets[0].id] = statement.value.value  # type: ignore[attr-defined]
    launch = next(node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript))
    return {k.arg: eval(compile(ast.Expression(k.value), "<launch>", "eval"), {}, names)  # noqa: S307
            for k in launch.keywords if k.arg}


def modelled_us(rows: int, cols: int, warps: int) -> float:
    """Each step of warps away from the row length's best costs 30 %."""
    return rows * cols / 1000 * (1 + 0.3 * abs(warps.bit_length() - BEST_WARPS[cols].bit_length()))


def run_of(source: str, warps: int) -> Run:
    """`source` with NUM_WARPS at `warps`, timed by the landscape."""
    medians = {case: modelled_us(rows, cols, warps) for case, (rows, cols) in CASES.items()}
    observed = {case: {"softmax.n_rows": rows, "softmax.n_cols": cols} for case, (rows, cols) in CASES.items()}
    return Run(config=(("constant:BLOCK_SIZE#0", 1024), (WARPS_KEY, warps)), medians_us=medians, observed=observed)


def test_a_constant_passed_by_name_takes_its_table_at_the_launch():
    knobs = tunable_knobs(KERNEL)
    assert [knob.key for knob in knobs] == ["constant:BLOCK_SIZE#0", WARPS_KEY]
    assert takes_tables(KERNEL, knobs)  # so screening observes the wrapper's locals
    sites = {site.key: site for site in discover(KERNEL).sites}
    assert sites["constant:num_warps#0"].table_site == "launch:softmax.num_warps#0"
    assert sites["launch:softmax.num_warps#0"].edits == ("table",)  # a place for tables, no knob of its own
    control, runs = run_of(KERNEL, 1), [run_of(KERNEL, warps) for warps in (2, 8)]
    plan = compose_table(KERNEL, knobs, control, runs, {}, min_gain=0.03)
    assert plan is not None and plan.label == "NUM_WARPS by n_cols {777: 2, 1000: 2, 4096: 8}"
    assert "num_warps={777: 2, 1000: 2, 4096: 8}.get(n_cols, NUM_WARPS)" in plan.source
    for case, (_, cols) in CASES.items():  # each row length launches with its own best warps
        assert launched(plan.source, cols)["num_warps"] == BEST_WARPS[cols], case
    assert launched(plan.source, 2048)["num_warps"] == 1  # a shape outside the table keeps the constant
    changed = [line for line in plan.source.splitlines() if line not in KERNEL.splitlines()]
    assert len(changed) == 1


def test_once_tabled_the_constant_is_only_the_fallback_and_the_table_is_the_knob():
    control, runs = run_of(KERNEL, 1), [run_of(KERNEL, warps) for warps in (2, 8)]
    tabled = compose_table(KERNEL, tunable_knobs(KERNEL), control, runs, {}, min_gain=0.03).source
    knobs = {knob.key: knob for knob in tunable_knobs(tabled)}
    assert set(knobs) == {"constant:BLOCK_SIZE#0", "launch:softmax.num_warps#0"}
    assert knobs["launch:softmax.num_warps#0"].expression == "{777: 2, 1000: 2, 4096: 8}.get(n_cols, NUM_WARPS)"
    fallback = discover(tabled).site("constant:NUM_WARPS#0")
    assert fallback.edits == () and fallback.note.startswith("NUM_WARPS is read only as the fallback of per-shape")
    doubled = apply_knobs(tabled, {"launch:softmax.num_warps#0": 1})  # scaling the table scales every entry
    assert [launched(doubled, cols)["num_warps"] for cols in (777, 4096, 2048)] == [4, 16, 2]


def test_a_constant_read_elsewhere_too_takes_no_table():
    """The grid reads BLOCK_SIZE as well: a table at the launch alone would part the kernel's block from the
    grid's, so the constant keeps one value for every shape."""
    gridded = KERNEL.replace("softmax_kernel[(n_rows,)]", "softmax_kernel[(triton.cdiv(n_rows, BLOCK_SIZE),)]")
    sites = {site.key: site for site in discover(gridded).sites}
    assert sites["constant:BLOCK_SIZE#0"].table_site == "" and "launch:softmax.BLOCK_SIZE#0" not in sites
    assert sites["constant:num_warps#0"].table_site == "launch:softmax.num_warps#0"
    twice = KERNEL.replace("    return out\n", "    softmax_kernel[(n_rows,)](out, out, n_cols, out.stride(0), "
                                               "BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)\n    return out\n")
    assert all(not site.table_site for site in discover(twice).sites)  # two launches: no table at either


def test_the_search_proposes_the_table_first():
    """A family screened with the wrapper's locals observed, as the run's screening does: the composed table
    beats every single configuration, so it is what the search sends to the gate."""
    asked: list[bool] = []

    async def screens(variants: list[tuple[str, str]], *, observe: bool = False) -> list[Result]:
        asked.append(observe)
        results = []
        for index, (label, source) in enumerate(variants):
            medians = {case: modelled_us(rows, cols, launched(source, cols)["num_warps"])
                       for case, (rows, cols) in CASES.items()}
            observed = {case: {"softmax.n_rows": rows, "softmax.n_cols": cols} for case, (rows, cols) in CASES.items()}
            results.append(Result(label, source, ScreenedVariant(variant_id=f"v{index:02d}", status="ok",
                                                                 medians_us=medians, observed=observed)))
        return results

    async def main():
        return await FamilySearch(seed=3).next_screened(tunable_knobs(KERNEL), KERNEL, screens, family_size=12,
                                                        excluded=lambda s: False)

    proposal = trio.run(main)
    assert asked[0] is True
    assert proposal.single_relative is not None and proposal.relative < proposal.single_relative
    assert "}.get(n_cols, NUM_WARPS)" in proposal.source
    for case, (rows, cols) in CASES.items():
        assert proposal.medians_us[case] == modelled_us(rows, cols, BEST_WARPS[cols]), case
