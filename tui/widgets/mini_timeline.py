"""`MiniTimeline`: a few terminal lines showing what the card's engines and the host were doing.

A wait cause in a table says *that* the device waited for a recompilation; the mini
timeline shows it: one line per lane (AI Core, vector, AI CPU, mix, communication, other),
the device idle gaps coloured by wait cause, and the host compile and sync calls underneath,
so a red idle gap lines up with a host compile bar. The selected task is marked on its own
line and kept in view while zooming and on selection. The card's step boundaries, when known,
get a `steps` line of their own under the lanes (`│` where a step starts, its number after it).

All numbers come from `npuscope.analysis.timeline_view` (prefix sums, O(width log n) per
redraw); this widget only turns levels into block characters. It uses the Line API
(`render_line`) and caches the rendered lanes per (model, window, width), so a refresh
computes `render` once, not once per line.
"""

from __future__ import annotations

import math

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from npuscope.analysis.timeline_view import (
    LaneView,
    StepMark,
    TimelineModel,
    Window,
    ensure_visible,
    fit,
    pan,
    render,
    step_row,
    zoom,
)

from .. import palette
from ..palette import HOST_COMPILE_STYLE, HOST_SYNC_STYLE

LABEL_WIDTH = 13
BLOCKS = " ▁▂▃▄▅▆▇█"
ZOOM_STEP = 2.0
PAN_STEP = 0.25

# One colour per lane; the host lanes take theirs from the wait-cause palette.
LANE_STYLES: dict[str, Style] = {
    "AI_CORE": Style(color="green3"),
    "AI_VECTOR_CORE": Style(color="dark_cyan"),
    "AI_CPU": Style(color="magenta"),
    "MIX": Style(color="medium_purple"),
    "COMM": Style(color="dodger_blue2"),
    "OTHER": Style(color="grey62"),
    "idle": Style(color="grey42"),  # waits below the long-wait threshold (no cause)
    "host compile": Style.parse(HOST_COMPILE_STYLE),
    "host sync": Style.parse(HOST_SYNC_STYLE),
}
# Lane names that do not fit the label column.
LANE_LABELS: dict[str, str] = {"AI_VECTOR_CORE": "AI_VECTOR"}
# Idle cells: coloured by the column's dominant wait cause.
CAUSE_STYLES: dict[str, Style] = {cause: Style.parse(style) for cause, style in palette.CAUSE_STYLES.items()}


def block(level: float) -> str:
    """The block character for a busy fraction; any activity shows at least `▁`."""
    if level <= 0:
        return " "
    return BLOCKS[max(1, min(8, round(level * 8)))]


def format_time(ns: float, span_ns: float) -> str:
    """`ns` relative to the card start, in a unit and precision that resolve `span_ns`
    ("us" as the tables write it; a value that rounds to zero is "0", never "-0")."""
    if ns == 0:
        return "0 ms" if span_ns >= 1e6 else ("0 us" if span_ns >= 1e3 else "0 ns")
    magnitude = max(abs(ns), span_ns)
    units = (("s", 1e9), ("ms", 1e6), ("us", 1e3))
    unit, scale = next(((u, s) for u, s in units if magnitude >= s), ("ns", 1.0))
    decimals = 0 if unit == "ns" else min(6, max(1, math.ceil(math.log10(scale * 10 / max(span_ns, 1)))))
    text = f"{ns / scale:.{decimals}f}"
    if text.startswith("-") and not text.strip("-0."):
        text = text[1:]
    return f"{text} {unit}"


def format_zoom(factor: float) -> str:
    if factor >= 1e6:
        return f"×{factor / 1e6:.3g}M"
    if factor >= 1e3:
        return f"×{factor / 1e3:.3g}k"
    return f"×{factor:.3g}"


