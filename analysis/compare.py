"""Run against run, and card against card.

A profile on its own says what is slow; the question after a change (a flag, a CANN upgrade,
a new kernel) is whether it helped, by how much and why. `compare_runs` diagnoses a BASE and
a NEW profile and lines them up: per op type (or op name + input shapes) the time before and
after, the totals (compute, communication, wait split by cause, span), which findings were
resolved, which are new, and a one-line verdict naming what explains most of the change.
`regression` turns it into a CI gate.

`card_spread` looks inside one multi-card profile instead: per card compute, wait and
communication, the slowest card, the spread between cards ((max - min) / mean, flagged above
5% as msprof-analyze's slow-rank check does) and, per op type, the card where it is slowest.

Definitions shared by both:
  compute        duration of every non-communication task (what op_statistic sums; from the
                 op_statistic itself when a card has no tasks, e.g. a lone op_statistic CSV)
  communication  duration of COMMUNICATION / HCCL tasks
  device time    compute + communication (what `npuscope report` calls compute)
  wait           Task Wait Time, split by the cause the diagnosis gave each long wait;
                 waits under `long_wait_us` have no cause and are counted as "short"
An op type is "same" when its time moved by less than SAME_US or less than SAME_PCT: a
change counts as faster / slower only when it is both at least 1 us and at least 1%.

No Textual, no Rich: the `compare` command, `report` and the explorer all call this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from npuscope.parsers import Profile, ProfileError
from npuscope.parsers.columns import COMMUNICATION_TASK_TYPES
from npuscope.text import printable

from .diagnose import Diagnosis, diagnose
from .findings import SEVERITIES, Finding
from .report import _md_table, _table, spread_lines
from .thresholds import Thresholds
from .waits import CAUSES

SCHEMA = "npuscope.compare/1"
SAME_US = 1.0
"""An op type whose total moved by less than this many us is "same"."""
SAME_PCT = 1.0
"""An op type whose total moved by less than this percentage is "same"."""
SPREAD_FLAG_PCT = 5.0
"""(max - min) / mean across cards above which a card is flagged as slow (msprof-analyze)."""
BY = ("type", "shape")
STATUSES = ("new", "vanished", "faster", "slower", "same")

# Rules whose op_types is a ranking (the busiest aclop types), not what the finding is about:
# they are matched by rule and card only, or every reshuffle would read as resolved + new.
_RANKING_RULES = ("aclop_share",)

CAUSE_LABELS = {
    "recompilation": "recompilation",
    "host_op": "host op",
    "expected": "expected (step boundary)",
    "unexplained": "unexplained",
}
TOTAL_KEYS = (
    "device_us", "compute_us", "communication_us", "wait_us",
    *(f"wait_{c}_us" for c in ("recompilation", "host_op", "expected", "unexplained")),
    "wait_short_us", "span_us", "tasks",
)


# --------------------------------------------------------------------------- data types

@dataclass(frozen=True)
class Change:
    """One number before and after; None when that side does not have it."""

    base: float | None
    new: float | None

    @property
    def delta(self) -> float:
        return (self.new or 0.0) - (self.base or 0.0)

    @property
    def delta_pct(self) -> float | None:
        """Relative change; None when there is nothing to be relative to."""
        if not self.base:
            return None if self.new else 0.0
        return 100.0 * self.delta / self.base


def _status(change: Change) -> str:
    if change.base is None:
        return "new"
    if change.new is None:
        return "vanished"
    pct = change.delta_pct
    if abs(change.delta) < SAME_US or (pct is not None and abs(pct) < SAME_PCT):
        return "same"
    return "faster" if change.delta < 0 else "slower"


@dataclass(frozen=True)
class Run:
    """Where one side of the comparison comes from."""

    path: str
    capture: str
    layout: str
    era: str
    cards: tuple[str, ...]
    tasks_from: str

    @classmethod
    def of(cls, profile: Profile) -> "Run":
        return cls(
            path=str(profile.path.resolve()), capture=profile.capture.name, layout=profile.layout,
            era=profile.era, cards=tuple(profile.cards), tasks_from=profile.tasks_from,
        )


@dataclass(frozen=True)
class OpChange:
    """One op type (and core type), or with `by="shape"` one op name + input shapes."""

    op_type: str
    core_type: str
    base_count: int | None
    new_count: int | None
    base_total_us: float | None
    new_total_us: float | None
    base_ratio_pct: float | None
    new_ratio_pct: float | None
    op_name: str | None = None
    input_shapes: str | None = None

    @property
    def total(self) -> Change:
        return Change(self.base_total_us, self.new_total_us)

    @property
    def delta_us(self) -> float:
        return self.total.delta

    @property
    def delta_pct(self) -> float | None:
        return None if self.base_total_us is None else self.total.delta_pct

    @property
    def base_avg_us(self) -> float | None:
        return self.base_total_us / self.base_count if self.base_count else None

    @property
    def new_avg_us(self) -> float | None:
        return self.new_total_us / self.new_count if self.new_count else None

    @property
    def status(self) -> str:
        return _status(self.total)

    @property
    def label(self) -> str:
        if self.op_name is not None:
            return f"{self.op_name} [{self.input_shapes or '-'}]"
        return f"{self.op_type} ({self.core_type})"


@dataclass(frozen=True)
class CardChange:
    """The totals of one card id (or one base/new pair of ids) before and after."""

    card: str
    base_card: str | None
    new_card: str | None
    totals: dict[str, Change]


@dataclass(frozen=True)
class FindingChanges:
    resolved: tuple[Finding, ...]
    new: tuple[Finding, ...]
    unchanged: tuple[tuple[Finding, Finding], ...]  # (base, new)


@dataclass(frozen=True)
class Comparison:
    """Immutable result of `compare_runs`; `comparison_json` is its contract."""

    base: Run
    new: Run
    by: str
    pairs: tuple[tuple[str, str], ...]  # (base card, new card) summed into `totals`
    totals: dict[str, Change]
    cards: tuple[CardChange, ...]  # every card id of either run
    op_types: tuple[OpChange, ...]  # by |delta_us|, largest first
    findings: FindingChanges
    notes: tuple[str, ...]
    long_wait_us: float
    verdict: str


# --------------------------------------------------------------------------- totals

def _is_comm() -> pl.Expr:
    return pl.col("task_type").is_in(COMMUNICATION_TASK_TYPES).fill_null(False)


def _card_totals(profile: Profile, tasks: pl.DataFrame, cards: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Per card: the TOTAL_KEYS values. `tasks` may carry `wait_cause` (from a diagnosis)."""
    has_cause = "wait_cause" in tasks.columns
    cols = ["card", "task_type", "duration_us", "wait_us"] + (["wait_cause"] if has_cause else [])
    t = tasks.select(cols).filter(pl.col("card").is_in(list(cards)))
    wait = pl.col("wait_us").fill_null(0.0)
    aggs = [
        pl.len().alias("tasks"),
        pl.col("duration_us").filter(~_is_comm()).sum().alias("compute_us"),
        pl.col("duration_us").filter(_is_comm()).sum().alias("communication_us"),
        wait.sum().alias("wait_us"),
    ]
    if has_cause:
        aggs += [wait.filter(pl.col("wait_cause") == c).sum().alias(f"wait_{c}_us") for c in CAUSES]
        aggs.append(wait.filter(pl.col("wait_cause").is_null()).sum().alias("wait_short_us"))
    got = {r["card"]: r for r in t.group_by("card").agg(aggs).iter_rows(named=True)}
    stat = (
        profile.op_statistic.filter(pl.col("card").is_in(list(cards)))
        .group_by("card").agg(pl.col("total_us").sum())
    )
    stat_total = dict(stat.iter_rows())
    out = {}
    for card in cards:
        r = got.get(card)
        v = {k: 0.0 for k in TOTAL_KEYS}
        if r is not None:
            v.update({k: float(r[k] or 0.0) for k in r if k != "card"})
            if not has_cause:
                v["wait_short_us"] = v["wait_us"]
        else:  # no tasks (a lone op_statistic): compute is what op_statistic sums
            v["compute_us"] = float(stat_total.get(card, 0.0) or 0.0)
        v["device_us"] = v["compute_us"] + v["communication_us"]
        v["span_us"] = (profile.span_ns(card) or 0) / 1000  # 0: start times unusable
        out[card] = v
    return out


