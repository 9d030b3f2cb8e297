"""FrameTable: Line-API table over a polars frame (formatting, keys, mouse, messages, 2M rows)."""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.errors import StyleSyntaxError
from textual.app import App, ComposeResult
from textual.widgets import Input

from npuscope.analysis.table import cell, num, signed
from npuscope.tui.widgets.frame_table import Column, FrameTable, fit, format_value

N_SMALL = 100
PAGE = 19  # 80x20 app: 20 lines, the header takes one, no horizontal scrollbar


def small_frame() -> pl.DataFrame:
    rows = range(N_SMALL)
    return pl.DataFrame(
        {
            "row": list(rows),
            "name": ["a_very_long_operator_name" if i == 1 else None if i == 2 else f"op_{i}" for i in rows],
            "dur": [1234567.891 if i == 0 else None if i == 3 else i * 10.5 for i in rows],
            "ratio": [100.0 if i == 0 else i % 100 * 1.0 for i in rows],
            "count": [i * 1000 for i in rows],
            "cause": ["recompilation" if i % 10 == 0 else None for i in rows],
            "stream": [i % 4 for i in rows],  # not shown, but part of the row dicts
        }
    )


COLUMNS = [
    Column("name", "Name", 14, style_key="cause"),
    Column("dur", "Dur(us)", 14, numeric=True),
    Column("ratio", "Ratio(%)", 14, numeric=True, bar=True, decimals=1),
    Column("count", "Count", 10, numeric=True),
]


class TableApp(App):
    def __init__(self, frame: pl.DataFrame, columns=COLUMNS, **kwargs) -> None:
        super().__init__()
        self.frame = frame
        self.columns = columns
        self.kwargs = kwargs
        self.highlighted: list[tuple[int, dict]] = []
        self.selected: list[tuple[int, dict]] = []
        self.headers: list[str] = []

    def compose(self) -> ComposeResult:
        yield FrameTable(self.frame, self.columns, **self.kwargs)

    def on_frame_table_row_highlighted(self, message: FrameTable.RowHighlighted) -> None:
        self.highlighted.append((message.index, message.row))

    def on_frame_table_row_selected(self, message: FrameTable.RowSelected) -> None:
        self.selected.append((message.index, message.row))

    def on_frame_table_header_selected(self, message: FrameTable.HeaderSelected) -> None:
        assert message.table is self.query_one(FrameTable)
        self.headers.append(message.key)


def screen(table: FrameTable) -> list[str]:
    return [table.render_line(y).text for y in range(table.size.height)]


def first_cell(line: str) -> str:
    return line[1:15].strip()


# ---------------------------------------------------------------- without an app


def test_fit_cuts_with_ellipsis_and_aligns() -> None:
    assert fit("abcdef", 4) == "abc…"
    assert fit("ab", 4) == "ab  "
    assert fit("ab", 4, right=True) == "  ab"
    assert fit("算子名称很长", 7) == "算子名…"  # wide characters count two cells
    assert fit("a\tb\nc", 5) == "a b c"  # control characters would break the line


def test_format_value_numbers_and_nulls() -> None:
    number = Column("x", "X", 10, numeric=True, decimals=2)
    assert format_value(1234567.891, number) == "1,234,567.89"
    assert format_value(1234567, number) == "1,234,567"
    assert format_value(None, number) == "-"
    assert format_value(float("nan"), number) == "NaN"
    assert format_value(None, Column("s", "S", 5)) == "-"
    assert format_value(12, Column("s", "S", 5)) == "12"


def test_column_rejects_zero_width() -> None:
    with pytest.raises(ValueError):
        Column("x", "X", 0)


def test_render_line_without_app() -> None:
    table = FrameTable(small_frame(), COLUMNS, sort=("dur", True))
    header, row0, row1, row2, row3 = (table.render_line(y).text for y in range(5))
    assert header == " Name                Dur(us) ▼       Ratio(%)      Count "
    # right-aligned numbers with thousands separators; the bar column keeps its value
    assert row0 == " op_0            1,234,567.891     100.0 ████          0 "
    assert row1.startswith(" a_very_long_o… ")  # 14 cells, cut with an ellipsis
    assert first_cell(row2) == "-"  # null text
    assert row3[16:30] == "             -"  # null number, right-aligned
    assert row1[16:30] == "        10.500"
    assert row1.endswith("     1,000 ")


