"""Which tasks are what: the AI core tasks, matrix operators, an application's own kernels,
aclop and aclnn operators, each as a polars expression over the tasks frame (or a pattern of
op types), for the rules, the KPI cards and the queries alike."""

from __future__ import annotations

import polars as pl

from npuscope.parsers.columns import COMMUNICATION_TASK_TYPES, UNKNOWN

MATRIX_TYPES = r"^(MatMul|BatchMatMul|Conv|FlashAttention)"
MATRIX_CORES = ("AI_CORE", "MIX_AIC")
HOST_MATRIX_TYPES = r"(?i)matmul|conv|gemm|bmm|linear|attention|attn"
"""Matrix op types by name where the capture has no AI core types (a GPU or CPU trace)."""
CORE_TASKS = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV")
"""Task types that run on the AI cores: the ones with a Block Dim and PMU ratios."""
# An Ascend C kernel the application launches itself (`kernel<<<blockDim, ...>>>`,
# aclrtLaunchKernel) is named after its C function (`matmul_custom`), and a custom operator
# built with msOpGen ends in `Custom` (`AddCustom`); every CANN operator type is a CamelCase
# name without underscores (`MatMulV3`, `FlashAttentionScore`).
CUSTOM_KERNEL_TYPES = r"^[a-z]|_|Custom$"


def custom_kernel() -> pl.Expr:
    """Tasks of an application's own kernel (CUSTOM_KERNEL_TYPES on a core task)."""
    return (
        pl.col("task_type").is_in(CORE_TASKS).fill_null(False)
        & (pl.col("op_type") != UNKNOWN).fill_null(False)
        & pl.col("op_type").str.contains(CUSTOM_KERNEL_TYPES).fill_null(False)
    )


def has_custom_kernel(tasks: pl.DataFrame) -> bool:
    """Whether `tasks` hold an application's own kernel (`custom_kernel`)."""
    types = tasks.filter(pl.col("task_type").is_in(CORE_TASKS).fill_null(False))["op_type"].unique()
    types = types.filter(types != UNKNOWN)
    return bool(types.str.contains(CUSTOM_KERNEL_TYPES).fill_null(False).any())


def aclop_tasks(own_kernel: pl.Expr | None = None) -> pl.Expr:
    """Classic acl operator tasks, as the aclop_share finding and the "aclop vs aclnn" card
    count them: not aclnn, not communication, not CPU, not an application's own kernel
    (`own_kernel`: custom_kernel() or an equivalent expression)."""
    return operator_tasks(own_kernel) & ~pl.col("is_aclnn").fill_null(False)


def aclnn_tasks(own_kernel: pl.Expr | None = None) -> pl.Expr:
    """aclnn operator tasks (op name aclnn*), counted beside `aclop_tasks`."""
    return operator_tasks(own_kernel) & pl.col("is_aclnn").fill_null(False)


def operator_tasks(own_kernel: pl.Expr | None = None) -> pl.Expr:
    """CANN operator tasks: neither communication, nor CPU, nor an application's own kernel."""
    own = custom_kernel() if own_kernel is None else own_kernel
    return ~pl.col("task_type").is_in([*COMMUNICATION_TASK_TYPES, "CPU"]).fill_null(False) & ~own
