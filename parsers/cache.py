"""Parsed frames cached as Parquet (a 490 MB CSV reopens in 0.75 s instead of 2.2 s).

An entry is keyed by the source files (absolute path, size, mtime) and the parser version;
the key is stored inside the Parquet metadata and checked on read, so a stale, foreign or
corrupt entry is rebuilt, never trusted. Writes go to a temporary file renamed into place.
Nothing is ever written next to the profile: read-only profile folders work.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl

def _parser_version() -> str:
    """A digest of the parser sources: any change to how frames are built invalidates the
    cache, with no version number to forget to bump."""
    digest = hashlib.sha256()
    for src in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(src.name.encode())
        digest.update(src.read_bytes())
    return digest.hexdigest()[:16]


PARSER_VERSION = _parser_version()
ENV_DIR = "NPUSCOPE_CACHE_DIR"
_KEY = "npuscope.cache_key"


def default_dir() -> Path:
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    # The XDG spec: a relative path is invalid and must be ignored.
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "npuscope"


class FrameCache:
    """Load-or-build of frames; `enabled=False` reads and writes nothing."""

    def __init__(self, root: Path | None = None, *, enabled: bool = True) -> None:
        self.root = Path(root) if root is not None else default_dir()
        self.enabled = enabled
        self.hits = 0
        self.misses = 0
        self.problems: list[str] = []

    def key(self, kind: str, files: Sequence[Path], extra: object = None) -> str:
        parts = []
        for f in files:
            st = f.stat()
            parts.append([str(f.resolve()), st.st_size, st.st_mtime_ns])
        blob = json.dumps([PARSER_VERSION, kind, parts, extra], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def path_for(self, key: str) -> Path:
        return self.root / f"{key[:32]}.parquet"

    def load_or_build(
        self,
        kind: str,
        files: Sequence[Path],
        build: Callable[[], pl.DataFrame],
        extra: object = None,
    ) -> pl.DataFrame:
        if not self.enabled:
            return build()
        key = self.key(kind, files, extra)
        entry = self.path_for(key)
        frame = self._read(entry, key)
        if frame is not None:
            self.hits += 1
            return frame
        self.misses += 1
        frame = build()
        self._write(entry, key, frame)
        return frame

    def _read(self, entry: Path, key: str) -> pl.DataFrame | None:
        if not entry.is_file():
            return None
        try:
            meta = pl.read_parquet_metadata(entry)
            if meta.get(_KEY) != key:
                return None
            return pl.read_parquet(entry)
        except Exception:  # noqa: BLE001 - any unreadable entry is rebuilt, by design
            self.problems.append(f"cache entry {entry.name} was unreadable and is rebuilt")
            return None

    def _write(self, entry: Path, key: str, frame: pl.DataFrame) -> None:
        tmp = None
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-", suffix=".parquet")
            os.close(fd)
            frame.write_parquet(tmp, compression="zstd", compression_level=1, metadata={_KEY: key})
            os.replace(tmp, entry)
            tmp = None
        except (OSError, pl.exceptions.PolarsError) as exc:
            # polars reports a full disk as a ComputeError; either way the load goes on.
            reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
            self.problems.append(f"cache not written ({self.root}: {reason})")
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
