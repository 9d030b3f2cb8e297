"""`fusible_sequence`: runs of device tasks that one fused CANN operator does (fusion_patterns).

Per card, the compute tasks in start order become one string, a letter per task (the aten
operator its type runs, ATEN_DEVICE_TYPES; `.` for any other type), and every pattern of
PATTERNS becomes a regular expression over those letters, the way msprof-analyze's
TimelineFusionOpsAnalyzer turns its rules into one over `-name-` pieces. One scan per card
finds every occurrence (the regex engine walks the string once; no Python loop over tasks);
the time of an occurrence is a difference of the card's cumulative durations. Occurrences
never overlap: a task belongs to the first, leftmost pattern that matches it.

The yaml's optimizer rules match the framework's `Optimizer.step#<Name>.step` calls instead
(`optimizer_findings`).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import cache
from typing import cast

import numpy as np
import polars as pl

from npuscope.parsers.frames import is_communication

from .evidence import EVIDENCE_FIELDS, EvidenceRow
from .findings import Finding
from .fusion_patterns import ATEN_DEVICE_TYPES, FUSED_OPTIMIZERS, OPTIMIZER_SOURCE, PATTERNS, FusionPattern
from .rule_names import FUSIBLE_SEQUENCE
from .thresholds import Thresholds

_OTHER = "."
_LETTERS = string.ascii_letters


@cache
def _letters() -> dict[str, str]:
    """aten name -> its letter."""
    return {aten: _LETTERS[i] for i, aten in enumerate(ATEN_DEVICE_TYPES)}


@cache
def _type_letters() -> dict[str, str]:
    """Lower-cased device op type -> the letter of its aten operator."""
    return {t.lower(): _letters()[aten] for aten, types in ATEN_DEVICE_TYPES.items() for t in types}


_TOKEN = re.compile(r"^(?:\((?P<group>[\w|]+)\)|(?P<name>\w+))(?P<repeat>\{\d+,\d+\}|[*+?])?$")


def pattern_regex(aten: str) -> str:
    """The regular expression over task letters of one yaml pattern, e.g.
    `(pow){0,1}-rsqrt-mul` -> `(?:[o]){0,1}[r][m]` (with the letters of those names)."""
    letters = _letters()
    alternatives = []
    for alternative in _split_top(aten):
        out = []
        for token in alternative.split("-"):
            m = _TOKEN.match(token.strip())
            if m is None:
                raise ValueError(f"fusion pattern {aten!r}: cannot read {token!r}")
            names = (m["group"] or m["name"]).split("|")
            unknown = [n for n in names if n not in letters]
            if unknown:
                raise ValueError(f"fusion pattern {aten!r}: no device types for {', '.join(unknown)}")
            out.append("[" + "".join(letters[n] for n in names) + "]" + (m["repeat"] or ""))
        alternatives.append("".join(out))
    return "|".join(f"(?:{a})" for a in alternatives)


def _split_top(aten: str) -> list[str]:
    """`a-b|c-d` -> [`a-b`, `c-d`]: the `|` outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(aten):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "|" and depth == 0:
            parts.append(aten[start:i])
            start = i + 1
    parts.append(aten[start:])
    return parts


@cache
def _scanner() -> re.Pattern[str]:
    # The lookahead lets the engine skip tasks of no pattern's type at once (3-4x faster on a
    # card where most tasks are other types) before it tries the alternatives.
    first = "".join(sorted(_letters().values()))
    alternatives = "|".join(f"(?P<p{i}>{pattern_regex(p.aten)})" for i, p in enumerate(PATTERNS))
    return re.compile(f"(?=[{first}])(?:{alternatives})")


@dataclass(frozen=True)
class Occurrences:
    """The occurrences of the patterns in a tasks frame, one row each."""

    tasks: pl.DataFrame  # the compute tasks in card and start order (the rows `first` points at)
    found: pl.DataFrame  # card, pattern (index into PATTERNS), first, length, time_us


