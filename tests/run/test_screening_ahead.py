"""Compile ahead wired into screening: which variants reach the screening worker, with real compile results
(tests/compile_ahead/variant_checks.py: the real launch child for sm_90); the store and the search's pruning."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
import trio

from orchestrator.compile_ahead import variants
from orchestrator.compile_ahead.ahead import (
    check_ahead,
    compile_target_for,
    remember_infeasible,
    remembered_for,
    remembered_in_source,
)
from orchestrator.compile_ahead.store import InfeasibleStore
from orchestrator.ledger.artifacts import RunArtifacts
from orchestrator.providers.screening import ScreeningResult
from orchestrator.providers.tune.search import FamilySearch, _resource_of
from orchestrator.run.ahead_step import RoundCompiles, compiled_ahead, compiling_alongside
from orchestrator.run.screening import Screener
from orchestrator.run.screening_ahead import merge, partition
from orchestrator.run.state import RunState
from orchestrator.source_digest import raw_digest
from orchestrator.worker.kernel_cache import SourceKernelCache
from protocol.bundle import Case, Target, load_target_file
from protocol.worker import ScreenedVariant
from tests.compile_ahead.variant_checks import CASES, HARNESS, ROOT, VARIANTS, checked

H200 = load_target_file(ROOT / "examples" / "matmul" / "h200" / "target.json")
INTERPRETER = load_target_file(ROOT / "examples" / "matmul" / "target.json")


pytestmark = pytest.mark.xdist_group("sm90_variants")  # one compile of the variants (tests/conftest.py)


@pytest.fixture(scope="module")
def checks(sm90_variants_dir):
    return checked(sm90_variants_dir)


def test_compile_ahead_applies_to_cuda_targets_with_known_limits_only():
    assert compile_target_for(H200).name == "cuda:sm_90"
    assert compile_target_for(INTERPRETER) is None  # the CPU interpreter screens as before
    assert compile_target_for(H200.model_copy(update={"architecture": "b200"})).name == "cuda:sm_100"
    assert compile_target_for(Target(backend="cuda", architecture="mi300x")) is None
    assert trio.run(lambda: check_ahead(Path("never_read.py"), harness_path=HARNESS, cases=CASES,
                                        target=INTERPRETER)) is None


@pytest.mark.slow
def test_only_variants_compiled_within_the_limits_reach_the_worker(checks):
    # baseline (the control), huge, autotune, raises_at_import, asks_the_gpu_at_import, asks_an_h200_its_sm_count
    names = list(VARIANTS)
    ids = [f"v{index:02d}" for index in range(len(names))]
    split = partition(ids, [checks[name] for name in names])
    assert split.to_worker == [0, 2, 5] and split.note == ""
    assert {ids[index]: held.status for index, held in split.held_back.items()} == {
        "v01": "build_failed", "v03": "build_failed", "v04": "failed"}
    assert split.held_back[1].reason.startswith("compile ahead: shared memory 294912 B > 232448 B limit (sm_90)")
    assert split.held_back[3].reason == "compile ahead: the variant does not load: ValueError: a broken edit"
    # compile ahead judged the control, so one it could not judge is not screened, and says so
    assert split.held_back[4].reason.startswith("not screened: compile ahead could not judge it (the variant did "
                                                "not load without a GPU")
    worker = [ScreenedVariant(variant_id=ids[i], status="ok", medians_us={"c": 10.0 + i}) for i in split.to_worker]
    assert [v.status for v in merge(ids, split.held_back, worker)] == ["ok", "build_failed", "ok", "build_failed",
                                                                        "failed", "ok"]


@pytest.mark.slow
def test_a_kernel_compile_ahead_cannot_judge_is_screened_on_the_gpu_as_before(checks):
    # the control itself could not be judged: variants it could not judge go to the worker; an over-limit
    # compile is still held back
    split = partition(["v00", "v01", "v02"], [checks["asks_the_gpu_at_import"], checks["asks_the_gpu_at_import"],
                                              checks["huge"]])
    assert split.to_worker == [0, 1] and list(split.held_back) == [2]
    assert split.held_back[2].status == "build_failed"


@pytest.mark.slow
def test_a_control_called_infeasible_overrules_compile_ahead_for_the_screening(checks):
    split = partition(["v00", "v01"], [checks["huge"], checks["raises_at_import"]])
    assert split.to_worker == [0, 1] and split.held_back == {}
    assert split.note.startswith("compile ahead called the control infeasible, which the GPU ran")


def test_variants_not_compiled_ahead_all_go_to_the_worker():
    assert partition(["v00", "v01"], [None, None]).to_worker == [0, 1]


@pytest.mark.slow
def test_an_infeasible_variant_is_remembered_and_its_neighbours_are_never_screened(checks, tmp_path):
    store = InfeasibleStore(tmp_path / "infeasible_configs.jsonl")
    (entry,) = remember_infeasible(store, VARIANTS["huge"], checks["huge"])
    assert entry.resource == "shared memory" and entry.knobs == {
        "BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 1, "num_warps": 8, "num_stages": 6}
    assert remember_infeasible(store, VARIANTS["baseline"], checks["baseline"]) == []
    assert remember_infeasible(store, VARIANTS["raises_at_import"], checks["raises_at_import"]) == []  # no knobs
    assert json.loads(store.path.read_text())["reason"].startswith("shared memory 294912 B")
    # a later screening (or run) of the same kernel: the search prunes what grows from it, whatever the warps
    remembered = remembered_for(store, VARIANTS["baseline"], "matmul_kernel", H200)
    assert remembered == [(entry.knobs, "shared memory")]
    assert remembered_for(store, VARIANTS["baseline"], "matmul_kernel", INTERPRETER) == []
    search = FamilySearch()
    names = {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"}
    search.remember(remembered, names)
    keys = {name: name for name in names}
    grown = {**entry.knobs, "BLOCK_N": 256, "num_warps": 4}
    assert search._beyond_a_limit(tuple(sorted(grown.items())), keys)
    assert not search._beyond_a_limit(tuple(sorted({**entry.knobs, "num_stages": 4}.items())), keys)


@pytest.mark.slow
def test_the_search_takes_the_resource_from_compile_ahead_not_from_the_text(checks):
    held = ScreenedVariant(variant_id="v01", status="build_failed", reason="compile ahead: [elided]")
    assert _resource_of(ScreeningResult(label="x", source="", variant=held, ahead=checks["huge"])) == "shared memory"
    source_failure = ScreeningResult(label="y", source="", variant=held, ahead=checks["raises_at_import"])
    assert _resource_of(source_failure) is None  # a file that does not load says nothing about its neighbours


@pytest.mark.slow
def test_one_candidate_is_checked_before_its_gpu_workers(tmp_path, monkeypatch):
    """What the run loop calls for every candidate (orchestrator/run/ahead_step.py): a build_failed evaluation
    naming the resource, no worker, and the config remembered for the tuner."""
    path = tmp_path / "candidate.py"
    path.write_text(VARIANTS["huge"])
    store = InfeasibleStore(tmp_path / "infeasible_configs.jsonl")
    events: list[str] = []
    run = SimpleNamespace(bundle=SimpleNamespace(harness_path=HARNESS),  # what the step reads of the run's evaluator
                          inputs=SimpleNamespace(cases=[Case.model_validate(c) for c in CASES], target=H200),
                          config=SimpleNamespace(worker_python=sys.executable),
                          kernel_cache=SourceKernelCache(tmp_path / "kernel_cache"),
                          log=SimpleNamespace(event=events.append))
    refused = trio.run(lambda: compiled_ahead(run, store, "r001-c000", VARIANTS["huge"], path, seconds_left=960))
    assert refused is not None and refused.status.value == "build_failed"
    assert refused.reason.startswith("compile ahead (shared memory): ") and "232448" in refused.reason
    assert refused.worker.pid is None  # no worker was started for it
    assert remembered_for(store, VARIANTS["huge"], "matmul_kernel", H200)
    # what the tuner reads back, knowing the file but not the kernel's name
    assert remembered_in_source(store, VARIANTS["huge"], H200) == remembered_for(store, VARIANTS["huge"],
                                                                                   "matmul_kernel", H200)
    # one that fits goes on to its workers, which start with what its compile ahead compiled; a compile ahead that
    # lasts says how far it got (every 15 s; every 0.5 s here)
    monkeypatch.setattr(variants, "PROGRESS_SECONDS", 0.5)
    events.clear()
    path.write_text(VARIANTS["baseline"])
    assert trio.run(lambda: compiled_ahead(run, store, "r002-c000", VARIANTS["baseline"], path,
                                           seconds_left=960)) is None
    assert run.kernel_cache.fill(raw_digest(VARIANTS["baseline"]), tmp_path / "worker" / "triton_cache") == 1
    assert run.kernel_cache.fill(raw_digest(VARIANTS["huge"]), tmp_path / "other" / "triton_cache") == 0
    *ticks, last = events
    assert last == "r002-c000 compile_ahead kernel_groups_kept=1 (compiled kernels its workers start with)"
    assert ticks and all(tick.startswith("r002-c000 compile_ahead compiles=") and tick.endswith("(at most 120 s)")
                         for tick in ticks)


@pytest.mark.slow
def test_a_screened_variant_is_compiled_once_and_its_candidate_starts_with_its_kernels(tmp_path, monkeypatch):
    """Screening's compile ahead files each variant's kernels under its own source and remembers which sources
    it found within the limits; the candidate the gate then measures is not compiled ahead again, and its first
    worker is given those kernels (orchestrator/run/screening.py, run/ahead_step.py, worker/kernel_cache.py)."""
    events: list[str] = []
    log = SimpleNamespace(event=events.append, progress=lambda line: None)
    evaluator = SimpleNamespace(artifacts=SimpleNamespace(root=tmp_path), bundle=SimpleNamespace(harness_path=HARNESS),
                                inputs=SimpleNamespace(cases=[Case.model_validate(c) for c in CASES], target=H200),
                                config=SimpleNamespace(worker_python=sys.executable), log=log,
                                kernel_cache=SourceKernelCache(tmp_path / "kernel_cache"))
    state = RunState(run_id="r", started=0.0, deadline=float("inf"))
    screener = Screener(evaluator, state, deadline=float("inf"))
    paths = []
    for name in ("baseline", "huge"):
        paths.append(tmp_path / f"{name}.py")
        paths[-1].write_text(VARIANTS[name])
    monkeypatch.setattr(variants, "PROGRESS_SECONDS", 0.5)
    checks = trio.run(lambda: screener._compile_ahead("s001", tmp_path, paths, seconds=600))
    ticks = [event for event in events if "variants_done=" in event]
    assert ticks and all(tick.startswith("s001 compile_ahead variants_done=") and " of 2 seconds=" in tick
                         for tick in ticks)
    assert [check.kernel_groups_kept for check in checks] == [1, 0]
    assert state.compiled_ahead == {raw_digest(VARIANTS["baseline"]): "s001"}  # the infeasible one is not there
    assert events[-1].startswith("s001 compile_ahead target=sm_90 variants=2 infeasible=1 unknown=0 seconds=")
    assert events[-1].endswith(" kernel_groups_kept=1")
    # the gate's candidate of that exact source: no second compile ahead, and its worker starts with the kernels
    skipped = trio.run(lambda: compiled_ahead(evaluator, screener.store, "r001-c000", VARIANTS["baseline"], paths[0],
                                              seconds_left=960, screened_in=state.compiled_ahead.get(
                                                  raw_digest(VARIANTS["baseline"]))))
    assert skipped is None
    assert events[-1] == ("r001-c000 compile_ahead skipped: s001 compiled this exact source within the device's "
                          "limits")
    assert evaluator.kernel_cache.fill(raw_digest(VARIANTS["baseline"]), tmp_path / "worker" / "triton_cache") == 1


def run_evaluator(tmp_path: Path, events: list[str]) -> SimpleNamespace:
    """What the compile-ahead step reads of a run's evaluator, over real compiles for the H200 target."""
    return SimpleNamespace(bundle=SimpleNamespace(harness_path=HARNESS),
                           inputs=SimpleNamespace(cases=[Case.model_validate(c) for c in CASES], target=H200),
                           config=SimpleNamespace(worker_python=sys.executable),
                           kernel_cache=SourceKernelCache(tmp_path / "kernel_cache"),
                           log=SimpleNamespace(event=events.append))