class MiniTimeline(Widget, can_focus=True):
    """Per-lane busy levels of one card in a zoomable, pannable time window."""

    BINDINGS = [
        Binding("+,=", "zoom_in", "Zoom in"),
        Binding("-", "zoom_out", "Zoom out"),
        Binding("left,h,<", "pan_left", "Pan left", show=False),
        Binding("right,l,>", "pan_right", "Pan right", show=False),
        Binding("0", "fit", "Fit", show=False),
    ]

    COMPONENT_CLASSES = {
        "mini-timeline--label",
        "mini-timeline--axis",
        "mini-timeline--marker",
        "mini-timeline--empty",
    }

    # Height: one line per lane plus the marker and axis lines (get_content_height), so it
    # follows the model's lane count; 1 line when there is no model.
    DEFAULT_CSS = """
    MiniTimeline {
        height: auto;
        background: $surface;
        color: $foreground;
    }
    MiniTimeline:focus {
        background-tint: $foreground 5%;
    }
    MiniTimeline > .mini-timeline--label {
        color: $text-muted;
    }
    MiniTimeline > .mini-timeline--axis {
        color: $text-muted;
    }
    MiniTimeline > .mini-timeline--marker {
        color: $accent;
        text-style: bold;
    }
    MiniTimeline > .mini-timeline--empty {
        color: $text-disabled;
    }
    """

    window: reactive[Window | None] = reactive(None)

    def __init__(
        self,
        model: TimelineModel | None = None,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self._model: TimelineModel | None = None
        self._empty_text = "no timeline"
        self._selected: tuple[int, int] | None = None
        self._steps: tuple[StepMark, ...] = ()
        # (model id, window, cells) and the lanes drawn for them
        self._cache: tuple[tuple[int, tuple[int, ...], int], tuple[LaneView, ...]] | None = None
        self.render_count = 0  # calls of timeline_view.render (the cache keeps it at 1 per frame)
        if model is not None:
            self.set_model(model)

    # -- public API --------------------------------------------------------------------

    @property
    def model(self) -> TimelineModel | None:
        return self._model

    @property
    def selected(self) -> tuple[int, int] | None:
        return self._selected

    def set_model(self, model: TimelineModel | None, *, empty_text: str = "no timeline") -> None:
        """Show `model` fitted to its whole span (None: one dim line saying `empty_text`)."""
        self._empty_text = empty_text
        self._model = model
        self._cache = None
        if model is None:
            self._selected = None
            self.window = None
        else:
            if self._selected is not None and not (model.start_ns <= self._selected[0] <= model.end_ns):
                self._selected = None
            self.window = fit(model)
        self.refresh(layout=True)

    @property
    def steps(self) -> tuple[StepMark, ...]:
        return self._steps

    def set_steps(self, marks: tuple[StepMark, ...]) -> None:
        """Mark these step boundaries on a line of their own under the lanes (none: no line)."""
        if marks != self._steps:
            self._steps = tuple(marks)
            self.refresh(layout=True)

    def select(self, start_ns: int, end_ns: int) -> None:
        """Mark the task [start_ns, end_ns) and pan (same zoom) until it is in view."""
        self._selected = (int(start_ns), max(int(end_ns), int(start_ns)))
        if self.window is not None:
            self.window = ensure_visible(self.window, *self._selected, bounds=self._bounds())
        self.refresh()

    # -- actions -----------------------------------------------------------------------

    def action_zoom_in(self) -> None:
        self._zoom(ZOOM_STEP)

    def action_zoom_out(self) -> None:
        self._zoom(1 / ZOOM_STEP)

    def action_pan_left(self) -> None:
        if self.window is not None:
            self.window = pan(self.window, -PAN_STEP, bounds=self._bounds())

    def action_pan_right(self) -> None:
        if self.window is not None:
            self.window = pan(self.window, PAN_STEP, bounds=self._bounds())

    def action_fit(self) -> None:
        if self._model is not None:
            self.window = fit(self._model)

    # -- internals ---------------------------------------------------------------------

    def _bounds(self) -> tuple[int, int] | None:
        return None if self._model is None else (self._model.start_ns, self._model.end_ns)

    def _zoom(self, factor: float) -> None:
        """Zoom around the selected task when it is on screen, else the window's middle.

        A selected task that fits the new window is then scrolled fully into it.
        """
        window = self.window
        if window is None:
            return
        start, end = window
        center = (start + end) // 2
        selected = self._selected
        if selected is not None and start <= (selected[0] + selected[1]) // 2 <= end:
            center = (selected[0] + selected[1]) // 2
        else:
            selected = None
        window = zoom(window, factor, center, bounds=self._bounds())
        if selected is not None and selected[1] - selected[0] <= 0.8 * (window[1] - window[0]):
            window = ensure_visible(window, *selected, bounds=self._bounds())
        self.window = window

    def validate_window(self, value: tuple[int, int] | None) -> tuple[int, int] | None:
        """Any (start, end) pair becomes a Window clamped to the model span."""
        if value is None or self._model is None:
            return value
        return pan(value, 0.0, bounds=self._bounds())

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return 1 if self._model is None else len(self._model.lanes) + 2 + (1 if self._steps else 0)

    def _style(self, name: str) -> Style:
        # Without an app (unit tests) the component styles do not exist yet: plain text.
        return self.get_component_rich_style(name, default=Style())

    def _shown(self) -> tuple[TimelineModel, Window]:
        """The model and window being drawn (the lanes are drawn only once there is a model)."""
        assert self._model is not None and self.window is not None, "no model to draw"
        return self._model, self.window

    def _views(self, cells: int) -> tuple[LaneView, ...]:
        model, window = self._shown()
        key = (id(model), tuple(window), cells)
        if self._cache is None or self._cache[0] != key:
            self.render_count += 1
            self._cache = (key, render(model, window[0], window[1], cells))
        return self._cache[1]

    def _label(self, text: str, style: Style) -> Segment:
        return Segment(text[: LABEL_WIDTH - 1].ljust(LABEL_WIDTH), style)

    def _lane_strip(self, view: LaneView) -> list[Segment]:
        lane_style = LANE_STYLES.get(view.name, Style())
        segments = [self._label(LANE_LABELS.get(view.name, view.name), self._style("mini-timeline--label"))]
        run: list[str] = []
        run_style: Style | None = None
        for level, cause in zip(view.levels, view.causes):
            style = CAUSE_STYLES.get(cause, lane_style) if cause is not None else lane_style
            if style is not run_style and run:
                segments.append(Segment("".join(run), run_style))
                run = []
            run_style = style
            run.append(block(level))
        if run:
            segments.append(Segment("".join(run), run_style))
        return segments

    def _marker_strip(self, cells: int) -> list[Segment]:
        segments = [self._label("", Style())]
        if self._selected is None or cells <= 0:
            return segments
        style = self._style("mini-timeline--marker")
        ws, we = self._shown()[1]
        s, e = self._selected
        col_ns = (we - ws) / cells
        if e < ws or (e == ws and s < ws):
            segments.append(Segment("◀ selected"[:cells], style))
        elif s > we:
            text = "selected ▶"[-cells:]
            segments.append(Segment(" " * (cells - len(text)) + text, style))
        else:
            c0 = max(0, min(cells - 1, int((s - ws) / col_ns)))
            c1 = max(c0, min(cells - 1, int((max(s, e - 1) - ws) / col_ns)))
            segments.append(Segment(" " * c0))
            segments.append(Segment("▲" * (c1 - c0 + 1), style))
        return segments

    def _steps_strip(self, cells: int) -> list[Segment]:
        ws, we = self._shown()[1]
        style = self._style("mini-timeline--axis")
        return [self._label("steps", style), Segment(step_row(self._steps, ws, we, cells), style)]

    def _axis_strip(self, cells: int) -> list[Segment]:
        model, (ws, we) = self._shown()
        span = we - ws
        factor = (model.end_ns - model.start_ns) / max(span, 1)
        style = self._style("mini-timeline--axis")
        segments = [self._label(f"zoom {format_zoom(factor)}", style)]
        if cells <= 0:
            return segments
        left = format_time(ws - model.origin_ns, span)
        right = format_time(we - model.origin_ns, span)
        gap = cells - len(left) - len(right)
        text = f"{left}{' ' * gap}{right}" if gap >= 1 else left[:cells]
        segments.append(Segment(text, style))
        return segments

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if self._model is None or self.window is None:
            if y == 0:
                empty = Segment(self._empty_text, self._style("mini-timeline--empty"))
                return Strip([empty]).crop_extend(0, width, None)
            return Strip.blank(width)
        cells = max(0, width - LABEL_WIDTH)
        lanes = self._model.lanes
        if self._steps and y == len(lanes):
            return Strip(self._steps_strip(cells)).crop_extend(0, width, None)
        if self._steps and y > len(lanes):
            y -= 1
        if y < len(lanes):
            if cells:
                segments = self._lane_strip(self._views(cells)[y])
            else:
                segments = [self._label(LANE_LABELS.get(lanes[y].name, lanes[y].name), Style())]
        elif y == len(lanes):
            segments = self._marker_strip(cells)
        elif y == len(lanes) + 1:
            segments = self._axis_strip(cells)
        else:
            return Strip.blank(width)
        return Strip(segments).crop_extend(0, width, None)
