"""The steps view: per card and training step, where the step's time went.

One canonical frame (STEPS_SCHEMA), in microseconds, whatever the source:

  step_us                 the step's time: compute + communication not overlapped + free
  compute_us              time some compute task ran (the union of their intervals)
  communication_us        time some collective ran
  comm_not_overlapped_us  communication while no compute ran
  overlapped_us           communication hidden behind compute
  free_us                 neither ran (the device waited: host, data loading, dispatch)
  bubble_us, stage_us     pipeline-parallel figures of torch_npu (null elsewhere)

Sources, most detailed first: torch_npu's `step_trace_time.csv` (us) or `analysis.db`
StepTraceTime (us, checked against the tasks of the real 2025 capture: equal to the
microsecond), the timeline's `Overlap Analysis` process (threads Computing, Communication,
Communication(Not Overlapped), Free) cut at the step boundaries, and, when no file carries it,
derived from the tasks: compute is the union of the compute task intervals of the step,
communication the union of the collectives, not overlapped = communication minus compute,
free = step time minus the union of both. Steps are told by the tasks' Step Id (a step is
the span of its tasks, as torch_npu counts it), else by step_trace / STEP_TIME, else by the
timeline's `ProfilerStep#N` events, else the whole capture is one row (step null).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from .by_card import card_rows
from .columns import COMMUNICATION_TASK_TYPES, ColumnSpec
from .csv_table import RowPolicy, read_table
from .training_files import (
    by_cards,
    card_order,
    check_frame_numbers,
    collect,
    conform,
    conformed,
    damaged,
    number_clips,
    sort_cards,
    step_number,
)

STEPS_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "step": pl.Int64(),
    "step_us": pl.Float64(),
    "compute_us": pl.Float64(),
    "communication_us": pl.Float64(),
    "comm_not_overlapped_us": pl.Float64(),
    "overlapped_us": pl.Float64(),
    "free_us": pl.Float64(),
    "bubble_us": pl.Float64(),
    "stage_us": pl.Float64(),
    "source": pl.String(),
}

# torch_npu ASCEND_PROFILER_OUTPUT/step_trace_time.csv; every time in microseconds.
STEP_TRACE_TIME_COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("card", ("Device_id",), "str"),
    ColumnSpec("step", ("Step",), "str"),
    ColumnSpec("compute_us", ("Computing",), "float", required=True),
    ColumnSpec("comm_not_overlapped_us", ("Communication(Not Overlapped)",), "float", required=True),
    ColumnSpec("overlapped_us", ("Overlapped",), "float"),
    ColumnSpec("communication_us", ("Communication",), "float"),
    ColumnSpec("free_us", ("Free",), "float", required=True),
    ColumnSpec("stage_us", ("Stage",), "float"),
    ColumnSpec("bubble_us", ("Bubble",), "float"),
)

# analysis.db StepTraceTime: column -> (canonical name, kind); the step is text (`50`, `step50`).
STEP_TRACE_TIME_TABLE: dict[str, tuple[str, str]] = {
    "step": ("step", "text"),
    "computing": ("compute_us", "float"),
    "communication_not_overlapped": ("comm_not_overlapped_us", "float"),
    "overlapped": ("overlapped_us", "float"),
    "communication": ("communication_us", "float"),
    "free": ("free_us", "float"),
    "stage": ("stage_us", "float"),
    "bubble": ("bubble_us", "float"),
}

_TIMES = (
    "compute_us",
    "comm_not_overlapped_us",
    "overlapped_us",
    "communication_us",
    "free_us",
    "stage_us",
    "bubble_us",
)

OVERLAP_PROCESS = "Overlap Analysis"
# Overlap Analysis thread -> column.
OVERLAP_THREADS: dict[str, str] = {
    "Computing": "compute_us",
    "Communication": "communication_us",
    "Communication(Not Overlapped)": "comm_not_overlapped_us",
    "Free": "free_us",
}
# torch_npu `ProfilerStep#N`, Paddle `ProfileStep#N[3.735 ms]` (Paddle appends the duration).
STEP_EVENT = r"^Profiler?Step#(\d+)(?:\[[0-9.]+ (?:ns|us|ms|s)\])?$"

WINDOW_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "step": pl.Int64(),
    "step_id": pl.String(),  # the tasks' Step Id, when windows come from it
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
}


def empty_steps() -> pl.DataFrame:
    return pl.DataFrame(schema=STEPS_SCHEMA)


def _finish(
    df: pl.DataFrame | pl.LazyFrame, source: str, order: list[str] | None = None, columns: list[str] | None = None
) -> pl.DataFrame:
    """Fill what a source leaves out (the step time, one of the communication figures).
    `order` and `columns`: the cards of `df` in card order and its columns, for a lazy `df`."""
    have = set(df.columns if isinstance(df, pl.DataFrame) else columns or df.collect_schema().names())
    lazy = df.lazy()
    lazy = lazy.with_columns(
        pl.coalesce(pl.col("communication_us"), pl.col("comm_not_overlapped_us") + pl.col("overlapped_us")).alias(
            "communication_us"
        ),
    ).with_columns(
        pl.coalesce(
            pl.col("overlapped_us"),
            (pl.col("communication_us") - pl.col("comm_not_overlapped_us")).clip(lower_bound=0.0),
        ).alias("overlapped_us"),
        (pl.col("compute_us") + pl.col("comm_not_overlapped_us") + pl.col("free_us")).alias("step_us"),
        pl.lit(source).alias("source"),
    )
    have |= {"communication_us", "overlapped_us", "step_us", "source"}
    lazy = lazy.select(conformed(have, STEPS_SCHEMA))
    if order is None:
        return sort_cards(collect(lazy), "step")
    return collect(by_cards(lazy, order, "step"))


def _steps_of(labels: pl.Series, path: Path) -> pl.Series:
    values: list[int | None] = []
    for label in labels.to_list():
        if label is None or not str(label).strip():
            values.append(None)
            continue
        n = step_number(label)
        if n is None:
            raise damaged(path, f"step {label!r} is not a step number")
        values.append(n)
    return pl.Series("step", values, dtype=pl.Int64)


def read_step_trace_time(paths: tuple[Path, ...], card: str | None, rows: RowPolicy) -> pl.DataFrame:
    """torch_npu step_trace_time.csv: one row per step."""
    df, _ = read_table(paths, STEP_TRACE_TIME_COLUMNS, what="step_trace_time", extra_as_float=False, rows=rows)
    if "overlapped_us" not in df.columns and "communication_us" not in df.columns:
        raise damaged(paths[0], "neither Overlapped nor Communication is there")
    clips = number_clips(df, _TIMES, paths[0], "step_trace_time")
    steps = _steps_of(df["step"], paths[0]) if "step" in df.columns else pl.Series("step", [None] * df.height, pl.Int64)
    lazy = df.lazy().with_columns(clips).with_columns(steps) if clips else df.lazy().with_columns(steps)
    if card is not None or "card" not in df.columns:
        label = card or "0"
        lazy = lazy.with_columns(pl.lit(label, dtype=pl.String).alias("card"))
        order = [label] if df.height else []
    else:
        order = card_order(df["card"])
    return _finish(lazy, paths[0].name, order, [*df.columns, "step", "card"])


def read_step_trace_table(frame: pl.DataFrame, card: str, path: Path) -> pl.DataFrame:
    """analysis.db StepTraceTime rows (already typed by the db reader)."""
    df = check_frame_numbers(frame, _TIMES, path, "StepTraceTime")
    for required in ("compute_us", "comm_not_overlapped_us", "free_us"):
        if required not in df.columns or df[required].null_count():
            raise damaged(path, f"StepTraceTime has no usable {required.removesuffix('_us')} value")
    if "overlapped_us" not in df.columns and "communication_us" not in df.columns:
        raise damaged(path, "StepTraceTime has neither overlapped nor communication")
    df = df.with_columns(
        _steps_of(df["step"], path) if "step" in df.columns else pl.lit(None, dtype=pl.Int64).alias("step"),
        pl.lit(card, dtype=pl.String).alias("card"),
    )
    return _finish(df, "analysis.db StepTraceTime")


# --------------------------------------------------------------------------- step windows


@dataclass(frozen=True)
class Windows:
    """Step boundaries of the cards (WINDOW_SCHEMA) and what told them, per card."""

    frame: pl.DataFrame
    told_by: dict[str, str]  # card -> `Step Id`, `step_trace`, `STEP_TIME`, `ProfilerStep`, `capture`


def task_intervals(tasks: pl.DataFrame) -> pl.DataFrame:
    """card, step_id, s, e (ns), comm (a collective) of every task with a start time."""
    comm = pl.col("task_type").is_in(COMMUNICATION_TASK_TYPES).fill_null(False) | pl.col("op_name").str.starts_with(
        "hcom_"
    ).fill_null(False)
    return tasks.select(
        "card",
        "step_id",
        pl.col("start_ns").alias("s"),
        (
            pl.col("start_ns")
            + (pl.col("duration_us").fill_null(0.0).clip(lower_bound=0.0) * 1000).round(0).cast(pl.Int64)
        ).alias("e"),
        comm.alias("comm"),
    ).drop_nulls("s")


def step_windows(
    tasks: pl.DataFrame,
    steps: pl.DataFrame | None,
    events: pl.DataFrame | None,
    cards: list[str],
    steps_from: str,
) -> Windows:
    """The steps of each card, from the best boundary its data has (see the module docstring).

    `steps_from` names the profile's step table (`step_trace` or `STEP_TIME`).
    """
    iv = task_intervals(tasks)
    parts: list[pl.DataFrame] = []
    told: dict[str, str] = {}
    marks = _step_events(events)
    # Every card's facts in one pass: a pass per card is slow with thousands of cards.
    facts = {
        r["card"]: r
        for r in iv.group_by("card")
        .agg(pl.col("step_id").count().alias("ids"), pl.col("s").min().alias("first"), pl.col("e").max().alias("last"))
        .iter_rows(named=True)
    }
    numbered = [card for card in cards if card in facts and facts[card]["ids"]]
    if numbered:
        w = (
            iv.filter(pl.col("card").is_in(numbered))
            .drop_nulls("step_id")
            .group_by("card", "step_id")
            .agg(pl.col("s").min().alias("start_ns"), pl.col("e").max().alias("end_ns"))
        )
        w = w.with_columns(pl.Series("step", [step_number(x) for x in w["step_id"].to_list()], dtype=pl.Int64))
        parts.append(w)
        told.update(dict.fromkeys(numbered, "Step Id"))
    whole: list[tuple[str, int, int]] = []  # cards of one window: the whole capture
    for card in cards:
        got = facts.get(card)
        if got is None or got["ids"]:
            continue
        first = got["first"]
        assert isinstance(first, int)
        table = _table_windows(steps, card, first)
        if table is not None and table.height:
            parts.append(table)
            told[card] = steps_from
            continue
        marked = None if marks is None else _event_windows(marks, card_rows(iv, card), card)
        if marked is not None and marked.height:
            parts.append(marked)
            told[card] = "ProfilerStep"
            continue
        whole.append((card, first, got["last"]))
        told[card] = "capture"
    if whole:
        parts.append(
            pl.DataFrame(
                {
                    "card": [w[0] for w in whole],
                    "step": [None] * len(whole),
                    "start_ns": [w[1] for w in whole],
                    "end_ns": [w[2] for w in whole],
                },
                schema={"card": pl.String, "step": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64},
            )
        )
    frames = [conform(p, WINDOW_SCHEMA) for p in parts]
    frame = pl.concat(frames) if frames else pl.DataFrame(schema=WINDOW_SCHEMA)
    frame = frame.filter(pl.col("end_ns") >= pl.col("start_ns"))
    return Windows(sort_cards(frame, "start_ns"), told)


def _table_windows(steps: pl.DataFrame | None, card: str, first_start: int) -> pl.DataFrame | None:
    """Windows from step_trace / STEP_TIME rows of the card (or of every card: `host`)."""
    if steps is None or steps.height == 0:
        return None
    rows = steps.filter(pl.col("card") == card)
    if rows.height == 0:
        rows = steps.filter(pl.col("card") == "host")
    if rows.height == 0:
        return None
    rows = rows.drop_nulls("iteration_end_ns").sort("iteration_end_ns")
    prev = pl.col("iteration_end_ns").shift(1)
    return rows.select(
        pl.lit(card).alias("card"),
        pl.col("iteration_id").alias("step"),
        pl.coalesce(pl.col("fp_start_ns"), prev, pl.lit(first_start)).alias("start_ns"),
        pl.col("iteration_end_ns").alias("end_ns"),
    ).filter(pl.col("end_ns") > pl.col("start_ns"))


def _step_events(events: pl.DataFrame | None) -> pl.DataFrame | None:
    if events is None or events.height == 0:
        return None
    marks = (
        events.filter(pl.col("name").str.contains("Step#", literal=True).fill_null(False))
        .filter(
            (pl.col("ph") == "X")
            & pl.col("name").str.contains(STEP_EVENT).fill_null(False)
            & pl.col("ts_ns").is_not_null()
            & pl.col("dur_ns").is_not_null()
        )
        .select(
            "card",
            pl.col("name").str.extract(STEP_EVENT, 1).cast(pl.Int64, strict=False).alias("step"),
            pl.col("ts_ns").alias("m_start"),
            (pl.col("ts_ns") + pl.col("dur_ns")).alias("m_end"),
        )
    )
    return marks if marks.height else None


def _event_windows(marks: pl.DataFrame | None, mine: pl.DataFrame, card: str) -> pl.DataFrame | None:
    """ProfilerStep#N spans host time: a step is the span of the device tasks that start in it."""
    if marks is None:
        return None
    m = marks.filter(pl.col("card") == card)
    if m.height == 0:
        m = marks.filter(pl.col("card") == "host")
    if m.height == 0:
        return None
    hit = (
        mine.sort("s")
        .join_asof(m.sort("m_start"), left_on="s", right_on="m_start", strategy="backward", check_sortedness=False)
        .filter(pl.col("s") < pl.col("m_end"))
    )
    if hit.height == 0:
        return None
    return (
        hit.group_by("step", "m_start")
        .agg(pl.col("s").min().alias("start_ns"), pl.col("e").max().alias("end_ns"))
        .with_columns(pl.lit(card).alias("card"))
        .drop("m_start")
    )


