"""The worker's autotune guard (sandbox_worker/autotune_guard.py) on a real autotuned kernel in Triton's
interpreter, where Triton itself cannot autotune at all ("0 active drivers"): the trusted step's tune mode times
each configuration on the CPU and writes down Triton's own key and choice; pin mode answers from those choices
and refuses, by name, every autotune it has no choice for. Each scenario runs in a subprocess (guard_child.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox_worker.autotune_guard import AutotuneUnpinnable, encode_key, sanitized_activity
from tests.conftest import PROJECT_ROOT

KERNEL = PROJECT_ROOT / "examples" / "autotuned_add" / "kernel.py"
CHILD = Path(__file__).with_name("guard_child.py")

pytestmark = pytest.mark.timeout(240)


def child(*args: str | Path) -> dict:
    completed = subprocess.run([sys.executable, str(CHILD), *map(str, args)], capture_output=True, text=True,
                               timeout=200, env={**os.environ, "TRITON_INTERPRET": "1"}, stdin=subprocess.DEVNULL)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout)


@pytest.fixture(scope="module")
def tuned() -> dict:
    return child("tune", KERNEL)


def pins_of(report: dict) -> list[dict]:
    return [{"kernel": c["kernel"], "key": c["key"], "key_values": c["key_values"], "config": c["config"]}
            for c in report["choices"]]


def test_tune_mode_chooses_once_per_key_with_the_cpu_timer(tuned):
    assert tuned["correct"] == [True] * 6
    choices = {tuple(c["key"]): c for c in tuned["choices"]}
    # Triton's own key: the key argument, then the dtype of every tensor argument
    assert set(choices) == {(300, "torch.float32", "torch.float32", "torch.float32"),
                            (129, "torch.float32", "torch.float32", "torch.float32")}
    for choice in choices.values():
        assert choice["kernel"] == "add_kernel" and choice["timer"] == "interpreter_cpu"
        assert (choice["configs_listed"], choice["configs_tried"], len(choice["timings"])) == (4, 4, 4)
        fastest = min(choice["timings"], key=lambda t: t["median_ms"])
        assert choice["config"] == fastest["config"] and choice["measured_ms"] == fastest["median_ms"] > 0
        assert choice["config"]["kwargs"]["BLOCK_SIZE"] in (64, 128, 256, 512)
    # the same key again, and the kernel loaded a second time: no second autotune
    assert choices[(300, "torch.float32", "torch.float32", "torch.float32")]["case_ids"] == ["a", "c"]
    # the other loads answered each key from the first's choice (early: 300 and 129, second: 300), timing nothing
    assert tuned["activity"] == {"mode": "tune", "pinned": 3, "tuned": 2, "configurations_timed": 8,
                                 "refused": 0, "single": 0, "tuned_during": ["unknown"]}
    progress = [(e["key"]["n_elements"], e["configuration"], e["of"]) for e in tuned["progress"]]
    assert progress == [(n, i, 4) for n in (300, 129) for i in (1, 2, 3, 4)]


def test_pin_mode_runs_the_choice_and_never_benchmarks(tuned):
    report = child("pin", KERNEL, json.dumps(pins_of(tuned)), json.dumps([300, 129, 300]))
    assert report["calls"] == [{"n": 300, "correct": True}, {"n": 129, "correct": True}, {"n": 300, "correct": True}]
    assert report["activity"]["pinned"] == 2
    assert (report["activity"]["configurations_timed"], report["activity"]["tuned"], report["progress"]) == (0, 0, [])


def test_a_key_without_a_choice_is_refused_by_name(tuned):
    report = child("pin", KERNEL, json.dumps(pins_of(tuned)), json.dumps([64]))
    refused = report["calls"][0]["refused"]
    assert refused.startswith("add_kernel: autotune over 4 configurations for n_elements=64 ")
    assert "the run's autotune step made no choice for this key" in refused
    assert report["activity"]["refused"] == 1 and report["activity"]["configurations_timed"] == 0


def test_a_list_without_the_choice_is_refused_naming_the_choice(tuned, tmp_path):
    chosen = {c["config"]["kwargs"]["BLOCK_SIZE"] for c in tuned["choices"]}
    source = KERNEL.read_text()
    for block in chosen:  # the list no longer holds what the run chose
        source = source.replace(f'{{"BLOCK_SIZE": {block}}}', '{"BLOCK_SIZE": 1024}')
    kernel = tmp_path / "without_choice.py"
    kernel.write_text(source)
    report = child("pin", kernel, json.dumps(pins_of(tuned)), json.dumps([300]))
    refused = report["calls"][0]["refused"]
    assert "which this kernel's list of 4 configurations does not hold" in refused
    assert any(f"the run chose BLOCK_SIZE={block} " in refused for block in chosen)
    assert report["activity"]["pinned"] == 0


def test_a_list_pruned_to_one_configuration_is_no_autotune_and_keeps_its_own_choice(tuned, tmp_path):
    """A kernel whose own pruning leaves one configuration per call (a winner shipped with its list pruned) runs
    that one: the run's choice for the same key is not forced on it."""
    source = KERNEL.read_text().replace(
        '    key=["n_elements"],\n',
        '    key=["n_elements"],\n'
        '    prune_configs_by={"early_config_prune": lambda configs, named_args, **kwargs: [configs[1]]},\n')
    kernel = tmp_path / "pruned.py"
    kernel.write_text(source)
    report = child("pin", kernel, json.dumps(pins_of(tuned)), json.dumps([300]))
    assert report["activity"]["pinned"] == 0
    assert report["calls"] == [{"n": 300, "correct": True}]
    assert (report["activity"]["refused"], report["activity"]["configurations_timed"], report["activity"]["single"]) \
        == (0, 0, 1)


def test_only_plain_keys_can_be_written_down():
    assert encode_key((4096, "torch.float16", True, None)) == [4096, "torch.float16", True, None]
    with pytest.raises(AutotuneUnpinnable, match="cannot be written down .object"):
        encode_key((4096, object()))


def test_what_a_candidate_process_says_of_itself_is_kept_to_the_known_fields():
    honest = {"mode": "pin", "pinned": 2, "tuned": 0, "configurations_timed": 0, "refused": 0, "single": 0,
              "tuned_during": []}
    assert sanitized_activity({**honest, "extra": "x" * 10_000}) == honest
    assert sanitized_activity({**honest, "tuned": -1}) is None
    assert sanitized_activity({**honest, "mode": "lie"}) is None
    assert sanitized_activity("garbage") is None
