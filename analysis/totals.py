"""Per card totals: what compute, communication, wait and span mean, in one place.

The report's card summary, the explorer's header, the comparison and the card spread all
print these numbers; they are computed here so that they cannot disagree:

  compute        duration of every non-communication task (what op_statistic sums; from the
                 op_statistic itself when a card has no tasks, e.g. a lone op_statistic CSV)
  communication  duration of COMMUNICATION / HCCL tasks (a collective's duration includes
                 waiting for the other ranks, so it is kept apart from compute)
  device time    compute + communication (what `npuscope report` calls compute)
  wait           Task Wait Time, split by the cause the diagnosis gave each long wait;
                 waits under `long_wait_us` have no cause and are counted as "short"
  span           first task start to last task end; None (0 in sums) when the start times
                 cannot be trusted
"""

from __future__ import annotations

from typing import Any

import polars as pl

from npuscope.parsers import Profile
from npuscope.parsers.frames import is_communication

from .waits import CAUSES

TOTAL_KEYS = (
    "device_us",
    "compute_us",
    "communication_us",
    "wait_us",
    *(f"wait_{c}_us" for c in ("recompilation", "host_op", "expected", "unexplained", "communication")),
    "wait_short_us",
    "span_us",
    "tasks",
)


def card_summary(profile: Profile, tasks: pl.DataFrame, card: str) -> dict[str, Any]:
    """Tasks, compute (operator tasks), communication, wait, span and op types of one card,
    rounded for the report and the explorer's header."""
    t = tasks.select("card", "op_type", "task_type", "duration_us", "wait_us").filter(pl.col("card") == card)
    comm = t.filter(is_communication())
    compute = t.filter(~is_communication())
    span = profile.span_ns(card)
    return {
        "tasks": t.height,
        "compute_us": round(float(compute["duration_us"].sum() or 0.0), 3),
        "communication_us": round(float(comm["duration_us"].sum() or 0.0), 3),
        "wait_us": round(float(t["wait_us"].sum() or 0.0), 3),
        "span_us": None if span is None else round(span / 1000, 3),
        "op_types": int(compute["op_type"].n_unique()) if compute.height else 0,
    }


def card_totals(profile: Profile, tasks: pl.DataFrame, cards: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Per card: the TOTAL_KEYS values. `tasks` may carry `wait_cause` (from a diagnosis)."""
    has_cause = "wait_cause" in tasks.columns
    cols = ["card", "task_type", "duration_us", "wait_us"] + (["wait_cause"] if has_cause else [])
    t = tasks.select(cols).filter(pl.col("card").is_in(list(cards)))
    wait = pl.col("wait_us").fill_null(0.0)
    aggs = [
        pl.len().alias("tasks"),
        pl.col("duration_us").filter(~is_communication()).sum().alias("compute_us"),
        pl.col("duration_us").filter(is_communication()).sum().alias("communication_us"),
        wait.sum().alias("wait_us"),
    ]
    if has_cause:
        aggs += [wait.filter(pl.col("wait_cause") == c).sum().alias(f"wait_{c}_us") for c in CAUSES]
        aggs.append(wait.filter(pl.col("wait_cause").is_null()).sum().alias("wait_short_us"))
    got = {r["card"]: r for r in t.group_by("card").agg(aggs).iter_rows(named=True)}
    stat = profile.op_statistic.filter(pl.col("card").is_in(list(cards))).group_by("card").agg(pl.col("total_us").sum())
    stat_total: dict[str, float | None] = dict(stat.iter_rows())
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


def sum_totals(parts: list[dict[str, float]]) -> dict[str, float]:
    """The totals of several cards: sums, but the span of the longest card."""
    out = {k: sum(p[k] for p in parts) for k in TOTAL_KEYS}
    out["span_us"] = max((p["span_us"] for p in parts), default=0.0)
    return out
