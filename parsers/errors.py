"""The one exception the parsing layer raises for anything wrong with the user's input.

Every message is a single line that names the file and says what to do, so the CLI can print
it as it is and the explorer can show it in a notification without a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class ProfileError(Exception):
    """A profile that cannot be read: bad path, bad file, missing data."""

    title = "Cannot read profile"

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))

    @property
    def message(self) -> str:
        return str(self)


@contextmanager
def reading(path: Path, expected: str | None = None) -> Iterator[None]:
    """Turn what the OS says about reading `path` into the one-line ProfileError users see.

    `expected` names what the file should have been (`a CSV file`) when a folder stands in its
    place; without it a folder is "cannot be read (Is a directory)" like any other OSError."""
    try:
        yield
    except PermissionError:
        raise ProfileError(f"{path}: permission denied; make the file readable (chmod +r)") from None
    except IsADirectoryError as exc:
        if expected is None:
            raise ProfileError(f"{path}: cannot be read ({exc.strerror})") from None
        raise ProfileError(f"{path}: is a folder, expected {expected}") from None
    except FileNotFoundError:  # gone since it was found
        raise ProfileError(f"{path}: no such file") from None
    except OSError as exc:
        raise ProfileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
