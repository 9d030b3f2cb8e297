"""How commands reach a training host: the system OpenSSH client, or this machine for `local`.

Every remote command is a POSIX `sh` script passed as one `shlex.quote`d argument of `sh -c`, so
the user's login shell only ever sees one quoted word, and every piece of user text inside the
script is quoted too (see `runs.py`). That word follows POSIX quoting: the login shell must be
POSIX-like (bash, zsh, ksh, dash); fish and tcsh read quotes and newlines differently.

OpenSSH runs with BatchMode (it never waits for a password), strict host key checking (an
unknown or changed key is refused; `accept_new_host_key` allows OpenSSH's `accept-new`) and the
user's `~/.ssh/config` (or `-F FILE`), so ProxyJump, agents and ControlMaster work as in a shell.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from .spec import LOCAL_HOST, CaptureError

SSH_OPTIONS = (
    "-o",
    "BatchMode=yes",
    "-o",
    "ConnectTimeout=15",
    "-o",
    "ServerAliveInterval=15",
    "-o",
    "ServerAliveCountMax=4",
    "-T",
)
LINE_LIMIT = 1 << 20  # a log line longer than 1 MiB is cut, not fatal


@dataclass(frozen=True)
class Result:
    code: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    def stderr_lines(self) -> list[str]:
        return [ln.strip() for ln in self.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]


def ssh_problem(host: str, stderr_lines: list[str], ssh_config: str | None = None) -> str | None:
    """One line for a failure of ssh itself (exit 255), from what OpenSSH printed; a command it
    suggests runs ssh as the capture does (`-F FILE` with --ssh-config)."""
    text = "\n".join(stderr_lines)
    ssh = f"ssh -F {shlex.quote(ssh_config)}" if ssh_config else "ssh"
    low = text.lower()
    if "remote host identification has changed" in low:
        return (
            f"{host}: host key refused: it CHANGED since it was recorded in known_hosts; "
            "if the host was reinstalled, remove the old key with `ssh-keygen -R HOST`"
        )
    if "host key verification failed" in low or "no matching host key" in low:
        return (
            f"{host}: host key refused: the host is not in known_hosts; check its key and "
            f"connect once with `{ssh} {shlex.quote(host)}`, or pass --accept-new-host-key"
        )
    if "permission denied" in low or "too many authentication failures" in low:
        return (
            f"{host}: authentication failed (no password prompts here): set up a key or an "
            f"ssh agent so that `{ssh} -o BatchMode=yes {shlex.quote(host)} true` works"
        )
    if "could not resolve hostname" in low or "name or service not known" in low:
        return f"{host}: unknown host: not in DNS and no Host entry in the ssh config"
    # An established connection that went away: the host or the network dropped it, or the
    # host stopped answering (ServerAliveInterval x ServerAliveCountMax).
    for marker in ("closed by remote host", "not responding", "client_loop:", "read from remote host"):
        if marker in low:
            line = next(ln for ln in stderr_lines if marker in ln.lower())
            return f"{host}: the connection was lost ({line.rstrip('.')})"
    for marker, what in (
        ("connection refused", "connection refused"),
        ("timed out", "connection timed out"),
        ("no route to host", "no route to host"),
        ("network is unreachable", "network unreachable"),
    ):
        if marker in low:
            return f"{host}: cannot connect: {what}"
    last = stderr_lines[-1] if stderr_lines else "no message"
    return f"{host}: ssh failed: {last}"


class Transport:
    """Runs `sh` scripts on one host. Subclasses say how to start the process."""

    host: str
    cwd: str | None = None  # where the process starts (ssh starts in the remote login folder)
    own_group = False  # local scripts get a process group, so a stop reaches their children

    def argv(self, script: str) -> list[str]:
        raise NotImplementedError

    def _check(self, code: int, stderr: list[str]) -> None:
        """Raise for a failure of the transport itself (not of the script)."""

    async def _spawn(self, script: str, stdin: bool) -> asyncio.subprocess.Process:
        argv = self.argv(script)
        try:
            return await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=LINE_LIMIT,
                cwd=self.cwd,
                start_new_session=self.own_group,
            )
        except FileNotFoundError:
            raise CaptureError(f"{argv[0]}: not found; install the OpenSSH client") from None

    async def run(self, script: str, stdin: bytes | None = None, check: bool = True) -> Result:
        """Run `script`; raise CaptureError when the host cannot be reached."""
        proc = await self._spawn(script, stdin is not None)
        try:
            out, err = await proc.communicate(stdin)
        except asyncio.CancelledError:
            await _stop(proc, self.own_group)
            raise
        assert proc.returncode is not None  # communicate() waited for it
        result = Result(proc.returncode, out, err)
        if check:
            self._check(result.code, result.stderr_lines())
        return result

    @contextlib.asynccontextmanager
    async def _streaming(
        self, script: str, stdin: bytes | None = None
    ) -> AsyncIterator[tuple[asyncio.StreamReader, dict[str, Result]]]:
        """A running script whose stdout the caller reads; stderr is collected; always reaped.

        After the block, ``done["result"]`` holds the exit code and stderr."""
        proc = await self._spawn(script, stdin is not None)
        assert proc.stdout is not None and proc.stderr is not None  # _spawn pipes every stream
        err_task = asyncio.ensure_future(proc.stderr.read())
        if stdin is not None:
            assert proc.stdin is not None
            proc.stdin.write(stdin)
            proc.stdin.close()
        done: dict[str, Result] = {}
        try:
            yield proc.stdout, done
            code = await proc.wait()
            done["result"] = Result(code, b"", await err_task)
        finally:
            if proc.returncode is None:
                await _stop(proc, self.own_group)
            if not err_task.done():
                err_task.cancel()

    async def lines(self, script: str) -> AsyncIterator[str]:
        """Yield the script's stdout lines as they come; the transport is checked at the end."""
        async with self._streaming(script) as (stdout, done):
            while True:
                try:
                    raw = await stdout.readline()
                except ValueError:  # a line over LINE_LIMIT: the reader dropped what it held
                    raw = b"[npuscope: a log line over 1 MiB was cut here]\n"
                if not raw:
                    break
                yield raw.decode("utf-8", "replace").rstrip("\r\n")
        result = done["result"]
        self._check(result.code, result.stderr_lines())

    async def download(self, script: str, stdin: bytes, dest: Path, on_bytes: Callable[[int], None]) -> None:
        """Run `script` with `stdin`, writing its stdout to the file `dest` as it comes."""
        total = 0
        async with self._streaming(script, stdin) as (stdout, done):
            with open(dest, "wb") as fh:
                while chunk := await stdout.read(1 << 20):
                    fh.write(chunk)
                    total += len(chunk)
                    on_bytes(total)
        code, lines = done["result"].code, done["result"].stderr_lines()
        self._check(code, lines)
        if code != 0:
            raise CaptureError(
                f"{self.host}: the remote command failed: {lines[-1] if lines else f'exit {code}'}", tuple(lines[-5:])
            )


