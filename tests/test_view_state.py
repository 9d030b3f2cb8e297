"""The main screen's view state: pure transitions, no app."""

from __future__ import annotations

import dataclasses

import pytest

from npuscope.tui.view_state import (
    ViewState,
    close_cards,
    next_sort_column,
    reverse,
    select,
    set_card,
    set_filter,
    set_tab,
    sort_by,
    toggle_cards,
)


def test_default_view():
    s = ViewState(card="0")
    assert s.tab == "summary" and s.filter_of() == "" and not s.cards_open
    assert s.sort_of("summary") == ("row", False)  # time order
    assert s.sort_of("stats") == ("total_us", True)
    assert s.sort_of("steps") == ("row", False)  # a table not sorted yet: natural order


def test_frozen():
    s = ViewState()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.card = "1"  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.sorts["summary"] = ("wait_us", True)  # type: ignore[index]


def test_sort_key_first_worst_first_then_reverses():
    s = sort_by(ViewState(), "summary", "wait_us")
    assert s.sort_of("summary") == ("wait_us", True)
    s = sort_by(s, "summary", "wait_us")
    assert s.sort_of("summary") == ("wait_us", False)
    s = sort_by(s, "summary", "duration_us")  # another key starts worst first again
    assert s.sort_of("summary") == ("duration_us", True)


def test_time_order_again_reverses():
    s = sort_by(ViewState(), "summary", "wait_us")
    s = sort_by(s, "summary", "row")
    assert s.sort_of("summary") == ("row", False)  # earliest first
    s = sort_by(s, "summary", "row")
    assert s.sort_of("summary") == ("row", True)  # latest first
    s = sort_by(s, "summary", "row")
    assert s.sort_of("summary") == ("row", False)


def test_header_click_sorts_descending_first():
    s = sort_by(ViewState(), "stats", "count", descending=True)
    assert s.sort_of("stats") == ("count", True)
    assert sort_by(s, "stats", "count", descending=True).sort_of("stats") == ("count", False)


def test_sorts_are_per_table():
    s = sort_by(ViewState(), "summary", "wait_us")
    s = reverse(s, "stats")
    assert s.sort_of("summary") == ("wait_us", True) and s.sort_of("stats") == ("total_us", False)


def test_next_sort_column_wraps():
    cols = ("a", "b", "c")
    s = next_sort_column(ViewState(), "t", cols)
    assert s.sort_of("t") == ("a", True)
    s = next_sort_column(next_sort_column(s, "t", cols), "t", cols)
    assert s.sort_of("t") == ("c", True)
    assert next_sort_column(s, "t", cols).sort_of("t") == ("a", True)
    assert next_sort_column(s, "t", ()) is s


def test_filters_per_tab_and_the_op_tabs_share_one():
    s = set_filter(ViewState(), " type:Cast ")
    assert s.filter_of("summary") == "type:Cast" and s.filter_of("stats") == "type:Cast"
    s = set_filter(set_tab(s, "steps"), "dur>5")
    assert s.tab == "steps" and s.filter_of() == "dur>5" and s.filter_of("summary") == "type:Cast"
    s = set_filter(s, "", tab="summary")
    assert s.filter_of("summary") == "" and s.filter_of("steps") == "dur>5"


def test_new_card_keeps_filters_and_sorts_and_drops_selection():
    s = select(sort_by(set_filter(ViewState(card="0"), "wait>5"), "summary", "wait_us"), "summary", 17)
    assert s.selection["summary"] == 17
    t = set_card(s, "1")
    assert t.card == "1" and dict(t.selection) == {}
    assert t.filter_of() == "wait>5" and t.sort_of("summary") == ("wait_us", True)
    assert set_card(t, "1") is t  # no change, same state


def test_transitions_leave_the_old_state_alone():
    s = ViewState(card="0")
    t = set_filter(sort_by(s, "summary", "wait_us"), "x")
    assert s.sort_of("summary") == ("row", False) and s.filter_of() == ""
    assert t is not s


def test_cards_open_and_close():
    s = toggle_cards(ViewState())
    assert s.cards_open
    assert not close_cards(s).cards_open
    assert close_cards(close_cards(s)) == close_cards(s)
