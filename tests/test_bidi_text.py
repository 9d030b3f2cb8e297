"""Unicode bidirectional controls in untrusted names are shown, never obeyed.

A right-to-left override (U+202E) in an op name would make a terminal draw the rest of the
name reversed ("Trojan Source"): `MatMul\u202eLUDOM` would read as another name. The report
text escapes them as \\uNNNN; the explorer's cells show a replacement character instead.
"""

from __future__ import annotations

import pytest
from tiny import profile, task

from npuscope.analysis.diagnose import diagnose
from npuscope.analysis.report import build_report, render
from npuscope.text import one_line, printable
from npuscope.tui.widgets.frame_table import fit

BIDI = [
    "\u061c",
    "\u200e",
    "\u200f",
    "\u202a",
    "\u202b",
    "\u202c",
    "\u202d",
    "\u202e",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
]


@pytest.mark.parametrize("mark", BIDI)
def test_printable_and_one_line_escape_every_bidi_control(mark):
    text = f"Mat{mark}Mul"
    assert printable(text) == f"Mat\\u{ord(mark):04x}Mul"
    assert one_line(text + "\nx") == f"Mat\\u{ord(mark):04x}Mul\\x0ax"


def test_other_unicode_is_left_alone():
    text = "层归一化 Ω ≥ ✓ é"
    assert printable(text) == text == one_line(text)


@pytest.mark.parametrize("mark", BIDI)
def test_table_cell_shows_a_replacement_and_keeps_its_width(mark):
    cell = fit(f"ab{mark}cd", 8)
    assert cell == "ab\ufffdcd   "
    assert not any(m in cell for m in BIDI)


def test_report_of_a_name_with_an_override_escapes_it():
    name = "MatMul\u202eLUDOM"
    p = profile([task(name, 0, 50.0, op_type="MatMul"), task("Add", 60, 5.0)])
    report = build_report(p, diagnose(p))
    for fmt in ("text", "markdown"):
        out = render(report, fmt)
        assert "\u202e" not in out
        assert "MatMul\\u202eLUDOM" in out
