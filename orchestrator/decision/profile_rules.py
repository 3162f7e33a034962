"""Pure profiling policy: when to deep-profile, the vetoes (NCU regression, a benchmark the kernel times do not
back, work outside `main_scope`), profile deltas.

Profiles are the per-case dicts returned by `sandbox_worker.harness_kit.profile_kit.profile_with_kit`:
Proton figures under `profile["proton"]` (`wrapper_us`, `main_kernel_us`, `non_main_kernel_us`), NCU
figures under `profile["ncu"]["summary"]`. A missing figure is None and stays None through every
function here: an unknown value is never turned into 0 and never vetoes or promotes anything.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NEAR_THRESHOLD_WINDOW = 0.01
REGRESSION_THRESHOLD = 0.01
DISAGREEMENT_TOLERANCE = 0.05
# A benchmark speedup more than this far above the best kernel-time speedup (Proton, NCU) is not trusted:
# honest H200 runs differ by up to ~30 % between the endpoint timer and the profilers (tiny kernels, spills),
# timer patches of the dishonest-candidate corpus (tests/cheats) claimed 8x over unchanged H200 kernels.
UNBACKED_SPEEDUP_BOUND = 0.5
# Kernel time outside `main_scope` a candidate may add, as a share of its GPU kernel time, before the intended
# kernel no longer accounts for the work (a library call or another kernel doing it).
OUTSIDE_MAIN_SCOPE_SHARE = 0.10
OUTSIDE_MAIN_SCOPE_MIN_US = 1.0
_EPSILON = 1e-12

# (log/delta key, section, field) for the figures compared between a candidate and the incumbent.
DELTA_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("ncu.duration_us", "ncu", "duration_us"),
    ("ncu.sm_throughput_pct", "ncu", "sm_throughput_pct"),
    ("ncu.dram_throughput_pct", "ncu", "dram_throughput_pct"),
    ("ncu.achieved_occupancy_pct", "ncu", "achieved_occupancy_pct"),
    ("ncu.registers_per_thread", "ncu", "registers_per_thread"),
    ("ncu.local_load_bytes", "ncu", "local_load_bytes"),
    ("ncu.local_store_bytes", "ncu", "local_store_bytes"),
    ("proton.main_kernel_us", "proton", "main_kernel_us"),
    ("proton.wrapper_us", "proton", "wrapper_us"),
)



def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def profile_value(profile: Mapping[str, Any] | None, section: str, field: str) -> float | None:
    """One figure from a per-case profile; None when absent, unavailable or not a finite number."""
    if not isinstance(profile, Mapping):
        return None
    block = profile.get(section)
    if not isinstance(block, Mapping):
        return None
    if section == "ncu":
        summary = block.get("summary")
        if isinstance(summary, Mapping) and field in summary:
            return number(summary[field])
    return number(block.get(field))


def ncu_duration_us(profile: Mapping[str, Any] | None) -> float | None:
    return profile_value(profile, "ncu", "duration_us")


# ---- deep-profile escalation --------------------------------------------------------------------------


def near_threshold(speedup: float | None, min_speedup: float, window: float = NEAR_THRESHOLD_WINDOW) -> bool:
    """Within one percentage point of the promotion threshold, where one more measurement decides."""
    value = number(speedup)
    return value is not None and abs(value - min_speedup) <= window + _EPSILON


def clearly_slow(speedup: float | None, min_speedup: float, window: float = NEAR_THRESHOLD_WINDOW) -> bool:
    """Below the threshold by more than the near-threshold window: no deep profile is worth its time."""
    value = number(speedup)
    return value is not None and value < min_speedup - window - _EPSILON


def deep_profile_reasons(
    *,
    is_baseline: bool,
    is_finalist: bool,
    correct: bool,
    speedup: float | None,
    min_speedup: float,
    rounds_without_promotion: int,
    stagnation_rounds: int = 2,
    disagreement: str | bool | None,
) -> list[str]:
    """Why this evaluation deserves a deep profile (baseline, finalist, near the threshold, disagreeing timers, stagnation); an empty list means summary only.

    Reasons: `baseline` (before candidate generation), `finalist` (before commit), `near_threshold`,
    `stagnation` (`rounds_without_promotion >= stagnation_rounds`), `disagreement` (benchmark, Proton
    and NCU disagree). Incorrect candidates never get one; neither do clearly slow candidates
    (speedup < min_speedup - 0.01), whatever else holds.
    """
    if not correct:
        return []
    reasons: list[str] = []
    if is_baseline:
        reasons.append("baseline")
    if is_finalist:
        reasons.append("finalist")
    if not (is_baseline or is_finalist) and clearly_slow(speedup, min_speedup):
        return []
    if not is_baseline and near_threshold(speedup, min_speedup):
        reasons.append("near_threshold")
    if not is_baseline and rounds_without_promotion >= stagnation_rounds:
        reasons.append("stagnation")
    if disagreement:
        reasons.append("disagreement")
    return reasons


def kernel_speedups(candidate: Mapping[str, Any] | None, incumbent: Mapping[str, Any] | None) -> dict[str, float | None]:
    """Incumbent time / candidate time for the Proton main kernel and the NCU duration (None if unknown)."""
    return {tool: times.speedup for tool, times in kernel_times(candidate, incumbent).items()}


@dataclass(frozen=True)
class PairedTimes:
    """One measurement of the incumbent and the candidate on one case, in µs (None: not measured)."""

    incumbent_us: float | None
    candidate_us: float | None

    @property
    def known(self) -> bool:
        return bool(self.incumbent_us and self.candidate_us and self.incumbent_us > 0 and self.candidate_us > 0)

    @property
    def speedup(self) -> float | None:
        return _speedup(self.incumbent_us, self.candidate_us)

    @property
    def saved_us(self) -> float | None:
        if not self.known or self.incumbent_us is None or self.candidate_us is None:
            return None
        return self.incumbent_us - self.candidate_us


def kernel_times(candidate: Mapping[str, Any] | None, incumbent: Mapping[str, Any] | None) -> dict[str, PairedTimes]:
    """The Proton main-kernel and NCU duration of both sides."""
    return {tool: PairedTimes(profile_value(incumbent, section, field), profile_value(candidate, section, field))
            for tool, section, field in (("proton", "proton", "main_kernel_us"), ("ncu", "ncu", "duration_us"))}


def _speedup(incumbent_us: float | None, candidate_us: float | None) -> float | None:
    """Incumbent / candidate time; None unless both are known and positive."""
    if incumbent_us and candidate_us and incumbent_us > 0 and candidate_us > 0:
        return incumbent_us / candidate_us
    return None


def measurements_disagree(times: Mapping[str, PairedTimes], tolerance: float = DISAGREEMENT_TOLERANCE) -> str | None:
    """Why two of the endpoint benchmark, Proton main-kernel and NCU duration measurements disagree, or None.

    Two measurements of the same change agree when one of two simple models explains them: the same ratio
    (a tool that times at another clock scales both sides alike) or the same time saved (the endpoint window
    holds a fixed cost, the Python wrapper and the launch, that no kernel change removes: on the H200 a 4096^3
    matmul went 1374 -> 238 µs in the benchmark, 1373 -> 218 µs in NCU, 5.78x vs 6.31x, 1.14 vs 1.16 ms
    saved). They disagree when neither does: the speedups differ by more than `tolerance`, and so do the
    times saved, as a share of the larger incumbent time. Fewer than two known measurements cannot disagree.
    """
    available = [(name, paired) for name, paired in times.items() if paired.known]
    worst: tuple[float, str] | None = None
    for index, (left_name, left) in enumerate(available):
        for right_name, right in available[index + 1:]:
            left_speedup, right_speedup = left.speedup or 0.0, right.speedup or 0.0
            ratio_gap = max(left_speedup, right_speedup) / min(left_speedup, right_speedup) - 1.0
            scale = max(left.incumbent_us or 0.0, right.incumbent_us or 0.0)
            saved_gap = abs((left.saved_us or 0.0) - (right.saved_us or 0.0)) / scale
            if min(ratio_gap, saved_gap) <= tolerance + _EPSILON:
                continue
            text = (f"{left_name} speedup {left_speedup:.4f}x vs {right_name} speedup {right_speedup:.4f}x differ by "
                    f"{ratio_gap * 100:.1f}%, and the time they save ({left.saved_us:.1f} vs {right.saved_us:.1f} "
                    f"us) by {saved_gap * 100:.1f}% of {scale:.1f} us (> {tolerance * 100:g}%)")
            if worst is None or min(ratio_gap, saved_gap) > worst[0]:
                worst = (min(ratio_gap, saved_gap), text)
    return worst[1] if worst else None


# ---- regression veto ----------------------------------------------------------------------------------


def ncu_regression_veto(
    candidate_profile: Mapping[str, Any] | None,
    incumbent_profile: Mapping[str, Any] | None,
    threshold: float = REGRESSION_THRESHOLD,
) -> str | None:
    """The veto text when the candidate's NCU main-kernel duration is > `threshold` worse than the incumbent's.

    None when it is not worse, or when either duration is unknown: an unmeasured duration is reported by
    `ncu_veto_unavailable_reason`, never treated as a regression (nor as a pass of anything else).
    """
    candidate, incumbent = ncu_duration_us(candidate_profile), ncu_duration_us(incumbent_profile)
    if candidate is None or incumbent is None or incumbent <= 0:
        return None
    if candidate > incumbent * (1.0 + threshold) + _EPSILON:
        worse = candidate / incumbent - 1.0
        return (f"ncu duration regressed: candidate {candidate:.3f}us > incumbent {incumbent:.3f}us by "
                f"{worse * 100:.2f}% (> {threshold * 100:g}%)")
    return None


def gpu_time_speedup(candidate: Mapping[str, Any] | None, incumbent: Mapping[str, Any] | None) -> float | None:
    """Incumbent / candidate Proton time over every kernel (main and the rest): a candidate that drops a copy
    kernel is faster here though its main kernel is not."""
    def total(profile: Mapping[str, Any] | None) -> float | None:
        main = profile_value(profile, "proton", "main_kernel_us")
        other = profile_value(profile, "proton", "non_main_kernel_us")
        return main + (other or 0.0) if main is not None else None

    return _speedup(total(incumbent), total(candidate))


def unbacked_speedup_veto(case_id: str, benchmark_speedup: float | None, kernel_speedups_by_tool: Mapping[str, float | None],
                          bound: float = UNBACKED_SPEEDUP_BOUND) -> str | None:
    """The veto text when the benchmark claims a speedup that no profiler's kernel times come near.

    Only the direction a cheat needs: a benchmark far *faster* than the kernels. Proton's and NCU's kernel
    times are measured by the tools, not by the harness's timer; with neither known nothing is vetoed."""
    claimed = number(benchmark_speedup)
    backed = [value for value in (number(v) for v in kernel_speedups_by_tool.values()) if value and value > 0]
    if not claimed or not backed:
        return None
    best = max(backed)
    if claimed > best * (1.0 + bound) + _EPSILON:
        return (f"case {case_id}: the benchmark's speedup {claimed:.4f}x is not backed by the profilers' kernel "
                f"times (best {best:.4f}x; allowed up to {1.0 + bound:g}x that)")
    return None


