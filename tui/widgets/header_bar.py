"""The header line: a cluster's rank, the card and its totals, the capture and its era.

At any width the parts that fit are shown whole, the least needed left out first (the era,
then the capture's name, then communication); none is cut in the middle of a word or number.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.visual import VisualType
from textual.widgets import Static

from ..format import human_us

ALWAYS, WAIT_SPAN, COMM, CAPTURE, ERA = range(5)
"""Priorities of the parts: the higher, the earlier left out when the line is too narrow."""


class HeaderBar(Static):
    def __init__(
        self,
        content: VisualType = "",
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(content, name=name, id=id, classes=classes, disabled=disabled)
        self._parts: list[tuple[int, Text]] = []

    def show(
        self,
        *,
        capture: str,
        layout: str,
        card: str,
        cards: tuple[str, ...],
        summary: dict[str, Any],
        skipped: int = 0,
        rank: str | None = None,
        rank_position: str = "",
    ) -> None:
        position = f"{cards.index(card) + 1}/{len(cards)}" if card in cards else ""
        parts: list[tuple[int, Text]] = []
        if rank is not None:  # a rank of a cluster: named first, where 80 columns show it
            parts.append(
                (ALWAYS, Text.assemble(("rank ", "dim"), (f" {rank} ", "bold reverse"), (f" {rank_position}  ", "dim")))
            )
        parts.append(
            (
                ALWAYS,
                Text.assemble(
                    ("card ", "dim"),
                    (f" {card} ", "bold reverse"),
                    (f" {position}" if len(cards) > 1 else "", "dim"),
                    "  ",
                ),
            )
        )
        parts.append((ALWAYS, Text(f"{summary['tasks']:,} tasks · compute {human_us(summary['compute_us'])}")))
        if summary.get("communication_us"):
            parts.append((COMM, Text(f" · comm {human_us(summary['communication_us'])}")))
        parts.append((WAIT_SPAN, Text(f" · wait {human_us(summary['wait_us'])}")))
        if summary["span_us"] is None:
            parts.append((ALWAYS, Text.assemble(" · ", ("span ?: start times damaged", "bold red"))))
        else:
            parts.append((WAIT_SPAN, Text(f" · span {human_us(summary['span_us'])}")))
        if skipped:
            parts.append((ALWAYS, Text(f" · {skipped:,} damaged row(s) skipped", style="bold yellow")))
        parts.append((CAPTURE, Text.assemble("  ", (capture, "bold"))))
        parts.append((ERA, Text(f"  {layout}", style="dim")))
        self._parts = parts
        self._fit()

    def on_resize(self, event: events.Resize) -> None:
        self._fit()

    def _fit(self) -> None:
        """The parts that fit the width, in their order; whole parts are left out, the least
        needed first, until the rest fits (the ALWAYS parts are never left out)."""
        if not self._parts:
            return
        width = self.content_size.width or self.size.width or 10_000
        kept = list(self._parts)
        for level in (ERA, CAPTURE, COMM, WAIT_SPAN):
            if sum(t.cell_len for _, t in kept) <= width:
                break
            kept = [(p, t) for p, t in kept if p != level]
        self.update(Text.assemble(*(t for _, t in kept)))
