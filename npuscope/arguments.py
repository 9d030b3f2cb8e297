"""argparse types shared by the commands: bad values are refused with the same one line."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from npuscope.text import whole_number


def count(low: int) -> Callable[[str], int]:
    """A whole number option of at least `low` (`--top`, `--steps`, `--start-step`)."""

    def parse(text: str) -> int:
        try:
            return whole_number(text, low)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def percent(text: str) -> float:
    """A percentage option: a finite number >= 0 (`--fail-on-regression`)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a percentage >= 0")
    return value
