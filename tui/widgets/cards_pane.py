"""The cards pane: one card per finding (ordered by time at stake) and a few KPI cards."""

from __future__ import annotations

from rich.markup import escape
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Label, ListItem, ListView

from npuscope.analysis import Finding
from npuscope.analysis.findings import SEVERITY_MARK
from npuscope.analysis.kpis import Kpi

from ..digits import group_digits
from ..format import human_us

SEVERITY_CLASS = {"critical": "card--critical", "warning": "card--warning", "info": "card--info"}


class FindingCard(ListItem):
    def __init__(self, finding: Finding) -> None:
        super().__init__(classes=f"card {SEVERITY_CLASS[finding.severity]}")
        self.finding = finding

    def compose(self) -> ComposeResult:
        f = self.finding
        head = Text.assemble(
            (SEVERITY_MARK[f.severity], "bold"),
            " ",
            (human_us(f.time_us, 0) if f.time_us else "-", "bold"),
            ("  suspected" if f.confidence == "suspected" else "", "italic"),
        )
        yield Label(head, classes="card-head")
        yield Label(escape(group_digits(f.title)), classes="card-title")
        first = f.advice.split(":")[0].split(";")[0].strip().rstrip(".")
        yield Label(escape(first + "."), classes="card-advice")


class KpiCard(ListItem):
    def __init__(self, kpi: Kpi) -> None:
        super().__init__(classes="card card--kpi")
        self.kpi = kpi

    def compose(self) -> ComposeResult:
        yield Label(Text.assemble((self.kpi.title, "bold"), "  ", self.kpi.value), classes="card-head")
        yield Label(escape(self.kpi.detail), classes="card-advice")


class CardsPane(ListView):
    """Findings first, then KPIs. Enter drills down; `i` (a key of the main screen, so it
    works wherever the focus is) opens the highlighted finding's detail."""

    BINDINGS = [
        Binding(
            "enter",
            "select_cursor",
            "Filter the tables to the finding, jump to its worst task (a training finding: its tab)",
            show=False,
        )
    ]

    class Chosen(Message):
        def __init__(self, finding: Finding) -> None:
            super().__init__()
            self.finding = finding

    class DetailRequested(Message):
        def __init__(self, finding: Finding) -> None:
            super().__init__()
            self.finding = finding

    def show(self, findings: tuple[Finding, ...], kpis: tuple[Kpi, ...]) -> None:
        self.clear()
        items = [FindingCard(f) for f in findings] + [KpiCard(k) for k in kpis]
        if items:
            self.extend(items)
            self.index = 0

    def highlighted_finding(self) -> Finding | None:
        """The finding of the highlighted card (the first finding if a KPI card is highlighted)."""
        item = self.highlighted_child
        if isinstance(item, FindingCard):
            return item.finding
        first = self.query(FindingCard).first() if self.query(FindingCard) else None
        return first.finding if first is not None else None

    def on_list_view_selected(self, event: ListView.Selected) -> None:
        event.stop()
        if isinstance(event.item, FindingCard):
            self.post_message(self.Chosen(event.item.finding))

    def action_detail(self) -> None:
        finding = self.highlighted_finding()
        if finding is not None:
            self.post_message(self.DetailRequested(finding))
