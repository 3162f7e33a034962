"""Measured evidence for generators: bottleneck class, the prompt, the exclusion list, prior-run import.

Everything here is a pure function of the context (plus `load_prior_run`, which only reads files), so the
policy that decides what a model sees can be tested without a model. Prompts carry measurements, compact
profiles and the full list of failed hypotheses; they never carry environment variables, API keys, raw
profiler artifacts or paths.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.providers.base import ProposalContext, ProposalError
from protocol.results import (
    CaseMeasurement,
    DecisionStatus,
    Evaluation,
    EvaluationStatus,
    ExperimentRecord,
)

# ---------------------------------------------------------------------------------------------------------
# Bottleneck classification

BOTTLENECK_CLASSES = ("launch", "memory", "compute", "occupancy", "synchronization", "spill", "unknown")
LAUNCH_BOUND_MEDIAN_US = 10.0
SATURATED_PCT = 60.0
UNDERUSED_PCT = 40.0
LOW_OCCUPANCY_PCT = 25.0
NCU_FIELDS = (
    "duration_us",
    "sm_throughput_pct",
    "dram_throughput_pct",
    "memory_throughput_pct",
    "achieved_occupancy_pct",
    "registers_per_thread",
    "local_load_bytes",
    "local_store_bytes",
)


def finite_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def ncu_summary(case: CaseMeasurement) -> dict[str, float]:
    """The numeric NCU summary fields of one case; unsupported (null) counters are simply absent."""
    profile = case.profile if isinstance(case.profile, dict) else {}
    ncu = profile.get("ncu")
    if isinstance(ncu, dict) and isinstance(ncu.get("summary"), dict):
        ncu = ncu["summary"]
    if not isinstance(ncu, dict):
        return {}
    summary: dict[str, float] = {}
    for name in NCU_FIELDS:
        number = finite_number(ncu.get(name))
        if number is not None:
            summary[name] = number
    return summary


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _dominant_case(evaluation: Evaluation) -> CaseMeasurement | None:
    measured = [case for case in evaluation.cases if case.stats is not None]
    if not measured:
        return None
    return max(measured, key=lambda case: case.stats.median * case.weight)  # type: ignore[union-attr]


def classify_bottleneck(evaluation: Evaluation | None) -> tuple[str, str]:
    """(class, one evidence line with the numbers) for the case that costs the most time.

    Rules, first match wins: median < 10 µs -> launch; no NCU summary -> unknown; local-memory bytes > 0 ->
    spill; DRAM/memory throughput >= 60 % -> memory; SM throughput >= 60 % -> compute; achieved occupancy
    < 25 % -> occupancy; SM and memory throughput both < 40 % -> synchronization (seed Layer 5: lower compute
    and memory utilization means scheduling, serialization or too little parallelism); else unknown.
    """
    if evaluation is None:
        return "unknown", "no incumbent evaluation is available, so no bottleneck is measured"
    case = _dominant_case(evaluation)
    if case is None:
        reason = f" ({evaluation.reason})" if evaluation.reason else ""
        return "unknown", f"evaluation '{evaluation.label}' has no measured case: {evaluation.status.value}{reason}"
    median = case.stats.median  # type: ignore[union-attr]
    head = f"case {case.case_id}: median {_fmt(median)} µs"
    if median < LAUNCH_BOUND_MEDIAN_US:
        return "launch", f"{head} < {_fmt(LAUNCH_BOUND_MEDIAN_US)} µs, so launch and wrapper overhead dominate"
    ncu = ncu_summary(case)
    if not ncu:
        return "unknown", f"{head}; no ncu profile for this case, so the bottleneck is not measured"
    labels = {
        "duration_us": ("ncu duration", " µs"),
        "dram_throughput_pct": ("dram", " %"),
        "memory_throughput_pct": ("memory", " %"),
        "sm_throughput_pct": ("sm", " %"),
        "achieved_occupancy_pct": ("occupancy", " %"),
        "registers_per_thread": ("regs", ""),
    }
    numbers = ", ".join(f"{label} {_fmt(ncu[key])}{unit}" for key, (label, unit) in labels.items() if key in ncu)
    local_bytes = ncu.get("local_load_bytes", 0.0) + ncu.get("local_store_bytes", 0.0)
    if local_bytes:
        numbers += f", local memory {_fmt(local_bytes)} B"
    observed = f"{head}, {numbers}"
    memory = max(ncu.get("dram_throughput_pct", -1.0), ncu.get("memory_throughput_pct", -1.0))
    compute = ncu.get("sm_throughput_pct", -1.0)
    occupancy = ncu.get("achieved_occupancy_pct")
    if local_bytes > 0:
        return "spill", f"{observed}; register spills reach local memory"
    if memory >= SATURATED_PCT:
        return "memory", f"{observed}; memory throughput is near its peak"
    if compute >= SATURATED_PCT:
        return "compute", f"{observed}; SM throughput is near its peak"
    if occupancy is not None and occupancy < LOW_OCCUPANCY_PCT:
        return "occupancy", f"{observed}; too few warps are resident to hide latency"
    if 0 <= compute < UNDERUSED_PCT and 0 <= memory < UNDERUSED_PCT:
        return "synchronization", f"{observed}; low compute and memory use: serialization or too little parallelism"
    return "unknown", f"{observed}; no single limiter stands out"


# ---------------------------------------------------------------------------------------------------------
# Sanitizing text and profiles for prompts

_SECRET_PATTERNS = (
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{16,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{16,}"),
    re.compile(r"\bglpat-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{16,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{5,}"),  # JWT
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)\b([A-Z0-9_]*(?:api[_-]?key|token|secret|password|passwd)[A-Z0-9_]*)\s*[=:]\s*\S+"),
)
_SECRET_ENV_NAME = re.compile(r"(?i)(key|token|secret|password|passwd|credential|auth)")
REDACTED = "<redacted>"


def environment_secret_values(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Values of secret-looking environment variables, so a key pasted into guidance is still caught."""
    source = os.environ if environ is None else environ
    return tuple(value for name, value in source.items() if _SECRET_ENV_NAME.search(name) and len(value) >= 8)


