"""The operator rules over op types: what dominates compute, long tasks, duration outliers,
AI_CPU tasks, low parallelism and the aclop share. Each turns one card's frames into findings
with a few polars expressions (no Python loop over rows)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import polars as pl

from npuscope.parsers.columns import UNKNOWN
from npuscope.parsers.device_info import DeviceInfo
from npuscope.parsers.frames import is_communication

from .advice import CUSTOM_KERNEL, DOMINANT_ACLNN, DOMINANT_INFO, DOMINANT_WARNING, advice
from .bound import BOUND_WORDS, MIXED, UNKNOWN_BOUND
from .card_data import SMALL_SAMPLE_TASKS, share
from .card_groups import Cards, Key, by_card, evidence_by, first_names, grouped, per_group
from .evidence import EvidenceRow, task_rows
from .findings import Finding
from .rule_names import ACLOP_SHARE, AI_CPU, DOMINANT_OP_TYPE, DURATION_OUTLIER, LONG_TASK, LOW_PARALLELISM
from .task_kinds import CORE_TASKS, HOST_MATRIX_TYPES, MATRIX_CORES, MATRIX_TYPES, aclop_tasks, operator_tasks
from .thresholds import Thresholds


def dominant_op_type(c: Cards, th: Thresholds) -> list[Finding]:
    # An unknown type (torch_npu Level0) is every op at once: its share says nothing.
    big = c.stat.filter((pl.col("ratio_pct") >= th.dominant_ratio_pct) & (pl.col("op_type") != UNKNOWN))
    if big.height == 0:
        return []
    # The tasks of each big op type on its card (every core type of it), in one pass.
    of_type = c.tasks.join(
        big.select("card", "op_type").unique(), on=["card", "op_type"], how="semi", maintain_order="left"
    )
    facts = grouped(of_type, ("card", "op_type"), first_names(), aclop_tasks().sum().alias("_aclop"))
    evidence = evidence_by(of_type, ("card", "op_type"), "duration_us", th.evidence_rows)
    rows = by_card(list(big.iter_rows(named=True)))
    out = []
    for card in c.cards:
        custom_types = c.custom_types(card)
        for row in rows.get(card, ()):
            out.append(_dominant(c, th, card, row, custom_types, facts, evidence))
    return out


def _dominant(
    c: Cards,
    th: Thresholds,
    card: str,
    row: dict[str, Any],
    custom_types: frozenset[str],
    facts: dict[Key, dict[str, Any]],
    evidence: dict[Key, tuple[EvidenceRow, ...]],
) -> Finding:
    """The dominant_op_type finding of one op statistics row."""
    op_type = row["op_type"]
    if c.kind == "NPU":
        matrix = bool(re.match(MATRIX_TYPES, op_type or "")) and row["core_type"] in MATRIX_CORES
    else:  # framework op names (Paddle: matmul, conv2d, Global_MatmulGradNode): no core types
        matrix = bool(re.search(HOST_MATRIX_TYPES, op_type or ""))
    custom = op_type in custom_types
    got = facts.get((card, op_type), {"_names": [], "_aclop": 0})
    title = f"{op_type} ({row['core_type']}) takes {row['ratio_pct']:.1f}% of compute"
    if custom:  # the application's own kernel: what bounds it is the lead, not recompilation
        bound = c.bounds(card, th).get(op_type, UNKNOWN_BOUND)
        title += f"; custom kernel, {BOUND_WORDS[bound]}" if bound != UNKNOWN_BOUND else "; custom kernel"
    topic = CUSTOM_KERNEL if custom else DOMINANT_INFO if matrix else DOMINANT_WARNING
    if topic == DOMINANT_WARNING and c.kind == "NPU" and not got["_aclop"]:
        topic = DOMINANT_ACLNN  # online compilation needs aclop tasks of the type: none here
    compute_n = c.fact(card, "compute_n")
    if compute_n < SMALL_SAMPLE_TASKS:
        title += f" ({compute_n} task(s): a small sample)"
    return Finding(
        rule=DOMINANT_OP_TYPE,
        severity="info" if matrix and not custom else "warning",
        title=title,
        card=card,
        op_types=(op_type,),
        op_names=tuple(got["_names"]),
        count=int(row["count"]),
        time_us=float(row["total_us"]),
        share_pct=float(row["ratio_pct"]),
        advice=advice(topic, c.framework, c.kind),
        evidence=evidence.get((card, op_type), ()),
        threshold=f"Ratio(%) >= {th.dominant_ratio_pct:g}",
    )


def _duration_findings(
    c: Cards,
    th: Thresholds,
    rows_all: pl.DataFrame,
    rule: str,
    title: Callable[[str, int, dict[str, Any]], str],
    threshold: str,
    *extra: pl.Expr,
) -> list[Finding]:
    """One finding of `rule` per card and op type of `rows_all`, with the time at stake in task
    durations; `title` reads the group's row (`per_group`, with the `extra` aggregations)."""
    if rows_all.height == 0:
        return []
    groups = by_card(per_group(rows_all, "duration_us", *extra))
    evidence = evidence_by(rows_all, ("card", "op_type"), "duration_us", th.evidence_rows)
    out = []
    for card in c.cards:
        for g in groups.get(card, ()):
            op_type, n, total = g["op_type"], int(g["_n"]), float(g["_t"] or 0.0)
            topic = CUSTOM_KERNEL if rule == LONG_TASK and op_type in c.custom_types(card) else rule
            out.append(
                Finding(
                    rule=rule,
                    severity="warning",
                    title=title(op_type, n, g),
                    card=card,
                    op_types=(op_type,),
                    op_names=tuple(g["_names"]),
                    count=n,
                    time_us=total,
                    share_pct=share(total, c.compute_us(card)),
                    advice=advice(topic, c.framework, c.kind),
                    evidence=evidence.get((card, op_type), ()),
                    threshold=threshold,
                )
            )
    return out


