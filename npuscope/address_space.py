"""An address-space limit (`ulimit -v`, common on HPC login nodes), met before any work starts.

polars does not raise when an allocation fails: the process aborts (SIGABRT, exit 134), part
of its output already printed. Two things happen here, first thing in every command and
before polars is imported:
- its allocator (jemalloc) is told not to keep the address ranges it frees for reuse
  (`retain:false`): kept, they count against the limit although nothing uses them (a cold
  `inspect` of a 2M-row op_summary peaked at 6.0 GB of VmSize with 0.8 GB resident, 5.1 GB
  without retain, and so ran under a 6 GB limit where it had aborted). A user's own
  `_RJEM_MALLOC_CONF` is kept.
- a limit below what the smallest command maps (the bundled demo's report peaks at 1.35 GB)
  is refused with one line. What a file needs on top is checked before it is parsed
  (parsers/memory.py).
"""

from __future__ import annotations

import os
import resource

JEMALLOC_ENV = "_RJEM_MALLOC_CONF"
"""The configuration variable of the jemalloc that polars links (tikv-jemallocator's prefix)."""
MIN_ADDRESS_SPACE = 1536 << 20
"""Below this the interpreter, polars and its threads alone do not fit (the demo's report
aborted under 1.24 GiB and ran under 1.53 GiB)."""


def limit() -> int | None:
    """The soft address-space limit in bytes, or None when there is none."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ValueError, OSError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


def prepare() -> str | None:
    """Set up for an address-space limit; the one-line reason to stop, if it is too small."""
    cap = limit()
    if cap is None:
        return None
    os.environ.setdefault(JEMALLOC_ENV, "retain:false")
    if cap < MIN_ADDRESS_SPACE:
        return (
            f"the address-space limit (ulimit -v {cap >> 10}) leaves {cap / (1 << 30):.2f} GiB; npuscope "
            f"needs at least {MIN_ADDRESS_SPACE / (1 << 30):.1f} GiB: raise it (ulimit -v unlimited)"
        )
    return None
