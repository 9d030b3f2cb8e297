"""`host_dispatch` and the user's code frame: from operator_details.csv's Call Stack."""

from __future__ import annotations

import csv
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from npuscope.analysis import diagnose
from npuscope.analysis.findings import Finding
from npuscope.analysis.stacks import with_stacks
from npuscope.analysis.thresholds import Thresholds
from npuscope.fixtures.generate import generate
from npuscope.parsers import FrameCache, ProfileError, open_profile
from npuscope.parsers.stacks import read_db_api_frames, read_db_stacks, read_operator_details, read_stacks

GPT3 = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real" / "torch_npu_2023_gpt3_2rank"
NOT_USER = ("site-packages", "dist-packages", "/torch/", "/torch_npu/", "/paddle/")


def _truth(rank: int) -> list[dict]:
    """operator_details.csv of one rank read with the csv module: per row the operator, its
    host self time and its first frame outside the framework, written `path:line (function)`."""
    path = GPT3 / f"test_rank_{rank}" / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv"
    out = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            frame = None
            for raw in row["Call Stack"].split(";"):
                text = raw.strip()
                if not text or any(s in text for s in NOT_USER) or re.search(r"/lib/python\d", text):
                    continue
                m = re.match(r"^(.*)\((\d+)\): (.*)$", text)
                assert m, text
                frame = f"{m[1]}:{m[2]} ({m[3]})"
                break
            out.append({"op": row["Name"], "frame": frame, "host": float(row["Host Self Duration(us)"])})
    return out


def _heaviest(rows: list[dict]) -> tuple[str, float]:
    per: dict[str, float] = defaultdict(float)
    for r in rows:
        if r["frame"] is not None:
            per[r["frame"]] += r["host"]
    return max(per.items(), key=lambda kv: (kv[1], kv[0]))


@pytest.mark.parametrize("rank", [0, 1])
def test_frames_read_from_the_real_capture(rank):
    path = GPT3 / f"test_rank_{rank}" / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv"
    got = read_operator_details(path, str(rank))
    truth = _truth(rank)
    assert got["op_name"].to_list() == [t["op"] for t in truth]
    assert got["frame"].to_list() == [t["frame"] for t in truth]
    assert got["host_self_us"].to_list() == pytest.approx([t["host"] for t in truth])
    # The profiler's own frames (torch_npu's profiler.step) are never the user's code.
    assert all("torch_npu" not in f for f in got["frame"].drop_nulls())


def test_host_dispatch_names_the_heaviest_frame_of_each_card():
    profile = open_profile(GPT3, cache=FrameCache(enabled=False))
    stacks = read_stacks(profile.capture, profile.cards)
    assert set(stacks["card"]) == {"0", "1"}
    spans = {"0": 1000.0, "1": 1000.0}
    found = with_stacks([], stacks, spans, Thresholds(host_dispatch_pct=10.0))
    assert [f.rule for f in found] == ["host_dispatch", "host_dispatch"]
    for f in found:
        truth = _truth(int(f.card))
        frame, host = _heaviest(truth)
        assert f"most in {frame} " in f.title
        assert f.evidence[0]["frame"] == frame
        assert f.evidence[0]["duration_us"] == pytest.approx(host)
        assert {e["frame"] for e in f.evidence} == {t["frame"] for t in truth if t["frame"]}
        total = sum(t["host"] for t in truth)
        assert f.time_us == pytest.approx(total)
        assert f.share_pct == pytest.approx(100 * total / 1000.0, abs=1e-3)
    # Below the threshold: nothing.
    assert with_stacks([], stacks, {"0": 1e9, "1": 1e9}, Thresholds()) == []


def test_a_recompilation_finding_names_the_frame_instead():
    profile = open_profile(GPT3, cache=FrameCache(enabled=False))
    # GPT-3's operators took ~0.3 ms of host time in a ~268 ms span: under the threshold, and
    # operator_details.csv does not say which operator compiled: no frame is named.
    plain = diagnose(profile)
    assert not [f for f in plain.findings if f.rule == "host_dispatch" or "most in" in f.title]
    diag = diagnose(profile, Thresholds(host_dispatch_pct=0.01))
    # Rank 0 waited before an aclop task (NonZero_MemSet, first of its shape): a suspected
    # recompilation, and that finding names the frame, no host_dispatch beside it.
    assert not [f for f in diag.findings if f.rule == "host_dispatch" and f.card == "0"]
    frame, host = _heaviest(_truth(0))
    recompiled = [f for f in diag.findings if f.card == "0" and f.rule == "recompilation"]
    named = [f for f in recompiled if frame in f.title]
    # One finding of the card says it, the largest; its time and evidence are the rule's own.
    assert len(named) == 1 and named[0].time_us == max(f.time_us for f in recompiled)
    assert f"most in {frame} " in named[0].title and f"{host:,.0f} us)" in named[0].title
    # Rank 1's long waits all precede collectives (communication, no recompilation): the frame
    # is named by host_dispatch instead.
    frame, host = _heaviest(_truth(1))
    assert not [f for f in diag.findings if f.card == "1" and f.rule == "recompilation"]
    (dispatch,) = [f for f in diag.findings if f.card == "1" and f.rule == "host_dispatch"]
    assert f"most in {frame} " in dispatch.title and f"{host:,.0f} us)" in dispatch.title
    kept = [(f.rule, f.time_us, f.evidence) for f in diag.findings if f.rule != "host_dispatch"]
    assert [(f.rule, f.time_us, f.evidence) for f in plain.findings] == kept