def redact_secrets(text: str, secret_values: Iterable[str] = ()) -> str:
    """Replace API keys, tokens and the given literal secret values by `<redacted>`."""
    for value in sorted(set(secret_values), key=len, reverse=True):
        if value:
            text = text.replace(value, REDACTED)
    for pattern in _SECRET_PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: f"{m.group(1)}={REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def one_line(text: Any, limit: int) -> str:
    """Whitespace collapsed, NUL stripped, capped with an ellipsis: safe to embed in a list item."""
    collapsed = " ".join(str(text).replace("\x00", "").split())
    return collapsed if len(collapsed) <= limit else collapsed[: max(limit - 1, 0)] + "…"


def cap_block(text: str, limit: int, what: str) -> str:
    """A multi-line excerpt capped at `limit` characters, saying how much was left out."""
    text = text.replace("\x00", "")
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n… ({len(text) - limit} more characters of {what} omitted)"


_DROPPED_PROFILE_KEYS = frozenset(
    {
        "artifact", "artifacts", "path", "paths", "raw", "trace", "trace_path", "traces", "command", "commands",
        "stdout", "stderr", "blob", "content", "contents", "data", "events", "raw_metrics", "raw_profile", "rows",
        "trace_events", "profile_metadata", "files", "file", "env", "environment", "csv", "report",
    }
)
_DROPPED_KEY_SUFFIXES = ("_path", "_paths", "_file", "_files", "_dir", "_dirs", "_raw", "_trace", "_artifact")
MAX_PROFILE_DEPTH = 4
MAX_PROFILE_LIST = 16
MAX_PROFILE_KEYS = 48
MAX_PROFILE_STRING = 200


