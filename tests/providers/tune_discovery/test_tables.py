"""Per-shape tables (orchestrator/providers/tune/tables.py): each group of cases takes the configuration that
screened fastest on it, when no single configuration serves every case as well.

The kernel is a row-wise norm in the tutorial style: the wrapper computes `BLOCK_SIZE` from `N` and
`num_warps` from `BLOCK_SIZE`. The landscape stands in for the GPU (8 warps suit 8192-column rows, 1 warp
1024-column ones); what screening observed of the wrapper's locals is what `sandbox_worker/observe.py`
records when the real wrapper runs (tests/judged/test_screening.py shows it in a real worker), computed
here by running the wrapper's own arithmetic. The search, optuna, the edits and the composition are real.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import trio

from orchestrator.providers.tune.discovery import discover
from orchestrator.providers.tune.forms import scaled_code, scaled_value
from orchestrator.providers.tune.knobs import tunable_knobs
from orchestrator.providers.tune.search import FamilySearch
from orchestrator.providers.tune.tables import Run, compose_table, takes_tables
from protocol.worker import ScreenedVariant
from tests.providers.tune_discovery.test_family_search import Result

KERNEL = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _row_norm(X, Y, stride, N, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(X + row * stride + cols, mask=cols < N, other=0.).to(tl.float32)
    y = x / tl.sqrt(tl.sum(x * x, axis=0) / N + 1e-5)
    tl.store(Y + row * stride + cols, y, mask=cols < N)


def row_norm(x):
    y = torch.empty_like(x)
    M, N = x.shape
    BLOCK_SIZE = triton.next_power_of_2(N)
    num_warps = min(max(BLOCK_SIZE // 256, 1), 8)
    _row_norm[(M,)](x, y, x.stride(0), N, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return y
'''

CASES = {"wide": (64, 8192), "narrow": (64, 1024), "narrow_tall": (4096, 1024)}  # case -> (M, N)
BEST_WARPS = {8192: 8, 1024: 1}


def wrapper_locals(source: str, m: int, n: int) -> dict[str, int]:
    """The wrapper's integer locals for an (M, N) input: its own assignments, evaluated in order (the
    `num_warps` line as the variant wrote it)."""
    function = next(node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)
                    and node.name == "row_norm")
    values = {"M": m, "N": n}
    names = {"min": min, "max": max, "triton": type("triton", (), {"next_power_of_2": staticmethod(
        lambda v: 1 << (v - 1).bit_length())}), **values}
    for statement in function.body:
        if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name) \
                and statement.targets[0].id in ("BLOCK_SIZE", "num_warps"):
            value = eval(compile(ast.Expression(statement.value), "<wrapper>", "eval"), {}, names)  # noqa: S307
            names[statement.targets[0].id] = values[statement.targets[0].id] = value
    return {f"row_norm.{name}": value for name, value in values.items()}


def modelled_us(m: int, n: int, warps: int) -> float:
    """Each step of warps away from the shape's best costs 30 %."""
    return m * n / 1000 * (1 + 0.3 * abs(warps.bit_length() - BEST_WARPS[n].bit_length()))


class Screens:
    def __init__(self) -> None:
        self.observe_asked: list[bool] = []
        self.families: list[list[str]] = []

    async def __call__(self, variants: list[tuple[str, str]], *, observe: bool = False) -> list[Result]:
        self.observe_asked.append(observe)
        self.families.append([source for _, source in variants])
        results = []
        for index, (label, source) in enumerate(variants):
            observed = {case: wrapper_locals(source, m, n) for case, (m, n) in CASES.items()}
            medians = {case: modelled_us(m, n, observed[case]["row_norm.num_warps"])
                       for case, (m, n) in CASES.items()}
            variant = ScreenedVariant(variant_id=f"v{index:02d}", status="ok", medians_us=medians,
                                      observed=observed if observe else {})
            results.append(Result(label, source, variant))
        return results