def outside_main_scope_veto(case_id: str, candidate_profile: Mapping[str, Any] | None,
                            incumbent_profile: Mapping[str, Any] | None,
                            share: float = OUTSIDE_MAIN_SCOPE_SHARE) -> str | None:
    """The veto text when the candidate moved GPU work out of the intended kernel (`main_scope`): its Proton
    time in other kernels grew by more than `share` of its kernel time (and at least a microsecond)."""
    main = profile_value(candidate_profile, "proton", "main_kernel_us")
    other = profile_value(candidate_profile, "proton", "non_main_kernel_us")
    before = profile_value(incumbent_profile, "proton", "non_main_kernel_us")
    if main is None or other is None or before is None:
        return None
    added = other - before
    if added > max(OUTSIDE_MAIN_SCOPE_MIN_US, share * (main + other)) + _EPSILON:
        return (f"case {case_id}: {added:.3f}us more GPU time outside main_scope (other kernels {other:.3f}us, "
                f"incumbent {before:.3f}us, main kernel {main:.3f}us): the intended kernel does not account "
                "for the work (a library call or another kernel); set \"allow_work_outside_main_scope\": true "
                "in target.json if that is intended")
    return None


def ncu_veto_unavailable_reason(candidate_profile: Mapping[str, Any] | None,
                                incumbent_profile: Mapping[str, Any] | None) -> str | None:
    """Why the regression veto could not be checked (a diagnostic for the log), or None when it could."""
    missing = [side for side, profile in (("candidate", candidate_profile), ("incumbent", incumbent_profile))
               if ncu_duration_us(profile) is None]
    if not missing:
        return None
    return f"ncu regression veto not checked: no ncu duration for the {' and '.join(missing)}"