def compact_profile(value: Any, depth: int = 0) -> Any:
    """A prompt-safe copy of a profile: no raw artifacts or paths, bounded depth, lists and strings."""
    if isinstance(value, dict):
        if depth >= MAX_PROFILE_DEPTH:
            return f"<{len(value)} keys omitted>"
        kept: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key)
            lowered = name.lower()
            if lowered in _DROPPED_PROFILE_KEYS or lowered.endswith(_DROPPED_KEY_SUFFIXES):
                continue
            if len(kept) >= MAX_PROFILE_KEYS:
                kept["…"] = f"{len(value) - MAX_PROFILE_KEYS} more keys omitted"
                break
            kept[name] = compact_profile(item, depth + 1)
        return kept
    if isinstance(value, (list, tuple)):
        items = [compact_profile(item, depth + 1) for item in value[:MAX_PROFILE_LIST]]
        if len(value) > MAX_PROFILE_LIST:
            items.append(f"… {len(value) - MAX_PROFILE_LIST} more items omitted")
        return items
    if isinstance(value, float):
        return float(f"{value:.4g}") if math.isfinite(value) else None
    if isinstance(value, str):
        if value.startswith(("/", "~")) and " " not in value:
            return "<path omitted>"
        return value if len(value) <= MAX_PROFILE_STRING else f"<omitted {len(value)} characters>"
    if value is None or isinstance(value, (bool, int)):
        return value
    return one_line(value, 80)


# ---------------------------------------------------------------------------------------------------------
# History: exclusions and accepted changes

FAILED_DECISIONS = frozenset({DecisionStatus.REJECTED, DecisionStatus.FAILED, DecisionStatus.DUPLICATE})
_WORSE_WHEN_HIGHER = ("duration_us", "registers_per_thread", "local_load_bytes", "local_store_bytes")
_WORSE_WHEN_LOWER = ("achieved_occupancy_pct",)


def _percent_change(before: float, after: float) -> str:
    if before == 0:
        return "new"
    return f"{(after - before) / abs(before) * 100:+.1f}%"


def _reference_evaluation(record: ExperimentRecord) -> Evaluation | None:
    """The incumbent re-measured next to the candidate, when the record kept it."""
    return next((e for e in record.evaluations if e.label != "candidate" and e.label.startswith("incumbent")), None)


def metric_regressions(record: ExperimentRecord) -> list[str]:
    """Short phrases naming what got worse: failed phases, wrong cases, slower cases, worse NCU counters."""
    phrases: list[str] = []
    candidate = record.candidate_evaluation
    if candidate is not None and candidate.status is not EvaluationStatus.OK:
        phrases.append(f"{candidate.status.value}: {one_line(candidate.reason, 120)}")
    for comparison in record.comparisons:
        if comparison.correct is False:
            phrases.append(f"{comparison.case_id} incorrect")
        elif comparison.speedup is not None and comparison.speedup < 1.0:
            before, after = comparison.incumbent_median_us, comparison.candidate_median_us
            if before is not None and after is not None:
                phrases.append(
                    f"{comparison.case_id} median {_fmt(before)}->{_fmt(after)} µs ({comparison.speedup:.3f}x)"
                )
            else:
                phrases.append(f"{comparison.case_id} {comparison.speedup:.3f}x")
    reference = _reference_evaluation(record)
    if candidate is not None and reference is not None:
        for case in candidate.cases:
            other = reference.case(case.case_id)
            if other is None:
                continue
            new, old = ncu_summary(case), ncu_summary(other)
            for name in _WORSE_WHEN_HIGHER + _WORSE_WHEN_LOWER:
                if name not in new or name not in old:
                    continue
                worse = new[name] > old[name] * 1.01 if name in _WORSE_WHEN_HIGHER else new[name] < old[name] * 0.99
                if worse:
                    phrases.append(
                        f"{case.case_id} {name} {_fmt(old[name])}->{_fmt(new[name])} "
                        f"({_percent_change(old[name], new[name])})"
                    )
    return phrases


def _speedup_label(record: ExperimentRecord) -> str:
    value = finite_number(record.aggregate_speedup)
    return f", {value:.3f}x" if value is not None else ""


def _exclusion_entry(record: ExperimentRecord, detailed: bool) -> str:
    status = record.decision.status.value if record.decision else "unknown"
    head = f"{record.experiment_id} [{status}{_speedup_label(record)}]"
    hypothesis = record.metadata.hypothesis or "(no hypothesis recorded)"
    regressions = metric_regressions(record)
    if not detailed:
        worst = f"; {one_line(regressions[0], 80)}" if regressions else ""
        return f"{head}: {one_line(hypothesis, 100)}{worst}"
    parts = [f"{head}: hypothesis: {one_line(hypothesis, 240)}"]
    if record.metadata.change:
        parts.append(f"change: {one_line(record.metadata.change, 240)}")
    if regressions:
        parts.append("regressions: " + one_line("; ".join(regressions[:8]), 400))
    if record.decision and record.decision.reason:
        parts.append(f"decision: {one_line(record.decision.reason, 200)}")
    return " | ".join(parts)


