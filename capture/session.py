"""One capture from start to fetched folder: connect, upload, launch, follow, export, fetch.

Shared by `npuscope capture` and the capture screen. Everything is reported through one
callback as `Event`s (phases, progress, log lines); failures raise `CaptureError` with one line
and the last lines of the job's log. The remote job never depends on this process: when the
client goes away (Ctrl-C, a closed explorer, a lost connection) it goes on, and `attach` picks
it up again by its run id.

What the host sends back is untrusted: a malformed progress line or run.json is ignored or
reported in one line, never raised as anything but `CaptureError`, and every event's text is
made printable (`text.printable`) before it reaches the callback.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from npuscope.text import has_control

from . import bootstrap_source
from .events import PHASES, Emit, Event, LogLine, Phase, PhaseStarted, Progressed, RunStarted, printable_event
from .fetch import (
    claim_folder,
    discard,
    host_folder,
    host_folders,
    local_write_error,
    parse_listing,
    path_bytes,
    staging_dir,
    unpack,
)
from .run_record import write_run_record
from .runs import (
    EXIT_MESSAGES,
    FULL_DISK_KIB,
    LOG_SNAPSHOT,
    MARK_DISK,
    MARK_EXIT,
    MARK_NO_RUN,
    Probe,
    RunInfo,
    bootstrap_name,
    cancel_script,
    clean_script,
    follow_script,
    launch_script,
    list_script,
    listing_script,
    mark_fetched_script,
    parse_cleaned,
    parse_exit,
    parse_json_object,
    parse_probe,
    parse_record,
    parse_runs,
    probe_script,
    record_script,
    run_script,
    tar_script,
    upload_script,
    whole,
)
from .spec import CaptureError, CaptureSpec
from .transport import Transport, transport_for
from .upload import files_tar

PREFIX = "NPUSCOPE "
"""What starts a progress line of the bootstrap (`bootstrap.PREFIX`, which cannot import this)."""
TAIL = 12
T = TypeVar("T")


@dataclass(frozen=True)
class Outcome:
    folder: Path
    runs: tuple[tuple[str, str], ...]  # (host, run id)


def window_text(start: int, steps: int) -> str:
    """The steps a capture profiles, as a person counts them: `--steps 1` from 100 is step 100
    (the profiler starts at 100 and stops at 101), 5 from 100 are steps 100-104."""
    return f"profiling step {start}" if steps == 1 else f"profiling steps {start}-{start + steps - 1}"


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def folder_name(hosts: tuple[str, ...], run_id: str) -> str:
    stamp = run_id.rsplit("-", 1)[0]
    first = host_folder(hosts[0].split("@")[-1])
    return f"{first}-{stamp}" if len(hosts) == 1 else f"{first}+{len(hosts) - 1}-{stamp}"


class HostRun:
    """One run on one host: where it lives and how to reach it."""

    def __init__(self, spec: CaptureSpec, run_id: str, emit: Emit):
        self.spec = spec
        self.host = spec.host
        self.run_id = run_id
        self.emit: Emit = lambda event: emit(printable_event(event))  # host text
        self.transport: Transport = transport_for(spec.host, spec.ssh_config, spec.accept_new_host_key)
        self.root = ""
        self.run_dir = ""
        self.start = spec.start_step
        self.fetch_bytes = 0  # what the fetch of the results writes locally (archive, then files)

    def phase(self, name: Phase, text: str = "") -> None:
        self.emit(PhaseStarted(self.host, name, text))

    def reattach_hint(self) -> str:
        return f"the job goes on: reattach with `npuscope capture --host {self.host} --attach {self.run_id}`"

    def refetch_hint(self) -> str:
        return (
            f"nothing was kept locally and the run is kept on the host: fetch it again with "
            f"`npuscope capture --host {self.host} --attach {self.run_id}`"
        )

    # --- start ---------------------------------------------------------------------------------
    async def resolve(self) -> Probe:
        self.phase("connect", f"connecting to {self.host}")
        probe = parse_probe((await self.transport.run(probe_script(self.spec))).text)
        if "root-name" in probe.problems or has_control(probe.root):
            raise CaptureError(
                f"{self.host}: the folder {self.spec.remote_root} resolves to a path with a "
                "control character (newline, tab...); give another --remote-cache",
                code=2,
            )
        if "root" in probe.problems or not probe.root:
            raise CaptureError(f"{self.host}: cannot create the folder {self.spec.remote_root}")
        self.root = probe.root
        self.run_dir = f"{self.root}/runs/{self.run_id}"
        return probe

    async def launch(self) -> None:
        probe = await self.resolve()
        if probe.missing:
            raise CaptureError(f"{self.host}: missing on the host: {', '.join(probe.missing)}")
        if "workdir" in probe.problems:
            raise CaptureError(f"{self.host}: no working directory {self.spec.workdir!r}")
        if "workdir-name" in probe.problems or has_control(probe.workdir):
            where = repr(self.spec.workdir) if self.spec.workdir else "the login folder"
            raise CaptureError(
                f"{self.host}: the working directory ({where}) resolves to a path with a "
                "control character (newline, tab...); give another --workdir",
                code=2,
            )
        if not probe.workdir:
            raise CaptureError(f"{self.host}: the host did not say where the working directory is")
        if "python" in probe.problems:
            raise CaptureError(
                f"{self.host}: command not found: {self.spec.command[0]} "
                f"(in {probe.workdir}); give the full path of the python to use"
            )
        self.phase("upload", "uploading the bootstrap")
        source = bootstrap_source()
        boot = bootstrap_name(source)
        record = {"id": self.run_id, "host": self.host, "created": time.time(), "spec": self.spec.to_dict()}
        files = {
            boot: source,
            f"runs/{self.run_id}/run.sh": run_script(self.spec, self.run_dir, f"{self.root}/{boot}", probe.workdir),
            f"runs/{self.run_id}/run.json": json.dumps(record) + "\n",
        }
        res = await self.transport.run(upload_script(self.root, self.run_id), stdin=files_tar(files))
        if res.code != 0:  # the half-written run folder is gone (upload_script)
            lines = [ln for ln in res.stderr_lines() if "Exiting with failure status" not in ln]
            full = next((ln for ln in lines if "No space left" in ln), None)
            reason = f"the host's disk is full in {self.root} ({full})" if full else _last(lines)
            raise CaptureError(f"{self.host}: upload failed: {reason}")
        self.phase("launch", f"starting run {self.run_id}")
        res = await self.transport.run(launch_script(self.run_dir))
        pid = next(
            (
                int(ln.split()[1])
                for ln in res.text.splitlines()
                if ln.startswith("NPUSCOPE_PID ") and len(ln.split()) == 2 and _PID.match(ln.split()[1])
            ),
            None,
        )
        if "NPUSCOPE_MISSING setsid" in res.text:
            raise CaptureError(f"{self.host}: missing on the host: setsid")
        if pid is None:
            free = _free_kib(res.text, MARK_DISK)
            why = (
                f"the host's disk is full ({free} KiB free in {self.root})"
                if free is not None and free < FULL_DISK_KIB
                else f"no pid file in {self.run_dir}"
            )
            raise CaptureError(f"{self.host}: the job did not start ({why})")
        self.emit(RunStarted(self.host, self.run_id, pid))

    # --- follow --------------------------------------------------------------------------------
    async def follow(self) -> None:
        """Stream the job's log until it ends; raise with the reason when it failed."""
        self.phase("warm-up", f"waiting for step {self.start}")
        tail: deque[str] = deque(maxlen=TAIL)
        errors: list[str] = []
        says: list[str] = []
        code: int | None | str = "missing"
        token = secrets.token_hex(8)  # the job cannot print the markers: it never sees the token
        no_run, mark_exit, mark_disk = (f"{m}-{token}" for m in (MARK_NO_RUN, MARK_EXIT, MARK_DISK))
        free: int | None = None
        try:
            async for line in self.transport.lines(follow_script(self.run_dir, token)):
                if line == no_run:
                    code = "no run"
                    break
                if line.startswith(mark_exit + " ") or line == mark_exit:
                    code = parse_exit(line[len(mark_exit) :])
                    continue
                if line.startswith(mark_disk + " ") or line == mark_disk:
                    free = _free_kib(line, mark_disk)
                    continue
                if line.startswith(PREFIX):
                    self.on_progress(line[len(PREFIX) :], errors)
                    continue
                if not line:
                    continue
                if line.startswith("npuscope: "):
                    says.append(line[len("npuscope: ") :])
                tail.append(line)
                self.emit(LogLine(self.host, line))
        except CaptureError as exc:
            raise CaptureError(f"{exc}; {self.reattach_hint()}", exc.log_tail) from None
        if code == "no run":
            raise CaptureError(f"{self.host}: no run {self.run_id} in {self.root}/runs")
        if code == "missing":
            raise CaptureError(f"{self.host}: lost the log stream; {self.reattach_hint()}", tuple(tail))
        if code is None and free is not None and free < FULL_DISK_KIB:
            raise CaptureError(
                f"{self.host}: the job ended without an exit code and the host's disk is full "
                f"({free} KiB free in {self.root}): free some space there "
                f"(`npuscope capture --host {self.host} --clean` deletes fetched and failed runs)",
                tuple(tail),
            )
        if code != 0:
            assert not isinstance(code, str)  # "no run" and "missing" were raised above
            raise CaptureError(self.failure(code, errors, says, list(tail)), tuple(tail))

    def on_progress(self, payload: str, errors: list[str]) -> None:
        """One `NPUSCOPE {json}` line from the job's log. The log is the host's: anything that is
        not an event as the bootstrap writes it (a JSON object, whole step numbers, text
        messages) is ignored."""
        event = parse_json_object(payload)
        if event is None:
            return
        kind = event.get("event")
        if kind == "step":
            step = whole(event.get("step"))
            if step is None:
                return
            if step < self.start or self.start == 0:
                self.emit(Progressed(self.host, "warm-up", done=min(step, self.start), total=max(self.start, 1)))
            else:
                self.emit(Progressed(self.host, "capture", done=step - self.start, total=self.spec.steps))
        elif kind == "window_moved":
            start = whole(event.get("start"))
            if start is not None:
                self.start = start
            self.phase("warm-up", _message(event.get("reason")) or "window moved")
        elif kind == "capture_start":
            self.phase("capture", window_text(self.start, self.spec.steps))
        elif kind == "capture_stop":
            self.phase("export", "writing the trace")
        elif kind == "phase" and event.get("phase") == "export":
            self.phase("export", "msprof --export=on")
        elif kind == "error":
            errors.append(_message(event.get("message")))

    def failure(self, code: int | None, errors: list[str], says: list[str], tail: list[str]) -> str:
        what = f"{self.host}: "
        if code is None:
            return what + "the job ended without an exit code (killed, or the host restarted)"
        if code == 1:
            return what + "training crashed: " + (errors[-1] if errors else _last(tail))
        if code in (3, 4) and errors:
            return what + errors[-1]
        if code == 127:
            return what + "command not found: " + (_last(tail) or " ".join(self.spec.command[:1]))
        if code == 143 or code == 137:
            return what + EXIT_MESSAGES[code] + " (cancelled, or killed on the host)"
        if says:
            return what + says[-1]
        return what + EXIT_MESSAGES.get(code, f"the job failed with exit code {code}")

    # --- fetch ---------------------------------------------------------------------------------
    async def fetch(self, dest: Path) -> None:
        self.phase("fetch", "listing the exported results")
        res = await self.transport.run(listing_script(self.run_dir))
        files = parse_listing(res.stdout)
        wanted = [p for p, _ in files if p != LOG_SNAPSHOT]
        if not wanted:
            raise CaptureError(f"{self.host}: the run left no exported results in {self.run_dir}/out")
        total = sum(size for _, size in files)
        self.fetch_bytes = 2 * total  # the archive, then its unpacked files beside it
        dest.mkdir(parents=True, exist_ok=True)
        tar_path = dest / ".fetch.tar"
        names = b"".join(path_bytes(p) + b"\0" for p, _ in files)

        def progress(n: int) -> None:
            self.emit(Progressed(self.host, "fetch", done=min(n, total), total=max(total, 1)))

        self.phase("fetch", f"fetching {len(files)} files ({total / 1e6:.1f} MB)")
        try:
            try:
                await self.transport.download(tar_script(self.run_dir), names, tar_path, progress)
            except CaptureError as exc:  # the connection, or the host's tar: one line and the way on
                what = str(exc).removeprefix(f"{self.host}: ")
                raise CaptureError(
                    f"{self.host}: the fetch failed: {what}; {self.refetch_hint()}", exc.log_tail
                ) from None
            await _in_thread(unpack, tar_path, dest)
        finally:
            tar_path.unlink(missing_ok=True)

    async def mark_fetched(self, folder: Path) -> None:
        await self.transport.run(mark_fetched_script(self.run_dir, str(folder)), check=False)


