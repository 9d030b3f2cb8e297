"""What the explorer's training-level tabs show for one card: display frames, bars, curve levels.

The tabs (Steps, Communication, Host API, Memory) render these; the figures come from the
views of `read_training_views`, cut to one card. Rows a file records for the whole capture
(card `host`) stand for a card that has none of its own, as in the report. Every frame
carries `row`, its natural order (steps in step order, the rest as the view lists them), so a
table can go back to it after sorting.

Filtering follows the `/` language (`npuscope.analysis.query`): plain text and `name:` match
the table's text columns, `type:` its op type, `dur` and `wait` compare its time and wait
columns; terms a table has no column for are ignored there (and said so).

Textual-free: only polars.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import polars as pl

from npuscope.parsers import Profile
from npuscope.parsers.by_card import card_or_host_rows
from npuscope.parsers.steps import WINDOW_SCHEMA, step_windows
from npuscope.parsers.training import TrainingViews

from .query import Query, _arg_sort, _contains, _equals
from .training_report import per_op_type

WHOLE_CAPTURE = "all"  # the label of a step row that covers the whole capture

# Where each view comes from, as inspect would name them (for "not in this capture").
VIEW_SOURCES: dict[str, str] = {
    "steps": "step_trace_time.csv, analysis.db StepTraceTime, the timeline's Overlap Analysis or step boundaries",
    "communication": "communication.json, analysis.db CommAnalyzerTime, COMMUNICATION_OP, "
    "communication_statistic.csv or communication tasks",
    "links": "communication_matrix.json, analysis.db CommAnalyzerMatrix or COMMUNICATION_TASK_INFO",
    "host_api": "api_statistic.csv, the db's CANN_API or the timeline's Level@api events",
    "memory": "memory_record.csv, npu_module_mem.csv, the db's MEMORY_RECORD or NPU_MODULE_MEM",
    "memory_top_ops": "operator_memory.csv or the db's OP_MEMORY",
}


def of_card(frame: pl.DataFrame, card: str) -> pl.DataFrame:
    """The rows of `card`, else the whole capture's (`host`) rows."""
    return card_or_host_rows(frame, card)