def exclusion_list(history: Sequence[ExperimentRecord], *, detailed_recent: int | None = None) -> list[str]:
    """One line per failed hypothesis (rejected, failed, duplicate), oldest first, never dropped.

    With `detailed_recent=k`, only the newest k entries keep change, regressions and decision; older ones
    shrink to id, status, hypothesis and the worst regression. The list itself never rolls off.
    """
    failed = [r for r in history if r.decision is not None and r.decision.status in FAILED_DECISIONS]
    cutoff = 0 if detailed_recent is None else max(len(failed) - detailed_recent, 0)
    return [_exclusion_entry(record, detailed=index >= cutoff) for index, record in enumerate(failed)]


def accepted_changes(history: Sequence[ExperimentRecord]) -> list[str]:
    """One line per promoted experiment: what worked, so the next proposal can build on it."""
    lines = []
    for record in history:
        if record.decision is not None and record.decision.status is DecisionStatus.PROMOTED:
            change = record.metadata.change or record.metadata.hypothesis or "(no change recorded)"
            lines.append(f"{record.experiment_id} [promoted{_speedup_label(record)}]: {one_line(change, 160)}")
    return lines


def evidence_terms(context: ProposalContext) -> frozenset[str]:
    """Names a hypothesis may cite instead of a number: case ids (3+ characters, shorter ones are too
    ambiguous), the statistics measured for the incumbent, and the NCU fields its profiles report."""
    terms = {case.case_id for case in context.cases if len(case.case_id) >= 3}
    evaluation = context.incumbent_evaluation
    if evaluation is not None:
        for case in evaluation.cases:
            if case.stats is not None:
                terms.update({"median", "p95", "speedup"})
            terms.update(ncu_summary(case))
    return frozenset(terms)


# ---------------------------------------------------------------------------------------------------------
# Prompt sections

MAX_PRIOR_EVIDENCE = 12  # prior-run outcomes shown to a generator

PROMPT_PREAMBLE = """\
You are optimizing one Triton/TLX GPU kernel file for lower end-to-end latency with identical results.
Rules:
- Produce a complete replacement of the kernel file. Keep every public function and class and their signatures.
- Choose exactly one testable hypothesis and make one coherent change: one subsystem, or a tightly coupled
  pair of edits that preserves the kernel's invariants.
- The hypothesis must cite measured evidence from this prompt (a number, a case id or a metric name).
- Do not repeat an excluded hypothesis listed below; each one was measured and failed as shown.
- A change inside the noise floor is not a win. Lower utilization without lower duration is not a win.
- Benchmark time (public wrapper) and profile time (main kernel) cover different scopes; never subtract them.
- Register-budget or buffering changes need spill or occupancy evidence and a producer/consumer proof.
- Never special-case the benchmark: no caching of results, no input detection, no skipped work. Every
  protected case is verified for correctness before any timing counts.
"""


def _case_lines(context: ProposalContext, compact: bool) -> str:
    lines = []
    for case in context.cases:
        parameters = json.dumps(case.parameters, sort_keys=True, default=str)
        lines.append(
            f"- {one_line(case.case_id, 80)}: parameters={one_line(parameters, 120 if compact else 400)}, "
            f"weight={case.weight:g}, protected={'yes' if case.protected else 'no'}"
        )
    return "\n".join(lines)


def _profile_deltas(current: CaseMeasurement, baseline: CaseMeasurement | None) -> str:
    if baseline is None:
        return ""
    new, old = ncu_summary(current), ncu_summary(baseline)
    parts = [
        f"{name} {_fmt(old[name])}->{_fmt(new[name])} ({_percent_change(old[name], new[name])})"
        for name in NCU_FIELDS
        if name in new and name in old and new[name] != old[name]
    ]
    return ", ".join(parts)


