"""The GPU-only dishonest candidates (tests/cheats/gpu_candidates/): the files themselves, on CPU.

They run through the CLI only on a GPU (`scripts/gpu/h200_cheats.sh`); here each must be a complete
vector_add kernel file that says what it tries, with a replay sidecar naming what should catch it, and the
corpus must cover every GPU-only technique named below.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.cheats.runner import METADATA_KEYS

GPU_DIR = Path(__file__).resolve().parent / "gpu_candidates" / "vector_add"
CANDIDATES = sorted(GPU_DIR.glob("*.py"))
# The GPU-only techniques, each by the words its file name carries: the timer's, then the judge's own weak spots
# (state kept between replayed calls, a timing mode a candidate can steer, calls left unchecked, the judge's
# memory, the record's words, profiles that back a reuse or can be evaded).
TECHNIQUES = {"event timing patch": "event", "synchronize patch": "synchronize", "side stream": "side_stream",
              "L2 persistence window": "l2_persisting", "deferred work": "deferred",
              "cross-call memo in wrapper buffers": "memo_scratch", "timing-mode steering": "steer",
              "unchecked calls": "unchecked", "outputs kept between calls": "stale_output",
              "judge-memory reads": "judge_memory", "metadata spoofing": "metadata",
              "profiler-backed reuse": "backs_profiles", "profile evasion": "profile_gap"}


def test_the_corpus_covers_every_gpu_only_technique():
    names = [path.stem for path in CANDIDATES]
    assert len(names) >= 17  # the script adds the CPU corpus's protocol takeover
    missing = [technique for technique, word in TECHNIQUES.items() if not any(word in name for name in names)]
    assert missing == []


@pytest.mark.parametrize("path", CANDIDATES, ids=[p.stem for p in CANDIDATES])
def test_gpu_candidate_is_a_kernel_that_says_what_it_tries(path):
    tree = ast.parse(path.read_text())
    docstring = ast.get_docstring(tree) or ""
    assert docstring.startswith("GPU cheat ("), docstring[:60]
    assert all(part in docstring for part in ("Technique:", "Gain if it works:", "Targets:")), docstring
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert {"add_kernel", "vector_add"} <= defined
    metadata = json.loads(path.with_suffix(".json").read_text())
    assert set(metadata) == {*METADATA_KEYS, "expected_catch"}
    assert all(isinstance(value, str) and value for value in metadata.values())
