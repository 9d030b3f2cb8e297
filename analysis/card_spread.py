"""Card against card in one profile: which card holds the others back, and where.

In a data-parallel run every card waits for the slowest at each collective, so one slow card
costs the whole job. `card_spread` gives per card compute, wait and communication (as defined
in `totals`), the slowest card, the spread between cards ((max - min) / mean, flagged above 5%
as msprof-analyze's slow-rank check does) and, per op type, the card where it is slowest.
The report prints it for every multi-card profile; the explorer's cards view shows it.

No Textual, no Rich.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from npuscope.parsers import Profile

from .table import rounded, table_for
from .totals import card_totals

SPREAD_FLAG_PCT = 5.0
"""(max - min) / mean across cards above which a card is flagged as slow (msprof-analyze)."""


@dataclass(frozen=True)
class CardTotals:
    card: str
    tasks: int
    compute_us: float
    communication_us: float
    wait_us: float


@dataclass(frozen=True)
class OpTypeSpread:
    """Where one op type is slowest: highest total on `slowest_card`, lowest on `fastest_card`."""

    op_type: str
    core_type: str
    slowest_card: str
    slowest_total_us: float
    fastest_card: str
    fastest_total_us: float
    spread_pct: float  # (max - min) / mean over the cards, absent = 0


@dataclass(frozen=True)
class CardSpread:
    cards: tuple[CardTotals, ...]
    slowest_card: str | None  # most compute
    compute_spread_pct: float
    wait_spread_pct: float
    communication_spread_pct: float
    threshold_pct: float
    op_types: tuple[OpTypeSpread, ...]  # by max - min, largest first

    @property
    def flagged(self) -> bool:
        """Compute differs between cards by more than the threshold: one card holds the rest back."""
        return self.compute_spread_pct > self.threshold_pct

    @property
    def wait_flagged(self) -> bool:
        return self.wait_spread_pct > self.threshold_pct


def _spread(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return 100.0 * (max(values) - min(values)) / mean if mean > 0 else 0.0


def card_spread(
    profile: Profile, cards: tuple[str, ...] | None = None, *, threshold_pct: float = SPREAD_FLAG_PCT
) -> CardSpread:
    """Card against card in one profile (default: every card). Cheap: two group-bys."""
    cards = tuple(cards or profile.cards)
    totals = card_totals(profile, profile.tasks, cards)
    per = tuple(
        CardTotals(
            c, int(totals[c]["tasks"]), totals[c]["compute_us"], totals[c]["communication_us"], totals[c]["wait_us"]
        )
        for c in cards
    )
    pos = {c: i for i, c in enumerate(cards)}
    slowest = max(per, key=lambda t: (t.compute_us, -pos[t.card])).card if per else None
    stat = (
        profile.op_statistic.filter(pl.col("card").is_in(list(cards)))
        .group_by("op_type", "core_type", "card")
        .agg(pl.col("total_us").sum())
    )
    by_type: dict[tuple[str, str], dict[str, float]] = {}
    for op_type, core, card, total in stat.iter_rows():
        by_type.setdefault((op_type, core), {})[card] = float(total or 0.0)
    ops = []
    for (op_type, core), got in by_type.items():
        vals = {c: got.get(c, 0.0) for c in cards}
        hi = max(cards, key=lambda c: (vals[c], -pos[c]))
        lo = min(cards, key=lambda c: (vals[c], pos[c]))
        ops.append(OpTypeSpread(op_type, core, hi, vals[hi], lo, vals[lo], _spread(list(vals.values()))))
    ops.sort(key=lambda o: (-(o.slowest_total_us - o.fastest_total_us), o.op_type, o.core_type))
    return CardSpread(
        cards=per,
        slowest_card=slowest,
        compute_spread_pct=_spread([t.compute_us for t in per]),
        wait_spread_pct=_spread([t.wait_us for t in per]),
        communication_spread_pct=_spread([t.communication_us for t in per]),
        threshold_pct=threshold_pct,
        op_types=tuple(ops),
    )


def card_spread_json(s: CardSpread) -> dict[str, Any]:
    return {
        "cards": [
            {
                "card": t.card,
                "tasks": t.tasks,
                "compute_us": rounded(t.compute_us),
                "communication_us": rounded(t.communication_us),
                "wait_us": rounded(t.wait_us),
            }
            for t in s.cards
        ],
        "slowest_card": s.slowest_card,
        "compute_spread_pct": rounded(s.compute_spread_pct),
        "wait_spread_pct": rounded(s.wait_spread_pct),
        "communication_spread_pct": rounded(s.communication_spread_pct),
        "threshold_pct": s.threshold_pct,
        "flagged": s.flagged,
        "wait_flagged": s.wait_flagged,
        "op_types": [
            {
                "op_type": o.op_type,
                "core_type": o.core_type,
                "slowest_card": o.slowest_card,
                "slowest_total_us": rounded(o.slowest_total_us),
                "fastest_card": o.fastest_card,
                "fastest_total_us": rounded(o.fastest_total_us),
                "spread_pct": rounded(o.spread_pct),
            }
            for o in s.op_types
        ],
    }


def render_card_spread(s: CardSpread, fmt: str = "text", *, top: int = 10) -> list[str]:
    """Lines for a text or markdown report: per card totals, the flag, the most uneven op types."""
    return spread_lines(card_spread_json(s), fmt == "markdown", top)


def spread_lines(spread: dict[str, Any], md: bool, top: int) -> list[str]:
    """Card against card, from the JSON's `card_spread`: the flag, per card totals, the op
    types that differ most between cards."""
    table = table_for(md)
    flag = "FLAGGED" if spread["flagged"] else "ok"
    out = [
        f"slowest card {spread['slowest_card']}; compute spread {spread['compute_spread_pct']:.1f}% "
        f"({flag}: > {spread['threshold_pct']:g}% means one card holds the others back), "
        f"wait spread {spread['wait_spread_pct']:.1f}%"
    ]
    out += table(
        ["Card", "Tasks", "Compute(us)", "Wait(us)", "Communication(us)"],
        [[c["card"], c["tasks"], c["compute_us"], c["wait_us"], c["communication_us"]] for c in spread["cards"]],
        {1, 2, 3, 4},
    )
    out += [""] + table(
        ["OP Type", "Core Type", "Slowest card", "Total(us)", "Fastest card", "Total(us)", "Spread(%)"],
        [
            [
                o["op_type"],
                o["core_type"],
                o["slowest_card"],
                o["slowest_total_us"],
                o["fastest_card"],
                o["fastest_total_us"],
                o["spread_pct"],
            ]
            for o in spread["op_types"][:top]
        ],
        {3, 5, 6},
    )
    return out