def _sum_totals(parts: list[dict[str, float]]) -> dict[str, float]:
    out = {k: sum(p[k] for p in parts) for k in TOTAL_KEYS}
    out["span_us"] = max((p["span_us"] for p in parts), default=0.0)  # the longest card
    return out


# --------------------------------------------------------------------------- op rows

_OP_SCHEMA = {
    "op_type": pl.String, "core_type": pl.String, "op_name": pl.String, "input_shapes": pl.String,
    "count": pl.Int64, "total_us": pl.Float64, "ratio_pct": pl.Float64,
}


def _type_rows(profile: Profile, cards: tuple[str, ...]) -> pl.DataFrame:
    """op_statistic summed over `cards`; a single card keeps the file's own Ratio(%)."""
    stat = profile.op_statistic.filter(pl.col("card").is_in(list(cards)))
    g = stat.group_by("op_type", "core_type").agg(
        pl.col("count").sum(), pl.col("total_us").sum(), pl.col("ratio_pct").sum()
    )
    if len(cards) > 1:
        whole = float(g["total_us"].sum() or 0.0)
        g = g.with_columns((pl.col("total_us") / whole * 100 if whole else pl.lit(0.0)).alias("ratio_pct"))
    return g.with_columns(pl.lit(None, pl.String).alias("op_name"), pl.lit(None, pl.String).alias("input_shapes"))


