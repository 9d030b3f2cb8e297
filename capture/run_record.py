"""A fetched capture's run record: how it was captured, so it can be captured again.

`npuscope capture` (and the capture screen) writes ``npuscope_run.json`` at the top of every
folder it fetches, beside the results: the host(s), working directory, training command,
device, profiled steps, JIT setting, extra environment and the ssh settings, and the run id of
each host. `npuscope experiment RUN` reads it to run the same job again with one change.

The record is written into the staging folder before the folder is claimed, so a fetched
folder either has it whole or does not exist; a folder fetched by an earlier version has none,
and reading it says so in one line.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .spec import CaptureSpec, JitCompile, usage_error

RUN_RECORD = "npuscope_run.json"
SCHEMA = "npuscope.run/1"
MAX_BYTES = 1 << 20  # a record is a few hundred bytes: anything larger is not one
_SPEC_FIELDS = (
    "host",
    "hosts",
    "command",
    "workdir",
    "device",
    "start_step",
    "steps",
    "jit_compile",
    "env",
    "msprof",
    "ssh_config",
    "accept_new_host_key",
    "remote_root",
)


@dataclass(frozen=True)
class RunRecord:
    spec: CaptureSpec  # `out` is the folder's parent, `keep_running` False
    runs: tuple[tuple[str, str], ...]  # (host, run id)
    captured_at: str  # ISO 8601, UTC

    @property
    def change(self) -> str:
        """The job's extra environment and JIT setting as one short text ("" when none)."""
        return change_text(self.spec)


def change_text(spec: CaptureSpec) -> str:
    parts = [f"{k}={v}" for k, v in spec.env]
    if spec.jit_compile is not None:
        parts.append(f"jit_compile={spec.jit_compile}")
    return " ".join(parts)


def write_run_record(folder: Path, spec: CaptureSpec, runs: tuple[tuple[str, str], ...]) -> None:
    data = {k: v for k, v in spec.to_dict().items() if k in _SPEC_FIELDS}
    record = {
        "schema": SCHEMA,
        "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": [list(r) for r in runs],
        "spec": data,
    }
    (folder / RUN_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def find_run_record(path: Path) -> Path | None:
    """The fetched folder `path` is in (or is): the nearest of it and its parents, up to three
    levels, that holds a run record; None when there is none."""
    start = path if path.is_dir() else path.parent
    for folder in (start, *list(start.parents)[:3]):
        if (folder / RUN_RECORD).is_file():
            return folder
    return None


def read_run_record(folder: Path) -> RunRecord:
    """The run record of a fetched capture; a usage error of one line when there is none or it
    is not one."""
    path = folder / RUN_RECORD
    if not folder.is_dir():
        raise usage_error(f"{folder}: not a folder (give the folder `npuscope capture` fetched)")
    if not path.is_file():
        raise usage_error(
            f"{folder}: no run record ({RUN_RECORD}): give a folder `npuscope capture` fetched "
            "(one fetched by an earlier version has none: capture it again)"
        )
    try:
        if path.stat().st_size > MAX_BYTES:
            raise ValueError("too large")
        data = json.loads(path.read_text(encoding="utf-8"))
        return _record(data, folder)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise usage_error(f"{path}: not a run record ({exc})") from None


def _record(data: dict[str, Any], folder: Path) -> RunRecord:
    if data.get("schema") != SCHEMA:
        raise ValueError(f"schema {data.get('schema')!r}, not {SCHEMA}")
    raw = data["spec"]
    fields = {k: raw[k] for k in _SPEC_FIELDS if k in raw}
    fields["command"] = tuple(str(x) for x in fields.get("command", ()))
    fields["hosts"] = tuple(str(x) for x in fields.get("hosts", ()))
    fields["env"] = tuple((str(k), str(v)) for k, v in fields.get("env", ()))
    spec = CaptureSpec(**fields)
    spec = replace(spec, out=str(folder.resolve().parent), keep_running=False).check()
    runs = tuple((str(h), str(r)) for h, r in data.get("runs", ()))
    return RunRecord(spec, runs, str(data.get("captured_at", "")))


def again(
    record: RunRecord,
    *,
    env: tuple[tuple[str, str], ...] = (),
    jit_compile: JitCompile | None = None,
    steps: int | None = None,
    out: str | None = None,
) -> CaptureSpec:
    """The capture of `record` once more with a change: `env` set over the job's (a key given
    again takes the new value), the JIT setting when given, `steps` profiled steps (default:
    the record's, at least 2 so the steps have a spread; 5 when it had one), into `out`
    (default: beside the recorded folder)."""
    base = record.spec
    merged = dict(base.env)
    merged.update(env)
    count = steps if steps is not None else (base.steps if base.steps >= 2 else DEFAULT_STEPS)
    return replace(
        base,
        env=tuple(merged.items()),
        jit_compile=jit_compile if jit_compile is not None else base.jit_compile,
        steps=count,
        out=out if out is not None else base.out,
        keep_running=False,
    ).check()


DEFAULT_STEPS = 5
"""Steps an experiment profiles when the recorded run had a single one."""
