"""Counts in text the explorer shows, written with thousands separators.

Finding titles come from the analysis layer in plain words ("25000 long wait(s)"); the
explorer groups the digits of the standalone numbers in them when it draws them. Numbers
that are part of a name or a shape ("MatMulV3", "8,4096", "1.5") stay as they are. A title
quotes op types and names from the profile, untrusted text: every title drawn passes through
here, so its escape sequences go and its control characters are shown (npuscope.text).
"""

from __future__ import annotations

import re

from npuscope.text import printable

# A run of 4+ digits not touching a word character or a character that makes it part of a
# date, a shape or a path (a sentence's closing "." or "," is fine).
_BARE = re.compile(r"(?<![\w.,:/\-\[])(\d{4,})(?![\w.,:/\-\]]\w|[\w\-\]])")


def group_digits(text: str) -> str:
    """`printable(text)` with each standalone integer of four or more digits written with commas."""
    return _BARE.sub(lambda m: f"{int(m.group(1)):,}", printable(text))
