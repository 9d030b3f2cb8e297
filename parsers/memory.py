"""Refuse a parse that cannot fit in memory, before polars aborts the process trying.

polars does not raise when an allocation fails: the process dies with SIGABRT (6M rows under
a 6 GB address-space limit did). The figures below are the peak memory of a parse per byte
of file, measured with benchmarks/run.py (672 MB op_summary: 1.66 GB peak; 301 MB timeline:
1.2 GB peak), rounded up. A parse is refused with one line when it needs more than the
memory this process can still get: MemAvailable, the address-space limit (ulimit -v) and a
cgroup limit, whichever is smallest.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Sequence
from pathlib import Path

from .errors import ProfileError

# Peak bytes of memory per byte of file while parsing it.
PER_BYTE = {"csv": 3.0, "json": 4.5, "db": 3.0}
_GB = 1 << 30


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _vm_size() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _address_space_left() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(0, soft - _vm_size())


def _cgroup_left() -> int | None:
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
    except (OSError, ValueError):
        return None
    if limit == "max" or not limit.isdigit():
        return None
    return max(0, int(limit) - used)


def available() -> int | None:
    """Bytes this process can still allocate, or None when nothing says."""
    figures = [f for f in (_meminfo_available(), _address_space_left(), _cgroup_left()) if f is not None]
    return min(figures) if figures else None


def ensure_fits(paths: Sequence[Path], kind: str) -> None:
    """Raise a one-line ProfileError when parsing `paths` cannot fit in memory."""
    size = 0
    for path in paths:
        try:
            size += os.stat(path).st_size
        except OSError:
            pass
    need = int(size * PER_BYTE[kind])
    left = available()
    if left is None or need <= left:
        return
    raise ProfileError(
        f"{paths[0]}: reading {size / _GB:.2f} GB of {kind} needs about {need / _GB:.1f} GB of memory "
        f"and {left / _GB:.1f} GB are available; free memory or raise the limit (ulimit -v), "
        "open one card or capture at a time, or leave the timeline out (--no-timeline)"
    )