def _measurement_lines(context: ProposalContext, with_profiles: bool) -> str:
    evaluation = context.incumbent_evaluation
    if evaluation is None:
        return "No measurements of the incumbent are available yet."
    baseline = context.baseline_evaluation
    lines = [f"Evaluation status: {evaluation.status.value}" + (f" ({one_line(evaluation.reason, 200)})" if evaluation.reason else "")]
    for case in evaluation.cases:
        correct = {True: "yes", False: "NO", None: "unknown"}[case.correct]
        line = f"- {one_line(case.case_id, 80)}: correct={correct}"
        if case.stats is not None:
            stats = case.stats
            line += f", median={_fmt(stats.median)} µs, p95={_fmt(stats.p95)} µs, cv={stats.cv:.4f}, n={stats.n}"
            base_case = baseline.case(case.case_id) if baseline is not None else None
            if base_case is not None and base_case.stats is not None and stats.median > 0:
                line += f", speedup_vs_baseline={base_case.stats.median / stats.median:.3f}x"
        lines.append(line)
        if case.metrics:
            lines.append(f"  verification metrics: {one_line(json.dumps(compact_profile(case.metrics), default=str), 300)}")
        if with_profiles and case.profile:
            lines.append(f"  profile: {one_line(json.dumps(compact_profile(case.profile), default=str), 1500)}")
        base_case = baseline.case(case.case_id) if baseline is not None else None
        deltas = _profile_deltas(case, base_case)
        if deltas and context.incumbent_id != "baseline":
            lines.append(f"  profile vs baseline: {deltas}")
    return "\n".join(lines)


def _prior_lines(entries: Sequence[Mapping[str, Any]], limit_chars: int) -> str:
    lines = [
        "Outcomes of a prior run on this kernel, for reference only. Do not automatically adopt a prior "
        "winner; re-derive any change from the current measurements."
    ]
    for entry in entries[:MAX_PRIOR_EVIDENCE]:
        speedup = finite_number(entry.get("aggregate_speedup"))
        label = f", {speedup:.3f}x" if speedup is not None else ""
        lines.append(
            f"- {one_line(entry.get('experiment_id', '?'), 80)} [{one_line(entry.get('status', 'unknown'), 40)}{label}]: "
            f"hypothesis: {one_line(entry.get('hypothesis', ''), 240)} | change: {one_line(entry.get('change', ''), 240)}"
            f" | reason: {one_line(entry.get('reason', ''), 300)}"
        )
    return cap_block("\n".join(lines), limit_chars, "prior-run evidence")


@dataclass
class _Section:
    title: str
    levels: list[str]  # most detailed first; "" means dropped
    level: int = 0
    redact: bool = True

    def text(self) -> str:
        return self.levels[min(self.level, len(self.levels) - 1)]


def _sections(context: ProposalContext, include_source: bool) -> dict[str, _Section]:
    target = context.target
    run_lines = [
        f"Kernel: {one_line(context.kernel_name, 120)}; backend: {one_line(target.backend, 40)}; architecture: "
        f"{one_line(target.architecture, 40)}; device: {one_line(target.device or 'unspecified', 80)}",
        f"Experiment {context.experiment_id} (round {context.round_index}, slot {context.slot_index}); "
        f"incumbent: {context.incumbent_id}",
    ]
    bottleneck, bottleneck_evidence = classify_bottleneck(context.incumbent_evaluation)
    guidance = target.optimization_guidance.strip()
    history = list(context.history)
    failed_count = len(exclusion_list(history))
    exclusions_detailed = exclusion_list(history, detailed_recent=8)
    exclusions_compact = exclusion_list(history, detailed_recent=0)
    exclusions_minimal = [one_line(line, 90) for line in exclusions_compact]

    def excl(lines: list[str]) -> str:
        if not lines:
            return "None yet."
        return f"{failed_count} failed hypotheses; do not repeat them:\n" + "\n".join(f"- {line}" for line in lines)

    accepted = accepted_changes(history)
    reference = (context.reference_kernel_excerpt or "").strip()
    sections = {
        "preamble": _Section("", [PROMPT_PREAMBLE]),
        "run": _Section("Target", ["\n".join(run_lines)]),
        "guidance": _Section(
            "Frozen target-specific optimization guidance",
            [cap_block(guidance, 6000, "guidance"), cap_block(guidance, 1500, "guidance")] if guidance else [""],
        ),
        "cases": _Section(
            "Cases",
            [cap_block(_case_lines(context, False), 12_000, "cases"), cap_block(_case_lines(context, True), 3000, "cases")],
        ),
        "measurements": _Section(
            f"Current measurements of the incumbent ({context.incumbent_id})",
            [
                cap_block(_measurement_lines(context, True), 20_000, "measurements"),
                cap_block(_measurement_lines(context, False), 6000, "measurements"),
            ],
        ),
        "bottleneck": _Section("Bottleneck", [f"{bottleneck}: {bottleneck_evidence}"]),
        "accepted": _Section(
            "Promoted changes so far",
            ["\n".join(f"- {line}" for line in accepted), "\n".join(f"- {line}" for line in accepted[-5:]), ""]
            if accepted else [""],
        ),
        "exclusions": _Section(
            "Excluded hypotheses (failed earlier in this run)",
            [excl(exclusions_detailed), excl(exclusions_compact), excl(exclusions_minimal)],
        ),
        "reference": _Section(
            "Reference kernel excerpt (for ideas; not the file to edit)",
            [cap_block(reference, 4000, "reference kernel"), cap_block(reference, 1000, "reference kernel"), ""]
            if reference else [""],
        ),
        "prior": _Section(
            "Prior-run evidence",
            [_prior_lines(context.prior_evidence, 8000), _prior_lines(context.prior_evidence, 2000), ""]
            if context.prior_evidence else [""],
        ),
    }
    if include_source:
        sections["source"] = _Section(
            "Incumbent source (the complete file to replace)",
            [f"```python\n{context.incumbent_source.rstrip()}\n```"],
            redact=False,  # the file must reach the generator byte for byte
        )
    return sections


