"""A markdown report on one task, for the operator developers.

When an op's compute time is too long the fix is inside the op: its owners need the op name
and type, shapes, dtypes and formats, how long it ran, and how the other calls with the same
shape behaved. This is what the user pastes into an issue for the operator team.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from npuscope.parsers import Profile, ProfileError
from npuscope.parsers.device_info import device_info
from npuscope.text import printable

from .bound import BOUND_WORDS, PIPE_NAMES, UNKNOWN_BOUND, bound_of, pipe_ratios
from .diagnose import Diagnosis


def find_task(diagnosis: Diagnosis, selector: str, card: str | None = None) -> dict[str, Any]:
    """A task by `#ROW` (row index) or by op name / op type (its longest task)."""
    tasks = diagnosis.tasks if card is None else diagnosis.tasks.filter(pl.col("card") == card)
    if selector.startswith("#") and selector[1:].isdigit():
        hit = tasks.filter(pl.col("row") == int(selector[1:]))
    else:
        hit = tasks.filter(pl.col("op_name") == selector)
        if hit.height == 0:
            hit = tasks.filter(pl.col("op_type") == selector)
    if hit.height == 0:
        raise ProfileError(f"no task named {selector!r} (give an Op Name, an OP Type or #ROW)")
    return hit.sort("duration_us", descending=True).row(0, named=True)


def _v(value: object) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}"
    return str(value)


def _bound_rows(profile: Profile, diagnosis: Diagnosis, task: dict[str, Any]) -> list[str]:
    """The op type's bound on the task's card and its pipe ratios (analysis/bound.py)."""
    of_type = diagnosis.tasks.filter((pl.col("card") == task["card"]) & (pl.col("op_type") == task["op_type"]))
    ratios = pipe_ratios(of_type, ("op_type",))
    row = ratios.row(0, named=True) if ratios.height else {}
    bound = bound_of(row, diagnosis.thresholds.bound_min_pct) if row else UNKNOWN_BOUND
    pipes = ", ".join(f"{p} {row[p]:.3f}" for p in PIPE_NAMES if row.get(p) is not None)
    return [
        f"| Bound ({_v(task['op_type'])} on this card) | {bound}: {BOUND_WORDS[bound]} |",
        f"| Pipe ratios (duration-weighted) | {pipes or '-'} |",
    ]


def _block(profile: Profile, task: dict[str, Any]) -> str:
    """Block Num, and the card's cores of the task's kind when the capture tells them."""
    dev = device_info(profile.capture, profile.cards).get(task["card"])
    if dev is None or not dev.ai_core_num or task.get("block_num") is None:
        return _v(task.get("block_num"))
    vector = task["task_type"] in ("AI_VECTOR_CORE", "MIX_AIV") and dev.aiv_num
    cores = f"{dev.aiv_num} vector cores" if vector else f"{dev.ai_core_num} AI cores"
    how = f"assumed from the chip name {dev.chip}" if dev.assumed else dev.source
    return f"{task['block_num']} (of {cores}, {how})"


def op_report(profile: Profile, diagnosis: Diagnosis, task: dict[str, Any]) -> str:
    same = diagnosis.tasks.filter(
        (pl.col("card") == task["card"])
        & (pl.col("op_type") == task["op_type"])
        & (pl.col("input_shapes").eq_missing(task["input_shapes"]))
        & (pl.col("input_dtypes").eq_missing(task["input_dtypes"]))
    )
    stats = same.select(
        pl.len().alias("n"),
        pl.col("duration_us").sum().alias("total"),
        pl.col("duration_us").min().alias("min"),
        pl.col("duration_us").mean().alias("avg"),
        pl.col("duration_us").max().alias("max"),
        pl.col("wait_us").mean().alias("wait_avg"),
    ).row(0, named=True)
    named = [
        f for f in diagnosis.for_card(task["card"])
        if task["op_type"] in f.op_types or task["op_name"] in f.op_names
    ]
    lines = [
        f"## Op report: `{task['op_name']}` ({_v(task['op_type'])})",
        "",
        "| field | value |",
        "|---|---|",
        f"| Op Name | `{task['op_name']}` |",
        f"| OP Type | {_v(task['op_type'])} |",
        f"| Task Type | {_v(task['task_type'])} |",
        *([f"| interface | {'aclnn' if task['is_aclnn'] else 'aclop'} |"] if diagnosis.device == "NPU" else []),
        f"| OP State | {_v(task['op_state'])} |",
        f"| Input Shapes | `{_v(task['input_shapes'])}` |",
        f"| Input Data Types | {_v(task['input_dtypes'])} |",
        f"| Input Formats | {_v(task['input_formats'])} |",
        f"| Output Shapes | `{_v(task['output_shapes'])}` |",
        f"| Output Data Types | {_v(task['output_dtypes'])} |",
        f"| Output Formats | {_v(task['output_formats'])} |",
        f"| Block Num | {_block(profile, task)} |",
        *(_bound_rows(profile, diagnosis, task) if diagnosis.device == "NPU" else []),
        f"| Task Duration (us) | {_v(task['duration_us'])} |",
        f"| Task Wait Time (us) | {_v(task['wait_us'])}"
        + (f" (cause: {task['wait_cause']}, {task['wait_confidence']})" if task.get("wait_cause") else "")
        + " |",
        f"| Start (us from card start) | {_v(task['start_us'])} |",
        f"| card | {task['card']} |",
        "",
        f"### All {task['op_type']} tasks with these input shapes and dtypes on card {task['card']}",
        "",
        "| calls | total (us) | min (us) | avg (us) | max (us) | avg wait (us) |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {stats['n']:,} | {_v(stats['total'])} | {_v(stats['min'])} | {_v(stats['avg'])} | "
        f"{_v(stats['max'])} | {_v(stats['wait_avg'])} |",
        "",
        f"Capture: `{profile.capture.name}`, {profile.layout} ({profile.era}).",
    ]
    if named:
        lines += ["", "### Findings naming it", ""]
        lines += [f"- `{f.rule}` ({f.severity}): {f.title}. {f.advice}" for f in named]
    return printable("\n".join(lines) + "\n")  # names and shapes are untrusted text