def test_render_line_slices_once_per_window() -> None:
    table = FrameTable(small_frame(), COLUMNS)
    for y in range(1, 21):
        table.render_line(y)
    assert table._window_loads == 1
    for y in range(1, 21):  # cached strips: no new slice
        table.render_line(y)
    assert table._window_loads == 1


def test_cell_styles_pick_style_from_style_key() -> None:
    table = FrameTable(small_frame(), COLUMNS, cell_styles={"recompilation": "bold red"})
    name_segment = list(table.render_line(1))[1]  # row 0, cause = recompilation
    assert name_segment.text.startswith("op_0")
    assert name_segment.style.color.name == "red" and name_segment.style.bold
    plain_segment = list(table.render_line(2))[1]  # row 1, no cause
    assert plain_segment.style.color is None
    with pytest.raises(StyleSyntaxError):
        table.cell_styles = {"x": "not a colour at all"}


def test_set_data_requires_the_columns() -> None:
    table = FrameTable()
    with pytest.raises(ValueError, match="nope"):
        table.set_data(small_frame(), [Column("nope", "Nope", 5)])


def test_row_highlighted_messages_replace_older_ones() -> None:
    table, other = FrameTable(), FrameTable()
    older = FrameTable.RowHighlighted(table, 1, {})
    assert older.can_replace(FrameTable.RowHighlighted(table, 2, {}))
    assert not older.can_replace(FrameTable.RowHighlighted(other, 2, {}))
    assert not older.can_replace(FrameTable.RowSelected(table, 2, {}))


def test_empty_frame_without_app() -> None:
    table = FrameTable(small_frame().head(0), COLUMNS)
    assert table.render_line(0).text.startswith(" Name ")
    assert table.render_line(1).text.strip() == "no rows match"
    assert table.current_row is None and table.row_count == 0


# ---------------------------------------------------------------- in an app


async def test_header_and_first_rows_on_screen() -> None:
    app = TableApp(small_frame(), sort=("count", False))
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.pause()
        table = app.query_one(FrameTable)
        lines = screen(table)
        assert len(lines) == 20
        assert lines[0].startswith(" Name                  Dur(us)       Ratio(%)    Count ▲ ")
        assert lines[1].startswith(" op_0            1,234,567.891     100.0 ████          0 ")
        assert first_cell(lines[2]) == "a_very_long_o…"
        assert first_cell(lines[19]) == "op_18"
        assert table.virtual_size.height == N_SMALL + 1
        # the cursor row uses the cursor component style, the others do not
        cursor_style = table.get_component_rich_style("frame-table--cursor")
        assert list(table.render_line(1))[1].style.bgcolor == cursor_style.bgcolor
        assert list(table.render_line(2))[1].style.bgcolor != cursor_style.bgcolor


async def test_cursor_keys_and_highlight_messages() -> None:
    app = TableApp(small_frame())
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.pause()
        table = app.query_one(FrameTable)
        assert table.has_focus
        assert [index for index, _ in app.highlighted] == [0]  # once, for the initial row

        await pilot.press("down", "j")
        assert table.cursor == 2
        assert app.highlighted[-1][0] == 2
        assert app.highlighted[-1][1]["stream"] == 2  # the whole row, not just the shown columns
        await pilot.press("k")
        assert table.cursor == 1 and app.highlighted[-1][0] == 1

        await pilot.press("pagedown")
        assert table.cursor == 1 + PAGE
        assert table.scroll_y == PAGE
        assert first_cell(screen(table)[1]) == f"op_{PAGE}"
        assert screen(table)[0].startswith(" Name ")  # the header stays

        await pilot.press("end")
        assert table.cursor == N_SMALL - 1
        assert app.highlighted[-1][0] == N_SMALL - 1
        assert app.highlighted[-1][1]["row"] == N_SMALL - 1
        lines = screen(table)
        assert first_cell(lines[-1]) == f"op_{N_SMALL - 1}"
        assert lines[0].startswith(" Name ")

        await pilot.press("pageup")
        assert table.cursor == N_SMALL - 1 - PAGE

        await pilot.press("home")
        assert table.cursor == 0 and table.scroll_y == 0
        assert app.highlighted[-1][0] == 0

        await pilot.press("G")
        assert table.cursor == N_SMALL - 1
        await pilot.press("g")
        assert table.cursor == 0
        await pilot.press("space")
        assert table.cursor == PAGE
        await pilot.press("ctrl+b")
        assert table.cursor == 0
        await pilot.press("ctrl+f")
        assert table.cursor == PAGE
        await pilot.press("up")
        assert table.cursor == PAGE - 1
        await pilot.press("home", "up")  # clamps at the top
        assert table.cursor == 0