def _shape_rows(tasks: pl.DataFrame, cards: tuple[str, ...]) -> pl.DataFrame:
    """Compute tasks of `cards` by (op name, input shapes)."""
    t = tasks.select("card", "op_name", "op_type", "task_type", "duration_us", "input_shapes").filter(
        pl.col("card").is_in(list(cards)) & ~_is_comm()
    )
    g = t.with_columns(pl.col("input_shapes").fill_null("")).group_by("op_name", "input_shapes").agg(
        pl.col("op_type").first(),
        pl.col("task_type").first().alias("core_type"),
        pl.len().cast(pl.Int64).alias("count"),
        pl.col("duration_us").sum().alias("total_us"),
    )
    whole = float(g["total_us"].sum() or 0.0)
    return g.with_columns((pl.col("total_us") / whole * 100 if whole else pl.lit(0.0)).alias("ratio_pct"))


def _op_changes(base: pl.DataFrame, new: pl.DataFrame, by: str) -> tuple[OpChange, ...]:
    key = ["op_name", "input_shapes"] if by == "shape" else ["op_type", "core_type"]
    base = base.select([pl.col(c).cast(t) for c, t in _OP_SCHEMA.items()])
    new = new.select([pl.col(c).cast(t) for c, t in _OP_SCHEMA.items()])
    j = base.join(new, on=key, how="full", coalesce=True, suffix="_new", nulls_equal=True)
    rows = []
    for r in j.iter_rows(named=True):
        in_base, in_new = r["count"] is not None, r["count_new"] is not None
        rows.append(
            OpChange(
                op_type=r["op_type"] if by == "type" else (r["op_type"] or r["op_type_new"]),
                core_type=r["core_type"] if by == "type" else (r["core_type"] or r["core_type_new"]),
                base_count=r["count"],
                new_count=r["count_new"],
                base_total_us=float(r["total_us"]) if in_base else None,
                new_total_us=float(r["total_us_new"]) if in_new else None,
                base_ratio_pct=float(r["ratio_pct"]) if in_base else None,
                new_ratio_pct=float(r["ratio_pct_new"]) if in_new else None,
                op_name=r["op_name"] if by == "shape" else None,
                input_shapes=r["input_shapes"] if by == "shape" else None,
            )
        )
    rows.sort(key=lambda o: (-abs(o.delta_us), o.op_type or "", o.core_type or "", o.op_name or "",
                             o.input_shapes or ""))
    return tuple(rows)