def find_sequences(tasks: pl.DataFrame) -> Occurrences:
    """Every occurrence of PATTERNS in the compute tasks of each card of `tasks` (needs card,
    op_type, start_ns, duration_us; communication tasks are left out: they run on their own
    streams and break no sequence)."""
    compute = tasks.filter(~is_communication()) if "task_type" in tasks.columns else tasks
    in_order = compute.select(
        (
            (pl.col("card") > pl.col("card").shift(1))
            | ((pl.col("card") == pl.col("card").shift(1)) & (pl.col("start_ns") >= pl.col("start_ns").shift(1)))
        )
        .fill_null(True)
        .all()
    ).item()
    if not in_order:  # the parsers' tasks usually come in card and start order already
        compute = compute.sort(["card", "start_ns"], maintain_order=True, nulls_last=True)
    # A letter per distinct type (a few hundred), then one lookup per task.
    known = _type_letters()
    types = compute["op_type"].unique().drop_nulls().to_list()
    letters = compute["op_type"].replace_strict(
        {t: known.get(t.lower(), _OTHER) for t in types}, default=_OTHER, return_dtype=pl.String
    )
    durations = compute["duration_us"].fill_null(0.0).cast(pl.Float64).to_numpy()
    cumulative = np.concatenate(([0.0], np.cumsum(durations)))
    bounds = (
        compute.select("card")
        .with_row_index("i")
        .group_by("card", maintain_order=True)
        .agg(pl.col("i").min().alias("lo"), pl.col("i").max().alias("hi"))
    )
    scanner = _scanner()
    card_col: list[str] = []
    pattern_col: list[int] = []
    first_col: list[int] = []
    length_col: list[int] = []
    for card, lo, hi in bounds.iter_rows():
        text = str(letters.slice(lo, hi - lo + 1).str.join("").item())
        for m in scanner.finditer(text):
            if m.lastgroup is None or m.end() == m.start():
                continue
            card_col.append(card)
            pattern_col.append(int(m.lastgroup[1:]))
            first_col.append(lo + m.start())
            length_col.append(m.end() - m.start())
    first = np.asarray(first_col, dtype=np.int64)
    length = np.asarray(length_col, dtype=np.int64)
    found = pl.DataFrame(
        {
            "card": pl.Series(card_col, dtype=pl.String),
            "pattern": pl.Series(pattern_col, dtype=pl.Int64),
            "first": pl.Series(first, dtype=pl.Int64),
            "length": pl.Series(length, dtype=pl.Int64),
            "time_us": pl.Series(cumulative[first + length] - cumulative[first], dtype=pl.Float64),
        }
    )
    return Occurrences(compute, found)


def _advice(p: FusionPattern, framework: str) -> str:
    torch = f"torch_npu: {p.torch_npu}"
    paddle = f"Paddle: {p.paddle}" if p.paddle else "Paddle: no fused API documented for it"
    apis = {"torch_npu": torch, "paddle": paddle}.get(framework, f"{torch}; {paddle}")
    return (
        f"One fused operator does this sequence: {p.fused_op} (CANN {p.cann} and later). Call it "
        f"in place of the separate ops ({apis}). The time shown is the whole sequence; the fused "
        f"operator's own time cannot be read from this capture, so the saving is part of it. "
        f"Source: {p.source}."
    )


def _share(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 3) if whole > 0 else 0.0


def fusible_findings(
    tasks: pl.DataFrame, cards: tuple[str, ...], th: Thresholds, framework: str = "unknown"
) -> list[Finding]:
    """One `fusible_sequence` finding per card and pattern with at least
    `th.fusible_min_count` occurrences. `tasks` carries the diagnosis' columns (row, start_us,
    wait_cause) so the evidence rows are tasks the explorer can jump to."""
    occ = find_sequences(tasks.filter(pl.col("card").is_in(list(cards))))
    if occ.found.height == 0:
        return []
    types = occ.tasks["op_type"]
    compute_us = occ.tasks.group_by("card").agg(pl.col("duration_us").sum())
    compute_of = dict(compute_us.iter_rows())
    per = occ.found.group_by("card", "pattern").agg(pl.len().alias("n"), pl.col("time_us").sum().alias("t"))
    per = per.filter(pl.col("n") >= th.fusible_min_count).sort(
        ["card", "t", "pattern"], descending=[False, True, False]
    )
    cols = [c for c in (*EVIDENCE_FIELDS, "wait_cause", "row") if c in occ.tasks.columns]
    out = []
    for card, index, n, total in per.iter_rows():
        p = PATTERNS[index]
        mine = occ.found.filter((pl.col("card") == card) & (pl.col("pattern") == index))
        worst = mine.sort(["time_us", "first"], descending=[True, False]).head(th.evidence_rows)
        evidence: list[EvidenceRow] = []
        for first, length, t in worst.select("first", "length", "time_us").iter_rows():
            row = occ.tasks.row(first, named=True)
            ev = cast(EvidenceRow, {c: row[c] for c in cols})
            ev["sequence"] = "-".join(str(x) for x in types.slice(first, length).to_list())
            ev["sequence_us"] = t
            evidence.append(ev)
        # Every type of every occurrence (one gather): the first of the longest occurrence,
        # then the others sorted, so the same sequences give the same op types run after run
        # (the comparison matches findings by them).
        starts, lengths = mine["first"].to_numpy(), mine["length"].to_numpy()
        index = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths) + np.arange(lengths.sum())
        lead = str(evidence[0]["op_type"]) if evidence else ""
        rest = sorted(set(types.gather(index).drop_nulls().unique().to_list()) - {lead})
        seen = [lead, *rest] if lead else rest
        names = tuple(occ.tasks["op_name"].gather(mine["first"].head(5)).to_list())
        shown = evidence[0]["sequence"] if evidence else p.aten
        out.append(
            Finding(
                rule=FUSIBLE_SEQUENCE,
                severity="info",
                title=(
                    f"{n:,} sequence(s) {p.fused_op} does in one operator (e.g. {shown}): "
                    f"{total:,.0f} us in the separate ops"
                ),
                card=card,
                op_types=tuple(seen),
                op_names=names,
                count=int(n),
                time_us=float(total),
                share_pct=_share(float(total), float(compute_of.get(card) or 0.0)),
                advice=_advice(p, framework),
                evidence=tuple(evidence),
                threshold=f">= {th.fusible_min_count} occurrence(s) of {p.aten}",
            )
        )
    return out


