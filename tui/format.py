"""Number formatting shared by the explorer's panes."""

from __future__ import annotations


def human_us(value: float, decimals: int = 1) -> str:
    """Microseconds as us, ms or s, whichever reads best."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:,.{decimals + 1}f} s"
    if value >= 1000:
        return f"{value / 1000:,.{decimals}f} ms"
    return f"{value:,.{decimals}f} us"