# --------------------------------------------------------------------------- findings

def _finding_key(f: Finding, card: str) -> tuple:
    return (f.rule, () if f.rule in _RANKING_RULES else f.op_types, card)


def _finding_changes(
    base: Diagnosis, new: Diagnosis, pairs: tuple[tuple[str, str], ...], labels: dict[tuple[str, str], str]
) -> FindingChanges:
    """Matched by (rule, op types, card); a pair of different card ids counts as one card."""
    def keyed(diag: Diagnosis, side: int) -> dict[tuple, list[Finding]]:
        out: dict[tuple, list[Finding]] = {}
        for pair in pairs:
            for f in diag.for_card(pair[side]):
                out.setdefault(_finding_key(f, labels[pair]), []).append(f)
        return out

    b, n = keyed(base, 0), keyed(new, 1)
    resolved, added, same = [], [], []
    for key, fs in b.items():
        others = n.get(key, [])
        same += list(zip(fs, others))
        resolved += fs[len(others):]
    for key, fs in n.items():
        added += fs[len(b.get(key, [])):]
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    by_stake = lambda f: (rank[f.severity], -f.time_us, f.rule, f.card, f.op_types)  # noqa: E731
    return FindingChanges(
        resolved=tuple(sorted(resolved, key=by_stake)),
        new=tuple(sorted(added, key=by_stake)),
        unchanged=tuple(sorted(same, key=lambda p: by_stake(p[1]))),
    )


# --------------------------------------------------------------------------- compare_runs

def _pairs(
    base: Profile, new: Profile, cards: tuple[str, ...] | None
) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """(base card, new card) to compare and sum, and notes on what was left out."""
    notes: list[str] = []
    bc, nc = tuple(base.cards), tuple(new.cards)
    if cards is not None:
        for card in cards:
            missing = [side for side, have in (("BASE", bc), ("NEW", nc)) if card not in have]
            if missing:
                raise ProfileError(
                    f"no card {card!r} in {' and '.join(missing)}; BASE cards: {', '.join(bc) or 'none'}; "
                    f"NEW cards: {', '.join(nc) or 'none'}"
                )
        return tuple((c, c) for c in cards), notes
    common = tuple(c for c in bc if c in nc)
    if bc != nc:
        if common:
            notes.append(
                f"the runs have different cards (BASE {', '.join(bc)}; NEW {', '.join(nc)}): "
                f"totals and op types sum the cards in both ({', '.join(common)}); "
                "every card id is listed per card"
            )
        elif len(bc) == 1 and len(nc) == 1:
            notes.append(f"the runs have different cards: BASE card {bc[0]} is compared with NEW card {nc[0]}")
            return ((bc[0], nc[0]),), notes
        else:
            raise ProfileError(
                f"the runs have no card in common (BASE {', '.join(bc) or 'none'}; NEW {', '.join(nc) or 'none'})"
            )
    return tuple((c, c) for c in common), notes