# --------------------------------------------------------------------------- derived


def _union_lengths(got: pl.DataFrame, win: pl.DataFrame) -> pl.DataFrame:
    """Per window `_w`: the lengths (ns) of the unions of its compute intervals (`c`), of its
    communication intervals (`m`) and of both (`b`).

    Sorted by start, an interval adds `max(0, e - max(s, reach))` to the union of the
    intervals before it, `reach` being the greatest end among them. Each interval lies inside
    its window (`_assign` clips it), so moved to `_w * span + (s - start_ns)`, with `span`
    longer than every window, the windows' intervals lie apart and in window order: one sort
    and running maxima over every window at once give the three unions (the compute reach
    runs over the compute ends alone, the communication reach over theirs), with no
    per-window function. Windows too long to move so in 63 bits take the same running maxima
    window by window (`over`).
    """
    n = win.height
    span = int(win.select((pl.col("end_ns") - pl.col("start_ns")).max()).item() or 0) + 1
    s = pl.col("s") - pl.col("start_ns")
    e = pl.col("e") - pl.col("start_ns")
    moved = n * span < _MOVED_MAX
    if moved:
        s, e = pl.col("_w") * span + s, pl.col("_w") * span + e
    ordered = got.select("_w", "comm", s.alias("s"), e.alias("e")).sort(["s"] if moved else ["_w", "s"])

    def new(ends: pl.Expr) -> pl.Expr:
        # Every moved or window-relative end is >= 0: 0 stands for "no end yet".
        before = ends.cum_max().shift(1)
        reach = (before if moved else before.over("_w")).fill_null(0)
        return (pl.col("e") - pl.max_horizontal("s", reach)).clip(lower_bound=0)

    comm = pl.col("comm")
    zero = pl.lit(0, dtype=pl.Int64)
    added = ordered.select(
        "_w",
        pl.when(~comm).then(new(pl.when(~comm).then(pl.col("e")).otherwise(zero))).otherwise(zero).alias("c"),
        pl.when(comm).then(new(pl.when(comm).then(pl.col("e")).otherwise(zero))).otherwise(zero).alias("m"),
        new(pl.col("e")).alias("b"),
    )
    return added.group_by("_w").agg(pl.col("c", "m", "b").sum().cast(pl.Int64))


