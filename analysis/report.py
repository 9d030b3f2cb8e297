"""The report contract (`npuscope.report/1`) and its text and markdown renderings.

`build_report` is the single source: JSON is this dict as it is, text and markdown render it,
so the three formats can never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from npuscope.parsers import Profile
from npuscope.parsers.training import TrainingViews, empty_views
from npuscope.text import printable

from .bound import with_bound
from .card_groups import by_card, top_rows
from .card_spread import card_spread, card_spread_json, spread_lines
from .diagnose import Diagnosis
from .findings import SEVERITY_MARK
from .table import table_for
from .totals import card_summary
from .training_report import card_views, training_lines

SCHEMA = "npuscope.report/1"
VIEW_SECTIONS = {
    "steps": "Steps",
    "communication": "Communication",
    "links": "Links",
    "host_api": "Host API",
    "memory": "Memory",
}
"""The section of a card that shows the rows of a finding's view."""
ROW_KEYS = (
    "op_name",
    "op_type",
    "task_type",
    "start_us",
    "duration_us",
    "wait_us",
    "input_shapes",
    "input_dtypes",
)


# The report's three task tables, as text, markdown and HTML show them: headers, the cells of
# a row of the JSON document, and which columns are numbers.
OP_STAT_HEADERS = ("OP Type", "Core Type", "Count", "Total(us)", "Avg(us)", "Max(us)", "Ratio(%)", "Bound")
OP_STAT_NUMERIC = {2, 3, 4, 5, 6}
TASK_HEADERS = (
    "Op Name", "OP Type", "Task Type", "Start(us)", "Duration(us)", "Wait(us)", "Input Shapes", "Input Dtypes",
)  # fmt: skip
TASK_NUMERIC = {3, 4, 5}
WAIT_HEADERS = ("Op Name", "OP Type", "Start(us)", "Wait(us)", "Cause", "Duration(us)", "Input Shapes")
WAIT_NUMERIC = {2, 3, 5}


def op_stat_cells(r: Mapping[str, Any]) -> list[Any]:
    """A row of a card's `op_statistic` under OP_STAT_HEADERS."""
    keys = ("op_type", "core_type", "count", "total_us", "avg_us", "max_us", "ratio_pct")
    return [*(r[k] for k in keys), r.get("bound", "unknown")]


def task_cells(r: Mapping[str, Any]) -> list[Any]:
    """A row of a card's `top_duration` under TASK_HEADERS."""
    keys = ("op_name", "op_type", "task_type", "start_us", "duration_us", "wait_us", "input_shapes", "input_dtypes")
    return [r[k] for k in keys]


def wait_cells(r: Mapping[str, Any]) -> list[Any]:
    """A row of a card's `top_wait` under WAIT_HEADERS."""
    return [r[k] for k in ("op_name", "op_type", "start_us", "wait_us", "wait_cause", "duration_us", "input_shapes")]


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 3)
    return value


def _clean_row(row: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: _clean(row[k]) for k in keys}


def build_report(
    profile: Profile, diagnosis: Diagnosis, *, top: int = 10, views: TrainingViews | None = None
) -> dict[str, Any]:
    """The report of the diagnosed cards; `views` (read_training_views of the profile, read
    by the caller) gives the training-level keys, empty without them."""
    views = views if views is not None else empty_views()
    cards = []
    # Every card's tables in one grouped pass each (analysis/card_groups.py), then card by card.
    # The bound type of each op type on each card, from its tasks' PMU ratios (analysis/bound.py).
    stat_keys = ("op_type", "core_type", "count", "total_us", "min_us", "avg_us", "max_us", "ratio_pct", "bound")
    bounded = with_bound(profile.op_statistic, diagnosis.tasks, diagnosis.thresholds.bound_min_pct)
    ranked = bounded.sort(["total_us", "op_type"], descending=[True, False], maintain_order=True)
    stats = by_card([{"card": r["card"], **_clean_row(r, stat_keys)} for r in ranked.iter_rows(named=True)])
    longest = top_rows(diagnosis.tasks, ("card",), "duration_us", top, ROW_KEYS)
    waits = top_rows(diagnosis.tasks, ("card",), "wait_us", top, (*ROW_KEYS, "wait_cause"))
    for card in diagnosis.cards:
        cards.append(
            {
                "card": card,
                "summary": card_summary(profile, diagnosis.tasks, card),
                "op_statistic": [{k: r[k] for k in stat_keys} for r in stats.get(card, ())],
                "top_duration": [_clean_row(r, ROW_KEYS) for r in longest.get((card,), ())],
                "top_wait": [_clean_row(r, (*ROW_KEYS, "wait_cause")) for r in waits.get((card,), ())],
                "findings": [{k: _clean(v) for k, v in f.to_dict().items()} for f in diagnosis.for_card(card)],
                **card_views(views, card, top),
            }
        )
    return {
        "schema": SCHEMA,
        "top": top,
        "source": {
            "path": str(profile.path.resolve()),
            "layout": profile.layout,
            "era": profile.era,
            "capture": profile.capture.name,
            "files": [str(p) for p in profile.files],
            "export": profile.source_kind,
            "device": diagnosis.device,  # NPU, GPU, CPU or unknown (analysis/device_kind.py)
            "skipped_rows": profile.skipped_rows,
            "time_problem": profile.time_problem,
            "notes": list(profile.notes),
            "views": list(views.found),
            "view_notes": list(views.notes),
        },
        "thresholds": {k: getattr(diagnosis.thresholds, k) for k in diagnosis.thresholds.__dataclass_fields__},
        "cards": cards,
        "card_spread": card_spread_json(card_spread(profile)),  # every card of the capture
    }


