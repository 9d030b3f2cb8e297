"""One card's frames as the operator rules see them (`CardData`), and the small sums the rules
share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

import polars as pl

from npuscope.parsers import Profile
from npuscope.parsers.by_card import card_rows, per_frame
from npuscope.parsers.device_info import DeviceInfo
from npuscope.parsers.frames import is_communication

from .bound import op_type_bounds
from .device_kind import DeviceKind
from .task_kinds import custom_kernel
from .thresholds import Thresholds

SMALL_SAMPLE_TASKS = 100
"""Below this many operator tasks on a card, a share of compute says little about the run: the
findings say the capture is a small sample (a stable step of a real training runs thousands)."""


@dataclass(frozen=True)
class CardData:
    """One card's frames, as the rules see them."""

    card: str
    tasks: pl.DataFrame  # canonical tasks + wait_cause, wait_confidence, start_us
    stat: pl.DataFrame
    has_timeline: bool
    compile_events: int
    statistic_derived: bool
    pmu: bool
    time_problem: str | None = None  # start times unusable: no spans, no wait causes
    framework: str = "unknown"  # one of FRAMEWORKS (analysis/framework.py): picks the advice's wording
    profile: Profile | None = None  # the capture: PMU ratios of the card
    kind: DeviceKind = "NPU"  # the capture's device (analysis/device_kind.py): picks rules and words
    devices: Mapping[str, DeviceInfo] = field(default_factory=dict)  # core counts read with the capture
    # The frames of every card `tasks` and `stat` were taken from (diagnose's), or None: the
    # rows a rule selects are then filtered once over every card and split by card
    # (parsers/by_card.py), not filtered card by card.
    every_tasks: pl.DataFrame | None = None
    every_stat: pl.DataFrame | None = None

    def rows(self, where: pl.Expr) -> pl.DataFrame:
        """The card's tasks where `where` holds."""
        return _selected(self.tasks, self.every_tasks, self.card, where)

    def stat_rows(self, where: pl.Expr) -> pl.DataFrame:
        """The card's op statistics rows where `where` holds."""
        return _selected(self.stat, self.every_stat, self.card, where)

    @property
    def device(self) -> DeviceInfo | None:
        """The card's core counts, when the capture tells them."""
        return self.devices.get(self.card)

    @cached_property
    def _bounds(self) -> dict[float, dict[str, str]]:
        return {}

    def bounds(self, th: Thresholds) -> dict[str, str]:
        """op type -> bound type (analysis/bound.py) on this card; empty without PMU ratios."""
        if th.bound_min_pct not in self._bounds:
            out: dict[str, str] = {}
            if self.profile is not None and self.profile.pmu_columns:
                # Every card's bounds in one grouped pass, kept while the profile's tasks live.
                min_pct = th.bound_min_pct
                every = per_frame(
                    self.profile.tasks, f"op_type_bounds:{min_pct!r}", lambda t: op_type_bounds(t, min_pct)
                )
                frame = card_rows(every, self.card)
                out = {r[0]: r[1] for r in frame.select("op_type", "bound").iter_rows() if r[0] is not None}
            self._bounds[th.bound_min_pct] = out
        return self._bounds[th.bound_min_pct]

    @cached_property
    def custom_types(self) -> frozenset[str]:
        """Op types of the application's own kernels on this card (Ascend C kernels: NPU only)."""
        if self.kind != "NPU":
            return frozenset()
        return frozenset(self.rows(custom_kernel())["op_type"].unique().to_list())

    @cached_property
    def compute(self) -> pl.DataFrame:
        """Operator tasks: collectives are judged by communication analysis, not these rules."""
        return self.rows(~is_communication())

    @cached_property
    def compute_us(self) -> float:
        return float(self.compute["duration_us"].sum() or 0.0)

    @property
    def wait_us(self) -> float:
        return float(self.tasks["wait_us"].sum() or 0.0)


def _selected(mine: pl.DataFrame, every: pl.DataFrame | None, card: str, where: pl.Expr) -> pl.DataFrame:
    """`mine.filter(where)`; from one filter of `every` (kept while it lives) when given. The
    expression's serialized form (its columns, operators and every literal; its text shortens
    long lists) is the key: the same bytes, the same rows."""
    if every is None:
        return mine.filter(where)
    key = ("rows", where.meta.serialize(format="binary"))
    return card_rows(per_frame(every, key, lambda f: f.filter(where)), card)


def share(part: float, whole: float) -> float:
    """`part` as a % of `whole`, to 3 decimals; 0 without a whole."""
    return round(100.0 * part / whole, 3) if whole > 0 else 0.0


def per_type(rows: pl.DataFrame, value: str) -> list[tuple[str, int, float]]:
    """(op type, rows, sum of `value`) per op type, the most first, ties by op type."""
    grouped = (
        rows.group_by("op_type")
        .agg(pl.len().alias("n"), pl.col(value).sum().alias("t"))
        .sort(["t", "op_type"], descending=[True, False])
    )
    return [(r[0], int(r[1]), float(r[2])) for r in grouped.iter_rows()]


def names_of(rows: pl.DataFrame, op_type: str, limit: int = 5) -> tuple[str, ...]:
    """The first `limit` op names of `op_type` in `rows`."""
    names = rows.filter(pl.col("op_type") == op_type)["op_name"].drop_nulls().unique(maintain_order=True)
    return tuple(names.head(limit).to_list())
