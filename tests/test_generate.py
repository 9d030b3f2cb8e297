"""Tests of the synthetic profile generator itself (fixtures/generate.py).

They read what the generator wrote with the csv and json modules only, so a bug in the
generator cannot hide behind the same code path in a parser.
"""

from __future__ import annotations

import collections
import csv
import hashlib
import importlib.util
import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "fixtures" / "samples"

try:
    from npuscope.fixtures import generate as gen
except ImportError:  # not installed yet: load the file directly
    _spec = importlib.util.spec_from_file_location("_npuscope_generate", ROOT / "fixtures" / "generate.py")
    gen = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = gen
    _spec.loader.exec_module(gen)

# The operator-level problems (the training-level ones: tests/test_generate_training.py).
ALL = tuple(p for p in gen.PROBLEMS if p not in gen.TRAINING_PROBLEMS)


# --------------------------------------------------------------------------- helpers


def _ns(text: str) -> int:
    """'1717575960208020.758\\t' / '151.000' / '20.000000' / '0' -> integer ns."""
    text = text.strip().strip("\t")
    if "." not in text:
        return int(text) * 1000
    whole, frac = text.split(".")
    assert len(frac) in (3, 6), text
    if len(frac) == 6:
        assert frac[3:] == "000", text
    return int(whole) * 1000 + int(frac[:3])


def _read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    for r in rows[1:]:
        assert len(r) == len(header)
    return header, [dict(zip(header, r)) for r in rows[1:]]


def _first_line(path: Path) -> str:
    with open(path, newline="", encoding="utf-8") as fh:
        return fh.readline().rstrip("\r\n")


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _check_waits(rows: list[dict], start: str, dur: str, wait: str, ns_start: bool = False):
    """Rows of one card: sorted by start, wait = max(0, start - prev start - prev dur)."""
    prev = None
    for r in rows:
        s = int(r[start]) if ns_start else _ns(r[start])
        d, w = _ns(r[dur]), _ns(r[wait])
        if prev is None:
            assert w == 0
        else:
            assert s > prev[0]
            assert w == max(0, s - prev[0] - prev[1])
        prev = (s, d)


_TORCH_NAMES = {
    "Type": "OP Type",
    "Accelerator Core": "Task Type",
    "Name": "Op Name",
    "Start Time(us)": "Task Start Time(us)",
    "Duration(us)": "Task Duration(us)",
    "Wait Time(us)": "Task Wait Time(us)",
}


def _as_era_b_names(rows: list[dict]) -> list[dict]:
    return [{_TORCH_NAMES.get(k, k): v for k, v in r.items()} for r in rows]