_MOVED_MAX = 1 << 62
"""`windows * span` below this: moved starts and ends fit in Int64 (with room for a sum)."""


def _assign(iv: pl.DataFrame | pl.LazyFrame, windows: pl.DataFrame, told: dict[str, str]) -> pl.LazyFrame:
    """Intervals with the window (`_w`) they belong to, clipped to it (a query: collect it).

    By Step Id where the windows come from it; otherwise by start time: an interval belongs
    to the window its start lies in and is cut at the window's end.
    """
    iv = iv.lazy()
    w = windows.lazy().with_row_index("_w").with_columns(pl.col("_w").cast(pl.Int64))
    by_id = [c for c, how in told.items() if how == "Step Id"]
    parts = []
    if by_id:
        ids = iv.filter(pl.col("card").is_in(by_id)).join(
            w.filter(pl.col("card").is_in(by_id)).select("card", "step_id", "_w", "start_ns", "end_ns"),
            on=["card", "step_id"],
            how="inner",
        )
        parts.append(ids)
    if not set(windows["card"].unique().to_list()) <= set(by_id):
        timed = _by_time(
            iv.filter(~pl.col("card").is_in(by_id)).collect(),
            w.filter(~pl.col("card").is_in(by_id)).select("card", "_w", "start_ns", "end_ns").collect(),
        )
        parts.append(timed.lazy().filter(pl.col("_w").is_not_null() & (pl.col("s") < pl.col("end_ns"))))
    if not parts:
        return iv.head(0).with_columns(pl.lit(None, dtype=pl.Int64).alias("_w"))
    both = pl.concat(parts, how="diagonal_relaxed")
    return both.with_columns(
        pl.max_horizontal("s", "start_ns").alias("s"), pl.min_horizontal("e", "end_ns").alias("e")
    ).filter(pl.col("e") >= pl.col("s"))


