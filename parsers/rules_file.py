"""A rules file (`--rules`) read as its TOML document: the file itself, checked before it is
read (a regular file, at most RULES_FILE_BYTES); analysis/thresholds.py validates its values."""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from typing import Any

from .errors import ProfileError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

RULES_FILE_BYTES = 1 << 20
"""A rules file is a few lines: anything bigger is refused before it is read."""


def read_rules_file(path: Path) -> dict[str, Any]:
    """The TOML document of a rules file, or one ProfileError: not found, not a regular file
    (a FIFO would block the read, a device never end), too big, unreadable, not TOML."""
    return read_toml_file(path, "rules file")


def read_toml_file(path: Path, what: str) -> dict[str, Any]:
    """The TOML document of a small settings file (`what` names it in the errors: "rules
    file", "nodes file"), read as read_rules_file says."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ProfileError(f"{path}: {what} not found") from None
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ProfileError(f"{path}: the {what} is not a regular file")
    if st.st_size > RULES_FILE_BYTES:
        raise ProfileError(f"{path}: the {what} is {st.st_size:,} bytes; a {what} is at most {RULES_FILE_BYTES:,}")
    try:
        with path.open("rb") as fh:
            raw = fh.read(RULES_FILE_BYTES + 1)
        if len(raw) > RULES_FILE_BYTES:
            raise ProfileError(f"{path}: the {what} is over {RULES_FILE_BYTES:,} bytes")
        doc: dict[str, Any] = tomllib.loads(raw.decode("utf-8"))
        return doc
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read the {what} ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise ProfileError(f"{path}: invalid TOML: arrays or tables nested too deep") from None
