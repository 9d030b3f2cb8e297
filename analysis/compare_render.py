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
from .compare_training import ALL, COMM_KEYS, STEP_KEYS, CommChange, StepChange, TrainingChanges
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


def _known_json(ch: Change, digits: int | None = None) -> dict[str, Any]:
    """A training-level number: no delta where a side does not have it (never a zero)."""
    known = ch.known
    ratio = ch.ratio

    def r(v: float | None) -> float | int | None:
        if v is None:
            return None
        return int(round(v)) if digits == 0 else rounded(v)

    return {
        "base": r(ch.base),
        "new": r(ch.new),
        "delta": r(ch.delta) if known else None,
        "delta_pct": rounded(ch.delta_pct) if known else None,
        "ratio": None if ratio is None else round(ratio, 6),
    }


def _step_json(s: StepChange) -> dict[str, Any]:
    return {
        "card": s.card,
        "base_card": s.base_card,
        "new_card": s.new_card,
        "base_steps": s.base_steps,
        "new_steps": s.new_steps,
        **{k: _known_json(s.means[k]) for k in STEP_KEYS},
    }


def _comm_json(c: CommChange) -> dict[str, Any]:
    return {
        "op_type": c.op_type,
        "status": c.status,
        **{k: _known_json(c.values[k], 0 if k == "count" else None) for k in COMM_KEYS},
    }


def _training_json(t: TrainingChanges) -> dict[str, Any]:
    """The additive keys `steps` and `communication` of the document."""
    return {
        "steps": {
            "in_base": t.steps_in[0],
            "in_new": t.steps_in[1],
            "cards": [_step_json(s) for s in t.steps],
        },
        "communication": {
            "in_base": t.communication_in[0],
            "in_new": t.communication_in[1],
            "op_types": [_comm_json(c) for c in t.communication],
        },
        "training_notes": list(t.notes),
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


def finding_json(f: Finding) -> dict[str, Any]:
    return {
        "rule": f.rule,
        "severity": f.severity,
        "card": f.card,
        "op_types": list(f.op_types),
        "title": f.title,
        "count": f.count,
        "time_us": rounded(f.time_us),
        "confidence": f.confidence,
        "view": f.view,  # the training view of a training-level finding, "" for an operator one
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
            "resolved": [finding_json(f) for f in c.findings.resolved],
            "new": [finding_json(f) for f in c.findings.new],
            "unchanged": [
                {**finding_json(n), "base_time_us": rounded(b.time_us), "new_time_us": rounded(n.time_us)}
                for b, n in c.findings.unchanged
            ],
        },
        "verdict": c.verdict,
        **_training_json(c.training),
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
    if c.op_types_note:
        out += ["", f"{h2}{what}" if md else what, "not comparable: see the note above"]
        out += _training_lines(c.training, md, top, len(c.pairs) > 1)
        return printable("\n".join(out) + "\n")
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
    out += _training_lines(c.training, md, top, len(c.pairs) > 1)
    return printable("\n".join(out) + "\n")


STEP_LABELS = {
    "step_us": "step time",
    "compute_us": "compute",
    "communication_us": "communication",
    "comm_not_overlapped_us": "comm not overlapped",
    "free_us": "free",
}
COMM_LABELS = {
    "count": "count",
    "total_us": "total (us)",
    "wait_us": "wait (us)",
    "bandwidth_gbps": "bandwidth (GB/s)",
}


def _delta_cells(ch: Change, digits: int = 1) -> list[str]:
    """Delta and Ratio of a training-level number; `-` where a side does not have it."""
    if not ch.known:
        return ["-", "-"]
    ratio = ch.ratio
    return [signed(ch.delta, digits), "-" if ratio is None else f"{ratio:.3f}"]


def _training_lines(t: TrainingChanges, md: bool, top: int | None, summed: bool) -> list[str]:
    """The Steps and Communication sections (after the op types); each fits 80 columns."""
    table = table_for(md)
    h2 = "## " if md else ""
    item = "- " if md else ""
    out = ["", f"{h2}Steps (mean per step, us)"]
    for note in t.notes:
        if note.startswith("steps:"):
            out.append(f"{item}note: {note}")
    if not t.steps:
        out.append("none")
    else:
        out += [""] if md else []
        rows: list[list[str]] = []
        for s in t.steps:
            label = "all" if s.card == ALL else s.card
            rows.append([label, "steps", num(s.base_steps, 0), num(s.new_steps, 0), "", ""])
            for key in STEP_KEYS:
                ch = s.means[key]
                rows.append(["", STEP_LABELS[key], num(ch.base), num(ch.new), *_delta_cells(ch)])
        out += table(["Card", "Per step", "BASE", "NEW", "Delta", "Ratio"], rows, {2, 3, 4, 5})
        if summed:
            out.append(f"{item}all: every step of every compared card, each counting once")

    comm = t.communication
    shown = comm if top is None else comm[:top]
    more = f", top {len(shown)} of {len(comm)}" if len(shown) < len(comm) else ""
    where = "cards summed; " if summed else ""
    out += ["", f"{h2}Communication per op type ({where}by |delta| of the total{more})"]
    for note in t.notes:
        if note.startswith("communication:"):
            out.append(f"{item}note: {note}")
    if not comm:
        out.append("none")
        return out
    out += [""] if md else []
    rows = []
    for c in shown:
        for i, key in enumerate(COMM_KEYS):
            ch = c.values[key]
            digits = 0 if key == "count" else 1
            # The status (new, vanished, faster, slower, same by the total) under the op type.
            status = c.status or "-"
            lead = c.op_type if i == 0 else ((f"_{status}_" if md else f"  {status}") if i == 1 else "")
            rows.append([lead, COMM_LABELS[key], num(ch.base, digits), num(ch.new, digits), *_delta_cells(ch, digits)])
    out += table(["OP Type", "Per op type", "BASE", "NEW", "Delta", "Ratio"], rows, {2, 3, 4, 5})
    return out
