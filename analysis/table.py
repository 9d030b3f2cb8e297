"""Aligned text tables and markdown tables, and the number formats the reports print.

The report, the comparison and the card spread print the same kind of table in text and in
markdown; this module is the one place that knows how a cell is written, so the three never
disagree on a number.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Table = Callable[[Sequence[str], Sequence[Sequence[object]], set[int]], list[str]]


def cell(v: object) -> str:
    """A table cell: floats with 3 decimals and thousands separators, None as `-`."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def num(v: float | None, digits: int = 1) -> str:
    """`v` with `digits` decimals and thousands separators; None as `-`."""
    return "-" if v is None else f"{v:,.{digits}f}"


def signed(v: float | None, digits: int = 1, unit: str = "") -> str:
    """`v` with its sign (`+1.5`, `-2.0`); no sign on what rounds to zero; None as `-`."""
    if v is None:
        return "-"
    text = f"{v:+,.{digits}f}"
    return (text[1:] if round(v, digits) == 0 else text) + unit


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]], numeric: set[int]) -> list[str]:
    """Columns padded to their widest cell; `numeric` columns right-aligned."""
    cells = [[cell(v) for v in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(vals: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(widths[i]) if i in numeric else v.ljust(widths[i]) for i, v in enumerate(vals)
        ).rstrip()

    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells]


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]], numeric: set[int]) -> list[str]:
    """A GitHub markdown table; `numeric` columns right-aligned, `|` in a cell escaped."""
    out = ["| " + " | ".join(headers) + " |"]
    out.append("|" + "|".join("---:" if i in numeric else "---" for i in range(len(headers))) + "|")
    for r in rows:
        out.append("| " + " | ".join(cell(v).replace("|", "\\|") for v in r) + " |")
    return out


def table_for(markdown: bool) -> Table:
    return md_table if markdown else text_table


def rounded(v: float | None) -> float | None:
    """A number as the JSON documents carry it: 3 decimals."""
    return None if v is None else round(float(v), 3)
