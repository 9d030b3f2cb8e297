"""The comparison written out: the `npuscope.compare/1` JSON document, text and markdown.

`comparison_json` is the contract (`npuscope compare --format json`); text and markdown are
for people (the `compare` command and the explorer's compare screen). The numbers come from
`compare.compare_runs`; this module only writes them.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from npuscope.text import printable

from .compare import CAUSE_LABELS, SAME_PCT, SAME_US, SCHEMA, By, Change, Comparison, OpChange, Run
from .findings import SEVERITY_MARK, Finding
from .table import num, rounded, signed, table_for
from .totals import TOTAL_KEYS

Format = Literal["text", "markdown"]


def _change_json(ch: Change) -> dict[str, Any]:
    return {
        "base": rounded(ch.base),
        "new": rounded(ch.new),
        "delta": rounded(ch.delta),
        "delta_pct": rounded(ch.delta_pct),
    }


def _op_json(o: OpChange, by: By) -> dict[str, Any]:
    d: dict[str, Any] = {"op_type": o.op_type, "core_type": o.core_type}
    if by == "shape":
        d.update(op_name=o.op_name, input_shapes=o.input_shapes)
    d.update(
        base_count=o.base_count,
        new_count=o.new_count,
        base_total_us=rounded(o.base_total_us),
        new_total_us=rounded(o.new_total_us),
        delta_us=rounded(o.delta_us),
        delta_pct=rounded(o.delta_pct),
        base_avg_us=rounded(o.base_avg_us),
        new_avg_us=rounded(o.new_avg_us),
        base_ratio_pct=rounded(o.base_ratio_pct),
        new_ratio_pct=rounded(o.new_ratio_pct),
        status=o.status,
    )
    return d


def _finding_json(f: Finding) -> dict[str, Any]:
    return {
        "rule": f.rule,
        "severity": f.severity,
        "card": f.card,
        "op_types": list(f.op_types),
        "title": f.title,
        "count": f.count,
        "time_us": rounded(f.time_us),
        "confidence": f.confidence,
    }


def _run_json(r: Run) -> dict[str, Any]:
    return {**asdict(r), "cards": list(r.cards)}  # the fields in their order: path ... tasks_from


def comparison_json(c: Comparison) -> dict[str, Any]:
    """The `npuscope.compare/1` document."""
    return {
        "schema": SCHEMA,
        "base": _run_json(c.base),
        "new": _run_json(c.new),
        "by": c.by,
        "compared_cards": [{"base": b, "new": n} for b, n in c.pairs],
        "same_band": {"us": SAME_US, "pct": SAME_PCT},
        "notes": list(c.notes),
        "totals": {k: _change_json(v) for k, v in c.totals.items()},
        "cards": [
            {
                "card": cc.card,
                "base_card": cc.base_card,
                "new_card": cc.new_card,
                "totals": {k: _change_json(v) for k, v in cc.totals.items()},
            }
            for cc in c.cards
        ],
        "op_types": [_op_json(o, c.by) for o in c.op_types],
        "findings": {
            "resolved": [_finding_json(f) for f in c.findings.resolved],
            "new": [_finding_json(f) for f in c.findings.new],
            "unchanged": [
                {**_finding_json(n), "base_time_us": rounded(b.time_us), "new_time_us": rounded(n.time_us)}
                for b, n in c.findings.unchanged
            ],
        },
        "verdict": c.verdict,
    }


def _total_label(key: str, long_wait_us: float) -> str:
    labels = {
        "device_us": "device time (us)",
        "compute_us": "  compute",
        "communication_us": "  communication",
        "wait_us": "wait (us)",
        "wait_short_us": f"  short (< {long_wait_us:g} us, no cause)",
        "span_us": "span (us, longest card)",
        "tasks": "tasks",
    }
    for cause, text in CAUSE_LABELS.items():
        labels[f"wait_{cause}_us"] = f"  {text}"
    return labels[key]


def _finding_line(f: Finding, md: bool) -> str:
    sev = SEVERITY_MARK[f.severity]
    stake = f"{f.time_us:,.0f} us" if f.time_us else "-"
    if md:
        return f"- **{sev}** card {f.card} `{f.rule}`: {f.title} (at stake {stake})"
    return f"  [{sev}] card {f.card} {f.rule}: {f.title} (at stake {stake})"


def render_comparison(c: Comparison, fmt: Format, *, top: int | None = 20) -> str:
    """Text or markdown: verdict, totals, per card, findings, then op types by |delta|."""
    md = fmt == "markdown"
    table = table_for(md)
    h1, h2 = ("# ", "## ") if md else ("", "")
    item = "- " if md else ""  # markdown would run these lines into one paragraph
    out: list[str] = [f"{h1}npuscope compare"] + ([""] if md else [])
    for side, r in (("BASE", c.base), ("NEW ", c.new)):
        out.append(f"{item}{side}  {r.capture}  {r.path}  ({r.layout}, {r.era}; cards {', '.join(r.cards) or 'none'})")
    compared = ", ".join(b if b == n else f"{b} -> {n}" for b, n in c.pairs)
    how = "op type (and core type)" if c.by == "type" else "op name + input shapes"
    out.append(f"{item}compared: card(s) {compared}{' (summed)' if len(c.pairs) > 1 else ''}; matched by {how}")
    for note in c.notes:
        out.append(f"{item}note: {note}")
    out += ["", f"{h2}Verdict" if md else "Verdict", c.verdict]

    out += ["", f"{h2}Totals" if md else "Totals"]
    rows = []
    for key in TOTAL_KEYS:
        ch = c.totals[key]
        d = 0 if key == "tasks" else 1
        rows.append(
            [
                _total_label(key, c.long_wait_us),
                num(ch.base, d),
                num(ch.new, d),
                signed(ch.delta, d),
                signed(ch.delta_pct, 1, "%"),
            ]
        )
    out += table(["", "BASE", "NEW", "Delta", "Delta(%)"], rows, {1, 2, 3, 4})

    if len(c.cards) > 1:
        out += ["", f"{h2}Per card" if md else "Per card"]
        rows = []
        for cc in c.cards:
            t = cc.totals
            rows.append(
                [
                    cc.card,
                    "both" if cc.base_card and cc.new_card else ("BASE only" if cc.base_card else "NEW only"),
                    num(t["compute_us"].base),
                    num(t["compute_us"].new),
                    signed(t["compute_us"].delta_pct, 1, "%"),
                    num(t["wait_us"].base),
                    num(t["wait_us"].new),
                    signed(t["wait_us"].delta_pct, 1, "%"),
                    num(t["communication_us"].base),
                    num(t["communication_us"].new),
                ]
            )
        out += table(
            [
                "Card",
                "In",
                "Compute BASE",
                "Compute NEW",
                "Delta(%)",
                "Wait BASE",
                "Wait NEW",
                "Delta(%)",
                "Comm BASE",
                "Comm NEW",
            ],
            rows,
            set(range(2, 10)),
        )

    out += ["", f"{h2}Findings" if md else "Findings"]
    f = c.findings
    for title, items in (("resolved", f.resolved), ("new", f.new)):
        out += [""] if md else []
        out.append(f"{title} ({len(items)})" + (":" if items else ""))
        out += [""] if md and items else []
        out += [_finding_line(x, md) for x in items]
    out += [""] if md else []
    out.append(f"unchanged ({len(f.unchanged)})" + (":" if f.unchanged else ""))
    out += [""] if md and f.unchanged else []
    for b, n in f.unchanged:
        line = _finding_line(n, md)
        out.append(f"{line}; was {b.time_us:,.0f} us" if (b.time_us or n.time_us) else line)

    what = "Op types" if c.by == "type" else "Op names + input shapes"
    shown = c.op_types if top is None else c.op_types[:top]
    more = f", top {len(shown)} of {len(c.op_types)}" if len(shown) < len(c.op_types) else ""
    out += ["", f"{h2}{what} (by |delta|{more})" if md else f"{what} (by |delta|{more})"]
    first = ["OP Type", "Core Type"] if c.by == "type" else ["Op Name", "Input Shapes", "OP Type"]
    rows = []
    for o in shown:
        lead = [o.op_type, o.core_type] if c.by == "type" else [o.op_name, o.input_shapes or "-", o.op_type]
        rows.append(
            [
                *lead,
                num(o.base_count, 0),
                num(o.new_count, 0),
                num(o.base_total_us),
                num(o.new_total_us),
                signed(o.delta_us),
                signed(o.delta_pct, 1, "%"),
                num(o.base_avg_us, 3),
                num(o.new_avg_us, 3),
                num(o.base_ratio_pct, 3),
                num(o.new_ratio_pct, 3),
                o.status,
            ]
        )
    k = len(first)
    out += table(
        [
            *first,
            "Count BASE",
            "Count NEW",
            "Total BASE(us)",
            "Total NEW(us)",
            "Delta(us)",
            "Delta(%)",
            "Avg BASE(us)",
            "Avg NEW(us)",
            "Ratio BASE(%)",
            "Ratio NEW(%)",
            "Status",
        ],
        rows,
        set(range(k, k + 10)),
    )
    for status, word in (("new", "New"), ("vanished", "Vanished")):
        names = [o.label for o in c.op_types if o.status == status]
        if names:
            out.append(f"{word}: {', '.join(names[:20])}{' ...' if len(names) > 20 else ''}")
    return printable("\n".join(out) + "\n")