def test_synchronising_operators_are_left_to_sync_heavy():
    stacks = pl.DataFrame(
        {
            "card": ["0", "0"],
            "op_name": ["aten::_local_scalar_dense", "aten::add"],
            "input_shapes": [None, None],
            "frame": ["train.py:10 (step)", "train.py:12 (step)"],
            "host_self_us": [900.0, 50.0],
            "host_total_us": [900.0, 50.0],
            "device_total_us": [0.0, 5.0],
            "source": ["operator_details.csv"] * 2,
        }
    )
    assert with_stacks([], stacks, {"0": 1000.0}, Thresholds()) == []
    (f,) = with_stacks([], stacks, {"0": 100.0}, Thresholds())
    assert f.time_us == 50.0 and "train.py:12 (step)" in f.title


def test_no_stacks_no_claim(tmp_path):
    # Stacks without a user frame (only the framework's) name nothing.
    stacks = pl.DataFrame(
        {
            "card": ["0"],
            "op_name": ["aten::add"],
            "input_shapes": [None],
            "frame": [None],
            "host_self_us": [900.0],
            "host_total_us": [900.0],
            "device_total_us": [0.0],
            "source": ["operator_details.csv"],
        },
        schema_overrides={"frame": pl.String, "input_shapes": pl.String},
    )
    keep = Finding("recompilation", "warning", "t", "0", (), (), 1, 1.0, 1.0, "a")
    assert with_stacks([keep], stacks, {"0": 10.0}, Thresholds()) == [keep]
    # A generated torch_npu capture has no operator_details.csv: no host_dispatch, titles as they were.
    g = generate(tmp_path / "g", layout="torch_npu", cards=1, problems=("recompilation",))
    diag = diagnose(open_profile(g.root, cache=FrameCache(enabled=False)))
    assert not [f for f in diag.findings if f.rule == "host_dispatch" or "most in" in f.title]


def test_a_damaged_stack_file_leaves_the_diagnosis_standing(tmp_path):
    copy = tmp_path / "gpt3"
    shutil.copytree(GPT3, copy)
    damaged = copy / "test_rank_0" / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv"
    damaged.write_bytes(b'Name,Call Stack\n"aten::x,"abc\n')  # a quote left open
    profile = open_profile(copy, cache=FrameCache(enabled=False))
    with pytest.raises(ProfileError, match="operator_details"):
        read_stacks(profile.capture, profile.cards)
    diag = diagnose(profile, Thresholds(host_dispatch_pct=0.01))
    assert diag.findings  # the rest of the rules ran
    named = {f.card for f in diag.findings if "most in" in f.title}
    assert named == {"1"}  # the other card's stacks still count


DB = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real" / "torch_npu_2025_db" / "level1"


def _frame_of(stack: list[str]) -> str | None:
    for text in stack:
        text = text.strip()
        if not text or text.startswith("<") or any(s in text for s in NOT_USER) or re.search(r"/lib/python\d", text):
            continue
        m = re.match(r"^(.*)\((\d+)\): (.*)$", text)
        return f"{m[1]}:{m[2]} ({m[3]})" if m else text
    return None


def _db_truth(rank: int) -> tuple[list[tuple[int, int, int, str | None]], dict[tuple[str, str], list[float]]]:
    """With sqlite3: the outermost framework operator calls of each thread (tid, start, end,
    user frame), and per (CANN API, frame) the durations of its calls, each tied to its operator
    on the same thread or through the Dequeue / Enqueue pair of its connection."""
    path = DB / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{rank}.db"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = dict(con.execute("SELECT id, value FROM STRING_IDS"))
    types = {name: i for i, name in con.execute("SELECT id, name FROM ENUM_API_TYPE")}
    chains: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for cid, depth, sid in con.execute("SELECT id, stackDepth, stack FROM PYTORCH_CALLCHAINS"):
        chains[cid].append((depth, names[sid]))
    rows = con.execute(
        "SELECT startNs, endNs, globalTid, name, callchainId, type, connectionId FROM PYTORCH_API"
    ).fetchall()
    conn = defaultdict(list)
    for i, c in con.execute("SELECT id, connectionId FROM CONNECTION_IDS"):
        conn[i].append(c)
    ops = sorted(
        (int(r[2]), int(r[0]), -int(r[1]), r[4])
        for r in rows
        if r[5] == types["op"] and re.match(r"^(aten|npu|c10d)::", names[r[3]])
    )
    outer, last_end = [], {}
    for tid, start, neg_end, chain in ops:
        if tid in last_end and start < last_end[tid]:
            last_end[tid] = max(last_end[tid], -neg_end)
            continue
        last_end[tid] = max(last_end.get(tid, -neg_end), -neg_end)
        stack = [t for _, t in sorted(chains.get(chain, []))] if chain is not None else []
        outer.append((tid, start, -neg_end, _frame_of(stack)))

    def holder(tid: int, start: int, end: int):
        held = [o for o in outer if o[0] == tid and o[1] <= start and end <= o[2]]
        return held[-1] if held else None

    queue = [r for r in rows if r[5] == types["queue"]]
    enq = {min(conn[r[6]]): (int(r[2]), int(r[0]), int(r[1])) for r in queue if names[r[3]] == "Enqueue"}
    deq = [(int(r[2]), int(r[0]), int(r[1]), min(conn[r[6]])) for r in queue if names[r[3]].startswith("Dequeue")]
    per: dict[tuple[str, str], list[float]] = defaultdict(list)
    for start, end, tid, sid in con.execute("SELECT startNs, endNs, globalTid, name FROM CANN_API"):
        op = holder(tid, start, end)
        if op is None:
            d = [q for q in deq if q[0] == tid and q[1] <= start and end <= q[2]]
            if d and d[-1][3] in enq:
                op = holder(*enq[d[-1][3]])
        if op is not None and op[3] is not None:
            per[(names[sid], op[3])].append((end - start) / 1000.0)
    con.close()
    return outer, per