async def _in_thread(fn: Callable[..., T], *args: object) -> T:
    """Run `fn(*args, stop=event)` in a thread; when cancelled, stop it and wait for it, so that
    nothing is written after the caller has cleaned up."""
    stop = threading.Event()
    task = asyncio.ensure_future(asyncio.to_thread(fn, *args, stop=stop))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)
        raise


def _last(lines: list[str]) -> str:
    return lines[-1] if lines else ""


_PID = re.compile(r"^[1-9][0-9]{0,9}$")
MAX_MESSAGE = 2000  # characters kept of a message from the job's log


def _message(value: object) -> str:
    return value[:MAX_MESSAGE] if isinstance(value, str) else ""


def _free_kib(text: str, mark: str) -> int | None:
    """The KiB after `mark` on its line of `text` (`df` said it), or None."""
    for line in text.splitlines():
        if line.startswith(mark):
            value = line[len(mark) :].strip()
            return int(value) if re.fullmatch(r"[0-9]{1,18}", value) else None
    return None


async def _collect(runs: list[HostRun], out: Path, name: str, emit: Emit, spec: CaptureSpec) -> Outcome:
    staging = staging_dir(out, name)
    folders = host_folders(r.host for r in runs)
    try:
        for run in runs:  # one connection at a time: fetches share the link
            await run.fetch(staging if len(runs) == 1 else staging / folders[run.host])
        # how it was captured, for `npuscope experiment`: inside the staging folder, so the
        # fetched folder has it whole or does not exist
        write_run_record(staging, spec, tuple((r.host, r.run_id) for r in runs))
        folder = claim_folder(staging, out, name)
    except OSError as exc:  # the local disk: full, or the folder went away
        discard(staging)
        hint = (
            runs[0].refetch_hint()
            if len(runs) == 1
            else "nothing was kept locally and the runs are kept on their hosts: fetch each again with --attach"
        )
        needed = sum(r.fetch_bytes for r in runs) if all(r.fetch_bytes for r in runs) else 0
        raise local_write_error(out, exc, hint, needed) from None
    except BaseException:  # our own temporary folder goes, whatever ended the fetch
        discard(staging)
        raise
    for run in runs:
        await run.mark_fetched(folder)
    emit(PhaseStarted(runs[0].host, "open", str(folder)))
    return Outcome(folder, tuple((r.host, r.run_id) for r in runs))