async def test_cursor_style_follows_focus_and_keys_bring_cursor_back() -> None:
    class TwoWidgets(TableApp):
        def compose(self) -> ComposeResult:
            yield from super().compose()
            yield Input()

    app = TwoWidgets(small_frame())
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.pause()
        table = app.query_one(FrameTable)
        focused = list(table.render_line(1))[1].style.bgcolor
        await pilot.press("tab")
        assert not table.has_focus
        blurred = list(table.render_line(1))[1].style.bgcolor
        assert blurred != focused
        await pilot.press("shift+tab")
        assert table.has_focus
        assert list(table.render_line(1))[1].style.bgcolor == focused

        table.scroll_to(y=50, animate=False)  # e.g. the mouse wheel: the cursor (row 0) leaves the view
        await pilot.pause()
        await pilot.press("up")  # already on row 0: the view comes back to it
        assert table.cursor == 0 and table.scroll_y == 0


async def test_highlight_messages_are_coalesced() -> None:
    app = TableApp(small_frame())
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.pause()
        table = app.query_one(FrameTable)
        app.highlighted.clear()
        for index in (1, 2, 3, 4):  # no await in between: all four are queued together
            table.move_to(index)
        await pilot.pause()
        assert [index for index, _ in app.highlighted] == [4]


async def test_enter_posts_row_selected() -> None:
    app = TableApp(small_frame())
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.press("down", "down", "down", "enter")
        await pilot.pause()
        assert len(app.selected) == 1
        index, row = app.selected[0]
        assert index == 3
        assert row == small_frame().row(3, named=True)


async def test_header_click_posts_header_selected() -> None:
    app = TableApp(small_frame())
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.pause()
        await pilot.click(FrameTable, offset=(20, 0))  # inside "Dur(us)"
        await pilot.click(FrameTable, offset=(50, 0))  # inside "Count"
        await pilot.click(FrameTable, offset=(2, 0))  # inside "Name"
        await pilot.pause()
        assert app.headers == ["dur", "count", "name"]
        assert app.query_one(FrameTable).cursor == 0


async def test_row_click_moves_cursor() -> None:
    app = TableApp(small_frame())
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.pause()
        table = app.query_one(FrameTable)
        await pilot.press("pagedown")
        await pilot.click(FrameTable, offset=(5, 4))  # the fourth data row on screen
        await pilot.pause()
        assert table.cursor == PAGE + 3
        assert app.highlighted[-1][0] == PAGE + 3
        assert app.selected == []
        await pilot.click(FrameTable, offset=(5, 4), times=2)
        await pilot.pause()
        assert app.selected and app.selected[-1][0] == PAGE + 3


async def test_set_data_keeps_the_row_after_resorting() -> None:
    frame = small_frame()
    app = TableApp(frame, sort=("row", False))
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.pause()
        table = app.query_one(FrameTable)
        table.move_to(30)
        await pilot.pause()
        assert table.current_row["row"] == 30
        screen_line = table.cursor - round(table.scroll_y) + 1

        resorted = frame.sort("count", descending=True)
        table.set_data(resorted, COLUMNS, sort=("count", True))
        await pilot.pause()
        assert table.current_row["row"] == 30
        assert table.cursor == resorted["row"].to_list().index(30)
        assert app.highlighted[-1][1]["row"] == 30
        assert table.cursor - round(table.scroll_y) + 1 == screen_line  # same height on screen
        lines = screen(table)
        assert "Count ▼" in lines[0] and "▲" not in lines[0]
        assert first_cell(lines[screen_line]) == "op_30"

        # the row is gone: back to the first row
        table.set_data(resorted.filter(pl.col("row") != 30), COLUMNS)
        await pilot.pause()
        assert table.cursor == 0 and table.scroll_y == 0
        assert table.current_row["row"] == N_SMALL - 1

        # keep_key=None never keeps
        table.move_to(5)
        table.set_data(frame, COLUMNS, keep_key=None)
        assert table.cursor == 0


