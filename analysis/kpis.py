"""Headline figures of one card for the explorer's KPI cards: where the time goes."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from .device_kind import DeviceKind, tasks_device
from .rules import aclnn_tasks, aclop_tasks
from .totals import compute_tasks

MATRIX_CORES = ("AI_CORE", "MIX_AIC")


@dataclass(frozen=True)
class Kpi:
    key: str
    title: str
    value: str
    detail: str


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


def card_kpis(tasks: pl.DataFrame, device: DeviceKind | None = None) -> tuple[Kpi, ...]:
    """Compute vs wait, and the device's shares of compute, for one card's tasks.

    On an NPU: AI_CORE share of compute, aclop vs aclnn. On a GPU or an unknown device: the
    share of compute in device kernels (the rest is host operators). On a CPU: the host
    operators. `device` is the capture's kind (analysis/device_kind.py); without it, the kind
    the tasks alone tell (`tasks_device`)."""
    kind = device or tasks_device(tasks)
    if kind != "NPU":
        return _device_kpis(tasks, kind)
    # compute, wait and aclop as analysis/totals.py defines them (communication is not compute)
    s = tasks.select(
        compute=pl.col("duration_us").filter(compute_tasks()).sum(),
        wait=pl.col("wait_us").sum(),
        core=pl.col("duration_us").filter(pl.col("task_type").is_in(MATRIX_CORES)).sum(),
        device=pl.col("duration_us").filter(aclop_tasks() | aclnn_tasks()).sum(),
        aclop_n=aclop_tasks().sum(),
        aclnn_n=aclnn_tasks().sum(),
        aclop_t=pl.col("duration_us").filter(aclop_tasks()).sum(),
    ).row(0, named=True)
    compute, wait = s["compute"] or 0.0, s["wait"] or 0.0
    out = [
        _compute_wait(compute, wait),
        Kpi(
            "ai_core",
            "AI_CORE share",
            f"{_pct(s['core'] or 0.0, compute):.0f}%",
            "compute on the cube units (AI_CORE, MIX_AIC): keep it high",
        ),
    ]
    if s["device"]:
        out.append(
            Kpi(
                "aclop",
                "aclop vs aclnn",
                f"{s['aclop_n']:,} / {s['aclnn_n']:,} calls",
                f"aclop {_pct(s['aclop_t'] or 0.0, compute):.0f}% of compute",
            )
        )
    return tuple(out)


def _compute_wait(compute: float, wait: float) -> Kpi:
    busy = _pct(compute, compute + wait)
    return Kpi(
        "compute_wait",
        "Compute vs wait",
        f"{busy:.0f}% / {100 - busy:.0f}%" if compute + wait else "-",
        f"compute {compute:,.0f} us, waiting {wait:,.0f} us",
    )


def _device_kpis(tasks: pl.DataFrame, kind: DeviceKind) -> tuple[Kpi, ...]:
    """The KPIs of a GPU, CPU or unknown device's card: nothing of an NPU's cores or operators."""
    s = tasks.select(
        compute=pl.col("duration_us").filter(compute_tasks()).sum(),
        wait=pl.col("wait_us").sum(),
        kernels=pl.col("duration_us").filter(compute_tasks() & (pl.col("task_type") == "KERNEL")).sum(),
        host_n=(pl.col("task_type") == "CPU").sum(),
    ).row(0, named=True)
    compute, wait = s["compute"] or 0.0, s["wait"] or 0.0
    out = [_compute_wait(compute, wait)]
    if kind == "CPU":
        out.append(
            Kpi(
                "host_ops",
                "Host operators",
                f"{s['host_n'] or 0:,} ops",
                "every task is a host operator: the trace holds no device activity",
            )
        )
    else:
        out.append(
            Kpi(
                "kernels",
                "Kernel share",
                f"{_pct(s['kernels'] or 0.0, compute):.0f}%",
                "compute in device kernels; the rest is host operators",
            )
        )
    return tuple(out)
