"""A frame's rows of one card, from one grouped pass over the frame.

Reports, rules and views read each card of a capture in turn. A filter per card and per read
scans the whole frame each time: with thousands of cards in one export (CSVs of many machines
concatenated) that is a scan per card per rule, and the time grows with cards x rows. Here a
frame of many cards is split by card once (its row numbers sorted by card; the rows themselves
only for a small frame), and every later read of a card is a slice or a gather of that card's
rows; the split lives as long as the frame does.
A large frame of few cards is filtered as before: a scan per read costs little there.

`per_frame` keeps any other function of a frame the same way (the span of each card, say), so a
value the reads of every card share is computed in one pass too.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import polars as pl

SPLIT_FROM_CARDS = 16
"""From this many distinct cards on, a frame is split by card once; below, filtered per read."""
SPLIT_UP_TO_ROWS = 1 << 16
"""A frame of at most this many rows is split whatever its cards: the split costs nothing."""

HOST = "host"  # the card of rows a file records for the whole capture

T = TypeVar("T")

_lock = threading.Lock()
_memo: dict[int, tuple[weakref.ReferenceType[pl.DataFrame], dict[Hashable, Any]]] = {}


def _forget(
    key: int,
    ref: weakref.ReferenceType[pl.DataFrame],
    memo: dict[int, tuple[weakref.ReferenceType[pl.DataFrame], dict[Hashable, Any]]] = _memo,
    lock: threading.Lock = _lock,
) -> None:
    """A frame's values go with the frame (bound here: at exit the module's names may be gone)."""
    with lock:
        got = memo.get(key)
        if got is not None and got[0] is ref:
            del memo[key]


def per_frame(frame: pl.DataFrame, name: Hashable, compute: Callable[[pl.DataFrame], T]) -> T:
    """`compute(frame)`, computed once per frame (and per `name`, which must name everything
    `compute` depends on besides the frame) while the frame lives."""
    key = id(frame)
    with _lock:
        got = _memo.get(key)
        if got is None or got[0]() is not frame:
            ref = weakref.ref(frame, functools.partial(_forget, key))
            got = _memo[key] = (ref, {})
        values = got[1]
        if name in values:
            return values[name]  # type: ignore[no-any-return]
    value = compute(frame)
    with _lock:
        values.setdefault(name, value)
    return value


class _Split:
    """Where each card's rows of a frame are: the row numbers in card order (a stable sort, so
    each card's rows keep their order) and each card's run in them. A large frame is not
    copied (4 bytes a row kept; a card's rows are gathered when asked for); a small one is
    kept sorted, and a card's rows are a slice of it."""

    def __init__(self, frame: pl.DataFrame) -> None:
        ordered = frame.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_i"), "card").sort(
            "card", maintain_order=True, nulls_last=True
        )
        self.order = ordered["_i"]
        self.sorted = frame[self.order] if frame.height <= SPLIT_UP_TO_ROWS else None
        self.at: dict[str, tuple[int, int]] = {}
        offset = 0
        for card, n in ordered.group_by("card", maintain_order=True).len().iter_rows():
            if card is not None:
                self.at[str(card)] = (offset, n)
            offset += n

    def of(self, frame: pl.DataFrame, card: str) -> pl.DataFrame:
        offset, n = self.at.get(card, (0, 0))
        if self.sorted is not None:
            return self.sorted.slice(offset, n)
        return frame[self.order.slice(offset, n)] if n else frame.clear()


def _split(frame: pl.DataFrame) -> _Split | None:
    """The frame split by card; None for a large frame of few cards."""
    if frame.height > SPLIT_UP_TO_ROWS and frame["card"].n_unique() < SPLIT_FROM_CARDS:
        return None
    return _Split(frame)


def card_rows(frame: pl.DataFrame, card: str) -> pl.DataFrame:
    """The rows of `frame` whose card is `card`, in frame order."""
    if frame.height == 0:
        return frame
    split = per_frame(frame, "by_card", _split)
    if split is None:
        return frame.filter(pl.col("card") == card)
    return split.of(frame, card)


def card_or_host_rows(frame: pl.DataFrame, card: str) -> pl.DataFrame:
    """The card's rows, else the rows of the whole capture (card `host`)."""
    mine = card_rows(frame, card)
    return mine if mine.height else card_rows(frame, HOST)
