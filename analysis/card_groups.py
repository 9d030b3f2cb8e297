"""Every diagnosed card's frames at once (`Cards`), as the operator rules see them, and the
grouped reads the rules share.

Each rule runs once over every card, grouping by card (and op type): its polars work is a few
passes over the rows, whatever the number of cards, so an export of thousands of cards costs
what its rows cost. Findings come out in the order of `Cards.cards`, each card's in the order
its rows give them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

import polars as pl

from npuscope.parsers import Profile
from npuscope.parsers.by_card import card_rows, per_frame
from npuscope.parsers.columns import UNKNOWN
from npuscope.parsers.device_info import DeviceInfo
from npuscope.parsers.frames import is_communication

from .bound import op_type_bounds
from .device_kind import DeviceKind
from .evidence import TASK_EVIDENCE, EvidenceRow
from .task_kinds import custom_kernel
from .thresholds import Thresholds

Key = tuple[Any, ...]

_NO_FACTS: dict[str, Any] = {
    "tasks": 0,
    "compute_n": 0,
    "compute_us": 0.0,
    "wait_us": 0.0,
    "known_types": False,
    "op_state_n": 0,
    "dynamic_n": 0,
}


@dataclass(frozen=True)
class Cards:
    """The diagnosed cards' frames, as the rules see them."""

    cards: tuple[str, ...]  # the cards to judge, in the order their findings come out
    tasks: pl.DataFrame  # canonical tasks of these cards + wait_cause, wait_confidence, start_us
    stat: pl.DataFrame  # op statistics of these cards
    has_timeline: bool
    compile_events: Mapping[str, int]  # per card: aclopCompileAndExecute calls seen for it
    statistic_derived: bool
    pmu: bool
    time_problem: str | None = None  # start times unusable: no spans, no wait causes
    framework: str = "unknown"  # one of FRAMEWORKS (analysis/framework.py): picks the advice's wording
    profile: Profile | None = None  # the capture: PMU ratios of the cards
    kind: DeviceKind = "NPU"  # the capture's device (analysis/device_kind.py): picks rules and words
    devices: Mapping[str, DeviceInfo] = field(default_factory=dict)  # core counts read with the capture

    def tasks_of(self, card: str) -> pl.DataFrame:
        """One card's tasks."""
        return card_rows(self.tasks, card)

    @cached_property
    def _facts(self) -> dict[Key, dict[str, Any]]:
        """Per card, in one pass: tasks, operator (non-communication) tasks and their time,
        wait, whether any operator task has a known type, OP State values and dynamic ones."""
        compute = ~is_communication()
        return grouped(
            self.tasks,
            ("card",),
            pl.len().alias("tasks"),
            compute.sum().alias("compute_n"),
            pl.col("duration_us").filter(compute).sum().alias("compute_us"),
            pl.col("wait_us").sum().alias("wait_us"),
            (pl.col("op_type") != UNKNOWN).filter(compute).any().alias("known_types"),
            pl.col("op_state").count().alias("op_state_n"),
            (pl.col("op_state") == "dynamic").sum().alias("dynamic_n"),
        )

    def fact(self, card: str, name: str) -> Any:
        """One of `_facts` for a card (a card without tasks has none of them)."""
        value = self._facts.get((card,), _NO_FACTS)[name]
        return _NO_FACTS[name] if value is None else value

    def compute_us(self, card: str) -> float:
        """The card's operator time: every task but the collectives."""
        return float(self.fact(card, "compute_us"))

    def wait_us(self, card: str) -> float:
        return float(self.fact(card, "wait_us"))

    @cached_property
    def _custom(self) -> dict[str, frozenset[str]]:
        if self.kind != "NPU":  # Ascend C kernels: an NPU's only
            return {}
        got = self.tasks.filter(custom_kernel()).group_by("card").agg(pl.col("op_type").unique())
        return {card: frozenset(types) for card, types in got.iter_rows()}

    def custom_types(self, card: str) -> frozenset[str]:
        """Op types of the application's own kernels on the card."""
        return self._custom.get(card, frozenset())

    def with_custom(self, rows: pl.DataFrame) -> pl.DataFrame:
        """`rows` with `_custom`: whether the row's op type is a custom kernel's on its card."""
        pairs = [(card, t) for card, types in self._custom.items() for t in types]
        known = pl.DataFrame(
            {"card": [p[0] for p in pairs], "op_type": [p[1] for p in pairs], "_custom": [True] * len(pairs)},
            schema={"card": rows.schema["card"], "op_type": rows.schema["op_type"], "_custom": pl.Boolean},
        )
        joined = rows.join(known, on=["card", "op_type"], how="left", maintain_order="left")
        return joined.with_columns(pl.col("_custom").fill_null(False))

    def bounds(self, card: str, th: Thresholds) -> dict[str, str]:
        """op type -> bound type (analysis/bound.py) on the card; empty without PMU ratios."""
        if self.profile is None or not self.profile.pmu_columns:
            return {}
        min_pct = th.bound_min_pct
        # Every card's bounds in one grouped pass, kept while the profile's tasks live.
        every = per_frame(self.profile.tasks, ("op_type_bounds", min_pct), lambda t: op_type_bounds(t, min_pct))
        mine = card_rows(every, card)
        return {r[0]: r[1] for r in mine.select("op_type", "bound").iter_rows() if r[0] is not None}