def first_proposal(source: str, screens: Screens, search: FamilySearch | None = None):
    search = search or FamilySearch(seed=3)

    async def main():
        return await search.next_screened(tunable_knobs(source), source, screens, family_size=6,
                                          excluded=lambda s: False)

    return trio.run(main), search


def test_a_table_keyed_on_n_gives_each_width_its_own_warps_and_goes_first():
    screens = Screens()
    proposal, _ = first_proposal(KERNEL, screens)
    assert screens.observe_asked == [True]  # a site that takes a table: screening observes the locals
    assert "num_warps = {1024: 1, 8192: 8}.get(N, min(max(BLOCK_SIZE // 256, 1), 8))" in proposal.source
    assert proposal.screen_label == "num_warps by N {1024: 1, 8192: 8}"
    assert proposal.single_relative is not None and proposal.relative < proposal.single_relative
    # each case takes its shape's best: the narrow ones at 1 warp, the wide one as the author had it
    for case, (m, n) in CASES.items():
        assert proposal.medians_us[case] == modelled_us(m, n, BEST_WARPS[n])
    # the only change is the one line, and every shape not in the table keeps the author's expression
    changed = [line for line in proposal.source.splitlines() if line not in KERNEL.splitlines()]
    assert len(changed) == 1


def test_after_the_table_is_promoted_the_search_starts_over_around_it():
    screens = Screens()
    proposal, search = first_proposal(KERNEL, screens)
    assert search.queue, "the single configurations stay queued behind the table"
    after, _ = first_proposal(proposal.source, screens, search)
    # what was queued was measured against configurations the table replaced: dropped; the next family is
    # led by the table (its control) and screens every step of the one knob around it, none faster
    assert after is None and search.spent and not search.queue
    knob = next(k for k in tunable_knobs(proposal.source) if k.name == "num_warps")
    assert len(screens.families) == 2 and screens.families[1][0] == proposal.source
    assert len(screens.families[1]) == len(knob.domain) + 1 and "}.get(N, " in knob.expression  # + the closing control


def runs_for(warps_by_step: dict[int, dict[str, int]], cases: dict[str, tuple[int, int]] | None = None
             ) -> tuple[Run, list[Run]]:
    """A control at the author's warps (8 for 8192 columns, 4 for 1024) and one run per step in
    `warps_by_step` (step -> case -> warps), timed by the landscape."""
    cases = cases or CASES

    def run(step: int, warps: dict[str, int]) -> Run:
        observed = {case: {"row_norm.M": m, "row_norm.N": n, "row_norm.BLOCK_SIZE": n,
                           "row_norm.num_warps": warps[case]} for case, (m, n) in cases.items()}
        return Run(config=(("wrapper:row_norm.num_warps#0", step),),
                   medians_us={case: modelled_us(m, n, warps[case]) for case, (m, n) in cases.items()},
                   observed=observed)

    control = run(0, {case: 8 if n == 8192 else 4 for case, (_, n) in cases.items()})
    return control, [run(step, warps) for step, warps in warps_by_step.items()]


def test_no_table_when_one_configuration_is_best_for_every_shape():
    global BEST_WARPS
    saved, BEST_WARPS = BEST_WARPS, {8192: 2, 1024: 1}  # a quarter of the author's warps suits both widths
    try:
        control, runs = runs_for({-2: {"wide": 2, "narrow": 1, "narrow_tall": 1},
                                  -1: {"wide": 4, "narrow": 2, "narrow_tall": 2}})
        assert compose_table(KERNEL, tunable_knobs(KERNEL), control, runs, {}, min_gain=0.03) is None
    finally:
        BEST_WARPS = saved


def test_no_table_without_the_dimension_observed_in_every_case():
    control, runs = runs_for({-2: {"wide": 2, "narrow": 1, "narrow_tall": 1}})
    del control.observed["narrow"]["row_norm.N"], control.observed["narrow"]["row_norm.M"]
    assert compose_table(KERNEL, tunable_knobs(KERNEL), control, runs, {}, min_gain=0.03) is None


