"""The operator rules over op types: what dominates compute, long tasks, duration outliers,
AI_CPU tasks, low parallelism and the aclop share. Each turns one card's frames into findings
with a few polars expressions (no Python loop over rows)."""

from __future__ import annotations

import re
from collections.abc import Callable

import polars as pl

from npuscope.parsers.columns import UNKNOWN
from npuscope.parsers.frames import is_communication

from .advice import CUSTOM_KERNEL, DOMINANT_ACLNN, DOMINANT_INFO, DOMINANT_WARNING, advice
from .bound import BOUND_WORDS, MIXED, UNKNOWN_BOUND
from .card_data import SMALL_SAMPLE_TASKS, CardData, names_of, per_type, share
from .evidence import task_rows
from .findings import Finding
from .rule_names import ACLOP_SHARE, AI_CPU, DOMINANT_OP_TYPE, DURATION_OUTLIER, LONG_TASK, LOW_PARALLELISM
from .task_kinds import CORE_TASKS, HOST_MATRIX_TYPES, MATRIX_CORES, MATRIX_TYPES, aclop_tasks, operator_tasks
from .thresholds import Thresholds


def dominant_op_type(d: CardData, th: Thresholds) -> list[Finding]:
    out = []
    # An unknown type (torch_npu Level0) is every op at once: its share says nothing.
    big = d.stat_rows((pl.col("ratio_pct") >= th.dominant_ratio_pct) & (pl.col("op_type") != UNKNOWN))
    for row in big.iter_rows(named=True):
        if d.kind == "NPU":
            matrix = bool(re.match(MATRIX_TYPES, row["op_type"] or "")) and row["core_type"] in MATRIX_CORES
        else:  # framework op names (Paddle: matmul, conv2d, Global_MatmulGradNode): no core types
            matrix = bool(re.search(HOST_MATRIX_TYPES, row["op_type"] or ""))
        custom = row["op_type"] in d.custom_types
        of_type = d.rows(pl.col("op_type") == row["op_type"])
        title = f"{row['op_type']} ({row['core_type']}) takes {row['ratio_pct']:.1f}% of compute"
        if custom:  # the application's own kernel: what bounds it is the lead, not recompilation
            bound = d.bounds(th).get(row["op_type"], UNKNOWN_BOUND)
            title += f"; custom kernel, {BOUND_WORDS[bound]}" if bound != UNKNOWN_BOUND else "; custom kernel"
        topic = CUSTOM_KERNEL if custom else DOMINANT_INFO if matrix else DOMINANT_WARNING
        if topic == DOMINANT_WARNING and d.kind == "NPU" and of_type.filter(aclop_tasks()).height == 0:
            topic = DOMINANT_ACLNN  # online compilation needs aclop tasks of the type: none here
        if d.compute.height < SMALL_SAMPLE_TASKS:
            title += f" ({d.compute.height} task(s): a small sample)"
        out.append(
            Finding(
                rule=DOMINANT_OP_TYPE,
                severity="info" if matrix and not custom else "warning",
                title=title,
                card=d.card,
                op_types=(row["op_type"],),
                op_names=names_of(of_type, row["op_type"]),
                count=int(row["count"]),
                time_us=float(row["total_us"]),
                share_pct=float(row["ratio_pct"]),
                advice=advice(topic, d.framework, d.kind),
                evidence=task_rows(of_type, "duration_us", th.evidence_rows),
                threshold=f"Ratio(%) >= {th.dominant_ratio_pct:g}",
            )
        )
    return out


def _duration_findings(
    d: CardData,
    th: Thresholds,
    rows_all: pl.DataFrame,
    rule: str,
    title: Callable[[str, int, pl.DataFrame], str],
    threshold: str,
) -> list[Finding]:
    """One finding of `rule` per op type of `rows_all`, with the time at stake in task durations."""
    out = []
    for op_type, n, total in per_type(rows_all, "duration_us"):
        rows = rows_all.filter(pl.col("op_type") == op_type)
        topic = CUSTOM_KERNEL if rule == LONG_TASK and op_type in d.custom_types else rule
        out.append(
            Finding(
                rule=rule,
                severity="warning",
                title=title(op_type, n, rows),
                card=d.card,
                op_types=(op_type,),
                op_names=names_of(rows, op_type),
                count=n,
                time_us=total,
                share_pct=share(total, d.compute_us),
                advice=advice(topic, d.framework, d.kind),
                evidence=task_rows(rows, "duration_us", th.evidence_rows),
                threshold=threshold,
            )
        )
    return out


def long_task(d: CardData, th: Thresholds) -> list[Finding]:
    return _duration_findings(
        d,
        th,
        d.rows(~is_communication() & (pl.col("duration_us") > th.long_task_us)),
        LONG_TASK,
        lambda op_type, n, rows: f"{n:,} {_kind(op_type)} longer than {th.long_task_us:g} us",
        f"Task Duration > {th.long_task_us:g} us",
    )


def _kind(op_type: str) -> str:
    """`MatMulV3 task(s)`, or `task(s) of unknown type` where the capture has no types."""
    return "task(s) of unknown type" if op_type == UNKNOWN else f"{op_type} task(s)"


