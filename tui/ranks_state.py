"""What the Ranks view shows, without Textual: a cluster's ranks as rows, their filter and order.

The rows come from the cluster summary (`npuscope.analysis.cluster.ClusterSummary`), one per
rank, in rank order, marked `slow` (a slow rank of the summary) or `damaged` (the rank could
not be read; its one-line error is kept). The sort and the filter text live in the screen's
`ViewState` under the table name `RANKS` (tui/view_state.py), so a second press reverses as in
the other tables. The filter language of the Ranks view is small and strict:

    3 / slow / node01  text: the rank, its folder's name, its mark, its error or the files it
                       lacks contains it
    rank:3             rank 3; also rank:0-7, rank:1,5,9-12
    stage:1            the ranks of pipeline stage 1; also stage:0-1
    is:slow            slow ranks; is:damaged the ranks that could not be read; is:ok the rest;
                       is:partial the ranks lacking files the others have
    step>5ms           comparisons: step compute comm exposed free bubble wait (us, ms, s) and
                       tasks
    -term              negates a term

Every time is the summary's: a mean per step over the rank's steps (`steps` 0: totals over its
tasks). A rank that lacks files the other ranks have (`missing`) keeps its note, "no
kernel_details.csv, ...", in the `note` column beside a damaged rank's error.

No Textual, no Rich.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import polars as pl

RANKS = "ranks"
"""The table name of the Ranks view in the view state."""
SLOW = "slow"
DAMAGED = "damaged"

PARTIAL = "partial"
RANK_FILTER_HELP = (
    "/ filter ranks: text  rank:0-7,12  stage:1  is:slow  is:damaged  is:partial  step>5ms  tasks<100  -term"
)

RANKS_QUERY_HELP = """\
Every space-separated term must match; -term negates.
  3  slow  node01  the rank, its folder's name, its mark (slow, damaged), its error or the
                   files it lacks (kernel_details) contains it
  rank:3           rank 3; also rank:0-7 and rank:1,5,9-12
  stage:1          the ranks of pipeline stage 1; also stage:0-1
  is:slow          the slow ranks; is:damaged the ranks that could not be read; is:ok the rest
  is:partial       the ranks that lack files the others have (training-level files only)
  step>5ms         mean step time; also compute comm exposed free bubble wait (us, ms, s: >= < <= =)
  tasks<1000       the rank's task count"""

# The columns the other tables' sort keys mean here: d the rank's step time, w its wait.
SORT_KEYS = {"duration_us": "step_us", "wait_us": "wait_us"}
SORT_COLUMNS = (
    "stage",
    "step_us",
    "compute_us",
    "communication_us",
    "exposed_comm_us",
    "free_us",
    "bubble_us",
    "wait_us",
    "tasks",
)
_CMP_FIELDS = {
    "step": "step_us",
    "compute": "compute_us",
    "comm": "communication_us",
    "communication": "communication_us",
    "exposed": "exposed_comm_us",
    "free": "free_us",
    "bubble": "bubble_us",
    "wait": "wait_us",
    "tasks": "tasks",
}
_UNITS = {"": 1.0, "us": 1.0, "µs": 1.0, "ms": 1_000.0, "s": 1_000_000.0}
_CMP_RE = re.compile(r"^([a-z]+)(>=|<=|==|=|>|<)([0-9]*\.?[0-9]+)(us|µs|ms|s)?$")
_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
_TEXT_COLUMNS = ("rank", "folder", "mark", "error", "note")

SCHEMA: dict[str, Any] = {
    "row": pl.UInt32,
    "rank": pl.String,
    "rank_no": pl.Int64,
    "folder": pl.String,
    "mark": pl.String,
    "stage": pl.Int64,
    "steps": pl.Int64,
    "step_us": pl.Float64,
    "compute_us": pl.Float64,
    "communication_us": pl.Float64,
    "exposed_comm_us": pl.Float64,
    "free_us": pl.Float64,
    "bubble_us": pl.Float64,
    "wait_us": pl.Float64,
    "tasks": pl.Int64,
    "error": pl.String,
    "missing": pl.String,
    "note": pl.String,
}


