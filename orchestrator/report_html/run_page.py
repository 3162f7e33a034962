"""The HTML page of one optimize run: header, candidate speedups, search path, latencies, profile deltas.

`render_run_page` is pure: every figure arrives shaped (orchestrator/report_html/data.py) and every plot as
SVG text (figures.py); it only lays them out, escaping all text.
"""

from __future__ import annotations

from pydantic import BaseModel

from orchestrator.report_html.ceilings import DeviceCeilings
from orchestrator.report_html.data import (
    CandidateSpeedups,
    CaseLatency,
    ProfileDeltaRow,
    ProgressPoint,
    SearchStep,
)
from orchestrator.report_html.markup import (
    Safe,
    definitions,
    figure,
    join,
    num,
    page,
    percent,
    table,
    tag,
    yes_no,
)
from protocol.completion import CompletionReport


class RunPage(BaseModel):
    completion: CompletionReport
    threshold: float | None
    candidates: list[CandidateSpeedups]
    steps: list[SearchStep]
    latencies: list[CaseLatency]
    ceilings: DeviceCeilings | None
    profile_deltas: list[ProfileDeltaRow] | None  # None: baseline_profile.json or best_profile.json is absent
    speedup_svg: str | None
    latency_svg: str | None
    notes: list[str]  # records that could not be read, said at the top instead of failing the page
    allowance: float = 0.02  # max_case_regression: a protected case's upper bound below 1 - this is slower
    progress: list[ProgressPoint] = []
    progress_svg: str | None = None
    timed_by_journal: bool = True  # False: the times are the sum of the records' wall seconds
    autotune_lines: list[str] = []  # a kernel that autotunes itself: choices and first calls (docs/autotune.md)


def _speedup(value: float | None) -> str:
    return num(value, ".4f", "x")


def _header(report: CompletionReport) -> Safe:
    code = (
        "unknown"
        if report.exit_code is None
        else f"{int(report.exit_code)} ({'success' if report.success else 'no success'})"
    )
    platform = ", ".join(part for part in (report.backend, report.architecture) if part)
    stopping = report.stopping_reason.value if report.stopping_reason else "-"
    items: list[tuple[str, object]] = [
        ("kernel", report.kernel or "-"),
        ("device", (report.device or "unknown") + (f" ({platform})" if platform else "")),
        ("outcome", "finished" if report.finished else "NOT finished"),
        ("stopping reason", stopping + (f": {report.stopping_detail}" if report.stopping_detail else "")),
        ("exit code", code),
        ("winner", report.winner_experiment_id or "-"),
        (
            "aggregate speedup",
            _speedup(report.aggregate_speedup) + " (weighted geometric mean)"
            if report.aggregate_speedup is not None
            else "-",
        ),
        ("wall time", num(report.wall_seconds, ".1f", " s")),
        ("output directory", report.output_dir or "-"),
        ("commit", report.commit or "-"),
    ]
    if report.error:
        items.insert(3, ("error", report.error))
    return definitions(items)


def _candidates_section(view: RunPage) -> list[Safe]:
    threshold = (
        f"{view.threshold:g}x" if view.threshold is not None else "unknown (run.json has no min_speedup)"
    )
    intro = tag(
        "p",
        f"Each candidate against the incumbent it was measured with, case by case, in the order "
        f"the run tried them. Promotion threshold (min_speedup): {threshold}. The grey band is the "
        "candidate's between-run noise around 1x; error bars are the per-case confidence interval. A protected "
        f"case whose upper bound lies below {1 - view.allowance:g}x (max_case_regression {view.allowance:g}) is "
        "slower beyond its noise: ringed in red on the plot, its row red in the table, and the candidate rejected.",
    )
    rows, classes = [], []
    for candidate in view.candidates:
        for case in candidate.cases or [None]:
            rows.append(
                [
                    candidate.experiment_id,
                    candidate.status,
                    case.case_id if case else "-",
                    num(case.incumbent_us if case else None, ".3f"),
                    num(case.candidate_us if case else None, ".3f"),
                    _speedup(case.speedup if case else None),
                    f"{num(case.lower, '.4f')} – {num(case.upper, '.4f')}"
                    if case and case.lower is not None
                    else "-",
                    yes_no(case.correct if case else None),
                    "SLOWER" if case and case.slower else "-",
                    _speedup(candidate.aggregate_speedup),
                    percent(candidate.noise),
                ]
            )
            classes.append("slower" if case and case.slower else candidate.status)
    return [
        tag("h2", "Candidate speedups"),
        intro,
        figure(
            view.speedup_svg,
            f"Per-case speedups; dashed line: promotion threshold {threshold}",
            "No candidate has a per-case comparison to plot.",
        ),
        table(
            [
                "experiment",
                "decision",
                "case",
                "incumbent µs",
                "candidate µs",
                "speedup",
                "interval",
                "correct",
                "slower beyond noise",
                "aggregate",
                "noise",
            ],
            rows,
            classes,
        ),
    ]


