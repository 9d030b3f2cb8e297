"""The runs registry: every run opened, reported or captured, and the named baselines.

A small SQLite file under the user's data folder: $NPUSCOPE_RUNS_DB when set (`off` turns the
registry off), else $XDG_DATA_HOME/npuscope/runs.db, else ~/.local/share/npuscope/runs.db.
One row per run (a capture folder, or a file, with the capture chosen in it): the first time it
was seen, the last, how (`captured`, `experiment`, `report`, `opened`, `gate`), the host and command it
ran with, the change an experiment made, and its headline figures (analysis/headline.py), which
are replaced each time the run is read again. A baseline is a name for a run's path.

Recording never fails a command: `record_run` returns a problem to print as a note, or None. A
registry that is not a database is moved aside (`runs.db.corrupt-<time>`) and a new one started.
Reading it (`list_runs`, `baselines`, `resolve_ref`) raises ProfileError with one line.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npuscope.parsers import ProfileError

from .headline import Headline

if TYPE_CHECKING:
    from npuscope.parsers import Profile

ENV = "NPUSCOPE_RUNS_DB"
OFF = "off"
SCHEMA_VERSION = 1
KINDS = ("captured", "experiment", "report", "opened", "gate")
_TIMEOUT_S = 2.0  # another npuscope writing: wait this long, then give up with a note

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    capture TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL,
    first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL,
    host TEXT NOT NULL DEFAULT '',
    command TEXT NOT NULL DEFAULT '',
    change TEXT NOT NULL DEFAULT '',
    step_mean_us REAL,
    steps INTEGER,
    device_us REAL,
    headline TEXT,
    UNIQUE (path, capture)
);
CREATE TABLE IF NOT EXISTS baselines (
    name TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    capture TEXT NOT NULL DEFAULT '',
    set_at TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class Run:
    id: int
    path: str
    capture: str
    kind: str
    first_seen: str
    last_seen: str
    host: str
    command: str
    change: str
    step_mean_us: float | None
    steps: int | None
    device_us: float | None
    headline: Headline | None

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "headline"}
        d["headline"] = self.headline.to_dict() if self.headline else None
        return d


@dataclass(frozen=True)
class Baseline:
    name: str
    path: str
    capture: str
    set_at: str


def registry_path() -> Path | None:
    """Where the registry is, or None when $NPUSCOPE_RUNS_DB is `off`."""
    given = os.environ.get(ENV, "").strip()
    if given.lower() == OFF:
        return None
    if given:
        return Path(given).expanduser()
    data = os.environ.get("XDG_DATA_HOME", "").strip()
    base = Path(data).expanduser() if data else Path.home() / ".local" / "share"
    return base / "npuscope" / "runs.db"


def capture_key(profile: Profile) -> str:
    """The capture a run's row names: none when its folder holds one (a folder `capture`
    fetched), the capture's name when it holds several."""
    return profile.capture.name if len(profile.captures) > 1 else ""


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextmanager
def _connect(db: Path, *, create: bool) -> Iterator[sqlite3.Connection]:
    if create:
        db.parent.mkdir(parents=True, exist_ok=True)
    uri = f"file:{db}?mode={'rwc' if create else 'ro'}"
    con = sqlite3.connect(uri, uri=True, timeout=_TIMEOUT_S, isolation_level=None)
    try:
        if create:
            version = con.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise sqlite3.DatabaseError(f"schema version {version}, this npuscope reads {SCHEMA_VERSION}")
            con.executescript(_SCHEMA)
            con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        yield con
    finally:
        con.close()