def compare_runs(
    base: Profile,
    new: Profile,
    *,
    cards: tuple[str, ...] | None = None,
    by: str = "type",
    thresholds: Thresholds | None = None,
) -> Comparison:
    """BASE against NEW: `cards` None compares (and sums) every card id both runs have.

    Raises ProfileError for a card missing on one side, or `by="shape"` without tasks.
    """
    if by not in BY:
        raise ValueError(f"by must be one of {BY}, not {by!r}")
    th = thresholds or Thresholds()
    pairs, notes = _pairs(base, new, cards)
    base_cards = tuple(b for b, _ in pairs)
    new_cards = tuple(n for _, n in pairs)
    if by == "shape":
        for side, prof, cs in (("BASE", base, base_cards), ("NEW", new, new_cards)):
            if prof.tasks.filter(pl.col("card").is_in(list(cs))).height == 0:
                raise ProfileError(
                    f"--by shape needs tasks (op_summary, kernel_details or a timeline); {side} "
                    f"{prof.capture.name} has only an op_statistic"
                )
    labels = {(b, n): b if b == n else f"{b}->{n}" for b, n in pairs}

    # Every card of either run gets totals; only the paired cards are diagnosed for findings.
    bd = diagnose(base, th, base_cards)
    nd = diagnose(new, th, new_cards)
    b_all = _card_totals(base, _with_causes(base.tasks, bd), base.cards)
    n_all = _card_totals(new, _with_causes(new.tasks, nd), new.cards)
    totals_b = _sum_totals([b_all[b] for b in base_cards])
    totals_n = _sum_totals([n_all[n] for n in new_cards])
    totals = {k: Change(totals_b[k], totals_n[k]) for k in TOTAL_KEYS}

    per_card = [CardChange(labels[p], p[0], p[1], {k: Change(b_all[p[0]][k], n_all[p[1]][k]) for k in TOTAL_KEYS})
                for p in pairs]
    if cards is None:
        paired_b, paired_n = set(base_cards), set(new_cards)
        for c in sorted(set(base.cards) - paired_b, key=_card_order):
            per_card.append(CardChange(c, c, None, {k: Change(b_all[c][k], None) for k in TOTAL_KEYS}))
        for c in sorted(set(new.cards) - paired_n, key=_card_order):
            per_card.append(CardChange(c, None, c, {k: Change(None, n_all[c][k]) for k in TOTAL_KEYS}))

    if by == "shape":
        ops = _op_changes(_shape_rows(bd.tasks, base_cards), _shape_rows(nd.tasks, new_cards), by)
    else:
        ops = _op_changes(_type_rows(base, base_cards), _type_rows(new, new_cards), by)

    tb, tn = totals["tasks"].base or 0, totals["tasks"].new or 0
    if tb and tn and abs(tn - tb) / tb > 0.05:
        notes.append(
            f"NEW has {tn:,.0f} tasks, BASE {tb:,.0f}: if the captures cover different numbers of "
            "steps, compare averages rather than totals"
        )
    for side, prof in (("BASE", base), ("NEW", new)):
        if prof.tasks.height == 0:
            notes.append(
                f"{side} has no tasks (an op_statistic only): its wait, span and task findings "
                "are unknown, shown as 0"
            )

    findings = _finding_changes(bd, nd, pairs, labels)
    verdict = _verdict(totals, ops)
    return Comparison(
        base=Run.of(base), new=Run.of(new), by=by, pairs=pairs, totals=totals, cards=tuple(per_card),
        op_types=ops, findings=findings, notes=tuple(notes), long_wait_us=th.long_wait_us, verdict=verdict,
    )


def _with_causes(tasks: pl.DataFrame, diagnosis: Diagnosis) -> pl.DataFrame:
    """The diagnosed cards carry wait causes; the others (unpaired) only raw waits."""
    return diagnosis.tasks if set(diagnosis.cards) >= set(tasks["card"].unique().to_list()) else pl.concat(
        [
            diagnosis.tasks.select("card", "task_type", "duration_us", "wait_us", "wait_cause"),
            tasks.filter(~pl.col("card").is_in(list(diagnosis.cards)))
            .select("card", "task_type", "duration_us", "wait_us")
            .with_columns(pl.lit(None, pl.String).alias("wait_cause")),
        ]
    )


def _card_order(card: str) -> tuple:
    return (0, int(card), "") if card.isdigit() else (1, 0, card)


def _us(v: float) -> str:
    return _signed(v, 1, " us")