class RankLike(Protocol):
    """The fields of `analysis.cluster.RankSummary` the view reads."""

    @property
    def rank(self) -> str: ...
    @property
    def folder(self) -> Any: ...
    @property
    def step_us(self) -> float | None: ...
    @property
    def compute_us(self) -> float: ...
    @property
    def communication_us(self) -> float: ...
    @property
    def exposed_comm_us(self) -> float: ...
    @property
    def free_us(self) -> float: ...
    @property
    def wait_us(self) -> float | None: ...
    @property
    def tasks(self) -> int: ...
    @property
    def error(self) -> str | None: ...
    @property
    def steps(self) -> int: ...
    @property
    def bubble_us(self) -> float | None: ...
    @property
    def stage(self) -> int | None: ...
    @property
    def missing(self) -> tuple[str, ...]: ...


def rank_mark(rank: RankLike, slow_ranks: Sequence[str]) -> str:
    if rank.error:
        return DAMAGED
    return SLOW if rank.rank in slow_ranks else ""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value == value else None


def _error_line(error: str | None, folder: Any) -> str | None:
    """The error on one line, the rank folder's path left out of the files it names."""
    if not error:
        return None
    line = " ".join(str(error).split())
    return line.replace(f"{folder}/", "").replace(f"{folder}", ".")


def missing_text(missing: Sequence[str]) -> str | None:
    """The files a rank lacks, as its note says them: "no kernel_details.csv, trace_view.json"."""
    return f"no {', '.join(missing)}" if missing else None


def training_only_line(rank: RankLike) -> str | None:
    """What Enter says of a readable rank without tasks (its folder holds training-level
    files only: opening it would show no task and no card), None for any other rank."""
    if rank.error or rank.tasks:
        return None
    lacks = f", no {', '.join(rank.missing)}" if rank.missing else ""
    return (
        f"rank {rank.rank} holds training-level files only{lacks}: no task to open; "
        "its figures are in this view and in the parallel view (p)"
    )


def rank_rows(ranks: Sequence[RankLike], slow_ranks: Sequence[str]) -> pl.DataFrame:
    """One row per rank in the order given (the summary's: rank order), with its mark; `note`
    is a damaged rank's error, else the files the rank lacks."""
    rows = []
    for i, r in enumerate(ranks):
        error = _error_line(r.error, r.folder)
        missing = missing_text(r.missing)
        rows.append(
            {
                "row": i,
                "rank": str(r.rank),
                "rank_no": int(r.rank) if str(r.rank).isdigit() else None,
                "folder": getattr(r.folder, "name", str(r.folder)),
                "mark": rank_mark(r, slow_ranks),
                "stage": r.stage,
                "steps": int(r.steps or 0),
                "step_us": _number(r.step_us),
                "compute_us": _number(r.compute_us),
                "communication_us": _number(r.communication_us),
                "exposed_comm_us": _number(r.exposed_comm_us),
                "free_us": _number(r.free_us),
                "bubble_us": _number(r.bubble_us),
                "wait_us": _number(r.wait_us),
                "tasks": int(r.tasks) if r.tasks is not None else None,
                "error": error,
                "missing": missing,
                "note": error or missing,
            }
        )
    return pl.DataFrame(rows, schema=SCHEMA)


# ---------------------------------------------------------------- filter


class RankFilterError(ValueError):
    """A term of the filter that means nothing; the message is one line naming it."""

    def __init__(self, term: str, why: str) -> None:
        super().__init__(f"{term!r}: {why}")


@dataclass(frozen=True)
class RankTerm:
    kind: str  # "text", "rank", "stage", "is", "cmp"
    value: Any
    negate: bool
    raw: str


def _rank_spec(raw: str, spec: str) -> tuple[tuple[str, ...], tuple[tuple[int, int], ...]]:
    names: list[str] = []
    spans: list[tuple[int, int]] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        m = _RANGE_RE.match(part)
        if m:
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) is not None else lo
            if hi < lo:
                raise RankFilterError(raw, f"the range {part} ends before it starts")
            spans.append((lo, hi))
        else:
            names.append(part)
    if not names and not spans:
        raise RankFilterError(raw, "name a rank: rank:3, rank:0-7, rank:1,5")
    return tuple(names), tuple(spans)


