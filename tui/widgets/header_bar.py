"""The header line: capture, layout, card, and the card's totals."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ..format import human_us


class HeaderBar(Static):
    def show(
        self, *, capture: str, layout: str, card: str, cards: tuple[str, ...], summary: dict, skipped: int = 0
    ) -> None:
        position = f"{cards.index(card) + 1}/{len(cards)}" if card in cards else ""
        self.update(
            Text.assemble(
                ("card ", "dim"),
                (f" {card} ", "bold reverse"),
                (f" {position}" if len(cards) > 1 else "", "dim"),
                "  ",
                f"{summary['tasks']:,} tasks · compute {human_us(summary['compute_us'])} · "
                + (f"comm {human_us(summary['communication_us'])} · " if summary.get("communication_us") else "")
                + f"wait {human_us(summary['wait_us'])} · ",
                (
                    ("span ?: start times damaged", "bold red")
                    if summary["span_us"] is None
                    else f"span {human_us(summary['span_us'])}"
                ),
                (f" · {skipped:,} damaged row(s) skipped" if skipped else "", "bold yellow"),
                "   ",
                (capture, "bold"),
                (f"  {layout}", "dim"),
            )
        )
