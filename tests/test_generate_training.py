"""The training-level problems the generator plants (fixtures/synthetic.py), in every layout.

Truth comes from the written files, read with csv / json / sqlite3 only: per card the steps
(span, compute, communication of the tasks in each step), the host's synchronisation time, the
links (bytes and time of the data steps of the collectives) and the data per call. A planted
problem clears twice its threshold (analysis/thresholds.py), a clean card stays below half of
it; `read_training_views` shows the same figures; the text and the db export of one run agree;
and `npuscope report` names exactly the planted training-level findings.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sqlite3
import statistics
import subprocess
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from npuscope.analysis import diagnose
from npuscope.analysis.thresholds import Thresholds
from npuscope.cli import main
from npuscope.fixtures.generate import TRAINING_PROBLEMS, generate
from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.training import read_training_views

TH = Thresholds()
LAYOUTS = {
    "torch_text": ("torch_npu", False),
    "torch_db": ("torch_npu", "only"),
    "era_b_text": ("era_b", False),
    "era_b_db": ("era_b", "only"),
}
CASES = ((),) + tuple((p,) for p in TRAINING_PROBLEMS)
ALL_SIX = tuple(TRAINING_PROBLEMS)
SYNC = "aclrtSynchronizeStream"


@cache
def _root(base: Path, layout: str, problems: tuple[str, ...]):
    name, db = LAYOUTS[layout]
    return generate(
        base / layout / ("-".join(problems) or "clean"), layout=name, cards=2, problems=problems, db=db, training=True
    )


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("training")


# --------------------------------------------------------------------------- truth from the files


def _ns(text: str) -> int:
    whole, _, frac = text.strip().strip('"').strip().partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _con(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


class Truth:
    """Per card: steps [(span, compute, comm) ns], sync ns, links {(src, dst): [bytes, ns]},
    calls [(op, bytes, elapse ns)] (None where the files do not carry sizes)."""

    def __init__(self) -> None:
        self.steps: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
        self.sync: dict[str, int] = defaultdict(int)
        self.links: dict[str, dict[tuple[int, int], list[int]]] | None = None
        self.calls: dict[str, list[tuple[str, int, int]]] | None = None

    def add_steps(self, card: str, tasks: list[tuple[object, int, int, bool]]) -> None:
        """tasks: (window key, start, end, is_comm); one step per key; tasks never overlap."""
        by: dict[object, list[tuple[int, int, bool]]] = defaultdict(list)
        for key, s, e, comm in tasks:
            by[key].append((s, e, comm))
        for key in sorted(by, key=str):
            ts = sorted(by[key])
            assert all(a[1] <= b[0] for a, b in zip(ts, ts[1:])), "tasks of a card overlap"
            span = ts[-1][1] - ts[0][0]
            self.steps[card].append((span, sum(e - s for s, e, c in ts if not c), sum(e - s for s, e, c in ts if c)))

    # per card figures, %
    def span(self, card: str) -> int:
        return sum(s for s, _, _ in self.steps[card])

    def cno_pct(self, card: str) -> float:
        return 100.0 * sum(m for _, _, m in self.steps[card]) / self.span(card)

    def free_pct(self, card: str) -> float:
        return 100.0 * sum(s - c - m for s, c, m in self.steps[card]) / self.span(card)

    def sync_pct(self, card: str) -> float:
        return 100.0 * self.sync[card] / self.span(card)

    def means(self, card: str) -> tuple[float, float, float]:
        n = len(self.steps[card])
        comp = sum(c for _, c, _ in self.steps[card]) / n
        comm = sum(m for _, _, m in self.steps[card]) / n
        free = sum(s - c - m for s, c, m in self.steps[card]) / n
        return comp, comm, free

    def spreads(self) -> list[float]:
        """msprof-analyze's slow-rank spread per dimension (compute, not overlapped, free), %."""
        per = [self.means(c) for c in sorted(self.steps)]
        total = statistics.fmean(sum(m) for m in per)
        return [100.0 * (max(m[i] for m in per) - min(m[i] for m in per)) / total for i in range(3)]

    def bandwidths(self) -> dict[tuple[str, int, int], float]:
        assert self.links is not None
        return {(c, s, d): b / t for c, ls in self.links.items() for (s, d), (b, t) in ls.items()}

    def mb_per_call(self, card: str) -> float:
        assert self.calls is not None
        calls = self.calls[card]
        return sum(b for _, b, _ in calls) / len(calls) / 1e6

    def small_share(self, card: str, limit_mb: float = TH.small_packet_mb) -> float:
        """Share of communication time of the ops moving under `limit_mb` per call, %."""
        assert self.calls is not None
        per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for op, b, t in self.calls[card]:
            per[op][0] += 1
            per[op][1] += b
            per[op][2] += t
        total = sum(t for _, _, t in per.values())
        small = sum(t for n, b, t in per.values() if b / n / 1e6 < limit_mb)
        return 100.0 * small / total