def _by_time(iv: pl.DataFrame, w: pl.DataFrame) -> pl.DataFrame:
    """`iv` with `_w`, `start_ns`, `end_ns` of the last window of its card that starts at or
    before its start (null where none does), in `iv`'s order: a backward as-of join by card.

    Without sorting the intervals: card and time are moved onto one line (`code * length +
    (t - first)`, `length` longer than every time of the data), where each card's windows
    lie apart and in order, and the windows' moved starts are searched for every interval at
    once. Data whose times span too much to move so in 63 bits takes polars' as-of join.
    """
    cards = sorted(set(w["card"].drop_nulls().to_list()))
    bounds = pl.concat(
        [
            iv.select(pl.col("s").min().alias("lo"), pl.col("s").max().alias("hi")),
            w.select(pl.col("start_ns").min().alias("lo"), pl.col("end_ns").max().alias("hi")),
        ]
    ).select(pl.col("lo").min(), pl.col("hi").max())
    lo, hi = bounds.row(0)
    if lo is None or hi is None or iv.height == 0:
        return iv.with_columns(pl.lit(None, dtype=pl.Int64).alias(c) for c in ("_w", "start_ns", "end_ns"))
    lo, hi = int(lo), int(hi)
    length = hi - lo + 1
    if (len(cards) + 1) * length >= _MOVED_MAX:
        joined = (
            iv.with_row_index("_row")
            .sort("s")
            .join_asof(
                w.sort("start_ns"),
                left_on="s",
                right_on="start_ns",
                by="card",
                strategy="backward",
                check_sortedness=False,
            )
        )
        return joined.sort("_row").drop("_row")
    code = {c: i for i, c in enumerate(cards)}

    def moved(t: str) -> pl.Expr:
        return pl.col("card").replace_strict(code, default=None, return_dtype=pl.Int64) * length + (pl.col(t) - lo)

    ws = w.with_columns(moved("start_ns").alias("_k")).drop_nulls("_k").sort("_k", "_w")
    if ws.height == 0:
        return iv.with_columns(pl.lit(None, dtype=pl.Int64).alias(c) for c in ("_w", "start_ns", "end_ns"))
    # (an interval of a card without windows searches -1: before every window)
    keys = iv.select(moved("s").fill_null(-1).alias("_k"))["_k"]
    at = ws["_k"].search_sorted(keys, side="right").cast(pl.Int64) - 1
    picked = ws.select("card", "_w", "start_ns", "end_ns")[at.clip(lower_bound=0)]
    # The window found must be of the interval's card: one of a card before it means none.
    same = (at >= 0) & (picked["card"] == iv["card"]).fill_null(False)
    return iv.with_columns(pl.when(same).then(picked[c]).alias(c) for c in ("_w", "start_ns", "end_ns"))


