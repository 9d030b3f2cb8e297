"""Ranks analysed where they lie: a Dask scheduler, workers on the nodes that hold the files.

`NodeEngine(nodes_file)` (a context manager) reads each node's facts over SSH (the capture's
transport: the user's ssh config, BatchMode, strict host keys), starts a Dask scheduler in
this process on the address the nodes reach this machine by, and one `dask worker` per node
over SSH, its workers marked with the node's resource (`npuscope-node-NAME`). `--scheduler`
attaches to a running scheduler instead: its workers must carry those resources. Every task
of a rank runs on a worker of the node that holds its folder and writes that node's cache;
only RankEntries (a few rows each), one rank's frames or one rank's report come back.

Faults: a node that cannot be reached, has no npuscope or another version of it, or whose
workers do not start gives each of its folders one entry with the reason (its ranks cannot
be listed); a worker that dies is restarted by its nanny and its ranks retried once
(`allowed-failures` 1), then marked; a node that goes away marks the ranks it still had.
Leaving the block (done, an error, Ctrl+C) stops what was started: the client, the scheduler
and, on every node, the worker (the SSH session's stdin closes, the remote script stops the
worker; the session is killed after STOP_TIMEOUT).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import shlex
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from npuscope.parsers.cluster import RankEntry, error_entry
from npuscope.parsers.errors import ProfileError
from npuscope.parsers.node_tasks import code_digest, find_ranks, open_here, parse_here
from npuscope.parsers.nodes_file import DEFAULT_MAX_WORKERS, Node, NodesFile
from npuscope.parsers.profile import Profile
from npuscope.parsers.progress import Cancelled
from npuscope.parsers.read_options import ReadOptions

from .transport import ssh_problem, transport_for

Progress = Callable[[int, int, str], None]
FACTS_TIMEOUT = 60.0
START_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0
RESOURCE_AMOUNT = 1_000_000  # a node's resource never limits how many tasks its workers run

_FACTS_CODE = """import json, sys
try:
    from npuscope.parsers.node_tasks import node_facts
except Exception as exc:
    print(json.dumps({"error": f"npuscope cannot be imported by {sys.executable}: {exc}"}))
else:
    print(json.dumps(node_facts(sys.argv[1:])))
"""


_SUPERVISOR = """import os, signal, subprocess, sys, threading
worker = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
def stop(*_, code=0):
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(worker.pid, sig)
        except ProcessLookupError:
            break
        try:
            worker.wait(wait)
        except subprocess.TimeoutExpired:
            pass
    os._exit(code)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGHUP, stop)
