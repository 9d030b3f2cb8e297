"""Per card totals: what compute, communication, wait, span and op types mean, in one place.

The explorer's header and its "Compute vs wait" card (kpis), the report's card sections and
its `== cards ==` table, the explorer's cards view (card_spread) and the comparison all take
these numbers from here, so they cannot disagree. VOCABULARY says it in words (README
"Vocabulary", the explorer's help):

  compute        duration of every task that is not communication (`compute_tasks`; what
                 op_statistic sums; from the op_statistic itself when a card has no tasks,
                 e.g. a lone op_statistic CSV)
  communication  duration of COMMUNICATION / HCCL tasks (`is_communication`: a collective's
                 duration includes waiting for the other ranks, so it is never compute)
  device time    compute + communication (the comparison's headline)
  wait           Task Wait Time of every task, communication included, split by the cause the
                 diagnosis gave each long wait; waits under `long_wait_us` have no cause and
                 are counted as "short"
  span           first task start to last task end; None (0 in sums) when the start times
                 cannot be trusted
  step compute   per step (the Steps tab, the report's and the comparison's steps): the wall
                 time in which some compute task ran, overlaps counted once (step_trace's
                 Computing; parsers/steps.py), not a sum of durations
  op types       distinct OP Type values of the card's op statistics (one op type on two core
                 types is one op type); communication types are not op types (msprof leaves
                 them out of op_statistic)
"""

from __future__ import annotations

from typing import Any

import polars as pl

from npuscope.parsers import Profile
from npuscope.parsers.by_card import per_frame
from npuscope.parsers.frames import is_communication

from .waits import CAUSES

VOCABULARY = """\
compute        operator tasks' time: every task but communication
               (what op_statistic sums)
communication  time of the collectives (COMMUNICATION, HCCL); never compute
device time    compute + communication
wait           Task Wait Time before each task (communication too), by cause
span           first task start to last task end on the card
step compute   per step (Steps tab): wall time in which some compute task ran,
               overlaps counted once
op types       distinct OP Types of the Op statistics tab; communication
               types are not op types"""
"""The words every view uses, as the explorer's help and the README's Vocabulary show them."""

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


def compute_tasks() -> pl.Expr:
    """The tasks whose duration is compute: every task that is not communication."""
    return ~is_communication()


def compute_sums() -> list[pl.Expr]:
    """compute_us, communication_us and wait_us of a tasks frame, as aggregations."""
    return [
        pl.col("duration_us").filter(compute_tasks()).sum().alias("compute_us"),
        pl.col("duration_us").filter(is_communication()).sum().alias("communication_us"),
        pl.col("wait_us").fill_null(0.0).sum().alias("wait_us"),
    ]


def op_type_count(stat: pl.DataFrame) -> int:
    """Op types of op statistics rows (one card's): distinct OP Type values."""
    return int(stat["op_type"].n_unique()) if stat.height else 0


def card_summary(profile: Profile, tasks: pl.DataFrame, card: str) -> dict[str, Any]:
    """Tasks, compute, communication, wait, span and op types of one card (`card_totals`),
    rounded for the report and the explorer's header."""
    v = card_totals(profile, tasks, (card,))[card]
    span = profile.span_ns(card)
    return {
        "tasks": int(v["tasks"]),
        "compute_us": round(v["compute_us"], 3),
        "communication_us": round(v["communication_us"], 3),
        "wait_us": round(v["wait_us"], 3),
        "span_us": None if span is None else round(span / 1000, 3),
        "op_types": per_frame(profile.op_statistic, "op_types", _op_types).get(card, 0),
    }


def _op_types(stat: pl.DataFrame) -> dict[str, int]:
    """Card -> distinct OP Type values of its op statistics rows."""
    counted = stat.group_by("card").agg(pl.col("op_type").n_unique())
    return {str(c): int(n) for c, n in counted.iter_rows() if c is not None}


def _task_sums(tasks: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Card -> tasks, compute, communication and wait sums (by cause, when `tasks` has causes)."""
    has_cause = "wait_cause" in tasks.columns
    wait = pl.col("wait_us").fill_null(0.0)
    aggs = [pl.len().alias("tasks"), *compute_sums()]
    if has_cause:
        aggs += [wait.filter(pl.col("wait_cause") == c).sum().alias(f"wait_{c}_us") for c in CAUSES]
        aggs.append(wait.filter(pl.col("wait_cause").is_null()).sum().alias("wait_short_us"))
    return {r["card"]: r for r in tasks.group_by("card").agg(aggs).iter_rows(named=True)}


def _statistic_sums(stat: pl.DataFrame) -> dict[str, float | None]:
    return dict(stat.group_by("card").agg(pl.col("total_us").sum()).iter_rows())


def card_totals(profile: Profile, tasks: pl.DataFrame, cards: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Per card: the TOTAL_KEYS values. `tasks` may carry `wait_cause` (from a diagnosis).
    Every card's sums come from one grouped pass over `tasks`, kept while the frame lives."""
    has_cause = "wait_cause" in tasks.columns
    got = per_frame(tasks, "task_sums", _task_sums)
    stat_total = per_frame(profile.op_statistic, "statistic_sums", _statistic_sums)
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
