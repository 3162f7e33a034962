"""The dishonest-candidate corpus: each candidate through the real CLI at the default gates.

Each slow test runs one candidate of tests/cheats/candidates/ with `--provider replay` and checks what must
hold whatever the candidate tried: it is not promoted (exit 2, the baseline wins), its evaluation failed or
the gates rejected it (or, where the gate passed an unchanged kernel by chance, revalidation found no gain),
the user's files are byte-identical, and no process it started is alive afterwards. The honest examples are still promoted. The candidate's status and
reason are printed in a "cheat corpus" section at the end of the run (tests/cheats/conftest.py); which check
should catch each one is in its JSON (`expected_catch`). The fast tests check the corpus itself.
"""

from __future__ import annotations

import ast
import json

import pytest

from tests.cheats.runner import (
    CANDIDATE_ID,
    CANDIDATES_DIR,
    CLI_TIMEOUT_SECONDS,
    FAILURE_STATUSES,
    HONEST,
    KNOWN_OPEN,
    METADATA_KEYS,
    OUTCOMES,
    Cheat,
    all_cheats,
    leftovers_after,
    run_candidate,
    run_cheat,
)

CHEATS = all_cheats()
CATEGORIES = {"a", "b", "c", "d", "e"}
DOCSTRING_PARTS = ("Technique:", "Gain if it works:", "Targets:")


def category(cheat: Cheat) -> str:
    docstring = ast.get_docstring(ast.parse(cheat.source_path.read_text())) or ""
    return docstring.removeprefix("Cheat (")[:1]


def marks(cheat: Cheat) -> list[pytest.MarkDecorator]:
    if cheat.known_open:
        return [pytest.mark.xfail(reason=KNOWN_OPEN[cheat.id], strict=True)]
    return []


# ---- the corpus itself (fast) -------------------------------------------------------------------------


def test_corpus_covers_every_category_on_both_kernels():
    per_kernel = {kernel: [c for c in CHEATS if c.kernel == kernel] for kernel in ("vector_add", "softmax")}
    assert len(CHEATS) >= 36
    counts = {kernel: len(cheats) for kernel, cheats in per_kernel.items()}
    assert all(count >= 12 for count in counts.values()), counts
    assert {category(c) for c in CHEATS} == CATEGORIES
    assert set(KNOWN_OPEN) <= {c.id for c in CHEATS}


@pytest.mark.parametrize("cheat", CHEATS, ids=[c.id for c in CHEATS])
def test_candidate_says_what_it_tries_and_what_should_catch_it(cheat):
    docstring = ast.get_docstring(ast.parse(cheat.source_path.read_text())) or ""
    assert docstring.startswith("Cheat (") and category(cheat) in CATEGORIES, docstring[:80]
    assert all(part in docstring for part in DOCSTRING_PARTS), docstring
    metadata = json.loads((CANDIDATES_DIR / cheat.kernel / f"{cheat.name}.json").read_text())
    assert set(metadata) == {*METADATA_KEYS, "expected_catch"}
    assert all(isinstance(value, str) and value for value in metadata.values())


# ---- through the CLI (slow) ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(CLI_TIMEOUT_SECONDS + 60)
@pytest.mark.parametrize("cheat", [pytest.param(c, id=c.id, marks=marks(c)) for c in CHEATS])
def test_dishonest_candidate_is_not_promoted(tmp_path, cheat):
    run = run_cheat(tmp_path, cheat)
    left = leftovers_after(run)
    OUTCOMES.append(f"{cheat.id}: {run.summary()}")
    assert run.cli.returncode == 2, f"{run.summary()}\n{run.cli.stderr[-3000:]}"
    assert run.result["winner_experiment_id"] == "baseline", run.summary()
    if run.decision.get("status") == "promoted":
        # A cheat the judge neutralised is an unchanged kernel, and the gate is a 99 % test: on a loaded 2-core
        # host it can pass an A/A pair by chance (CI once: 1.26x, lower bound 1.03, then 1.005x at
        # revalidation; once 1.62x, then a racing thread's wrong output at revalidation; once 1.47x, then
        # 1.24x with a lower bound of 0.95). Revalidation measures again in fresh workers at another moment;
        # there the gates must reject it: a failed check, too little gain, or a gain within the noise.
        final = run.final_decision
        failed_gates = {gate for gate, passed in final.get("gates", {}).items() if passed is False}
        assert final.get("status") == "rejected" and failed_gates, run.summary()
    else:
        assert run.status in FAILURE_STATUSES or run.decision.get("status") == "rejected", run.summary()
    assert run.user.hashes() == run.user_hashes_before
    assert left == []


@pytest.mark.slow
@pytest.mark.timeout(CLI_TIMEOUT_SECONDS + 60)
@pytest.mark.parametrize("kernel", sorted(HONEST))
def test_honest_candidate_is_still_promoted(tmp_path, kernel):
    run = run_candidate(tmp_path, kernel, HONEST[kernel])
    left = leftovers_after(run)
    OUTCOMES.append(f"honest/{kernel}: {run.summary()}")
    assert run.cli.returncode == 0, f"{run.summary()}\n{run.cli.stderr[-3000:]}"
    assert run.result["winner_experiment_id"] == CANDIDATE_ID
    assert run.decision.get("status") == "promoted" and run.status == "ok", run.summary()
    assert run.user.hashes() == run.user_hashes_before
    assert left == []
