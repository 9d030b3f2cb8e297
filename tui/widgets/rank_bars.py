"""`RankBars`: one stacked bar per rank, compute / communication not overlapped / free.

Like the Steps tab's bars (step_bars.py), every bar is scaled to the longest rank, so the
rank that holds the others back stands out; a slow rank's label is marked, a damaged rank
shows its error in place of a bar. The bars follow the Ranks table's order and filter, and
the rank under the table's cursor is marked and kept in view. The cell counts come from
`npuscope.analysis.training_tables.bar_cells`.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from npuscope.analysis.training_tables import StepBar

from ..palette import STEP_PART_STYLES
from ..ranks_state import DAMAGED, SLOW
from .step_bars import MARK, TOTAL_WIDTH, bar_segments, keep_in_view, legend

FLAGS = {SLOW: "slow", DAMAGED: "damaged"}


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
        self.bars: tuple[StepBar, ...] = ()
        self.flags: tuple[str, ...] = ()  # "", "slow" or "damaged" per bar
        self.errors: tuple[str, ...] = ()
        self.marked: int | None = None
        self.longest_us = 0.0
        self._top = 0
        self._styles = {part: Style.parse(style) for part, style in STEP_PART_STYLES.items()}

    def set_bars(self, bars: Sequence[StepBar], flags: Sequence[str], errors: Sequence[str], longest_us: float) -> None:
        """The bars in the table's order; `longest_us`: the longest of every rank (filtered
        out or not), so a filter does not change the scale."""
        self.bars, self.flags, self.errors = tuple(bars), tuple(flags), tuple(errors)
        self.longest_us = longest_us
        self.marked = None
        self._top = 0
        self.refresh(layout=True)

    def mark(self, label: str | None) -> None:
        """Mark the bar of rank `label` and scroll it into view."""
        index = next((i for i, b in enumerate(self.bars) if b.label == label), None)
        self.marked = index
        self._top = keep_in_view(index, self._top, max(self.size.height - 1, 1))
        self.refresh()

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.bars) + 1 if self.bars else 0

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(name, default=Style())

    def _legend(self) -> list[Segment]:
        return legend(self._styles, self._style("rank-bars--label"), self.longest_us)

    def bar_line(self, index: int, width: int) -> list[Segment]:
        """The segments of bar `index` for a line `width` cells wide."""
        label_width = max(len(b.label) for b in self.bars) + 7  # "▶ rank " + label
        flag_width = 8  # " damaged"
        bar = self.bars[index]
        flag = self.flags[index] if index < len(self.flags) else ""
        marked = index == self.marked
        label_style = self._style("rank-bars--marked" if marked else "rank-bars--label")
        head = f"{MARK if marked else ' '} rank {bar.label}".ljust(label_width)
        segments = [Segment(head, label_style)]
        flag_style = self._style(f"rank-bars--{flag}") if flag else label_style
        segments.append(Segment(f" {FLAGS.get(flag, '')}".ljust(flag_width), flag_style))
        cells = max(width - label_width - flag_width - TOTAL_WIDTH - 1, 0)
        if flag == DAMAGED:
            error = self.errors[index] if index < len(self.errors) else ""
            segments.append(Segment(f" {error}"[: cells + TOTAL_WIDTH], flag_style))
            return segments
        return segments + bar_segments(bar, self.longest_us, cells, self._styles, label_style)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0 and self.bars:
            return Strip(self._legend()).crop_extend(0, width, None)
        index = self._top + y - 1
        if not 0 <= index < len(self.bars):
            return Strip.blank(width)
        return Strip(self.bar_line(index, width)).crop_extend(0, width, None)
