"""The committed state of a db export that is live or was left unfinished, read without
writing anything beside it.

A db is opened `immutable=1` (no lock, no -wal / -shm / -journal created beside it), which
also makes SQLite ignore what lies beside it: a `-wal` holding committed changes not yet
merged into the db, and a hot `-journal` a writer left when it died mid-transaction (the db
then holds half of that change). So before opening, `take` looks:

- a non-empty `-wal` with a valid header, or a `-journal` with a valid header (hot, or held
  by a live writer): the db and that file are copied into a private temporary folder (mode
  0700, removed by `Snapshot.close`, also on an error or Ctrl+C), SQLite merges the WAL or
  rolls the journal back in the copy (`PRAGMA journal_mode=DELETE`), and the copy is what
  is read, immutable like any other db; there must be room for the copy (one line if not:
  set TMPDIR to a folder with room);
- a lock held on the db (RESERVED, PENDING or EXCLUSIVE) or on its `-shm` (the WAL write
  lock, or the lock every open connection keeps): another process is writing it, or has it
  open. The committed state is read all the same, with a note that the figures may be
  incomplete; `strict` refuses it instead. The locks are probed with fcntl (F_OFD_GETLK,
  which sees the POSIX locks SQLite takes even in this process) on files opened read-only:
  the probe takes no lock.

A hot journal says the export is unfinished (a note, or refused with `strict`). Nothing is
ever written beside the db, and the files beside it are left byte for byte as they were.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import struct
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from .errors import ProfileError

# SQLite's lock bytes (os_unix.c): the lock byte page of a db file is at 1 GiB.
PENDING_BYTE = 0x40000000
RESERVED_BYTE = PENDING_BYTE + 1
SHARED_FIRST = PENDING_BYTE + 2
SHARED_SIZE = 510
# The -shm file: the WAL write lock, and the "dead man switch" every connection holds shared.
SHM_WRITE_LOCK = 120
SHM_DMS = 128
WAL_MAGIC = (0x377F0682, 0x377F0683)
JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")
SPARE_BYTES = 64 << 20
"""Free space kept beyond the copy itself (SQLite's temporary files while it merges)."""
_COPY_TRIES = 3

# Phrases that mark a note as a live or unfinished export (see `refusal`).
_LIVE = "is being written"
_OPEN = "is open in another process"
_UNFINISHED = "is unfinished"


@dataclass
class Snapshot:
    """What to open for a db: the file itself or a private copy of its committed state."""

    path: Path
    notes: list[str] = field(default_factory=list)
    folder: Path | None = None  # the private copy's folder, removed by close()

    def close(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


@contextmanager
def committed_uri(path: Path) -> Iterator[str]:
    """A read-only SQLite URI of the committed state of the db at `path` (the file, or its
    private copy while the block runs): for the readers of a table or two beside db.py."""
    snap = take(path)
    try:
        yield "file:" + quote(os.fsencode(snap.path.absolute())) + "?mode=ro&immutable=1"
    finally:
        snap.close()


def refusal(notes: Iterable[str]) -> str | None:
    """The note that `--strict` refuses a db export for (live or unfinished), if any."""
    for note in notes:
        if _LIVE in note or _OPEN in note or _UNFINISHED in note:
            return note
    return None


def take(path: Path, strict: bool = False) -> Snapshot:
    """The committed state of the db at `path`: see the module's docstring."""
    wal = Path(str(path) + "-wal")
    journal = Path(str(path) + "-journal")
    shm = Path(str(path) + "-shm")
    notes: list[str] = []
    holder = _lock_holder(path, shm)
    if holder is not None:
        notes.append(holder)
    wal_ok, wal_size = _has_header(wal, WAL_MAGIC)
    journal_ok, journal_size = _has_header(journal, (JOURNAL_MAGIC,))
    if wal_size and not wal_ok:
        notes.append(f"{wal.name} beside the db is not a valid write-ahead log: it is ignored")
    hot = journal_ok and holder is None
    if hot:
        notes.append(
            f"{path.name} {_UNFINISHED}: its writer stopped in the middle of a change ({journal.name} "
            "is left beside it); the last committed state is read, which may lack the end of the "
            "profile: export it again"
        )
    if strict and (found := refusal(notes)) is not None:
        raise ProfileError(f"{path}: {found}; leave out --strict to read it anyway")
    extra = [f for f, ok in ((wal, wal_ok), (journal, journal_ok)) if ok]
    if not extra:
        return Snapshot(path, notes)
    snap = _copy(path, extra)
    snap.notes = notes
    if wal_ok:
        notes.append(
            f"{wal.name} beside the db holds changes not yet merged into it: they are read (merged "
            "in a private copy; the files are left as they are)"
        )
    return snap


# --------------------------------------------------------------------------- looking


def _has_header(path: Path, magics: Iterable[object]) -> tuple[bool, int]:
    """Whether `path` starts with one of `magics` (ints: a big-endian u32), and its size."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
            size = fh.seek(0, 2)
    except OSError:
        return False, 0
    for magic in magics:
        if isinstance(magic, bytes) and head.startswith(magic) and size > 28:
            return True, size
        if isinstance(magic, int) and len(head) >= 4 and int.from_bytes(head[:4], "big") == magic and size > 32:
            return True, size
    return False, size


_F_GETLK = getattr(fcntl, "F_OFD_GETLK", fcntl.F_GETLK)
_FLOCK = "hhqqi4x"  # struct flock on Linux (l_type, l_whence, l_start, l_len, l_pid)


def _conflict(fd: int, kind: int, start: int, length: int) -> int | None:
    """The pid holding a lock that conflicts with `kind` on the range (-1: unknown), or None."""
    try:
        got = fcntl.fcntl(fd, _F_GETLK, struct.pack(_FLOCK, kind, os.SEEK_SET, start, length, 0))
    except OSError:
        return None  # a file system without locks: nothing to see
    l_type, _, _, _, pid = struct.unpack(_FLOCK, got)
    if l_type == fcntl.F_UNLCK:
        return None
    return pid if pid > 0 else -1


def _lock_holder(path: Path, shm: Path) -> str | None:
    """A note naming the lock another connection holds on the db or its -shm, if any."""
    writing: int | None = None
    opened: int | None = None
    for file, probes in (
        (
            path,
            (
                (fcntl.F_WRLCK, RESERVED_BYTE, 1),
                (fcntl.F_RDLCK, PENDING_BYTE, 1),
                (fcntl.F_RDLCK, SHARED_FIRST, SHARED_SIZE),
            ),
        ),
        (shm, ((fcntl.F_WRLCK, SHM_WRITE_LOCK, 1),)),
    ):
        try:
            fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            for kind, start, length in probes:
                if writing is None:
                    writing = _conflict(fd, kind, start, length)
            if file == shm and writing is None:
                opened = _conflict(fd, fcntl.F_WRLCK, SHM_DMS, 1)
        finally:
            os.close(fd)
    if writing is not None:
        return (
            f"{path.name} {_LIVE} (a lock is held{_by(writing)}): its figures may be incomplete; "
            "re-open it when the profiler has finished"
        )
    if opened is not None:
        return (
            f"{path.name} {_OPEN} (a lock is held on {shm.name}{_by(opened)}): if that process is "
            "still writing it, its figures may be incomplete; re-open it when the profiler has finished"
        )
    return None


def _by(pid: int) -> str:
    return f" by process {pid}" if pid > 0 else ""


# --------------------------------------------------------------------------- copying


def _stamp(files: Iterable[Path]) -> list[tuple[int, int, int]]:
    out = []
    for f in files:
        try:
            st = f.stat()
        except OSError:
            out.append((-1, -1, -1))
        else:
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return out


def _copy(path: Path, extra: list[Path]) -> Snapshot:
    """The db and its -wal / -journal copied into a private folder and merged there."""
    files = [path, *extra]
    need = sum(f.stat().st_size for f in files if f.exists())
    base = Path(tempfile.gettempdir())
    try:
        free = shutil.disk_usage(base).free
    except OSError as exc:
        raise ProfileError(
            f"{path}: the temporary folder {base} cannot be used ({exc.strerror or exc}); set TMPDIR"
        ) from None
    if free < need + SPARE_BYTES:
        raise ProfileError(
            f"{path}: reading its committed state takes a private copy of {need / 1e6:,.0f} MB (the db and "
            f"{', '.join(f.name for f in extra)}), and {base} has {free / 1e6:,.0f} MB free; set TMPDIR "
            "to a folder with room, or open and close the db once with sqlite3 to merge it"
        )
    folder = Path(tempfile.mkdtemp(prefix="npuscope-db-"))  # mode 0700
    snap = Snapshot(folder / "export.db", folder=folder)
    try:
        for _ in range(_COPY_TRIES):  # a live writer may change the files while they are copied
            before = _stamp(files)
            for f in files:
                suffix = f.name[len(path.name) :]
                try:
                    shutil.copyfile(f, str(snap.path) + suffix)
                except FileNotFoundError:  # a -wal / -journal gone since: the writer finished
                    Path(str(snap.path) + suffix).unlink(missing_ok=True)
                except OSError as exc:
                    raise ProfileError(
                        f"{path}: its committed state cannot be copied to {folder.parent} "
                        f"({exc.strerror or exc}); set TMPDIR to a folder with room"
                    ) from None
            if _stamp(files) == before:
                break
        _merge(path, snap.path)
    except BaseException:
        snap.close()
        raise
    return snap


def _merge(shown: Path, copy: Path) -> None:
    """Let SQLite apply the WAL or roll back the hot journal of the private copy."""
    try:
        con = sqlite3.connect(copy, isolation_level=None)
        try:
            con.execute("PRAGMA trusted_schema=OFF")
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # rolls a hot journal back
            con.execute("PRAGMA journal_mode=DELETE").fetchone()  # merges the WAL, removes it
        finally:
            con.close()
    except sqlite3.Error as exc:
        msg = " ".join(str(exc).split())
        raise ProfileError(
            f"{shown}: its committed state cannot be read: SQLite cannot apply the write-ahead log or "
            f"journal beside it ({msg}); copy or export the db again"
        ) from None
    for suffix in ("-wal", "-journal", "-shm"):
        if Path(str(copy) + suffix).exists():
            raise ProfileError(
                f"{shown}: its write-ahead log or journal cannot be applied; open and close it once with sqlite3"
            )