async def test_move_to_key() -> None:
    app = TableApp(small_frame())
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.pause()
        table = app.query_one(FrameTable)
        assert table.move_to_key(77)
        await pilot.pause()
        assert table.cursor == 77 and table.current_row["row"] == 77
        assert 77 in [round(table.scroll_y) + y - 1 for y in range(1, 20)]  # on screen
        assert app.highlighted[-1][0] == 77
        assert table.move_to_key("op_12", key="name")
        assert table.cursor == 12
        assert not table.move_to_key(12345)
        assert not table.move_to_key(1, key="no_such_column")
        assert not table.move_to_key("text", key="row")  # wrong type: not found, no error
        assert table.cursor == 12


async def test_empty_frame_in_app() -> None:
    app = TableApp(small_frame().head(0), sort=("name", False))
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.press("down", "pagedown", "end", "enter")
        await pilot.pause()
        table = app.query_one(FrameTable)
        lines = screen(table)
        assert lines[0].startswith(" Name ▲")
        assert lines[1].strip() == "no rows match"
        assert all(not line.strip() for line in lines[2:])
        assert app.selected == [] and app.highlighted == []
        empty_style = table.get_component_rich_style("frame-table--empty")
        assert list(table.render_line(1))[0].style.color == empty_style.color


async def test_horizontal_scroll_when_columns_are_wider() -> None:
    wide = [
        Column("name", "Name", 30),
        Column("dur", "Dur(us)", 30, numeric=True),
        Column("count", "Count", 30, numeric=True),
    ]
    app = TableApp(small_frame(), columns=wide)
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.pause()
        table = app.query_one(FrameTable)
        assert table.virtual_size.width == 94
        assert "Count" not in screen(table)[0]
        await pilot.press("right")
        await pilot.pause()
        assert table.scroll_x == 1
        assert screen(table)[0].startswith("Name ")
        await pilot.press("ctrl+pagedown")  # page right: to the end of the 94 cells
        await pilot.pause()
        assert table.scroll_x == table.max_scroll_x > 1
        assert screen(table)[0].rstrip().endswith("Count")
        assert not screen(table)[0].startswith(" Name")


async def test_two_million_rows() -> None:
    n = 2_000_000
    frame = pl.select(row=pl.int_range(n)).with_columns(
        name=pl.format("op_{}", pl.col("row")),
        dur=(pl.col("row") % 1000).cast(pl.Float64) * 1.5,
        count=pl.col("row") * 3,
    )
    columns = [
        Column("row", "#", 10, numeric=True),
        Column("name", "Name", 14),
        Column("dur", "Dur(us)", 12, numeric=True),
        Column("count", "Count", 12, numeric=True),
    ]
    app = TableApp(pl.DataFrame({"row": [0]}), columns=[Column("row", "#", 5)])
    async with app.run_test(size=(80, 20)) as pilot:
        await pilot.pause()
        table = app.query_one(FrameTable)
        table.set_data(frame, columns)
        await pilot.pause()
        assert table.row_count == n
        assert table.virtual_size.height == n + 1
        lines = screen(table)
        assert lines[1].startswith("          0 op_0")
        assert lines[19].startswith("         18 op_18")
        loads = table._window_loads

        await pilot.press("pagedown")
        lines = screen(table)
        assert lines[1].startswith("         19 op_19")
        assert table._window_loads - loads <= 1

        await pilot.press("end")
        lines = screen(table)
        assert lines[19].startswith("  1,999,999 op_1999999 ")
        assert table.current_row["count"] == 3 * (n - 1)

        resorted = frame.sort("dur", descending=True)
        table.set_data(resorted, columns, sort=("dur", True))
        await pilot.pause()
        assert table.current_row["row"] == n - 1
        assert "Dur(us) ▼" in screen(table)[0]


