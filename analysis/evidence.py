"""A finding's evidence rows: the worst tasks of an operator-level finding, or the worst rows of
the training view a training-level finding names (`Finding.view`), as the report's JSON and
the explorer show them."""

from __future__ import annotations

import math
from typing import Any, TypedDict, cast

import polars as pl

EVIDENCE_FIELDS = (
    "op_name",
    "op_type",
    "task_type",
    "start_us",
    "duration_us",
    "wait_us",
    "input_shapes",
    "input_dtypes",
)
"""The task fields a finding's evidence rows carry, so the explorer can jump to them."""


class EvidenceRow(TypedDict, total=False):
    """Every column an evidence row can hold; a row holds those of its source, in its source's
    order. Values are the frames' own: null where the frame has none (a float NaN or infinity
    of a view is null too)."""

    # A task (the operator rules, the tasks of a fused sequence: analysis/fusion.py): the
    # columns of EVIDENCE_FIELDS the tasks carry, its wait's cause and its row in the tasks.
    op_name: str | None
    op_type: str | None
    task_type: str | None
    start_us: float | None
    duration_us: float | None
    wait_us: float | None
    input_shapes: str | None
    input_dtypes: str | None
    wait_cause: str | None
    row: int | None  # None for a host row (a code frame, an optimizer step)
    # A fused sequence (analysis/fusion.py), starting at the task of the row.
    sequence: str
    sequence_us: float
    # The user's code behind the host time (analysis/stacks.py, analysis/fusion.py).
    frame: str | None
    calls: int
    device_us: float | None
    # A training view's row (parsers/training.py SCHEMAS; a cluster's rank steps and links,
    # parsers/cluster.py): its columns of the views below. `card` is the rank in a cluster.
    card: str | None
    source: str | None
    # steps
    step: int | None
    step_us: float | None
    compute_us: float | None
    communication_us: float | None
    comm_not_overlapped_us: float | None
    overlapped_us: float | None
    free_us: float | None
    bubble_us: float | None
    stage_us: float | None
    # communication (op_type, op_name and wait_us as a task's)
    count: int | None
    total_us: float | None
    transit_us: float | None
    sync_us: float | None
    size_mb: float | None
    bandwidth_gbps: float | None
    sdma_mb: float | None
    rdma_mb: float | None
    # links (size_mb and bandwidth_gbps as communication's)
    group: str | None
    src: int | None
    dst: int | None
    transport: str | None
    time_us: float | None
    # host_api (count and total_us as communication's)
    api: str | None
    level: str | None
    avg_us: float | None
    max_us: float | None
    # memory
    peak_allocated_mb: float | None
    peak_reserved_mb: float | None
    capacity_mb: float | None
    app_reserved_mb: float | None
    component: str | None


TASK_EVIDENCE = (*EVIDENCE_FIELDS, "wait_cause", "row")
"""The columns of a task's evidence row, those the tasks carry."""


def task_rows(tasks: pl.DataFrame, by: str, n: int) -> tuple[EvidenceRow, ...]:
    """The n tasks with the most `by`, ties by row, as evidence rows."""
    cols = [c for c in TASK_EVIDENCE if c in tasks.columns]
    top = tasks.select(cols).top_k(n, by=by).sort([by, "row"], descending=[True, False])
    return tuple(_row(r) for r in top.iter_rows(named=True))


def view_rows(view: pl.DataFrame, by: str, n: int, descending: bool = True) -> tuple[EvidenceRow, ...]:
    """The n worst rows of a view (every column), worst first, ties in the view's order."""
    if view.height == 0 or n <= 0:
        return ()
    ranked = view.with_row_index("_i").sort([by, "_i"], descending=[descending, False], nulls_last=True).head(n)
    return tuple(_row({k: _finite(v) for k, v in r.items()}) for r in ranked.drop("_i").iter_rows(named=True))


def _finite(value: Any) -> Any:
    """JSON-safe cell: NaN and infinities are null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _row(cells: dict[str, Any]) -> EvidenceRow:
    """A frame's row as an evidence row: its columns are among EvidenceRow's (the frames'
    schemas above)."""
    return cast(EvidenceRow, cells)
