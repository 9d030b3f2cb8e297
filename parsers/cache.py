"""Parsed frames cached as Parquet (a 490 MB CSV reopens in 0.75 s instead of 2.2 s).

An entry is keyed by the source files (absolute path, size, mtime, inode, ctime) and the
parser version; the key is stored inside the Parquet metadata and checked on read, so a
stale, foreign or corrupt entry is rebuilt, never trusted. Writes go to a temporary file
renamed into place. Nothing is ever written next to the profile: read-only profile folders
work.

Trust: entries live in a folder owned by the current user that no one else can write (the
configured folder, else a `u<uid>` folder with mode 0700 made inside it, as in a shared 1777
folder; else the cache is off for the run, with a note). An entry is read only when it is a
regular file (not a symbolic link) owned by the current user and not writable by group or
others, its key matches, and its columns and dtypes are what the caller expects (`schema`);
anything else is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

import polars as pl


def source_digest(folder: Path) -> str:
    """A digest of a package's sources: any change to how frames are built invalidates the
    cache, with no version number to forget to bump."""
    digest = hashlib.sha256()
    for src in sorted(Path(folder).glob("*.py")):
        digest.update(src.name.encode())
        digest.update(src.read_bytes())
    return digest.hexdigest()[:16]


PARSER_VERSION = source_digest(Path(__file__).parent)
ENV_DIR = "NPUSCOPE_CACHE_DIR"
_KEY = "npuscope.cache_key"
# Group or others may write: whoever can write a folder can replace the entries in it.
_SHARED_WRITE = stat.S_IWGRP | stat.S_IWOTH

# What a caller expects of an entry: its exact columns and dtypes, or a check of the frame.
Schema = Mapping[str, pl.DataType] | Callable[[pl.DataFrame], object]


def _trim(frame: pl.DataFrame, columns: Callable[[list[str]], list[str]] | None) -> pl.DataFrame:
    return frame if columns is None else frame.select(columns(frame.columns))


def including(expected: Mapping[str, pl.DataType]) -> Callable[[pl.DataFrame], bool]:
    """A `schema` for frames with open-ended columns: every column of `expected` is there with
    its dtype, others may follow (the PMU counters of a tasks frame)."""

    def check(frame: pl.DataFrame) -> bool:
        found = frame.schema
        return all(name in found and found[name] == dtype for name, dtype in expected.items())

    return check


def _same_schema(found: Mapping[str, pl.DataType], expected: Mapping[str, pl.DataType]) -> bool:
    return set(found) == set(expected) and all(found[n] == expected[n] for n in expected)


@lru_cache(maxsize=1)
def _writer() -> ThreadPoolExecutor:
    """One writer thread for the process: entries are written one at a time."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="npuscope-cache")


def finish_writes() -> None:
    """Wait for the entries handed to the writer thread (the process is about to end without
    the interpreter's teardown, which would wait for them)."""
    if _writer.cache_info().currsize:
        _writer().submit(lambda: None).result()  # one thread, first in first out: after them all


def default_dir() -> Path:
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    # The XDG spec: a relative path is invalid and must be ignored.
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "npuscope"


def _uid() -> int | None:
    """The user entries must belong to; None where files have no POSIX owner."""
    return os.geteuid() if hasattr(os, "geteuid") else None


def _private(st: os.stat_result, uid: int | None) -> bool:
    """A folder or file only `uid` can write (besides root)."""
    return uid is None or (st.st_uid == uid and not st.st_mode & _SHARED_WRITE)


class _Unsafe(Exception):
    """No folder only this user can write could be had."""