def long_task(c: Cards, th: Thresholds) -> list[Finding]:
    return _duration_findings(
        c,
        th,
        c.tasks.filter(~is_communication() & (pl.col("duration_us") > th.long_task_us)),
        LONG_TASK,
        lambda op_type, n, g: f"{n:,} {_kind(op_type)} longer than {th.long_task_us:g} us",
        f"Task Duration > {th.long_task_us:g} us",
    )


def _kind(op_type: str) -> str:
    """`MatMulV3 task(s)`, or `task(s) of unknown type` where the capture has no types."""
    return "task(s) of unknown type" if op_type == UNKNOWN else f"{op_type} task(s)"


def duration_outlier(c: Cards, th: Thresholds) -> list[Finding]:
    flagged = c.stat.filter(
        (pl.col("op_type") != UNKNOWN)
        & (pl.col("count") >= th.outlier_min_calls)
        & (pl.col("max_us") >= th.outlier_max_over_avg * pl.col("avg_us"))
        & (pl.col("avg_us") > 0)
    ).with_row_index("_f")
    if flagged.height == 0:
        return []
    # Each flagged row's tasks: its op type and core type on its card, at least k x its average.
    keys = flagged.select(
        "_f", "card", "op_type", pl.col("core_type").alias("task_type"), pl.col("avg_us").alias("_avg")
    )
    rows = c.tasks.join(keys, on=["card", "op_type", "task_type"], how="inner", maintain_order="left").filter(
        pl.col("duration_us") >= th.outlier_max_over_avg * pl.col("_avg")
    )
    over_avg = (pl.col("duration_us") - pl.col("_avg")).sum().alias("_excess")
    facts = grouped(rows, ("_f",), pl.len().alias("_n"), over_avg, first_names())
    evidence = evidence_by(rows, ("_f",), "duration_us", th.evidence_rows)
    by = by_card(list(flagged.iter_rows(named=True)))
    out = []
    for card in c.cards:
        for row in by.get(card, ()):
            got = facts.get((row["_f"],), {"_n": 0, "_excess": 0.0, "_names": []})
            excess = float(got["_excess"] or 0.0)
            out.append(
                Finding(
                    rule=DURATION_OUTLIER,
                    severity="warning",
                    title=(
                        f"{row['op_type']}: max {row['max_us']:,.1f} us is "
                        f"{row['max_us'] / row['avg_us']:.0f}x its average"
                    ),
                    card=card,
                    op_types=(row["op_type"],),
                    op_names=tuple(got["_names"]),
                    count=max(int(got["_n"]), 1),
                    time_us=excess,
                    share_pct=share(excess, c.compute_us(card)),
                    advice=advice(DURATION_OUTLIER, c.framework, c.kind),
                    evidence=evidence.get((row["_f"],), ()),
                    threshold=(f"Count >= {th.outlier_min_calls} and Max >= {th.outlier_max_over_avg:g} x Avg"),
                )
            )
    return out


def ai_cpu(c: Cards, th: Thresholds) -> list[Finding]:
    def title(op_type: str, n: int, g: dict[str, Any]) -> str:
        dtypes = g["_dtypes"]
        inputs = f" (inputs {', '.join(dtypes)})" if dtypes else ""
        return f"{op_type} runs on AI_CPU: {n} task(s) over {th.ai_cpu_us:g} us{inputs}"

    slow = c.tasks.filter((pl.col("task_type") == "AI_CPU") & (pl.col("duration_us") > th.ai_cpu_us))
    dtypes = pl.col("input_dtypes").drop_nulls().unique().sort().head(3).alias("_dtypes")
    return _duration_findings(c, th, slow, AI_CPU, title, f"AI_CPU Task Duration > {th.ai_cpu_us:g} us", dtypes)


