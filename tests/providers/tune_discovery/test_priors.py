"""What the joint search screens first and what it never screens (orchestrator/providers/tune/priors.py), on
the examples' kernels and the tutorial-style kernels of tests/providers/tune_discovery/kernels/, with the
real search, edits and TPE (the screen is a modelled landscape, as in test_family_search.py)."""

from __future__ import annotations

from pathlib import Path

import trio

from orchestrator.providers.tune.knobs import tunable_knobs
from orchestrator.providers.tune.priors import (
    MAX_ELEMENTS,
    MIN_ELEMENTS,
    TILE_CONFIGS,
    Roles,
    prior_configs,
)
from orchestrator.providers.tune.search import FamilySearch
from tests.providers.tune_discovery.test_family_search import KERNEL, Screens, knob_values

ROOT = Path(__file__).resolve().parents[3]
KERNELS = Path(__file__).resolve().parent / "kernels"


def source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def by_name(config, knobs) -> dict[str, int]:
    names = {k.key: k.name for k in knobs}
    return {names[key]: value for key, value in config}


def test_a_matmul_is_screened_first_at_the_usual_tiles_in_their_order():
    knobs = tunable_knobs(source(ROOT / "examples" / "matmul" / "kernel.py"))
    priors = [by_name(config, knobs) for config in prior_configs(knobs)]
    expected = [dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K", "NUM_WARPS", "NUM_STAGES", "GROUP_M"), row, strict=True))
                for row in TILE_CONFIGS]
    assert priors == expected


def test_a_one_block_kernel_is_screened_first_at_8_and_16_elements_per_thread():
    knobs = tunable_knobs(source(ROOT / "examples" / "softmax" / "kernel.py"))
    priors = [by_name(config, knobs) for config in prior_configs(knobs)]
    assert [(p["BLOCK_SIZE"], p["NUM_WARPS"]) for p in priors] == [(2048, 4), (1024, 4), (4096, 8), (2048, 8)]
    assert all(p["NUM_STAGES"] == 1 for p in priors)  # knobs without a role keep the incumbent's value


def test_priors_stay_inside_the_domains_the_code_allows():
    # the wrapper's `M // BLOCK_M` grid pins the tiles to 16 or 32; the priors move to the nearest allowed
    knobs = tunable_knobs(source(KERNELS / "grouped_matmul.py"))
    domains = {k.key: k.domain for k in knobs}
    priors = prior_configs(knobs)
    assert priors, "a tiled kernel with one warp knob gets priors"
    for config in priors:
        assert all(value in domains[key] for key, value in config)
        assert Roles(knobs).plausible(config)
    assert {by_name(c, knobs)["BLOCK_M"] for c in priors} == {32}


def test_the_bounds_on_work_per_thread():
    knobs = tunable_knobs(KERNEL)
    keys = {k.name: k.key for k in knobs}

    def config(m: int, n: int, warps: int):
        return tuple(sorted({keys["BLOCK_M"]: m, keys["BLOCK_N"]: n, keys["NUM_WARPS"]: warps}.items()))

    roles = Roles(knobs)
    assert roles.plausible(config(128, 256, 8))  # 128 elements per thread: the upper bound itself
    assert not roles.plausible(config(256, 256, 4))  # 512: the fp32 accumulator spills
    assert roles.plausible(config(32, 32, 4))  # 8: the lower bound itself
    assert not roles.plausible(config(32, 32, 32))  # one element per thread: 1024 threads for a 32x32 tile


def test_the_joint_search_never_screens_an_implausible_configuration():
    search, screens = FamilySearch(seed=3), Screens()
    incumbent, seen = KERNEL, set()

    async def main() -> None:
        nonlocal incumbent
        for _ in range(6):
            screened = await search.next_screened(tunable_knobs(incumbent), incumbent, screens, family_size=8,
                                                  excluded=lambda text: text in seen)
            if screened is None:
                return
            seen.add(screened.source)
            incumbent = screened.source

    trio.run(main)
    knobs = tunable_knobs(KERNEL)
    roles = Roles(knobs)
    names = {k.key: k.name for k in knobs}
    screened = [values for family in screens.families for values in family]
    assert len(screened) > 8 and search.implausible > 0, "TPE never asked for an implausible one: nothing shown"
    for values in screens.screened[1:]:
        if values == knob_values(KERNEL):
            continue  # a later family's control
        elements = roles.elements_per_thread({key: values[names[key]] for key in names})
        assert MIN_ELEMENTS <= elements <= MAX_ELEMENTS, values


def test_the_first_family_is_the_control_then_the_priors():
    knobs = tunable_knobs(source(ROOT / "examples" / "matmul" / "kernel.py"))
    search, screens = FamilySearch(seed=0), Screens()
    text = source(ROOT / "examples" / "matmul" / "kernel.py")

    async def screen(variants, *, observe=False):
        screens.families.append([label for label, _ in variants])
        screens.screened.extend(knob_values(variant) for _, variant in variants)
        return []  # a failed screening: the search stops, and the family it asked for is what is checked

    trio.run(lambda: search.next_screened(knobs, text, screen, family_size=8, excluded=lambda _: False))
    first = screens.screened
    assert first[0] == first[-1] == knob_values(text)  # the control leads the family and closes it
    assert first[1:-1] == [by_name(c, knobs) for c in prior_configs(knobs)][:7]


def test_no_priors_and_no_bounds_where_the_roles_are_not_plain():
    for name in ("layer_norm.py", "row_sum_heuristics.py", "softmax_persistent.py"):
        knobs = tunable_knobs(source(KERNELS / name))
        assert prior_configs(knobs) == [], name
        roles = Roles(knobs)
        assert roles.elements_per_thread({k.key: k.value for k in knobs}) is None, name