# Cheapest loss of information first: prior run, reference, raw profiles, long guidance, case detail,
# old exclusion detail; then whole optional sections.
_SHRINK_ORDER = (
    "prior", "reference", "measurements", "accepted", "guidance", "cases", "exclusions",
    "prior", "reference", "accepted", "exclusions",
)


def _render(sections: Mapping[str, _Section], secrets: Sequence[str]) -> str:
    parts = []
    for section in sections.values():
        text = section.text().strip("\n")
        if not text:
            continue
        if section.redact:
            text = redact_secrets(text, secrets)
        parts.append(f"## {section.title}\n{text}" if section.title else text)
    return "\n\n".join(parts) + "\n"


def build_prompt(context: ProposalContext, *, max_chars: int = 48_000, include_source: bool = True) -> str:
    """The evidence a generator sees, at most `max_chars` characters.

    Ingredients (seed Layers 1 and 5): rules, target, guidance, cases, the incumbent's per-case median, p95,
    CV and speedup vs baseline with compact profiles and deltas, the bottleneck class, promoted changes, every
    failed hypothesis with its regressions, a reference-kernel excerpt, prior-run evidence, and the
    incumbent source. When the budget is tight, detail is compressed in a fixed order; failed hypotheses are
    compressed, never dropped. Environment variables are never included and secret-looking strings are
    redacted. Raises `ProposalError` when the incumbent source alone does not fit.
    """
    sections = _sections(context, include_source)
    secrets = environment_secret_values()
    prompt = _render(sections, secrets)
    for name in _SHRINK_ORDER:
        if len(prompt) <= max_chars:
            return prompt
        section = sections[name]
        if section.level < len(section.levels) - 1:
            section.level += 1
            prompt = _render(sections, secrets)
    if len(prompt) <= max_chars:
        return prompt
    if include_source and len(sections["source"].text()) + len(PROMPT_PREAMBLE) > max_chars:
        raise ProposalError(
            f"the incumbent source ({len(context.incumbent_source)} characters) does not fit the prompt budget "
            f"of {max_chars} characters"
        )
    # Pathological history (hundreds of failures): keep the newest exclusions that fit, and say so.
    overflow = len(prompt) - max_chars
    exclusions = sections["exclusions"]
    lines = exclusions.text().split("\n")
    header, entries = lines[0], lines[1:]
    while entries and overflow > 0:
        overflow -= len(entries.pop(0)) + 1
    omitted = len(lines) - 1 - len(entries)
    exclusions.levels = [f"{header}\n- ({omitted} oldest entries omitted: prompt budget)\n" + "\n".join(entries)]
    exclusions.level = 0
    prompt = _render(sections, secrets)
    if len(prompt) <= max_chars:
        return prompt
    raise ProposalError(f"the prompt needs {len(prompt)} characters even fully compressed; the budget is {max_chars}")