def _progress_section(view: RunPage) -> list[Safe]:
    clock = ("the journal's timestamps" if view.timed_by_journal
             else "the sum of the experiments' recorded wall seconds (no journal.jsonl)")
    return [
        tag("h2", "Best so far against wall time"),
        tag(
            "p",
            "The best speedup over the baseline as the run went on (each promotion multiplies it by the "
            "candidate's speedup over its incumbent; the final is the winner measured again against the "
            f"baseline), and every decided candidate where it would have put the kernel. Times from {clock}.",
        ),
        figure(view.progress_svg, "Speedup over the baseline against wall time", "No decided experiment to plot."),
    ]


def _search_section(view: RunPage) -> list[Safe]:
    rows = [
        [
            step.experiment_id,
            str(step.round_index),
            step.parent_id or "-",
            step.status,
            "yes" if step.promoted else "no",
            step.reason or "-",
            "; ".join(step.knob_moves) or "-",
            step.change or "-",
            step.hypothesis or "-",
        ]
        for step in view.steps
    ]
    return [
        tag("h2", "Search path"),
        tag(
            "p",
            "Every experiment in order: what it changed (the knob moved, when the change line names it), "
            "whether it was promoted, and the decision's reason.",
        ),
        table(
            [
                "experiment",
                "round",
                "parent",
                "decision",
                "promoted",
                "reason",
                "knob moved",
                "change",
                "hypothesis",
            ],
            rows,
            [step.status for step in view.steps],
        ),
    ]


def _rate(value: float | None, scale: float, spec: str) -> str:
    return num(value / scale if value is not None else None, spec)


