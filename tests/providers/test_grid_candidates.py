"""scripts/grid_candidates.py: a kernel's knob grid as `--provider replay` candidates (what the GPU gate-throughput
script replays), each an edit of the kernel through the tuner's own knobs, and the replay provider reading them."""

from __future__ import annotations

import json
import subprocess
import sys

import trio

from orchestrator.providers.replay import ReplayProvider
from orchestrator.providers.tune import find_knobs
from tests.conftest import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "scripts" / "grid_candidates.py"
KERNEL = PROJECT_ROOT / "examples" / "softmax" / "kernel.py"


def grid_candidates(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--kernel", str(KERNEL), *args], capture_output=True,
                          text=True, timeout=120)


def configuration(source: str) -> dict[str, int]:
    return {knob.name: knob.value for knob in find_knobs(source)}


def test_the_grid_from_a_start_configuration_is_written_once_each_and_replays_in_order(tmp_path):
    out, start = tmp_path / "grid", tmp_path / "start.py"
    done = grid_candidates("--start", "BLOCK_SIZE=1024", "NUM_WARPS=2", "NUM_STAGES=2", "--start-out", str(start),
                           "--out", str(out), "--count", "12", "--values", "block=512,1024,2048")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"grid_candidates: 12 written to {out} (59 in the grid besides the kernel's own")
    assert configuration(start.read_text()) == {"BLOCK_SIZE": 1024, "NUM_WARPS": 2, "NUM_STAGES": 2}
    sources = [(out / f"{n:03d}.py").read_text() for n in range(1, 13)]
    configurations = [configuration(source) for source in sources]
    assert len({tuple(sorted(c.items())) for c in configurations}) == 12  # each once, none the start's own
    assert {"BLOCK_SIZE": 1024, "NUM_WARPS": 2, "NUM_STAGES": 2} not in configurations
    assert {c["BLOCK_SIZE"] for c in configurations} <= {512, 1024, 2048}
    first = json.loads((out / "001.json").read_text())
    named = ", ".join(f"{name} {value}" for name, value in sorted(configurations[0].items()))
    assert first == {"change": f"grid configuration: {named}"}
    provider = ReplayProvider(out)
    proposal = trio.run(provider.propose, None)
    assert proposal.source == sources[0] and proposal.metadata.change == first["change"]


def test_bad_arguments_are_one_line_each_and_nothing_is_written(tmp_path):
    out = tmp_path / "grid"
    out.mkdir()
    (out / "kept.py").write_text("# the user's\n")
    for args, message in ((["--out", str(out)], "is not empty"),
                          (["--out", str(tmp_path / "a"), "--values", "block=x"], "use KIND=V1,V2 with integers"),
                          (["--out", str(tmp_path / "b"), "--start", "NOPE=1", "--start-out", str(tmp_path / "s.py")],
                           "use NAME=INT with NAME one of ['BLOCK_SIZE', 'NUM_STAGES', 'NUM_WARPS']"),
                          (["--out", str(tmp_path / "c"), "--start", "BLOCK_SIZE=64"], "go together")):
        done = grid_candidates(*args)
        assert done.returncode == 2 and message in done.stderr.splitlines()[-1], done.stderr
    assert [p.name for p in out.iterdir()] == ["kept.py"]
    assert not any((tmp_path / name).exists() for name in ("a", "b", "c", "s.py"))