# --- properties of cell formatting -----------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(text=st.text(), width=st.integers(min_value=0, max_value=60), right=st.booleans())
def test_fit_always_fills_exactly_its_cells_with_printable_text(text, width, right):
    out = fit(text, width, right)
    assert cell_len(out) == width
    assert not any(ord(ch) < 32 or ord(ch) == 127 for ch in out)
    if cell_len(text) <= width and text.isprintable():
        assert out.strip(" ") == text.strip(" ")  # fits: shown whole, only padded


NUMBERS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=300, deadline=None)
@given(value=NUMBERS, decimals=st.integers(min_value=0, max_value=6))
def test_format_value_of_a_number_reads_back(value, decimals):
    text = format_value(value, Column("x", "X", 10, numeric=True, decimals=decimals))
    if value is None:
        assert text == "-"
    elif isinstance(value, bool):
        assert text == str(value)
    elif isinstance(value, int):
        assert int(text.replace(",", "")) == value
    elif value == value and abs(value) != float("inf"):
        assert float(text.replace(",", "")) == pytest.approx(value, abs=10.0**-decimals)


@settings(max_examples=300, deadline=None)
@given(value=st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_report_cells_round_to_what_they_print(value):
    # Half the last printed digit, plus the float error of printing it: a tie such as
    # 34359738368.25 rounds to even, exactly half a digit away, give or take a few ulps.
    error = 8 * math.ulp(value)
    half = 0.05 + error
    assert float(cell(value).replace(",", "")) == pytest.approx(value, abs=0.0005 + error)
    assert float(num(value, 1).replace(",", "")) == pytest.approx(value, abs=half)
    s = signed(value, 1)
    assert s[0] in "+-" or round(value, 1) == 0  # a sign, except on what rounds to zero
    assert float(s.replace(",", "")) == pytest.approx(value, abs=half)


def test_unit_columns_scale_instead_of_cutting_numbers() -> None:
    """A `unit` column shows its values in the unit that fits its width and says which."""
    frame = pl.DataFrame({"start_us": [108_288_920.4, 5.0], "dur_us": [-0.0001, 12.5], "n": [25_000, 3]})
    columns = (
        Column("start_us", "Start", 9, numeric=True, unit="us"),
        Column("dur_us", "Dur", 10, numeric=True, unit="us"),
        Column("n", "Count", 3, numeric=True, decimals=0),
    )
    table = FrameTable(frame, columns)
    header, first, second = (table.render_line(y).text for y in range(3))
    assert header.split() == ["Start(s)", "Dur(us)", "Count"]
    assert first.split() == ["108.289", "0.000", "25,000"]  # never "-0.000", never cut with "…"
    assert second.split() == ["0.000", "12.500", "3"]
    assert "…" not in first + second
    assert [c.full_title for c in columns] == ["Start(us)", "Dur(us)", "Count"]


def test_columns_by_priority_fit_the_room_and_the_rest_follow() -> None:
    from npuscope.tui.widgets.frame_table import Shown, arrange

    def shown(key: str, width: int, **kw) -> Shown:
        return Shown(Column(key, key, width, **kw), width, key)

    cols = [
        shown("start", 9, priority=1),
        shown("name", 34, priority=1, flex=True, min_width=12),
        shown("task", 14, priority=2),
        shown("dur", 14, priority=1),
        shown("shapes", 26, priority=3),
    ]
    # 80 cells: start, name, dur fit; name takes what is left; task and shapes follow.
    out = arrange(cols, 60)
    assert [(s.column.key, s.width) for s in out] == [
        ("start", 9),
        ("name", 33),
        ("dur", 14),
        ("task", 14),
        ("shapes", 26),
    ]
    # The sorted column comes first even at a low priority.
    out = arrange(cols, 60, sort_key="shapes")
    assert [s.column.key for s in out][:3] == ["start", "name", "shapes"]
    assert arrange(cols, 0) == cols  # no width known: as given
