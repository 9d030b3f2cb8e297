"""What a capture asks for: one `CaptureSpec`, shared by `npuscope capture` and the capture screen.

`CaptureSpec.check()` turns every user mistake into a `CaptureError` with one line; the rest of
the capture layer can then trust the spec.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

from npuscope.text import has_control, printable, whole_number

DEFAULT_MSPROF = "/usr/local/Ascend/ascend-toolkit/latest/tools/profiler/bin/msprof"
DEFAULT_REMOTE_ROOT = "~/.cache/npuscope/capture"  # a subfolder of its own, apart from the frame cache files
DEFAULT_OUT = "captures"
Device = Literal["npu", "cpu", "gpu"]
DEVICES: tuple[Device, ...] = get_args(Device)
JitCompile = Literal["on", "off"]
LOCAL_HOST = "local"
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST = re.compile(r"^[A-Za-z0-9_.@:%\[\]-]+$")


class CaptureError(Exception):
    """A capture could not be done: `str()` is one line; `log_tail` holds the last log lines.

    Both may quote the host (its log, its error text): they are made printable here, so no
    escape sequence from a host reaches a terminal through an error."""

    def __init__(self, message: str, log_tail: tuple[str, ...] = (), code: int = 1):
        lines = printable(message).splitlines() if message else []
        super().__init__(lines[0] if lines else "capture failed")
        self.log_tail = tuple(printable(line) for line in log_tail)
        self.code = code  # 1: the job or capture failed; 2: bad arguments


def usage_error(message: str) -> CaptureError:
    return CaptureError(message, code=2)


@dataclass(frozen=True)
class CaptureSpec:
    host: str
    command: tuple[str, ...]  # PYTHON SCRIPT [ARGS...]: PYTHON runs the bootstrap
    workdir: str = ""  # remote working directory; "" = the login directory
    device: Device = "npu"
    start_step: int = 100
    steps: int = 1
    jit_compile: JitCompile | None = None  # None: leave the job's setting
    env: tuple[tuple[str, str], ...] = ()
    msprof: str = ""  # "" = DEFAULT_MSPROF if present, else `msprof` on PATH
    keep_running: bool = False
    out: str = DEFAULT_OUT  # local folder that receives captures/<host>-<time>/
    ssh_config: str | None = None
    accept_new_host_key: bool = False
    remote_root: str = DEFAULT_REMOTE_ROOT
    hosts: tuple[str, ...] = field(default=())  # several hosts: one run on each

    @property
    def is_local(self) -> bool:
        return self.host == LOCAL_HOST

    def all_hosts(self) -> tuple[str, ...]:
        return self.hosts or (self.host,)

    def for_host(self, host: str) -> CaptureSpec:
        return replace(self, host=host, hosts=())

    def check(self, command: bool = True) -> CaptureSpec:
        """Raise a usage error for the first mistake; `command=False` for listing, following or
        cancelling runs, which need no training command."""
        for host in self.all_hosts():
            if not host or not _HOST.match(host) or host.startswith("-"):
                raise usage_error(f"not a host name: {host!r}")
        if not self.command and command:
            raise usage_error("no training command: give `-- PYTHON SCRIPT [ARGS...]`")
        if len(self.command) == 1:
            raise usage_error(
                f"the command must start with the python that runs the script: "
                f"`{self.command[0]} train.py ...`, not `{self.command[0]}` alone"
            )
        if self.device not in DEVICES:
            raise usage_error(f"unknown device {self.device!r}: choose one of {', '.join(DEVICES)}")
        if self.start_step < 0:
            raise usage_error("the start step must be 0 or more")
        if self.steps < 1:
            raise usage_error("the number of steps must be at least 1")
        if self.jit_compile not in (None, "on", "off"):
            raise usage_error("JIT compile must be on or off")
        for what, value in (("working directory", self.workdir), ("remote cache folder", self.remote_root)):
            if has_control(value):  # a newline would split the host's answers into other paths
                raise usage_error(f"the {what} {value!r} holds a control character (newline, tab...)")
        for key, _value in self.env:
            if not _ENV_KEY.match(key):
                raise usage_error(f"not an environment variable name: {key!r}")
        if self.ssh_config is not None and not Path(self.ssh_config).expanduser().is_file():
            raise usage_error(f"{self.ssh_config}: no such ssh config file")
        out = Path(self.out).expanduser()
        if out.exists() and not out.is_dir():
            raise usage_error(f"{self.out}: not a folder")
        return self

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["command"] = list(self.command)
        data["env"] = [list(kv) for kv in self.env]
        data["hosts"] = list(self.hosts)
        return data


def requested(
    hosts: Sequence[str], command: Sequence[str], *, needs_command: bool = True, **fields: Any
) -> CaptureSpec:
    """The capture a user asked for (`npuscope capture` or the capture screen), checked.

    One run on each host of `hosts` (the first is `host`); `fields` are the other fields of
    `CaptureSpec`. `needs_command=False` for listing, following or cancelling runs."""
    if tuple(hosts) == ("local",) and not fields.get("workdir"):
        # On this machine the job runs where npuscope was started, as any local command does.
        fields = {**fields, "workdir": os.getcwd()}
    spec = CaptureSpec(
        host=hosts[0] if hosts else "",
        hosts=tuple(hosts) if len(hosts) > 1 else (),
        command=tuple(command),
        **fields,
    )
    return spec.check(command=needs_command)


def whole(what: str, text: object) -> int:
    """A whole number typed into the capture screen; a usage error naming `what` otherwise."""
    try:
        return whole_number(str(text))
    except ValueError as exc:
        raise usage_error(f"{what}: {exc}") from None


# The capture screen's fields as the form shows them, before the user changes any.
FORM_DEFAULTS: dict[str, object] = {
    "workdir": "",
    "command": "",
    "device": "npu",
    "start_step": "100",
    "steps": "1",
    "jit_compile": "leave",
    "env": "",
    "msprof": "",
    "stop": True,
    "out": DEFAULT_OUT,
    "ssh_config": "",  # "" : the explorer's --ssh-config, else ~/.ssh/config
    "remote_cache": "",  # "" : the explorer's --remote-cache, else DEFAULT_REMOTE_ROOT
}


def spec_from_form(
    host: str, values: Mapping[str, object], *, ssh_config: str | None = None, remote_root: str = DEFAULT_REMOTE_ROOT
) -> CaptureSpec:
    """The capture screen's form (its fields as text, FORM_DEFAULTS for those not given) as a
    checked `CaptureSpec`; any mistake is a `CaptureError` of one line."""
    values = {**FORM_DEFAULTS, **values}
    command = _split("training command", str(values.get("command", "")))
    if not command:
        raise usage_error("the training command is empty: give PYTHON SCRIPT [ARGS...]")
    try:
        env = parse_env(_split("extra environment", str(values.get("env", ""))))
    except CaptureError as exc:
        raise usage_error(f"extra environment: {exc}") from None
    jit = values.get("jit_compile", "leave")
    return requested(
        parse_hosts(host) or (host.strip(),),  # `h1,h2`: one run on each host, fetched into one capture
        command,
        workdir=str(values.get("workdir", "")).strip(),
        device=values.get("device", "npu"),
        start_step=whole("start step", values.get("start_step", "")),
        steps=whole("steps", values.get("steps", "")),
        jit_compile=None if jit in ("leave", None) else jit,
        env=env,
        msprof=str(values.get("msprof", "")).strip(),
        keep_running=not values.get("stop", True),
        out=str(values.get("out", "")).strip() or DEFAULT_OUT,
        ssh_config=str(values.get("ssh_config") or "").strip() or ssh_config,
        remote_root=str(values.get("remote_cache") or "").strip() or remote_root,
    )


def _split(what: str, text: str) -> list[str]:
    try:
        return shlex.split(str(text))
    except ValueError as exc:
        raise usage_error(f"{what}: {exc}") from None


def parse_env(items: list[str] | tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """`KEY=VALUE` items (from --env or the screen) as pairs; a bad item is a usage error."""
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not _ENV_KEY.match(key):
            raise usage_error(f"environment items are KEY=VALUE, got {item!r}")
        pairs.append((key, value))
    return tuple(pairs)


def parse_env_text(text: str) -> tuple[tuple[str, str], ...]:
    """`KEY=VALUE KEY2=VALUE2` as a form field holds them (shell quoting allowed)."""
    return parse_env(_split("environment", text))


def parse_hosts(text: str) -> tuple[str, ...]:
    """`h1,h2` or a hostfile's lines (comments with #, `slots=` and the like ignored)."""
    hosts = []
    for line in text.replace(",", "\n").splitlines():
        word = line.split("#", 1)[0].split()
        if word and word[0] not in hosts:
            hosts.append(word[0])
    return tuple(hosts)