def optimizer_findings(steps: pl.DataFrame, cards: tuple[str, ...], th: Thresholds) -> list[Finding]:
    """One `fusible_sequence` finding per card and optimizer of FUSED_OPTIMIZERS whose
    `Optimizer.step#<Name>.step` calls (`steps`, parsers/stacks.STEP_SCHEMA) number at least
    `th.fusible_min_count`: the step updates the parameters op by op, a fused torch_npu
    optimizer does it in a few fused operators. The time is the steps' host time (their device
    time is not told apart from the rest); the frame that called step() is named where the
    capture records it."""
    known = steps.filter(pl.col("card").is_in(list(cards)) & pl.col("optimizer").is_in(list(FUSED_OPTIMIZERS)))
    per = (
        known.group_by("card", "optimizer")
        .agg(pl.len().alias("n"), pl.col("host_us").sum().alias("t"))
        .filter(pl.col("n") >= th.fusible_min_count)
        .sort(["card", "t", "optimizer"], descending=[False, True, False])
    )
    out = []
    for card, name, n, total in per.iter_rows():
        mine = known.filter((pl.col("card") == card) & (pl.col("optimizer") == name))
        frames = (
            mine.filter(pl.col("frame").is_not_null())
            .group_by("frame")
            .agg(pl.col("host_us").sum())
            .sort(["host_us", "frame"], descending=[True, False])
        )
        frame = frames["frame"][0] if frames.height else None
        fused = FUSED_OPTIMIZERS[name]
        evidence: list[EvidenceRow] = []
        for r in mine.sort("host_us", descending=True).head(th.evidence_rows).iter_rows(named=True):
            row: EvidenceRow = {
                "op_name": r["op_name"],
                "op_type": "",
                "task_type": "host",
                "start_us": None,
                "duration_us": r["host_us"],
                "wait_us": None,
                "input_shapes": None,
                "input_dtypes": None,
                "frame": r["frame"],
                "row": None,
            }
            evidence.append(row)
        out.append(
            Finding(
                rule=FUSIBLE_SEQUENCE,
                severity="info",
                title=(
                    f"{n:,} {name}.step call(s), {total:,.0f} us of host time: {fused} fuses the update"
                    + (f"; step() called from {frame}" if frame else "")
                ),
                card=card,
                op_types=(),
                op_names=(f"Optimizer.step#{name}.step",),
                count=int(n),
                time_us=float(total),
                share_pct=0.0,
                advice=(
                    f"Use {fused} in place of torch.optim.{name}: it updates all parameters in a few fused "
                    "operators instead of several per parameter (torch's foreach implementation, where it "
                    "is on, already groups them: compare the step time). The time shown is the step's host "
                    f"time; the saving is part of it. Source: {OPTIMIZER_SOURCE}."
                ),
                evidence=tuple(evidence),
                threshold=f">= {th.fusible_min_count} {name}.step call(s)",
            )
        )
    return out
