"""Why the device waited: a cause for every long Task Wait Time.

msprof records how long each task waited for the host, never why. A gap covered by a
collective of the same card is no host wait at all: the device was in the collective, waiting
for another rank (cause `communication`, checked before every other). A long wait before a
collective is communication too: the collective's stream waited for its peers (synchronisation
across ranks), and the framework never compiles a collective online, so no compile API can
explain it. The usual causes of the rest are the normal pause at a step boundary, repeated
recompilation of an aclop operator, and an operator that ran on the host CPU just before. With
a timeline the host side of each device gap is inspected directly (evidence); without one,
recompilation can only be suspected from the op's shape history and OP State (and never for
an aclnn operator or a collective), and a host-side op is never claimed.
"""

from __future__ import annotations

import polars as pl

from npuscope.parsers.frames import is_communication

from .thresholds import Thresholds

CAUSES = ("communication", "expected", "recompilation", "host_op", "unexplained")

COMPILE_PATTERN = r"Compile"
# Host APIs that block the host on the device or copy memory: the host was not launching.
SYNC_PATTERN = r"aclrtSynchronize|aclrtMemcpy|aclrtMemset|Synchronize|StreamWait|Memcpy"
STEP_PATTERN = r"^Profiler?Step#\d+"
COMMUNICATION_COVER = 0.5
"""Share of a device gap collectives of the same card must cover to make it a communication wait."""


CAUSE_TEXT: dict[tuple[str, str], str] = {
    (
        "recompilation",
        "evidence",
    ): "the host was compiling an operator (a compile API on the host trace) during the wait",
    ("recompilation", "suspected"): (
        "suspected, no host trace to confirm it: the first run of this aclop op type with these "
        "input shapes (or OP State dynamic), when an aclop operator compiles online"
    ),
    ("host_op", "evidence"): "the host was in a synchronising call, or launched nothing, during the wait",
    ("communication", "evidence"): (
        "the wait lies inside a collective or before one: the card waited for the other ranks"
    ),
    ("unexplained", "evidence"): "no host call or collective on the trace explains the wait",
    ("unexplained", "suspected"): "no host trace: nothing in the capture tells what the host did",
    ("expected", "evidence"): "the normal pause at a step boundary",
}
"""What each (cause, confidence) means, in the words the explorer's task detail shows."""


def cause_text(cause: str, confidence: str) -> str:
    """The meaning of a wait's cause at its confidence (CAUSE_TEXT), or "" for none."""
    return CAUSE_TEXT.get((cause, confidence)) or CAUSE_TEXT.get((cause, "evidence"), "")


def _gaps(tasks: pl.DataFrame, th: Thresholds) -> pl.DataFrame:
    """The device gaps before long-wait tasks: row index, card, [start - wait, start), and
    whether the task after the gap is a collective."""
    return (
        tasks.with_row_index("row")
        .filter(pl.col("wait_us") >= th.long_wait_us)
        .select(
            "row",
            "card",
            (pl.col("start_ns") - (pl.col("wait_us") * 1000).round(0).cast(pl.Int64)).alias("gap_start"),
            pl.col("start_ns").alias("gap_end"),
            is_communication().fill_null(False).alias("before_collective"),
        )
    )