def _torch_text(root: Path) -> Truth:
    truth = Truth()
    truth.links, truth.calls = {}, {}
    for out in sorted(root.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT")):
        card = next(out.parent.glob("profiler_info_*.json")).stem.rsplit("_", 1)[1]
        rows = _csv(out / "kernel_details.csv")
        tasks = []
        for r in rows:
            s = _ns(r["Start Time(us)"])
            tasks.append((int(r["Step Id"]), s, s + _ns(r["Duration(us)"]), r["Accelerator Core"] == "COMMUNICATION"))
        truth.add_steps(card, tasks)
        # step_trace_time.csv holds the same steps (us): checked here against the tasks.
        stt = {int(r["Step"]): r for r in _csv(out / "step_trace_time.csv")}
        for (span, comp, comm), step in zip(truth.steps[card], sorted(stt)):
            r = stt[step]
            assert (
                abs(float(r["Computing"]) * 1000 - comp) < 1 and abs(float(r["Free"]) * 1000 - (span - comp - comm)) < 1
            )
            assert abs(float(r["Communication(Not Overlapped)"]) * 1000 - comm) < 1
        for r in _csv(out / "api_statistic.csv"):
            if r["API Name"] == SYNC:
                truth.sync[card] += round(float(r["Time(us)"]) * 1000)
        matrix = json.loads((out / "communication_matrix.json").read_text())
        links: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
        for step in matrix.values():
            for op, ls in step["collective"].items():
                if op == "Total Op Info":
                    continue
                for link, v in ls.items():
                    s, d = (int(x) for x in link.split("-"))
                    links[(s, d)][0] += round(v["Transit Size(MB)"] * 1e6)
                    links[(s, d)][1] += round(v["Transit Time(ms)"] * 1e6)
        truth.links[card] = dict(links)
        comm = json.loads((out / "communication.json").read_text())
        truth.calls[card] = [
            (
                op,
                round(v["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"] * 1e6),
                round(v["Communication Time Info"]["Elapse Time(ms)"] * 1e6),
            )
            for step in comm.values()
            for op, v in step["collective"].items()
            if op != "Total Op Info"
        ]
    return truth


def _db_common(con: sqlite3.Connection, truth: Truth, card_of_task: dict[int, str]) -> None:
    """Sync time, links and calls of a db (TASK, CANN_API, COMMUNICATION_*)."""
    names = dict(con.execute("SELECT id, value FROM STRING_IDS"))
    conn_card = {cid: card_of_task[g] for g, cid in con.execute("SELECT globalTaskId, connectionId FROM TASK")}
    for s, e, cid, name in con.execute("SELECT startNs, endNs, connectionId, name FROM CANN_API"):
        if names[name] == SYNC:
            truth.sync[conn_card[cid - 60_000_000]] += e - s
    truth.links, truth.calls = defaultdict(lambda: defaultdict(lambda: [0, 0])), defaultdict(list)
    sql = (
        "SELECT c.srcRank, c.dstRank, c.size, t.startNs, t.endNs, t.globalTaskId, c.opId "
        "FROM COMMUNICATION_TASK_INFO c JOIN TASK t ON t.globalTaskId = c.globalTaskId"
    )
    per_op: dict[int, int] = defaultdict(int)
    for src, dst, size, s, e, gtid, op in con.execute(sql):
        if size > 0:
            link = truth.links[card_of_task[gtid]][(src, dst)]
            link[0] += size
            link[1] += e - s
            per_op[op] += size
    for op, name, s, e, cid in con.execute("SELECT opId, opName, startNs, endNs, connectionId FROM COMMUNICATION_OP"):
        truth.calls[conn_card[cid]].append((names[name], per_op[op], e - s))


def _torch_db(root: Path) -> Truth:
    truth = Truth()
    links: dict = {}
    calls: dict = {}
    for path in sorted(root.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db")):
        card = path.stem.rsplit("_", 1)[1]
        con = _con(path)
        windows = sorted(con.execute("SELECT startNs, endNs, id FROM STEP_TIME"))
        tasks = []

        def step_of(s: int, windows: list = windows) -> int:
            return next(i for lo, hi, i in windows if lo <= s <= hi)

        sql = "SELECT t.startNs, t.endNs FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"
        tasks += [(step_of(s), s, e, False) for s, e in con.execute(sql)]
        tasks += [(step_of(s), s, e, True) for s, e in con.execute("SELECT startNs, endNs FROM COMMUNICATION_OP")]
        truth.add_steps(card, tasks)
        one = Truth()
        _db_common(con, one, defaultdict(lambda card=card: card))
        truth.sync[card] = one.sync[card]
        assert one.links is not None and one.calls is not None
        links[card], calls[card] = dict(one.links[card]), one.calls[card]
        con.close()
    truth.links, truth.calls = links, calls
    return truth


def _era_b_text(root: Path) -> Truth:
    truth = Truth()
    out = next(root.glob("PROF_*/mindstudio_profiler_output"))
    rows = _csv(next(out.glob("op_summary_*.csv")))
    windows = [
        (r["Device_id"], _ns(r["FP Start(us)"]), _ns(r["Iteration End(us)"]))
        for r in _csv(next(out.glob("step_trace_*.csv")))
    ]
    per_card: dict[str, list] = defaultdict(list)
    for r in rows:
        s = _ns(r["Task Start Time(us)"])
        key = next(i for i, (c, lo, hi) in enumerate(windows) if c == r["Device_id"] and lo <= s <= hi)
        per_card[r["Device_id"]].append((key, s, s + _ns(r["Task Duration(us)"]), r["Task Type"] == "COMMUNICATION"))
    for card, tasks in per_card.items():
        truth.add_steps(card, tasks)
    # Host calls to cards: the HostToDevice flows go from a CANN thread to a device process
    # labelled "NPU <card>" (connection ids repeat across the cards of a merged timeline).
    events = json.loads(next(out.glob("msprof_*.json")).read_text())
    labels = {e["pid"]: e["args"]["labels"] for e in events if e.get("ph") == "M" and e["name"] == "process_labels"}
    starts = {e["id"]: (e["pid"], e["tid"]) for e in events if e.get("ph") == "s"}
    thread_card = {starts[e["id"]]: labels[e["pid"]].split()[-1] for e in events if e.get("ph") == "f"}
    for e in events:
        if e.get("ph") == "X" and e["name"] == f"AscendCL@{SYNC}":
            truth.sync[thread_card[(e["pid"], e["tid"])]] += round(e["dur"] * 1000)
    return truth


def _era_b_db(root: Path) -> Truth:
    truth = Truth()
    con = _con(next(root.glob("PROF_*/msprof_*.db")))
    card_of_task = {g: str(d) for g, d in con.execute("SELECT globalTaskId, deviceId FROM TASK")}
    sql = (
        "SELECT t.deviceId, t.startNs, t.endNs FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"
    )
    per_card: dict[str, list] = defaultdict(list)
    for d, s, e in con.execute(sql):
        per_card[str(d)].append((0, s, e, False))
    for d, s, e in con.execute("SELECT deviceId, startNs, endNs FROM COMMUNICATION_OP"):
        per_card[str(d)].append((0, s, e, True))
    for card, tasks in per_card.items():  # no step table: the capture is one step
        truth.add_steps(card, tasks)
    _db_common(con, truth, card_of_task)
    con.close()
    return truth


TRUTH = {"torch_text": _torch_text, "torch_db": _torch_db, "era_b_text": _era_b_text, "era_b_db": _era_b_db}


# --------------------------------------------------------------------------- planted magnitudes


@pytest.mark.parametrize("problems", CASES, ids=lambda p: "-".join(p) or "clean")
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_planted_clears_twice_the_threshold_and_clean_stays_below_half(base, layout, problems):
    g = _root(base, layout, problems)
    truth = TRUTH[layout](g.root)
    planted = {(p.rule, p.card) for p in g.planted}
    assert {p.rule for p in g.planted} <= set(TRAINING_PROBLEMS)
    cards = sorted(truth.steps)
    assert cards == ["0", "1"]
    for card in cards:
        cno, free, sync = truth.cno_pct(card), truth.free_pct(card), truth.sync_pct(card)
        if ("comm_not_overlapped", card) in planted:
            assert cno >= 2 * TH.comm_not_overlapped_pct, (card, cno)
        else:
            assert cno < TH.comm_not_overlapped_pct / 2, (card, cno)
        if ("free_time", card) in planted:
            assert free >= 2 * TH.free_pct, (card, free)
        elif layout == "era_b_db":
            # The msprof db has no steps: the capture is one, with the clean step-boundary gaps.
            assert free < TH.free_pct, (card, free)
        else:
            assert free < TH.free_pct / 2, (card, free)
        if ("sync_heavy", card) in planted:
            assert sync >= 2 * TH.sync_pct, (card, sync)
        else:
            assert sync < TH.sync_pct / 2, (card, sync)
    spread = truth.spreads()
    slow = [c for r, c in planted if r == "slow_rank"]
    if slow:
        assert spread[0] >= 2 * TH.slow_rank_pct
        assert slow == [max(cards, key=lambda c: truth.means(c)[0])]  # the most compute
    else:
        assert max(spread) < TH.slow_rank_pct / 2, spread
    if truth.links is None:
        assert not planted & {(r, c) for r in ("slow_link", "small_packets") for c in cards}
        return
    bw = truth.bandwidths()
    median = statistics.median(bw.values())
    for (card, _, _), value in bw.items():
        if ("slow_link", card) in planted:
            assert value < TH.slow_link_pct / 2 / 100 * median, (card, value, median)
        else:
            assert value >= 0.9 * median, (card, value, median)
    if not problems:  # clean links are equal within +-5%
        mean = statistics.fmean(bw.values())
        assert all(abs(v / mean - 1) <= 0.05 for v in bw.values()), bw
    for card in cards:
        mb, share = truth.mb_per_call(card), truth.small_share(card)
        if ("small_packets", card) in planted and ("slow_link", card) in planted:
            # The slow link's calls (HCCS, SDMA): under half of SDMA's 16 MB line, all the time.
            sdma_share = truth.small_share(card, TH.small_sdma_mb)
            assert mb <= TH.small_sdma_mb / 2 and sdma_share >= 2 * TH.small_packet_pct, (card, mb, sdma_share)
        elif ("small_packets", card) in planted:
            assert mb <= 0.1 and share >= 2 * TH.small_packet_pct, (card, mb, share)
        else:
            assert mb >= 2 * TH.small_sdma_mb and share == 0, (card, mb, share)


def test_manifest_counts(base):
    """Planted.count: steps, synchronise calls, links, collective calls (module docstring)."""
    for problems, want in (
        (("comm_not_overlapped",), {("comm_not_overlapped", "0"): 4, ("comm_not_overlapped", "1"): 4}),
        (("free_time",), {("free_time", "0"): 4, ("free_time", "1"): 4}),
        (("slow_rank",), {("slow_rank", "0"): 4, ("comm_not_overlapped", "1"): 4}),
        (("slow_link",), {("slow_link", "0"): 1, ("small_packets", "0"): 12}),
        (("small_packets",), {("small_packets", "0"): 12, ("small_packets", "1"): 12}),
    ):
        g = _root(base, "torch_db", problems)
        assert {(p.rule, p.card): p.count for p in g.planted} == want
    g = _root(base, "torch_db", ("sync_heavy",))
    con = _con(next(g.root.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db")))
    (n,) = con.execute(
        "SELECT count(*) FROM CANN_API a JOIN STRING_IDS s ON s.id = a.name WHERE s.value = ?", (SYNC,)
    ).fetchone()
    con.close()
    assert {(p.rule, p.card): p.count for p in g.planted}[("sync_heavy", "0")] == n > 0
    assert {p.op_type for p in g.planted} == {""}
    assert {p.op_type for p in _root(base, "torch_db", ("small_packets",)).planted} == {"allReduce"}


def test_no_plant_without_the_files_that_show_it(tmp_path):
    """Links and sizes: not in msprof's text export, nor on one card; host calls need a timeline."""
    g = generate(tmp_path / "a", layout="era_b", cards=2, problems=("slow_link", "small_packets", "sync_heavy"))
    assert {p.rule for p in g.planted} == {"sync_heavy"}
    g = generate(tmp_path / "b", layout="torch_npu", cards=2, problems=("sync_heavy",), timeline=False)
    assert g.planted == ()
    g = generate(tmp_path / "c", layout="torch_npu", cards=1, problems=TRAINING_PROBLEMS, steps=2)
    assert {p.rule for p in g.planted} == {"free_time", "sync_heavy"}


def test_training_files_leave_the_other_files_alone(tmp_path):
    """training=True adds files and changes none: the same op_summary and timeline."""
    a = generate(tmp_path / "a", layout="era_b", cards=2, steps=2, ops_per_step=80)
    b = generate(tmp_path / "b", layout="era_b", cards=2, steps=2, ops_per_step=80, training=True)
    for name in ("op_summary_20240605100000.csv", "msprof_20240605100000.json"):
        pa, pb = (next(x.root.rglob(name)) for x in (a, b))
        assert pa.read_bytes() == pb.read_bytes()
    assert not list(a.root.rglob("api_statistic_*.csv")) and list(b.root.rglob("api_statistic_*.csv"))


# --------------------------------------------------------------------------- the views show it


def _views(root: Path):
    return read_training_views(open_profile(root, cache=FrameCache(enabled=False)))


@pytest.mark.parametrize("problems", CASES, ids=lambda p: "-".join(p) or "clean")
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_views_show_the_files_figures(base, layout, problems):
    g = _root(base, layout, problems)
    truth = TRUTH[layout](g.root)
    v = _views(g.root)
    steps = v.steps.group_by("card").agg(pl.col("step_us", "compute_us", "comm_not_overlapped_us", "free_us").sum())
    for r in steps.iter_rows(named=True):
        card = r["card"]
        assert r["step_us"] == pytest.approx(truth.span(card) / 1000, abs=0.01)
        assert 100 * r["comm_not_overlapped_us"] / r["step_us"] == pytest.approx(truth.cno_pct(card), abs=0.01)
        assert 100 * r["free_us"] / r["step_us"] == pytest.approx(truth.free_pct(card), abs=0.01)
        sync = v.host_api.filter((pl.col("card") == card) & (pl.col("api") == SYNC))["total_us"].sum()
        assert sync == pytest.approx(truth.sync[card] / 1000, abs=0.01)
    if truth.links is None:
        return
    got = {(r["card"], r["src"], r["dst"]): r["bandwidth_gbps"] for r in v.links.iter_rows(named=True)}
    assert got == pytest.approx(truth.bandwidths(), rel=1e-6)
    for card in sorted(truth.steps):
        comm = v.communication.filter(pl.col("card") == card)
        assert comm["size_mb"].sum() / comm["count"].sum() == pytest.approx(truth.mb_per_call(card), rel=1e-6)


@pytest.mark.parametrize("problems", [("slow_rank",), ("sync_heavy",), ("small_packets",)], ids="-".join)
@pytest.mark.parametrize("layout", ["torch_npu", "era_b"])
def test_text_and_db_of_one_run_agree(base, layout, problems):
    text = _views(_root(base, f"{'torch' if layout == 'torch_npu' else 'era_b'}_text", problems).root)
    db = _views(_root(base, f"{'torch' if layout == 'torch_npu' else 'era_b'}_db", problems).root)
    key = ["card", "level", "api"]
    assert_frame_equal(
        text.host_api.sort(key).drop("source"), db.host_api.sort(key).drop("source"), check_exact=False, abs_tol=1e-3
    )
    key = ["card", "op_name"]
    cols = ["count", "total_us"] + (["size_mb", "bandwidth_gbps"] if layout == "torch_npu" else [])
    assert_frame_equal(
        text.communication.sort(key).select(*key, *cols),
        db.communication.sort(key).select(*key, *cols),
        check_exact=False,
    )
    if layout == "torch_npu":
        cols = ["card", "step", "step_us", "compute_us", "communication_us", "comm_not_overlapped_us", "free_us"]
        assert_frame_equal(text.steps.select(cols), db.steps.select(cols), check_exact=False, abs_tol=1e-6)
        for view, key in (
            ("bandwidth", ["card", "transport"]),
            ("links", ["card", "group", "src", "dst", "transport"]),
        ):
            a, b = getattr(text, view).sort(key).drop("source"), getattr(db, view).sort(key).drop("source")
            assert_frame_equal(a, b, check_exact=False)
    else:  # the msprof db has no steps: one row per card, the steps' sums
        sums = text.steps.group_by("card").agg(pl.col("compute_us", "communication_us").sum()).sort("card")
        assert_frame_equal(
            sums, db.steps.sort("card").select("card", "compute_us", "communication_us"), check_exact=False
        )


# --------------------------------------------------------------------------- end to end


@cache
def _report(base: Path, layout: str, problems: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """(rule, card, severity) of every finding of `npuscope report --format json`: a real
    `python -m npuscope` for every plant at once in the torch_npu db layout (the most files
    read), `cli.main` in this process for the rest (the same command, without a new
    interpreter per case)."""
    args = ["report", str(_root(base, layout, problems).root), "--format", "json", "--no-cache"]
    args += ["--card", "all"]  # torch_npu's rank folders make a cluster: every rank
    if problems == ALL_SIX and layout == "torch_db":
        res = subprocess.run([sys.executable, "-m", "npuscope", *args], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        out = res.stdout
    else:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert main(args) == 0
        out = buffer.getvalue()
    report = json.loads(out)
    return [(f["rule"], c["card"], f["severity"]) for c in report["cards"] for f in c["findings"]]


@pytest.mark.parametrize("problems", CASES, ids=lambda p: "-".join(p) or "clean")
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_report_names_exactly_the_planted_training_findings(base, layout, problems):
    findings = _report(base, layout, problems)
    got = {(r, c) for r, c, _ in findings if r in TRAINING_PROBLEMS}
    assert got == {(p.rule, p.card) for p in _root(base, layout, problems).planted}
    # Nothing of the training-level plants is blamed on an operator: no warning the clean run
    # of the layout has not (the msprof db's clean run has one: with no step table, its
    # step-boundary waits are host_op_wait).
    warnings = {(r, c) for r, c, sev in findings if sev != "info" and r not in TRAINING_PROBLEMS}
    clean = {(r, c) for r, c, sev in _report(base, layout, ()) if sev != "info" and r not in TRAINING_PROBLEMS}
    assert warnings <= clean
    assert clean == (set() if layout != "era_b_db" else {("host_op_wait", "0"), ("host_op_wait", "1")})


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_report_on_every_plant_at_once(base, layout):
    """Combined plants dilute each other (small packets replace the big buckets, free time and
    synchronisation lengthen the steps): the manifest lists what is left, and the report agrees."""
    findings = _report(base, layout, ALL_SIX)
    got = {(r, c) for r, c, _ in findings if r in TRAINING_PROBLEMS}
    planted = {(p.rule, p.card) for p in _root(base, layout, ALL_SIX).planted}
    assert got == planted
    assert {("free_time", "0"), ("free_time", "1"), ("sync_heavy", "0"), ("slow_rank", "0")} <= planted


@pytest.mark.parametrize("problems", [("free_time",), ("sync_heavy",), ("slow_rank",)], ids="-".join)
@pytest.mark.parametrize("layout", ["torch_text", "era_b_text"])
def test_wait_causes_blame_no_operator(base, layout, problems):
    """The device's extra waits (before each optimizer op, after each synchronisation) stay below
    the long-wait threshold: analysis/waits.py gives them no cause, and the only long waits left
    are the step boundaries (expected)."""
    g = _root(base, layout, problems)
    tasks = diagnose(open_profile(g.root, cache=FrameCache(enabled=False))).tasks
    assert set(tasks["wait_cause"].drop_nulls().unique().to_list()) <= {"expected"}
    long = tasks.filter(pl.col("wait_us") >= TH.long_wait_us)
    assert set(long["op_type"].unique().to_list()) <= {"GatherV2"}  # the step's first op
