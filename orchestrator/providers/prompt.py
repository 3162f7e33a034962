"""The prompt a generator sees: measurements, bottleneck, history and rules, within a character budget.

Everything here is a pure function of the context, so the policy that decides what a model sees can be
tested without a model. Prompts carry measurements, compact profiles and the full list of failed
hypotheses; they never carry environment variables, API keys, raw profiler artifacts or paths.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.providers.base import ProposalContext, ProposalError
from orchestrator.providers.bottleneck import (
    NCU_FIELDS,
    classify_bottleneck,
    finite_number,
    format_number,
    ncu_summary,
)
from orchestrator.providers.history import accepted_changes, exclusion_list, percent_change
from orchestrator.providers.redaction import environment_secret_values, redact_secrets
from orchestrator.text import cap_block, one_line
from protocol.results import CaseMeasurement

# ---------------------------------------------------------------------------------------------------------
# Prompt-safe profiles

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
# Evidence a hypothesis may cite

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
        f"{name} {format_number(old[name])}->{format_number(new[name])} ({percent_change(old[name], new[name])})"
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
            line += f", median={format_number(stats.median)} µs, p95={format_number(stats.p95)} µs, cv={stats.cv:.4f}, n={stats.n}"
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
        "refused": _Section(
            "Refused just now (each repeated what this run had already refused; propose something else)",
            ["\n".join(f"- {one_line(r.change or 'a proposal', 120)}: {one_line(r.reason, 300)}"
                       for r in context.refused)] if context.refused else [""],
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

    Ingredients: rules, target, guidance, cases, the incumbent's per-case median, p95,
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