def _verdict(totals: dict[str, Change], ops: tuple[OpChange, ...]) -> str:
    """Faster or slower in device time + wait, and the one change that explains most of it."""
    device, wait = totals["device_us"], totals["wait_us"]
    whole = Change((device.base or 0) + (wait.base or 0), (device.new or 0) + (wait.new or 0))
    pct = whole.delta_pct
    pct_s = f" ({pct:+.1f}%)" if pct is not None else ""
    parts = (
        f"compute {_us(totals['compute_us'].delta)}, communication "
        f"{_us(totals['communication_us'].delta)}, wait {_us(wait.delta)}"
    )
    if _status(whole) == "same":
        return f"About the same: device time + wait {_us(whole.delta)}{pct_s}; {parts}."
    word = "faster" if whole.delta < 0 else "slower"
    head = f"NEW is {word}: device time + wait {_us(whole.delta)}{pct_s}: {parts}"
    candidates = [(o.label, o.delta_us) for o in ops]
    candidates.append(("communication", totals["communication_us"].delta))
    candidates += [(f"{CAUSE_LABELS[c]} wait", totals[f"wait_{c}_us"].delta) for c in CAUSE_LABELS]
    candidates.append(("short waits", totals["wait_short_us"].delta))
    same_sign = [(name, d) for name, d in candidates if d * whole.delta > 0]
    if not same_sign:
        return head + "."
    name, d = max(same_sign, key=lambda x: abs(x[1]))
    return f"{head}; most of it: {name} {_us(d)} ({100 * d / whole.delta:.0f}% of the change)."


# --------------------------------------------------------------------------- gate

def regression(c: Comparison, pct: float) -> str | None:
    """Why NEW is a regression (device time or wait grew more than `pct` %), else None."""
    reasons = []
    for key, what in (("device_us", "total device time"), ("wait_us", "total wait")):
        ch = c.totals[key]
        if ch.delta <= 0:
            continue
        grew = ch.delta_pct
        if grew is None or grew > pct:
            rel = "from nothing" if grew is None else f"{grew:+.1f}%"
            reasons.append(
                f"{what} grew {rel} ({ch.base or 0:,.1f} -> {ch.new or 0:,.1f} us), more than {pct:g}%"
            )
    return "; ".join(reasons) or None


# --------------------------------------------------------------------------- JSON

def _r(v: float | None) -> float | None:
    return None if v is None else round(float(v), 3)


def _change_json(ch: Change) -> dict[str, Any]:
    return {"base": _r(ch.base), "new": _r(ch.new), "delta": _r(ch.delta), "delta_pct": _r(ch.delta_pct)}


def _op_json(o: OpChange, by: str) -> dict[str, Any]:
    d: dict[str, Any] = {"op_type": o.op_type, "core_type": o.core_type}
    if by == "shape":
        d.update(op_name=o.op_name, input_shapes=o.input_shapes)
    d.update(
        base_count=o.base_count, new_count=o.new_count,
        base_total_us=_r(o.base_total_us), new_total_us=_r(o.new_total_us),
        delta_us=_r(o.delta_us), delta_pct=_r(o.delta_pct),
        base_avg_us=_r(o.base_avg_us), new_avg_us=_r(o.new_avg_us),
        base_ratio_pct=_r(o.base_ratio_pct), new_ratio_pct=_r(o.new_ratio_pct),
        status=o.status,
    )
    return d


def _finding_json(f: Finding) -> dict[str, Any]:
    return {
        "rule": f.rule, "severity": f.severity, "card": f.card, "op_types": list(f.op_types),
        "title": f.title, "count": f.count, "time_us": _r(f.time_us), "confidence": f.confidence,
    }


def _run_json(r: Run) -> dict[str, Any]:
    return {"path": r.path, "capture": r.capture, "layout": r.layout, "era": r.era,
            "cards": list(r.cards), "tasks_from": r.tasks_from}


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
            {"card": cc.card, "base_card": cc.base_card, "new_card": cc.new_card,
             "totals": {k: _change_json(v) for k, v in cc.totals.items()}}
            for cc in c.cards
        ],
        "op_types": [_op_json(o, c.by) for o in c.op_types],
        "findings": {
            "resolved": [_finding_json(f) for f in c.findings.resolved],
            "new": [_finding_json(f) for f in c.findings.new],
            "unchanged": [
                {**_finding_json(n), "base_time_us": _r(b.time_us), "new_time_us": _r(n.time_us)}
                for b, n in c.findings.unchanged
            ],
        },
        "verdict": c.verdict,
    }