def derive_steps(tasks: pl.DataFrame, windows: Windows, cards: list[str]) -> pl.DataFrame:
    """Steps of `cards` from their tasks, cut at the windows (see the module docstring)."""
    win = windows.frame.filter(pl.col("card").is_in(cards))
    if win.height == 0:
        return empty_steps()
    # Intervals first, then the cards: filtering the tasks would copy every column of them.
    iv = task_intervals(tasks).filter(pl.col("card").is_in(cards))
    got = _assign(iv, win, windows.told_by).select("_w", "s", "e", "comm", "start_ns").collect()
    lengths = _union_lengths(got, win)
    w = win.with_row_index("_w").with_columns(pl.col("_w").cast(pl.Int64))
    out = w.join(lengths, on="_w", how="left").with_columns(pl.col("c", "m", "b").fill_null(0))
    us = 1000.0
    frame = out.select(
        "card",
        "step",
        ((pl.col("end_ns") - pl.col("start_ns")) / us).alias("step_us"),
        (pl.col("c") / us).alias("compute_us"),
        (pl.col("m") / us).alias("communication_us"),
        ((pl.col("b") - pl.col("c")) / us).alias("comm_not_overlapped_us"),
        ((pl.col("m") - (pl.col("b") - pl.col("c"))) / us).alias("overlapped_us"),
        ((pl.col("end_ns") - pl.col("start_ns") - pl.col("b")) / us).alias("free_us"),
        pl.concat_str(
            pl.lit("tasks, steps by "), pl.col("card").replace_strict(windows.told_by, default="capture")
        ).alias("source"),
    )
    return sort_cards(conform(frame, STEPS_SCHEMA), "step")


