"""The one exception the parsing layer raises for anything wrong with the user's input.

Every message is a single line that names the file and says what to do, so the CLI can print
it as it is and the explorer can show it in a notification without a traceback.
"""

from __future__ import annotations


class ProfileError(Exception):
    """A profile that cannot be read: bad path, bad file, missing data."""

    title = "Cannot read profile"

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))

    @property
    def message(self) -> str:
        return str(self)