@pytest.mark.slow
def test_a_rounds_candidates_compile_side_by_side_and_each_turn_takes_its_own(tmp_path):
    """A round's proposals are compiled ahead together from the round's start (run/ahead_step.py RoundCompiles):
    the second slot's compile runs while the first slot's turn is taken, so its own turn waits less than its
    compile took; each turn gets its own source's verdict and its workers the kernels."""
    events: list[str] = []
    run = run_evaluator(tmp_path, events)
    store = InfeasibleStore(tmp_path / "infeasible_configs.jsonl")
    paths = {name: tmp_path / f"{name}.py" for name in ("huge", "baseline")}
    for name, path in paths.items():
        path.write_text(VARIANTS[name])
    turns = {}

    async def round_of_two() -> None:
        async with trio.open_nursery() as nursery:
            compiles = RoundCompiles(run, nursery)
            for slot, (name, path) in enumerate(paths.items()):
                compiles.start(f"r001-c00{slot}", VARIANTS[name], path, seconds_left=960)
            compiles.start("r001-c002", VARIANTS["baseline"], paths["baseline"], seconds_left=960)  # one compile
            assert len(compiles.pending) == 2
            for slot, name in enumerate(paths):
                turns[name] = await compiled_ahead(run, store, f"r001-c00{slot}", VARIANTS[name], paths[name],
                                                   seconds_left=960, round_compiles=compiles)

    trio.run(round_of_two)
    assert turns["huge"] is not None and turns["huge"].reason.startswith("compile ahead (shared memory): ")
    assert turns["baseline"] is None
    assert run.kernel_cache.fill(raw_digest(VARIANTS["baseline"]), tmp_path / "worker" / "triton_cache") == 1
    overlapped = [e for e in events if "compile_ahead overlapped" in e]
    assert [e.split()[0] for e in overlapped] == ["r001-c000", "r001-c001"]
    started, waited = (float(x) for x in re.fullmatch(
        r"r001-c001 compile_ahead overlapped: started with its round (\S+) s ago, its turn waited (\S+) s for it",
        overlapped[1]).groups())
    assert waited < started  # part of its compile ran before its turn


