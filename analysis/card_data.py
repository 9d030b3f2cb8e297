"""What the operator rules share besides the cards' frames: a share of a whole, and the sample
size under which shares of compute say little."""

from __future__ import annotations

SMALL_SAMPLE_TASKS = 100
"""Below this many operator tasks on a card, a share of compute says little about the run: the
findings say the capture is a small sample (a stable step of a real training runs thousands)."""


def share(part: float, whole: float) -> float:
    """`part` as a % of `whole`, to 3 decimals; 0 without a whole."""
    return round(100.0 * part / whole, 3) if whole > 0 else 0.0
