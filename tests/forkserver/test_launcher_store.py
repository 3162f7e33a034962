"""The launchers a run's judges built, kept once and copied into each later worker's Triton cache
(orchestrator/worker/launcher_store.py): only a judge's report is taken, each path and module is checked, the
first build of a key is never replaced, and each worker gets copies of its own."""

from __future__ import annotations

import base64
import sys

import trio

from orchestrator.worker.evaluation import keep_launchers
from orchestrator.worker.launcher_store import MAX_LAUNCHER_BYTES, LauncherStore
from orchestrator.worker.process import SubprocessSpawner
from orchestrator.worker.triton_seed import SeededSpawner
from protocol.results import Evaluation, EvaluationStatus
from protocol.worker import FinishedEvent
from tests.forkserver.test_triton_seed import launch, output_of

KEY = "XHGJRVQK2YHC5GBPJ6NKO2DTPHUT3MVVGEB7AYSS6EOQVPTCDN7A"
LAUNCHER = f"{KEY}/__triton_launcher.cpython-312-x86_64-linux-gnu.so"
MODULE = b"\x7fELF\x02\x01\x01 a launcher the judge built"


def encoded(content: bytes) -> str:
    return base64.b64encode(content).decode()


def test_only_well_formed_launchers_are_kept_and_the_first_build_of_a_key_stays(tmp_path):
    store = LauncherStore(tmp_path / "launchers")
    kept = store.keep({
        LAUNCHER: encoded(MODULE),
        f"../{KEY}/__triton_launcher.so": encoded(MODULE),  # outside the store
        f"{KEY}/cuda_utils.cpython-312-x86_64-linux-gnu.so": encoded(MODULE),  # not a launcher
        f"OTHER{KEY}/__triton_launcher.cpython-312-x86_64-linux-gnu.so": encoded(b"#!/bin/sh not a module"),
        f"BIG{KEY}/__triton_launcher.cpython-312-x86_64-linux-gnu.so": encoded(MODULE + b"0" * MAX_LAUNCHER_BYTES),
        f"B64{KEY}/__triton_launcher.cpython-312-x86_64-linux-gnu.so": "not base64!",
    })
    assert kept == [LAUNCHER] and store.paths() == [LAUNCHER]
    assert store.keep({LAUNCHER: encoded(b"\x7fELF another build")}) == []  # never replaced
    assert (store.directory / LAUNCHER).read_bytes() == MODULE
    assert not list(store.directory.rglob("*.partial"))


def test_a_report_counts_only_from_a_worker_whose_verdicts_were_the_judges(tmp_path):
    store = LauncherStore(tmp_path / "launchers")
    finished = FinishedEvent(kind="finished", launchers={LAUNCHER: encoded(MODULE)})
    in_process = Evaluation(label="candidate", status=EvaluationStatus.OK)
    in_process.worker.verdict_process = "candidate"  # the candidate's code could have written that event
    keep_launchers(store, finished, in_process)
    assert store.paths() == [] and in_process.worker.launchers_kept == 0
    judged = Evaluation(label="candidate", status=EvaluationStatus.OK)
    judged.worker.verdict_process = "judge"
    keep_launchers(store, finished, judged)
    assert store.paths() == [LAUNCHER] and judged.worker.launchers_kept == 1
    keep_launchers(None, finished, judged)  # a run without a store (no GPU seed) keeps nothing


READ_THEN_OVERWRITE = f"""
import os, pathlib
path = pathlib.Path(os.environ["TRITON_CACHE_DIR"]) / {LAUNCHER!r}
print(path.read_bytes()[4:].decode(errors="replace"))
path.write_bytes(b"poisoned by a candidate")
"""


def test_each_worker_starts_with_its_own_copy_of_the_runs_launchers(tmp_path):
    seed = tmp_path / "seed"
    (seed / "0a1b").mkdir(parents=True)
    (seed / "0a1b" / "cuda_utils.so").write_bytes(b"trusted build")
    store = LauncherStore(tmp_path / "launchers")
    store.keep({LAUNCHER: encoded(MODULE)})
    spawner = SeededSpawner(SubprocessSpawner(), seed, store)
    argv = [sys.executable, "-c", READ_THEN_OVERWRITE]

    async def main() -> tuple[str, str]:
        return (await output_of(spawner, launch(tmp_path / "w1", argv)),
                await output_of(spawner, launch(tmp_path / "w2", argv)))

    first, second = trio.run(main)
    assert first.strip().endswith("a launcher the judge built")
    assert second.strip().endswith("a launcher the judge built")  # the first worker's write stayed its own
    assert (store.directory / LAUNCHER).read_bytes() == MODULE
