"""The small sums the operator rules share: a share of a whole, sums per op type, and the
sample size under which shares of compute say little."""

from __future__ import annotations

import polars as pl

SMALL_SAMPLE_TASKS = 100
"""Below this many operator tasks on a card, a share of compute says little about the run: the
findings say the capture is a small sample (a stable step of a real training runs thousands)."""


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
