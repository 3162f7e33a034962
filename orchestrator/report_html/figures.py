"""Matplotlib figures of the HTML report, rendered to SVG text that is inlined in the page.

No pyplot: each figure is a bare `Figure` (no global state, no GUI backend). Text is drawn as paths, so the
SVG needs no font on the reader's machine, and the hash salt and a blank date make a rerun byte-identical.
A function returns None when it has nothing to draw; the page then says why instead of showing an empty plot.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib
from matplotlib.figure import Figure

from orchestrator.report_html.data import BatchRow, CandidateSpeedups, CaseLatency, ProgressPoint
from protocol.results import is_revalidation_id

_SVG_SETTINGS = {"svg.fonttype": "path", "svg.hashsalt": "tlx-agent-report", "font.size": 9}
_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
SLOWER = "#d62728"  # a protected case slower beyond its noise, wherever the page shows one
_STATUS_COLOURS = {
    "improved": "#2ca02c",
    "no_improvement": "#7f7f7f",
    "commit_failed": "#ff7f0e",
    "failed": "#d62728",
}


def to_svg(figure: Figure) -> str:
    """The figure as an `<svg>` element (the XML declaration and DOCTYPE dropped, so it can sit in HTML)."""
    buffer = io.StringIO()
    with matplotlib.rc_context(_SVG_SETTINGS):
        figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _new_figure(width: float, height: float) -> Figure:
    with matplotlib.rc_context(_SVG_SETTINGS):
        return Figure(figsize=(width, height), layout="constrained")


def speedup_figure(candidates: Sequence[CandidateSpeedups], threshold: float | None,
                   allowance: float | None = None) -> str | None:
    """Per-case speedup of each candidate over its incumbent, with the per-case interval as error bars, the
    candidate's noise band around 1x and the promotion threshold; a protected case slower beyond its noise is
    ringed in red, and the per-case bound (1 - allowance) drawn in red dots."""
    drawn = [row for row in candidates if any(case.speedup is not None for case in row.cases)]
    if not drawn:
        return None
    case_ids = list(dict.fromkeys(case.case_id for row in drawn for case in row.cases))
    figure = _new_figure(max(6.0, 0.9 * len(drawn) + 3.0), 4.2)
    axes = figure.add_subplot()
    for x, row in enumerate(drawn):
        if row.noise is not None:
            axes.fill_between(
                [x - 0.4, x + 0.4],
                1 - row.noise,
                1 + row.noise,
                color="#bbbbbb",
                alpha=0.6,
                linewidth=0,
                label="noise band (1 ± noise)" if x == 0 else None,
            )
    width = 0.6 / max(len(case_ids), 1)
    slower_labelled = False
    for k, case_id in enumerate(case_ids):
        xs, ys, below, above = [], [], [], []
        for x, row in enumerate(drawn):
            case = next((c for c in row.cases if c.case_id == case_id and c.speedup is not None), None)
            if case is None:
                continue
            xs.append(x + (k - (len(case_ids) - 1) / 2) * width)
            ys.append(case.speedup)
            below.append(case.speedup - case.lower if case.lower is not None else 0.0)
            above.append(case.upper - case.speedup if case.upper is not None else 0.0)
        axes.errorbar(
            xs,
            ys,
            yerr=[below, above],
            fmt="o",
            markersize=5,
            capsize=2,
            color=_PALETTE[k % len(_PALETTE)],
            label=case_id,
        )
        slow = [(x, row_case.speedup) for x, row in enumerate(drawn) for row_case in row.cases
                if row_case.case_id == case_id and row_case.slower and row_case.speedup is not None]
        if slow:
            axes.scatter([x + (k - (len(case_ids) - 1) / 2) * width for x, _ in slow], [y for _, y in slow],
                         s=140, facecolors="none", edgecolors=SLOWER, linewidths=2.0, zorder=5,
                         label="slower beyond noise" if not slower_labelled else None)
            slower_labelled = True
    axes.axhline(1.0, color="black", linewidth=0.8)
    if threshold is not None:
        axes.axhline(
            threshold,
            color="#d62728",
            linestyle="--",
            linewidth=1.0,
            label=f"promotion threshold {threshold:g}x",
        )
    if allowance is not None and 0 < allowance < 1:
        axes.axhline(1.0 - allowance, color=SLOWER, linestyle=":", linewidth=1.0,
                     label=f"a case's upper bound below {1 - allowance:g}x: slower")
    axes.set_xticks(
        range(len(drawn)),
        [f"{row.experiment_id}\n{row.status}" for row in drawn],
        rotation=30 if len(drawn) > 6 else 0,
        ha="right" if len(drawn) > 6 else "center",
    )
    axes.set_ylabel("speedup over the incumbent (x)")
    axes.grid(axis="y", alpha=0.3)
    axes.legend(loc="best", fontsize=8)
    return to_svg(figure)


def progress_figure(points: Sequence[ProgressPoint]) -> str | None:
    """Best speedup over the baseline against wall time: a step line through the promotions, each decided
    candidate as a point (grey rejected, green promoted, red rejected for slowing a protected case), the
    revalidated final as a star."""
    drawn = [point for point in points if point.over_baseline is not None]
    if not points:
        return None
    figure = _new_figure(7.5, 3.8)
    axes = figure.add_subplot()
    xs = [0.0] + [point.seconds for point in points]
    ys = [1.0] + [point.best_so_far for point in points]
    axes.step(xs, ys, where="post", color="#1f77b4", linewidth=1.6, label="best so far (over the baseline)")
    groups = (
        ("promoted", lambda p: p.status == "promoted", "#2ca02c", "o"),
        ("rejected", lambda p: p.status not in ("promoted", "revalidated") and not p.slower_case, "#7f7f7f", "o"),
        ("rejected: a protected case slower", lambda p: p.slower_case and not is_revalidation_id(p.experiment_id), SLOWER, "X"),
        ("final, revalidated against the baseline", lambda p: is_revalidation_id(p.experiment_id), "#1f77b4", "*"),
    )
    for label, chosen, colour, marker in groups:
        picked = [point for point in drawn if chosen(point)]
        if picked:
            axes.scatter([p.seconds for p in picked], [p.over_baseline for p in picked], color=colour, marker=marker,
                         s=90 if marker == "*" else 36, zorder=4, label=label)
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xlabel("wall time since the run started (s)")
    axes.set_ylabel("speedup over the baseline (x)")
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize=8)
    return to_svg(figure)


def latency_figure(latencies: Sequence[CaseLatency]) -> str | None:
    """Baseline and final median latency per case, side by side (log scale when the cases span 10x)."""
    rows = [row for row in latencies if row.baseline_us is not None or row.final_us is not None]
    if not rows:
        return None
    figure = _new_figure(max(6.0, 1.1 * len(rows) + 3.0), 3.8)
    axes = figure.add_subplot()
    positions = range(len(rows))
    axes.bar(
        [x - 0.2 for x in positions],
        [row.baseline_us or 0.0 for row in rows],
        width=0.4,
        label="baseline",
        color="#7f7f7f",
    )
    axes.bar(
        [x + 0.2 for x in positions],
        [row.final_us or 0.0 for row in rows],
        width=0.4,
        label="final",
        color=[SLOWER if row.slower else "#1f77b4" for row in rows],
    )
    values = [v for row in rows for v in (row.baseline_us, row.final_us) if v]
    if values and max(values) / min(values) > 10:
        axes.set_yscale("log")
    axes.set_xticks(list(positions), [row.case_id for row in rows], rotation=20 if len(rows) > 4 else 0)
    axes.set_ylabel("median latency (µs)")
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize=8)
    return to_svg(figure)


def batch_figure(rows: Sequence[BatchRow]) -> str | None:
    """Each job's aggregate speedup as a bar coloured by its status (jobs without a speedup are left out)."""
    drawn = [row for row in rows if row.speedup is not None]
    if not drawn:
        return None
    figure = _new_figure(max(6.0, 0.7 * len(drawn) + 3.0), 3.8)
    axes = figure.add_subplot()
    axes.bar(
        range(len(drawn)),
        [row.speedup for row in drawn],
        color=[_STATUS_COLOURS.get(row.status, "#1f77b4") for row in drawn],
    )
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xticks(
        range(len(drawn)),
        [row.job_id for row in drawn],
        rotation=30 if len(drawn) > 6 else 0,
        ha="right" if len(drawn) > 6 else "center",
    )
    axes.set_ylabel("aggregate speedup (x)")
    axes.grid(axis="y", alpha=0.3)
    return to_svg(figure)
