"""Canonical columns of the frames, declared as data.

Each spec lists the header names every era uses for one column (matched by name, never by
position, as Huawei's own consumers do), the canonical name and the dtype. The CSV reader
only looks up these tables; adding an alias here is all a new header variant needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

# How a text cell becomes a typed value. "start" is special: epoch microseconds with three
# decimals (or nanoseconds in CANN 5.x) that must reach Int64 nanoseconds without Float64.
KINDS = ("str", "id", "int", "float", "start", "time", "list")


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    aliases: tuple[str, ...]
    kind: str
    required: bool = False

    @property
    def dtype(self) -> pl.DataType:
        return {
            "str": pl.String,
            "id": pl.String,
            "list": pl.String,
            "int": pl.Int64,
            "float": pl.Float64,
            "start": pl.Int64,
            "time": pl.Int64,
        }[self.kind]()


# Start-time headers and the unit their values are in (ns per unit).
START_UNITS: dict[str, int] = {
    "Task Start Time(us)": 1000,
    "Start Time(us)": 1000,  # torch_npu kernel_details
    "Task Start Time": 1,  # CANN 5.x: nanoseconds, no unit in the header
    # step_trace: same clock as op_summary; optional per row ("time" kind), unlike starts.
    "FP Start(us)": 1000,
    "BP End(us)": 1000,
    "Iteration End(us)": 1000,
}

TASK_COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("card", ("Device_id",), "str"),
    ColumnSpec("step_id", ("Step Id",), "id"),
    ColumnSpec("model_name", ("Model Name",), "str"),
    ColumnSpec("model_id", ("Model ID",), "id"),
    ColumnSpec("task_id", ("Task ID",), "id"),
    ColumnSpec("stream_id", ("Stream ID",), "id"),
    ColumnSpec("infer_id", ("Infer ID",), "id"),
    ColumnSpec("op_name", ("Op Name", "OP Name", "Name"), "str", required=True),
    ColumnSpec("op_type", ("OP Type", "Type"), "str", required=True),
    ColumnSpec("op_state", ("OP State",), "str"),
    ColumnSpec("task_type", ("Task Type", "Accelerator Core"), "str", required=True),
    ColumnSpec("start_ns", ("Task Start Time(us)", "Start Time(us)", "Task Start Time"), "start", required=True),
    ColumnSpec("duration_us", ("Task Duration(us)", "Duration(us)"), "float", required=True),
    ColumnSpec("wait_us", ("Task Wait Time(us)", "Wait Time(us)"), "float"),
    ColumnSpec("block_num", ("Block Num", "Block Dim"), "int"),
    ColumnSpec("mix_block_num", ("Mix Block Num", "Mix Block Dim"), "int"),
    ColumnSpec("hf32_eligible", ("HF32 Eligible",), "str"),
    ColumnSpec("input_shapes", ("Input Shapes",), "list"),
    ColumnSpec("input_dtypes", ("Input Data Types",), "list"),
    ColumnSpec("input_formats", ("Input Formats",), "list"),
    ColumnSpec("output_shapes", ("Output Shapes",), "list"),
    ColumnSpec("output_dtypes", ("Output Data Types",), "list"),
    ColumnSpec("output_formats", ("Output Formats",), "list"),
    ColumnSpec("context_id", ("Context ID",), "str"),
)

# Column order of the canonical tasks frame; PMU columns (every other header) follow.
TASK_ORDER: tuple[str, ...] = (
    "card",
    "op_name",
    "op_type",
    "task_type",
    "stream_id",
    "task_id",
    "model_id",
    "op_state",
    "start_ns",
    "duration_us",
    "wait_us",
    "block_num",
    "mix_block_num",
    "input_shapes",
    "input_dtypes",
    "input_formats",
    "output_shapes",
    "output_dtypes",
    "output_formats",
    "is_aclnn",
    "step_id",
    "model_name",
    "infer_id",
    "hf32_eligible",
    "context_id",
)

# What describes a task beyond its card, name, type, step and times: its ids (model, task,
# stream), tensors (shapes, data types, formats), state, block dims, HF32 and context. No
# figure of time is computed from them, and they are over a third of a tasks frame's memory:
# a command that only counts time can leave them out (`open_profile(details=False)`). The
# rules and the explorer read some (block dims, shapes, streams).
DETAIL_COLUMNS: tuple[str, ...] = (
    "model_id",
    "task_id",
    "stream_id",
    "infer_id",
    "model_name",
    "input_shapes",
    "input_dtypes",
    "input_formats",
    "output_shapes",
    "output_dtypes",
    "output_formats",
    "op_state",
    "block_num",
    "mix_block_num",
    "hf32_eligible",
    "context_id",
)

TASK_SCHEMA: dict[str, pl.DataType] = {
    **{c.name: c.dtype for c in TASK_COLUMNS},
    "is_aclnn": pl.Boolean(),
}

STAT_COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("card", ("Device_id",), "str"),
    ColumnSpec("model_name", ("Model Name",), "str"),
    ColumnSpec("op_type", ("OP Type",), "str", required=True),
    ColumnSpec("core_type", ("Core Type",), "str", required=True),
    ColumnSpec("count", ("Count",), "int", required=True),
    ColumnSpec("total_us", ("Total Time(us)",), "float", required=True),
    ColumnSpec("min_us", ("Min Time(us)",), "float", required=True),
    ColumnSpec("avg_us", ("Avg Time(us)",), "float", required=True),
    ColumnSpec("max_us", ("Max Time(us)",), "float", required=True),
    ColumnSpec("ratio_pct", ("Ratio(%)",), "float", required=True),
)

STAT_ORDER: tuple[str, ...] = (
    "card",
    "op_type",
    "core_type",
    "count",
    "total_us",
    "min_us",
    "avg_us",
    "max_us",
    "ratio_pct",
)

STAT_SCHEMA: dict[str, pl.DataType] = {c.name: c.dtype for c in STAT_COLUMNS if c.name in STAT_ORDER}

STEP_COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("card", ("Device_id",), "str"),
    ColumnSpec("iteration_id", ("Iteration ID",), "int", required=True),
    ColumnSpec("fp_start_ns", ("FP Start(us)",), "time"),
    ColumnSpec("bp_end_ns", ("BP End(us)",), "time"),
    ColumnSpec("iteration_end_ns", ("Iteration End(us)",), "time", required=True),
)

STEP_SCHEMA: dict[str, pl.DataType] = {c.name: c.dtype for c in STEP_COLUMNS}

EVENT_SCHEMA: dict[str, pl.DataType] = {
    "card": pl.String(),
    "process": pl.String(),
    "thread": pl.String(),
    "pid": pl.String(),
    "tid": pl.String(),
    "name": pl.String(),
    "ph": pl.String(),
    "ts_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
    "cat": pl.String(),
    "flow_id": pl.String(),
    "task_type": pl.String(),
    # Ids are opaque text: real captures hold 2^64-1, beyond any signed integer.
    "stream_id": pl.String(),
    "task_id": pl.String(),
    "connection_id": pl.String(),
}

# The event columns an open that only counts time reads (`open_profile(details=False)`):
# steps, host API and the events per card. Ids, flows, categories and
# task types are for the explorer's and the report's wait attribution and timeline.
LIGHT_EVENT_COLUMNS: frozenset[str] = frozenset({"card", "process", "thread", "name", "ph", "ts_ns", "dur_ns"})

# Task types msprof leaves out of op_statistic ratios: communication is not compute.
COMMUNICATION_TASK_TYPES: tuple[str, ...] = ("COMMUNICATION", "HCCL")

# What a torch_npu Level0 capture (its default level) leaves as N/A in Type and Accelerator
# Core: shown as this label, never as None / N/A.
UNKNOWN = "unknown"

# Device events that are not operator tasks, by name or Task Type (upper case, spaces and
# dashes as `_`). Timelines name them either way: torch_npu writes the kind as the event name
# with Task Type `Other`, msprof as the Task Type. Markers are dropped; the rest stay events.
SYNC_TASKS = frozenset(
    {
        "NOTIFY_WAIT",
        "NOTIFY_RECORD",
        "NOTIFY_WAIT_SQE",
        "NOTIFY_RECORD_SQE",
        "EVENT_WAIT",
        "EVENT_RECORD",
        "EVENT_WAIT_SQE",
        "EVENT_RECORD_SQE",
        "EVENT_RESET",
        "WRITE_VALUE",
        "WRITE_VALUE_SQE",
        "STARS_COMMON",
        "CAPTURE_WAIT",
        "CAPTURE_RECORD",
        "BARRIER",
    }
)
MEMCPY_TASKS = frozenset(
    {
        "MEMCPY",
        "MEMCPY_ASYNC",
        "MEMCOPYASYNC",
        "MEMCPY_ASYNC_SQE",
        "SDMA",
        "SDMA_SQE",
        "REDUCE_ASYNC_V2",
        "REDUCE_INLINE",
        "RDMA_SEND",
        "RDMA_SEND_SQE",
        "DMA",
    }
)
MARKER_TASKS = frozenset(
    {
        "PROFILING_ENABLE",
        "PROFILING_DISABLE",
        "PLACE_HOLDER_SQE",
        "PLACE_HOLDER",
        "OTHER",
        "MODEL_MAINTAINCE",
        "MODEL_EXECUTE",
        "MODEL_END_GRAPH",
        "NOP",
        "INVALID",
    }
)

# Values that mean "no value" in every era.
NULL_VALUES: tuple[str, ...] = ("N/A", "", "NA", "null", "None")
