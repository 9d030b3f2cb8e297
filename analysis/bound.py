"""What bounds each op type on the AI cores, from the PMU ratio columns of its tasks.

The rule (README, "Bound type"):

- Each PMU `*_ratio` column is the share of the task's core cycles one pipe was busy (msprof
  PipeUtilization). They are grouped into five pipes, under every name the exports use
  (Era B / torch_npu 2024+ `aic_*` / `aiv_*`, Era A and older torch_npu without a prefix):

  cube        aic_mac_ratio, mac_ratio                        matrix unit
  vector      aiv_vec_ratio, vec_ratio                        vector unit
  memory-in   aic_mte2_ratio, aiv_mte2_ratio, mte2_ratio      MTE2: global memory -> core
  memory-out  aiv_mte3_ratio, mte3_ratio, aic_fixpipe_ratio   MTE3 / FixPipe: core -> memory
  scalar      aic_scalar_ratio, aiv_scalar_ratio, scalar_ratio

  A task's pipe value is the largest of its columns present (the cube and vector cores of a
  MIX task run side by side). MTE1 (L1 -> L0A/L0B, inside the cube core, feeding the matrix
  unit) is not a bound of its own.
- Per op type, each pipe is the mean of its tasks' values weighted by Task Duration (tasks
  with no value for that pipe do not count); the busiest pipe is the bound.
- `mixed` when no pipe reaches `Thresholds.bound_min_pct` % of the cycles (msprof-analyze's
  OperatorBoundChecker calls such an op "no bound": none of its vec / mac / scalar / mte
  ratios above the operator_bound_ratio of its config); `unknown` when the capture has no
  ratio column or the type has no value (AI_CPU, communication, other metric sets).

This agrees with msprof's own `memory_bound` column (older PipeUtilization exports):
mte2_ratio / max(mac_ratio, vec_ratio) > 1 means "memory bottleneck", the case where
memory-in beats cube and vector here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from npuscope.parsers.columns import COMMUNICATION_TASK_TYPES

PIPES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cube", ("aic_mac_ratio", "mac_ratio")),
    ("vector", ("aiv_vec_ratio", "vec_ratio")),
    ("memory-in", ("aic_mte2_ratio", "aiv_mte2_ratio", "mte2_ratio")),
    ("memory-out", ("aiv_mte3_ratio", "mte3_ratio", "aic_fixpipe_ratio")),
    ("scalar", ("aic_scalar_ratio", "aiv_scalar_ratio", "scalar_ratio")),
)
"""Pipe -> the ratio columns that measure it, in every era's spelling; ties go to the first."""
PIPE_NAMES = tuple(p for p, _ in PIPES)
MIXED = "mixed"
UNKNOWN_BOUND = "unknown"
BOUND_WORDS = {
    "cube": "cube-bound (matrix unit busiest)",
    "vector": "vector-bound (vector unit busiest)",
    "memory-in": "memory-bound (MTE2: reading global memory busiest)",
    "memory-out": "memory-bound (MTE3 / FixPipe: writing out busiest)",
    "scalar": "scalar-bound (scalar unit busiest: control flow, address arithmetic)",
    MIXED: "no pipe busy most of the time (waiting: latency, synchronisation, too little work per core)",
    UNKNOWN_BOUND: "unknown (no PMU ratio columns)",
}
"""What each bound means, in words for reports."""
RATIO_COLUMNS = tuple(c for _, cols in PIPES for c in cols)
_NOT_CORE = (*COMMUNICATION_TASK_TYPES, "AI_CPU", "CPU")


def ratio_columns(columns: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The ratio columns among `columns` (a tasks frame's)."""
    return tuple(c for c in RATIO_COLUMNS if c in columns)


def _pipe_exprs(columns: list[str]) -> list[pl.Expr]:
    out = []
    for pipe, cols in PIPES:
        present = [pl.col(c).cast(pl.Float64, strict=False) for c in cols if c in columns]
        if present:
            out.append(pl.max_horizontal(present).alias(pipe))
    return out


def pipe_ratios(tasks: pl.DataFrame, by: tuple[str, ...] = ("card", "op_type")) -> pl.DataFrame:
    """Per `by` group: each pipe's duration-weighted mean ratio (0..1, null without values)."""
    exprs = _pipe_exprs(tasks.columns)
    keys = [k for k in by if k in tasks.columns]
    if not exprs or tasks.height == 0:
        return pl.DataFrame(schema={**{k: tasks.schema[k] for k in keys}, **dict.fromkeys(PIPE_NAMES, pl.Float64)})
    core = tasks.filter(~pl.col("task_type").is_in(_NOT_CORE).fill_null(False))
    per_task = core.select(*keys, pl.col("duration_us").fill_null(0.0).clip(0.0).alias("_w"), *exprs)
    present = [p for p in PIPE_NAMES if p in per_task.columns]
    aggs = []
    for p in present:
        has = pl.col(p).is_not_null()
        weight = pl.col("_w").filter(has).sum()
        weighted = (pl.col(p) * pl.col("_w")).filter(has).sum()
        # Zero-duration tasks only (a damaged file): the plain mean rather than 0 / 0.
        aggs.append(pl.when(weight > 0).then(weighted / weight).otherwise(pl.col(p).mean()).alias(p))
    grouped = per_task.group_by(keys, maintain_order=True).agg(aggs)
    return grouped.with_columns(pl.lit(None, dtype=pl.Float64).alias(p) for p in PIPE_NAMES if p not in present)


def bound_of(ratios: Mapping[str, Any], min_pct: float) -> str:
    """The bound of one group's pipe ratios: the busiest pipe, `mixed` or `unknown`."""
    values = [(p, ratios.get(p)) for p in PIPE_NAMES]
    known = [(p, float(v)) for p, v in values if v is not None]
    if not known:
        return UNKNOWN_BOUND
    pipe, best = max(known, key=lambda pv: pv[1])  # first of equals: PIPES order
    return pipe if best * 100.0 >= min_pct else MIXED


def op_type_bounds(tasks: pl.DataFrame, min_pct: float, by: tuple[str, ...] = ("card", "op_type")) -> pl.DataFrame:
    """`by` + the five pipe ratios + `bound`, one row per group with core tasks."""
    ratios = pipe_ratios(tasks, by)
    bounds = [bound_of(r, min_pct) for r in ratios.select(PIPE_NAMES).iter_rows(named=True)]
    return ratios.with_columns(pl.Series("bound", bounds, dtype=pl.String))


def with_bound(stat: pl.DataFrame, tasks: pl.DataFrame, min_pct: float) -> pl.DataFrame:
    """An op statistic frame with a `bound` column (its op type's, on its card)."""
    if "bound" in stat.columns:
        stat = stat.drop("bound")
    keys = [k for k in ("card", "op_type") if k in stat.columns and k in tasks.columns]
    if not keys:
        return stat.with_columns(pl.lit(UNKNOWN_BOUND).alias("bound"))
    bounds = op_type_bounds(tasks, min_pct, tuple(keys)).select(*keys, "bound")
    joined = stat.join(bounds, on=keys, how="left", nulls_equal=True, maintain_order="left")
    return joined.with_columns(pl.col("bound").fill_null(UNKNOWN_BOUND))