# ---- required evidence: present, and in agreement with the benchmark ------------------------------------

EVIDENCE_TOOLS = ("proton", "ncu")
TOOL_LABELS = {"proton": "Proton", "ncu": "NCU"}
# A profiled kernel time and the benchmark's median of the same case agree within this factor, plus a few µs per
# launch for the gaps between launches the benchmark's window holds: honest H200 runs differ by up to ~30 %
# (tiny kernels, spills); a kernel that is cheap only when profiled, or only when timed, differs by far more.
AGREEMENT_FACTOR = 1.5
AGREEMENT_SLACK_US_PER_LAUNCH = 2.0


def evidence_time_us(profile: Mapping[str, Any] | None, tool: str) -> float | None:
    """The kernel time per call a profiler measured: Proton's over every kernel of the call, NCU's for the main
    kernel's launch; None when the tool gave nothing."""
    if tool == "proton":
        total = profile_value(profile, "proton", "total_kernel_us")
        if total is not None:
            return total
        main, other = profile_value(profile, "proton", "main_kernel_us"), profile_value(profile, "proton",
                                                                                          "non_main_kernel_us")
        return main + (other or 0.0) if main is not None else None
    return ncu_duration_us(profile)


def tools_with_evidence(profiles: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """The profilers that measured the untouched kernel (case id -> its profile): what this machine can
    profile, and so what every candidate must bring too. Empty: the run has no profile evidence at all."""
    return [tool for tool in EVIDENCE_TOOLS if any(evidence_time_us(p, tool) is not None for p in profiles.values())]


def _missing_reason(profile: Mapping[str, Any] | None, tool: str) -> str:
    section = profile.get(tool) if isinstance(profile, Mapping) else None
    if not isinstance(profile, Mapping):
        return "no profile came back"
    if profile.get("error"):
        return f"the profile step failed: {str(profile['error'])[:160]}"
    if not isinstance(section, Mapping):
        return f"{TOOL_LABELS[tool]} did not run"
    notes = section.get("diagnostics") or []
    return str(notes[0])[:160] if notes else f"{TOOL_LABELS[tool]} gave no kernel time"


def evidence_problem(case_id: str, profile: Mapping[str, Any] | None, benchmark_us: float | None,
                     required: list[str], launches: int = 1) -> str | None:
    """Why a candidate's profile evidence for one case does not stand (None when it does): a required tool gave
    nothing ("profile missing for n16M: Proton (...)"), or its kernel time and the benchmark disagree beyond
    `AGREEMENT_FACTOR` ("n16M: Proton 6.7 us vs benchmark 55.1 us"). NCU profiles the main kernel's launch only,
    so with several launches per call it is held only to not exceeding the benchmark."""
    slack = AGREEMENT_SLACK_US_PER_LAUNCH * max(launches, 1)
    for tool in required:
        measured = evidence_time_us(profile, tool)
        if measured is None:
            return f"profile missing for {case_id}: {TOOL_LABELS[tool]} ({_missing_reason(profile, tool)})"
        bench = number(benchmark_us)
        if bench is None or bench <= 0:
            continue
        too_fast = bench > AGREEMENT_FACTOR * measured + slack and not (tool == "ncu" and launches > 1)
        too_slow = measured > AGREEMENT_FACTOR * bench + slack
        if too_fast or too_slow:
            return (f"{case_id}: {TOOL_LABELS[tool]} {measured:.1f} us vs benchmark {bench:.1f} us (they must agree "
                    f"within {AGREEMENT_FACTOR:g}x + {slack:g} us on the same inputs, poison and flush)")
    return None


# ---- deltas and log lines -----------------------------------------------------------------------------


def profile_deltas(candidate: Mapping[str, Any] | None, incumbent: Mapping[str, Any] | None) -> dict[str, dict[str, float | None]]:
    """Per figure: candidate, incumbent, absolute delta (candidate - incumbent) and relative delta.

    A null on either side gives null deltas; a zero incumbent gives a null relative delta.
    """
    deltas: dict[str, dict[str, float | None]] = {}
    for key, section, field in DELTA_FIELDS:
        mine, theirs = profile_value(candidate, section, field), profile_value(incumbent, section, field)
        absolute = mine - theirs if mine is not None and theirs is not None else None
        relative = absolute / theirs if absolute is not None and theirs not in (None, 0.0) else None
        deltas[key] = {"candidate": mine, "incumbent": theirs, "delta": absolute, "relative": relative}
    return deltas