def _numbered(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"))


def _pct(part: pl.Expr, whole: pl.Expr) -> pl.Expr:
    return pl.when(whole > 0).then(part / whole * 100.0)


# --------------------------------------------------------------------------- steps


def steps_table(views: TrainingViews, card: str) -> pl.DataFrame:
    """The card's steps in step order (a whole-capture row first), with shares of the step."""
    steps = of_card(views.steps, card).sort("step", nulls_last=False, maintain_order=True)
    step_us = pl.col("step_us")
    return _numbered(
        steps.select(
            pl.col("step").cast(pl.String).fill_null(WHOLE_CAPTURE).alias("label"),
            "step",
            "step_us",
            "compute_us",
            "communication_us",
            "comm_not_overlapped_us",
            "overlapped_us",
            "free_us",
            _pct(pl.col("comm_not_overlapped_us"), step_us).alias("not_overlapped_pct"),
            _pct(pl.col("free_us"), step_us).alias("free_pct"),
            "source",
        )
    )


@dataclass(frozen=True)
class StepBar:
    """One step's stacked bar: compute, communication not overlapped, free (us)."""

    label: str
    compute_us: float
    comm_us: float
    free_us: float

    @property
    def total_us(self) -> float:
        return self.compute_us + self.comm_us + self.free_us


def step_bars(steps: pl.DataFrame) -> tuple[StepBar, ...]:
    """The bars of a `steps_table` frame, in its row order."""

    def us(v: Any) -> float:
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else 0.0

    return tuple(
        StepBar(r["label"], us(r["compute_us"]), us(r["comm_not_overlapped_us"]), us(r["free_us"]))
        for r in steps.iter_rows(named=True)
    )


def bar_cells(bar: StepBar, longest_us: float, cells: int) -> tuple[int, int, int]:
    """Cells of compute, communication not overlapped and free for a bar `cells` wide at
    `longest_us`; the parts end where their running sums do, so they never add up to more."""
    if cells <= 0 or longest_us <= 0:
        return 0, 0, 0
    ends = []
    running = 0.0
    for part in (bar.compute_us, bar.comm_us, bar.free_us):
        running += part
        ends.append(min(cells, round(running / longest_us * cells)))
    return ends[0], ends[1] - ends[0], ends[2] - ends[1]


# --------------------------------------------------------------------------- communication


def _communication_rows(frame: pl.DataFrame, op_name: str | pl.Expr) -> pl.DataFrame:
    """The Communication tab's columns: the frame's figures, the average and the share of time."""
    total = pl.col("total_us")
    return _numbered(
        frame.select(
            "op_type",
            op_name,
            "count",
            "total_us",
            pl.when(pl.col("count") > 0).then(total / pl.col("count")).alias("avg_us"),
            "transit_us",
            "wait_us",
            "sync_us",
            "size_mb",
            "bandwidth_gbps",
            _pct(total, total.sum()).alias("share_pct"),
            "source",
        )
    )


def communication_table(views: TrainingViews, card: str) -> pl.DataFrame:
    """The card's collectives as the view lists them, with the average and share of time."""
    return _communication_rows(of_card(views.communication, card), "op_name")


def communication_by_type(views: TrainingViews, card: str) -> pl.DataFrame:
    """The card's collectives per op type, largest total first: counts, times and sizes
    summed, the bandwidth the data moved over the time its transfers took (as the report)."""
    per = per_op_type(
        of_card(views.communication, card),
        pl.col("op_name").n_unique().alias("_ops"),
        pl.col("source").unique().sort().str.join(", "),
    )
    return _communication_rows(per, pl.format("{} op(s)", pl.col("_ops")).alias("op_name"))


def links_table(views: TrainingViews, card: str) -> pl.DataFrame:
    """The links the card's files recorded: group, src, dst, transport, size, bandwidth."""
    links = of_card(views.links, card)
    return _numbered(links.select("group", "src", "dst", "transport", "size_mb", "time_us", "bandwidth_gbps", "source"))


# --------------------------------------------------------------------------- host API


def span_us(views: TrainingViews, card: str) -> float | None:
    """The card's span for shares: the sum of its step times (None without steps)."""
    steps = of_card(views.steps, card)
    total = steps["step_us"].sum() if steps.height else None
    return float(total) if isinstance(total, (int, float)) and total > 0 else None


def host_api_table(views: TrainingViews, card: str) -> pl.DataFrame:
    """Per API: count, total, average, max and share of the card's span (sum of step time)."""
    api = of_card(views.host_api, card)
    span = span_us(views, card)
    share = (pl.col("total_us") / span * 100.0) if span else pl.lit(None, dtype=pl.Float64)
    return _numbered(
        api.select("api", "level", "count", "total_us", "avg_us", "max_us", share.alias("share_pct"), "source")
    )


# --------------------------------------------------------------------------- memory


@dataclass(frozen=True)
class MemoryPeaks:
    allocated_mb: float | None
    reserved_mb: float | None
    app_reserved_mb: float | None
    capacity_mb: float | None
    component: str | None
    source: str

    def line(self) -> str:
        def mb(v: float | None) -> str:
            return "-" if v is None else f"{v:,.1f} MB"

        parts = [f"peak allocated {mb(self.allocated_mb)}", f"reserved {mb(self.reserved_mb)}"]
        if self.app_reserved_mb is not None:
            parts.append(f"APP {mb(self.app_reserved_mb)}")
        if self.capacity_mb:
            parts.append(f"capacity {mb(self.capacity_mb)}")
            if self.reserved_mb is not None:
                parts[-1] += f" ({self.reserved_mb / self.capacity_mb * 100:.0f}% reserved)"
        return " · ".join(parts)


def memory_peaks(views: TrainingViews, card: str) -> MemoryPeaks | None:
    rows = of_card(views.memory, card)
    if rows.height == 0:
        return None
    r = rows.row(0, named=True)
    return MemoryPeaks(
        r["peak_allocated_mb"],
        r["peak_reserved_mb"],
        r["app_reserved_mb"],
        r["capacity_mb"],
        r["component"],
        r["source"],
    )


def memory_top_ops_table(views: TrainingViews, card: str) -> pl.DataFrame:
    """The card's operators by their largest allocation, largest first."""
    ops = of_card(views.memory_top_ops, card).sort(
        ["size_mb", "op_name"], descending=[True, False], nulls_last=True, maintain_order=True
    )
    return _numbered(ops.select("op_name", "size_mb", "count", "total_mb", "source"))


@dataclass(frozen=True)
class Curve:
    """Memory over the capture in columns: the highest value of each, 0..1 of `scale_mb`."""

    levels: tuple[float, ...]
    what: str  # "allocated", or "reserved" when no allocation is recorded
    low_mb: float
    high_mb: float
    scale_mb: float  # the capacity when known, else the highest reservation


def memory_curve(views: TrainingViews, card: str, cells: int) -> Curve | None:
    """The card's allocated memory (reserved when allocation is not recorded) in `cells`
    columns, against the capacity when known, else the highest reservation, so that the
    headroom shows; None without a curve."""
    curve = of_card(views.memory_curve, card).drop_nulls("ts_ns")
    if curve.height == 0 or cells <= 0:
        return None
    allocated = curve["allocated_mb"].null_count() < curve.height
    what = "allocated" if allocated else "reserved"
    curve = curve.drop_nulls(f"{what}_mb")
    if curve.height == 0:
        return None
    lo, hi = curve["ts_ns"].min(), curve["ts_ns"].max()
    assert isinstance(lo, int) and isinstance(hi, int)
    span = max(hi - lo, 1)
    binned = (
        curve.select(((pl.col("ts_ns") - lo) * cells // (span + 1)).alias("bin"), pl.col(f"{what}_mb").alias("v"))
        .group_by("bin")
        .agg(pl.col("v").max())
    )
    peaks = dict(zip(binned["bin"].to_list(), binned["v"].to_list()))
    values = curve[f"{what}_mb"]
    low, high = float(values.min() or 0.0), float(values.max() or 0.0)  # type: ignore[arg-type]
    peak = memory_peaks(views, card)
    reserved = curve["reserved_mb"].max()
    scale = (peak.capacity_mb if peak is not None else None) or max(
        float(reserved) if isinstance(reserved, (int, float)) else 0.0, high
    )
    if scale <= 0:
        return None
    levels = []
    last = 0.0
    for i in range(cells):
        v = peaks.get(i)
        if v is not None:
            last = min(1.0, max(0.0, v / scale))
        levels.append(last)  # a column without a record keeps the level of the one before
    return Curve(tuple(levels), what, low, high, scale)


# --------------------------------------------------------------------------- absent views


def missing_text(views: TrainingViews, view: str, card: str) -> str | None:
    """Why `view` shows nothing for `card` (None when it has rows): what inspect would say."""
    frame: pl.DataFrame = getattr(views, view)
    if of_card(frame, card).height:
        return None
    if frame.height:
        return f"card {card} has no {view.replace('_', ' ')} rows in this capture (other cards do)"
    found = ", ".join(views.found) if views.found else "none"
    text = f"not in this capture: no {VIEW_SOURCES.get(view, view)}. inspect finds views: {found}"
    notes = [n for n in views.notes if view.split("_")[0] in n.lower()]
    return text + "".join(f". note: {n}" for n in notes)


# --------------------------------------------------------------------------- step windows


def card_step_windows(profile: Profile) -> pl.DataFrame:
    """Step boundaries (card, step, start_ns, end_ns) of every card; none when start times are damaged."""
    if profile.time_problem is not None or profile.tasks.height == 0:
        return pl.DataFrame(schema=WINDOW_SCHEMA)
    steps_from = "STEP_TIME" if profile.source_kind == "db" else "step_trace"
    return step_windows(profile.tasks, profile.steps, profile.events, list(profile.cards), steps_from).frame


def step_marks(windows: pl.DataFrame, card: str) -> tuple[tuple[int | None, int, int], ...]:
    """(step, start_ns, end_ns) of the card's steps in time order."""
    mine = windows.filter(pl.col("card") == card).sort("start_ns")
    return tuple((r[0], int(r[1]), int(r[2])) for r in mine.select("step", "start_ns", "end_ns").iter_rows())


# --------------------------------------------------------------------------- filter and sort


@dataclass(frozen=True)
class TableFields:
    """What a table's filter terms read: text columns (the first is the name), op type, times."""

    text: tuple[str, ...]
    type_column: str | None = None
    duration: str | None = None
    wait: str | None = None


def ignored_terms(query: Query, fields: TableFields) -> tuple[str, ...]:
    """The terms of `query` this table has no column for."""
    out = []
    for t in query._compiled:
        if t.kind in ("text", "name"):
            continue
        if t.kind == "type" and fields.type_column:
            continue
        if t.kind == "cmp" and isinstance(t.value, tuple):
            if (fields.duration if t.value[0] == "duration_us" else fields.wait) is not None:
                continue
        out.append(t.raw)
    return tuple(out)


def view_positions(frame: pl.DataFrame, query: Query, fields: TableFields, key: str, descending: bool) -> pl.Series:
    """Positions of the rows of `frame` matching `query`, in the order of `key`: a row
    matches when it matches every term of one of the query's `|` alternatives (the op
    tables' rule); terms a view has no column for match every row."""
    alternatives = []
    for group in query._groups:
        exprs = [e for e in (_view_term(frame, t, fields) for t in group) if e is not None]
        alternatives.append(pl.all_horizontal(exprs) if exprs else pl.lit(True))
    keep = pl.any_horizontal(alternatives) if alternatives else pl.lit(True)
    positions = frame.with_row_index("_p").filter(keep)["_p"]
    if key not in frame.columns or positions.len() < 2:
        return positions
    return positions.gather(_arg_sort(frame[key].gather(positions), descending))


def _view_term(frame: pl.DataFrame, t: Any, fields: TableFields) -> pl.Expr | None:
    """One filter term as an expression over a view's columns; None when the view cannot
    judge it (no such column)."""
    e: pl.Expr | None = None
    v = t.value
    if t.kind in ("text", "name") and isinstance(v, str):
        columns = fields.text if t.kind == "text" else fields.text[:1]
        for c in columns:
            m = _contains(c, v) if frame.schema[c] == pl.String else _contains_cast(c, v)
            e = m if e is None else e | m
    elif t.kind == "type" and fields.type_column and isinstance(v, str):
        e = _equals(fields.type_column, v)
    elif t.kind == "cmp" and isinstance(v, tuple):
        column = fields.duration if v[0] == "duration_us" else fields.wait
        if column is not None:
            col, number = pl.col(column), v[2]
            e = {">": col > number, ">=": col >= number, "<": col < number, "<=": col <= number}.get(
                v[1], col == number
            )
    if e is None:
        return None
    e = e.fill_null(False)
    return ~e if t.negate else e


def _contains_cast(column: str, needle: str) -> pl.Expr:
    return pl.col(column).cast(pl.String).str.contains_any([needle], ascii_case_insensitive=True)
