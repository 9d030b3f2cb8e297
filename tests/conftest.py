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