def overlap_steps(events: pl.DataFrame, windows: Windows, cards: list[str]) -> pl.DataFrame:
    """Steps from the timeline's Overlap Analysis process, summed per step window.

    Without step boundaries (`capture`), the window is the span of the card's Overlap
    Analysis events themselves.
    """
    ov = (
        events.filter(pl.col("process") == OVERLAP_PROCESS)
        .filter(
            (pl.col("ph") == "X")
            & pl.col("thread").is_in(list(OVERLAP_THREADS))
            & pl.col("ts_ns").is_not_null()
            & pl.col("dur_ns").is_not_null()
            & (pl.col("dur_ns") >= 0)
            & pl.col("card").is_in(cards)
        )
        .select("card", "thread", pl.col("ts_ns").alias("s"), (pl.col("ts_ns") + pl.col("dur_ns")).alias("e"))
    )
    if ov.height == 0:
        return empty_steps()
    have = ov["card"].unique().to_list()
    win = windows.frame.filter(pl.col("card").is_in(have))
    whole = [c for c in have if windows.told_by.get(c, "capture") == "capture"]
    if whole:
        span = (
            ov.filter(pl.col("card").is_in(whole))
            .group_by("card")
            .agg(pl.col("s").min().alias("start_ns"), pl.col("e").max().alias("end_ns"))
            .with_columns(pl.lit(None, dtype=pl.Int64).alias("step"), pl.lit(None, dtype=pl.String).alias("step_id"))
        )
        win = pl.concat([win.filter(~pl.col("card").is_in(whole)), conform(span, WINDOW_SCHEMA)])
    win = sort_cards(win, "start_ns")
    told = {c: ("capture" if c in whole else windows.told_by.get(c, "capture")) for c in have}
    # The Overlap Analysis events carry no Step Id: they go by time into every kind of window.
    timed = {c: ("time" if how == "Step Id" else how) for c, how in told.items()}
    got = _assign(ov.with_columns(pl.lit(None, dtype=pl.String).alias("step_id")), win, timed).collect()
    sums = got.group_by("_w", "thread").agg(((pl.col("e") - pl.col("s")).sum() / 1000.0).alias("us"))
    wide = sums.pivot(on="thread", index="_w", values="us")
    w = win.with_row_index("_w").with_columns(pl.col("_w").cast(pl.Int64))
    out = w.join(wide.with_columns(pl.col("_w").cast(pl.Int64)), on="_w", how="left")
    renamed = out.rename({t: c for t, c in OVERLAP_THREADS.items() if t in out.columns})
    filled = renamed.with_columns(
        pl.col(c).fill_null(0.0) if c in renamed.columns else pl.lit(0.0).alias(c) for c in OVERLAP_THREADS.values()
    ).with_columns(pl.lit(None, dtype=pl.Float64).alias("overlapped_us"))
    source = {c: f"timeline Overlap Analysis, steps by {how}" for c, how in told.items()}
    frame = _finish(filled, "")
    return frame.with_columns(
        pl.col("card").replace_strict(source, default="timeline Overlap Analysis").alias("source")
    )