def grouped(rows: pl.DataFrame, keys: Sequence[str], *aggs: pl.Expr) -> dict[Key, dict[str, Any]]:
    """One row (a dict, keys included) per `keys` group of `rows` with the `aggs`, by the
    group's key values."""
    got = rows.group_by(list(keys)).agg(*aggs)
    return {tuple(r[k] for k in keys): r for r in got.iter_rows(named=True)}


def by_card(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows (dicts with a `card`) by card, each card's in their order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["card"], []).append(r)
    return out


def first_names(limit: int = 5, column: str = "op_name", alias: str = "_names") -> pl.Expr:
    """Aggregation: a group's first `limit` distinct values of `column`, nulls left out, in
    row order (the op names a finding names)."""
    return pl.col(column).drop_nulls().unique(maintain_order=True).head(limit).alias(alias)


def per_group(rows: pl.DataFrame, value: str, *extra: pl.Expr) -> list[dict[str, Any]]:
    """Per card and op type of `rows`: `_n` rows, `_t` the sum of `value`, `_names` and `extra`
    aggregations; within a card the most `_t` first, ties by op type."""
    grouped = rows.group_by(["card", "op_type"], maintain_order=True).agg(
        pl.len().alias("_n"), pl.col(value).sum().alias("_t"), first_names(), *extra
    )
    return list(grouped.sort(["_t", "op_type"], descending=[True, False]).iter_rows(named=True))


def top_rows(
    rows: pl.DataFrame, keys: Sequence[str], by: str, n: int, cols: Sequence[str]
) -> dict[Key, list[dict[str, Any]]]:
    """Per `keys` group: the n rows with the most `by` (ties by row) as dicts of `cols`, the
    most first, a null `by` first (as a sort of the top rows puts it), ties by row."""
    if n <= 0 or rows.height == 0:
        return {}
    picked = (
        rows.select(*[k for k in keys if k not in cols], *cols, *([] if "row" in cols else ["row"]))
        .sort([by, "row"], descending=[True, False], nulls_last=True)
        .group_by(list(keys), maintain_order=True)
        .head(n)
        .sort([by, "row"], descending=[True, False])
    )
    out: dict[Key, list[dict[str, Any]]] = {}
    for r in picked.iter_rows(named=True):
        out.setdefault(tuple(r[k] for k in keys), []).append({c: r[c] for c in cols})
    return out


def evidence_by(rows: pl.DataFrame, keys: Sequence[str], by: str, n: int) -> dict[Key, tuple[EvidenceRow, ...]]:
    """Per `keys` group of task rows: the n rows with the most `by` (ties by row), ordered as
    a finding's evidence is (analysis/evidence.py `task_rows`)."""
    cols = [c for c in TASK_EVIDENCE if c in rows.columns]
    return {k: tuple(cast(EvidenceRow, r) for r in v) for k, v in top_rows(rows, keys, by, n, cols).items()}
