"""What kind of device a capture profiled: NPU, GPU, CPU, or unknown, from what its files say.

The findings and their advice speak of what the capture ran on (rules.py, training_rules.py,
kpis.py): AI_CORE, aclop and CANN switches mean nothing on a GPU or a CPU.

- Every msprof export (Era A / Era B folders, single msprof files, db exports), torch_npu
  (`*_ascend_pt`) and MindSpore (`*_ascend_ms`) output comes from an Ascend NPU: NPU by layout.
- A Paddle trace (`paddle.profiler.export_chrome_tracing`) says its device in its events.
  Paddle's ChromeTracingLogger (paddle/fluid/platform/profiler/chrometracing_logger.cc) names
  the process of every device's events `Device <id> (<type>)` (`Deivce <id> (GPU)` before
  Paddle 2.5; `GPU` for CUDA, `MLU`, or a custom device's type such as `npu`), writes the
  device's work under the categories `Kernel`, `Memcpy` and `Memset`, and the CUDA runtime
  calls that launch it under `CudaRuntime`. Host events sit in `Process <pid> (CPU)`.
  A trace with host events only (targets=[CPU], or a CPU build) is CPU: its operators ran on
  the host, or the device was not profiled. Device events of another type, or without a
  device process, are unknown: never taken for an NPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

import polars as pl

from npuscope.parsers import Profile

DeviceKind = Literal["NPU", "GPU", "CPU", "unknown"]
DEVICE_KINDS: tuple[DeviceKind, ...] = get_args(DeviceKind)

NPU_LAYOUTS = {
    "era_a": "msprof export (Ascend NPU)",
    "era_b": "msprof export (Ascend NPU)",
    "torch_npu": "torch_npu profiler output (Ascend NPU)",
    "mindspore": "MindSpore profiler output (Ascend NPU)",
    "file": "msprof / torch_npu file (Ascend NPU)",
}
"""Layouts only an Ascend NPU capture has, and how the reason says so."""

PADDLE_DEVICE_PROCESS = re.compile(r"^De(?:vi|iv)ce \d+ \((?P<type>[^()]+)\)$")
"""Paddle's process name of a device's events: `Device 0 (GPU)` (`Deivce` before Paddle 2.5)."""
PADDLE_HOST_PROCESS = r"^Process \d+ \(CPU\)$"
PADDLE_DEVICE_CATEGORIES = ("Kernel", "Memcpy", "Memset")
"""Categories of the events Paddle records on a device."""
CUDA_CATEGORY = "CudaRuntime"
"""Category of the CUDA runtime calls (cudaLaunchKernel, cudaMemcpyAsync) Paddle records."""
PADDLE_DEVICE_TYPES: dict[str, DeviceKind] = {"gpu": "GPU", "npu": "NPU"}
"""Device types in Paddle's process names (lower case) that tell the kind: `npu` is the type the
Ascend plugin of PaddleCustomDevice registers."""

ASCEND_PROCESSES = ("CANN", "Ascend Hardware")
"""Processes of msprof's timelines: the CANN host APIs and the NPU's tasks."""

HOST_TASK_TYPES = ("CPU", "KERNEL")
"""Task types parsers/timeline_tasks.paddle_tasks gives (host operators, device kernels); no
msprof export has them (its types: AI_CORE, AI_VECTOR_CORE, AI_CPU, MIX_AIC, ...)."""


@dataclass(frozen=True)
class Device:
    """The device kind of a capture and what told it (one line, for the report and the UI)."""

    kind: DeviceKind
    reason: str


def profile_device(profile: Profile) -> Device:
    """The device kind of `profile`, from its layout, else from its Paddle events."""
    if profile.source_kind == "db":
        return Device("NPU", "msprof / torch_npu db export (Ascend NPU)")
    # A Paddle trace renamed (no `.paddle_trace.json`) is read as a plain timeline file: its
    # tasks, taken from msprof's `Ascend Hardware` process, are then empty.
    renamed = profile.layout == "file" and profile.tasks.height == 0 and _paddle_events(profile.events)
    if profile.layout == "paddle" or renamed:
        return paddle_device(profile.events, profile.tasks)
    if profile.layout in NPU_LAYOUTS:
        return Device("NPU", NPU_LAYOUTS[profile.layout])
    return Device("unknown", f"layout {profile.layout!r} does not tell the device")


def device_kind(profile: Profile) -> DeviceKind:
    """`profile_device(profile).kind`."""
    return profile_device(profile).kind


def _paddle_events(events: pl.DataFrame | None) -> bool:
    """Whether a timeline read as a plain file is a Paddle trace (its host process names)."""
    if events is None or events.height == 0:
        return False
    processes = events["process"].drop_nulls().unique()
    return bool(processes.str.contains(PADDLE_HOST_PROCESS).any()) and "Ascend Hardware" not in processes


def paddle_device(events: pl.DataFrame | None, tasks: pl.DataFrame | None = None) -> Device:
    """The device of a Paddle trace, from its events and tasks (see the module docstring)."""
    if tasks is not None and tasks_device(tasks) == "NPU" and tasks.height:
        return Device("NPU", "Paddle capture with tasks of Ascend task types")
    if events is None or events.height == 0:
        return Device("unknown", "Paddle trace without events: the device is not known")
    processes = events["process"].drop_nulls().unique().sort().to_list()
    types = sorted({m["type"].strip() for p in processes if (m := PADDLE_DEVICE_PROCESS.match(p))})
    kinds = {PADDLE_DEVICE_TYPES.get(t.lower(), "unknown") for t in types}
    named = ", ".join(f"'{t}'" for t in types)
    if len(kinds) == 1 and "unknown" not in kinds:
        (kind,) = kinds
        return Device(kind, f"Paddle trace with device events of type {named}")
    if set(processes) & set(ASCEND_PROCESSES):
        return Device("NPU", "Paddle capture with Ascend events (CANN / Ascend Hardware processes)")
    if types:
        return Device("unknown", f"Paddle trace with device events of type {named}: not a device kind npuscope knows")
    cats = set(events["cat"].drop_nulls().unique().to_list())
    if CUDA_CATEGORY in cats:
        return Device("GPU", "Paddle trace with CUDA runtime calls (CudaRuntime events)")
    if cats & set(PADDLE_DEVICE_CATEGORIES):
        return Device("unknown", "Paddle trace with device events but no device type")
    return Device(
        "CPU", "Paddle trace with host events only: the operators ran on the host (or the device was not profiled)"
    )


def tasks_device(tasks: pl.DataFrame) -> DeviceKind:
    """The device kind a tasks frame alone tells, for callers without the profile: host
    operators only (task type CPU) are CPU, Paddle's device kernels (KERNEL) unknown, anything
    else (msprof task types) NPU."""
    types = set(tasks["task_type"].drop_nulls().unique().to_list()) if tasks.height else set()
    if not types or not types <= set(HOST_TASK_TYPES):
        return "NPU"
    return "CPU" if types == {"CPU"} else "unknown"