async def _stop(proc: asyncio.subprocess.Process, group: bool) -> None:
    """Kill a process we no longer wait for (and its group for local scripts), then reap it."""
    try:
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except ProcessLookupError:
        pass
    try:
        await asyncio.shield(proc.wait())
    except asyncio.CancelledError:
        pass


class SshTransport(Transport):
    def __init__(self, host: str, ssh_config: str | None = None, accept_new_host_key: bool = False, ssh: str = "ssh"):
        self.host = host
        self.ssh_config = ssh_config
        self.accept_new_host_key = accept_new_host_key
        self.ssh = ssh

    def base_argv(self) -> list[str]:
        argv = [self.ssh]
        if self.ssh_config:
            argv += ["-F", os.path.expanduser(self.ssh_config)]
        check = "accept-new" if self.accept_new_host_key else "yes"
        return [*argv, *SSH_OPTIONS, "-o", f"StrictHostKeyChecking={check}"]

    def argv(self, script: str) -> list[str]:
        # ssh joins its arguments with spaces and hands them to the login shell: one quoted word.
        return [*self.base_argv(), self.host, "--", "sh -c " + shlex.quote(script)]

    def _check(self, code: int, stderr: list[str]) -> None:
        if code == 255:
            raise CaptureError(ssh_problem(self.host, stderr, self.ssh_config) or f"{self.host}: ssh failed")


class LocalTransport(Transport):
    """`local`: the same scripts on this machine, without SSH."""

    host = LOCAL_HOST
    own_group = True

    def __init__(self) -> None:
        self.cwd = os.path.expanduser("~")  # like an ssh login

    def argv(self, script: str) -> list[str]:
        return ["sh", "-c", script]


def transport_for(host: str, ssh_config: str | None = None, accept_new_host_key: bool = False) -> Transport:
    if host == LOCAL_HOST:
        return LocalTransport()
    return SshTransport(host, ssh_config=ssh_config, accept_new_host_key=accept_new_host_key)
