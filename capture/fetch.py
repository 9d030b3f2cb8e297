"""Which files of a run are fetched, and how they land locally without ever overwriting.

Only exported results travel (never msprof's raw ``data/`` folders):
``mindstudio_profiler_output/``, ``device_*/summary``, ``device_*/timeline``, ``info.json*``,
``ASCEND_PROFILER_OUTPUT/`` (+ ``profiler_info_*.json`` for rank names), ``*.paddle_trace.json``,
the bootstrap's manifest and the job's log (kept as ``npuscope_capture.log``).

The tar stream goes to a temporary folder beside the destination and is unpacked with tarfile's
``data`` filter (no absolute paths, no ``..``, no links out of the folder); the folder is renamed
to ``<host>-<time>`` at the end, with ``-2``, ``-3``... when that name is taken.

The temporary folder (``.<name>.partial-<hex>``) is locked (`flock`) while a fetch writes it; a
fetch killed on the way (kill -9, a crash) leaves it unlocked, and the next fetch into the same
folder deletes it. A fetch that fails (a lost connection, a full local disk) deletes its own
temporary folder before it says why, and never another one. With several hosts each one gets a
subfolder named by `host_folders`: one name per host, never hidden, never ``.`` or ``..``, unique
even where case does not count.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import shutil
import tarfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from .runs import LOG_SNAPSHOT
from .spec import CaptureError

MANIFEST = "npuscope_capture.json"
LOCAL_LOG = "npuscope_capture.log"
_DEVICE = re.compile(r"^device_\d+$")
_KEEP_DIRS = ("mindstudio_profiler_output", "ASCEND_PROFILER_OUTPUT")


def is_exported(path: str) -> bool:
    """True for a run-relative path (``out/...`` or the log's copy) that is an exported result."""
    if path == LOG_SNAPSHOT:
        return True
    parts = path.split("/")
    if not parts or parts[0] != "out" or ".." in parts:
        return False
    name = parts[-1]
    if parts[1:] == [MANIFEST] or (len(parts) == 3 and parts[1].startswith("rank_") and name == MANIFEST):
        return True
    if name.endswith(".paddle_trace.json") or name.startswith("info.json"):
        return True
    if any(p in _KEEP_DIRS for p in parts[:-1]):
        return True
    if name.startswith("profiler_info") and name.endswith(".json"):
        return True
    for i, part in enumerate(parts[:-2]):
        if _DEVICE.match(part) and parts[i + 1] in ("summary", "timeline"):
            return True
    return False


def parse_listing(data: bytes) -> list[tuple[str, int]]:
    """`find -printf '%s\\t%p\\0'` entries as (path, size) for the exported files. Paths keep
    their exact bytes (undecodable ones as surrogates, see `path_bytes`)."""
    files = []
    for entry in data.split(b"\0"):
        size, sep, raw = entry.partition(b"\t")
        if sep and _SIZE.match(size):
            path = raw.decode("utf-8", "surrogateescape")
            if is_exported(path):
                files.append((path, int(size)))
    return files


_SIZE = re.compile(rb"^[0-9]{1,18}$")


def path_bytes(path: str) -> bytes:
    """A path from `parse_listing` back to the host's bytes."""
    return path.encode("utf-8", "surrogateescape")


_PLAIN = re.compile(r"[A-Za-z0-9._@-]")


def host_folder(host: str) -> str:
    """A folder name for `host`: letters, digits and ``._@-`` kept, every other byte as ``%XX``
    (``%`` too, so two hosts never share a name); a leading dot is encoded (never hidden, never
    ``.`` or ``..``)."""
    name = "".join(
        c if _PLAIN.fullmatch(c) else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogateescape")) for c in host
    )
    if name.startswith("."):
        name = "%2E" + name[1:]
    return name or "%"


def host_folders(hosts: Iterable[str]) -> dict[str, str]:
    """A distinct `host_folder` for each host, also where case does not count (`-2`, `-3`...)."""
    names: dict[str, str] = {}
    used: set[str] = set()
    for host in hosts:
        base = name = host_folder(host)
        n = 2
        while name.lower() in used:
            name = f"{base}-{n}"
            n += 1
        used.add(name.lower())
        names[host] = name
    return names


def local_name(path: str) -> str:
    """Where a run-relative path goes inside the capture folder."""
    if path == LOG_SNAPSHOT:
        return LOCAL_LOG
    return path.split("/", 1)[1]


_PARTIAL = re.compile(r"^\..+\.partial-[0-9a-f]{8}$")
STALE_PARTIAL_S = 60  # an unlocked temporary folder this old was left by a fetch that died
_held: dict[Path, int] = {}  # temporary folder -> the descriptor holding its lock


def staging_dir(out: Path, name: str) -> Path:
    """A new hidden folder in `out` (mode from the umask, unlike mkdtemp's 0700), locked until
    `claim_folder` or `discard`; the folders that dead fetches left in `out` are deleted first."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        sweep_partials(out)
        for _ in range(100):
            path = out / f".{name}.partial-{secrets.token_hex(4)}"
            try:
                path.mkdir()
            except FileExistsError:
                continue
            if _lock(path):
                return path
    except OSError as exc:
        raise local_write_error(out, exc) from None
    raise CaptureError(f"{out}: cannot make a temporary folder")


def local_write_error(out: Path, exc: OSError, hint: str = "", needed: int = 0) -> CaptureError:
    """One line for a failure to write a fetch into `out`; a full disk (or quota) is said so,
    with what the fetch needs (`needed` bytes) and what is free there now."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            free = f"{shutil.disk_usage(out).free / 1e6:.1f} MB free"
        except OSError:
            free = ""
        room = ", ".join(x for x in (f"the fetch needs about {needed / 1e6:.1f} MB" if needed else "", free) if x)
        what = (
            f"the local disk is full ({exc.strerror}{'; ' + room if room else ''}): "
            "free some space or give another --out"
        )
    else:
        what = f"cannot write the fetched files there: {exc.strerror or exc}"
    return CaptureError(f"{out}: {what}" + (f"; {hint}" if hint else ""))


def _lock(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:  # swept by another fetch in the instant after mkdir
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _held[path] = fd
    return True


def _release(path: Path) -> None:
    fd = _held.pop(path, None)
    if fd is not None:
        os.close(fd)


def sweep_partials(out: Path, older_than: float = STALE_PARTIAL_S) -> list[Path]:
    """Delete the temporary folders in `out` that no fetch holds any more (older than
    `older_than` seconds, so one just made and not yet locked is left alone)."""
    swept: list[Path] = []
    try:
        entries = list(os.scandir(out))
    except OSError:
        return swept
    now = time.time()
    for entry in entries:
        if not _PARTIAL.match(entry.name) or not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime < older_than:
                continue
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a fetch is writing it
            os.close(fd)
            continue
        try:
            shutil.rmtree(path, ignore_errors=True)
            swept.append(path)
        finally:
            os.close(fd)
    return swept


def unpack(tar_path: Path, dest: Path, stop: threading.Event | None = None) -> int:
    """Unpack the fetched tar into `dest` (run paths mapped by `local_name`); count the files.
    `stop` set from another thread ends it between files."""
    count = 0
    try:
        with tarfile.open(tar_path, mode="r:") as tar:
            for member in tar:
                if stop is not None and stop.is_set():
                    break
                if not member.isfile() or not is_exported(member.name):
                    continue
                member.name = local_name(member.name)
                tar.extract(member, dest, filter="data")
                count += 1
    except OSError as exc:
        if exc.errno is not None:  # writing here failed (a full disk...): not the archive's fault
            raise
        raise CaptureError(f"the fetched archive could not be unpacked: {exc}") from None
    except tarfile.TarError as exc:
        raise CaptureError(f"the fetched archive could not be unpacked: {exc}") from None
    return count


def claim_folder(staging: Path, out: Path, name: str) -> Path:
    """Rename `staging` to out/name (or name-2, name-3...) without replacing anything."""
    for n in range(1, 1000):
        target = out / (name if n == 1 else f"{name}-{n}")
        try:
            target.mkdir()  # claims the name atomically; an existing one raises
        except FileExistsError:
            continue
        try:
            os.replace(staging, target)  # onto the empty folder just made: ours
        except OSError:
            target.rmdir()
            raise
        _release(staging)
        return target
    raise CaptureError(f"{out}: too many captures named {name}")


def discard(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)
    _release(staging)
