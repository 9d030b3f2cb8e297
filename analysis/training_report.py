"""The training-level part of the report: steps, communication, links, host API, memory.

`card_views` turns the views of `read_training_views` (computed by the caller) into the
per card keys of `npuscope.report/1`; `training_lines` renders them as text or markdown.
Rows a file records for the whole capture (card `host`) stand for a card that has none of
its own. Every list is sorted, so the JSON is the same from one run to the next.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from npuscope.parsers.by_card import HOST, card_or_host_rows, per_frame
from npuscope.parsers.training import TrainingViews

from .table import Table, rounded

WHOLE_CAPTURE = "all"  # the step of a row that covers the whole capture (no step boundaries)


_of_card = card_or_host_rows


def _num(v: object) -> float | None:
    return rounded(v) if isinstance(v, (int, float)) else None


_STEP_KEYS = ("step_us", "compute_us", "communication_us", "comm_not_overlapped_us", "overlapped_us", "free_us")


def _step_rows(frame: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Card -> its steps as report rows, in step order (the whole capture's first), every card
    in one pass over the view."""
    out: dict[str, list[dict[str, Any]]] = {}
    rows = frame.sort("step", nulls_last=False, maintain_order=True)
    for r in rows.iter_rows(named=True):
        row = {"step": WHOLE_CAPTURE if r["step"] is None else str(r["step"]), **{k: _num(r[k]) for k in _STEP_KEYS}}
        out.setdefault(str(r["card"]), []).append(row)
    return out


def _steps(frame: pl.DataFrame, card: str) -> list[dict[str, Any]]:
    """The card's steps as report rows, else those of the whole capture (card `host`)."""
    if frame.height == 0:
        return []
    by = per_frame(frame, "report_steps", _step_rows)
    return by.get(card) or by.get(HOST, [])


def _sum_or_null(name: str) -> pl.Expr:
    return pl.when(pl.col(name).is_not_null().any()).then(pl.col(name).sum()).alias(name)


def per_op_type(frame: pl.DataFrame, *extra: pl.Expr) -> pl.DataFrame:
    """Collectives per op type, largest total first: count, total, transit, wait, sync and size
    summed (null when no row has one), `extra` aggregations, and the bandwidth in GB/s: the
    data moved over the time it took, the time of each op being its size over its bandwidth
    (ops without a transfer time have no bandwidth). The report, compare and the explorer's
    Communication tab all count it so."""
    moved = (pl.col("bandwidth_gbps") > 0).fill_null(False)
    return (
        frame.with_columns(
            pl.when(moved).then(pl.col("size_mb")).alias("_moved_mb"),
            pl.when(moved).then(pl.col("size_mb") / pl.col("bandwidth_gbps") * 1000.0).alias("_moved_us"),
        )
        .group_by("op_type")
        .agg(
            pl.col("count").sum(),
            pl.col("total_us").sum(),
            *(_sum_or_null(c) for c in ("transit_us", "wait_us", "sync_us", "size_mb")),
            pl.col("_moved_mb").sum(),
            pl.col("_moved_us").sum(),
            *extra,
        )
        .with_columns(
            pl.when(pl.col("_moved_us") > 0)
            .then(pl.col("_moved_mb") / (pl.col("_moved_us") / 1000.0))
            .alias("bandwidth_gbps")
        )
        .drop("_moved_mb", "_moved_us")
        .sort(["total_us", "op_type"], descending=[True, False], nulls_last=True)
    )


def _communication(frame: pl.DataFrame) -> list[dict[str, Any]]:
    if frame.height == 0:
        return []
    per = per_op_type(frame)
    keys = ("total_us", "transit_us", "wait_us", "sync_us", "size_mb", "bandwidth_gbps")
    return [
        {"op_type": r["op_type"], "count": int(r["count"]), **{k: _num(r[k]) for k in keys}}
        for r in per.iter_rows(named=True)
    ]


def _links(frame: pl.DataFrame) -> list[dict[str, Any]]:
    if frame.height == 0:
        return []
    rows = frame.sort(["group", "src", "dst", "transport"], nulls_last=True, maintain_order=True)
    return [
        {
            "group": r["group"],
            "src": str(r["src"]),
            "dst": str(r["dst"]),
            "transport": r["transport"],
            "size_mb": _num(r["size_mb"]),
            "bandwidth_gbps": _num(r["bandwidth_gbps"]),
        }
        for r in rows.iter_rows(named=True)
    ]


def _host_api(frame: pl.DataFrame) -> list[dict[str, Any]]:
    if frame.height == 0:
        return []
    per = (
        frame.group_by("api")
        .agg(pl.col("count").sum(), pl.col("total_us").sum(), pl.col("max_us").max())
        .with_columns(
            pl.when(pl.col("count") > 0).then(pl.col("total_us") / pl.col("count")).alias("avg_us"),
        )
        .sort(["total_us", "api"], descending=[True, False])
    )
    return [
        {
            "api": r["api"],
            "count": int(r["count"]),
            "total_us": _num(r["total_us"]),
            "avg_us": _num(r["avg_us"]),
            "max_us": _num(r["max_us"]),
        }
        for r in per.iter_rows(named=True)
    ]


