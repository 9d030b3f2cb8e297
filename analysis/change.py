"""One number before and after, and when a change counts: the arithmetic every comparison shares.

An op type (or a communication op type) is "same" when its time moved by less than SAME_US
or less than SAME_PCT: a change counts as faster / slower only when it is both at least 1 us
and at least 1%.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

SAME_US = 1.0
"""An op type whose total moved by less than this many us is "same"."""
SAME_PCT = 1.0
"""An op type whose total moved by less than this percentage is "same"."""
Status = Literal["new", "vanished", "faster", "slower", "same"]
STATUSES: tuple[Status, ...] = get_args(Status)


@dataclass(frozen=True)
class Change:
    """One number before and after; None when that side does not have it."""

    base: float | None
    new: float | None

    @property
    def delta(self) -> float:
        """NEW - BASE, a side without the number counting as 0 (an op type new or vanished)."""
        return (self.new or 0.0) - (self.base or 0.0)

    @property
    def delta_pct(self) -> float | None:
        """Relative change; None when there is nothing to be relative to."""
        if not self.base:
            return None if self.new else 0.0
        return 100.0 * self.delta / self.base

    @property
    def known(self) -> bool:
        """Both sides have the number (a view missing on one side has none to compare)."""
        return self.base is not None and self.new is not None

    @property
    def ratio(self) -> float | None:
        """NEW / BASE; None when a side is missing or BASE is 0."""
        return self.new / self.base if self.known and self.base and self.new is not None else None


def status_of(change: Change) -> Status:
    if change.base is None:
        return "new"
    if change.new is None:
        return "vanished"
    pct = change.delta_pct
    if abs(change.delta) < SAME_US or (pct is not None and abs(pct) < SAME_PCT):
        return "same"
    return "faster" if change.delta < 0 else "slower"