def render(report: dict[str, Any], fmt: str) -> str:
    md = fmt == "markdown"
    table = table_for(md)
    out: list[str] = []
    src = report["source"]
    out.append(("# npuscope report: " if md else "npuscope report: ") + src["capture"])
    device = src.get("device", "NPU")
    on = "" if device == "NPU" else f", device {device}"  # an NPU is what every export but a trace is
    out.append(f"{src['path']}  ({src['layout']}, {src['era']}{on})")
    for note in [*src.get("notes", []), *src.get("view_notes", [])]:
        out.append(("- note: " if md else "note: ") + note)
    spread = report.get("card_spread")
    if spread and len(spread["cards"]) > 1:
        out += ["", "## Cards" if md else "== cards =="] + spread_lines(spread, md, report["top"])
    for card in report["cards"]:
        s = card["summary"]
        out.append("")
        out.append(("## " if md else "== ") + f"card {card['card']}" + ("" if md else " =="))
        span = "unavailable" if s["span_us"] is None else f"{s['span_us']:,.1f} us"
        comm = f", communication {s['communication_us']:,.1f} us" if s.get("communication_us") else ""
        skipped = src.get("skipped_rows") or 0
        out.append(
            f"{s['tasks']:,} tasks, {s['op_types']:,} op types; compute {s['compute_us']:,.1f} us"
            f"{comm}, wait {s['wait_us']:,.1f} us, span {span}"
            + (f" (totals leave out {skipped:,} damaged row(s): see the notes)" if skipped else "")
        )
        out.append("")
        out.append("### Findings" if md else "Findings (by time at stake)")
        if not card["findings"]:
            out.append("none")
        for f in card["findings"]:
            sev = SEVERITY_MARK[f["severity"]]
            conf = "" if f["confidence"] == "evidence" else " (suspected)"
            at_stake = f"{f['time_us']:,.0f} us" if f["time_us"] else "-"
            if f.get("view"):  # a training-level finding: its rows are in that section below
                at_stake += f" (see {VIEW_SECTIONS.get(f['view'], f['view'])})"
            tried = "; ".join(
                f"npuscope experiment RUN --env {a['key']}={a['value']} ({a['framework']})"
                for a in f.get("actions") or ()
            )
            if md:
                try_md = f" Try: `{tried}`." if tried else ""
                out.append(
                    f"- **{sev}** `{f['rule']}`: {f['title']}{conf}. At stake: {at_stake}. {f['advice']}{try_md}"
                )
            else:
                out.append(f"  [{sev}] {f['rule']}: {f['title']}{conf}")
                out.append(f"         at stake {at_stake}; {f['advice']}")
                if tried:
                    out.append(f"         try: {tried}")
        out.append("")
        out.append("### Op statistics" if md else "Op statistics")
        rows = [op_stat_cells(r) for r in card["op_statistic"][: report["top"]]]
        out += table(list(OP_STAT_HEADERS), rows, OP_STAT_NUMERIC)
        out.append("")
        out.append("### Longest tasks" if md else "Longest tasks")
        out += table(list(TASK_HEADERS), [task_cells(r) for r in card["top_duration"]], TASK_NUMERIC)
        out.append("")
        out.append("### Longest waits" if md else "Longest waits")
        out += table(list(WAIT_HEADERS), [wait_cells(r) for r in card["top_wait"]], WAIT_NUMERIC)
        if "steps" in card:
            out += training_lines(card, md, report["top"], table)
    # Op names, shapes, notes and paths come from the files: no escape sequence gets through.
    return printable("\n".join(out) + "\n")