async def capture(spec: CaptureSpec, emit: Emit) -> Outcome:
    """Run the capture described by `spec` on every host; fetch into one new local folder."""
    spec = spec.check()
    _writable(Path(spec.out).expanduser())  # before the job runs, not after
    runs = [HostRun(spec.for_host(h), new_run_id(), emit) for h in spec.all_hosts()]
    launched = await asyncio.gather(*(r.launch() for r in runs), return_exceptions=True)
    failed = [e for e in launched if isinstance(e, BaseException)]
    if failed:
        # A job alone on some hosts would wait for the others (distributed training): stop it.
        started = [r for r, e in zip(runs, launched) if not isinstance(e, BaseException) and r.run_dir]
        for run in started:
            await run.transport.run(cancel_script(run.run_dir), check=False)
        first = failed[0]
        if not isinstance(first, CaptureError) or not started:
            raise first
        note = f" (the run started on {', '.join(r.host for r in started)} was cancelled)"
        raise CaptureError(str(first) + note, first.log_tail, first.code)
    await _all(r.follow() for r in runs)
    out, name = Path(spec.out).expanduser(), folder_name(spec.all_hosts(), runs[0].run_id)
    return await _collect(runs, out, name, emit, spec)


def _writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not os.access(out, os.W_OK | os.X_OK):
            raise PermissionError(13, "permission denied")
    except OSError as exc:
        raise CaptureError(f"{out}: cannot write captures there: {exc.strerror or exc}", code=2) from None


