"""A nodes file (`nodes.toml`): a cluster whose rank folders lie on several machines.

    ssh_config = "~/.ssh/config"      # optional: the OpenSSH config the hosts are read from
    listen = "10.0.0.1"               # optional: the address the nodes reach this machine by
    scheduler = "tcp://10.0.0.1:8786" # optional: a running Dask scheduler (as --scheduler)

    [[node]]
    host = "node-a"                   # an SSH host, as in ~/.ssh/config (as capture resolves it)
    folders = ["/data/job1"]          # the folders holding this node's rank folders
    python = "python3"                # optional: the node's Python, with npuscope[cluster]
    workers = 2                       # optional: worker processes (default: the node's cores, at most 8)
    name = "a"                        # optional: the node's name in messages (default: host)

Only the file is read here (parsers/rules_file.py's checks: a regular file, size-capped, TOML);
every key is validated with a one-line error naming the key and the file. Nothing is connected.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ProfileError
from .rules_file import read_toml_file

MAX_WORKERS = 64
"""Worker processes one node may be given (a typo of 1000 would start 1000 interpreters)."""
DEFAULT_MAX_WORKERS = 8
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_TOP_KEYS = {"ssh_config", "listen", "scheduler", "node"}
_NODE_KEYS = {"host", "folders", "python", "workers", "name"}


@dataclass(frozen=True)
class Node:
    name: str
    host: str
    folders: tuple[str, ...]
    python: str = "python3"
    workers: int | None = None  # None: the node's cores, at most DEFAULT_MAX_WORKERS

    @property
    def resource(self) -> str:
        """The Dask worker resource that marks a worker of this node."""
        return f"npuscope-node-{self.name}"


@dataclass(frozen=True)
class NodesFile:
    path: Path
    nodes: tuple[Node, ...]
    ssh_config: str | None = None
    listen: str | None = None
    scheduler: str | None = None


def looks_like_nodes_file(path: str | Path) -> bool:
    """Whether `path` names a nodes file rather than a profile: a `.toml` regular file."""
    p = Path(path).expanduser()
    return p.suffix == ".toml" and p.is_file()


def read_nodes_file(path: str | Path) -> NodesFile:
    """The nodes of `path`, or one ProfileError naming the file and the key."""
    p = Path(path).expanduser()
    doc = read_toml_file(p, "nodes file")

    def bad(key: str, why: str) -> ProfileError:
        return ProfileError(f"{p}: {key}: {why}")

    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise bad(unknown[0], f"unknown key (known: {', '.join(sorted(_TOP_KEYS))})")
    top = {k: _text(doc, k, bad) for k in ("ssh_config", "listen", "scheduler")}
    raw = doc.get("node")
    if not isinstance(raw, list) or not raw:
        raise bad("node", "no [[node]] table: name at least one node (host and folders)")
    nodes: list[Node] = []
    for i, table in enumerate(raw):
        key = f"node[{i}]"
        if not isinstance(table, dict):
            raise bad(key, "must be a table ([[node]])")
        nodes.append(_node(table, key, bad))
    names = [n.name for n in nodes]
    for name in names:
        if names.count(name) > 1:
            raise bad("node", f"two nodes are named {name!r}: give one a `name`")
    return NodesFile(p, tuple(nodes), top["ssh_config"], top["listen"], top["scheduler"])


def _text(table: dict[str, Any], key: str, bad: Any, where: str = "") -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or "\n" in value or "\x00" in value:
        raise bad(where + key, "must be a non-empty string on one line")
    return value.strip()


def _node(table: dict[str, Any], key: str, bad: Any) -> Node:
    unknown = sorted(set(table) - _NODE_KEYS)
    if unknown:
        raise bad(f"{key}.{unknown[0]}", f"unknown key (known: {', '.join(sorted(_NODE_KEYS))})")
    host = _text(table, "host", bad, f"{key}.")
    if host is None:
        raise bad(f"{key}.host", "missing: the node's SSH host (as in ~/.ssh/config)")
    if host.startswith("-") or any(c.isspace() for c in host):
        raise bad(f"{key}.host", f"{host!r} is not a host name")
    folders = table.get("folders")
    if isinstance(folders, str):
        folders = [folders]
    if not isinstance(folders, list) or not folders:
        raise bad(f"{key}.folders", "missing: a list of the folders holding the node's rank folders")
    for f in folders:
        if not isinstance(f, str) or not f.strip() or "\n" in f or "\x00" in f:
            raise bad(f"{key}.folders", "every folder must be a non-empty path on one line")
    name = _text(table, "name", bad, f"{key}.") or host
    if not _NAME.fullmatch(name):
        raise bad(f"{key}.name", f"{name!r}: letters, digits, '.', '_' and '-' only (set `name` for this host)")
    python = _text(table, "python", bad, f"{key}.") or "python3"
    try:
        words = shlex.split(python)
    except ValueError as exc:
        raise bad(f"{key}.python", f"{python!r} is not a command line ({exc})") from None
    if not words:
        raise bad(f"{key}.python", "must name the node's Python")
    workers = table.get("workers")
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS
    ):
        raise bad(f"{key}.workers", f"must be a whole number from 1 to {MAX_WORKERS}")
    return Node(name, host, tuple(f.strip() for f in folders), python, workers)