# --------------------------------------------------------------------------- text / markdown

def _num(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _signed(v: float | None, digits: int = 1, unit: str = "") -> str:
    if v is None:
        return "-"
    text = f"{v:+,.{digits}f}"
    return (text[1:] if round(v, digits) == 0 else text) + unit  # no sign on what rounds to zero


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
    sev = {"critical": "CRIT", "warning": "WARN", "info": "INFO"}[f.severity]
    stake = f"{f.time_us:,.0f} us" if f.time_us else "-"
    if md:
        return f"- **{sev}** card {f.card} `{f.rule}`: {f.title} (at stake {stake})"
    return f"  [{sev}] card {f.card} {f.rule}: {f.title} (at stake {stake})"


def render_comparison(c: Comparison, fmt: str, *, top: int | None = 20) -> str:
    """Text or markdown: verdict, totals, per card, findings, then op types by |delta|."""
    md = fmt == "markdown"
    table = _md_table if md else _table
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
        rows.append([_total_label(key, c.long_wait_us), _num(ch.base, d), _num(ch.new, d),
                     _signed(ch.delta, d), _signed(ch.delta_pct, 1, "%")])
    out += table(["", "BASE", "NEW", "Delta", "Delta(%)"], rows, {1, 2, 3, 4})

    if len(c.cards) > 1:
        out += ["", f"{h2}Per card" if md else "Per card"]
        rows = []
        for cc in c.cards:
            t = cc.totals
            rows.append([
                cc.card, "both" if cc.base_card and cc.new_card else ("BASE only" if cc.base_card else "NEW only"),
                _num(t["compute_us"].base), _num(t["compute_us"].new), _signed(t["compute_us"].delta_pct, 1, "%"),
                _num(t["wait_us"].base), _num(t["wait_us"].new), _signed(t["wait_us"].delta_pct, 1, "%"),
                _num(t["communication_us"].base), _num(t["communication_us"].new),
            ])
        out += table(
            ["Card", "In", "Compute BASE", "Compute NEW", "Delta(%)", "Wait BASE", "Wait NEW", "Delta(%)",
             "Comm BASE", "Comm NEW"],
            rows, set(range(2, 10)),
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
        rows.append([
            *lead, _num(o.base_count, 0), _num(o.new_count, 0), _num(o.base_total_us), _num(o.new_total_us),
            _signed(o.delta_us), _signed(o.delta_pct, 1, "%"), _num(o.base_avg_us, 3), _num(o.new_avg_us, 3),
            _num(o.base_ratio_pct, 3), _num(o.new_ratio_pct, 3), o.status,
        ])
    k = len(first)
    out += table(
        [*first, "Count BASE", "Count NEW", "Total BASE(us)", "Total NEW(us)", "Delta(us)", "Delta(%)",
         "Avg BASE(us)", "Avg NEW(us)", "Ratio BASE(%)", "Ratio NEW(%)", "Status"],
        rows, set(range(k, k + 10)),
    )
    for status, word in (("new", "New"), ("vanished", "Vanished")):
        names = [o.label for o in c.op_types if o.status == status]
        if names:
            out.append(f"{word}: {', '.join(names[:20])}{' ...' if len(names) > 20 else ''}")
    return printable("\n".join(out) + "\n")


# --------------------------------------------------------------------------- card against card

@dataclass(frozen=True)
class CardTotals:
    card: str
    tasks: int
    compute_us: float
    communication_us: float
    wait_us: float


@dataclass(frozen=True)
class OpTypeSpread:
    """Where one op type is slowest: highest total on `slowest_card`, lowest on `fastest_card`."""

    op_type: str
    core_type: str
    slowest_card: str
    slowest_total_us: float
    fastest_card: str
    fastest_total_us: float
    spread_pct: float  # (max - min) / mean over the cards, absent = 0


@dataclass(frozen=True)
class CardSpread:
    cards: tuple[CardTotals, ...]
    slowest_card: str | None  # most compute
    compute_spread_pct: float
    wait_spread_pct: float
    communication_spread_pct: float
    threshold_pct: float
    op_types: tuple[OpTypeSpread, ...]  # by max - min, largest first

    @property
    def flagged(self) -> bool:
        """Compute differs between cards by more than the threshold: one card holds the rest back."""
        return self.compute_spread_pct > self.threshold_pct

    @property
    def wait_flagged(self) -> bool:
        return self.wait_spread_pct > self.threshold_pct


def _spread(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return 100.0 * (max(values) - min(values)) / mean if mean > 0 else 0.0


def card_spread(
    profile: Profile, cards: tuple[str, ...] | None = None, *, threshold_pct: float = SPREAD_FLAG_PCT
) -> CardSpread:
    """Card against card in one profile (default: every card). Cheap: two group-bys."""
    cards = tuple(cards or profile.cards)
    totals = _card_totals(profile, profile.tasks, cards)
    per = tuple(
        CardTotals(c, int(totals[c]["tasks"]), totals[c]["compute_us"], totals[c]["communication_us"],
                   totals[c]["wait_us"])
        for c in cards
    )
    slowest = max(per, key=lambda t: (t.compute_us, -cards.index(t.card))).card if per else None
    stat = (
        profile.op_statistic.filter(pl.col("card").is_in(list(cards)))
        .group_by("op_type", "core_type", "card").agg(pl.col("total_us").sum())
    )
    by_type: dict[tuple[str, str], dict[str, float]] = {}
    for op_type, core, card, total in stat.iter_rows():
        by_type.setdefault((op_type, core), {})[card] = float(total or 0.0)
    ops = []
    for (op_type, core), got in by_type.items():
        vals = {c: got.get(c, 0.0) for c in cards}
        hi = max(cards, key=lambda c: (vals[c], -cards.index(c)))
        lo = min(cards, key=lambda c: (vals[c], cards.index(c)))
        ops.append(OpTypeSpread(op_type, core, hi, vals[hi], lo, vals[lo], _spread(list(vals.values()))))
    ops.sort(key=lambda o: (-(o.slowest_total_us - o.fastest_total_us), o.op_type, o.core_type))
    return CardSpread(
        cards=per,
        slowest_card=slowest,
        compute_spread_pct=_spread([t.compute_us for t in per]),
        wait_spread_pct=_spread([t.wait_us for t in per]),
        communication_spread_pct=_spread([t.communication_us for t in per]),
        threshold_pct=threshold_pct,
        op_types=tuple(ops),
    )


def card_spread_json(s: CardSpread) -> dict[str, Any]:
    return {
        "cards": [
            {"card": t.card, "tasks": t.tasks, "compute_us": _r(t.compute_us),
             "communication_us": _r(t.communication_us), "wait_us": _r(t.wait_us)}
            for t in s.cards
        ],
        "slowest_card": s.slowest_card,
        "compute_spread_pct": _r(s.compute_spread_pct),
        "wait_spread_pct": _r(s.wait_spread_pct),
        "communication_spread_pct": _r(s.communication_spread_pct),
        "threshold_pct": s.threshold_pct,
        "flagged": s.flagged,
        "wait_flagged": s.wait_flagged,
        "op_types": [
            {"op_type": o.op_type, "core_type": o.core_type, "slowest_card": o.slowest_card,
             "slowest_total_us": _r(o.slowest_total_us), "fastest_card": o.fastest_card,
             "fastest_total_us": _r(o.fastest_total_us), "spread_pct": _r(o.spread_pct)}
            for o in s.op_types
        ],
    }


def render_card_spread(s: CardSpread, fmt: str = "text", *, top: int = 10) -> list[str]:
    """Lines for a text or markdown report: per card totals, the flag, the most uneven op types."""
    return spread_lines(card_spread_json(s), fmt == "markdown", top)