async def _all(coros: Iterable[Awaitable[T]]) -> list[T]:
    """Await every coroutine; on the first failure stop following the others and raise it."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


RUN_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{4}$")


def check_run_id(run_id: str) -> str:
    if not RUN_ID.match(run_id):
        raise CaptureError(f"not a run id: {run_id!r} (like 20261129-143000-ab12; --list shows them)", code=2)
    return run_id


async def attach(spec: CaptureSpec, run_id: str, emit: Emit) -> Outcome:
    """Follow a run started earlier (on spec.host) to its end and fetch it."""
    check_run_id(run_id)
    _writable(Path(spec.out).expanduser())
    run = HostRun(spec.for_host(spec.host), run_id, emit)
    await run.resolve()
    record = parse_record(await _record(run))
    if record.problem and record.problem != "no run.json":
        run.phase("connect", f"run {run_id}: bad run.json ({record.problem}); following it without")
    elif not record.problem:
        run.start = record.fields.get("start_step", run.start)
        run.spec = replace(run.spec, command=record.command, **record.fields)
    await run.follow()
    return await _collect([run], Path(spec.out).expanduser(), folder_name((spec.host,), run_id), emit, run.spec)


async def _record(run: HostRun) -> str:
    """The first line of the run's run.json ("" when there is none)."""
    lines = (await run.transport.run(record_script(run.run_dir))).text.splitlines()
    return lines[0] if lines else ""


