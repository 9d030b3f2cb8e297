"""A real OpenSSH server on 127.0.0.1 for the capture tests, with throwaway keys and config.

It never touches the system sshd or the user's ~/.ssh: host key, user key, authorized_keys,
known_hosts, server and client configs all live in one temporary folder, and the client is
pointed at its own config with `-F` (`npuscope capture --ssh-config`). Host aliases:

* ``npuscope-test``: known host key, the user key authorised;
* ``npuscope-unknown``: same server, empty known_hosts (the key must be refused);
* ``npuscope-nokey``: known host key, a key the server does not accept.

The server offers only the curve25519 key exchange: with OpenSSH 9's default (sntrup761x25519)
`ssh HOST true` took 0.6-0.9 s on a loaded 2-core machine, 0.25-0.35 s without it, and a capture
opens about ten connections.

Outside CI the tests skip with the reason when ``/usr/sbin/sshd`` is missing; in CI (``CI`` set)
they fail instead, since `.ci/run` installs openssh-server.
"""

from __future__ import annotations

import getpass
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = Path("/usr/sbin/sshd")
HOST = "npuscope-test"
UNKNOWN = "npuscope-unknown"
NOKEY = "npuscope-nokey"


@dataclass
class SshServer:
    folder: Path
    port: int
    config: Path  # the client config to pass as --ssh-config
    proc: subprocess.Popen

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log(self) -> str:
        return (self.folder / "sshd.log").read_text(errors="replace")

    def session_pids(self) -> list[int]:
        """The sshd processes serving connections now: the listener's descendants whose program
        is sshd (the per-connection monitor and its session child), not the shells they run."""
        children = _children()
        found, todo = [], list(children.get(self.proc.pid, []))
        while todo:
            pid = todo.pop()
            try:
                exe = os.readlink(f"/proc/{pid}/exe")
            except OSError:
                continue
            if Path(exe).name.startswith("sshd"):
                found.append(pid)
                todo.extend(children.get(pid, []))
        return found

    def served_pids(self) -> list[int]:
        """The processes the connections run (shells, and what they started), not sshd itself."""
        sessions = set(self.session_pids())
        children = _children()
        found, todo = [], [c for pid in sessions for c in children.get(pid, []) if c not in sessions]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    def kill_sessions(self) -> list[int]:
        """SIGKILL every sshd process serving a connection (the listener goes on): each client
        sees its connection cut, as by a network failure or a host that drops it."""
        pids = self.session_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids


def _children() -> dict[int, list[int]]:
    """Every process's children, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def require_sshd() -> None:
    if SSHD.exists() and _which("ssh") and _which("ssh-keygen"):
        return
    reason = "OpenSSH server/client not installed (Debian: openssh-server openssh-client)"
    if os.environ.get("CI"):
        pytest.fail(reason + "; .ci/run must install it")
    pytest.skip(reason)


def _which(name: str) -> bool:
    return any((Path(p) / name).exists() for p in os.environ.get("PATH", "").split(os.pathsep))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "npuscope-test", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return (path.with_suffix(".pub")).read_text().strip()


def start_sshd(folder: Path, extra_config: str = "") -> SshServer:
    """An sshd serving `folder`'s throwaway keys; `extra_config` is appended to its config
    (e.g. ``SetEnv PATH=...`` for the sessions of one test module)."""
    require_sshd()
    folder.mkdir(parents=True, exist_ok=True)
    user = getpass.getuser()
    host_pub = _keygen(folder / "host_key")
    user_pub = _keygen(folder / "id_user")
    _keygen(folder / "id_other")
    (folder / "authorized_keys").write_text(user_pub + "\n")
    port = _free_port()
    (folder / "sshd_config").write_text(
        f"""Port {port}
ListenAddress 127.0.0.1
HostKey {folder}/host_key
PidFile {folder}/sshd.pid
AuthorizedKeysFile {folder}/authorized_keys
AllowUsers {user}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
X11Forwarding no
PrintMotd no
LogLevel VERBOSE
KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org
"""
        + extra_config
    )
    key_type, key = host_pub.split()[:2]
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {key_type} {key}\n")
    (folder / "known_hosts_empty").write_text("")
    common = f"""  HostName 127.0.0.1
  Port {port}
  User {user}
  IdentitiesOnly yes
  IdentityAgent none
  GlobalKnownHostsFile /dev/null
  ControlMaster no
"""
    (folder / "ssh_config").write_text(
        f"Host {HOST}\n{common}  IdentityFile {folder}/id_user\n  UserKnownHostsFile {folder}/known_hosts\n\n"
        f"Host {UNKNOWN}\n{common}  IdentityFile {folder}/id_user\n  UserKnownHostsFile {folder}/known_hosts_empty\n\n"
        f"Host {NOKEY}\n{common}  IdentityFile {folder}/id_other\n  UserKnownHostsFile {folder}/known_hosts\n"
    )
    if os.geteuid() == 0:
        # sshd started as root insists on its privilege separation folder (normally made by
        # the service unit); an empty root-owned folder, nothing else.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    log = open(folder / "sshd.log", "wb")
    proc = subprocess.Popen(
        [str(SSHD), "-D", "-e", "-f", str(folder / "sshd_config")], stdout=log, stderr=subprocess.STDOUT
    )
    log.close()
    server = SshServer(folder, port, folder / "ssh_config", proc)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}: {server.log()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"sshd did not listen on {port}: {server.log()[-2000:]}")
