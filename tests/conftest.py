"""Shared fixtures: real sample files and a private cache folder for every test."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "fixtures" / "samples"

# Compiled modules are kept, outside the checkout, for the test run: with
# PYTHONDONTWRITEBYTECODE set (as on the CI machine) every pytest worker rewrote and compiled
# every test module (6.7 s of CPU each, 1.6 s from the cache) and each of the suite's
# hundreds of `python -m npuscope` and worker processes compiled the package from source
# again (~0.3 s each). Set here, before the workers start and before any subprocess, so
# they inherit it; the tests' code and what they check are unchanged.
_PYCACHE = Path(tempfile.gettempdir()) / f"npuscope-test-pycache-{os.getuid()}"
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ["PYTHONPYCACHEPREFIX"] = str(_PYCACHE)
sys.dont_write_bytecode = False
sys.pycache_prefix = str(_PYCACHE)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Tests never read or write the user's cache folder."""
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("NPUSCOPE_CACHE_DIR", str(cache))
    # nor the user's runs registry: each test has its own (analysis/run_registry.py)
    monkeypatch.setenv("NPUSCOPE_RUNS_DB", str(tmp_path_factory.mktemp("runs") / "runs.db"))
    return cache


@pytest.fixture
def cache_dir(_private_cache) -> Path:
    return _private_cache


@pytest.fixture
def samples() -> Path:
    return SAMPLES


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """A real OpenSSH server on 127.0.0.1 (see tests/sshd_server.py), one per test session."""
    from sshd_server import start_sshd

    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


# --- the order the xdist workers get the tests in --------------------------------------------
# `--dist worksteal` gives each worker one run of consecutive tests and lets an idle worker
# take the second half of the longest queue left. In collection order the SSH and capture-screen
# tests (Paddle trainings, mostly waiting on them) are one run: one worker ran them one after the
# other (~380 s of a 410 s suite) while the others ran out of work. They are dealt out here,
# one test at a time, near the start of every worker's run, and the other modules that spend
# long waiting or on one fixture with them; a module's other tests keep their order, and a test
# is only put between two modules, never inside one (a module-scoped fixture is set up once).
SPREAD = (
    "test_capture_ssh.py",
    "test_capture_screen.py",
    "test_explorer_matches_report.py",
    "test_experiment_screen.py",
)
# Moved whole: one fixture for the module, or tmux sessions on the default server (a server
# ends with its last session: never two of these tests at once), or Dask schedulers and workers
# (~100 s, its checks that nothing is left running look at the whole machine), or one captured
# base run its experiments repeat (~35 s)
WHOLE = ("test_bootstrap.py", "test_load_tmux.py", "test_e2e_tmux.py", "test_dask_cluster.py", "test_experiment.py")
SHARED = ("window_capture",)  # module fixtures a few tests of a SPREAD module read: kept together


def pytest_collection_modifyitems(config, items):
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers > 1:
        items[:] = dealt(items, workers)


def dealt(items: list, workers: int) -> list:
    """`items` with the SPREAD tests and WHOLE modules placed early in each of the `workers`
    consecutive runs worksteal hands out (sizes as it computes them)."""
    units: dict[tuple, list] = {}
    light = []
    for item in items:
        name = item.path.name
        if name in WHOLE:
            units.setdefault((name,), []).append(item)
        elif name in SPREAD:
            shared = next((f for f in SHARED if f in item.fixturenames), None)
            units.setdefault((name, shared or item.nodeid), []).append(item)
        else:
            light.append(item)
    if not units:
        return items
    fixtured = {item.path for item in light if _module_scoped(item)}
    heavy = [u for k, u in units.items() if len(k) == 1] + [u for k, u in units.items() if len(k) == 2]
    per_worker = [heavy[w::workers] for w in range(workers)]
    out: list = []
    j, left, carried = 0, len(items), []
    for w in range(workers):
        size = left // (workers - w)
        left -= size
        end = len(out) + size
        queue = carried + per_worker[w]
        gap, next_at = size // (3 * max(1, len(queue))), len(out)
        while len(out) < end and (j < len(light) or queue):
            free = j in (0, len(light)) or light[j].path != light[j - 1].path or light[j].path not in fixtured
            if queue and free and len(out) >= next_at:
                out.extend(queue.pop(0))
                next_at = len(out) + gap
            elif j < len(light):
                out.append(light[j])
                j += 1
            else:
                out.extend(queue.pop(0))
        carried = queue  # no place found in this run: early in the next one
    out.extend(light[j:])
    for unit in carried:
        out.extend(unit)
    assert sorted(map(id, out)) == sorted(map(id, items))
    return out


def _module_scoped(item) -> bool:
    """Whether the test reads a fixture set up once per module (its module is never cut)."""
    defs = item._fixtureinfo.name2fixturedefs.values()
    return any(d.scope in ("module", "package") for ds in defs for d in ds)


def pytest_sessionfinish(session, exitstatus):
    """Nothing is ever written into a profile folder: after the whole run (in the controller,
    not in each xdist worker) the project's sample profiles hold exactly the files git knows;
    anything else (a db's -wal or -shm, a cache file) fails the run, named."""
    if hasattr(session.config, "workerinput"):
        return
    import subprocess

    root = Path(__file__).resolve().parents[1]
    listed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--", "fixtures/samples", "fixtures/demo"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if listed.returncode != 0:  # not a git checkout (an sdist): nothing to compare with
        return
    changed = [line for line in listed.stdout.splitlines() if line.strip()]
    if changed:
        session.config.get_terminal_writer().line(
            "files written into the sample profiles: " + ", ".join(changed), red=True
        )
        session.exitstatus = 1