def _memory(peaks: pl.DataFrame, top_ops: pl.DataFrame, top: int) -> dict[str, Any]:
    row = peaks.row(0, named=True) if peaks.height else {}
    ops = (
        top_ops.sort(["size_mb", "op_name"], descending=[True, False], nulls_last=True).head(top)
        if top_ops.height
        else top_ops
    )
    return {
        "peak_allocated_mb": _num(row.get("peak_allocated_mb")),
        "peak_reserved_mb": _num(row.get("peak_reserved_mb")),
        "top_ops": [{"op_name": r["op_name"], "size_mb": _num(r["size_mb"])} for r in ops.iter_rows(named=True)],
    }


def card_views(views: TrainingViews, card: str, top: int) -> dict[str, Any]:
    """The report keys `steps`, `communication`, `links`, `host_api` and `memory` of a card."""
    return {
        "steps": _steps(views.steps, card),
        "communication": _communication(_of_card(views.communication, card)),
        "links": _links(_of_card(views.links, card)),
        "host_api": _host_api(_of_card(views.host_api, card)),
        "memory": _memory(_of_card(views.memory, card), _of_card(views.memory_top_ops, card), top),
    }


def _section(title: str, md: bool) -> list[str]:
    return ["", f"### {title}" if md else title]


def training_lines(card: dict[str, Any], md: bool, top: int, table: Table) -> list[str]:
    """The Steps, Communication, Links, Host API and Memory sections of a card."""
    out: list[str] = []
    steps = card["steps"]
    out += _section("Steps", md)
    if not steps:
        out.append("none")
    else:
        shown = steps
        if len(steps) > top:
            slowest = sorted(range(len(steps)), key=lambda i: (-(steps[i]["step_us"] or 0.0), i))[:top]
            shown = [steps[i] for i in sorted(slowest)]
            out += [f"the {top} slowest of {len(steps)} steps"] + ([""] if md else [])
        rows = [
            [
                r["step"],
                r["step_us"],
                r["compute_us"],
                r["communication_us"],
                r["comm_not_overlapped_us"],
                r["overlapped_us"],
                r["free_us"],
            ]
            for r in shown
        ]
        out += table(
            [
                "Step",
                "Step(us)",
                "Compute(us)",
                "Communication(us)",
                "Not Overlapped(us)",
                "Overlapped(us)",
                "Free(us)",
            ],
            rows,
            {1, 2, 3, 4, 5, 6},
        )
    out += _section("Communication", md)
    if not card["communication"]:
        out.append("none")
    else:
        rows = [
            [
                r["op_type"],
                r["count"],
                r["total_us"],
                r["transit_us"],
                r["wait_us"],
                r["sync_us"],
                r["size_mb"],
                r["bandwidth_gbps"],
            ]
            for r in card["communication"][:top]
        ]
        out += table(
            ["OP Type", "Count", "Total(us)", "Transit(us)", "Wait(us)", "Sync(us)", "Size(MB)", "Bandwidth(GB/s)"],
            rows,
            {1, 2, 3, 4, 5, 6, 7},
        )
    out += _section("Links", md)
    links = card["links"]
    if not links:
        out.append("none")
    else:
        # Largest first; LOCAL (copies within the card, not a link between ranks) last.
        biggest = sorted(
            range(len(links)), key=lambda i: (links[i]["transport"] == "LOCAL", -(links[i]["size_mb"] or 0.0), i)
        )[:top]
        if len(links) > top:
            out += [f"the {top} largest of {len(links)} links"] + ([""] if md else [])
        rows = [
            [links[i]["group"], links[i]["src"], links[i]["dst"], links[i]["transport"]]
            + [links[i]["size_mb"], links[i]["bandwidth_gbps"]]
            for i in biggest
        ]
        out += table(["Group", "Src", "Dst", "Transport", "Size(MB)", "Bandwidth(GB/s)"], rows, {4, 5})
    out += _section("Host API", md)
    if not card["host_api"]:
        out.append("none")
    else:
        rows = [[r["api"], r["count"], r["total_us"], r["avg_us"], r["max_us"]] for r in card["host_api"][:top]]
        out += table(["API", "Count", "Total(us)", "Avg(us)", "Max(us)"], rows, {1, 2, 3, 4})
    out += _section("Memory", md)
    mem = card["memory"]
    if mem["peak_allocated_mb"] is None and mem["peak_reserved_mb"] is None and not mem["top_ops"]:
        out.append("none")
    else:
        alloc, reserved = mem["peak_allocated_mb"], mem["peak_reserved_mb"]
        out.append(
            f"peak allocated {'-' if alloc is None else f'{alloc:,.1f} MB'}, "
            f"peak reserved {'-' if reserved is None else f'{reserved:,.1f} MB'}"
        )
        if mem["top_ops"]:
            out.append("")
            out += table(
                ["Op Name", "Largest Allocation(MB)"], [[r["op_name"], r["size_mb"]] for r in mem["top_ops"]], {1}
            )
    return out
