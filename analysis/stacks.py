"""`host_dispatch`: the host time of the framework's operators, named by the user's code.

Where the capture holds the operators' call stacks (torch_npu with `with_stack=True`:
operator_details.csv, parsers/stacks.py), the host time each operator spent itself (Host Self
Duration, children not counted twice) is summed per card and per user frame (the first stack
frame outside the framework: `path:line (function)`). Without stacks nothing is said: no
finding names code it cannot see.

Where the capture also ties the CANN API calls to those operators (torch_npu's db export,
parsers/stacks.read_api_frames), a frame is named for an API: the `recompilation` finding names
the frame whose operators called aclopCompileAndExecute the longest (`heaviest_frame`, which
`sync_heavy` could use the same way for the synchronising APIs).

One finding, not two: the synchronising operators (`.item()` runs aten::_local_scalar_dense)
are left to `sync_heavy`, which counts the host synchronisation APIs; and on a card where
`recompilation` already fires, the host time is most likely the compilation it blames, so no
`host_dispatch` is made: the recompilation finding names, in its title, the frame that called
aclopCompileAndExecute where that is known, else (when the host time is over the threshold)
the frame with the most host time; its rule, time and evidence are unchanged (`with_stacks`).
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from .evidence import EvidenceRow
from .findings import Finding
from .rule_names import HOST_DISPATCH, RECOMPILATION
from .thresholds import Thresholds

SYNC_OPS = r"^aten::(?:item|_local_scalar_dense)$|(?i:synchronize)"
"""Framework operators that wait for the device: their host time is synchronisation."""

ADVICE = (
    "The host spends this time running the framework's operators called from the code named: "
    "fewer, larger operators there (the fused APIs, tensor code in place of Python loops over "
    "small tensors, no per-step re-creation of tensors) cut it; keep torch_npu's task queue on "
    "(TASK_QUEUE_ENABLE, on by default) so dispatch overlaps the device. Host time delays the "
    "device only where the device waits for it (see free_time, idle_device)."
)


def per_frame(stacks: pl.DataFrame) -> pl.DataFrame:
    """Per card and user frame: calls, host self time, device time and the operator with the
    most host time there; heaviest first. Synchronising operators and stacks without a user
    frame are left out."""
    rows = stacks.filter(pl.col("frame").is_not_null() & ~pl.col("op_name").str.contains(SYNC_OPS).fill_null(False))
    top = (
        rows.group_by("card", "frame", "op_name")
        .agg(pl.col("host_self_us").sum().alias("op_us"), pl.col("input_shapes").first())
        .sort(["op_us", "op_name"], descending=[True, False])
        .group_by("card", "frame", maintain_order=True)
        .first()
    )
    agg = rows.group_by("card", "frame").agg(
        pl.len().alias("calls"),
        pl.col("host_self_us").sum().alias("host_us"),
        pl.col("device_total_us").sum().alias("device_us"),
    )
    return agg.join(top.select("card", "frame", "op_name", "input_shapes"), on=["card", "frame"]).sort(
        ["card", "host_us", "frame"], descending=[False, True, False]
    )


def _evidence(frames: pl.DataFrame, n: int) -> tuple[EvidenceRow, ...]:
    out: list[EvidenceRow] = []
    for r in frames.head(n).iter_rows(named=True):
        row: EvidenceRow = {
            "op_name": r["op_name"],
            "op_type": "",
            "task_type": "host",
            "start_us": None,
            "duration_us": r["host_us"],
            "wait_us": None,
            "input_shapes": r["input_shapes"],
            "input_dtypes": None,
            "frame": r["frame"],
            "calls": r["calls"],
            "device_us": r["device_us"],
            "row": None,
        }
        out.append(row)
    return tuple(out)


COMPILE_API = r"^aclopCompileAndExecute$"


def heaviest_frame(api_frames: pl.DataFrame, card: str, api: str) -> tuple[str, int, float] | None:
    """(frame, calls, total us) of the user frame whose operators spent the most time in the
    CANN APIs matching the pattern `api` on `card`, or None when no call of them has a frame."""
    rows = api_frames.filter((pl.col("card") == card) & pl.col("api").str.contains(api).fill_null(False))
    if rows.height == 0:
        return None
    per = (
        rows.group_by("frame")
        .agg(pl.col("calls").sum(), pl.col("total_us").sum())
        .sort(["total_us", "frame"], descending=[True, False])
    )
    frame, calls, total = per.row(0)
    return str(frame), int(calls), float(total)


def _host_us(stacks: pl.DataFrame) -> float:
    rows = stacks.filter(~pl.col("op_name").str.contains(SYNC_OPS).fill_null(False))
    return float(rows["host_self_us"].sum() or 0.0)


def with_stacks(
    findings: list[Finding],
    stacks: pl.DataFrame,
    spans_us: dict[str, float],
    th: Thresholds,
    api_frames: pl.DataFrame | None = None,
) -> list[Finding]:
    """`findings` with the stack-based ones: a `host_dispatch` per card whose framework
    operators' host time (synchronising ones left out) is at least `th.host_dispatch_pct` of
    its span `spans_us[card]`. On a card with a `recompilation` finding there is none: that
    finding names the frame whose operators called aclopCompileAndExecute the longest (from
    `api_frames`), or, where that is unknown and the host time is over the threshold, the frame
    with the most host time. Cards without a user frame are left as they are."""
    if stacks.height == 0:
        return findings
    frames = per_frame(stacks)
    out = list(findings)
    for card in frames["card"].unique(maintain_order=True).to_list():
        mine = frames.filter(pl.col("card") == card)
        top = mine.row(0, named=True)
        span = spans_us.get(card) or 0.0
        host = _host_us(stacks.filter(pl.col("card") == card))
        pct = round(100.0 * host / span, 3) if span > 0 else 0.0
        heavy = span > 0 and pct >= th.host_dispatch_pct
        most = f"most in {top['frame']} ({top['op_name']}, {top['calls']:,} call(s), {top['host_us']:,.0f} us)"
        recompiled = [i for i, f in enumerate(out) if f.card == card and f.rule == RECOMPILATION]
        if recompiled:
            i = max(recompiled, key=lambda k: out[k].time_us)
            compiled = heaviest_frame(api_frames, card, COMPILE_API) if api_frames is not None else None
            if compiled is not None:
                frame, calls, total = compiled
                said = f"aclopCompileAndExecute called from {frame} ({calls} call(s), {total:,.0f} us)"
            elif heavy:
                said = f"framework operators' host time {host:,.0f} us = {pct:.1f}% of the span, {most}"
            else:
                continue
            out[i] = replace(out[i], title=f"{out[i].title}; {said}")
            continue
        if not heavy:
            continue
        out.append(
            Finding(
                rule=HOST_DISPATCH,
                severity="warning",
                title=f"Framework operators took {host:,.0f} us of host time = {pct:.1f}% of the span; {most}",
                card=card,
                op_types=(),
                op_names=tuple(mine["op_name"].unique(maintain_order=True).head(5).to_list()),
                count=int(mine["calls"].sum()),
                time_us=host,
                share_pct=pct,
                advice=ADVICE,
                evidence=_evidence(mine, th.evidence_rows),
                threshold=f"operators' host self time >= {th.host_dispatch_pct:g}% of the span, with call stacks",
            )
        )
    return out