def test_the_table_is_keyed_on_the_dimension_that_separates_the_shapes():
    control, runs = runs_for({-2: {"wide": 2, "narrow": 1, "narrow_tall": 1}})
    plan = compose_table(KERNEL, tunable_knobs(KERNEL), control, runs, {}, min_gain=0.03)
    # keyed on M the 64-row cases cannot part (8192 and 1024 columns): N separates them, and only N does
    assert plan is not None and "}.get(N, " in plan.source
    assert plan.label == "num_warps by N {1024: 1, 8192: 8}"


def test_the_dimension_with_fewer_groups_wins_when_as_fast():
    """Every case has its own M, so a table on M fits as well as one on N; N's two entries cover the
    three cases and say what the table is about."""
    cases = {"wide": (64, 8192), "narrow": (128, 1024), "narrow_tall": (4096, 1024)}
    control, runs = runs_for({-2: {"wide": 2, "narrow": 1, "narrow_tall": 1}}, cases)
    plan = compose_table(KERNEL, tunable_knobs(KERNEL), control, runs, {}, min_gain=0.03)
    assert plan is not None and plan.label == "num_warps by N {1024: 1, 8192: 8}"
    del control.observed["narrow"]["row_norm.N"]  # N not seen in one case: only M is left to key on
    assert compose_table(KERNEL, tunable_knobs(KERNEL), control, runs, {}, min_gain=0.03).label == (
        "num_warps by M {64: 8, 128: 1, 4096: 1}")


def test_rows_that_happen_to_differ_do_not_key_the_table():
    """Two cases, 4096 and 4097 rows: M separates them as well as N, but `num_warps` reads `BLOCK_SIZE`,
    which reads `N` (discovery follows the wrapper's assignments), so the table is keyed on N."""
    cases = {"square": (4096, 8192), "ragged": (4097, 1024)}
    control, runs = runs_for({-2: {"square": 2, "ragged": 1}}, cases)
    plan = compose_table(KERNEL, tunable_knobs(KERNEL), control, runs, {}, min_gain=0.03)
    assert plan is not None and plan.label == "num_warps by N {1024: 1, 8192: 8}"


def test_a_table_that_spares_a_slowed_case_is_proposed_though_no_faster_overall():
    """The best single configuration is as fast over the cases but slows the wide one by 2 %: the table
    keeps the wide case's configuration, which is what the gate's per-case profile check asks."""
    control = Run(config=(("wrapper:row_norm.num_warps#0", 0),),
                  medians_us={"wide": 100.0, "narrow": 100.0, "narrow_tall": 100.0},
                  observed={case: {"row_norm.N": n, "row_norm.num_warps": 8 if n == 8192 else 4}
                            for case, (_, n) in CASES.items()})
    single = Run(config=(("wrapper:row_norm.num_warps#0", -1),),
                 medians_us={"wide": 102.0, "narrow": 90.0, "narrow_tall": 90.0},
                 observed={case: {"row_norm.N": n, "row_norm.num_warps": 4 if n == 8192 else 2}
                           for case, (_, n) in CASES.items()})
    plan = compose_table(KERNEL, tunable_knobs(KERNEL), control, [single], {}, min_gain=0.03)
    assert plan is not None and plan.label == "num_warps by N {1024: 2, 8192: 8}"
    assert plan.medians_us == {"wide": 100.0, "narrow": 90.0, "narrow_tall": 90.0}
    quieter = Run(config=single.config, medians_us={**single.medians_us, "wide": 100.2}, observed=single.observed)
    assert compose_table(KERNEL, tunable_knobs(KERNEL), control, [quieter], {}, min_gain=0.03) is None


