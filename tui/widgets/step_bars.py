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


TOTAL_WIDTH = 11  # the bar's total, right-aligned after it


def legend(styles: dict[str, Style], label_style: Style, longest_us: float) -> list[Segment]:
    """The legend line of a list of stacked bars: a block per part, then the longest bar."""
    segments = [Segment(" ")]
    for part in PARTS:
        segments += [Segment(BLOCK, styles[part]), Segment(f" {STEP_PART_LABELS[part]}  ")]
    segments.append(Segment(f"longest {human_us(longest_us)}", label_style))
    return segments


def bar_segments(
    bar: StepBar, longest_us: float, cells: int, styles: dict[str, Style], total_style: Style
) -> list[Segment]:
    """One stacked bar in `cells` cells scaled to `longest_us`, then its total."""
    segments = []
    drawn = 0
    for part, n in zip(PARTS, bar_cells(bar, longest_us, cells)):
        if n:
            segments.append(Segment(BLOCK * n, styles[part]))
            drawn += n
    segments.append(Segment(" " * (cells - drawn + 1)))
    segments.append(Segment(human_us(bar.total_us).rjust(TOTAL_WIDTH), total_style))
    return segments


def keep_in_view(index: int | None, top: int, rows: int) -> int:
    """The first bar shown so that bar `index` is among the `rows` shown from it."""
    if index is None or top <= index < top + rows:
        return top
    return index if index < top else index - rows + 1


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
        self._top = keep_in_view(index, self._top, max(self.size.height - 1, 1))
        self.refresh()

    @property
    def longest_us(self) -> float:
        return max((b.total_us for b in self.bars), default=0.0)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.bars) + 1 if self.bars else 0

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(name, default=Style())

    def _legend(self) -> list[Segment]:
        return legend(self._styles, self._style("step-bars--label"), self.longest_us)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0 and self.bars:
            return Strip(self._legend()).crop_extend(0, width, None)
        index = self._top + y - 1
        if not 0 <= index < len(self.bars):
            return Strip.blank(width)
        label_width = max(len(b.label) for b in self.bars) + 8  # "▶ step " + label + " "
        cells = max(width - label_width - TOTAL_WIDTH - 1, 0)
        bar = self.bars[index]
        marked = index == self.marked
        label_style = self._style("step-bars--marked" if marked else "step-bars--label")
        head = f"{MARK if marked else ' '} step {bar.label}".ljust(label_width)
        segments = [Segment(head, label_style), *bar_segments(bar, self.longest_us, cells, self._styles, label_style)]
        return Strip(segments).crop_extend(0, width, None)