def aclop_share(c: Cards, th: Thresholds) -> list[Finding]:
    # An application's own kernels are neither aclop nor aclnn: left out of both counts. A
    # card without aclop tasks (host-only traces, custom kernels only, every operator aclnn)
    # has nothing that compiles online and nothing to migrate.
    aclop = c.tasks.filter(aclop_tasks())
    if aclop.height == 0:
        return []
    operators = dict(c.tasks.group_by("card").agg(operator_tasks().sum()).iter_rows())
    totals = grouped(aclop, ("card",), pl.len().alias("_n"), pl.col("duration_us").sum().alias("_t"))
    types = by_card(per_group(aclop, "duration_us"))
    evidence = evidence_by(aclop, ("card",), "duration_us", th.evidence_rows)
    out = []
    for card in c.cards:
        got = totals.get((card,))
        if got is None:
            continue
        n, aclop_t = int(got["_n"]), float(got["_t"] or 0.0)
        aclnn_n = int(operators.get(card) or 0) - n
        out.append(
            Finding(
                rule=ACLOP_SHARE,
                severity="info",
                title=(
                    f"aclop: {n:,} call(s), {share(aclop_t, c.compute_us(card)):.1f}% of compute; "
                    f"aclnn: {aclnn_n:,} call(s)"
                ),
                card=card,
                op_types=tuple(g["op_type"] for g in types.get(card, ())[:10]),
                op_names=(),
                count=n,
                time_us=aclop_t,
                share_pct=share(aclop_t, c.compute_us(card)),
                advice=advice(ACLOP_SHARE, c.framework, c.kind),
                evidence=evidence.get((card,), ()),
                threshold="informational",
            )
        )
    return out


def low_parallelism(c: Cards, th: Thresholds) -> list[Finding]:
    """Core tasks whose Block Dim uses a small part of the card's cores, taking a real share
    of compute: one finding per card. Needs the core counts (parsers/device_info.py); AI_CORE
    and MIX_AIC blocks count cube cores, AI_VECTOR_CORE and MIX_AIV vector cores (cube cores
    when the chip has no separate ones), as msprof-analyze's BlockDimChecker does. Only the
    cards whose core counts the capture tells are judged, each on its own counts."""
    if "block_num" not in c.tasks.columns:
        return []
    out = []
    for card in c.cards:
        dev = c.devices.get(card)
        if dev is not None and dev.ai_core_num:
            out += _low_parallelism(c, th, card, dev)
    return out


def _low_parallelism(c: Cards, th: Thresholds, card: str, dev: DeviceInfo) -> list[Finding]:
    aic, aiv = dev.ai_core_num, dev.aiv_num or dev.ai_core_num
    cores = pl.when(pl.col("task_type").is_in(MATRIX_CORES)).then(pl.lit(aic)).otherwise(pl.lit(aiv))
    low = c.tasks_of(card).filter(
        pl.col("task_type").is_in(CORE_TASKS).fill_null(False)
        & (pl.col("block_num") > 0).fill_null(False)
        & (pl.col("block_num") * 100.0 < cores * th.low_block_pct)
    )
    total = float(low["duration_us"].sum() or 0.0)
    pct = share(total, c.compute_us(card))
    if low.height == 0 or pct < th.low_parallel_pct:
        return []
    types = [g["op_type"] for g in per_group(low, "duration_us")]
    lo, hi = low.select(pl.col("block_num").min().alias("lo"), pl.col("block_num").max().alias("hi")).row(0)
    dims = f"Block Dim {lo}" if lo == hi else f"Block Dim {lo}-{hi}"
    bounds = c.bounds(card, th)
    top = types[0]
    bound = bounds.get(top, UNKNOWN_BOUND)
    lead = f"; {top} is {BOUND_WORDS[bound].split(' (')[0]}" if bound not in (UNKNOWN_BOUND, MIXED) else ""
    return [
        Finding(
            rule=LOW_PARALLELISM,
            severity="warning",
            title=(
                f"{low.height:,} task(s) use few of the card's cores ({dims} on {dev.describe()}): "
                f"{pct:.1f}% of compute{lead}"
            ),
            card=card,
            op_types=tuple(types[:10]),
            op_names=tuple(
                low.sort("duration_us", descending=True)["op_name"].unique(maintain_order=True).head(5).to_list()
            ),
            count=low.height,
            time_us=total,
            share_pct=pct,
            advice=advice(LOW_PARALLELISM, c.framework, c.kind),
            evidence=task_rows(low, "duration_us", th.evidence_rows),
            threshold=(
                f"Block Dim < {th.low_block_pct:g}% of the cores of its kind on >= {th.low_parallel_pct:g}% "
                f"of compute; {dev.describe()}"
            ),
        )
    ]