def duration_outlier(d: CardData, th: Thresholds) -> list[Finding]:
    flagged = d.stat_rows(
        (pl.col("op_type") != UNKNOWN)
        & (pl.col("count") >= th.outlier_min_calls)
        & (pl.col("max_us") >= th.outlier_max_over_avg * pl.col("avg_us"))
        & (pl.col("avg_us") > 0)
    )
    out = []
    for row in flagged.iter_rows(named=True):
        rows = d.tasks.filter(
            (pl.col("op_type") == row["op_type"])
            & (pl.col("task_type") == row["core_type"])
            & (pl.col("duration_us") >= th.outlier_max_over_avg * row["avg_us"])
        )
        excess = float((rows["duration_us"] - row["avg_us"]).sum() or 0.0)
        out.append(
            Finding(
                rule=DURATION_OUTLIER,
                severity="warning",
                title=(
                    f"{row['op_type']}: max {row['max_us']:,.1f} us is {row['max_us'] / row['avg_us']:.0f}x its average"
                ),
                card=d.card,
                op_types=(row["op_type"],),
                op_names=names_of(rows, row["op_type"]),
                count=max(rows.height, 1),
                time_us=excess,
                share_pct=share(excess, d.compute_us),
                advice=advice(DURATION_OUTLIER, d.framework, d.kind),
                evidence=task_rows(rows, "duration_us", th.evidence_rows),
                threshold=(f"Count >= {th.outlier_min_calls} and Max >= {th.outlier_max_over_avg:g} x Avg"),
            )
        )
    return out


def ai_cpu(d: CardData, th: Thresholds) -> list[Finding]:
    def title(op_type: str, n: int, rows: pl.DataFrame) -> str:
        dtypes = rows["input_dtypes"].drop_nulls().unique().sort().head(3).to_list()
        inputs = f" (inputs {', '.join(dtypes)})" if dtypes else ""
        return f"{op_type} runs on AI_CPU: {n} task(s) over {th.ai_cpu_us:g} us{inputs}"

    slow = d.rows((pl.col("task_type") == "AI_CPU") & (pl.col("duration_us") > th.ai_cpu_us))
    return _duration_findings(d, th, slow, AI_CPU, title, f"AI_CPU Task Duration > {th.ai_cpu_us:g} us")


def aclop_share(d: CardData, th: Thresholds) -> list[Finding]:
    # An application's own kernels are neither aclop nor aclnn: left out of both counts.
    compute = d.rows(operator_tasks())
    if compute.height == 0:  # host-only traces (Paddle on CPU), custom kernels only: no aclop / aclnn
        return []
    aclop = d.rows(aclop_tasks())  # aclop tasks are operator tasks
    if aclop.height == 0:  # every operator is aclnn: nothing compiles online, nothing to migrate
        return []
    aclop_t = float(aclop["duration_us"].sum() or 0.0)
    aclnn_n = compute.height - aclop.height
    types = [t for t, _, _ in per_type(aclop, "duration_us")]
    return [
        Finding(
            rule=ACLOP_SHARE,
            severity="info",
            title=(
                f"aclop: {aclop.height:,} call(s), {share(aclop_t, d.compute_us):.1f}% of compute; "
                f"aclnn: {aclnn_n:,} call(s)"
            ),
            card=d.card,
            op_types=tuple(types[:10]),
            op_names=(),
            count=aclop.height,
            time_us=aclop_t,
            share_pct=share(aclop_t, d.compute_us),
            advice=advice(ACLOP_SHARE, d.framework, d.kind),
            evidence=task_rows(aclop, "duration_us", th.evidence_rows),
            threshold="informational",
        )
    ]


def low_parallelism(d: CardData, th: Thresholds) -> list[Finding]:
    """Core tasks whose Block Dim uses a small part of the card's cores, taking a real share
    of compute: one finding per card. Needs the core counts (parsers/device_info.py); AI_CORE
    and MIX_AIC blocks count cube cores, AI_VECTOR_CORE and MIX_AIV vector cores (cube cores
    when the chip has no separate ones), as msprof-analyze's BlockDimChecker does."""
    dev = d.device
    if dev is None or not dev.ai_core_num or "block_num" not in d.tasks.columns:
        return []
    aic, aiv = dev.ai_core_num, dev.aiv_num or dev.ai_core_num
    cores = pl.when(pl.col("task_type").is_in(MATRIX_CORES)).then(pl.lit(aic)).otherwise(pl.lit(aiv))
    low = d.rows(
        pl.col("task_type").is_in(CORE_TASKS).fill_null(False)
        & (pl.col("block_num") > 0).fill_null(False)
        & (pl.col("block_num") * 100.0 < cores * th.low_block_pct)
    )
    total = float(low["duration_us"].sum() or 0.0)
    pct = share(total, d.compute_us)
    if low.height == 0 or pct < th.low_parallel_pct:
        return []
    types = [t for t, _, _ in per_type(low, "duration_us")]
    lo, hi = low.select(pl.col("block_num").min().alias("lo"), pl.col("block_num").max().alias("hi")).row(0)
    dims = f"Block Dim {lo}" if lo == hi else f"Block Dim {lo}-{hi}"
    bounds = d.bounds(th)
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
            card=d.card,
            op_types=tuple(types[:10]),
            op_names=tuple(
                low.sort("duration_us", descending=True)["op_name"].unique(maintain_order=True).head(5).to_list()
            ),
            count=low.height,
            time_us=total,
            share_pct=pct,
            advice=advice(LOW_PARALLELISM, d.framework, d.kind),
            evidence=task_rows(low, "duration_us", th.evidence_rows),
            threshold=(
                f"Block Dim < {th.low_block_pct:g}% of the cores of its kind on >= {th.low_parallel_pct:g}% "
                f"of compute; {dev.describe()}"
            ),
        )
    ]
