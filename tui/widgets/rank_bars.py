"""`RankBars`: one stacked bar per rank, compute / communication not overlapped / free.

Each bar is made of the figures the Ranks table shows on the same row (the summary's means
per step: compute_us, exposed_comm_us, free_us, which add up to step_us) and ends with the
rank's step time as the table's Step column writes it. Every bar is scaled to the longest
step of the ranks that have steps, so the rank that holds the others back stands out. A rank
without steps has totals over its tasks, not means per step: it gets a line saying so, not a
bar on the per-step scale; a damaged rank shows its error. A slow rank's label is marked.
The parts differ in glyph as well as colour (█ ▓ ░), so the bars read without colour. The
bars follow the Ranks table's order and filter, and the rank under the table's cursor is
marked and kept in view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from npuscope.analysis.training_tables import StepBar

from ..palette import STEP_PART_LABELS, STEP_PART_STYLES
from ..ranks_state import DAMAGED, SLOW
from .stage_chart import GLYPHS, part_cells
from .step_bars import MARK, keep_in_view

FLAGS = {SLOW: "slow", DAMAGED: "damaged"}
PARTS = ("compute", "comm", "free")


@dataclass(frozen=True)
class RankBar:
    """One line of the bars: the rank's bar, its flag ("", slow, damaged), the text drawn in
    place of the bar ("" draws the bar) and the bar's total as the table writes step_us."""

    bar: StepBar
    flag: str = ""
    text: str = ""
    total: str = ""


class RankBars(Widget):
    """The per-rank stacked bars of the Ranks view."""

    DEFAULT_CSS = """
    RankBars {
        height: auto;
        max-height: 40%;
        background: $surface;
    }
    RankBars > .rank-bars--label {
        color: $text-muted;
    }
    RankBars > .rank-bars--marked {
        color: $accent;
        text-style: bold;
    }
    RankBars > .rank-bars--slow {
        color: $warning;
        text-style: bold;
    }
    RankBars > .rank-bars--damaged {
        color: $error;
        text-style: bold;
    }
    """
    COMPONENT_CLASSES = {"rank-bars--label", "rank-bars--marked", "rank-bars--slow", "rank-bars--damaged"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: tuple[RankBar, ...] = ()
        self.marked: int | None = None
        self.longest_us = 0.0
        self.longest_text = ""
        self._top = 0
        self._styles = {part: Style.parse(style) for part, style in STEP_PART_STYLES.items()}

    @property
    def bars(self) -> tuple[StepBar, ...]:
        return tuple(r.bar for r in self.rows)

    def set_bars(self, rows: Sequence[RankBar], longest_us: float, longest_text: str = "") -> None:
        """The bars in the table's order; `longest_us`: the longest step of every rank with
        steps (filtered out or not), so a filter does not change the scale; `longest_text`:
        it as the table writes it."""
        self.rows = tuple(rows)
        self.longest_us = longest_us
        self.longest_text = longest_text
        self.marked = None
        self._top = 0
        self.refresh(layout=True)

    def mark(self, label: str | None) -> None:
        """Mark the bar of rank `label` and scroll it into view."""
        index = next((i for i, r in enumerate(self.rows) if r.bar.label == label), None)
        self.marked = index
        self._top = keep_in_view(index, self._top, max(self.size.height - 1, 1))
        self.refresh()

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.rows) + 1 if self.rows else 0

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(name, default=Style())

    def _legend(self) -> list[Segment]:
        segments = [Segment(" ")]
        for part in PARTS:
            segments += [Segment(GLYPHS[part], self._styles[part]), Segment(f" {STEP_PART_LABELS[part]}  ")]
        longest = f"per step, longest {self.longest_text}" if self.longest_text else "per step"
        segments.append(Segment(longest, self._style("rank-bars--label")))
        return segments

    def bar_line(self, index: int, width: int) -> list[Segment]:
        """The segments of bar `index` for a line `width` cells wide."""
        label_width = max(len(r.bar.label) for r in self.rows) + 7  # "▶ rank " + label
        flag_width = 8  # " damaged"
        total_width = max((len(r.total) for r in self.rows), default=0) + 1
        row = self.rows[index]
        marked = index == self.marked
        label_style = self._style("rank-bars--marked" if marked else "rank-bars--label")
        head = f"{MARK if marked else ' '} rank {row.bar.label}".ljust(label_width)
        segments = [Segment(head, label_style)]
        flag_style = self._style(f"rank-bars--{row.flag}") if row.flag else label_style
        segments.append(Segment(f" {FLAGS.get(row.flag, '')}".ljust(flag_width), flag_style))
        cells = max(width - label_width - flag_width - total_width - 1, 0)
        if row.text:
            return [*segments, Segment(f" {row.text}", flag_style)]
        drawn = 0
        parts = (row.bar.compute_us, row.bar.comm_us, row.bar.free_us)
        for part, n in zip(PARTS, part_cells(parts, self.longest_us, cells)):
            if n:
                segments.append(Segment(GLYPHS[part] * n, self._styles[part]))
                drawn += n
        segments.append(Segment(" " * (cells - drawn + 1)))
        segments.append(Segment(row.total.rjust(total_width), label_style))
        return segments

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0 and self.rows:
            return Strip(self._legend()).crop_extend(0, width, None)
        index = self._top + y - 1
        if not 0 <= index < len(self.rows):
            return Strip.blank(width)
        return Strip(self.bar_line(index, width)).crop_extend(0, width, None)
