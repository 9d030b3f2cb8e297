"""Shared fixtures: real sample files and a private cache folder for every test."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "fixtures" / "samples"


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
