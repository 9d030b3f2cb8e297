"""Tiny in-memory profiles for rule tests: a few tasks and events written inline."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from npuscope.parsers import Capture, Profile, Source
from npuscope.parsers.columns import EVENT_SCHEMA
from npuscope.parsers.frames import canonical_tasks, derive_statistic

T0 = 1_717_575_960_000_000_000  # ns, an epoch-scale start


def task(
    name: str,
    start_us: float,
    dur_us: float,
    *,
    op_type: str | None = None,
    task_type: str = "AI_CORE",
    card: str = "0",
    shapes: str = "8,8",
    dtypes: str = "FLOAT16",
    state: str | None = "static",
    step: int | None = None,
) -> dict:
    return {
        "card": card,
        "op_name": name,
        "op_type": op_type or name,
        "task_type": task_type,
        "start_ns": T0 + int(round(start_us * 1000)),
        "duration_us": float(dur_us),
        "input_shapes": shapes,
        "input_dtypes": dtypes,
        "op_state": state,
        "step_id": step,
    }


def event(name: str, start_us: float, dur_us: float, *, card: str = "0", process: str = "CANN") -> dict:
    return {
        "card": card,
        "process": process,
        "thread": "Thread 1",
        "pid": "1",
        "tid": "1",
        "name": name,
        "ph": "X",
        "ts_ns": T0 + int(round(start_us * 1000)),
        "dur_ns": int(round(dur_us * 1000)),
        "cat": None,
        "flow_id": None,
        "task_type": None,
        "stream_id": None,
        "task_id": None,
        "connection_id": None,
    }


def profile(
    tasks: list[dict], events: list[dict] | None = None, *, stat: pl.DataFrame | None = None, pmu: bool = False
) -> Profile:
    frame = pl.DataFrame(
        tasks,
        schema={
            "card": pl.String,
            "op_name": pl.String,
            "op_type": pl.String,
            "task_type": pl.String,
            "start_ns": pl.Int64,
            "duration_us": pl.Float64,
            "input_shapes": pl.String,
            "input_dtypes": pl.String,
            "op_state": pl.String,
            "step_id": pl.Int64,
        },
    )
    extra = []
    if pmu:
        frame = frame.with_columns(pl.lit(1.0).alias("aic_mac_ratio"))
        extra = ["aic_mac_ratio"]
    t = canonical_tasks(frame, pmu=extra)
    ev = None if events is None else pl.DataFrame(events, schema=EVENT_SCHEMA)
    cap = Capture("tiny", Path("tiny"), "era_b", (Source(None),), "0")
    cards = tuple(sorted(t["card"].unique().to_list()))
    return Profile(
        path=Path("tiny"),
        capture=cap,
        captures=(cap,),
        layout="era_b",
        era="test",
        cards=cards,
        tasks=t,
        op_statistic=stat if stat is not None else derive_statistic(t),
        statistic_derived=stat is None,
        events=ev,
        tasks_from="op_summary",
        files=(),
        pmu_columns=tuple(extra),
    )
