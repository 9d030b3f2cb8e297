"""Where a capture can go, and what was typed for each host last time.

`ssh_config_hosts()` lists the Host aliases of the user's OpenSSH config (following `Include`),
for completion; `load_remembered()` / `remember()` keep the capture form's values per host in
one small JSON file:

    $NPUSCOPE_CONFIG_DIR/capture.json, else $XDG_CONFIG_HOME/npuscope/capture.json,
    else ~/.config/npuscope/capture.json

written atomically (temporary file, then `os.replace`). A missing, unreadable or corrupt file
reads as empty: remembering is a convenience and never stops a capture.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import tempfile
from pathlib import Path
from typing import Any

from .spec import LOCAL_HOST

CONFIG_NAME = "capture.json"
MAX_INCLUDE_DEPTH = 16  # as OpenSSH
_KEYWORD = re.compile(r"^\s*([A-Za-z]+)\s*(?:=\s*|\s+)(.*)$")
_COMMENT = re.compile(r"(?:^|\s)#")
_PATTERN_CHARS = ("*", "?", "!")


# --- ssh config ---------------------------------------------------------------------------------
def ssh_config_hosts(path: str | os.PathLike[str] | None = None) -> list[str]:
    """Host aliases from ~/.ssh/config (or `path`), "local" first; patterns are left out.

    `Include` lines are followed (globs allowed; relative paths are taken from ~/.ssh, as OpenSSH
    does for a user's config). A file that cannot be read is skipped.
    """
    hosts = [LOCAL_HOST]
    start = Path(path).expanduser() if path is not None else Path("~/.ssh/config").expanduser()
    _read_config(start, hosts, seen=set(), depth=0)
    return hosts


def _read_config(path: Path, hosts: list[str], seen: set[Path], depth: int) -> None:
    if depth > MAX_INCLUDE_DEPTH:
        return
    try:
        key = path.resolve()
        if key in seen:
            return
        seen.add(key)
        text = path.read_text(encoding="utf-8", errors="replace")
    except (OSError, RuntimeError):
        return
    for line in text.splitlines():
        match = _KEYWORD.match(line)
        if not match or line.lstrip().startswith("#"):
            continue
        keyword, args = match.group(1).lower(), _words(match.group(2))
        if keyword == "host":
            for name in args:
                if name and not any(ch in name for ch in _PATTERN_CHARS) and name not in hosts:
                    hosts.append(name)
        elif keyword == "include":
            for pattern in args:
                for included in _include_paths(pattern):
                    _read_config(included, hosts, seen, depth + 1)


def _words(text: str) -> list[str]:
    text = _COMMENT.split(text, 1)[0]  # a word starting with # begins a comment
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _include_paths(pattern: str) -> list[Path]:
    pattern = os.path.expanduser(pattern)
    if not os.path.isabs(pattern):
        pattern = os.path.join(os.path.expanduser("~/.ssh"), pattern)
    return [Path(p) for p in sorted(glob.glob(pattern)) if os.path.isfile(p)]


# --- remembered values ------------------------------------------------------------------------
def config_file() -> Path:
    """The JSON file that keeps the capture form's values per host."""
    folder = os.environ.get("NPUSCOPE_CONFIG_DIR")
    if folder:
        return Path(folder).expanduser() / CONFIG_NAME
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return Path(xdg).expanduser() / "npuscope" / CONFIG_NAME
    return Path("~/.config/npuscope").expanduser() / CONFIG_NAME


def _load() -> dict[str, Any]:
    try:
        data = json.loads(config_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _hosts(data: dict[str, Any]) -> dict[str, Any]:
    hosts = data.get("hosts")
    return hosts if isinstance(hosts, dict) else {}


def load_remembered(host: str) -> dict[str, Any]:
    """The values last used for `host` ({} when none, or when the file is unreadable)."""
    values = _hosts(_load()).get(host)
    return dict(values) if isinstance(values, dict) else {}


def last_host() -> str:
    """The host of the last successful capture ("" when none)."""
    host = _load().get("last_host")
    return host if isinstance(host, str) else ""


def remember(host: str, values: dict[str, Any]) -> Path:
    """Keep `values` (JSON-serialisable) for `host` and make it the last host; raises OSError."""
    data = _load()
    hosts = _hosts(data)
    hosts[host] = dict(values)
    data["hosts"] = hosts
    data["last_host"] = host
    path = config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".capture-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


__all__ = ["config_file", "last_host", "load_remembered", "remember", "ssh_config_hosts"]