def parse_rank_filter(text: str) -> tuple[RankTerm, ...]:
    """The terms of `text`; raises `RankFilterError` on a term that means nothing."""
    terms = []
    for raw in text.split():
        negate = raw.startswith("-") and len(raw) > 1
        body = raw[1:] if negate else raw
        low = body.lower()
        if low.startswith("rank:"):
            terms.append(RankTerm("rank", _rank_spec(raw, body[5:]), negate, raw))
        elif low.startswith("stage:"):
            names, spans = _rank_spec(raw, body[6:])
            if names:
                raise RankFilterError(raw, "a stage is a number: stage:1, stage:0-1")
            terms.append(RankTerm("stage", spans, negate, raw))
        elif low.startswith("is:"):
            what = low[3:]
            if what not in (SLOW, DAMAGED, PARTIAL, "ok"):
                raise RankFilterError(raw, "is:slow, is:damaged, is:partial or is:ok")
            terms.append(RankTerm("is", what, negate, raw))
        elif (m := _CMP_RE.match(low)) is not None:
            field, op, number, unit = m.groups()
            if field not in _CMP_FIELDS:
                raise RankFilterError(raw, f"compare one of {', '.join(sorted(set(_CMP_FIELDS)))}")
            column = _CMP_FIELDS[field]
            if unit and column == "tasks":
                raise RankFilterError(raw, "tasks is a count, without a unit")
            terms.append(RankTerm("cmp", (column, op, float(number) * _UNITS[unit or ""]), negate, raw))
        elif any(ch in body for ch in "<>="):
            raise RankFilterError(raw, "a comparison is like step>5ms, wait>=100, tasks<1000")
        else:
            terms.append(RankTerm("text", low, negate, raw))
    return tuple(terms)


def _term_expr(term: RankTerm) -> pl.Expr:
    if term.kind == "text":
        expr = pl.lit(False)
        for column in _TEXT_COLUMNS:
            expr = expr | pl.col(column).str.to_lowercase().str.contains(term.value, literal=True).fill_null(False)
        return expr
    if term.kind == "rank":
        names, spans = term.value
        expr = pl.col("rank").is_in(list(names)) if names else pl.lit(False)
        for lo, hi in spans:
            expr = expr | pl.col("rank_no").is_between(lo, hi).fill_null(False)
        return expr
    if term.kind == "stage":
        expr = pl.lit(False)
        for lo, hi in term.value:
            expr = expr | pl.col("stage").is_between(lo, hi).fill_null(False)
        return expr
    if term.kind == "is" and term.value == PARTIAL:
        return pl.col("missing").is_not_null()
    if term.kind == "is":
        mark: str = {"ok": ""}.get(term.value, term.value)
        return pl.col("mark") == mark
    op: str
    number: float
    column, op, number = term.value
    col = pl.col(column)
    cmp = {">": col > number, ">=": col >= number, "<": col < number, "<=": col <= number}.get(op, col == number)
    return cmp.fill_null(False)


def rank_positions(frame: pl.DataFrame, terms: Sequence[RankTerm], key: str, descending: bool) -> pl.Series:
    """Positions of the rows of `frame` that every term matches, in the order of `key`
    ("row": rank order); ranks without a value for `key` come last either way."""
    exprs = [~_term_expr(t) if t.negate else _term_expr(t) for t in terms]
    indexed = frame.with_row_index("_p")
    if exprs:
        indexed = indexed.filter(pl.all_horizontal(exprs))
    if key != "row" and key in frame.columns:
        indexed = indexed.sort([key, "row"], descending=[descending, False], nulls_last=True)
    elif descending:
        indexed = indexed.reverse()
    return indexed["_p"]


# ---------------------------------------------------------------- moving between ranks


def neighbour(frame: pl.DataFrame, current: str | None, step: int) -> str | None:
    """The rank `step` places from `current` in rank order, skipping damaged ranks (None:
    no other rank can be opened)."""
    ranks = frame["rank"].to_list()
    marks = frame["mark"].to_list()
    if not ranks:
        return None
    start = ranks.index(current) if current in ranks else (-1 if step > 0 else 0)
    for n in range(1, len(ranks) + 1):
        i = (start + step * n) % len(ranks)
        if marks[i] != DAMAGED:
            return None if ranks[i] == current else ranks[i]
    return None
