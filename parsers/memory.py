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
# Under an address-space limit (ulimit -v) what counts is what the process maps, not what it
# touches: polars' allocator and threads map far more than they use. A cold `inspect` of a
# 2M-row, 637 MB op_summary peaked at 5.06 GB of VmSize (0.8 GB resident) with jemalloc's
# `retain` off (npuscope/address_space.py): it ran under `ulimit -v 6000000` and aborted under
# 5000000. 7x the file on top of what the process maps once polars' threads run (AS_BASE; the
# bundled demo's whole report peaks at 1.35 GB) refuses the second and passes the first; json
# and db keep the ratios of PER_BYTE (not measured under a limit).
AS_PER_BYTE = {"csv": 7.0, "json": 10.5, "db": 7.0}
AS_BASE = 1400 << 20
ANALYSIS_FACTOR = 1.8
"""A command that analyses what it reads (report, compare, the explorer) maps more than one
that lists it (inspect): a cold `report --format json` of the same file peaked at 8.0 GB of
VmSize (inspect: 5.06 GB), 1.8x inspect's 7x beyond AS_BASE. `analysing(True)` sets it."""
_analysing = [False]


def analysing(on: bool) -> None:
    """Whether this process's command analyses what it reads (sizes the address-space check)."""
    _analysing[0] = on


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


def _address_space_for_more() -> int | None:
    """Bytes of address space a parse may still map under the limit, counting the engine's
    threads as mapped (AS_BASE) before they have started."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(0, soft - max(_vm_size(), AS_BASE))


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
    """Raise a one-line ProfileError when parsing `paths` cannot fit in memory (MemAvailable,
    a cgroup limit) or in the address space an address-space limit leaves."""
    size = 0
    for path in paths:
        try:
            size += os.stat(path).st_size
        except OSError:
            pass
    memory = [f for f in (_meminfo_available(), _cgroup_left()) if f is not None]
    need, left = int(size * PER_BYTE[kind]), min(memory) if memory else None
    if left is not None and need > left:
        raise ProfileError(
            f"{paths[0]}: reading {size / _GB:.2f} GB of {kind} needs about {need / _GB:.1f} GB of memory "
            f"and {left / _GB:.1f} GB are available; free memory, open one card or capture at a "
            "time, or leave the timeline out (--no-timeline)"
        )
    space = _address_space_for_more()
    need = int(size * AS_PER_BYTE[kind] * (ANALYSIS_FACTOR if _analysing[0] else 1.0))
    if space is not None and need > space:
        raise ProfileError(
            f"{paths[0]}: reading {size / _GB:.2f} GB of {kind} needs about {need / _GB:.1f} GB of address "
            f"space and the limit (ulimit -v) leaves {space / _GB:.1f} GB; raise the limit, open one card "
            "or capture at a time, or leave the timeline out (--no-timeline)"
        )
