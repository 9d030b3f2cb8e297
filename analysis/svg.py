"""Inline SVG charts for the HTML report: horizontal bars, stacked columns and lane strips.

Plain strings, no plotting library and no script: each function returns one `<svg>` element
sized by its viewBox (it scales to the page's width), every label escaped with html.escape.
Hovering a bar shows its `<title>`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from npuscope.text import printable

FONT = 12
LABEL_W = 230  # room for the labels left of horizontal bars
VALUE_W = 150  # room for the value text right of them
WIDTH = 960


def esc(text: object) -> str:
    """A profile string as HTML / SVG text: control characters shown, markup escaped."""
    return html.escape(printable(str(text)), quote=True)


def num(x: float) -> str:
    """A coordinate, short."""
    return f"{x:.2f}".rstrip("0").rstrip(".") or "0"


def svg(width: float, height: float, body: str, label: str, css_class: str = "chart") -> str:
    return (
        f'<svg class="{css_class}" viewBox="0 0 {num(width)} {num(height)}" '
        f'width="{num(width)}" height="{num(height)}" role="img" aria-label="{esc(label)}">{body}</svg>'
    )


def rect(x: float, y: float, w: float, h: float, fill: str, title: str | None = None, extra: str = "") -> str:
    tip = f"<title>{esc(title)}</title>" if title else ""
    attrs = f'x="{num(x)}" y="{num(y)}" width="{num(max(w, 0.0))}" height="{num(max(h, 0.0))}" fill="{fill}"{extra}'
    return f"<rect {attrs}>{tip}</rect>" if tip else f"<rect {attrs}/>"


def text(x: float, y: float, value: object, anchor: str = "start", size: int = FONT, fill: str = "#222") -> str:
    return (
        f'<text x="{num(x)}" y="{num(y)}" font-size="{size}" text-anchor="{anchor}" fill="{fill}">{esc(value)}</text>'
    )


def clip(label: str, chars: int) -> str:
    return label if len(label) <= chars else label[: chars - 1] + "\u2026"


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    color: str
    value_text: str
    title: str = ""


def hbars(bars: Sequence[Bar], label: str, *, scale: float | None = None, row: int = 22) -> str:
    """One horizontal bar per item, longest = full width (or `value / scale` of it)."""
    top = scale if scale is not None else max((b.value for b in bars), default=0.0)
    span = WIDTH - LABEL_W - VALUE_W
    parts = []
    for i, b in enumerate(bars):
        y = i * row
        w = 0.0 if top <= 0 else span * max(b.value, 0.0) / top
        parts.append(text(LABEL_W - 8, y + row * 0.68, clip(b.label, 34), "end"))
        parts.append(rect(LABEL_W, y + 3, max(w, 1.0 if b.value > 0 else 0.0), row - 6, b.color, b.title or b.label))
        parts.append(text(LABEL_W + w + 6, y + row * 0.68, b.value_text, size=FONT - 1, fill="#444"))
    return svg(WIDTH, max(len(bars), 1) * row, "".join(parts), label)


def legend(items: Sequence[tuple[str, str]], width: float = WIDTH) -> str:
    """A row of colour swatches and their names."""
    parts, x = [], 0.0
    for name, color in items:
        parts.append(rect(x, 4, 12, 12, color))
        parts.append(text(x + 17, 14, name, size=FONT - 1))
        x += 30 + 7 * len(name)
    return svg(width, 20, "".join(parts), "legend", "legend")


def stacked_columns(
    names: Sequence[str], parts: Sequence[tuple[str, str]], values: Sequence[Sequence[float]], label: str, unit: str
) -> str:
    """One column per name, its `parts` (label, colour) stacked bottom-up; `values[i][j]`
    is part j of column i (negative or missing parts count as 0)."""
    height, axis_w, pad = 200.0, 70.0, 16.0  # plot height, value axis, room above it
    totals = [sum(max(v, 0.0) for v in col) for col in values]
    top = max(totals, default=0.0) or 1.0
    n = max(len(names), 1)
    slot = (WIDTH - axis_w) / n
    bar_w = max(min(slot * 0.7, 60.0), 1.0)
    out = []
    for k in range(5):  # value grid lines
        y = pad + height - height * k / 4
        out.append(f'<line x1="{num(axis_w)}" x2="{WIDTH}" y1="{num(y)}" y2="{num(y)}" stroke="#e3e3e3"/>')
        out.append(text(axis_w - 6, y + 4, f"{top * k / 4:,.0f}", "end", FONT - 2, "#666"))
    out.append(text(axis_w - 6, 10, unit, "end", FONT - 2, "#666"))
    every = max(1, round(n / 24))  # at most ~24 column labels
    for i, (name, col) in enumerate(zip(names, values)):
        x = axis_w + i * slot + (slot - bar_w) / 2
        y = pad + height
        tip = f"{name}: " + ", ".join(f"{p} {max(v, 0.0):,.1f}" for (p, _), v in zip(parts, col))
        for (_, color), v in zip(parts, col):
            h = height * max(v, 0.0) / top
            y -= h
            out.append(rect(x, y, bar_w, h, color, tip))
        if i % every == 0:
            out.append(text(x + bar_w / 2, pad + height + 14, clip(name, 12), "middle", FONT - 2, "#444"))
    return svg(WIDTH, pad + height + 22, "".join(out), label)
