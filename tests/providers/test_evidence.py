"""Bottleneck classes, prompt content and bounds, exclusions, and prior-run import."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from orchestrator.providers.base import ProposalError
from orchestrator.providers.bottleneck import classify_bottleneck
from orchestrator.providers.history import exclusion_list
from orchestrator.providers.prompt import MAX_PRIOR_EVIDENCE, build_prompt
from orchestrator.providers.redaction import redact_secrets
from orchestrator.run.prior_run import PriorRunError, load_prior_run
from orchestrator.source_digest import normalized_digest
from protocol.results import CaseComparison, DecisionStatus, EvaluationStatus, RefusedProposal
from tests.providers.conftest import VECTOR_ADD, context, evaluation, record


def ncu(**fields):
    return {"ncu": {"duration_us": 40.0, **fields}}


@pytest.mark.parametrize(
    ("profile", "median", "expected"),
    [
        (ncu(dram_throughput_pct=85.0, sm_throughput_pct=10.0), 50.0, "memory"),
        (ncu(sm_throughput_pct=75.0, dram_throughput_pct=20.0), 50.0, "compute"),
        (ncu(sm_throughput_pct=45.0, dram_throughput_pct=45.0, achieved_occupancy_pct=12.0), 50.0, "occupancy"),
        (ncu(sm_throughput_pct=10.0, dram_throughput_pct=15.0, achieved_occupancy_pct=70.0), 50.0, "synchronization"),
        (ncu(local_load_bytes=4096, local_store_bytes=1024, dram_throughput_pct=90.0), 50.0, "spill"),
        (ncu(sm_throughput_pct=50.0, dram_throughput_pct=50.0), 50.0, "unknown"),
        (ncu(dram_throughput_pct=90.0), 4.2, "launch"),
        (None, 50.0, "unknown"),
    ],
)
def test_classify_bottleneck(profile, median, expected):
    incumbent = evaluation("incumbent", {"large": median}, {"large": profile} if profile else None)
    kind, line = classify_bottleneck(incumbent)
    assert kind == expected
    assert "case large" in line and f"median {median:.4g} µs" in line
    if profile is None:
        assert "no ncu profile" in line


def test_classify_reads_the_costliest_case_and_treats_null_counters_as_missing():
    incumbent = evaluation(
        "incumbent",
        {"small": 20.0, "large": 900.0},
        {"small": ncu(sm_throughput_pct=95.0), "large": ncu(dram_throughput_pct=None, sm_throughput_pct=88.0)},
    )
    kind, line = classify_bottleneck(incumbent)
    assert (kind, "case large" in line, "dram" in line) == ("compute", True, False)


def test_classify_without_evaluation_or_measurements():
    assert classify_bottleneck(None)[0] == "unknown"
    failed = evaluation("incumbent", {}, status=EvaluationStatus.BUILD_FAILED, reason="syntax error")
    kind, line = classify_bottleneck(failed)
    assert kind == "unknown" and "build_failed" in line and "syntax error" in line


def failed_history(count: int) -> tuple:
    records = []
    for index in range(count):
        comparison = CaseComparison(case_id="large", incumbent_median_us=100.0, candidate_median_us=125.0,
                                    speedup=0.8, candidate_cv=0.01, incumbent_cv=0.01, correct=True)
        records.append(record(f"r{index // 2 + 1:03d}-c{index % 2:03d}", hypothesis=f"hypothesis number {index} "
                              + "about tiling " * 10, change=f"change {index}", comparisons=[comparison]))
    return tuple(records)


def test_prompt_carries_measurements_guidance_reference_and_prior_evidence():
    baseline = evaluation("baseline", {"small": 900.0, "large": 5000.0},
                          {"large": ncu(duration_us=4800.0, dram_throughput_pct=60.0)})
    incumbent = evaluation(
        "incumbent", {"small": 812.5, "large": 4210.0},
        {"large": {"ncu": {"duration_us": 4000.0, "dram_throughput_pct": 81.5, "report_path": "/tmp/x.ncu-rep"},
                   "artifacts": ["/abs/out/artifacts/large.ncu-rep"], "trace": "/abs/trace.json",
                   "proton": {"main_kernel_us": 3990.0, "raw": "x" * 5000}}},
    )
    ctx = context(incumbent=incumbent, baseline=baseline, guidance="Keep BLOCK_SIZE a power of two.",
                  reference_kernel_excerpt="def reference(): pass",
                  prior_evidence=({"experiment_id": "r001-c000", "status": "rejected", "hypothesis": "old idea",
                                   "change": "x", "reason": "slower", "aggregate_speedup": 0.9},))
    ctx = type(ctx)(**{**ctx.__dict__, "incumbent_id": "r002-c001"})
    prompt = build_prompt(ctx)
    assert "median=4210 µs" in prompt and "p95=4420 µs" in prompt and "cv=0.0200" in prompt
    assert "speedup_vs_baseline=1.188x" in prompt
    assert "dram_throughput_pct 60->81.5" in prompt  # profile delta against the baseline
    assert "Keep BLOCK_SIZE a power of two." in prompt
    assert "def reference(): pass" in prompt
    assert "old idea" in prompt and "Do not automatically adopt a prior winner" in prompt
    assert "memory: case large" in prompt  # bottleneck class with its evidence
    assert VECTOR_ADD.strip() in prompt
    for forbidden in ("/abs/out/artifacts", ".ncu-rep", "/abs/trace.json", "xxxxxxxxxx", "report_path"):
        assert forbidden not in prompt


def test_prompt_names_the_proposals_refused_for_this_slot():
    """A generator asked again after the run refused its proposal (orchestrator/run/refusals.py) is told why."""
    refused = RefusedProposal(normalized_sha256="0" * 64, change="BLOCK_SIZE 64 -> 4096",
                              reason="r001-c000: compile ahead (shared memory): 294912 B > 232448 B")
    prompt = build_prompt(context(refused=(refused,)))
    assert "## Refused just now (each repeated what this run had already refused; propose something else)" in prompt
    assert "- BLOCK_SIZE 64 -> 4096: r001-c000: compile ahead (shared memory)" in prompt
    assert "Refused just now" not in build_prompt(context())


def test_prompt_never_contains_environment_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-abcdefghijklmnop1234")
    monkeypatch.setenv("GH_TOKEN", "plain-token-value-9876")
    guidance = "Use key sk-live-abcdefghijklmnop1234 and token plain-token-value-9876; HF hf_ABCDEFGHIJKLMNOPQRSTU"
    prompt = build_prompt(context(guidance=guidance))
    for secret in ("sk-live-abcdefghijklmnop1234", "plain-token-value-9876", "hf_ABCDEFGHIJKLMNOPQRSTU",
                   "target-env-value-should-not-appear", "SECRET_ENV_IN_TARGET"):
        assert secret not in prompt
    assert "<redacted>" in prompt


def test_redaction_patterns():
    text = redact_secrets("api_key=abc123def OPENAI_API_KEY: sk-proj-1234567890abcdef Bearer eyJhbGciOiJIUzI1")
    assert "abc123def" not in text and "sk-proj" not in text and "eyJhbGci" not in text


def test_every_exclusion_survives_twenty_failures_and_a_tight_budget():
    history = failed_history(40)
    prompt = build_prompt(context(history=history), max_chars=14_000)
    assert len(prompt) <= 14_000
    for item in history:
        assert item.experiment_id in prompt
    assert "40 failed hypotheses" in prompt
    roomy = build_prompt(context(history=history[:20]))
    for index, item in enumerate(history[:20]):
        assert item.experiment_id in roomy and f"hypothesis number {index} " in roomy
    assert "large median 100->125 µs (0.800x)" in roomy


def test_exclusion_list_compresses_older_entries_but_keeps_them():
    history = failed_history(12) + (record("r009-c000", status=DecisionStatus.PROMOTED, speedup=1.2),)
    detailed = exclusion_list(history)
    compact = exclusion_list(history, detailed_recent=3)
    assert len(detailed) == len(compact) == 12
    assert all("regressions:" in line for line in detailed)
    assert sum("regressions:" in line for line in compact) == 3
    assert compact[0].startswith("r001-c000 [rejected, 0.900x]")


def test_exclusions_name_failed_phases_and_profile_regressions():
    candidate = evaluation("candidate", {"large": 120.0},
                           {"large": {"ncu": {"duration_us": 60.0, "registers_per_thread": 96}}})
    incumbent = evaluation("incumbent", {"large": 100.0},
                           {"large": {"ncu": {"duration_us": 50.0, "registers_per_thread": 40}}})
    broken = evaluation("candidate", {}, status=EvaluationStatus.INCORRECT, reason="max abs error 3.1")
    lines = exclusion_list((record("r001-c000", evaluations=[candidate, incumbent]),
                            record("r001-c001", status=DecisionStatus.FAILED, speedup=None, evaluations=[broken])))
    assert "duration_us 50->60 (+20.0%)" in lines[0] and "registers_per_thread 40->96" in lines[0]
    assert "incorrect: max abs error 3.1" in lines[1]


def test_source_that_cannot_fit_is_an_error():
    with pytest.raises(ProposalError, match="does not fit"):
        build_prompt(context(source=VECTOR_ADD * 40), max_chars=5000)


# --------------------------------------------------------------------------------------- prior runs

def write_prior(tmp_path: Path, entries: list[dict], sources: dict[str, str]) -> Path:
    run = tmp_path / "prior"
    for experiment_id, text in sources.items():
        folder = run / "experiments" / experiment_id
        folder.mkdir(parents=True)
        (folder / "kernel.py").write_text(text)
    run.mkdir(exist_ok=True)
    (run / "experiments.json").write_text(json.dumps(entries))
    return run


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    return {str(p): (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def test_prior_run_import_recomputes_hashes_and_skips_unsafe_entries(tmp_path):
    outside = tmp_path / "outside.py"
    outside.write_text("SECRET = 1\n")
    candidate = VECTOR_ADD.replace("64", "128")
    entries = [
        {"experiment_id": "baseline", "decision": {"status": "baseline"}, "source_sha256": "bogus"},
        {"experiment_id": "r001-c000", "decision": {"status": "rejected", "reason": "slower\x00  by\n\n 5%"},
         "metadata": {"hypothesis": "bigger   blocks", "change": "BLOCK_SIZE 64 -> 128"},
         "aggregate_speedup": 0.95, "source_sha256": "0" * 64, "source_path": "/etc/passwd"},
        {"experiment_id": "../x", "decision": {"status": "promoted"}},
        {"experiment_id": "r001-c001", "decision": {"status": "failed"}, "aggregate_speedup": float("nan")},
        {"experiment_id": "r002-c000", "decision": {"status": "promoted"}, "aggregate_speedup": 1.3},
        "not an object",
    ]
    run = write_prior(tmp_path, entries, {"baseline": VECTOR_ADD, "r001-c000": candidate})
    (run / "experiments" / "r002-c000").mkdir(parents=True)
    (run / "experiments" / "r002-c000" / "kernel.py").symlink_to(outside)
    before = snapshot(run)

    prior = load_prior_run(run)

    assert snapshot(run) == before  # nothing written, nothing touched
    assert prior.source_digests == {normalized_digest(VECTOR_ADD), normalized_digest(candidate)}
    ids = [item["experiment_id"] for item in prior.evidence]
    assert ids == ["r001-c000", "r001-c001", "r002-c000"]
    first = prior.evidence[0]
    assert first["reason"] == "slower by 5%" and first["hypothesis"] == "bigger blocks"
    assert prior.evidence[1]["aggregate_speedup"] is None  # NaN is not evidence
    text = "\n".join(prior.warnings)
    assert "'../x'" in text and "not an object" not in text
    assert "r001-c000: recorded source_sha256 does not match" in text
    assert "r001-c001: experiments/r001-c001/kernel.py is missing" in text
    assert "r002-c000: kernel.py skipped (resolves outside" in text
    assert "baseline: recorded" in text  # "bogus" recorded hash is never trusted
    assert hashlib.sha256(b"SECRET = 1\n").hexdigest() not in str(prior)


def test_prior_run_keeps_at_most_twelve_outcomes(tmp_path):
    entries = [{"experiment_id": f"r{i:03d}-c000", "decision": {"status": "rejected", "reason": "x" * 900},
                "metadata": {"hypothesis": "h" * 500}} for i in range(30)]
    prior = load_prior_run(write_prior(tmp_path, entries, {}) / "experiments.json")
    assert len(prior.evidence) == MAX_PRIOR_EVIDENCE == 12
    assert prior.evidence[-1]["experiment_id"] == "r029-c000"
    assert len(prior.evidence[0]["reason"]) <= 500 and len(prior.evidence[0]["hypothesis"]) <= 240
    assert len(prior.warnings) == 21 and prior.warnings[-1].startswith("… and 10 more")


def test_prior_run_limits(tmp_path):
    with pytest.raises(PriorRunError, match="does not exist"):
        load_prior_run(tmp_path / "missing")
    too_many = write_prior(tmp_path, [{"experiment_id": f"e{i}"} for i in range(1001)], {})
    with pytest.raises(PriorRunError, match="1001 experiments"):
        load_prior_run(too_many)
    (too_many / "experiments.json").write_bytes(b"[" + b" " * (8 * 1024 * 1024) + b"]")
    with pytest.raises(PriorRunError, match="larger than"):
        load_prior_run(too_many)
    (too_many / "experiments.json").write_text("{not json")
    with pytest.raises(PriorRunError, match="not valid JSON"):
        load_prior_run(too_many)
    (too_many / "experiments.json").unlink()
    os.mkfifo(too_many / "experiments.json")
    with pytest.raises(PriorRunError, match="not a regular file"):
        load_prior_run(too_many)


def test_prior_run_skips_oversized_kernels(tmp_path):
    run = write_prior(tmp_path, [{"experiment_id": "r001-c000"}], {"r001-c000": "x = 1\n" * 800_000})
    prior = load_prior_run(run)
    assert prior.source_digests == frozenset()
    assert "bytes; the limit is" in prior.warnings[0]