@pytest.mark.parametrize("rank", [0, 1])
def test_frames_and_api_callers_read_from_the_real_db(rank):
    outer, per = _db_truth(rank)
    got = read_db_stacks(
        DB / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{rank}.db", str(rank)
    )
    assert sorted(got["frame"].to_list(), key=str) == sorted((o[3] for o in outer), key=str)
    assert got["host_self_us"].sum() == pytest.approx(sum((o[2] - o[1]) / 1000.0 for o in outer))
    frames = read_db_api_frames(
        DB / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{rank}.db", str(rank)
    )
    assert {
        (a, f): (c, pytest.approx(t)) for a, f, c, t in frames.select("api", "frame", "calls", "total_us").iter_rows()
    } == {k: (len(v), sum(v)) for k, v in per.items()}
    # The compiles of this CNN come from the forward call of the training loop.
    compiles = {f: v for (a, f), v in per.items() if a == "aclopCompileAndExecute"}
    assert compiles and all("main.py" in f for f in compiles)


def test_recompilation_names_the_frame_that_compiled_in_a_db_capture():
    diag = diagnose(open_profile(DB, cache=FrameCache(enabled=False)))
    for card in ("0", "1"):
        _, per = _db_truth(int(card))
        compiles = {f: (len(v), sum(v)) for (a, f), v in per.items() if a == "aclopCompileAndExecute"}
        frame, (calls, total) = max(compiles.items(), key=lambda kv: (kv[1][1], kv[0]))
        (named,) = [f for f in diag.findings if f.card == card and "aclopCompileAndExecute called from" in f.title]
        assert named.rule == "recompilation"
        assert f"called from {frame} ({calls} call(s), {total:,.0f} us)" in named.title
    assert not [f for f in diag.findings if f.rule == "host_dispatch"]


def _report(path: Path, *extra: str) -> dict:
    res = subprocess.run(
        [sys.executable, "-m", "npuscope", "report", str(path), "--format", "json", "--no-cache", *extra],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_report_json_names_the_frames(tmp_path):
    # The db capture: the recompilation finding of each card names the frame that compiled.
    report = _report(DB, "--card", "all")  # two rank folders: a cluster, every rank asked for
    titles = [f["title"] for card in report["cards"] for f in card["findings"] if f["rule"] == "recompilation"]
    assert (
        sum(
            "aclopCompileAndExecute called from /home/z30057886/imagenet_script/main.py:354 (train)" in t
            for t in titles
        )
        == 2
    )
    # A capture whose host time is dispatch: host_dispatch names the user's line.
    folder = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    folder.mkdir(parents=True)
    with open(folder / "kernel_details.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)"])
        for i in range(10):
            w.writerow([1, f"Add_{i}", "Add", "AI_VECTOR_CORE", f"{1_700_000_000_000_000 + 100 * i}.000", 5.0, 0])
    stack = "/opt/site-packages/torch/nn/modules/module.py(1501): _call_impl;\n/home/me/train.py(42): forward;\n/home/me/train.py(7): <module>"
    with open(folder / "operator_details.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)"])
        w.writerow(["aten::add", "4,4;4,4", stack, 300.0, 310.0])
        w.writerow(["aten::item", "", stack, 900.0, 900.0])
    report = _report(tmp_path)
    (found,) = [f for card in report["cards"] for f in card["findings"] if f["rule"] == "host_dispatch"]
    assert "most in /home/me/train.py:42 (forward) (aten::add, 1 call(s), 300 us)" in found["title"]
    assert found["time_us"] == 300.0 and found["evidence"][0]["frame"] == "/home/me/train.py:42 (forward)"