async def list_runs(spec: CaptureSpec) -> list[RunInfo]:
    transport = transport_for(spec.host, spec.ssh_config, spec.accept_new_host_key)
    return parse_runs((await transport.run(list_script(spec.remote_root))).text)


async def clean(spec: CaptureSpec) -> list[tuple[str, int]]:
    """Delete the host's runs that ended and were fetched, or failed: (run id, KiB) each."""
    transport = transport_for(spec.host, spec.ssh_config, spec.accept_new_host_key)
    return parse_cleaned((await transport.run(clean_script(spec.remote_root))).text)


async def cancel(spec: CaptureSpec, run_id: str) -> str:
    """Stop a run's whole process group on its host; one line saying what happened."""
    check_run_id(run_id)
    run = HostRun(spec.for_host(spec.host), run_id, lambda e: None)
    await run.resolve()
    text = (await run.transport.run(cancel_script(run.run_dir))).text
    if MARK_NO_RUN in text:
        raise CaptureError(f"{spec.host}: no run {run_id} in {run.root}/runs")
    bad = next((ln for ln in text.splitlines() if ln.startswith("NPUSCOPE_BAD_PID")), None)
    if bad is not None:
        raise CaptureError(
            f"{spec.host}: run {run_id}: its pid file holds {bad[len('NPUSCOPE_BAD_PID ') :]!r}, "
            "not a process group id; nothing was signalled"
        )
    if "NPUSCOPE_CANCELLED" in text:
        return f"{spec.host}: run {run_id} cancelled (its process group was stopped)"
    return f"{spec.host}: run {run_id} is not running (nothing was signalled)"


__all__ = [
    "PHASES",
    "Event",
    "LogLine",
    "Outcome",
    "PhaseStarted",
    "Progressed",
    "RunStarted",
    "attach",
    "cancel",
    "capture",
    "clean",
    "list_runs",
]