def _latency_section(view: RunPage) -> list[Safe]:
    ceilings = view.ceilings
    if ceilings is None:
        ceiling_note = (
            f"No peaks are known for device {view.completion.device or 'unknown'} (protocol/devices.py has no "
            "entry for it) and the run measured no copy ceiling: achieved figures are shown without one."
        )
    else:
        parts = []
        if ceilings.peaks is not None:
            peaks = ceilings.peaks
            flops = ", ".join(f"{dtype} {value / 1e12:g}" for dtype, value in peaks.flop_per_s.items())
            parts.append(f"datasheet peaks of the {peaks.name}: memory {peaks.memory_bytes_per_s / 1e12:g} TB/s, "
                         f"dense TFLOP/s {flops} ({peaks.source}; protocol/devices.py)")
        else:
            parts.append(f"no datasheet peaks for {ceilings.device} (protocol/devices.py has no entry)")
        if ceilings.copy_bytes_per_s is not None:
            parts.append(f"copy ceiling measured in this run {ceilings.copy_bytes_per_s / 1e12:.2f} TB/s")
        else:
            parts.append("no copy ceiling measured in this run")
        ceiling_note = ("Ceilings: " + "; ".join(parts) + ". The FLOP peak is that of the case's flop_dtype; a case "
                        "whose harness names none gets no FLOP percentage.")
    has_work = any(row.bytes is not None or row.flops is not None for row in view.latencies)
    work_note = "" if has_work else " No case's metrics carry bytes or flops, so no rates are shown."
    rows = [
        [
            row.case_id,
            row.parameters or "-",
            num(row.baseline_us, ".3f"),
            num(row.final_us, ".3f"),
            _speedup(row.speedup),
            _rate(row.baseline_bytes_per_s, 1e9, ".1f"),
            _rate(row.final_bytes_per_s, 1e9, ".1f"),
            percent(row.final_memory_peak_fraction),
            percent(row.final_copy_fraction),
            _rate(row.baseline_flop_per_s, 1e9, ".1f"),
            _rate(row.final_flop_per_s, 1e9, ".1f"),
            percent(row.final_flop_peak_fraction),
        ]
        for row in view.latencies
    ]
    return [
        tag("h2", "Baseline and final latency"),
        tag(
            "p",
            "Median latency per case from result.json (the final is the winner's revalidation). Rates are "
            "the case's work (bytes, flops from the harness's metrics) over the median. "
            + ceiling_note
            + work_note,
        ),
        figure(
            view.latency_svg, "Median latency per case, baseline and final", "No case has a latency to plot."
        ),
        table(
            [
                "case",
                "parameters",
                "baseline µs",
                "final µs",
                "speedup",
                "baseline GB/s",
                "final GB/s",
                "of memory peak",
                "of copy ceiling",
                "baseline GFLOP/s",
                "final GFLOP/s",
                "of FLOP peak",
            ],
            rows,
            ["slower" if row.slower else "" for row in view.latencies],
        ),
        *_copy_gaps(view),
    ]


def _copy_gaps(view: RunPage) -> list[Safe]:
    gaps = [(row.case_id, row.copy_gap) for row in view.latencies if row.copy_gap]
    if not gaps:
        return []
    return [tag("p", "Memory-bound cases below 85 % of the copy ceiling, and what stops each:"),
            tag("ul", join((tag("li", f"{case_id}: {gap}") for case_id, gap in gaps), ""))]


def _profile_section(view: RunPage) -> list[Safe]:
    heading = tag("h2", "Profile deltas of the finalist")
    if view.profile_deltas is None:
        return [
            heading,
            tag(
                "p",
                "Skipped: baseline_profile.json or best_profile.json is absent from the output directory.",
                class_="note",
            ),
        ]
    if not view.profile_deltas:
        return [
            heading,
            tag(
                "p",
                "No kernel-time figure is present in both the baseline's and the finalist's "
                "profile of any case (profiling was unavailable or not requested).",
                class_="note",
            ),
        ]
    rows = [
        [
            row.case_id,
            row.metric,
            num(row.baseline, ".3f"),
            num(row.final, ".3f"),
            num(row.delta, "+.3f"),
            num(row.relative * 100 if row.relative is not None else None, "+.1f", " %"),
        ]
        for row in view.profile_deltas
    ]
    return [
        heading,
        tag("p", "Kernel-time figures (µs) that both baseline_profile.json and best_profile.json have."),
        table(["case", "metric", "baseline", "finalist", "delta", "relative"], rows),
    ]


def _autotune_section(view: RunPage) -> list[Safe]:
    if not view.autotune_lines:
        return []
    return [
        tag("h2", "The kernel's own autotune"),
        tag("p", "Run once per key before any candidate, in a worker of the untouched kernel; every later worker "
                 "pinned this choice. First-call latency: a fresh worker loading the kernel and calling it once."),
        tag("ul", join([tag("li", line) for line in view.autotune_lines])),
    ]


def render_run_page(view: RunPage) -> str:
    report = view.completion
    title = f"tlx-agent report: {report.kernel or report.output_dir or 'run'}"
    notes = [tag("p", note, class_="note") for note in view.notes]
    body = [
        tag("h1", "TLX kernel optimization report"),
        _header(report),
        join(notes),
        *_autotune_section(view),
        *_progress_section(view),
        *_candidates_section(view),
        *_search_section(view),
        *_latency_section(view),
        *_profile_section(view),
    ]
    return page(title, body)
