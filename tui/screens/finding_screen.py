"""Detail of one finding: rule, threshold, evidence rows, advice, confidence."""

from __future__ import annotations

from rich.console import JustifyMethod
from rich.markup import escape
from rich.table import Table
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from npuscope.analysis import Finding
from npuscope.analysis.actions import NO_ACTION
from npuscope.text import printable

from ..digits import group_digits
from .text_screen import NARROW_WIDTH


def view_table(finding: Finding) -> Table:
    """Evidence rows of a training-level finding: rows of its view, with that view's columns."""
    table = Table(expand=True, header_style="bold", box=None)
    keys = [k for k in finding.evidence[0] if k != "source"]
    numeric = {k for k in keys if all(isinstance(r.get(k), (int, float)) or r.get(k) is None for r in finding.evidence)}
    for key in keys:
        table.add_column(escape(key), justify="right" if key in numeric else "left", overflow="ellipsis", no_wrap=True)
    for row in finding.evidence:
        cells = []
        for key in keys:
            v = row.get(key)
            if v is None:
                cells.append("-")
            elif isinstance(v, float):
                cells.append(f"{v:,.3f}")
            else:
                cells.append(escape(str(v)))
        table.add_row(*cells)
    return table


NARROW_EVIDENCE = 110
"""Below this many columns the task evidence leaves out Task Type and Input Shapes (in the task
detail, Enter on the row), so the names that stay are not cut to a few letters."""


def evidence_table(finding: Finding, width: int | None = None) -> Table:
    if finding.view:
        return view_table(finding)
    narrow = width is not None and width < NARROW_EVIDENCE
    table = Table(expand=True, header_style="bold", box=None)
    rows = [
        (
            escape(printable(str(row.get("op_name")))),
            escape(printable(str(row.get("op_type")))),
            escape(printable(str(row.get("task_type")))),
            f"{row.get('start_us') or 0:,.3f}",
            f"{row.get('duration_us') or 0:,.3f}",
            f"{row.get('wait_us') or 0:,.3f}",
            escape(str(row.get("wait_cause") or "-")),
            escape(printable(str(row.get("input_shapes") or "-"))),
        )
        for row in finding.evidence
    ]
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("Op Name", "left"), ("OP Type", "left"), ("Task Type", "left"), ("Start(us)", "right"),
        ("Duration(us)", "right"), ("Wait(us)", "right"), ("Cause", "left"), ("Input Shapes", "left"),
    )  # fmt: skip
    kept = [i for i, (title, _) in enumerate(columns) if not (narrow and title in ("Task Type", "Input Shapes"))]
    for i in kept:
        title, justify = columns[i]
        if justify == "right":  # numbers are never cut: as wide as the widest
            wide = max([len(title)] + [len(r[i]) for r in rows])
            table.add_column(title, justify=justify, no_wrap=True, min_width=wide)
        else:
            table.add_column(title, justify=justify, overflow="ellipsis", no_wrap=True, ratio=2 if i == 0 else 1)
    for r in rows:
        table.add_row(*(r[i] for i in kept))
    return table


class FindingScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,i,q", "dismiss", "Close")]

    def __init__(self, finding: Finding) -> None:
        super().__init__()
        self.finding = finding

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(self.size.width < NARROW_WIDTH, "narrow")

    def compose(self) -> ComposeResult:
        f = self.finding
        counted = f"count {f.count:,} · {f.view} tab" if f.view else f"{f.count:,} task(s)"
        with VerticalScroll(id="finding", classes="dialog"):
            yield Static(escape(f"{f.severity.upper()}  {group_digits(f.title)}"), classes="dialog-title")
            yield Static(
                escape(
                    f"rule {f.rule} · card {f.card} · threshold: {f.threshold} · "
                    f"confidence: {f.confidence}\n"
                    f"{counted} · {f.time_us:,.1f} us at stake · {f.share_pct:.1f}%"
                )
            )
            if f.op_names:
                yield Static(escape("op names: " + printable(", ".join(f.op_names))))
            yield Label("Evidence (worst first)", classes="section")
            empty = f"no {f.view} rows for this finding" if f.view else "no task rows for this finding"
            yield Static(evidence_table(f, self.app.size.width) if f.evidence else empty, id="finding-evidence")
            yield Label("What to do", classes="section")
            yield Static(escape(f.advice))
            if f.actions:
                tried = ", ".join(a.text for a in f.actions)
                yield Static(escape(f"Try: {tried} (x: capture the run again with it and measure)"))
            else:
                yield Static(escape(f"Try: {NO_ACTION}"), classes="hint")
            yield Label("Esc closes · Enter on the card filters the tables", classes="hint")
