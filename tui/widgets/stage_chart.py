"""`StageChart`: the parallel view's body, the layout's groups and per pipeline stage a
stacked bar of its mean step with one bar per rank of the stage below it.

What each bar is made of (means per step, the summary's own figures, never recomputed):
compute, communication not overlapped with the bubble taken out of it, the bubble (the time
the stage waits in pipeline receives: step_trace's Bubble, which is part of the communication
not overlapped) and free; they add up to the step time. A stage's bar is its `Stage` figures
(analysis/parallel.py: the means over its ranks with steps), a rank's bar its `RankSummary`;
every bar of the view is scaled to the longest rank, so stages and ranks compare at a glance
and a slow rank inside a stage stands out. Where a bubble exceeds the communication not
overlapped (a bubble counted from receive tasks that overlap compute), the bar's bubble part
is cut to the communication it can be part of; the figures line says the real value.
Forward and backward passes cannot be split from these files, and the view says so.

The parts differ in glyph as well as colour (█ ▓ ▒ ░), so the chart reads without colour.
Numbers are written as the Ranks table writes them (ranks_table.FigureFormat). Text wraps at
word boundaries with a hanging indent: nothing is cut at the right edge. The chart is a
`ScrollView` drawn line by line for its width: ↑ ↓ PgUp PgDn Home End scroll it.

Pure parts (`part_cells`, `rank_list_text`, `group_lines`, `ChartLines`) work without an app.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from npuscope.analysis.cluster import RankSummary
from npuscope.analysis.findings import SEVERITY_MARK, Finding
from npuscope.analysis.parallel import Group, ParallelLayout, Stage
from npuscope.analysis.parallel_rules import stage_card

from ..digits import group_digits
from ..palette import STEP_PART_STYLES
from .ranks_table import FigureFormat

GLYPHS = {"compute": "█", "comm": "▓", "bubble": "▒", "free": "░"}
PART_STYLES = {**STEP_PART_STYLES, "bubble": "medium_purple1"}
PART_LABELS = {
    "compute": "compute",
    "comm": "exposed comm, bubble apart",
    "bubble": "bubble (receive wait)",
    "free": "free",
}
PARTS = ("compute", "comm", "bubble", "free")
SEVERITY_STYLES = {"critical": "bold red", "warning": "bold yellow", "info": "bold blue"}
NO_SPLIT = (
    "Forward and backward cannot be told apart from these files (step_trace_time.csv has no "
    "such split): each bar is the whole step."
)
GROUP_LINES = 3
"""Lines the groups of one name may take; the rest are counted ("+12 more")."""


def part_cells(parts: Sequence[float], longest_us: float, cells: int) -> tuple[int, ...]:
    """Cells of each part of a bar `cells` wide at `longest_us`; the parts end where their
    running sums do, so they never add up to more than the bar."""
    if cells <= 0 or longest_us <= 0:
        return tuple(0 for _ in parts)
    out = []
    running, end = 0.0, 0
    for part in parts:
        running += max(part, 0.0)
        new_end = min(cells, round(running / longest_us * cells))
        out.append(max(new_end - end, 0))
        end = max(end, new_end)
    return tuple(out)


def bubble_parts(exposed_us: float, bubble_us: float | None) -> tuple[float, float]:
    """(communication not overlapped without the bubble, the bubble) as the bar draws them:
    the bubble is part of the communication not overlapped, cut to it when it exceeds it."""
    bubble = min(max(bubble_us or 0.0, 0.0), max(exposed_us, 0.0))
    return max(exposed_us, 0.0) - bubble, bubble


def rank_list_text(ranks: Sequence[int]) -> str:
    """Ranks as few characters say them: "0-7", "0-56 by 8", "0,2", "0-3,8-11"."""
    xs = sorted(set(ranks))
    if len(xs) >= 3:
        step = xs[1] - xs[0]
        if all(b - a == step for a, b in zip(xs, xs[1:])):
            return f"{xs[0]}-{xs[-1]}" if step == 1 else f"{xs[0]}-{xs[-1]} by {step}"
    runs: list[tuple[int, int]] = []
    for x in xs:
        if runs and x == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], x)
        else:
            runs.append((x, x))
    return ",".join(str(a) if a == b else f"{a}{',' if b == a + 1 else '-'}{b}" for a, b in runs)


def _pack(items: Sequence[str], room: int, max_lines: int) -> list[str]:
    """`items` joined by spaces into lines `room` wide, at most `max_lines`: the last line
    then ends with "+N more" (N: the items left out)."""
    lines: list[list[str]] = []
    for item in items:
        if lines and len(" ".join([*lines[-1], item])) <= room:
            lines[-1].append(item)
        else:
            lines.append([item])
    if len(lines) <= max_lines:
        return [" ".join(line) for line in lines]
    head = lines[: max_lines - 1]
    rest = list(items[sum(len(line) for line in head) :])
    last: list[str] = []
    for k, item in enumerate(rest):
        if len(" ".join([*last, item, f"+{len(rest) - k - 1} more"])) > room:
            break
        last.append(item)
    return [" ".join(line) for line in head] + [" ".join([*last, f"+{len(rest) - len(last)} more"])]


def group_lines(groups: Sequence[Group], width: int) -> list[Text]:
    """The groups by name, one name a paragraph: "pp ×2  [0,2] [1,3]", wrapped with a hanging
    indent, at most GROUP_LINES lines a name (then "+N more")."""
    by_name: dict[str, list[Group]] = {}
    for g in groups:
        by_name.setdefault(g.name, []).append(g)
    heads = {name: f"  {name}" + (f" ×{len(gs)}" if len(gs) > 1 else "") for name, gs in by_name.items()}
    indent = max((len(h) for h in heads.values()), default=0) + 2
    if indent > max(width // 3, 12):
        indent = 6  # a long name: its groups go on the lines below it
    out: list[Text] = []
    for name, gs in by_name.items():
        items = [f"[{rank_list_text(g.ranks)}]" for g in gs]
        if len(gs) > 1 and all(len(g.ranks) == 1 for g in gs):
            covered = rank_list_text([r for g in gs for r in g.ranks])
            items = [f"one rank each ({covered})"]  # size 1: no communication in them
        head = heads[name]
        room = max(width - indent, 8)
        packed = _pack(items, room, GROUP_LINES)
        if len(head) + 2 > indent:
            out.append(Text(head, style="bold"))
            first = False
        else:
            first = True
        for i, line in enumerate(packed):
            text = Text()
            if i == 0 and first:
                text.append(head.ljust(indent), style="bold")
            else:
                text.append(" " * indent)
            text.append(line)
            out.append(text)
    return out


def wrapped(text: Text, width: int, console: Console, indent: int = 0) -> list[Text]:
    """`text` wrapped at word boundaries, continuation lines indented by `indent` (every line
    fits in `width`: the text is wrapped to the room the indented lines have)."""
    if width <= indent + 8:
        indent = 0
    lines = list(text.wrap(console, max(width - indent, 1))) or [Text("")]
    return [lines[0], *(Text(" " * indent) + line for line in lines[1:])]


@dataclass(frozen=True)
class BarRow:
    """One bar of the chart: its label, the four parts (us), its total text and its flags."""

    label: str
    parts: tuple[float, float, float, float]
    total: str
    flags: str = ""


def rank_bar(r: RankSummary, total: str, flags: str) -> BarRow:
    comm, bubble = bubble_parts(r.exposed_comm_us, r.bubble_us)
    return BarRow(f"rank {r.rank}", (r.compute_us, comm, bubble, r.free_us), total, flags)


def stage_bar(s: Stage, total: str) -> BarRow:
    comm, bubble = bubble_parts(s.exposed_comm_us, s.bubble_us)
    return BarRow("mean", (s.compute_us, comm, bubble, s.free_us), total, "")


def _timed(r: RankSummary) -> bool:
    return r.error is None and r.steps > 0


def longest_step(ranks: Sequence[RankSummary]) -> float:
    """The scale of every bar: the longest step of the ranks with steps (their parts' sum)."""
    return max(
        (r.compute_us + max(r.exposed_comm_us, 0.0) + r.free_us for r in ranks if _timed(r)),
        default=0.0,
    )


@dataclass(frozen=True)
class ChartData:
    """What the chart draws, from the cluster summary."""

    parallel: ParallelLayout | None
    ranks: tuple[RankSummary, ...]
    slow_ranks: tuple[str, ...]
    findings: tuple[Finding, ...]


class ChartLines:
    """The chart's lines for one width: Rich Text lines and bar rows, in order."""

    def __init__(self, data: ChartData, figures: FigureFormat, console: Console, width: int) -> None:
        self.data = data
        self.figures = figures
        self.console = console
        self.width = max(width, 20)
        self.items: list[Text | BarRow] = []
        self.stage_lines: dict[int, int] = {}  # stage -> the line of its title
        self.longest_us = longest_step(data.ranks)
        self._build()

    # ------------------------------------------------------------ text
    def _text(self, text: Text, indent: int = 0) -> None:
        self.items += wrapped(text, self.width, self.console, indent)

    def _blank(self) -> None:
        self.items.append(Text(""))

    def _build(self) -> None:
        par = self.data.parallel
        by_rank = {r.rank: r for r in self.data.ranks}
        if par is None:
            self._text(
                Text(
                    "No parallel layout: no rank declares one (profiler_metadata.json, the db "
                    "export's META_DATA) and the communication files show no HCCL group. The "
                    "ranks' bars are below, all in one group.",
                    style="dim",
                ),
            )
            self._blank()
            self._legend()
            self._blank()
            self._bars([r.rank for r in self.data.ranks], by_rank, None)
            return
        self.items.append(Text("groups", style="bold"))
        if par.groups:
            self.items += group_lines(par.groups, self.width)
        else:
            self._text(Text("  no group is declared or seen", style="dim"))
        for note in par.notes:
            self._text(Text(f"  {note}", style="dim"), 4)
        self._blank()
        self._legend()
        self._text(Text(NO_SPLIT, style="dim"))
        for stage in par.stages:
            self._blank()
            self._stage(stage, by_rank)

    def _legend(self) -> None:
        text = Text()
        for i, part in enumerate(PARTS):
            if i:
                text.append("  ")
            text.append(GLYPHS[part], style=PART_STYLES[part])
            text.append(f" {PART_LABELS[part]}")
        self._text(text, 2)
        longest = self.figures.text("step_us", self.longest_us) if self.longest_us else "-"
        self._text(
            Text(
                "Means per step. Exposed comm: communication not overlapped with compute; the bubble, "
                f"the wait in pipeline receives, is part of it. Every bar to the scale of the longest rank: {longest}.",
                style="dim",
            )
        )

    def _stage(self, stage: Stage, by_rank: dict[str, RankSummary]) -> None:
        f = self.figures
        numbers = [int(r) for r in stage.ranks if r.isascii() and r.isdigit()]
        named = rank_list_text(numbers) if len(numbers) == len(stage.ranks) else ", ".join(stage.ranks)
        n = len(stage.ranks)
        self.stage_lines[stage.stage] = len(self.items)
        title = Text()
        title.append(f"stage {stage.stage}", style="bold reverse")
        title.append(f"  {n} rank{'s' if n != 1 else ''}: {named}", style="bold")
        title.append(f" · mean step {f.text('step_us', stage.step_us)}")
        self._text(title, 2)
        figures = Text("  mean per step: ", style="dim")
        figures.append(f"compute {f.text('compute_us', stage.compute_us)}")
        figures.append(" · ", style="dim")
        figures.append(f"exposed comm {f.text('exposed_comm_us', stage.exposed_comm_us)}")
        figures.append(f", bubble {f.text('bubble_us', stage.bubble_us)} of it")
        figures.append(" · ", style="dim")
        figures.append(f"free {f.text('free_us', stage.free_us)}")
        self._text(figures, 4)
        members = set(stage.ranks)
        card = stage_card(stage.stage)
        for finding in self.data.findings:
            if finding.card == card or finding.card in members:
                text = Text("  ")
                text.append(SEVERITY_MARK[finding.severity], style=SEVERITY_STYLES[finding.severity])
                where = "" if finding.card == card else f"rank {finding.card}: "
                text.append(f" {where}{group_digits(finding.title)}")
                self._text(text, 7)
        self._bars(list(stage.ranks), by_rank, stage)

    def _bars(self, ranks: Sequence[str], by_rank: dict[str, RankSummary], stage: Stage | None) -> None:
        f = self.figures
        bars: list[BarRow] = []
        if stage is not None and any(_timed(by_rank[r]) for r in ranks if r in by_rank):
            bars.append(stage_bar(stage, f.text("step_us", stage.step_us)))
        notes: list[Text] = []
        partial: dict[tuple[str, ...], list[str]] = {}  # what they lack -> the ranks
        for label in ranks:
            r = by_rank.get(label)
            if r is None:
                continue
            if r.error is not None:
                notes.append(Text(f"  rank {r.rank} damaged: {' '.join(r.error.split())}", style="bold red"))
                continue
            if r.steps <= 0:
                notes.append(
                    Text(f"  rank {r.rank} has no steps: its figures are totals, left out of the means", style="dim")
                )
                continue
            flags = []
            if r.rank in self.data.slow_ranks:
                flags.append("slow")
            if r.missing:
                flags.append("partial")
                partial.setdefault(tuple(r.missing), []).append(r.rank)
            bars.append(rank_bar(r, f.text("step_us", r.step_us), " ".join(flags)))
        self.items += bars
        for lacks, who in partial.items():
            numbers = [int(x) for x in who if x.isascii() and x.isdigit()]
            named = rank_list_text(numbers) if len(numbers) == len(who) else ", ".join(who)
            many = len(who) > 1
            notes.append(
                Text(
                    f"  rank{'s' if many else ''} {named} (partial): no {', '.join(lacks)}; "
                    f"{'their' if many else 'its'} steps are counted",
                    style="dim",
                )
            )
        for note in notes:
            self._text(note, 4)

    # ------------------------------------------------------------ drawing
    def strips(self, styles: dict[str, Style], label: Style, slow: Style) -> list[Strip]:
        """The lines drawn; every bar of the chart has the same room, so all share one scale."""
        bars = [item for item in self.items if isinstance(item, BarRow)]
        label_w = max((len(b.label) for b in bars), default=0) + 2
        total_w = max((len(b.total) for b in bars), default=0)
        flag_w = max((len(b.flags) + 1 for b in bars if b.flags), default=0)
        cells = max(self.width - 2 - label_w - 1 - total_w - flag_w, 1)
        out = []
        for item in self.items:
            if isinstance(item, Text):
                out.append(Strip(list(item.render(self.console))).crop_extend(0, self.width, None))
                continue
            segments = [Segment("  " + item.label.ljust(label_w), label)]
            drawn = 0
            for part, n in zip(PARTS, part_cells(item.parts, self.longest_us, cells)):
                if n:
                    segments.append(Segment(GLYPHS[part] * n, styles[part]))
                    drawn += n
            segments.append(Segment(" " * (cells - drawn)))
            segments.append(Segment(" " + item.total.rjust(total_w), label))
            if item.flags:
                segments.append(Segment(" " + item.flags, slow))
            out.append(Strip(segments).crop_extend(0, self.width, None))
        return out


class StageChart(ScrollView, can_focus=True):
    """The parallel view's groups and stage bars, scrolled vertically."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "scroll_up", "Scroll up", show=False),
        Binding("down,j", "scroll_down", "Scroll down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown,space", "page_down", "Page down", show=False),
        Binding("home,g", "scroll_home", "Top", show=False),
        Binding("end,G", "scroll_end", "Bottom", show=False),
    ]

    DEFAULT_CSS = """
    StageChart {
        background: $surface;
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
    }
    StageChart > .stage-chart--label {
        color: $text-muted;
    }
    StageChart > .stage-chart--flag {
        color: $warning;
        text-style: bold;
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"stage-chart--label", "stage-chart--flag"}

    def __init__(self, data: ChartData, figures: FigureFormat, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.data = data
        self.figures = figures
        self.lines: ChartLines | None = None
        self._strips: list[Strip] = []
        self._styles = {part: Style.parse(style) for part, style in PART_STYLES.items()}

    def _rebuild(self) -> None:
        width = self.scrollable_content_region.width or self.size.width
        if width <= 0:
            return
        if self.lines is not None and self.lines.width == max(width, 20) and self._strips:
            return
        self.lines = ChartLines(self.data, self.figures, self.app.console, width)
        label = self.get_component_rich_style("stage-chart--label", default=Style())
        flag = self.get_component_rich_style("stage-chart--flag", default=Style())
        self._strips = self.lines.strips(self._styles, label, flag)
        self.virtual_size = Size(width, len(self._strips))
        self.refresh()

    def on_mount(self) -> None:
        self.call_after_refresh(self._rebuild)

    def on_resize(self, event: Resize) -> None:
        self._rebuild()

    @property
    def text_lines(self) -> list[str]:
        """Every line of the chart as plain text (for the tests and for copying)."""
        return [s.text.rstrip() for s in self._strips]

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width or self.size.width
        index = y + round(self.scroll_y)
        if self.lines is None or not 0 <= index < len(self._strips):
            return Strip.blank(width)
        return self._strips[index].crop_extend(0, width, None)

    def scroll_to_stage(self, stage: int) -> None:
        if self.lines is not None and stage in self.lines.stage_lines:
            self.scroll_to(y=self.lines.stage_lines[stage], animate=False)
