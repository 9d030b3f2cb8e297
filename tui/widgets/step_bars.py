"""`StepBars`: one stacked bar per step, compute / communication not overlapped / free.

Every bar is scaled to the longest step, so a step that is long because of exposed
communication or free time stands out at a glance. A legend line comes first; the step
under the Steps table's cursor is marked (and kept in view when the steps do not fit).
The cell counts come from `npuscope.analysis.training_tables.bar_cells`.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from npuscope.analysis.training_tables import StepBar, bar_cells

from ..format import human_us
from ..palette import STEP_PART_LABELS, STEP_PART_STYLES

PARTS = ("compute", "comm", "free")
BLOCK = "█"
MARK = "▶"


class StepBars(Widget):
    """The per-step stacked bars of the Steps tab."""

    DEFAULT_CSS = """
    StepBars {
        height: auto;
        max-height: 45%;
        background: $surface;
    }
    StepBars > .step-bars--label {
        color: $text-muted;
    }
    StepBars > .step-bars--marked {
        color: $accent;
        text-style: bold;
    }
    """
    COMPONENT_CLASSES = {"step-bars--label", "step-bars--marked"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.bars: tuple[StepBar, ...] = ()
        self.marked: int | None = None
        self._top = 0
        self._styles = {part: Style.parse(style) for part, style in STEP_PART_STYLES.items()}

    def set_bars(self, bars: tuple[StepBar, ...]) -> None:
        self.bars = bars
        self.marked = None
        self._top = 0
        self.refresh(layout=True)

    def mark(self, label: str | None) -> None:
        """Mark the bar of step `label` and scroll it into view."""
        index = next((i for i, b in enumerate(self.bars) if b.label == label), None)
        self.marked = index
        rows = max(self.size.height - 1, 1)
        if index is not None:
            if index < self._top:
                self._top = index
            elif index >= self._top + rows:
                self._top = index - rows + 1
        self.refresh()

    @property
    def longest_us(self) -> float:
        return max((b.total_us for b in self.bars), default=0.0)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.bars) + 1 if self.bars else 0

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(name, default=Style())

    def _legend(self) -> list[Segment]:
        segments = [Segment(" ")]
        for part in PARTS:
            segments += [Segment(BLOCK, self._styles[part]), Segment(f" {STEP_PART_LABELS[part]}  ")]
        segments.append(Segment(f"longest {human_us(self.longest_us)}", self._style("step-bars--label")))
        return segments

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0 and self.bars:
            return Strip(self._legend()).crop_extend(0, width, None)
        index = self._top + y - 1
        if not 0 <= index < len(self.bars):
            return Strip.blank(width)
        label_width = max(len(b.label) for b in self.bars) + 8  # "▶ step " + label + " "
        total_width = 11
        cells = max(width - label_width - total_width - 1, 0)
        bar = self.bars[index]
        marked = index == self.marked
        label_style = self._style("step-bars--marked" if marked else "step-bars--label")
        head = f"{MARK if marked else ' '} step {bar.label}".ljust(label_width)
        segments = [Segment(head, label_style)]
        drawn = 0
        for part, n in zip(PARTS, bar_cells(bar, self.longest_us, cells)):
            if n:
                segments.append(Segment(BLOCK * n, self._styles[part]))
                drawn += n
        segments.append(Segment(" " * (cells - drawn + 1)))
        segments.append(Segment(human_us(bar.total_us).rjust(total_width), label_style))
        return Strip(segments).crop_extend(0, width, None)
