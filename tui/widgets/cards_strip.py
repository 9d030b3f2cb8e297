"""`CardsStrip`: the findings cards folded into one line for terminals too narrow for the pane.

Below the width where the cards pane stands beside the tables, the tables get the whole
width and this line says what the pane would lead with: the worst finding, its time at
stake, and how many findings the card has. A key opens the full pane.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from npuscope.analysis import Finding
from npuscope.analysis.findings import SEVERITY_MARK

from ..digits import group_digits
from ..format import human_us

SEVERITY_STYLE = {"critical": "bold red", "warning": "bold yellow", "info": "bold blue"}


def strip_text(findings: tuple[Finding, ...], key: str = "f", opened: bool = False) -> Text:
    """One line: the count of findings, the worst one and its time at stake, the key."""
    hint = (f"[{key}] tables ", "bold") if opened else (f"[{key}] cards ", "bold")
    if not findings:
        return Text.assemble(hint, ("no findings on this card", "dim"))
    worst = findings[0]
    count = len(findings)
    return Text.assemble(
        hint,
        (f"{count:,} finding{'s' if count != 1 else ''}, worst: ", "dim"),
        (SEVERITY_MARK[worst.severity], SEVERITY_STYLE[worst.severity]),
        " ",
        (human_us(worst.time_us, 0) if worst.time_us else "-", "bold"),
        " at stake · ",
        group_digits(worst.title),
    )


class CardsStrip(Static):
    """The worst finding of the card in one line (narrow terminals)."""

    DEFAULT_CSS = """
    CardsStrip { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self.findings: tuple[Finding, ...] = ()
        self.opened = False

    def show(self, findings: tuple[Finding, ...], opened: bool | None = None) -> None:
        self.findings = findings
        if opened is not None:
            self.opened = opened
        self.update(strip_text(findings, opened=self.opened))

    def set_opened(self, opened: bool) -> None:
        self.show(self.findings, opened)
