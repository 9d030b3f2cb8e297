"""Run npuscope as a process that file modes bind, for the permission-denied and read-only tests.

Root ignores file modes, so root runs the code in a subprocess as `nobody`, or, when `nobody`
cannot start this interpreter (it may live under a 0700 /root), as root without the
CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH capabilities; a non-root user runs it in-process.
Where neither works, the tests that ask for the `unpriv` fixture are skipped with the reason.

Test modules import the fixtures by name:

    from unpriv import unpriv, world_dir  # noqa: F401
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import pytest

from npuscope.parsers import FrameCache, ProfileError, open_profile

CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, PR_CAPBSET_DROP = 1, 2, 24
NOBODY = 65534
TIMEOUT = 120

# What `open_unprivileged` reports, as JSON on the last stdout line of the child.
OPEN_SNIPPET = r"""
import json, sys, traceback
from npuscope.parsers import FrameCache, ProfileError, open_profile
try:
    cache = FrameCache(sys.argv[2])
    p = open_profile(sys.argv[1], cache=cache)
except ProfileError as e:
    chained = e.__cause__ is not None or (e.__context__ is not None and not e.__suppress_context__)
    out = {"outcome": "error", "message": str(e), "chained": chained}
except BaseException:
    out = {"outcome": "crash", "message": traceback.format_exc()}
else:
    out = {"outcome": "ok", "tasks": p.tasks.height, "durations": p.tasks["duration_us"].to_list(),
           "events": None if p.events is None else p.events.height,
           "hits": cache.hits, "misses": cache.misses, "problems": cache.problems}
print(json.dumps(out))
"""

# Exit 0 when the child is denied both a read of a chmod-000 file and a write into a 0555 folder.
PROBE_SNIPPET = r"""
import os, sys, npuscope.parsers
try:
    open(sys.argv[1]).read()
except PermissionError:
    pass
else:
    sys.exit(3)
try:
    open(os.path.join(sys.argv[2], "x"), "w").close()
except PermissionError:
    sys.exit(0)
sys.exit(4)
"""
PROBE_FAILURES = {3: "chmod 000 does not deny reads", 4: "a 0555 folder does not deny writes"}


# --------------------------------------------------------------------------- file modes


def snapshot(root: Path) -> dict[str, tuple]:
    """Names, types, sizes, modes and mtimes of everything below `root` (and root itself)."""
    out: dict[str, tuple] = {}
    st = root.lstat()
    out["."] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            size = st.st_size if stat.S_ISREG(st.st_mode) else None
            out[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), size, st.st_mtime_ns)
    return out


def make_dir(path: Path, mode: int) -> Path:
    """A new folder with exactly `mode`, whatever the umask."""
    path.mkdir()
    path.chmod(mode)
    return path


def make_read_only(root: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(root):
        for n in filenames:
            os.chmod(os.path.join(dirpath, n), 0o444)
    for dirpath, dirnames, _ in os.walk(root, topdown=False):
        for n in dirnames:
            os.chmod(os.path.join(dirpath, n), 0o555)
    root.chmod(0o555)


def make_writable(root: Path) -> None:
    """Folders 0755 and files 0644, also below folders that were chmod 000."""
    root.chmod(0o755)
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames:  # chmod before os.walk descends into it
            os.chmod(os.path.join(dirpath, n), 0o755)
        for n in filenames:
            os.chmod(os.path.join(dirpath, n), 0o644)


# --------------------------------------------------------------------------- child processes


def cli_env(cache: Path, home: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["NPUSCOPE_CACHE_DIR"] = str(cache)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if home is not None:
        env["HOME"] = str(home)
    return env


def run_python(args: list, cache: Path, cwd: Path, **kw) -> subprocess.CompletedProcess:
    """`python *args` in `cwd` (also its HOME) with `cache` as the cache folder; `kw` from `unpriv`."""
    return subprocess.run(
        [sys.executable, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=cli_env(cache, home=cwd),
        timeout=TIMEOUT,
        **kw,
    )


def _drop_dac_caps() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _probe(kw: dict) -> str | None:
    """None when a child started with `kw` imports npuscope and file modes deny it reads and
    writes; else why not."""
    d = Path(tempfile.mkdtemp(dir="/tmp", prefix="npuscope-probe-"))
    try:
        d.chmod(0o755)
        locked = d / "locked"
        locked.write_text("x")
        locked.chmod(0)
        sealed = make_dir(d / "sealed", 0o555)
        try:
            r = run_python(["-c", PROBE_SNIPPET, locked, sealed], cache=d, cwd=d, **kw)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"cannot start: {exc}"
        if r.returncode in PROBE_FAILURES:
            return PROBE_FAILURES[r.returncode]
        if r.returncode != 0:
            return (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        return None
    finally:
        make_writable(d)
        shutil.rmtree(d, ignore_errors=True)


@functools.cache
def unprivileged_mode() -> tuple[str, dict, str]:
    """(mode, subprocess kwargs, why-not) where mode is inprocess | nobody | nocaps | skip."""
    if os.geteuid() != 0:
        why = _probe({})  # a child with this process's own credentials
        if why is None:
            return "inprocess", {}, ""
        return "skip", {}, f"as this user: {why}"
    nobody = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    why_nobody = _probe(nobody)
    if why_nobody is None:
        return "nobody", nobody, ""
    nocaps = {"preexec_fn": _drop_dac_caps}
    why_nocaps = _probe(nocaps)
    if why_nocaps is None:
        return "nocaps", nocaps, ""
    return "skip", {}, f"as nobody: {why_nobody}; as root without DAC caps: {why_nocaps}"


@pytest.fixture
def unpriv() -> tuple[str, dict]:
    """(mode, subprocess kwargs) for `open_unprivileged`, `run_python` and the CLI."""
    mode, kw, why = unprivileged_mode()
    if mode == "skip":
        pytest.skip(f"cannot run as an unprivileged process here (for permission tests): {why}")
    return mode, kw


@pytest.fixture
def world_dir():
    """A fresh folder under /tmp that `nobody` can traverse; removed afterwards."""
    d = Path(tempfile.mkdtemp(dir="/tmp", prefix="npuscope-test-"))
    d.chmod(0o755)
    yield d
    make_writable(d)
    shutil.rmtree(d, ignore_errors=True)


def open_unprivileged(target: Path, cache: Path, mode: str, kw: dict, cwd: Path) -> dict:
    """open_profile(target) as the unprivileged process; the outcome as OPEN_SNIPPET reports it."""
    if mode == "inprocess":
        c = FrameCache(cache)
        try:
            p = open_profile(target, cache=c)
        except ProfileError as e:
            chained = e.__cause__ is not None or (e.__context__ is not None and not e.__suppress_context__)
            return {"outcome": "error", "message": str(e), "chained": chained}
        except Exception:  # noqa: BLE001 - reported like the subprocess snippet does
            return {"outcome": "crash", "message": traceback.format_exc()}
        return {
            "outcome": "ok",
            "tasks": p.tasks.height,
            "durations": p.tasks["duration_us"].to_list(),
            "events": None if p.events is None else p.events.height,
            "hits": c.hits,
            "misses": c.misses,
            "problems": c.problems,
        }
    r = run_python(["-c", OPEN_SNIPPET, target, cache], cache=cache, cwd=cwd, **kw)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])