signal.signal(signal.SIGINT, stop)
threading.Thread(target=lambda: (sys.stdin.buffer.read(), stop()), daemon=True).start()
worker.wait()
sys.stderr.write(f"the Dask worker exited (code {worker.returncode})\\n")
sys.stderr.flush()
stop(code=1)
"""
"""Runs on a node: starts the Dask worker in a process group of its own, waits for the end of
its stdin (the head closed the session, or went away) or of the worker itself (the session then
ends too, and the head marks the node's ranks left), then stops the group: TERM, then KILL
what is left (a nanny and its workers)."""


def _local_version() -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version("npuscope")
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass
class NodeState:
    node: Node
    problem: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    head_address: str | None = None  # this machine as the node sees it (SSH_CONNECTION)
    node_address: str | None = None  # the node as this machine reaches it
    proc: subprocess.Popen[bytes] | None = None
    stderr: list[str] = field(default_factory=list)


def _py(node: Node) -> str:
    return " ".join(shlex.quote(w) for w in shlex.split(node.python))


class NodeEngine:
    """Dask over the nodes of a nodes file; see the module's text."""

    def __init__(
        self,
        nodes: NodesFile,
        *,
        scheduler: str | None = None,
        accept_new_host_key: bool = False,
        say: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        use_cache: bool = True,
    ) -> None:
        self.nodes = nodes
        # --scheduler, else $NPUSCOPE_SCHEDULER, else the nodes file's `scheduler`.
        self.scheduler = scheduler or os.environ.get("NPUSCOPE_SCHEDULER") or nodes.scheduler
        self.accept_new_host_key = accept_new_host_key
        self.say = say or (lambda _line: None)
        self.cancel = cancel  # checked while the workers start
        self.use_cache = use_cache  # False: the nodes parse from scratch and write no cache entry
        self.states = {n.name: NodeState(n) for n in nodes.nodes}
        self.client: Any = None
        self._cluster: Any = None
        self._stopping = False
        self.node_of: dict[str, str] = {}  # rank folder -> node name

    # ----------------------------------------------------------------- start and stop

    def __enter__(self) -> NodeEngine:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        try:
            import dask
            import distributed
        except ImportError:
            raise ProfileError(
                "a nodes file needs Dask on this machine and on every node: pip install 'npuscope[cluster]'"
            ) from None
        # Dask's own log lines (a worker lost, a connection closed while stopping, with their
        # tracebacks) are not the user's: what matters reaches them as the ranks' marks.
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
        if self.scheduler:
            self.client = _attach(distributed, self.scheduler)
            self._attached_workers()
            return
        self.say("reading the nodes' facts over SSH")
        self.read_facts()
        ready = [s for s in self.states.values() if s.problem is None]
        listen = self.nodes.listen or _one_address([s.head_address for s in ready])
        # A rank whose worker dies is tried once more (on the node's restarted worker).
        # One task at a time per worker thread (no task queued on a worker): a worker that
        # dies takes only the rank it was parsing with it.
        dask.config.set({"distributed.scheduler.allowed-failures": 1, "distributed.scheduler.worker-saturation": 1.0})
        self._cluster = distributed.LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=0,
            host=listen,
            scheduler_port=0,
            dashboard_address=f"{listen}:0",  # its HTTP routes on the same address, any free port
            processes=True,
            silence_logs=logging.CRITICAL,  # what the user needs is in the ranks' marks
        )
        self.client = distributed.Client(self._cluster, set_as_default=False)  # type: ignore[no-untyped-call]
        for state in ready:
            self._start_worker(state, self._cluster.scheduler_address)
        self._wait_workers(ready)

    def read_facts(self) -> None:
        """Each node's facts (node_facts, over SSH), the problem of a node that fails."""
        with ThreadPoolExecutor(max_workers=min(16, len(self.states))) as pool:
            list(pool.map(self._facts, self.states.values()))

    def _facts(self, state: NodeState) -> None:
        node = state.node
        folders = " ".join(shlex.quote(f) for f in node.folders)
        script = f'printf "%s\\n" "${{SSH_CONNECTION:-}}"; exec {_py(node)} -c {shlex.quote(_FACTS_CODE)} {folders}'
        argv = self._argv(node, script)
        try:
            done = subprocess.run(argv, capture_output=True, timeout=FACTS_TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            state.problem = f"node {node.name}: no answer over SSH in {FACTS_TIMEOUT:.0f} s"
            return
        except FileNotFoundError:
            state.problem = "ssh: not found; install the OpenSSH client"
            return
        err = [ln.strip() for ln in done.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        if done.returncode == 255 and node.host != "local":
            state.problem = "node " + (ssh_problem(node.host, err, self.nodes.ssh_config) or f"{node.host}: ssh failed")
            return
        lines = done.stdout.decode("utf-8", "replace").splitlines()
        if done.returncode != 0 or len(lines) < 2:
            why = err[-1] if err else f"exit {done.returncode}"
            state.problem = f"node {node.name}: {node.python} failed: {why}"
            return
        conn = lines[0].split()
        state.head_address, state.node_address = (conn[0], conn[2]) if len(conn) == 4 else ("127.0.0.1", "127.0.0.1")
        try:
            facts = json.loads(lines[-1])
        except ValueError:
            state.problem = f"node {node.name}: unreadable answer from {node.python}"
            return
        state.facts = facts
        state.problem = _facts_problem(node, facts)

    def _argv(self, node: Node, script: str) -> list[str]:
        return transport_for(node.host, self.nodes.ssh_config, self.accept_new_host_key).argv(script)

    def _start_worker(self, state: NodeState, address: str) -> None:
        node = state.node
        workers = node.workers or max(1, min(DEFAULT_MAX_WORKERS, int(state.facts.get("cpus") or 1)))
        cmd = (
            f"{_py(node)} -m distributed.cli.dask_worker {shlex.quote(address)}"
            f" --name {shlex.quote(node.name)} --nworkers {workers} --nthreads 1"
            f" --resources {shlex.quote(f'{node.resource}={RESOURCE_AMOUNT}')}"
            f" --host {shlex.quote(state.node_address or '127.0.0.1')}"
            ' --no-dashboard --death-timeout 60 --local-directory "${TMPDIR:-/tmp}"'
        )
        # The worker runs while the session's stdin is open: closing it (or losing this
        # machine) makes the supervisor stop the worker's whole process group.
        script = f"cd ~ 2>/dev/null; exec {_py(node)} -c {shlex.quote(_SUPERVISOR)} {cmd}"
        state.proc = subprocess.Popen(
            self._argv(node, script), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        threading.Thread(target=_collect, args=(state,), daemon=True).start()

    def _wait_workers(self, states: Sequence[NodeState]) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        waiting = list(states)
        while waiting and time.monotonic() < deadline:
            if self.cancel is not None and self.cancel.is_set():
                raise Cancelled()
            have = self._resources_seen()
            for state in list(waiting):
                if have.get(state.node.resource, 0) > 0:
                    waiting.remove(state)
                elif state.proc is not None and state.proc.poll() is not None:
                    why = state.stderr[-1] if state.stderr else f"exit {state.proc.returncode}"
                    state.problem = f"node {state.node.name}: the Dask worker did not start: {why}"
                    waiting.remove(state)
            if waiting:
                time.sleep(0.2)
        for state in waiting:
            state.problem = f"node {state.node.name}: no Dask worker joined in {START_TIMEOUT:.0f} s"

    def _resources_seen(self) -> dict[str, int]:
        """How many tasks the live workers carrying each resource run at once (their threads)."""
        seen: dict[str, int] = {}
        for info in self.client.scheduler_info(n_workers=-1)["workers"].values():
            for name in info.get("resources", {}):
                seen[name] = seen.get(name, 0) + max(1, int(info.get("nthreads") or 1))
        return seen

    def _attached_workers(self) -> None:
        have = self._resources_seen()
        for state in self.states.values():
            if have.get(state.node.resource, 0) == 0:
                state.problem = (
                    f"node {state.node.name}: no worker of {self.scheduler} serves it "
                    f"(start them with --resources {state.node.resource}={RESOURCE_AMOUNT})"
                )

    def stop(self) -> None:
        """Stop everything started: the client, the scheduler, every node's worker."""
        self._stopping = True
        # The workers first, while the scheduler is there to see them leave.
        procs = [s.proc for s in self.states.values() if s.proc is not None]
        for proc in procs:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()
        deadline = time.monotonic() + STOP_TIMEOUT
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close(timeout=10)
            self.client = None
        if self._cluster is not None:
            with contextlib.suppress(Exception):
                self._cluster.close(timeout=10)
            self._cluster = None
        for state in self.states.values():
            state.proc = None

    # ----------------------------------------------------------------- the work

    def ranks(self) -> tuple[list[tuple[str, str, int]], list[RankEntry]]:
        """Every rank folder of the working nodes as (rank, folder, bytes), and one error
        entry per folder that could not be listed (its node's problem, or the folder's)."""
        bad: list[RankEntry] = []
        jobs: list[tuple[NodeState, str, Any]] = []
        for state in self.states.values():
            for folder in state.node.folders:
                if state.problem is not None:
                    bad.append(error_entry(f"{state.node.name}:{folder}", Path(folder), state.problem))
                else:
                    jobs.append((state, folder, self._submit(state.node, find_ranks, folder)))
        found: list[tuple[str, str, int, str]] = []
        for state, folder, fut in jobs:
            try:
                ranks, error = fut.result()
            except Exception as exc:  # noqa: BLE001 - one node never stops the others
                ranks, error = [], f"node {state.node.name}: {_one_line(exc)}"
            if error:
                bad.append(error_entry(f"{state.node.name}:{folder}", Path(folder), error))
            found += [(rank, path, size, state.node.name) for rank, path, size in ranks]
        names = [r for r, *_ in found]
        if len(set(names)) != len(names):  # device_0 on every node: numbered in node order
            found = [(str(i), path, size, node) for i, (_, path, size, node) in enumerate(found)]
        for _, path, _, node in found:
            self.node_of[path] = node
        return [(r, p, s) for r, p, s, _ in found], bad

    def _submit(self, node: Node, fn: Callable[..., Any], *args: Any, key: str | None = None) -> Any:
        if key is not None:
            return self.client.submit(fn, *args, resources={node.resource: 1}, key=key)
        return self.client.submit(fn, *args, resources={node.resource: 1}, pure=False)

    def run_on_rank(self, folder: str | Path, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on a worker of the node holding `folder`; its result."""
        name = self.node_of.get(str(folder))
        if name is None:
            raise ProfileError(f"{folder}: no node of {self.nodes.path} holds this rank")
        state = self.states[name]
        if state.problem is not None:
            raise ProfileError(state.problem)
        try:
            return self._submit(state.node, fn, *args).result()
        except ProfileError:
            raise
        except Exception as exc:  # noqa: BLE001 - the node's failure, said in one line
            raise ProfileError(f"node {name}: {_one_line(exc)}") from None

    def open_rank(self, folder: Path, options: ReadOptions) -> Profile:
        """One rank's frames, read on its node (from the node's cache)."""
        profile: Profile = self.run_on_rank(folder, open_here, str(folder), options, self.use_cache)
        return profile

    def read_ranks(
        self,
        options: ReadOptions,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
    ) -> list[RankEntry]:
        """Every rank's entry, parsed on its node; the folders that could not be listed come
        last as error entries."""
        ranks, bad = self.ranks()
        total = sum(size for _, _, size in ranks)
        n = len(ranks)
        out: list[RankEntry | None] = [None] * n
        # Each node is handed as many ranks as its workers run at once, no more: a task given
        # to a worker counts as tried there, so a worker that dies takes only its own rank.
        queues: dict[str, list[int]] = {}
        for i, (_, folder, _) in enumerate(ranks):
            queues.setdefault(self.node_of[folder], []).append(i)
        slots = self._resources_seen()
        running: dict[Any, int] = {}
        done_bytes = count = 0
        ended: queue.Queue[Any] = queue.Queue()
        if progress is not None:
            progress(0, total, f"rank 0/{n}")
        try:
            while running or any(queues.values()):
                if cancel is not None and cancel.is_set():
                    raise Cancelled()
                for name, waiting in queues.items():
                    node = self.states[name].node
                    busy = sum(1 for i in running.values() if self.node_of[ranks[i][1]] == name)
                    while waiting and busy < max(1, slots.get(node.resource, 1)):
                        i = waiting.pop(0)
                        rank, folder, _ = ranks[i]
                        key = f"npuscope-rank-{rank}-{uuid.uuid4().hex[:12]}"  # the rank in the scheduler's words
                        args = (folder, options, rank, self.use_cache)
                        fut = self._submit(node, parse_here, *args, key=key)
                        running[fut] = i
                        fut.add_done_callback(ended.put)
                        busy += 1
                # Woken by the first rank to end (its callback, in the client's thread): the
                # next rank is handed out at once, not at the next look.
                try:
                    ended.get(timeout=1.0)
                except queue.Empty:
                    pass
                finished = [fut for fut in running if fut.done()]
                for fut in finished:
                    i = running.pop(fut)
                    rank, folder, size = ranks[i]
                    entry = self._entry(fut, rank, folder)
                    out[i] = entry
                    done_bytes += size
                    count += 1
                    if progress is not None:
                        state = "error" if entry.summary.error else "ok"
                        progress(done_bytes, total, f"rank {count}/{n} {rank} ({state})")
                if not finished:
                    self._lost_nodes(running, ranks, out, queues)
        finally:
            for fut in running:
                fut.cancel()
        return [e for e in out if e is not None] + bad

    def _entry(self, fut: Any, rank: str, folder: str) -> RankEntry:
        try:
            entry: RankEntry = fut.result()
        except Exception as exc:  # noqa: BLE001 - one rank never stops the others
            if type(exc).__name__ == "KilledWorker":
                why = "the worker parsing this rank died twice (killed, or out of memory)"
            else:
                why = f"worker failed: {_one_line(exc)}"
            return error_entry(rank, Path(folder), f"node {self.node_of[folder]}: {why}")
        return replace(entry, summary=replace(entry.summary, folder=Path(folder)))

    def _lost_nodes(
        self, running: dict[Any, int], ranks: list[tuple[str, str, int]], out: list[Any], queues: dict[str, list[int]]
    ) -> None:
        """Mark the waiting ranks of a node whose worker session ended (the node or the
        connection went away): no worker will ever take them."""
        ended = [s for s in self.states.values() if s.proc is not None and s.proc.poll() is not None]
        if not ended or self._stopping:
            return
        seen = self._resources_seen()
        for state in ended:
            proc = state.proc
            assert proc is not None
            if seen.get(state.node.resource, 0):
                continue
            why = state.stderr[-1] if state.stderr else f"the SSH session ended (exit {proc.returncode})"
            state.problem = f"node {state.node.name}: lost: {why}"
            for fut, i in list(running.items()):
                if self.node_of[ranks[i][1]] == state.node.name:
                    fut.cancel()
                    running.pop(fut)
                    queues[state.node.name].append(i)
            for i in queues.pop(state.node.name, []):
                rank, folder, _ = ranks[i]
                out[i] = error_entry(rank, Path(folder), state.problem)
            queues[state.node.name] = []


def _collect(state: NodeState) -> None:
    """Keep the last lines the node's session prints on stderr (why its worker did not start)."""
    proc = state.proc
    if proc is None or proc.stderr is None:
        return
    for raw in proc.stderr:
        line = raw.decode("utf-8", "replace").strip()
        if line:
            state.stderr = [*state.stderr[-19:], line]


def _attach(distributed: Any, scheduler: str) -> Any:
    """A client of the running scheduler `scheduler` (an address, or a scheduler file)."""
    where = {"scheduler_file": scheduler} if Path(scheduler).expanduser().is_file() else {"address": scheduler}
    try:
        return distributed.Client(**where, timeout="30s", set_as_default=False)
    except (OSError, ValueError, TypeError) as exc:
        raise ProfileError(f"cannot reach the Dask scheduler {scheduler}: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _one_address(addresses: Sequence[str | None]) -> str:
    """The one address every node reaches this machine by (their SSH_CONNECTION), where the
    scheduler listens; `listen` in the nodes file when they differ."""
    seen = sorted({a for a in addresses if a})
    if not seen:
        return "127.0.0.1"
    if len(seen) > 1:
        raise ProfileError(
            f"the nodes reach this machine by different addresses ({', '.join(seen)}): "
            "set `listen` in the nodes file to the one the scheduler should listen on"
        )
    return seen[0]


def _facts_problem(node: Node, facts: dict[str, Any]) -> str | None:
    """Why a node cannot work for this machine, from its facts; None when it can."""
    if facts.get("error"):
        return f"node {node.name}: {facts['error']}"
    if not facts.get("dask"):
        return f"node {node.name}: Dask is not installed for {node.python} (pip install 'npuscope[cluster]')"
    mine, theirs = code_digest(), facts.get("code")
    if theirs != mine:
        return (
            f"node {node.name}: npuscope {facts.get('npuscope')} (code {theirs}) differs from this machine's "
            f"{_local_version()} (code {mine}): install the same version on both"
        )
    return None