def _move_aside(db: Path) -> Path:
    aside = db.with_name(f"{db.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
    os.replace(db, aside)
    return aside


def _key(path: str | Path) -> str:
    return str(Path(path).expanduser().resolve())


def record_run(
    path: str | Path,
    *,
    kind: str,
    headline: Headline | None = None,
    host: str = "",
    command: str = "",
    change: str = "",
    capture: str = "",
) -> str | None:
    """Record the run at `path` (its capture `capture`, when the folder holds several): a new
    row, or the known one's last time and figures updated (its host, command and change kept
    when this recording has none). Returns a problem to print as a note, or None."""
    db = registry_path()
    if db is None:
        return None
    summary = json.dumps(headline.to_dict()) if headline else None
    step = headline.step_mean_us if headline else None
    steps = headline.steps if headline else None
    device = headline.device_us if headline else None
    now = _now()
    row = (_key(path), capture, kind, now, now, host, command, change, step, steps, device, summary)
    note: str | None = None
    for attempt in (1, 2):
        try:
            with _connect(db, create=True) as con:
                con.execute(_UPSERT, row)
            return note
        except sqlite3.OperationalError as exc:  # locked, read-only, disk full: nothing to repair
            return f"runs registry {db}: not recorded ({exc})"
        except sqlite3.DatabaseError as exc:  # not a database, or not ours
            if attempt == 2:
                return f"runs registry {db}: not recorded ({exc})"
            try:
                aside = _move_aside(db)
            except OSError as move:
                return f"runs registry {db}: not recorded ({exc}; cannot move it aside: {move.strerror})"
            note = f"runs registry {db} was not a registry ({exc}): moved to {aside.name}, a new one started"
        except OSError as exc:
            return f"runs registry {db}: not recorded ({exc.strerror or exc})"
    return note


_UPSERT = (
    "INSERT INTO runs (path, capture, kind, first_seen, last_seen, host, command, change,"
    " step_mean_us, steps, device_us, headline) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
    " ON CONFLICT (path, capture) DO UPDATE SET last_seen = excluded.last_seen,"
    " host = CASE WHEN excluded.host != '' THEN excluded.host ELSE host END,"
    " command = CASE WHEN excluded.command != '' THEN excluded.command ELSE command END,"
    " change = CASE WHEN excluded.change != '' THEN excluded.change ELSE change END,"
    " step_mean_us = CASE WHEN excluded.headline IS NOT NULL THEN excluded.step_mean_us ELSE step_mean_us END,"
    " steps = CASE WHEN excluded.headline IS NOT NULL THEN excluded.steps ELSE steps END,"
    " device_us = CASE WHEN excluded.headline IS NOT NULL THEN excluded.device_us ELSE device_us END,"
    " headline = COALESCE(excluded.headline, headline)"
)


# --------------------------------------------------------------------------- reading


@contextmanager
def _reading() -> Iterator[sqlite3.Connection | None]:
    """The registry to read, or None when there is none yet (or it is off)."""
    db = registry_path()
    if db is None or not db.exists():
        yield None
        return
    try:
        with _connect(db, create=False) as con:
            yield con
    except sqlite3.DatabaseError as exc:
        raise ProfileError(f"runs registry {db}: cannot be read ({exc})") from None


def _run(row: tuple[Any, ...]) -> Run:
    head: Headline | None = None
    if row[12]:
        try:
            head = Headline.from_dict(json.loads(row[12]))
        except (ValueError, TypeError):
            head = None
    i, path, capture, kind, first, last, host, command, change, step, steps, device = row[:12]
    return Run(i, path, capture, kind, first, last, host, command, change, step, steps, device, head)


_COLUMNS = (
    "id, path, capture, kind, first_seen, last_seen, host, command, change, step_mean_us, steps, device_us, headline"
)


def list_runs(limit: int | None = None) -> list[Run]:
    """The runs recorded, oldest first: the last `limit` of them."""
    with _reading() as con:
        if con is None:
            return []
        sql = f"SELECT {_COLUMNS} FROM runs ORDER BY first_seen DESC, id DESC"
        rows = con.execute(sql + (f" LIMIT {int(limit)}" if limit else "")).fetchall()
    return [_run(r) for r in reversed(rows)]


def get_run(run_id: int) -> Run | None:
    with _reading() as con:
        if con is None:
            return None
        row = con.execute(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
    return _run(row) if row else None


def baselines() -> list[Baseline]:
    with _reading() as con:
        if con is None:
            return []
        rows = con.execute("SELECT name, path, capture, set_at FROM baselines ORDER BY name").fetchall()
    return [Baseline(*r) for r in rows]


def _writing() -> Path:
    db = registry_path()
    if db is None:
        raise ProfileError(f"the runs registry is off (${ENV}={os.environ.get(ENV)}): no baselines")
    return db


def check_name(name: str) -> str:
    if not name or len(name) > 64 or not all(c.isalnum() or c in "-_." for c in name):
        raise ProfileError(f"baseline name {name!r}: use 1 to 64 letters, digits, '-', '_' or '.'")
    return name


def set_baseline(name: str, ref: str) -> Baseline:
    """Name the run `ref` (a path, or #ID of a recorded run) `name`, replacing what it named."""
    check_name(name)
    path, capture = _target(ref)
    db = _writing()
    at = _now()
    try:
        with _connect(db, create=True) as con:
            con.execute(
                "INSERT INTO baselines (name, path, capture, set_at) VALUES (?,?,?,?) ON CONFLICT (name)"
                " DO UPDATE SET path = excluded.path, capture = excluded.capture, set_at = excluded.set_at",
                (name, path, capture, at),
            )
    except sqlite3.DatabaseError as exc:
        raise ProfileError(f"runs registry {db}: baseline not set ({exc})") from None
    except OSError as exc:
        raise ProfileError(f"runs registry {db}: baseline not set ({exc.strerror or exc})") from None
    return Baseline(name, path, capture, at)


def remove_baseline(name: str) -> None:
    db = _writing()
    try:
        with _connect(db, create=True) as con:
            gone = con.execute("DELETE FROM baselines WHERE name = ?", (name,)).rowcount
    except sqlite3.DatabaseError as exc:
        raise ProfileError(f"runs registry {db}: baseline not removed ({exc})") from None
    if not gone:
        raise ProfileError(f"no baseline {name!r}{_known()}")


def _known() -> str:
    names = [b.name for b in baselines()]
    return f"; baselines: {', '.join(names)}" if names else "; none is set (npuscope baseline set NAME RUN)"


def _target(ref: str) -> tuple[str, str]:
    """(path, capture) of `ref`: #ID of a recorded run, or a path that exists."""
    if ref.startswith("#"):
        digits = ref[1:]
        run = get_run(int(digits)) if digits.isdigit() else None
        if run is None:
            raise ProfileError(f"no recorded run {ref} (npuscope runs lists them)")
        return run.path, run.capture
    if not Path(ref).expanduser().exists():
        raise ProfileError(f"{ref}: no such file or folder")
    return _key(ref), ""


def resolve_ref(ref: str) -> str:
    """The path `ref` names: @NAME a baseline, #ID a recorded run; anything else is a path
    and comes back as it is."""
    if ref.startswith("@"):
        name = ref[1:]
        for b in baselines():
            if b.name == name:
                return b.path
        raise ProfileError(f"no baseline {name!r}{_known()}")
    if ref.startswith("#") and ref[1:].isdigit():
        return _target(ref)[0]
    return ref


def resolve_capture(ref: str, capture: str | None) -> str | None:
    """The capture a baseline or run named by `ref` was set on, unless one is given."""
    if capture is not None:
        return capture
    if ref.startswith("@"):
        for b in baselines():
            if b.name == ref[1:] and b.capture:
                return b.capture
    return None
