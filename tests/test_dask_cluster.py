"""A cluster spread over nodes (nodes.toml), analysed where it lies with Dask.

Real components only: a real OpenSSH server on 127.0.0.1 stands for two nodes (two Host
entries, each with its own folder and its own cache through SetEnv), the workers are real
`dask worker` processes it starts, the scheduler a real Dask scheduler (in the head, or
started here for --scheduler). The cluster is a 64-rank generated torch_npu job split over
the two folders; its local report (the parent folder, today's process pool) is the truth.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sshd_server import _free_port, start_sshd

from npuscope.capture.dask_engine import NodeEngine, _facts_problem
from npuscope.parsers import ProfileError, ReadOptions
from npuscope.parsers.node_tasks import code_digest
from npuscope.parsers.nodes_file import Node, read_nodes_file

pytest.importorskip("distributed")
from distributed.diagnostics.plugin import SchedulerPlugin  # noqa: E402

RANKS = 64
pytestmark = pytest.mark.slow  # an OpenSSH server and Dask workers (the nodes file checks beside them are quick)


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def _evict(root: Path) -> None:
    """Drop the files of `root` from the page cache: a later read of them is a disk read,
    counted in the reader's read_bytes."""
    for p in _files(root):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _workers_running() -> list[str]:
    """Command lines of this module's Dask worker processes on this machine (those serving
    its nodes, node-a and node-b: their resources name them), wherever they were reparented."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmd = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "distributed.cli.dask_worker" in cmd and "npuscope-node-node-" in cmd:
            found.append(cmd)
    return found


def _none_left(server, timeout: float = 30.0) -> None:
    """Nothing started over SSH is still running (a stop is not instant: give it `timeout`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _workers_running() and not server.served_pids():
            return
        time.sleep(0.2)
    assert not _workers_running(), _workers_running()
    assert not server.served_pids()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """sshd, an ssh config with node-a / node-b (one cache each) and node-down (a closed
    port), the 64-rank cluster split over two folders, nodes files."""
    root = tmp_path_factory.mktemp("nodes")
    server = start_sshd(root / "sshd", extra_config="AcceptEnv NPUSCOPE_CACHE_DIR\n")
    base = server.config.read_text().split("Host npuscope-unknown")[0]
    cfg = server.config.read_text()
    for name in ("a", "b"):
        cfg += "\n" + base.replace("Host npuscope-test", f"Host node-{name}")
        cfg += f"  SetEnv NPUSCOPE_CACHE_DIR={root}/cache-{name}\n"
    cfg += "\n" + base.replace("Host npuscope-test", "Host node-down").replace(
        f"Port {server.port}", f"Port {_free_port()}"
    )
    ssh_config = root / "ssh_config"
    ssh_config.write_text(cfg)
    whole = root / "generated"
    subprocess.run(
        [sys.executable, "-m", "npuscope.fixtures.generate", str(whole), "--ranks", str(RANKS)],
        check=True,
        capture_output=True,
    )
    cluster = root / "cluster"  # cluster/a/job and cluster/b/job: the two nodes' folders
    ranks = sorted(p.name for p in whole.iterdir())
    assert len(ranks) == RANKS
    for i, name in enumerate(ranks):
        dest = cluster / ("a" if i < RANKS // 2 else "b") / "job"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.move(str(whole / name), dest / name)

    def nodes_file(name: str, nodes: list[dict], **top: str) -> Path:
        lines = [f'ssh_config = "{ssh_config}"'] + [f'{k} = "{v}"' for k, v in top.items()]
        for node in nodes:
            lines.append("[[node]]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in node.items()]
        path = root / name
        path.write_text("\n".join(lines) + "\n")
        return path

    two = [
        {"host": "node-a", "folders": [str(cluster / "a" / "job")], "python": sys.executable, "workers": 2},
        {"host": "node-b", "folders": [str(cluster / "b" / "job")], "python": sys.executable, "workers": 2},
    ]
    yield {
        "root": root,
        "server": server,
        "cluster": cluster,
        "two": nodes_file("nodes.toml", two),
        "nodes_file": nodes_file,
        "node_list": two,
    }
    server.stop()


def _report(path: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "npuscope", "report", str(path), "--format", "json", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.fixture(scope="module")
def local_json(world):
    done = _report(world["cluster"], "--no-cache")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_report_of_two_nodes_equals_the_local_report(world, local_json):
    done = _report(world["two"])
    assert done.returncode == 0, done.stderr
    remote = json.loads(done.stdout)
    assert len(remote["cluster"]["ranks"]) == RANKS
    assert all(r["error"] is None for r in remote["cluster"]["ranks"])
    assert remote == local_json  # no timing field in the report: every field compared
    # Each node's cache holds its own ranks' entries (its workers wrote them), the head's none.
    for name in ("a", "b"):
        assert any((world["root"] / f"cache-{name}").rglob("*")), name
    _none_left(world["server"])


def test_text_report_of_two_nodes_equals_the_local_one(world):
    remote = subprocess.run(
        [sys.executable, "-m", "npuscope", "report", str(world["two"])], capture_output=True, text=True, timeout=300
    )
    local = subprocess.run(
        [sys.executable, "-m", "npuscope", "report", str(world["cluster"])], capture_output=True, text=True, timeout=300
    )
    assert remote.returncode == local.returncode == 0, remote.stderr + local.stderr
    # The heading names what was opened (the nodes file, the folder); the rest is the same.
    head, _, body = remote.stdout.partition("\n\n")
    assert head.splitlines()[0] == "npuscope cluster: nodes.toml"
    assert body == local.stdout.partition("\n\n")[2]
    _none_left(world["server"])


_MEASURED_HEAD = """
import sys
from npuscope.cli import main
code = main(sys.argv[1:])
io = dict(line.split(": ") for line in open("/proc/self/io").read().splitlines())
sys.stderr.write("READ_BYTES=" + io["read_bytes"].strip() + "\\n")
sys.exit(code)
"""


@pytest.mark.parametrize("cached", [True, False], ids=["node caches warm", "no cache"])
def test_head_reads_under_one_percent_of_the_cluster(world, local_json, cached):
    """The head's read_bytes (/proc/self/io: bytes fetched from the disk) after every file of
    the cluster was dropped from the page cache: reading any rank's files here would count."""
    total = sum(p.stat().st_size for p in _files(world["cluster"]))
    if cached:
        assert _report(world["two"]).returncode == 0  # the nodes' caches filled
    _evict(world["cluster"])
    extra = () if cached else ("--no-cache",)
    caches = sorted(p for name in ("a", "b") for p in (world["root"] / f"cache-{name}").rglob("*"))
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED_HEAD, "report", str(world["two"]), "--format", "json", *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    read = int(done.stderr.split("READ_BYTES=")[1].split()[0])
    assert read < 0.01 * total, (read, total)
    assert json.loads(done.stdout) == local_json
    if not cached:  # --no-cache reaches the nodes: parsed from scratch, nothing written there
        assert sorted(p for name in ("a", "b") for p in (world["root"] / f"cache-{name}").rglob("*")) == caches
    _none_left(world["server"])


class _KillRank(SchedulerPlugin):
    """A scheduler plugin (test code): SIGKILL the worker process a rank's task is given to,
    the first `times` times; the nanny restarts the worker."""

    name = "npuscope-test-kill"

    def __init__(self, scheduler, rank: str, times: int) -> None:
        self.scheduler, self.rank, self.times, self.killed = scheduler, rank, times, 0

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if finish != "processing" or not str(key).startswith(f"npuscope-rank-{self.rank}-"):
            return
        if self.killed >= self.times:
            return
        ws = self.scheduler.tasks[key].processing_on
        if ws is not None and ws.pid:
            self.killed += 1
            os.kill(ws.pid, signal.SIGKILL)


def _with_plugin(nodes, rank: str, times: int):
    with NodeEngine(nodes) as engine:
        scheduler = engine._cluster.scheduler  # the scheduler runs in this process
        plugin = _KillRank(scheduler, rank, times)
        scheduler.add_plugin(plugin)
        entries = engine.read_ranks(ReadOptions())
    return entries, plugin


@pytest.mark.parametrize("times", [1, 2], ids=["killed once: retried", "killed twice: marked"])
def test_a_killed_worker_is_survived(world, local_json, times):
    nodes = read_nodes_file(world["two"])
    rank = "40"  # a rank of node b
    entries, plugin = _with_plugin(nodes, rank, times)
    assert plugin.killed == times
    by_rank = {e.rank: e for e in entries}
    assert len(by_rank) == RANKS
    others = [e for r, e in by_rank.items() if r != rank]
    assert all(e.summary.error is None for e in others), [e.summary.error for e in others if e.summary.error]
    truth = {r["rank"]: r for r in local_json["cluster"]["ranks"]}
    if times == 1:
        assert by_rank[rank].summary.error is None
        assert by_rank[rank].summary.tasks == truth[rank]["tasks"]
    else:
        assert (
            by_rank[rank].summary.error
            == "node node-b: the worker parsing this rank died twice (killed, or out of memory)"
        )
    _none_left(world["server"])


def test_an_unreachable_node_is_marked_and_the_others_open(world, local_json):
    down = {"host": "node-down", "folders": ["/data/job"], "python": sys.executable}
    path = world["nodes_file"]("down.toml", [world["node_list"][0], down])
    done = _report(path)
    assert done.returncode == 0, done.stderr
    ranks = json.loads(done.stdout)["cluster"]["ranks"]
    bad = [r for r in ranks if r["error"]]
    assert [r["rank"] for r in bad] == ["node-down:/data/job"]
    assert bad[0]["error"] == "node node-down: cannot connect: connection refused"
    good = {r["rank"]: r for r in ranks if not r["error"]}
    truth = {r["rank"]: r for r in local_json["cluster"]["ranks"]}
    assert len(good) == RANKS // 2
    for rank, row in good.items():
        assert row == truth[rank]
    _none_left(world["server"])


def test_a_node_without_npuscope_is_marked(world, tmp_path):
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    bare = {"host": "node-b", "folders": [str(world["cluster"] / "b" / "job")], "python": str(venv / "bin" / "python")}
    path = world["nodes_file"]("bare.toml", [world["node_list"][0], bare])
    done = _report(path)
    assert done.returncode == 0, done.stderr
    ranks = json.loads(done.stdout)["cluster"]["ranks"]
    bad = [r for r in ranks if r["error"]]
    assert len(bad) == 1 and bad[0]["rank"] == f"node-b:{world['cluster'] / 'b' / 'job'}"
    assert bad[0]["error"].startswith(f"node node-b: npuscope cannot be imported by {venv / 'bin' / 'python'}")
    assert len(ranks) == RANKS // 2 + 1
    _none_left(world["server"])


def test_another_version_on_a_node_is_refused():
    node = Node("n1", "n1", ("/x",))
    facts = {"npuscope": "0.1.0", "code": "0" * 16, "dask": "2026.8.0"}
    why = _facts_problem(node, facts)
    assert why is not None and why.startswith("node n1: npuscope 0.1.0 (code 0000000000000000) differs")
    assert _facts_problem(node, {**facts, "code": code_digest()}) is None
    assert "Dask is not installed" in (_facts_problem(node, {**facts, "dask": None}) or "")


def test_ctrl_c_stops_every_node(world):
    """SIGINT to the head once its workers run on both nodes: it exits, nothing is left."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "npuscope", "report", str(world["two"]), "--no-cache"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(_workers_running()) < 2 and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None and len(_workers_running()) >= 2
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "Traceback" not in err, err[-4000:]
    _none_left(world["server"])


def test_a_killed_head_leaves_nothing_on_the_nodes(world):
    """SIGKILL to the head once its workers run (no cleanup of its own can run, as under the
    OOM killer): its ssh clients see their stdin end, each node's session ends, and the
    supervisor there stops the worker's process group."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "npuscope", "report", str(world["two"]), "--no-cache"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(_workers_running()) < 2 and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None and len(_workers_running()) >= 2
    proc.kill()
    proc.wait(30)
    _none_left(world["server"])


def test_attached_scheduler(world, local_json, tmp_path):
    """--scheduler: a scheduler and one worker per node started here (real processes on
    127.0.0.1), each worker with its node's resource; nothing is started over SSH."""
    sched_file = tmp_path / "scheduler.json"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(sched_file),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        for name in ("a", "b"):
            env = {**os.environ, "NPUSCOPE_CACHE_DIR": str(tmp_path / f"cache-{name}")}
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "distributed.cli.dask_worker",
                        "--scheduler-file",
                        str(sched_file),
                        "--nthreads",
                        "1",
                        "--resources",
                        f"npuscope-node-node-{name}=1000000",
                        "--no-dashboard",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                )
            )
        from distributed import Client

        with Client(scheduler_file=str(sched_file), timeout="60s") as client:
            client.wait_for_workers(2, timeout=60)
        done = _report(world["two"], "--scheduler", str(sched_file))
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == local_json
        assert not world["server"].served_pids()  # nothing went over SSH
        env = {**os.environ, "NPUSCOPE_SCHEDULER": str(sched_file)}
        again = _report(world["two"], env=env)
        assert again.returncode == 0 and json.loads(again.stdout) == local_json
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)


def test_nodes_check(world):
    down = {"host": "node-down", "folders": ["/data/job"], "python": sys.executable}
    path = world["nodes_file"]("check.toml", [*world["node_list"], down])
    done = subprocess.run(
        [sys.executable, "-m", "npuscope", "nodes", "check", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr  # one node cannot work
    lines = done.stdout.splitlines()
    a = next(ln for ln in lines if ln.startswith("node-a"))
    assert "ok" in a and f"{RANKS // 2} ranks" in a
    down_line = next(ln for ln in lines if ln.startswith("node-down"))
    assert "cannot connect: connection refused" in down_line
    ok = world["nodes_file"]("check_ok.toml", world["node_list"])
    done = subprocess.run(
        [sys.executable, "-m", "npuscope", "nodes", "check", str(ok), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [n["name"] for n in doc["nodes"]] == ["node-a", "node-b"]
    for n in doc["nodes"]:
        assert n["problem"] is None
        assert n["code"] == code_digest()
        assert sum(f["ranks"] for f in n["folders"].values()) == RANKS // 2
        assert n["cache_free_bytes"] > 0
    _none_left(world["server"])


@pytest.mark.parametrize(
    "text, error",
    [
        ("", "node: no [[node]] table"),
        ("[[node]]\nfolders = ['/x']\n", "node[0].host: missing"),
        ("[[node]]\nhost = 'a'\n", "node[0].folders: missing"),
        ("[[node]]\nhost = 'a'\nfolders = ['/x']\nworkers = 0\n", "node[0].workers: must be a whole number"),
        ("[[node]]\nhost = 'a'\nfolders = ['/x']\nwrkers = 2\n", "node[0].wrkers: unknown key"),
        ("[[node]]\nhost = 'a'\nfolders = ['/x']\n[[node]]\nhost = 'a'\nfolders = ['/y']\n", "two nodes are named"),
        ("[[node]]\nhost = '-oProxyCommand=x'\nfolders = ['/x']\n", "is not a host name"),
        ("listen = 5\n[[node]]\nhost = 'a'\nfolders = ['/x']\n", "listen: must be a non-empty string"),
        ("[[node]\n", "invalid TOML"),
        ("[[node]]\nhost = 'a'\nfolders = ['/x']\npython = \"python3 '-I\"\n", "node[0].python: "),
    ],
)
def test_a_bad_nodes_file_gets_one_line(tmp_path, text, error):
    path = tmp_path / "nodes.toml"
    path.write_text(text)
    with pytest.raises(ProfileError) as got:
        read_nodes_file(path)
    assert str(got.value).startswith(f"{path}: ") and error in str(got.value)
    done = subprocess.run(
        [sys.executable, "-m", "npuscope", "report", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and error in done.stderr


def test_without_dask_a_nodes_file_gets_one_line_naming_the_extra(tmp_path):
    # Dask is the `cluster` extra: a head without it is told what to install, before any SSH.
    demo = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / "ascend_profiling"
    path = tmp_path / "nodes.toml"
    path.write_text(f"[[node]]\nhost = 'local'\nfolders = ['{demo}']\n")
    hide = "import sys; sys.modules['dask'] = sys.modules['distributed'] = None; from npuscope.cli import main; "
    done = subprocess.run(
        [sys.executable, "-c", hide + f"raise SystemExit(main(['report', {str(path)!r}, '--no-cache']))"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert "pip install 'npuscope[cluster]'" in done.stderr


async def test_the_explorer_opens_a_nodes_file_and_a_rank_from_its_node(world, local_json):
    """`npuscope nodes.toml`: the Ranks view of the 64 ranks, then Enter on a rank of node b
    shows its tasks and training views, analysed on the node (the head has no copy of its
    files); quitting stops every worker."""
    from pilot_helpers import wait_loaded

    from npuscope.tui.app import NpuscopeApp
    from npuscope.tui.widgets.ranks_table import RanksTable

    app = NpuscopeApp(world["two"], cache=True, clusters=True)
    deadline = time.monotonic() + 180
    async with app.run_test(size=(80, 24)) as pilot:
        while not (app.ranks is not None and app.screen is app.ranks):
            assert time.monotonic() < deadline, "the Ranks view never came"
            await pilot.pause(0.1)
        truth = {r["rank"]: r for r in local_json["cluster"]["ranks"]}
        assert app.cluster is not None and app.cluster.host is not None
        assert {r.rank: r.tasks for r in app.cluster.ranks} == {r: t["tasks"] for r, t in truth.items()}
        assert list(app.cluster.slow_ranks) == local_json["cluster"]["slow_ranks"]
        while not app.ranks.query(RanksTable):  # the view composes once shown
            assert time.monotonic() < deadline, "the Ranks view has no table"
            await pilot.pause(0.1)
        table = app.ranks.query_one(RanksTable)
        while not table.move_to_key("40", key="rank"):  # the table is filled once the view is shown
            assert time.monotonic() < deadline, "rank 40 never listed"
            await pilot.pause(0.1)
        await pilot.pause()
        await pilot.press("enter")
        main = await wait_loaded(pilot)
        while main.views is None:
            assert time.monotonic() < deadline, "the views never came"
            await pilot.pause(0.1)
        assert app.rank == "40"
        assert main.card_tasks().height == truth["40"]["tasks"]
        assert str(main.profile.path).startswith(str(world["cluster"] / "b" / "job"))
        assert main.views.steps.height > 0  # read on the node, with the rank
        await pilot.press("q")
    # What run_explorer does once the app has closed (npuscope/cli.py).
    assert app.cluster is not None and app.cluster.host is not None
    app.cluster.host.stop()
    _none_left(world["server"])


@pytest.mark.parametrize(
    "argv",
    [["inspect"], ["sql", "select 1"], ["export", "--perfetto", "out.pftrace"], ["compare", "X"]],
    ids=["inspect", "sql", "export", "compare"],
)
def test_commands_of_local_profiles_refuse_a_nodes_file_in_one_line(world, tmp_path, argv):
    path = str(world["two"])
    args = [argv[0], path, *argv[1:]] if argv[0] != "compare" else ["compare", path, path]
    done = subprocess.run(
        [sys.executable, "-m", "npuscope", *args], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"npuscope: {path}: a nodes file (ranks on other machines) opens with `npuscope report` or the "
        "explorer; this command reads profiles on this machine"
    )
    assert not list(tmp_path.iterdir())  # nothing written


def test_the_explorer_refuses_a_bad_nodes_file_before_it_starts(tmp_path, capsys):
    from npuscope.cli import main

    path = tmp_path / "nodes.toml"
    path.write_text("[[node]]\nhost = 'a'\n")
    assert main([str(path)]) == 2
    assert (
        capsys.readouterr().err
        == f"npuscope: {path}: node[0].folders: missing: a list of the folders holding the node's rank folders\n"
    )


def test_op_report_of_a_rank_on_its_node_equals_the_local_one(world):
    """`--op` on a nodes file: the op report is made on the rank's node."""
    args = ["--card", "40", "--op", "#1"]
    remote = subprocess.run(
        [sys.executable, "-m", "npuscope", "report", str(world["two"]), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    local = subprocess.run(
        [sys.executable, "-m", "npuscope", "report", str(world["cluster"]), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert remote.returncode == local.returncode == 0, remote.stderr + local.stderr
    assert remote.stdout == local.stdout and local.stdout.startswith("## Op report: ")
    _none_left(world["server"])