def step_boundaries(
    tasks: pl.DataFrame, events: pl.DataFrame | None, steps: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Times (card, ts_ns) where a training step ends or starts, from whatever the data says.

    Sources: step_trace (FP Start, Iteration End), a change of `Step Id` between consecutive
    tasks (torch_npu), and `ProfileStep#N` / `ProfilerStep#N` timeline events.
    """
    parts = []
    if steps is not None and steps.height:
        parts.append(
            steps.select("card", pl.concat_list("fp_start_ns", "iteration_end_ns").alias("ts_ns"))
            .explode("ts_ns")
            .drop_nulls()
        )
    if tasks["step_id"].null_count() < tasks.height:
        parts.append(
            tasks.filter((pl.col("step_id") != pl.col("step_id").shift(1).over("card")).fill_null(False)).select(
                "card", pl.col("start_ns").alias("ts_ns")
            )
        )
    if events is not None and events.height:
        steps = events.filter((pl.col("ph") == "X") & pl.col("name").str.contains(STEP_PATTERN))
        if steps.height:
            parts.append(steps.select("card", "ts_ns"))
    if not parts:
        return pl.DataFrame(schema={"card": pl.String, "ts_ns": pl.Int64})
    return pl.concat(parts).unique()


def _overlap(gaps: pl.DataFrame, spans: pl.DataFrame, name: str) -> pl.DataFrame:
    """Per gap row, the share of the gap covered by `spans` (summed, capped at 1)."""
    if gaps.height == 0 or spans.height == 0:
        return gaps.select("row", pl.lit(0.0).alias(name))
    out = []
    for card in gaps["card"].unique().to_list():
        g = gaps.filter(pl.col("card") == card)
        s = spans.filter(pl.col("card").is_in([card, "host"]))
        if s.height == 0:
            continue
        pairs = g.join_where(
            s.select("s_start", "s_end"),
            pl.col("s_start") < pl.col("gap_end"),
            pl.col("s_end") > pl.col("gap_start"),
        )
        out.append(
            pairs.group_by("row").agg(
                (pl.min_horizontal("s_end", "gap_end") - pl.max_horizontal("s_start", "gap_start"))
                .sum()
                .alias("covered"),
                (pl.col("gap_end") - pl.col("gap_start")).first().alias("length"),
            )
        )
    if not out:
        return gaps.select("row", pl.lit(0.0).alias(name))
    cov = pl.concat(out).select(
        "row", (pl.col("covered") / pl.col("length").clip(lower_bound=1)).clip(upper_bound=1.0).alias(name)
    )
    return gaps.select("row").join(cov, on="row", how="left").with_columns(pl.col(name).fill_null(0.0))


def _host_spans(events: pl.DataFrame, pattern: str | None) -> pl.DataFrame:
    """Host API complete events (`Level@api` names), optionally only those matching."""
    host = events.filter(
        (pl.col("ph") == "X") & pl.col("name").str.contains("@", literal=True) & pl.col("dur_ns").is_not_null()
    )
    if pattern is not None:
        host = host.filter(pl.col("name").str.contains(pattern))
    return host.select(
        "card",
        pl.col("ts_ns").alias("s_start"),
        (pl.col("ts_ns") + pl.col("dur_ns")).alias("s_end"),
    )


def _communication_spans(tasks: pl.DataFrame) -> pl.DataFrame:
    """The collectives of each card as [start, end) intervals."""
    return tasks.filter(is_communication()).select(
        "card",
        pl.col("start_ns").alias("s_start"),
        (pl.col("start_ns") + (pl.col("duration_us") * 1000).round(0).cast(pl.Int64)).alias("s_end"),
    )


def _expected(gaps: pl.DataFrame, bounds: pl.DataFrame) -> pl.Series:
    """Gaps that contain (or end at) a step start."""
    if gaps.height == 0 or bounds.height == 0:
        return pl.Series("expected", [False] * gaps.height, dtype=pl.Boolean)
    hits = []
    for card in gaps["card"].unique().to_list():
        g = gaps.filter(pl.col("card") == card)
        b = bounds.filter(pl.col("card").is_in([card, "host"])).select("ts_ns")
        if b.height == 0:
            continue
        hits.append(
            g.join_where(b, pl.col("ts_ns") >= pl.col("gap_start"), pl.col("ts_ns") <= pl.col("gap_end"))
            .select("row")
            .unique()
        )
    rows = set(pl.concat(hits)["row"].to_list()) if hits else set()
    return gaps["row"].is_in(list(rows)).alias("expected")


def attribute_waits(
    tasks: pl.DataFrame,
    events: pl.DataFrame | None,
    th: Thresholds,
    steps: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """`tasks` plus `wait_cause` and `wait_confidence` (null below the long-wait threshold)."""
    gaps = _gaps(tasks, th)
    expected = _expected(gaps, step_boundaries(tasks, events, steps))
    comm_cov = _overlap(gaps, _communication_spans(tasks), "comm")["comm"]
    # Inside a collective (covered by one) or just before one: either way synchronisation
    # with the other ranks, never an online compile nor a host op.
    in_collective = (comm_cov >= COMMUNICATION_COVER) | gaps["before_collective"]
    if events is not None and events.filter(pl.col("name").str.contains("@", literal=True)).height > 0:
        compile_cov = _overlap(gaps, _host_spans(events, COMPILE_PATTERN), "compile")["compile"]
        sync_cov = _overlap(gaps, _host_spans(events, SYNC_PATTERN), "sync")["sync"]
        host_cov = _overlap(gaps, _host_spans(events, None), "host")["host"]
        frame = gaps.with_columns(
            comm=in_collective, expected=expected, compile=compile_cov, sync=sync_cov, host=host_cov
        ).with_columns(
            pl.when("comm")
            .then(pl.lit("communication"))
            .when("expected")
            .then(pl.lit("expected"))
            .when(pl.col("compile") >= th.compile_cover)
            .then(pl.lit("recompilation"))
            .when((pl.col("sync") >= 0.5) | (pl.col("host") < 0.5))
            .then(pl.lit("host_op"))
            .otherwise(pl.lit("unexplained"))
            .alias("wait_cause"),
            pl.lit("evidence").alias("wait_confidence"),
        )
    else:
        # First time this (op type, input shapes, dtypes) runs on the card: aclop compiles.
        info = (
            tasks.with_row_index("row")
            .with_columns(
                pl.struct("card", "op_type", "input_shapes", "input_dtypes").is_first_distinct().alias("_first_shape")
            )
            .select("row", "_first_shape", "is_aclnn", "op_state")
        )
        frame = (
            gaps.with_columns(comm=in_collective, expected=expected)
            .join(info, on="row", how="left")
            .with_columns(
                pl.when("comm")
                .then(pl.lit("communication"))
                .when("expected")
                .then(pl.lit("expected"))
                .when(
                    ~pl.col("is_aclnn") & (pl.col("_first_shape") | (pl.col("op_state") == "dynamic").fill_null(False))
                )
                .then(pl.lit("recompilation"))
                .otherwise(pl.lit("unexplained"))
                .alias("wait_cause"),
            )
            .with_columns(
                pl.when(pl.col("wait_cause").is_in(["expected", "communication"]))
                .then(pl.lit("evidence"))
                .otherwise(pl.lit("suspected"))
                .alias("wait_confidence")
            )
        )
    # Scatter the few long-wait causes into full-length columns: a join would copy every
    # column of a 2M-row frame.
    rows = frame["row"].cast(pl.Int64)

    def scattered(name: str) -> pl.Series:
        blank = pl.repeat(None, tasks.height, dtype=pl.String, eager=True)
        return blank.scatter(rows, frame[name]).alias(name)

    return tasks.with_columns(scattered("wait_cause"), scattered("wait_confidence"))


def compile_event_counts(events: pl.DataFrame | None) -> dict[str, int]:
    """`aclopCompileAndExecute` host events per card (>= 20 signals recompilation)."""
    if events is None:
        return {}
    hits = events.filter((pl.col("ph") == "X") & pl.col("name").str.contains("aclopCompileAndExecute"))
    return dict(hits.group_by("card").len().iter_rows())
