"""Untrusted text made safe to show in a terminal or to open in a spreadsheet.

Op names, shapes, folder names and everything a training host sends back (its job's log, run
records, error text) are untrusted: a hostile or broken file or host could put terminal
escape sequences in them (to move the cursor, rewrite the screen, set the window title, or
write to the clipboard with OSC 52), or a formula that a spreadsheet would run.
`printable()` removes whole escape sequences (CSI, OSC, DCS, ...) and shows every other C0/C1
control character, and DEL, as a visible ``\\xNN`` escape; newlines and tabs are kept.
Unicode bidirectional controls (the marks, embeddings, overrides and isolates) and zero-width
characters (spaces, joiners, the BOM: they make two names that look the same) are shown as
``\\uNNNN``: left in, they reorder what a terminal shows ("Trojan Source"), so an op or host
name could read as another.
`one_line()` also escapes newlines, for listings. `whole_number()` reads a number a user
typed, with the same one-line reason wherever it is refused.
"""

from __future__ import annotations

import re

_SEQUENCE = re.compile(
    r"""
    \x1b\[[0-?]*[ -/]*[@-~]                   # CSI: colours, cursor moves
  | \x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?   # OSC: title, clipboard (OSC 52), links
  | \x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?    # DCS, SOS, PM, APC strings
  | \x1b[ -/]*[0-~]                           # other escapes (charset, keypad, reset)
  | \x9b[0-?]*[ -/]*[@-~]                     # 8-bit CSI
  | [\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x9c)?  # 8-bit DCS, SOS, OSC, PM, APC
    """,
    re.VERBOSE,
)
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # ALM, LRM, RLM, embeddings/overrides, isolates
_ZERO_WIDTH = "\u200b-\u200d\u2060\ufeff"  # zero-width space, (non-)joiners, word joiner, BOM
_CONTROL = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{_BIDI}{_ZERO_WIDTH}]")  # C0 but tab and newline, DEL, C1
_CONTROL_OR_NEWLINE = re.compile(f"[\\x00-\\x08\\x0a-\\x1f\\x7f-\\x9f{_BIDI}{_ZERO_WIDTH}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` without escape sequences; other control characters shown as ``\\xNN``."""
    return _CONTROL.sub(_escape, _SEQUENCE.sub("", text))


def one_line(text: str) -> str:
    """`printable(text)` with newlines escaped too."""
    return _CONTROL_OR_NEWLINE.sub(_escape, _SEQUENCE.sub("", text))


def has_control(text: str) -> bool:
    """True when `text` holds a control character (newline and tab included)."""
    return bool(re.search(r"[\x00-\x1f\x7f-\x9f]", text))


def spreadsheet_cell(text: str) -> str:
    """`one_line(text)`, and a leading `'` where a spreadsheet would take it for a formula."""
    text = one_line(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def whole_number(text: str, low: int | None = None) -> int:
    """A whole number a user typed (an option, a form field), at least `low` when given.

    Raises ValueError with the one-line reason (`not a whole number: 'x'`, `must be at least 1`)
    that the command line and the capture screen both show."""
    text = str(text).strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"not a whole number: {text!r}") from None
    if low is not None and value < low:
        raise ValueError(f"must be at least {low}")
    return value


__all__ = ["has_control", "one_line", "printable", "spreadsheet_cell", "whole_number"]
