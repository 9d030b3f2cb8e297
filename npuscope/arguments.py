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


def add_source_args(
    parser: argparse.ArgumentParser,
    *,
    path: bool = True,
    timeline_help: str = "skip the timeline (faster on GB timelines)",
) -> None:
    """PATH (unless the command names its own), --capture, --no-cache, --strict, --source and
    --no-timeline: how every command picks and reads a profile."""
    if path:
        parser.add_argument("path", nargs="?", help="profile folder or file (default: the bundled demo)")
    parser.add_argument("--capture", help="which capture to open when PATH holds several (name or index)")
    parser.add_argument("--no-cache", action="store_true", help="parse from scratch and write no cache entry")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse a file with damaged rows (fewer fields than its header) instead of skipping them",
    )
    parser.add_argument(
        "--source",
        choices=("auto", "text", "db"),
        default="auto",
        help="when a capture has both, read its text export or its db export (default auto: the db)",
    )
    parser.add_argument("--no-timeline", action="store_true", help=timeline_help)
