"""A frame's rows card by card from one split (parsers/by_card.py): the same rows, in the same
order, as a filter per card, on frames of few and of many cards, large and small; values kept
per frame go with the frame."""

from __future__ import annotations

import gc
import random

import polars as pl
import pytest

from npuscope.parsers import by_card
from npuscope.parsers.by_card import HOST, card_or_host_rows, card_rows, per_frame


def _frame(rows: int, cards: int, seed: int = 7) -> pl.DataFrame:
    rng = random.Random(seed)
    names = [str(c) for c in range(cards)] + [HOST]
    card = [rng.choice(names) if i % 97 else None for i in range(rows)]  # a few null cards
    return pl.DataFrame({"card": card, "x": list(range(rows)), "v": [rng.random() for _ in range(rows)]})


@pytest.mark.parametrize(
    ("rows", "cards"),
    [(0, 0), (50, 3), (5_000, 40), (by_card.SPLIT_UP_TO_ROWS + 1_000, 4), (by_card.SPLIT_UP_TO_ROWS + 1_000, 300)],
)
def test_card_rows_are_the_filter_of_the_card(rows, cards):
    frame = _frame(rows, cards)
    asked = [str(c) for c in range(cards)] + [HOST, "no such card"]
    for card in asked:
        assert card_rows(frame, card).equals(frame.filter(pl.col("card") == card)), card
        mine = frame.filter(pl.col("card") == card)
        want = mine if mine.height else frame.filter(pl.col("card") == HOST)
        assert card_or_host_rows(frame, card).equals(want), card


def test_a_large_frame_of_few_cards_is_filtered_not_split():
    frame = _frame(by_card.SPLIT_UP_TO_ROWS + 10, 3)
    card_rows(frame, "1")
    assert per_frame(frame, "by_card", lambda f: pytest.fail("computed twice")) is None


@pytest.mark.parametrize(("rows", "copied"), [(5_000, True), (by_card.SPLIT_UP_TO_ROWS + 1_000, False)])
def test_a_split_of_a_large_frame_holds_row_numbers_not_rows(rows, copied):
    frame = _frame(rows, 40)
    card_rows(frame, "1")
    split = per_frame(frame, "by_card", lambda f: pytest.fail("computed twice"))
    assert split is not None
    assert split.order.len() == frame.height and split.order.dtype == pl.UInt32
    assert bool([v for v in vars(split).values() if isinstance(v, pl.DataFrame)]) == copied
    assert sum(n for _, n in split.at.values()) == frame["card"].drop_nulls().len()


def test_values_are_computed_once_per_frame_and_go_with_it():
    calls = []

    def count(f: pl.DataFrame) -> int:
        calls.append(1)
        return f.height

    frame = _frame(100, 20)
    assert per_frame(frame, "n", count) == per_frame(frame, "n", count) == 100
    assert per_frame(frame, ("n", 2), count) == 100
    assert len(calls) == 2
    other = _frame(100, 20)  # an equal frame is another frame
    assert per_frame(other, "n", count) == 100 and len(calls) == 3
    key = id(frame)
    del frame
    gc.collect()
    assert key not in by_card._memo
