"""`report --format html`: one self-contained page drawn from the `npuscope.report/1` document.

The page is the JSON report (analysis/report.py) as charts and tables: per card the findings
with their time at stake, op-type bars, the per-step stacks, the longest tasks and waits, and
on a cluster (the document's `cluster` key) the per-rank bars. The one thing the document does
not hold is the timeline picture: `timeline_pictures` draws it from the diagnosed tasks with
the explorer's own model (analysis/timeline_view.py), engine busy time over the card's span
and the idle time coloured by its wait cause.

Everything is inline: CSS in a `<style>`, charts as SVG made here (analysis/svg.py), no
script, no font or image from elsewhere, no event handler. Every string from a profile is
escaped. Light background; prints on paper.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from npuscope.parsers import Profile

from . import svg
from .cluster_report import RANK_HEADERS
from .diagnose import Diagnosis
from .findings import SEVERITY_MARK
from .report import (
    OP_STAT_HEADERS,
    OP_STAT_NUMERIC,
    TASK_HEADERS,
    TASK_NUMERIC,
    VIEW_SECTIONS,
    WAIT_HEADERS,
    WAIT_NUMERIC,
    op_stat_cells,
    task_cells,
    wait_cells,
)
from .svg import Bar, esc
from .timeline_view import CAUSES, HOST_COMPILE_LANE, HOST_SYNC_LANE, IDLE_LANE, LaneView, build_model, fit, render
from .training_tables import card_step_windows, step_marks

SEVERITY_COLOR = {"critical": "#c62828", "warning": "#b45f06", "info": "#1565c0"}
"""The text report's CRIT / WARN / INFO, in the explorer's red, yellow (darkened for a light
page) and blue."""
LANE_COLOR = {
    "AI_CORE": "#2e9d47",
    "AI_VECTOR_CORE": "#11898c",
    "AI_CPU": "#b0309f",
    "MIX": "#8467cf",
    "COMM": "#1f6fd6",
    "OTHER": "#8e959c",
    IDLE_LANE: "#b5b5b5",  # waits under the long-wait threshold: no cause
    HOST_COMPILE_LANE: "#a61b1b",
    HOST_SYNC_LANE: "#d46a00",
}
LANE_LABEL = {
    "AI_CORE": "AI Core",
    "AI_VECTOR_CORE": "AI Vector",
    "AI_CPU": "AI CPU",
    "MIX": "Mix",
    "COMM": "Communication",
    "OTHER": "Other",
    IDLE_LANE: "idle (wait)",
    HOST_COMPILE_LANE: "host compile",
    HOST_SYNC_LANE: "host sync",
}
CAUSE_COLOR = {
    "recompilation": "#d62728",
    "host_op": "#f28c00",
    "communication": "#1f6fd6",
    "unexplained": "#9e9e9e",
    "expected": "#5f5f5f",
}
STEP_PARTS = (("compute", "#2e9d47"), ("comm not overlapped", "#1f6fd6"), ("free", "#a8a8a8"))
MAX_STEPS = 100  # columns of the per-step chart; more steps: the slowest, in step order

TIMELINE_COLUMNS = 840
LANE_H = 18
LANE_LABEL_W = 110

CSS = """
:root { color-scheme: light; }
body { margin: 0; background: #fff; color: #1d1d1d;
  font: 14px/1.45 "DejaVu Sans", "Liberation Sans", Arial, Helvetica, sans-serif; }
