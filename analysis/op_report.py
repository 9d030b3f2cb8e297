"""A markdown report on one task, for the operator developers.

When an op's compute time is too long the fix is inside the op: its owners need the op name
and type, shapes, dtypes and formats, how long it ran, and how the other calls with the same
shape behaved. This is what the user pastes into an issue for the operator team.

An `msprof op` folder (parsers/msprof_op.py) beside the capture adds a "msprof op" section to
the report of a task its kernel is (by op name or op type; a mix kernel's `_mix_aic` /
`_mix_aiv` suffix aside): pipe utilisation, memory traffic, L2 hit rate, block dim and the
bound. Alone, such a folder gets the same section per kernel (`msprof_op_report`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from npuscope.parsers import Profile, ProfileError
from npuscope.parsers.msprof_op import Figure, Kernel, MsprofOp, read_msprof_op
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


def _block(diagnosis: Diagnosis, task: dict[str, Any]) -> str:
    """Block Num, and the card's cores of the task's kind when the capture tells them."""
    dev = diagnosis.devices.get(task["card"])
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
        f for f in diagnosis.for_card(task["card"]) if task["op_type"] in f.op_types or task["op_name"] in f.op_names
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
        f"| Block Num | {_block(diagnosis, task)} |",
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
    lines += _beside(profile.capture.msprof_op, task, diagnosis.thresholds.bound_min_pct)
    return printable("\n".join(lines) + "\n")  # names and shapes are untrusted text


# --------------------------------------------------------------------------- msprof op


def _beside(folders: tuple[Path, ...], task: dict[str, Any], min_pct: float) -> list[str]:
    """The msprof op section of a task's report: the kernels of the folders beside the
    capture that are this task (by op name, else op type); a line when none is."""
    lines: list[str] = []
    others: list[str] = []
    for folder in folders:
        try:
            op = read_msprof_op(folder)
        except ProfileError as exc:
            lines += ["", f"msprof op: {exc}"]
            continue
        hits = [k for k in op.kernels if k.named(task["op_name"])] or [
            k for k in op.kernels if k.named(task["op_type"])
        ]
        for kernel in hits:
            lines += ["", *kernel_section(op, kernel, min_pct, "###")]
        if not hits:
            others += [f"`{k.op_name}`" for k in op.kernels]
    if others and not any(line.startswith("### msprof op") for line in lines):
        lines += [
            "",
            f"msprof op: no kernel of the msprof op folder(s) beside the capture is "
            f"`{task['op_name']}` ({_v(task['op_type'])}); kernels: {', '.join(others[:10])}.",
        ]
    return lines


def kernel_bound(kernel: Kernel, min_pct: float) -> str:
    """The bound of a kernel: its busiest pipe (analysis/bound.py `bound_of`, the rule of the
    op statistics: below `min_pct` % no pipe bounds it, msprof-analyze's "no bound" of
    OperatorBoundChecker; its AICorePerformanceChecker likewise calls a cube op mac- or
    mte2-bound by which ratio passes its threshold)."""
    return bound_of(dict(kernel.bound_pipes), min_pct)


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.1f}%"


def _figure(f: Figure) -> str:
    if f.unit == "ratio":
        return _pct(f.value)
    if f.unit == "%":
        return f"{f.value:.2f}%"
    if f.unit in ("ops", "requests"):
        return f"{f.value:,.0f}"
    return f"{f.value:,.3f} {f.unit}".rstrip()


def _kernel_id(kernel: Kernel) -> str:
    where = f"{kernel.folder.name}" if not kernel.launch else kernel.launch
    return f"`{kernel.op_name}` ({where})"


def kernel_section(op: MsprofOp, kernel: Kernel, min_pct: float, level: str = "##") -> list[str]:
    """One kernel's figures as markdown: basic info and bound, pipe utilisation, memory
    traffic, bandwidth, L2 cache, operations and conflicts, notes, files."""
    bound = kernel_bound(kernel, min_pct)
    busiest = max(((p, v) for p, v in kernel.bound_pipes if v is not None), key=lambda pv: pv[1], default=None)
    why = f" (busiest pipe: {busiest[0]} {_pct(busiest[1])} of the kernel's time)" if busiest else ""
    block = "-" if kernel.block_dim is None else f"{kernel.block_dim:,}"
    if kernel.mix_block_dim is not None:
        block += f" (Mix Block Dim {kernel.mix_block_dim:,})"
    freq = "-" if kernel.current_freq_mhz is None else f"{kernel.current_freq_mhz:,.0f}"
    if kernel.rated_freq_mhz is not None:
        freq += f" (rated {kernel.rated_freq_mhz:,.0f})"
    lines = [
        f"{level} msprof op: {_kernel_id(kernel)}",
        "",
        "| field | value |",
        "|---|---|",
        f"| Op Name | `{kernel.op_name}` |",
        f"| Op Type | {_v(kernel.op_type)} |",
        f"| Task Duration (us) | {_v(kernel.duration_us)} |",
        f"| Block Dim | {block} |",
        f"| Device | {_v(kernel.device)} |",
        f"| Frequency (MHz) | {freq} |",
        f"| Bound | {bound}: {BOUND_WORDS[bound]}{why} |",
        f"| msprof op folder | `{op.path}` |",
    ]
    if kernel.ratios:
        units = list(dict.fromkeys(u for _, u, _ in kernel.ratios))
        lines += [
            "",
            "Pipe utilisation (share of the kernel's time each pipe was busy, mean over the cores):",
            "",
            "| pipe | cube cores (aic) | vector cores (aiv) |",
            "|---|---:|---:|",
        ]
        lines += [f"| {u} | {_pct(kernel.ratio('aic', u))} | {_pct(kernel.ratio('aiv', u))} |" for u in units]
    for title, figures in (
        ("Memory traffic (Memory.csv, summed over the cores)", kernel.memory),
        ("Bandwidth (mean over the cores; usage rates: the busiest core)", kernel.bandwidth),
        ("L2 cache (L2Cache.csv: hits over requests of all cores)", kernel.l2),
        ("Operations and UB conflicts", kernel.other),
    ):
        if figures:
            lines += ["", f"{title}:", "", "| figure | value |", "|---|---:|"]
            lines += [f"| {f.label} | {_figure(f)} |" for f in figures]
    if not (kernel.ratios or kernel.memory or kernel.l2):
        lines += [
            "",
            "No pipe, memory or L2 figures: only OpBasicInfo.csv was read (collect with "
            "`msprof op --aic-metrics=Default`).",
        ]
    notes = (*kernel.notes, *op.notes)
    if notes:
        lines += ["", *[f"- note: {n}" for n in notes]]
    lines += ["", "Files: " + ", ".join(f"`{f.name}`" for f in kernel.files)]
    return lines


def msprof_op_listing(ops: list[MsprofOp], min_pct: float) -> list[str]:
    """The kernels of msprof op folders, one table row each (`#N` picks one with --op)."""
    lines = [
        "| # | Op Name | Op Type | Task Duration (us) | Block Dim | Device | Bound | folder |",
        "|---:|---|---|---:|---:|---|---|---|",
    ]
    i = 0
    for op in ops:
        for k in op.kernels:
            where = op.path.name + (f"/{k.launch}" if k.launch else "")
            lines.append(
                f"| #{i} | `{k.op_name}` | {_v(k.op_type)} | {_v(k.duration_us)} | {_v(k.block_dim)} | "
                f"{_v(k.device)} | {kernel_bound(k, min_pct)} | `{where}` |"
            )
            i += 1
    return lines


def msprof_op_report(ops: list[MsprofOp], selector: str | None, min_pct: float) -> str:
    """`report` of msprof op folders alone: the kernel list, then the op report of the
    kernel `selector` names (or of the only kernel), or a hint to name one."""
    kernels = [(op, k) for op in ops for k in op.kernels]
    names = ", ".join(op.path.name for op in ops)
    lines = [f"# msprof op: {names}", "", f"{len(kernels):,} kernel(s):", "", *msprof_op_listing(ops, min_pct)]
    for note in (n for op in ops for n in op.notes):
        lines += ["", f"note: {note}"]
    chosen: list[tuple[MsprofOp, Kernel]] = []
    if selector is not None:
        if selector.startswith("#") and selector[1:].isdigit() and int(selector[1:]) < len(kernels):
            chosen = [kernels[int(selector[1:])]]
        else:
            chosen = [(op, k) for op, k in kernels if k.named(selector)][:1] or [
                (op, k) for op, k in kernels if k.op_type == selector
            ][:1]
        if not chosen:
            listed = ", ".join(k.op_name for _, k in kernels[:10]) or "none"
            raise ProfileError(f"no kernel named {selector!r} in {names}; kernels: {listed} (or #N)")
    elif len(kernels) == 1:
        chosen = kernels
    else:
        lines += ["", "Name one with `--op NAME` or `--op #N` for its report."]
    for op, kernel in chosen:
        lines += ["", *kernel_section(op, kernel, min_pct, "##")]
    return printable("\n".join(lines) + "\n")  # kernel names are untrusted text
