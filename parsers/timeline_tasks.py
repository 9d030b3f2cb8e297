"""Tasks frames built from timeline events, for captures without an op_summary.

Old captures often kept only the timeline, and Paddle's own trace has no CSV at all: the
device task events (or Paddle's operator events) become the tasks frame, with the wait
computed as msprof does.
"""

from __future__ import annotations

import polars as pl

from .columns import COMMUNICATION_TASK_TYPES
from .frames import canonical_tasks, communication_type, device_kind

DEVICE_PROCESS = "Ascend Hardware"
# msprof names the collectives' process `Communication` (Era B) or `HCCL` (Era A, torch_npu).
COMMUNICATION_PROCESSES = ("Communication", "HCCL")

# Paddle appends the duration to every event name (`matmul dygraph[144.544 us]`).
_PADDLE_SUFFIX = r"\[[0-9.]+ (?:us|ms|ns|s)\]$"


def kernel_op_type(name: pl.Expr) -> pl.Expr:
    """The OP Type a kernel's name tells, as msprof writes it into the op_summary.

    An aclnn kernel is named `aclnn<Api>_<Kernel>_<OpType>`: `aclnnInplaceCopy_SliceAiCore_Slice`
    is a Slice, `aclnnArange_ArangeAiCore_Range` a Range, `aclnnMm_MatMulCommon_MemSet` a
    MemSet, `aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore_varlen` a
    FlashAttentionScore (the third field, up to the next `_`). This is what every aclnn row of
    the real db and CSV samples pairs with its name (tests/test_kernel_op_types.py), but one:
    msprof-analyze's 2025 kernel_details.csv types `aclnnMatmul_MatMulV3Common_MatMulV5`
    MatMulV3. An aclop task launched by torch_npu's format conversion, `trans_<OpType>_<n>`, is
    that OP Type. Any other name is kept whole: nothing in it tells its type reliably
    (`Conv2D12`, `MaxPoolWithArgmaxV114`, `StatelessDropOutGenMask/DSASTATELESSGENBITMASK`).
    """
    aclnn = name.str.extract(r"^aclnn[A-Za-z0-9]+_[A-Za-z0-9]+_([A-Za-z0-9]+)", 1)
    trans = name.str.extract(r"^trans_([A-Za-z][A-Za-z0-9]*)_\d+$", 1)
    return pl.coalesce(aclnn, trans, name)


def device_tasks(events: pl.DataFrame) -> pl.DataFrame:
    """Operator tasks of a timeline: `Ascend Hardware` kernels and the collectives.

    The timeline has no OP Type: it is read from the kernel's name (`kernel_op_type`).
    Synchronisation (Notify Wait, EVENT_WAIT_SQE), memory copies (SDMA, MEMCPY_ASYNC) and
    markers (PROFILING_ENABLE) are not operator tasks: counted as compute they would swamp
    the kernels, and a marker far from the work would stretch the span. Collectives come
    from the communication process (`hcom_*` op events) when it has them, else from the
    device's own communication tasks.
    """
    x = events.filter((pl.col("ph") == "X") & pl.col("ts_ns").is_not_null())
    dev = x.filter((pl.col("process") == DEVICE_PROCESS) & pl.col("task_type").is_not_null()).with_columns(
        device_kind(pl.col("name"), pl.col("task_type")).alias("_kind")
    )
    comm_ops = x.filter(pl.col("process").is_in(COMMUNICATION_PROCESSES) & pl.col("name").str.starts_with("hcom_"))
    kernels = dev.filter(pl.col("_kind") == "compute")
    if comm_ops.height == 0:
        comm_ops = dev.filter(pl.col("_kind") == "communication")
    columns = [
        pl.col("card"),
        pl.col("name").alias("op_name"),
        kernel_op_type(pl.col("name")).alias("op_type"),
        pl.col("task_type"),
        pl.col("stream_id"),
        pl.col("task_id"),
        pl.col("ts_ns").alias("start_ns"),
        (pl.col("dur_ns").fill_null(0) / 1000).alias("duration_us"),
    ]
    comm = comm_ops.select(columns).with_columns(
        communication_type(pl.col("op_name")).alias("op_type"),
        pl.lit(COMMUNICATION_TASK_TYPES[0]).alias("task_type"),
    )
    return canonical_tasks(pl.concat([kernels.select(columns), comm]))


def paddle_tasks(events: pl.DataFrame) -> pl.DataFrame:
    """Paddle operator events as tasks: host operators are task type CPU, kernels as named."""
    ops = events.filter(
        (pl.col("ph") == "X") & pl.col("cat").is_in(["Operator", "Kernel"]) & pl.col("ts_ns").is_not_null()
    )
    name = pl.col("name").str.replace(_PADDLE_SUFFIX, "").str.strip_chars()
    tasks = ops.select(
        pl.col("card"),
        name.alias("op_name"),
        name.str.replace(r" dygraph$", "").alias("op_type"),
        pl.when(pl.col("cat") == "Operator").then(pl.lit("CPU")).otherwise(pl.lit("KERNEL")).alias("task_type"),
        pl.col("ts_ns").alias("start_ns"),
        (pl.col("dur_ns") / 1000).alias("duration_us"),
    )
    return canonical_tasks(tasks)
