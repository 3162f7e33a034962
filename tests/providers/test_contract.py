"""The candidate contract: metadata fields, measured evidence, parseable complete source, digests."""

from __future__ import annotations

import pytest

from orchestrator.providers.base import ProposalError
from orchestrator.providers.contract import fenced_blocks, normalize_source, validate_proposal
from orchestrator.source_digest import normalized_digest
from protocol.results import CandidateMetadata
from tests.providers.conftest import VECTOR_ADD

GOOD_METADATA = {
    "hypothesis": "Raising BLOCK_SIZE to 128 halves the programs of case large",
    "evidence": "case large median 4210 us with 16384 programs",
    "change": "BLOCK_SIZE 64 -> 128",
    "expected_effect": "lower median on large",
    "risk": "more registers per program",
}
CANDIDATE = VECTOR_ADD.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 128")


def test_valid_proposal_returns_metadata_model():
    proposal = validate_proposal(CANDIDATE, GOOD_METADATA, VECTOR_ADD)
    assert proposal.source == CANDIDATE
    assert proposal.metadata == CandidateMetadata(**GOOD_METADATA)


def test_metadata_model_is_accepted_and_extra_keys_ignored():
    assert validate_proposal(CANDIDATE, CandidateMetadata(**GOOD_METADATA), VECTOR_ADD).metadata.change
    proposal = validate_proposal(CANDIDATE, {**GOOD_METADATA, "schema_version": 3}, VECTOR_ADD)
    assert proposal.metadata.risk == GOOD_METADATA["risk"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"risk": None}, "must be a string"),
        ({"risk": "   "}, "'risk' is empty"),
        ({"change": "line one\nline two"}, "single line"),
        ({"hypothesis": "x" * 241}, "241 characters"),
        ({"evidence": "I think it will be faster"}, "cites no measured evidence"),
    ],
)
def test_bad_metadata_is_rejected_with_reason(change, message):
    with pytest.raises(ProposalError, match=message):
        validate_proposal(CANDIDATE, {**GOOD_METADATA, **change}, VECTOR_ADD)


def test_missing_metadata_keys_are_named():
    metadata = {key: value for key, value in GOOD_METADATA.items() if key not in {"risk", "evidence"}}
    with pytest.raises(ProposalError, match="lacks evidence, risk"):
        validate_proposal(CANDIDATE, metadata, VECTOR_ADD)


def test_evidence_may_name_a_context_term_instead_of_a_number():
    metadata = {**GOOD_METADATA, "evidence": "case large dominates the weighted latency"}
    assert validate_proposal(CANDIDATE, metadata, VECTOR_ADD, evidence_terms={"large"}).metadata.evidence
    with pytest.raises(ProposalError, match="measured evidence"):
        validate_proposal(CANDIDATE, metadata, VECTOR_ADD, evidence_terms={"huge"})


def test_source_that_does_not_parse_is_rejected():
    with pytest.raises(ProposalError, match="does not parse.*line 5"):
        validate_proposal(CANDIDATE.replace("BLOCK_SIZE = 128", "BLOCK_SIZE = = 128"), GOOD_METADATA, VECTOR_ADD)


def test_dropping_a_public_entry_point_is_rejected_but_private_helpers_may_go():
    renamed = CANDIDATE.replace("def vector_add(", "def vector_add_fast(")
    with pytest.raises(ProposalError, match="drops public top-level definitions: vector_add"):
        validate_proposal(renamed, GOOD_METADATA, VECTOR_ADD)
    incumbent = VECTOR_ADD + "\n\ndef _helper():\n    return 1\n"
    assert validate_proposal(CANDIDATE, GOOD_METADATA, incumbent).source == CANDIDATE


def test_stub_is_rejected_even_when_padded_with_comments():
    stub = (
        "import torch\n\n"
        + "# padding comment that does not count\n" * 200
        + "def add_kernel(*args):\n    pass\n\n\ndef vector_add(x, y):\n    return x + y\n"
    )
    assert len(stub) > len(VECTOR_ADD)
    with pytest.raises(ProposalError, match="stub"):
        validate_proposal(stub, GOOD_METADATA, VECTOR_ADD)


def test_empty_source_is_rejected():
    with pytest.raises(ProposalError, match="empty"):
        validate_proposal("  \n", GOOD_METADATA, VECTOR_ADD)


def test_comment_only_change_has_the_same_normalized_digest():
    commented = VECTOR_ADD.replace("BLOCK_SIZE = 64", "BLOCK_SIZE = 64  # tuned on H200") + "\n\n# trailing note\n"
    commented = commented.replace("    mask = offsets", "\n    # bounds\n    mask = offsets")
    assert normalized_digest(commented) == normalized_digest(VECTOR_ADD)
    assert normalized_digest(CANDIDATE) != normalized_digest(VECTOR_ADD)


def test_hash_inside_a_string_is_not_a_comment():
    first = 'NAME = "a # b"\n'
    second = 'NAME = "a # c"\n'
    assert normalize_source(first) == first
    assert normalized_digest(first) != normalized_digest(second)


def test_trailing_whitespace_and_crlf_do_not_change_the_digest():
    assert normalized_digest(VECTOR_ADD.replace("\n", "   \r\n")) == normalized_digest(VECTOR_ADD)


def test_untokenizable_source_still_normalizes():
    broken = 'x = """never closed\n# comment\n'
    assert "# comment" not in normalize_source(broken)


def test_fenced_blocks_are_read_line_by_line():
    text = "intro\n```json\n{\"a\": 1}\n```\nmiddle\n```python\nx = '```'\n```\n```py\nunclosed\n"
    assert fenced_blocks(text) == [("json", '{"a": 1}\n'), ("python", "x = '```'\n")]