def _independent_findings(rows: list[dict], typ: str, core: str, dur: str, wait: str):
    """What a reader finds with the thresholds of DOMAIN.md, per op type."""
    comp = [r for r in rows if r[core] not in ("COMMUNICATION", "HCCL")]
    totals = collections.Counter()
    for r in comp:
        totals[(r[typ], r[core])] += _ns(r[dur])
    grand = sum(totals.values())
    by_type = collections.defaultdict(list)
    for r in comp:
        by_type[r[typ]].append(_ns(r[dur]))
    medians = {t: sorted(v)[len(v) // 2] for t, v in by_type.items()}
    return {
        "ai_cpu": collections.Counter(r[typ] for r in rows if r[core] == "AI_CPU" and _ns(r[dur]) > 20_000),
        "long_task": collections.Counter(r[typ] for r in rows if _ns(r[dur]) > 1_000_000),
        "long_wait_1ms": collections.Counter(r[typ] for r in rows if _ns(r[wait]) >= 1_000_000),
        "wait_over_2ms": collections.Counter(r[typ] for r in rows if _ns(r[wait]) >= 2_000_000),
        "wait_over_100us": collections.Counter(r[typ] for r in rows if _ns(r[wait]) > 100_000),
        "ratio": {k: 100 * v / grand for k, v in totals.items()},
        "outliers": collections.Counter(r[typ] for r in comp if _ns(r[dur]) > 5 * medians[r[typ]]),
    }


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def era_b(tmp_path_factory):
    out = tmp_path_factory.mktemp("era_b")
    return gen.generate(out, layout="era_b", cards=2, steps=4, ops_per_step=120, seed=3, problems=ALL)


# --------------------------------------------------------------------------- tests


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    kw = dict(layout="era_b", cards=2, steps=2, ops_per_step=80, problems=ALL)
    a = gen.generate(tmp_path / "a", seed=7, **kw)
    b = gen.generate(tmp_path / "b", seed=7, **kw)
    gen.generate(tmp_path / "c", seed=8, **kw)
    da, db, dc = (_tree_digest(tmp_path / x) for x in "abc")
    assert da == db
    assert da.keys() == dc.keys() and da != dc
    assert a.planted == b.planted and a.rows_per_card == b.rows_per_card


@pytest.mark.parametrize("layout", gen.LAYOUTS)
def test_files_land_where_the_layout_says(tmp_path, layout):
    g = gen.generate(tmp_path, layout=layout, cards=2, steps=1, ops_per_step=80)
    rel = sorted(str(p.relative_to(tmp_path)) for p in g.files)
    on_disk = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert rel == on_disk
    prof = "ascend_profiling/" + gen.DEFAULT_PROF_NAME
    if layout == "era_b":
        assert g.root == tmp_path / "ascend_profiling"
        out = f"{prof}/mindstudio_profiler_output"
        assert rel == sorted(
            f"{out}/{n}_20240605100000.{ext}"
            for n, ext in (("op_summary", "csv"), ("op_statistic", "csv"), ("step_trace", "csv"), ("msprof", "json"))
        )
    elif layout == "era_a":
        assert g.root == tmp_path / "ascend_profiling"
        expect = []
        for n in "01":
            d = f"{prof}/device_{n}"
            expect += [
                f"{d}/summary/op_summary_{n}_1.csv",
                f"{d}/summary/op_statistic_{n}_1.csv",
                f"{d}/summary/step_trace_{n}_1.csv",
                f"{d}/timeline/msprof_{n}_1.json",
                f"{d}/start_info.{n}",
                f"{d}/end_info.{n}",
                f"{d}/info.json.{n}",
            ]
        assert rel == sorted(expect)
    else:
        assert g.root == tmp_path
        folders = sorted({Path(r).parts[0] for r in rel})
        assert len(folders) == 2 and all(f.endswith("_ascend_pt") for f in folders)
        for i, f in enumerate(folders):
            for name in ("kernel_details.csv", "op_statistic.csv", "trace_view.json"):
                assert f"{f}/ASCEND_PROFILER_OUTPUT/{name}" in rel
            assert f"{f}/profiler_info_{i}.json" in rel


def test_headers_match_the_real_samples(tmp_path):
    golden = SAMPLES / "msprof_golden" / "mindstudio_profiler_output"
    g = gen.generate(tmp_path / "b", layout="era_b", steps=1, ops_per_step=80)
    by_name = {p.name.split("_2024")[0]: p for p in g.files}
    assert _first_line(by_name["op_summary"]) == _first_line(golden / "op_summary_20240605100000.csv")
    assert _first_line(by_name["op_statistic"]) == _first_line(golden / "op_statistic_20240605100000.csv")

    g = gen.generate(tmp_path / "t", layout="torch_npu", steps=1, ops_per_step=80)
    kd = next(p for p in g.files if p.name == "kernel_details.csv")
    assert _first_line(kd) == _first_line(
        SAMPLES / "torch_npu_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    )
    st = next(p for p in g.files if p.name == "op_statistic.csv")
    assert _first_line(st) == ",".join(gen.OP_STATISTIC_COLUMNS)

    g = gen.generate(tmp_path / "a5", layout="era_a", era_a_ns=True, pmu=False, steps=1, ops_per_step=80)
    summ = next(p for p in g.files if p.name.startswith("op_summary"))
    assert _first_line(summ) == _first_line(
        SAMPLES / "cann5x_device_summary" / "device_0" / "summary" / "op_summary_0_1.csv"
    )

    g = gen.generate(tmp_path / "a6", layout="era_a", steps=1, ops_per_step=80)
    summ = next(p for p in g.files if p.name.startswith("op_summary"))
    assert _first_line(summ) == ",".join(gen.ERA_A_HEADER + gen.PMU_COLUMNS_ERA_A)
    assert "Device_id" not in _first_line(summ) and "OP State" not in _first_line(summ)

    g = gen.generate(tmp_path / "np", layout="era_b", pmu=False, steps=1, ops_per_step=80)
    summ = next(p for p in g.files if p.name.startswith("op_summary"))
    assert _first_line(summ).endswith(",Output Formats,Context ID")


def test_raw_cell_quirks(era_b, tmp_path):
    summ = next(p for p in era_b.files if p.name.startswith("op_summary"))
    raw = summ.read_bytes().split(b"\n")
    first = raw[1].split(b",")
    assert first[8].endswith(b"\t") and b'"' not in first[8]  # start time: unquoted, TAB
    assert b'"""' in raw[1]  # shapes keep their own quotes
    assert first[10] == b"0"  # the merged file's first wait
    assert b"\r\n" not in summ.read_bytes()
    # A scalar output is an empty quoted shape; N/A fills communication and AI_CPU PMU cells.
    text = summ.read_text()
    assert ',""""""' in text
    _, rows = _read_csv(summ)
    comm = [r for r in rows if r["Task Type"] == "COMMUNICATION"]
    assert comm and all(r["Task ID"] == r["Stream ID"] == "N/A" for r in comm)
    assert all(r["cube_utilization(%)"] == "N/A" for r in rows if r["Task Type"] == "AI_CPU")
    assert all(r["Input Shapes"] == "N/A" or r["Input Shapes"].startswith('"') for r in rows)

    g = gen.generate(tmp_path / "t", layout="torch_npu", steps=1, ops_per_step=80, crlf=True)
    kd = next(p for p in g.files if p.name == "kernel_details.csv")
    data = kd.read_bytes()
    assert data.count(b"\r\n") == data.count(b"\n") > 1
    assert b',"1717575960208020.758\t",' in data  # torch_npu quotes the start time


def test_manifest_matches_rows_read_with_csv(era_b):
    summ = [p for p in era_b.files if p.name.startswith("op_summary")]
    stat = next(p for p in era_b.files if p.name.startswith("op_statistic"))
    rows = [r for p in summ for r in _read_csv(p)[1]]
    per_card = collections.defaultdict(list)
    for r in rows:
        per_card[r["Device_id"]].append(r)
    assert {c: len(v) for c, v in per_card.items()} == era_b.rows_per_card
    assert era_b.cards == ("0", "1")
    # Later cards' first rows are max(0, negative) = 0.000000, as the exporter prints them.
    assert per_card["1"][0]["Task Wait Time(us)"] == "0.000000"

    planted = {(p.rule, p.card): p for p in era_b.planted}
    assert {p.rule for p in era_b.planted} == set(ALL)
    for card, rs in per_card.items():
        _check_waits(rs, "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)")
        f = _independent_findings(rs, "OP Type", "Task Type", "Task Duration(us)", "Task Wait Time(us)")
        rule = lambda name, card=card: planted.get((name, card))  # noqa: E731

        p = rule("ai_cpu")
        assert f["ai_cpu"] == ({p.op_type: p.count} if p else {})
        p = rule("long_task")
        assert f["long_task"] == ({p.op_type: p.count} if p else {})
        p = rule("recompilation")
        # Step boundaries and host waits are 1-3 ms: only recompilation is always >= 2 ms.
        f["wait_over_2ms"].pop("GatherV2", None)
        if rule("host_op_wait"):
            f["wait_over_2ms"].pop(rule("host_op_wait").op_type, None)
        if p:
            assert f["wait_over_2ms"] == {p.op_type: p.count}
            shapes = [r["Input Shapes"] for r in rs if r["OP Type"] == p.op_type]
            assert len(shapes) == p.count == len(set(shapes)) >= 20
            assert not any(r["Op Name"].startswith("aclnn") for r in rs if r["OP Type"] == p.op_type)
        else:
            assert not f["wait_over_2ms"]
        p = rule("host_op_wait")
        assert f["long_wait_1ms"].pop("GatherV2", 0) == 3  # every step but the first
        if p:
            hw = [r for r in rs if r["OP Type"] == p.op_type and _ns(r["Task Wait Time(us)"]) >= 1_000_000]
            assert len(hw) == p.count and all(_ns(r["Task Wait Time(us)"]) <= 3_000_000 for r in hw)
        p = rule("dominant_op_type")
        big = {k: v for k, v in f["ratio"].items() if v >= 40}
        if p:
            assert list(big) == [(p.op_type, "AI_CORE")]
            assert p.count == sum(1 for r in rs if r["OP Type"] == p.op_type)
        else:
            assert set(k[0] for k in big) <= {"MatMulV3", "MatMulV2", "BatchMatMul"}
        p = rule("duration_outlier")
        assert f["outliers"].get("RmsNorm", 0) == (p.count if p else 0)

    # op_statistic agrees with op_summary: counts, totals, ratios per card, sorted by total.
    _, stats = _read_csv(stat)
    for card, rs in per_card.items():
        mine = [s for s in stats if s["Device_id"] == card]
        totals = [float(s["Total Time(us)"]) for s in mine]
        assert totals == sorted(totals, reverse=True)
        assert abs(sum(float(s["Ratio(%)"]) for s in mine) - 100) < 0.05
        for s in mine:
            durs = [
                _ns(r["Task Duration(us)"])
                for r in rs
                if r["OP Type"] == s["OP Type"] and r["Task Type"] == s["Core Type"]
            ]
            assert int(s["Count"]) == len(durs)
            assert _ns(s["Total Time(us)"]) == sum(durs)
            assert _ns(s["Max Time(us)"]) == max(durs)
        dom = planted.get(("dominant_op_type", card))
        if dom:
            row = next(s for s in mine if s["OP Type"] == dom.op_type)
            assert float(row["Ratio(%)"]) >= 40


def test_clean_profile_has_nothing_to_find(tmp_path):
    for layout in ("era_b", "torch_npu"):
        g = gen.generate(tmp_path / layout, layout=layout, cards=2, steps=3, ops_per_step=100, problems=())
        assert g.planted == ()
        for p in g.files:
            if p.name.startswith(("op_summary", "kernel_details")):
                _, rows = _read_csv(p)
                names = (
                    ("Type", "Accelerator Core", "Duration(us)", "Wait Time(us)")
                    if layout == "torch_npu"
                    else ("OP Type", "Task Type", "Task Duration(us)", "Task Wait Time(us)")
                )
                f = _independent_findings(rows, *names)
                assert not f["ai_cpu"] and not f["long_task"] and not f["outliers"]
                assert set(f["wait_over_100us"]) <= {"GatherV2", "SoftmaxGrad"}
                assert all(k[0] in ("MatMulV3", "MatMulV2") for k, v in f["ratio"].items() if v >= 40)


def _timeline_check(
    events: list,
    summary_rows: list[dict],
    planted: dict,
    card: str,
    start_col: str = "Task Start Time(us)",
    ts_of=lambda e: e["ts"],
):
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    meta = collections.Counter(json.dumps(e, sort_keys=True) for e in events if e["ph"] == "M")
    assert set(meta.values()) == {2}  # metadata repeated once
    xs = [e for e in events if e["ph"] == "X"]
    assert [ts_of(e) for e in xs] != sorted(ts_of(e) for e in xs)  # not sorted
    device = [e for e in xs if procs[e["pid"]] == "Ascend Hardware"]
    assert sorted(ts_of(e) for e in device) == sorted(
        r[start_col].strip("\t") for r in summary_rows if r["Task Type"] not in ("COMMUNICATION", "HCCL")
    )
    # Every HostToDevice flow: string id > 2**53, f at the ts/pid/tid of a device event.
    at = {(e["pid"], e["tid"], e["ts"]) for e in xs}
    flows = collections.defaultdict(dict)
    for e in events:
        if e.get("cat") == "HostToDevice":
            flows[e["id"]][e["ph"]] = e
    assert len(flows) == len(summary_rows)
    for fid, fl in flows.items():
        assert isinstance(fid, str) and int(fid) > 2**53
        assert procs[fl["s"]["pid"]] == "CANN"
        assert fl["f"]["bp"] == "e" and (fl["f"]["pid"], fl["f"]["tid"], fl["f"]["ts"]) in at
    # Recompilation: one compile event per planted task, covering most of the device gap.
    compiles = [e for e in xs if e["name"] == "AscendCL@aclopCompileAndExecute"]
    rc = planted.get(("recompilation", card))
    assert len(compiles) == (rc.count if rc else 0)
    if rc:
        gaps = {}
        for r in summary_rows:
            if r["OP Type"] == rc.op_type:
                s = _ns(r[start_col])
                gaps[s] = _ns(r["Task Wait Time(us)"])
        for e in compiles:
            c0 = _ns(str(e["ts"]))
            c1 = c0 + round(e["dur"] * 1000)
            s = min(x for x in gaps if x > c1)
            assert c1 <= s and (c1 - c0) >= 0.9 * gaps[s]
    hw = planted.get(("host_op_wait", card))
    syncs = [e for e in xs if e["name"] in ("AscendCL@aclrtSynchronizeStream", "AscendCL@aclrtMemcpy")]
    assert bool(syncs) == bool(hw)


def test_timeline_matches_op_summary(era_b):
    events = json.loads(next(p for p in era_b.files if p.suffix == ".json").read_bytes())
    assert isinstance(events, list)
    _, rows = _read_csv(next(p for p in era_b.files if p.name.startswith("op_summary")))
    planted = {(p.rule, p.card): p for p in era_b.planted}
    labels = {e["pid"]: e["args"]["labels"] for e in events if e["name"] == "process_labels"}
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(set(names.values())) == ["AI Core Freq", "Ascend Hardware", "CANN", "Communication"]
    assert all(isinstance(e["ts"], str) for e in events if "ts" in e)
    for card in era_b.cards:
        hw_pid = next(p for p, n in names.items() if n == "Ascend Hardware" and labels[p] == f"NPU {card}")
        # The card's CANN process is the one whose flows end on this card's hardware.
        mine_ids = {
            e["id"]
            for e in events
            if e.get("ph") == "f"
            and e["pid"]
            in {hw_pid} | {p for p, n in names.items() if n == "Communication" and labels[p] == f"NPU {card}"}
        }
        cann = {e["pid"] for e in events if e.get("ph") == "s" and e["id"] in mine_ids}
        assert len(cann) == 1
        pids = cann | {p for p in names if labels.get(p) == f"NPU {card}"}
        card_events = [e for e in events if e["pid"] in pids]
        card_rows = [r for r in rows if r["Device_id"] == card]
        _timeline_check(card_events, card_rows, planted, card)


def test_torch_and_era_a_timelines(tmp_path):
    g = gen.generate(tmp_path / "t", layout="torch_npu", cards=2, steps=4, ops_per_step=80, problems=ALL)
    planted = {(p.rule, p.card): p for p in g.planted}
    for i, card in enumerate(g.cards):
        folder = next(p for p in g.files if p.name == f"profiler_info_{i}.json").parent
        out = folder / "ASCEND_PROFILER_OUTPUT"
        events = json.loads((out / "trace_view.json").read_bytes())
        names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
        assert names == {"Python", "CANN", "Ascend Hardware", "Overlap Analysis", "Communication"}
        _, rows = _read_csv(out / "kernel_details.csv")
        _check_waits(rows, "Start Time(us)", "Duration(us)", "Wait Time(us)")
        _timeline_check(events, _as_era_b_names(rows), planted, card)

    g = gen.generate(tmp_path / "a", layout="era_a", cards=2, steps=4, ops_per_step=80, problems=ALL)
    b = gen.generate(tmp_path / "b", layout="era_b", cards=2, steps=4, ops_per_step=80, problems=ALL)
    _, b_rows = _read_csv(next(p for p in b.files if p.name.startswith("op_summary")))
    planted = {(p.rule, p.card): p for p in g.planted}
    for card in g.cards:
        dev = g.root / gen.DEFAULT_PROF_NAME / f"device_{card}"
        start_info = json.loads((dev / f"start_info.{card}").read_text())
        begin_us, mono_ns = int(start_info["collectionTimeBegin"]), int(start_info["clockMonotonicRaw"])
        _, rows = _read_csv(dev / "summary" / f"op_summary_{card}_1.csv")
        _check_waits(rows, "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)")
        # Device clock + start_info = the epoch times Era B writes for the same seed.
        epoch = [begin_us * 1000 + _ns(r["Task Start Time(us)"]) - mono_ns for r in rows]
        assert epoch == [_ns(r["Task Start Time(us)"]) for r in b_rows if r["Device_id"] == card]
        events = json.loads((dev / "timeline" / f"msprof_{card}_1.json").read_bytes())
        assert all(isinstance(e["ts"], float) for e in events if "ts" in e)
        assert {e["args"]["name"] for e in events if e["name"] == "process_name"} == {
            "CANN",
            "Ascend Hardware",
            "HCCL",
            "AI Core Freq",
        }
        assert all("Stream Id" in e["args"] for e in events if e["ph"] == "X" and e["pid"] == 5)
        for e in events:  # compare as the op_summary text for the shared check
            if "ts" in e:
                e["ts"] = f"{round(e['ts'] * 1000) // 1000}.{round(e['ts'] * 1000) % 1000:03d}"
        _timeline_check(events, rows, planted, card)
        hccl = [r for r in rows if r["Task Type"] == "HCCL"]
        assert hccl and all(r["Task ID"] == "N/A" for r in hccl)

    g = gen.generate(tmp_path / "ns", layout="era_a", era_a_ns=True, steps=1, ops_per_step=80)
    _, rows = _read_csv(next(p for p in g.files if p.name.startswith("op_summary")))
    _check_waits(rows, "Task Start Time", "Task Duration(us)", "Task Wait Time(us)", ns_start=True)
    assert rows[0]["Task Start Time"] == "542118179416190"


def test_slices_and_json_size(tmp_path):
    g = gen.generate(tmp_path / "s", cards=2, rows=700, ops_per_step=80, slice_rows=500, json_slice_bytes=150_000)
    out = g.root / gen.DEFAULT_PROF_NAME / "mindstudio_profiler_output"
    summ = sorted(out.glob("op_summary_slice_*_20240605100000.csv"))
    assert [p.name.split("_")[3] for p in summ] == ["0", "1", "2"]
    counts = [len(_read_csv(p)[1]) for p in summ]
    assert counts == [500, 500, 400]
    slices = sorted(out.glob("msprof_slice_*_20240605100000.json"))
    assert len(slices) > 2 and not (out / "msprof_20240605100000.json").exists()
    flows = collections.Counter()
    for p in slices:
        events = json.loads(p.read_bytes())
        assert any(e["ph"] == "M" for e in events)
        flows.update(e["ph"] for e in events if e.get("cat") == "HostToDevice")
    assert flows == {"s": 1400, "f": 1400}

    g = gen.generate(tmp_path / "mb", layout="torch_npu", steps=2, ops_per_step=80, json_mb=0.4)
    size = sum(p.stat().st_size for p in g.files if p.suffix == ".json" and p.name == "trace_view.json")
    assert 0.3e6 < size < 0.5e6


def test_cli_and_demo(tmp_path):
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert (
            gen.main(
                [
                    str(tmp_path / "cli"),
                    "--layout",
                    "era_a",
                    "--cards",
                    "2",
                    "--rows",
                    "300",
                    "--clean",
                    "--quiet",
                    "--no-timeline",
                ]
            )
            == 0
        )
    assert buf.getvalue().strip() == str(tmp_path / "cli" / "ascend_profiling")
    assert list((tmp_path / "cli").rglob("info.json.1"))
    assert not list((tmp_path / "cli").rglob("msprof_*.json"))

    g = gen.write_demo(tmp_path / "demo")
    size = sum(p.stat().st_size for p in g.files)
    assert size < 3_000_000
    assert g.cards == ("0", "1") and g.layout == "era_b"
    assert {p.rule for p in g.planted} == set(gen.DEFAULT_PROBLEMS)
    assert min(g.rows_per_card.values()) >= 1000