main { max-width: 1000px; margin: 0 auto; padding: 20px 24px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; word-break: break-all; }
h2 { font-size: 19px; margin: 32px 0 6px; padding-bottom: 4px; border-bottom: 2px solid #d0d7de; }
h3 { font-size: 15px; margin: 20px 0 6px; color: #333; }
.meta, .note, .muted { color: #555; font-size: 13px; word-break: break-all; }
.kpis { display: flex; flex-wrap: wrap; gap: 8px; margin: 8px 0; }
.kpi { border: 1px solid #d0d7de; border-radius: 6px; padding: 4px 10px; background: #f6f8fa; }
.kpi b { display: block; font-size: 16px; }
.finding { border-left: 5px solid #999; padding: 4px 10px; margin: 6px 0; background: #fafafa; }
.finding .sev { display: inline-block; min-width: 3.2em; text-align: center; color: #fff;
  font-weight: bold; font-size: 12px; border-radius: 3px; padding: 0 4px; margin-right: 6px; }
.finding .stake { font-weight: bold; }
.finding .advice { color: #444; font-size: 13px; }
.sev-critical { border-color: #c62828; } .sev-critical .sev { background: #c62828; }
.sev-warning { border-color: #b45f06; } .sev-warning .sev { background: #b45f06; }
.sev-info { border-color: #1565c0; } .sev-info .sev { background: #1565c0; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; margin: 4px 0 8px; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f0f3f6; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name { word-break: break-all; }
.slow td { background: #fdecea; }
.cause { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; }
svg.chart { display: block; width: 100%; height: auto; margin: 4px 0; }
svg.legend { display: block; width: 100%; height: auto; max-height: 22px; }
@media print {
  main { max-width: none; padding: 0; }
  section.card, .finding, svg.chart, table { break-inside: avoid; }
  h2 { break-before: auto; break-after: avoid; }
}
"""


# --------------------------------------------------------------------------- the timeline


@dataclass(frozen=True)
class TimelinePicture:
    """One card's timeline, drawn over its whole span: per lane the busy fraction of each of
    TIMELINE_COLUMNS columns (idle: each column's dominant wait cause) and the step marks."""

    card: str
    origin_ns: int
    start_ns: int
    end_ns: int
    lanes: tuple[LaneView, ...]
    steps: tuple[tuple[int | None, int, int], ...]


def timeline_pictures(profile: Profile, diagnosis: Diagnosis) -> dict[str, TimelinePicture]:
    """The timeline of each diagnosed card (none when start times are unusable)."""
    if profile.time_problem is not None or diagnosis.tasks.height == 0:
        return {}
    windows = card_step_windows(profile)
    out = {}
    for card in diagnosis.cards:
        model = build_model(diagnosis.tasks, profile.events, card)
        if not any(len(lane.intervals) for lane in model.lanes):
            continue
        window = fit(model)
        out[card] = TimelinePicture(
            card=card,
            origin_ns=model.origin_ns,
            start_ns=window.start_ns,
            end_ns=window.end_ns,
            lanes=render(model, window.start_ns, window.end_ns, TIMELINE_COLUMNS),
            steps=step_marks(windows, card),
        )
    return out


def _ticks(span_ms: float) -> list[float]:
    """About six round tick values over [0, span_ms]."""
    if span_ms <= 0:
        return [0.0]
    raw = span_ms / 6
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(span_ms / step) + 1)]


def timeline_svg(pic: TimelinePicture) -> str:
    cols = TIMELINE_COLUMNS
    x0 = LANE_LABEL_W
    lanes = [lane for lane in pic.lanes if any(lane.levels)]
    top = 6.0
    parts: list[str] = []
    ns_per_col = (pic.end_ns - pic.start_ns) / cols
    for i, lane in enumerate(lanes):
        y = top + i * (LANE_H + 4)
        parts.append(svg.rect(x0, y, cols, LANE_H, "#f3f4f6"))
        parts.append(svg.text(x0 - 6, y + LANE_H * 0.72, LANE_LABEL.get(lane.name, lane.name), "end", 11))
        base = LANE_COLOR.get(lane.name, "#888")
        runs: list[tuple[int, int, int, str]] = []  # start column, length, eighths, colour
        for c, (level, cause) in enumerate(zip(lane.levels, lane.causes)):
            q = 0 if level <= 0 else max(1, math.ceil(level * 8 - 1e-9))
            color = CAUSE_COLOR.get(cause, base) if cause is not None else base
            if runs and runs[-1][0] + runs[-1][1] == c and runs[-1][2:] == (q, color):
                runs[-1] = (runs[-1][0], runs[-1][1] + 1, q, color)
            else:
                runs.append((c, 1, q, color))
        name = LANE_LABEL.get(lane.name, lane.name)
        for c, n, q, color in runs:
            if q == 0:
                continue
            h = LANE_H * q / 8
            t0 = (pic.start_ns + c * ns_per_col - pic.origin_ns) / 1e6
            t1 = (pic.start_ns + (c + n) * ns_per_col - pic.origin_ns) / 1e6
            parts.append(
                svg.rect(x0 + c, y + LANE_H - h, n, h, color, f"{name} {t0:,.3f}-{t1:,.3f} ms: {q * 12.5:.0f}% busy")
            )
    bottom = top + len(lanes) * (LANE_H + 4)
    span_ms = (pic.end_ns - pic.start_ns) / 1e6
    for s_num, s_ns, _ in pic.steps:  # step boundaries
        x = x0 + (s_ns - pic.start_ns) / 1e6 / span_ms * cols if span_ms else x0
        if x0 <= x <= x0 + cols:
            parts.append(
                f'<line x1="{svg.num(x)}" x2="{svg.num(x)}" y1="{top - 4}" y2="{svg.num(bottom)}" '
                'stroke="#444" stroke-dasharray="3 2" stroke-width="1"/>'
            )
            if s_num is not None:
                parts.append(svg.text(x + 3, bottom + 12, f"step {s_num}", size=10, fill="#444"))
    axis_y = bottom + (22 if pic.steps else 8)
    parts.append(f'<line x1="{x0}" x2="{x0 + cols}" y1="{axis_y}" y2="{axis_y}" stroke="#888"/>')
    lead_ms = (pic.origin_ns - pic.start_ns) / 1e6
    for t in _ticks(span_ms):
        x = x0 + t / span_ms * cols if span_ms else x0
        parts.append(f'<line x1="{svg.num(x)}" x2="{svg.num(x)}" y1="{axis_y}" y2="{axis_y + 4}" stroke="#888"/>')
        parts.append(svg.text(x, axis_y + 16, f"{t - lead_ms:,.4g} ms", "middle", 10, "#555"))
    return svg.svg(x0 + cols + 10, axis_y + 22, "".join(parts), f"timeline of card {pic.card}")


def timeline_legend(pic: TimelinePicture) -> str:
    names = [lane.name for lane in pic.lanes if any(lane.levels)]
    causes = {c for lane in pic.lanes for c in lane.causes if c is not None}
    items = [(LANE_LABEL.get(n, n), LANE_COLOR.get(n, "#888")) for n in names if n != IDLE_LANE]
    items += [(f"wait: {c}", CAUSE_COLOR[c]) for c in CAUSES if c in causes]
    if IDLE_LANE in names:
        items.append(("short wait", LANE_COLOR[IDLE_LANE]))
    return svg.legend(items)


# --------------------------------------------------------------------------- pieces


def _us(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f} us"


def at_stake(f: Mapping[str, Any]) -> str:
    """A finding's time at stake, written as the text report writes it."""
    out = f"{f['time_us']:,.0f} us" if f["time_us"] else "-"
    if f.get("view"):
        out += f" (see {VIEW_SECTIONS.get(f['view'], f['view'])})"
    return out


def _cell(value: Any) -> str:
    if value is None:
        return '<td class="n">-</td>'
    if isinstance(value, bool):
        return f"<td>{esc(value)}</td>"
    if isinstance(value, int):
        return f'<td class="n">{value:,}</td>'
    if isinstance(value, float):
        return f'<td class="n">{value:,.3f}</td>'
    return f'<td class="name">{esc(value)}</td>'


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: set[int], classes: Sequence[str] = ()) -> str:
    head = "".join(
        f'<th class="n">{esc(h)}</th>' if i in numeric else f"<th>{esc(h)}</th>" for i, h in enumerate(headers)
    )
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if i < len(classes) and classes[i] else ""
        body.append(f"<tr{cls}>" + "".join(_cell(v) for v in row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _kpis(items: Sequence[tuple[str, str]]) -> str:
    return (
        '<div class="kpis">' + "".join(f'<div class="kpi">{esc(k)}<b>{esc(v)}</b></div>' for k, v in items) + "</div>"
    )


def _lane_color(core_type: str | None) -> str:
    t = core_type or ""
    if t in LANE_COLOR:
        return LANE_COLOR[t]
    if t.startswith("MIX"):
        return LANE_COLOR["MIX"]
    if t in ("COMMUNICATION", "HCCL") or t.startswith("HCCL"):
        return LANE_COLOR["COMM"]
    return LANE_COLOR["OTHER"]


def findings_html(findings: Sequence[Mapping[str, Any]], span_us: float | None) -> str:
    if not findings:
        return '<p class="muted">none</p>'
    out = []
    bars = [
        Bar(
            f"{SEVERITY_MARK.get(f['severity'], f['severity'])} {f['rule']}",
            float(f["time_us"] or 0.0),
            SEVERITY_COLOR.get(f["severity"], "#888"),
            at_stake(f).split(" (see")[0]
            + (f" ({100 * f['time_us'] / span_us:.0f}% of the span)" if f["time_us"] and span_us else ""),
            f["title"],
        )
        for f in findings
    ]
    if any(b.value > 0 for b in bars):
        out.append(svg.hbars(bars, "time at stake per finding", scale=max(span_us or 0.0, *(b.value for b in bars))))
    for f in findings:
        sev = f["severity"]
        conf = "" if f["confidence"] == "evidence" else " (suspected)"
        out.append(
            f'<div class="finding sev-{esc(sev)}"><span class="sev">{esc(SEVERITY_MARK.get(sev, sev))}</span>'
            f'<code>{esc(f["rule"])}</code>: <span class="title">{esc(f["title"])}</span>{esc(conf)}'
            f'<div>at stake <span class="stake">{esc(at_stake(f))}</span></div>'
            f'<div class="advice">{esc(f["advice"])}</div></div>'
        )
    return "".join(out)


def op_bars(stats: Sequence[Mapping[str, Any]], top: int) -> str:
    rows = stats[:top]
    if not rows:
        return '<p class="muted">none</p>'
    bars = [
        Bar(
            f"{r['op_type']} ({r['core_type']})" if r.get("core_type") else str(r["op_type"]),
            float(r["total_us"] or 0.0),
            _lane_color(r.get("core_type")),
            f"{r['total_us'] or 0:,.0f} us, {r['ratio_pct'] or 0:.1f}%",
            f"{r['op_type']}: {r['count']:,} tasks, avg {r['avg_us'] or 0:,.1f} us, bound {r.get('bound', 'unknown')}",
        )
        for r in rows
    ]
    more = f'<p class="muted">the {top} largest of {len(stats):,} op types</p>' if len(stats) > top else ""
    legend = svg.legend(
        [(LANE_LABEL[k], LANE_COLOR[k]) for k in ("AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "MIX", "COMM", "OTHER")]
    )
    tab = table(OP_STAT_HEADERS, [op_stat_cells(r) for r in rows], OP_STAT_NUMERIC)
    return svg.hbars(bars, "total time per op type") + legend + more + tab


def steps_html(steps: Sequence[Mapping[str, Any]]) -> str:
    if not steps:
        return '<p class="muted">no steps</p>'
    shown = list(steps)
    note = ""
    if len(steps) > MAX_STEPS:
        slowest = sorted(range(len(steps)), key=lambda i: (-(steps[i]["step_us"] or 0.0), i))[:MAX_STEPS]
        shown = [steps[i] for i in sorted(slowest)]
        note = f'<p class="muted">the {MAX_STEPS} slowest of {len(steps):,} steps</p>'
    values = [[r["compute_us"] or 0.0, r["comm_not_overlapped_us"] or 0.0, r["free_us"] or 0.0] for r in shown]
    chart = svg.stacked_columns(
        [str(r["step"]) for r in shown], STEP_PARTS, [[v / 1000 for v in col] for col in values], "per-step time", "ms"
    )
    mean = [sum(col[i] for col in values) / len(values) for i in range(3)]
    step_mean = sum(r["step_us"] or 0.0 for r in steps) / len(steps)
    summary = (
        f'<p class="muted">{len(steps):,} step(s), mean step {step_mean:,.1f} us: compute {mean[0]:,.1f} us, '
        f"communication not overlapped {mean[1]:,.1f} us, free {mean[2]:,.1f} us</p>"
    )
    return chart + svg.legend(STEP_PARTS) + note + summary


def _cause(c: Any) -> str:
    color = CAUSE_COLOR.get(str(c), "#ddd")
    return f'<span class="cause" style="background:{color}"></span>{esc(c)}'


def longest_html(card: Mapping[str, Any]) -> str:
    out = ["<h3>Longest tasks</h3>"]
    rows = card["top_duration"]
    if rows:
        bars = [
            Bar(
                str(r["op_name"]),
                float(r["duration_us"] or 0.0),
                _lane_color(r.get("task_type")),
                _us(r["duration_us"]),
            )
            for r in rows
        ]
        out.append(svg.hbars(bars, "longest tasks"))
    out.append(table(TASK_HEADERS, [task_cells(r) for r in rows], TASK_NUMERIC))
    out.append("<h3>Longest waits</h3>")
    rows = card["top_wait"]
    if rows:
        bars = [
            Bar(
                str(r["op_name"]),
                float(r["wait_us"] or 0.0),
                CAUSE_COLOR.get(str(r["wait_cause"]), "#ccc"),
                f"{_us(r['wait_us'])} {r['wait_cause'] or ''}",
            )
            for r in rows
        ]
        out.append(svg.hbars(bars, "longest waits"))
    cause = WAIT_HEADERS.index("Cause")
    body = []
    for r in rows:
        cells = [f"<td>{_cause(v)}</td>" if i == cause else _cell(v) for i, v in enumerate(wait_cells(r))]
        body.append("<tr>" + "".join(cells) + "</tr>")
    out.append(table(WAIT_HEADERS, [], WAIT_NUMERIC).replace("<tbody></tbody>", f"<tbody>{''.join(body)}</tbody>"))
    return "".join(out)


def _training_tables(card: Mapping[str, Any], top: int) -> str:
    out = []
    comm = card.get("communication") or []
    if comm:
        out.append("<h3>Communication</h3>")
        out.append(
            table(
                ["OP Type", "Count", "Total(us)", "Transit(us)", "Wait(us)", "Size(MB)", "Bandwidth(GB/s)"],
                [
                    [
                        r["op_type"],
                        r["count"],
                        r["total_us"],
                        r["transit_us"],
                        r["wait_us"],
                        r["size_mb"],
                        r["bandwidth_gbps"],
                    ]
                    for r in comm[:top]
                ],
                {1, 2, 3, 4, 5, 6},
            )
        )
    host = card.get("host_api") or []
    if host:
        out.append("<h3>Host API</h3>")
        out.append(
            table(
                ["API", "Count", "Total(us)", "Avg(us)", "Max(us)"],
                [[r["api"], r["count"], r["total_us"], r["avg_us"], r["max_us"]] for r in host[:top]],
                {1, 2, 3, 4},
            )
        )
    return "".join(out)


def card_html(card: Mapping[str, Any], top: int, picture: TimelinePicture | None, heading: str) -> str:
    s = card["summary"]
    kpis = [
        ("tasks", f"{s['tasks']:,}"),
        ("op types", f"{s['op_types']:,}"),
        ("compute", _us(s["compute_us"])),
        ("communication", _us(s.get("communication_us"))),
        ("wait", _us(s["wait_us"])),
        ("span", "unavailable" if s["span_us"] is None else _us(s["span_us"])),
    ]
    out = [f'<section class="card"><h2>{esc(heading)}</h2>', _kpis(kpis)]
    out += ["<h3>Findings (by time at stake)</h3>", findings_html(card["findings"], s["span_us"])]
    out.append("<h3>Timeline</h3>")
    if picture is None:
        out.append('<p class="muted">no timeline: the start times are missing or unusable</p>')
    else:
        out.append(
            "<p class=\"muted\">the engines' busy time over the card's span; the idle time coloured by the cause"
            " of the wait it ends in; dashed lines: step starts</p>"
        )
        out += [timeline_svg(picture), timeline_legend(picture)]
    out += ["<h3>Op types</h3>", op_bars(card["op_statistic"], top)]
    if "steps" in card:
        out += ["<h3>Steps</h3>", steps_html(card["steps"])]
    out.append(longest_html(card))
    out.append(_training_tables(card, top))
    out.append("</section>")
    return "".join(out)


def _spread_html(spread: Mapping[str, Any] | None) -> str:
    if not spread or len(spread["cards"]) < 2:
        return ""
    rows = spread["cards"]
    chart = svg.stacked_columns(
        [f"card {r['card']}" for r in rows],
        (("compute", LANE_COLOR["AI_CORE"]), ("communication", LANE_COLOR["COMM"]), ("wait", CAUSE_COLOR["host_op"])),
        [
            [(r["compute_us"] or 0.0) / 1000, (r["communication_us"] or 0.0) / 1000, (r["wait_us"] or 0.0) / 1000]
            for r in rows
        ],
        "per-card time",
        "ms",
    )
    flagged = "FLAGGED: one card holds the others back" if spread.get("flagged") else "within the threshold"
    text = (
        f"<p>slowest card {esc(spread['slowest_card'])}; compute spread {spread['compute_spread_pct']:.1f}% "
        f"({esc(flagged)}, threshold {spread['threshold_pct']:g}%), wait spread {spread['wait_spread_pct']:.1f}%</p>"
    )
    legend = svg.legend(
        (("compute", LANE_COLOR["AI_CORE"]), ("communication", LANE_COLOR["COMM"]), ("wait", CAUSE_COLOR["host_op"]))
    )
    return "<section><h2>Cards</h2>" + text + chart + legend + "</section>"


def report_html(report: Mapping[str, Any], pictures: Mapping[str, TimelinePicture], rank: str | None = None) -> str:
    """The sections of one report (its header, the card spread, each card)."""
    src = report["source"]
    out = []
    where = f"{src['layout']}, {src['era']}"
    if src.get("device", "NPU") != "NPU":
        where += f", device {src['device']}"
    if rank is not None:
        out.append(f'<h2 class="rank">rank {esc(rank)}</h2>')
    out.append(f'<p class="meta">{esc(src["path"])} ({esc(where)})</p>')
    for note in [*src.get("notes", []), *src.get("view_notes", [])]:
        out.append(f'<p class="note">note: {esc(note)}</p>')
    out.append(_spread_html(report.get("card_spread")))
    for card in report["cards"]:
        heading = f"card {card['card']}" if rank is None else f"rank {rank} · card {card['card']}"
        out.append(card_html(card, report["top"], pictures.get(card["card"]), heading))
    return "".join(out)


def cluster_html(cluster: Mapping[str, Any], detailed: str | None) -> str:
    """The cluster section: per-rank bars and table, slow ranks, spread and slow links."""
    ranks = cluster["ranks"]
    ok = [r for r in ranks if r["error"] is None]
    slow = set(cluster["slow_ranks"])
    out = ["<section><h2>Ranks</h2>"]
    out.append(
        f"<p>{len(ranks):,} ranks; slow ranks: {esc(', '.join(cluster['slow_ranks']) or 'none')}; spread "
        f"{cluster['spread_pct']:.1f}% of the mean step time; slow links: "
        f"{esc(', '.join(cluster['slow_links']) or 'none')}</p>"
    )
    if ok and any(r["step_us"] is not None for r in ok):
        parts = (("compute", LANE_COLOR["AI_CORE"]), ("exposed comm", LANE_COLOR["COMM"]), ("free", "#a8a8a8"))
        values = [
            [(r["compute_us"] or 0.0) / 1000, (r["exposed_comm_us"] or 0.0) / 1000, (r["free_us"] or 0.0) / 1000]
            for r in ok
        ]
        names = [f"{r['rank']}{' (slow)' if r['rank'] in slow else ''}" for r in ok]
        out.append('<p class="muted">per rank over the capture: compute, communication not overlapped, free</p>')
        out += [svg.stacked_columns(names, parts, values, "per-rank time", "ms"), svg.legend(parts)]
    elif ok:
        bars = [
            Bar(
                f"rank {r['rank']}",
                float(r["compute_us"] or 0.0),
                SEVERITY_COLOR["warning"] if r["rank"] in slow else LANE_COLOR["AI_CORE"],
                _us(r["compute_us"]),
            )
            for r in ok
        ]
        out.append(svg.hbars(bars, "per-rank compute"))

    def mark(r: Mapping[str, Any]) -> str:
        if r["error"] is not None:
            return "UNREADABLE (below)"
        return ", ".join(m for m, on in (("slow", r["rank"] in slow), ("detailed below", r["rank"] == detailed)) if on)

    out.append(
        table(
            RANK_HEADERS,
            [
                [
                    r["rank"],
                    r["step_us"],
                    r["compute_us"],
                    r["communication_us"],
                    r["exposed_comm_us"],
                    r["free_us"],
                    r["wait_us"],
                    r["tasks"],
                    mark(r),
                ]
                for r in ranks
            ],
            {1, 2, 3, 4, 5, 6, 7},
            ["slow" if r["rank"] in slow else "" for r in ranks],
        )
    )
    bad = [r for r in ranks if r["error"] is not None]
    for r in bad:
        out.append(f'<p class="note">rank {esc(r["rank"])} could not be read: {esc(r["error"])}</p>')
    out.append("</section>")
    return "".join(out)


def page(title: str, body: Iterable[str]) -> str:
    """The whole document around the sections."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f"<body><main><h1>{esc(title)}</h1>{''.join(body)}"
        '<p class="muted">made by npuscope report --format html</p></main></body></html>\n'
    )


def render_html(
    report: Mapping[str, Any], pictures: Mapping[str, TimelinePicture] | None = None, title: str | None = None
) -> str:
    """The page of one `npuscope.report/1` document (with `rank` and `cluster` on a cluster)."""
    pictures = pictures or {}
    rank = report.get("rank")
    body = []
    if "cluster" in report:
        body.append(cluster_html(report["cluster"], rank))
    body.append(report_html(report, pictures, rank))
    return page(title or f"npuscope report: {report['source']['capture']}", body)


__all__ = [
    "TimelinePicture",
    "at_stake",
    "cluster_html",
    "page",
    "render_html",
    "report_html",
    "timeline_pictures",
]
