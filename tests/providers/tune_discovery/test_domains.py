"""Every knob's domain holds its current value, and the search checks it before asking optuna.

The reported failure: TLX's pipelined GEMM turns Triton's own pipelining off with `tl.range(..., num_stages=0)`
(it pipelines by hand over `NUM_STAGES` buffers from `tlx.local_alloc`); the tuner took the 0 for a knob whose
domain is 1..6, and optuna's `study.ask` raised `ValueError: '0' not in (1, 2, 3, 4, 5, 6)`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import trio

from orchestrator.providers.tune.discovery import discover
from orchestrator.providers.tune.explain import explain_missing_knobs
from orchestrator.providers.tune.knobs import (
    KnobDomainError,
    apply_knob,
    check_domains,
    set_aside,
    tunable_knobs,
)
from orchestrator.providers.tune.search import FamilySearch
from tests.providers.tune_discovery import changed_lines
from tests.providers.tune_discovery.test_family_search import Screens, knob_values

TLX = Path(__file__).resolve().parent / "fixtures" / "tlx"
PIPELINED = (TLX / "hopper_gemm_pipelined.py").read_text(encoding="utf-8")

UNUSUAL = '''\
import triton
import triton.language as tl

BLOCK_SIZE = 8


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    for _ in tl.range(0, 2, num_stages=0):
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


def copy(x, out):
    n = x.numel()
    copy_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, out, n, BLOCK_SIZE=BLOCK_SIZE, num_warps=3, num_stages=8)
    return out
'''


def faster_than(incumbent: str) -> Screens:
    """Screens where every variant but the incumbent runs 10 % faster: the first family is fruitful."""
    start = knob_values(incumbent)
    return Screens(lambda values: 100.0 if values == start else 90.0)


def test_the_pipelined_tlx_gemm_is_searched_without_its_hand_pipelined_loop():
    knobs = tunable_knobs(PIPELINED)
    loop_line = next(number for number, line in enumerate(PIPELINED.splitlines(), 1) if "num_stages=0):" in line)
    assert knobs and all(knob.value in knob.domain for knob in knobs)
    assert all(knob.line != loop_line for knob in knobs)
    (loop,) = [site for site in discover(PIPELINED).sites if site.site == "loop"]
    assert (loop.line, loop.value, loop.edits) == (loop_line, 0, ())
    assert loop.note == (f"the loop's num_stages=0 (line {loop_line}) stays: matmul_kernel_pipelined_hopper "
                         "allocates its own stage buffers (tlx.local_alloc) and pipelines by hand")
    explanation = explain_missing_knobs(PIPELINED)
    launch = next(c for c in explanation.categories if c.category == "launch arguments")
    assert any(loop.note in entry for entry in launch.found)

    search, screens = FamilySearch(seed=3), faster_than(PIPELINED)

    async def ask() -> None:
        await search.next_screened(knobs, PIPELINED, screens, family_size=3, excluded=lambda source: False)

    trio.run(ask)  # raised ValueError: '0' not in (1, 2, 3, 4, 5, 6) from study.ask before
    assert len(screens.families) == 1 and len(screens.families[0]) == 3 + 1  # the closing control


def test_a_legal_value_outside_the_usual_domain_joins_it_and_an_illegal_one_is_no_knob():
    knobs = {knob.name: knob for knob in tunable_knobs(UNUSUAL)}
    assert set(knobs) == {"BLOCK_SIZE", "num_stages"}
    assert knobs["BLOCK_SIZE"].value == 8 and knobs["BLOCK_SIZE"].domain[:2] == (8, 16)
    assert knobs["num_stages"].value == 8 and knobs["num_stages"].domain == (1, 2, 3, 4, 5, 6, 8)
    check_domains(knobs.values())
    edited = apply_knob(UNUSUAL, knobs["BLOCK_SIZE"], 16)
    assert changed_lines(UNUSUAL, edited) == ["-BLOCK_SIZE = 8", "+BLOCK_SIZE = 16"]

    left = set_aside(UNUSUAL)
    assert [(knob.name, knob.value) for knob, _ in left] == [("num_warps", 3)]
    assert "num_warps = 3 (launch at line 17) is no warps setting: 3 is not a power of two" in left[0][1]
    explanation = explain_missing_knobs(UNUSUAL)
    launch = next(c for c in explanation.categories if c.category == "launch arguments")
    assert left[0][1] in launch.found
    assert any("num_stages=0 (line 11) stays: it turns Triton's software pipelining off on purpose" in entry
               for entry in launch.found)


def test_the_search_refuses_a_knob_whose_value_is_outside_its_domain_before_asking():
    knob = next(k for k in tunable_knobs(UNUSUAL) if k.name == "num_stages")
    broken = replace(knob, allowed=(1, 2, 3))  # a domain without the current 8
    with pytest.raises(KnobDomainError, match=r"launch:num_stages#0 = 8 not in \(1, 2, 3\)"):
        check_domains([broken])
    screens = Screens()

    async def ask() -> None:
        await FamilySearch().next_screened([broken], UNUSUAL, screens, family_size=6, excluded=lambda s: False)

    with pytest.raises(KnobDomainError):
        trio.run(ask)
    assert screens.families == []  # nothing was screened: the check comes before the search asks
