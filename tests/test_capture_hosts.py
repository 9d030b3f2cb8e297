"""Host aliases from real ssh config files, and the per-host values kept between captures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from npuscope.capture import hosts
from npuscope.capture.hosts import config_file, last_host, load_remembered, remember, ssh_config_hosts


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private $HOME with an empty ~/.ssh: the user's own config is never read."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def config_dir(tmp_path, monkeypatch):
    folder = tmp_path / "config"
    monkeypatch.setenv("NPUSCOPE_CONFIG_DIR", str(folder))
    return folder


def test_hosts_from_the_users_config_local_first(home):
    (home / ".ssh" / "config").write_text(
        "# my hosts\n"
        "Host trainer-1 trainer-2\n  HostName 10.0.0.1\n  User me\n\n"
        "Host *.internal !bastion gpu-?\n  ProxyJump bastion\n\n"
        "Host=bastion   # the jump host\n"
        "  HostName bastion.example.org\n"
        "host trainer-1\n"
        "Match host foo\n  User other\n"
        'HOST "quoted-name"\n'
    )
    assert ssh_config_hosts() == ["local", "trainer-1", "trainer-2", "bastion", "quoted-name"]


def test_include_relative_to_dot_ssh_with_globs_and_absolute(home, tmp_path):
    ssh = home / ".ssh"
    (ssh / "config.d").mkdir()
    (ssh / "config.d" / "b.conf").write_text("Host from-b\n")
    (ssh / "config.d" / "a.conf").write_text("Host from-a\nInclude nested\n")
    (ssh / "nested").write_text("Host nested-host\n")
    elsewhere = tmp_path / "elsewhere.conf"
    elsewhere.write_text("Host absolute-host\n")
    (ssh / "config").write_text(
        "Include config.d/*.conf\n"
        f"Include {elsewhere} missing-file\n"
        "Include config\n"  # itself: read once, no loop
        "Host main-host\n"
    )
    assert ssh_config_hosts() == ["local", "from-a", "nested-host", "from-b", "absolute-host", "main-host"]


def test_given_file_and_missing_files(home, tmp_path):
    own = tmp_path / "client_config"
    own.write_text("Host npuscope-test\n  HostName 127.0.0.1\nInclude extra\n")
    (home / ".ssh" / "extra").write_text("Host extra-host\n")
    assert ssh_config_hosts(own) == ["local", "npuscope-test", "extra-host"]
    assert ssh_config_hosts(tmp_path / "nothing-here") == ["local"]
    assert ssh_config_hosts() == ["local"]  # no ~/.ssh/config at all
    (home / ".ssh" / "config").write_bytes(b"Host caf\xe9\n\x00\xff")
    assert ssh_config_hosts()[0] == "local"  # undecodable bytes are not fatal


def test_remember_and_load_per_host(config_dir):
    assert load_remembered("trainer-1") == {} and last_host() == ""
    path = remember("trainer-1", {"command": "python train.py", "steps": "2", "stop": True})
    assert path == config_dir / "capture.json" == config_file()
    remember("trainer-2", {"command": "python other.py"})
    assert load_remembered("trainer-1") == {"command": "python train.py", "steps": "2", "stop": True}
    assert load_remembered("trainer-2") == {"command": "python other.py"}
    assert last_host() == "trainer-2"
    remember("trainer-1", {"command": "python train.py --lr 1"})
    assert load_remembered("trainer-1") == {"command": "python train.py --lr 1"}
    assert last_host() == "trainer-1"
    assert [p.name for p in config_dir.iterdir()] == ["capture.json"]  # no temporary file left
    assert json.loads(path.read_text())["hosts"]["trainer-2"] == {"command": "python other.py"}


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[1, 2]", b'{"hosts": [1], "last_host": 3}', b'{"hosts": {"h": "text"}}', b"\xff\xfe\x00"],
)
def test_corrupt_file_reads_as_empty_and_is_replaced(config_dir, content):
    config_dir.mkdir()
    (config_dir / "capture.json").write_bytes(content)
    assert load_remembered("h") == {} and last_host() == ""
    remember("h", {"workdir": "/data"})
    assert load_remembered("h") == {"workdir": "/data"} and last_host() == "h"


def test_unreadable_file_reads_as_empty(config_dir):
    (config_dir / "capture.json").mkdir(parents=True)  # a folder where the file should be
    assert load_remembered("h") == {} and last_host() == ""
    with pytest.raises(OSError):
        remember("h", {"workdir": "/data"})
    assert list((config_dir).iterdir()) == [config_dir / "capture.json"]  # the temporary file is gone


def test_config_location_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("NPUSCOPE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_file() == tmp_path / "xdg" / "npuscope" / "capture.json"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config_file() == tmp_path / "home" / ".config" / "npuscope" / "capture.json"
    monkeypatch.setenv("NPUSCOPE_CONFIG_DIR", str(tmp_path / "own"))
    assert config_file() == tmp_path / "own" / "capture.json"


def test_imports_no_ui():
    code = f"import sys, {hosts.__name__}; print([m for m in ('textual', 'rich') if m in sys.modules])"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]"