class FrameCache:
    """Load-or-build of frames; `enabled=False` reads and writes nothing.

    With `background=True` new entries are queued and, once `start_writes()` is called, written
    by a worker thread while the caller goes on with the frames (a 2M-row entry takes about
    1 s to write); `flush()` waits for them, and the interpreter waits for them at exit. A write cut short leaves only a `.tmp-*` file,
    which later loads sweep away.

    `root` is the configured folder; entries go to `directory`, chosen on first use (see the
    module's docstring).
    """

    def __init__(self, root: Path | None = None, *, enabled: bool = True, background: bool = False) -> None:
        self.root = Path(root) if root is not None else default_dir()
        self.enabled = enabled
        self.background = background
        self.hits = 0
        self.misses = 0
        self.problems: list[str] = []
        self._pending: list[Future[None]] = []
        self._queued: list[tuple[Path, str, pl.DataFrame]] = []
        self._resolved = False
        self._dir: Path | None = None
        self._can_write = False
        self._swept = False

    # ----------------------------------------------------------------- the folder

    @property
    def directory(self) -> Path | None:
        """The folder entries are read from and written to: `root`, or `root/u<uid>` when
        `root` is not private to this user; None when neither is safe (the cache is then
        off for this object, with a note in `problems`)."""
        if not self._resolved:
            self._resolved = True
            self._resolve()
        return self._dir

    def _resolve(self) -> None:
        uid = _uid()
        try:
            # A missing folder is made private; missing parents get the default mode.
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            folder = self.root
            if not _private(os.stat(folder), uid):
                folder = self._user_folder(uid)
        except (_Unsafe, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            self.problems.append(f"cache not used ({self.root}: {reason}); set {ENV_DIR} to a folder of your own")
            return
        self._dir = folder
        self._can_write = os.access(folder, os.W_OK | os.X_OK)
        if not self._can_write:
            self.problems.append(f"cache not written ({folder}: permission denied)")

    def _user_folder(self, uid: int | None) -> Path:
        """`root/u<uid>`, made with mode 0700 if missing; checked through its descriptor, so
        a symbolic link or another user's folder put there is refused, not followed."""
        sub = self.root / f"u{uid}"
        try:
            os.mkdir(sub, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise _Unsafe(f"cannot make a private folder {sub.name} in it: {exc.strerror or exc}") from None
        try:
            fd = os.open(sub, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            raise _Unsafe(f"{sub.name} in it is not a folder of this user ({exc.strerror or exc})") from None
        try:
            st = os.fstat(fd)
            if st.st_uid != uid:
                raise _Unsafe(f"{sub.name} in it belongs to uid {st.st_uid}")
            if stat.S_IMODE(st.st_mode) != 0o700:
                os.fchmod(fd, 0o700)  # ours: made private whatever the umask or an old mode
        finally:
            os.close(fd)
        return sub

    # ----------------------------------------------------------------- writes

    def start_writes(self) -> None:
        """Hand queued entries to the writer thread.

        Called once the caller has every frame it needs: a write running during the load
        would compete with it for the CPU.
        """
        while self._queued:
            self._pending.append(_writer().submit(self._write, *self._queued.pop(0)))

    def flush(self) -> None:
        """Start and wait for background writes."""
        self.start_writes()
        while self._pending:
            self._pending.pop().result()

    # ----------------------------------------------------------------- entries

    def key(self, kind: str, files: Sequence[Path], extra: object = None) -> str:
        parts = []
        for f in files:
            st = f.stat()
            # Inode and ctime: a file replaced by another of the same size and mtime (or
            # rewritten with its mtime put back) is another source.
            parts.append([str(f.resolve()), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns])
        blob = json.dumps([PARSER_VERSION, kind, parts, extra], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def path_for(self, key: str) -> Path | None:
        folder = self.directory
        return None if folder is None else folder / f"{key[:32]}.parquet"

    def load_or_build(
        self,
        kind: str,
        files: Sequence[Path],
        build: Callable[[], pl.DataFrame],
        extra: object = None,
        columns: Callable[[list[str]], list[str]] | None = None,
        schema: Schema | None = None,
        write_now: bool = False,
    ) -> pl.DataFrame:
        """The frame from the cache, or built (and queued or written).

        `write_now` writes a built entry before returning even with `background`: a caller
        that keeps only some `columns` then holds no more than those.

        `columns` picks, from the entry's column names, the ones to load: a cached entry
        then reads only those (Parquet is columnar); a built frame is trimmed the same way
        after it is written whole.

        `schema` is what an entry must hold to be used: a mapping of every column to its
        dtype (compared with the entry's whole schema before any data is read), or a check
        given the loaded frame (after `columns`) that returns true to accept it. An entry
        that does not match is rebuilt.
        """
        if not self.enabled:
            return _trim(build(), columns)
        key = self.key(kind, files, extra)
        entry = self.path_for(key)
        frame = None if entry is None else self._read(entry, key, columns, schema)
        if frame is not None:
            self.hits += 1
            return frame
        self.misses += 1
        frame = build()
        if entry is not None and self._can_write:
            if self.background and not write_now:
                self._queued.append((entry, key, frame))
            else:
                self._write(entry, key, frame)
        return _trim(frame, columns)

    def _distrust(self, st: os.stat_result) -> str | None:
        """Why a regular file or symbolic link found as an entry is not trusted, or None."""
        if stat.S_ISLNK(st.st_mode):
            return "is a symbolic link"
        uid = _uid()
        if uid is not None and st.st_uid != uid:
            return f"belongs to uid {st.st_uid}"
        if uid is not None and st.st_mode & _SHARED_WRITE:
            return "is writable by others"
        return None

    def _read(
        self,
        entry: Path,
        key: str,
        columns: Callable[[list[str]], list[str]] | None = None,
        schema: Schema | None = None,
    ) -> pl.DataFrame | None:
        try:
            before = os.lstat(entry)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.problems.append(f"cache entry {entry.name} was unreadable and is rebuilt ({exc.strerror})")
            return None
        if not (stat.S_ISREG(before.st_mode) or stat.S_ISLNK(before.st_mode)):
            return None  # a folder squatting on the name: the write will say so
        why = self._distrust(before)
        if why is not None:
            self.problems.append(f"cache entry {entry.name} {why}: not trusted, rebuilt")
            return None
        try:
            meta = pl.read_parquet_metadata(entry)
            if meta.get(_KEY) != key:
                return None
            found: dict[str, pl.DataType] = {}
            if columns is not None or isinstance(schema, Mapping):
                found = pl.read_parquet_schema(entry)
            if isinstance(schema, Mapping) and not _same_schema(found, schema):
                self.problems.append(f"cache entry {entry.name} has other columns or dtypes and is rebuilt")
                return None
            if columns is None:
                frame = pl.read_parquet(entry)
            else:
                frame = pl.read_parquet(entry, columns=columns(list(found)))
        except Exception:  # noqa: BLE001 - any unreadable entry is rebuilt, by design
            self.problems.append(f"cache entry {entry.name} was unreadable and is rebuilt")
            return None
        if schema is not None and not isinstance(schema, Mapping):
            try:
                ok = bool(schema(frame))
            except Exception:  # noqa: BLE001 - a frame the check cannot read does not match
                ok = False
            if not ok:
                self.problems.append(f"cache entry {entry.name} has other columns or dtypes and is rebuilt")
                return None
        try:
            after = os.lstat(entry)
        except OSError:
            return None
        if (after.st_dev, after.st_ino, after.st_size, after.st_mtime_ns) != (
            before.st_dev,
            before.st_ino,
            before.st_size,
            before.st_mtime_ns,
        ):
            return None  # replaced while it was read: the checks were of another file
        return frame

    def _sweep(self, folder: Path) -> None:
        """Remove temporary files of writes that were killed more than an hour ago."""
        self._swept = True
        cutoff = time.time() - 3600
        for stale in folder.glob(".tmp-*"):
            try:
                if stale.lstat().st_mtime < cutoff:
                    stale.unlink()
            except OSError:
                pass

    def _write(self, entry: Path, key: str, frame: pl.DataFrame) -> None:
        folder = entry.parent
        tmp = None
        try:
            if not self._swept:
                self._sweep(folder)
            # mkstemp: mode 0600, owned by this user, as the reader wants it.
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".parquet")
            os.close(fd)
            # lz4 without statistics: 2M rows write in ~1 s and reopen in ~0.4 s (zstd: 1.5 s,
            # 0.7 s) for a file 1.3x larger; the cache is a local speed-up, not an archive.
            frame.write_parquet(tmp, compression="lz4", statistics=False, metadata={_KEY: key})
            os.replace(tmp, entry)
            tmp = None
        except (OSError, pl.exceptions.PolarsError) as exc:
            # polars reports a full disk as a ComputeError; either way the load goes on.
            reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
            self.problems.append(f"cache not written ({folder}: {reason})")
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
