"""The explorer's error log: where the traceback of an unexpected error is written.

`$XDG_STATE_HOME/npuscope/npuscope.log`, else `~/.local/state/npuscope/npuscope.log` (a relative
XDG_STATE_HOME is ignored, as the XDG spec says and as the cache folder's XDG_CACHE_HOME is in
parsers/cache.py). The folder is made on the first error only, private to the user; nothing is
ever written beside a profile. A log past `MAX_BYTES` is moved to `npuscope.log.1` (the one
before it goes) so it never grows without end. Standard library only: the CLI's `--help` names
the path without importing Textual or polars.
"""

from __future__ import annotations

import os
from pathlib import Path

LOG_NAME = "npuscope.log"
MAX_BYTES = 1_000_000


def log_path() -> Path:
    """Where the tracebacks go (the file may not exist yet)."""
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base / "npuscope" / LOG_NAME


def append(record: str, path: Path | None = None) -> Path:
    """Add `record` to the log (made with its folder if need be) and return its path; raises
    OSError when it cannot be written."""
    path = log_path() if path is None else path
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        if path.stat().st_size > MAX_BYTES:
            path.replace(path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as out:
        out.write(record if record.endswith("\n") else record + "\n")
    return path
