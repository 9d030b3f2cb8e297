"""Detail of one task (a row of the op summary): its full name, shapes, dtypes and formats,
its wait and the cause blamed for it, and the findings that count it; `y` copies its op report.

The table cells cut long names and shapes to fit; this panel shows them whole, wrapped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.markup import escape
from rich.table import Table
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from npuscope.analysis import Finding
from npuscope.analysis.waits import cause_text
from npuscope.text import printable

from ..digits import group_digits
from .text_screen import NARROW_WIDTH

FIELDS: tuple[tuple[str, str], ...] = (
    ("op_name", "Op Name"),
    ("op_type", "OP Type"),
    ("task_type", "Task Type"),
    ("card", "Card"),
    ("start_us", "Start (us from card start)"),
    ("duration_us", "Duration (us)"),
    ("wait_us", "Wait before it (us)"),
    ("input_shapes", "Input Shapes"),
    ("input_dtypes", "Input Dtypes"),
    ("input_formats", "Input Formats"),
    ("output_shapes", "Output Shapes"),
    ("output_dtypes", "Output Dtypes"),
    ("output_formats", "Output Formats"),
    ("op_state", "OP State"),
    ("block_num", "Block Num"),
)


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def naming(task: dict[str, Any], findings: Sequence[Finding]) -> list[Finding]:
    """The findings that count this task: its row among their evidence, or its op named."""
    row = task.get("row")
    out = []
    for f in findings:
        if f.view:
            continue
        rows = {e.get("row") for e in f.evidence}
        if row in rows or task.get("op_name") in f.op_names or task.get("op_type") in f.op_types:
            out.append(f)
    return out


def task_fields(task: dict[str, Any]) -> Table:
    table = Table(box=None, show_header=False, expand=True)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold", ratio=1)
    for key, title in FIELDS:
        if key in task:
            table.add_row(title, escape(printable(cell(task[key]))))
    return table


def evidence_table(evidence: Sequence[dict[str, Any]]) -> Table:
    """The host calls overlapping the wait, longest overlap first."""
    table = Table(box=None, header_style="bold", expand=True)
    table.add_column("host call during the wait", overflow="fold", ratio=1)
    table.add_column("kind", no_wrap=True)
    table.add_column("overlap (us)", justify="right", no_wrap=True)
    table.add_column("call (us)", justify="right", no_wrap=True)
    for e in evidence:
        table.add_row(escape(printable(str(e["name"]))), e["kind"], f"{e['overlap_us']:,.3f}", f"{e['dur_us']:,.3f}")
    return table


class TaskScreen(ModalScreen[None]):
    """One task in full; `y` copies its op report."""

    BINDINGS = [
        Binding("escape,q,enter", "dismiss", "Close"),
        Binding("y", "copy", "Copy op report"),
    ]

    def __init__(
        self,
        task: dict[str, Any],
        findings: Sequence[Finding],
        copy: Callable[[], None],
        evidence: Sequence[dict[str, Any]] = (),
    ) -> None:
        super().__init__()
        self.row_task = task
        self.findings = naming(task, findings)
        self.evidence = list(evidence)
        self._copy = copy

    def compose(self) -> ComposeResult:
        t = self.row_task
        cause = t.get("wait_cause") or ""
        with VerticalScroll(id="task", classes="dialog"):
            yield Label(escape(printable(f"{t.get('op_type')}  {t.get('op_name')}")), classes="dialog-title")
            yield Static(task_fields(t), id="task-fields")
            yield Label("Wait", classes="section")
            wait = f"{cell(t.get('wait_us'))} us before this task"
            if cause:
                confidence = t.get("wait_confidence") or ""
                why = cause_text(cause, confidence)
                wait += f"; cause: {cause}" + (f" ({confidence})" if confidence else "") + (f": {why}" if why else "")
            yield Static(escape(wait), id="task-wait")
            if self.evidence:
                yield Static(evidence_table(self.evidence), id="task-evidence")
            yield Label("Findings that count it", classes="section")
            if self.findings:
                lines = [f"{f.severity.upper()} {f.rule}: {group_digits(f.title)}" for f in self.findings]
                yield Static(escape("\n".join(lines)), id="task-findings")
            else:
                yield Static("none", id="task-findings")
            yield Label("y copies the op report · Esc closes", classes="hint")

    def on_mount(self) -> None:
        self.query_one("#task").focus()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(self.size.width < NARROW_WIDTH, "narrow")

    def action_copy(self) -> None:
        self._copy()