def test_a_module_constant_takes_a_table_only_where_its_launch_argument_is_its_one_read():
    """Passed by name at the wrapper's launch, a constant's tables go there (test_constant_tables.py); read by
    the wrapper as well, it keeps one value for every shape and screening observes nothing for it."""
    constant = KERNEL.replace("    num_warps = min(max(BLOCK_SIZE // 256, 1), 8)\n", "").replace(
        "num_warps=num_warps", "num_warps=NUM_WARPS").replace("\n\n@triton.jit", "\nNUM_WARPS = 4\n\n@triton.jit")
    assert takes_tables(constant, tunable_knobs(constant))
    read_twice = constant.replace("    y = torch.empty_like(x)\n", "    y = torch.empty_like(x)\n    assert NUM_WARPS <= 8\n")
    assert read_twice != constant and not takes_tables(read_twice, tunable_knobs(read_twice))
    assert takes_tables(KERNEL, tunable_knobs(KERNEL))


def test_the_models_own_arithmetic_matches_the_scaled_expression():
    """The landscape's observed `num_warps` is the edited line's value (so the table's entries are what the
    screened variant launched with)."""
    halved = KERNEL.replace("min(max(BLOCK_SIZE // 256, 1), 8)",
                            scaled_code("min(max(BLOCK_SIZE // 256, 1), 8)", "warps", -1))
    assert wrapper_locals(halved, 64, 8192)["row_norm.num_warps"] == 4
    assert wrapper_locals(KERNEL, 64, 1024)["row_norm.num_warps"] == 4


def test_a_launch_argument_naming_a_local_takes_the_local_scaled_by_the_step():
    """The Liger style (examples/tutorials/rms_norm.py): a helper returns `num_warps`, the launch passes
    `num_warps=num_warps`. The knob is the launch argument; the wrapper's local is what the helper returned,
    unscaled, so each table entry is that local scaled by the group's step, as the argument computes it."""
    source = (Path(__file__).resolve().parents[3] / "examples" / "tutorials" / "rms_norm.py").read_text()
    key = "launch:rms_norm.num_warps#0"
    assert key in {k.key for k in tunable_knobs(source)}
    helper = {"wide": 16, "narrow": 4}  # calculate_settings() for 8192 and 1024 columns
    shapes = {"wide": (64, 8192), "narrow": (64, 1024)}

    def run(step: int, times: dict[str, float]) -> Run:
        observed = {case: {"rms_norm.n_rows": m, "rms_norm.n_cols": n, "rms_norm.num_warps": helper[case],
                           "rms_norm.BLOCK_SIZE": n} for case, (m, n) in shapes.items()}
        return Run(config=(("launch:rms_norm.BLOCK_SIZE#0", 0), (key, step)), medians_us=times, observed=observed)

    control = run(0, {"wide": 100.0, "narrow": 10.0})
    runs = [run(-2, {"wide": 130.0, "narrow": 6.0}), run(1, {"wide": 80.0, "narrow": 14.0})]
    plan = compose_table(source, tunable_knobs(source), control, runs, {}, min_gain=0.03)
    assert plan is not None and plan.label == "num_warps by n_cols {1024: 1, 8192: 32}"
    assert "num_warps={1024: 1, 8192: 32}.get(n_cols, num_warps)" in plan.source


def test_scaled_values_are_what_the_scaled_code_computes():
    for kind in ("warps", "stages", "tile", "block"):
        for value in (1, 2, 3, 4, 8, 16, 32, 64):
            for step in range(-3, 4):
                written = eval(scaled_code("v", kind, step), {"v": value, "min": min, "max": max})  # noqa: S307
                assert scaled_value(value, kind, step) == written, (kind, value, step)