@pytest.mark.slow
def test_a_round_that_ends_ends_its_compiles_and_their_children(tmp_path):
    """The round's nursery is cancelled when the round stops early (the run's budget, a stop): a compile still
    running is ended with its child process, and no turn is left waiting."""
    events: list[str] = []
    run = run_evaluator(tmp_path, events)
    path = tmp_path / "baseline.py"
    path.write_text(VARIANTS["baseline"])
    me = psutil.Process()

    async def cut_round() -> float:
        async with trio.open_nursery() as nursery:
            compiles = RoundCompiles(run, nursery)
            compiles.start("r001-c001", VARIANTS["baseline"], path, seconds_left=960)
            await trio.sleep(1.0)
            assert me.children(recursive=True)  # the compile child is running
            nursery.cancel_scope.cancel()
            cancelled = trio.current_time()
        return trio.current_time() - cancelled

    assert trio.run(cut_round) < 10.0
    assert not [child for child in me.children(recursive=True) if child.is_running()
                and child.status() != psutil.STATUS_ZOMBIE]
    assert run.kernel_cache.fill(raw_digest(VARIANTS["baseline"]), tmp_path / "w" / "triton_cache") == 0


def test_what_a_round_raises_comes_out_as_itself_not_in_the_compiles_group(tmp_path):
    """The run loop stops on the exception types it knows (an abort, a provider's exhaustion, Ctrl-C): a round's
    compiles nursery must not turn them into an exception group."""
    class Stop(Exception):
        pass

    async def round_that_stops() -> None:
        async with compiling_alongside(run_evaluator(tmp_path, [])) as compiles:
            assert compiles.pending == {}
            raise Stop("the run's deadline")

    with pytest.raises(Stop, match="the run's deadline"):
        trio.run(round_that_stops)


def test_sources_written_ahead_for_slots_that_never_ran_are_removed_with_their_empty_folders(tmp_path):
    """A run that stops within a round (its budget, a stop) leaves no experiment folder without a record."""
    artifacts = RunArtifacts(tmp_path)
    for experiment_id in ("r001-c000", "r001-c001", "r001-c002"):
        artifacts.write_source(experiment_id, "x = 1\n")
    (tmp_path / "experiments" / "r001-c002" / "notes.txt").write_text("something else was put here\n")
    artifacts.remove_unrecorded(["r001-c000", "r001-c001", "r001-c002"], recorded={"r001-c000"})
    assert (tmp_path / "experiments" / "r001-c000" / "kernel.py").read_text() == "x = 1\n"
    assert not (tmp_path / "experiments" / "r001-c001").exists()
    assert sorted(p.name for p in (tmp_path / "experiments" / "r001-c002").iterdir()) == ["notes.txt"]