def test_a_literal_warp_count_is_keyed_on_the_shape_the_block_size_reads():
    """`num_warps = 8` reads no shape; the wrapper's `BLOCK_SIZE` reads N, so N comes before M (and a table
    for a 4096-row and a 4097-row case is keyed on their widths, not on their row counts)."""
    literal = KERNEL.replace("num_warps = min(max(BLOCK_SIZE // 256, 1), 8)", "num_warps = 8")
    site = next(site for site in discover(literal).sites if site.name == "num_warps")
    assert site.edits == ("literal", "table") and site.dimensions == ("N", "M")
    key = next(k.key for k in tunable_knobs(literal) if k.name == "num_warps")
    cases = {"square": (4096, 8192), "ragged": (4097, 1024)}

    def run(warps: int) -> Run:
        return Run(config=((key, warps),), medians_us={c: modelled_us(m, n, warps) for c, (m, n) in cases.items()},
                   observed={c: {"row_norm.M": m, "row_norm.N": n} for c, (m, n) in cases.items()})

    plan = compose_table(literal, tunable_knobs(literal), run(8), [run(1), run(2)], {}, min_gain=0.03)
    assert plan is not None and plan.label == "num_warps by N {1024: 1, 8192: 8}"
    assert "num_warps = {1024: 1, 8192: 8}.get(N, 8)" in plan.source


def test_the_persistent_softmaxs_program_count_is_tabled_by_the_variable_it_assigns():
    """The fused-softmax tutorial's wrapper assigns `num_programs` twice (the sites `programs#0` and `#1`):
    the observed local is the variable's name, not the site's. Twice the programs suit the narrow rows, the
    author's count the wide ones; the table gives each its own and leaves the warps as they were."""
    source = (Path(__file__).parent / "kernels" / "softmax_persistent.py").read_text()
    knobs = tunable_knobs(source)
    control_config = {k.key: k.value for k in knobs}
    shapes = {"wide": (4096, 4096), "narrow": (8192, 1000)}

    def run(programs_step: int, times: dict[str, float]) -> Run:
        config = {**control_config, "wrapper:softmax.programs#1": programs_step}
        observed = {case: {"softmax.n_rows": m, "softmax.n_cols": n, "softmax.num_warps": 8,
                           "softmax.num_stages": 4 if n > 2048 else 2,
                           "softmax.num_programs": scaled_value(min(132 * 4, m), "programs", programs_step)}
                    for case, (m, n) in shapes.items()}
        return Run(config=tuple(sorted(config.items())), medians_us=times, observed=observed)

    control = run(0, {"wide": 40.0, "narrow": 12.0})
    runs = [run(1, {"wide": 41.0, "narrow": 9.0}), run(-1, {"wide": 44.0, "narrow": 13.0})]
    plan = compose_table(source, knobs, control, runs, {}, min_gain=0.03)
    assert plan is not None and plan.label == "programs by n_cols {1000: 1056, 4096: 528}"
    assert "num_programs = {1000: 1056, 4096: 528}.get(n_cols, min(num_programs, n_rows))" in plan.source
    assert plan.medians_us == {"wide": 40.0, "narrow": 9.0}


def test_the_h200_layer_norm_family_replays_to_the_table_the_run_proposed():
    """The first family of the tutorial layer norm's 480 s run on the H200 (its medians and observed locals,
    docs/data/h200-search-2026-12-02-tables/), composed again here: the same table the run proposed and promoted
    (`1-tutorial-layer-norm-480s-winner.patch`)."""
    root = Path(__file__).resolve().parents[3]
    data = root / "docs" / "data" / "h200-search-2026-12-02-tables"
    replayed = subprocess.run(
        [sys.executable, str(root / "scripts" / "replay_tables.py"), "--source",
         str(root / "examples" / "tutorials" / "layer_norm.py"), "--screening",
         str(data / "1-tutorial-layer-norm-480s-screening.jsonl"), "--cases", str(data / "tutorial-norm-cases.json")],
        capture_output=True, text=True, check=True).stdout
    assert replayed.startswith("table: num_stages=5, num_warps by N {1000: 1, 4096: 16}; composed 1.1162x")
    added = [line[1:].strip() for line in (data / "1-tutorial-layer-norm-480s-winner.patch").read_text().splitlines()
             if line.startswith("+") and not line.startswith("+++")]
    assert all(line in replayed for line in added)
