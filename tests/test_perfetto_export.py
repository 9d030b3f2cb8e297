"""`npuscope export --perfetto`: the written trace decoded with Perfetto's own protobuf classes.

What Perfetto needs of a trace, checked on the file as written: on every track slices that
nest or are disjoint (never partly overlapping: a begin / end pair of one slice closes another
one's slice otherwise), integer timestamps, flows whose two ends exist; and what npuscope
promises: the slices are the frames' tasks and host events (names, starts, durations), the
steps, the wait causes and the findings. The truth comes from the frames and, for the demo,
from its op_summary CSV and msprof JSON read with csv / json. The checker itself is run on
hand-made bad traces first: a check that cannot fail proves nothing.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pytest

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")

from npuscope.analysis import diagnose  # noqa: E402
from npuscope.analysis.perfetto_export import NOT_HOST_PROCESSES, _lanes, _Slice, perfetto_trace  # noqa: E402
from npuscope.cli import main  # noqa: E402
from npuscope.parsers import FrameCache, open_profile  # noqa: E402
from npuscope.parsers.steps import step_windows  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "fixtures" / "samples"
DEMO = ROOT / "fixtures" / "demo"
DEMO_OUT = next(DEMO.glob("ascend_profiling/PROF_*/mindstudio_profiler_output"))
TORCH_NPU = SAMPLES / "real" / "torch_npu_2024_cnn" / "level1" / "rank0_ascend_pt"
MSPROF_DB = SAMPLES / "real" / "msprof_db_2023" / "msprof_0.db"
GOLDEN = SAMPLES / "msprof_golden"
GPT3_RANK1 = SAMPLES / "real" / "torch_npu_2023_gpt3_2rank" / "test_rank_1"

TASK_TRACKS = ("Stream ", "Collectives", "Tasks (no stream id)")
FIXED = ("Steps", "Findings", "Waits")


# --------------------------------------------------------------------------- the decoder and checker


@dataclass
class Slice:
    track: int
    name: str
    ts: int
    end: int | None = None
    args: dict[str, object] = field(default_factory=dict)
    flows: list[int] = field(default_factory=list)
    terminating: list[int] = field(default_factory=list)


@dataclass
class Decoded:
    tracks: dict[int, dict[str, object]]  # uuid -> name, parent, process (name), pid
    slices: list[Slice]
    instants: list[Slice]
    errors: list[str]

    def card_of(self, uuid: int) -> str | None:
        """The process (card) a track belongs to, through its parents."""
        seen = 0
        while uuid in self.tracks and seen < 100:
            t = self.tracks[uuid]
            if t["process"] is not None:
                return str(t["process"])
            uuid = int(t["parent"] or 0)
            seen += 1
        return None

    def base(self, uuid: int) -> str:
        """The track's name, or for an overlap track its parent's (the track it extends)."""
        t = self.tracks[uuid]
        parent = self.tracks.get(int(t["parent"] or 0))
        if parent is not None and parent["process"] is None and str(t["name"]).startswith(str(parent["name"])):
            return str(parent["name"])
        return str(t["name"])

    def on(self, *prefixes: str) -> list[Slice]:
        return [s for s in self.slices if self.base(s.track).startswith(prefixes)]


def _value(a) -> object:
    kind = a.WhichOneof("value")
    return getattr(a, kind) if kind else None


def decode(data: bytes) -> Decoded:
    """The trace as Perfetto's trace processor reads it: packets in order, interned names
    resolved per sequence, each END closing the innermost open slice of its track."""
    trace = pb.Trace()
    trace.ParseFromString(data)
    tracks: dict[int, dict[str, object]] = {}
    names: dict[int, str] = {}
    arg_names: dict[int, str] = {}
    open_: dict[int, list[Slice]] = {}
    last_ts: dict[int, int] = {}
    slices: list[Slice] = []
    instants: list[Slice] = []
    errors: list[str] = []
    for p in trace.packet:
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            tracks[d.uuid] = {
                "name": d.name,
                "parent": d.parent_uuid if d.HasField("parent_uuid") else None,
                "process": d.process.process_name if d.HasField("process") else None,
                "pid": d.process.pid if d.HasField("process") else None,
            }
        if p.sequence_flags & 1:  # SEQ_INCREMENTAL_STATE_CLEARED
            names.clear()
            arg_names.clear()
        if p.HasField("interned_data"):
            names.update({e.iid: e.name for e in p.interned_data.event_names})
            arg_names.update({e.iid: e.name for e in p.interned_data.debug_annotation_names})
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        ts = p.timestamp
        if not isinstance(ts, int) or not p.HasField("timestamp"):
            errors.append(f"event without an integer timestamp: {e}")
            continue
        if e.track_uuid not in tracks:
            errors.append(f"event on track {e.track_uuid}, which no descriptor declares")
        if ts < last_ts.get(e.track_uuid, 0):
            errors.append(f"track {e.track_uuid}: time goes back at {ts}")
        last_ts[e.track_uuid] = ts
        stack = open_.setdefault(e.track_uuid, [])
        if e.type == pb.TrackEvent.TYPE_SLICE_END:
            if not stack:
                errors.append(f"track {e.track_uuid}: an end at {ts} with no open slice")
                continue
            stack.pop().end = ts
            continue
        name = e.name if e.HasField("name") else names.get(e.name_iid)
        if name is None:
            errors.append(f"event name iid {e.name_iid} not interned")
        args = {(a.name if a.HasField("name") else arg_names.get(a.name_iid)): _value(a) for a in e.debug_annotations}
        s = Slice(e.track_uuid, name or "", ts, None, args, list(e.flow_ids), list(e.terminating_flow_ids))
        if e.type == pb.TrackEvent.TYPE_INSTANT:
            s.end = ts
            instants.append(s)
        elif e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            stack.append(s)
            slices.append(s)
        else:
            errors.append(f"unexpected event type {e.type}")
    for uuid, stack in open_.items():
        if stack:
            errors.append(f"track {uuid}: {len(stack)} slice(s) never closed")
    return Decoded(tracks, slices, instants, errors)


def declared_end(s: Slice) -> int | None:
    """Where the slice says it ends: start + its `duration_us` arg (tasks, steps)."""
    dur = s.args.get("duration_us")
    return None if dur is None else s.ts + round(float(dur) * 1000)


def partial_overlaps(intervals: list[tuple[int, int]]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Pairs of intervals of one track that overlap without one holding the other."""
    bad = []
    stack: list[tuple[int, int]] = []
    for iv in sorted(intervals, key=lambda x: (x[0], -x[1])):
        while stack and stack[-1][1] <= iv[0]:
            stack.pop()
        if stack and iv[1] > stack[-1][1]:
            bad.append((stack[-1], iv))
            continue
        stack.append(iv)
    return bad


def problems(d: Decoded) -> list[str]:
    """Everything Perfetto would draw wrong, or npuscope's trace would claim wrongly."""
    out = list(d.errors)
    by_track: dict[int, list[tuple[int, int]]] = {}
    for s in d.slices:
        if s.end is None:
            continue
        want = declared_end(s)
        if want is not None and want != s.end:
            out.append(
                f"{s.name} at {s.ts}: drawn to {s.end}, declared to {want} (a partly overlapping slice closed it)"
            )
        by_track.setdefault(s.track, []).append((s.ts, want if want is not None else s.end))
    for uuid, intervals in by_track.items():
        for a, b in partial_overlaps(intervals):
            out.append(f"track {d.tracks.get(uuid, {}).get('name')}: {a} and {b} overlap partly")
    starts = Counter(f for s in d.slices + d.instants for f in s.flows)
    ends = Counter(f for s in d.slices + d.instants for f in s.terminating)
    for flow in sorted(set(starts) | set(ends)):
        if starts[flow] != 1 or ends[flow] != 1:
            out.append(f"flow {flow}: {starts[flow]} start(s), {ends[flow]} end(s)")
    return out


# --------------------------------------------------------------------------- the checker can fail


def _bad_trace(*, overlap: bool, dangling: bool) -> bytes:
    """Two tasks on one track: nested (fine) or partly overlapping, and a flow."""
    t = pb.Trace()
    d = t.packet.add()
    d.trusted_packet_sequence_id = 1
    d.track_descriptor.uuid = 7
    d.track_descriptor.name = "Stream 1"
    b_start, b_dur = (5_000, 10.0) if overlap else (2_000, 3.0)
    events = [
        (0, pb.TrackEvent.TYPE_SLICE_BEGIN, "A", 10.0, [1], []),
        (b_start, pb.TrackEvent.TYPE_SLICE_BEGIN, "B", b_dur, [], [] if dangling else [1]),
    ]
    ends = sorted([10_000, b_start + round(b_dur * 1000)])
    for ts, kind, name, dur, flows, term in events:
        p = t.packet.add()
        p.timestamp = ts
        p.trusted_packet_sequence_id = 1
        p.track_event.type = kind
        p.track_event.track_uuid = 7
        p.track_event.name = name
        a = p.track_event.debug_annotations.add()
        a.name = "duration_us"
        a.double_value = dur
        p.track_event.flow_ids.extend(flows)
        p.track_event.terminating_flow_ids.extend(term)
    for ts in ends:
        p = t.packet.add()
        p.timestamp = ts
        p.trusted_packet_sequence_id = 1
        p.track_event.type = pb.TrackEvent.TYPE_SLICE_END
        p.track_event.track_uuid = 7
    return t.SerializeToString()


def test_the_checker_passes_a_good_trace():
    assert problems(decode(_bad_trace(overlap=False, dangling=False))) == []


def test_the_checker_catches_a_partial_overlap():
    found = problems(decode(_bad_trace(overlap=True, dangling=False)))
    assert any("overlap partly" in p for p in found), found
    assert any("a partly overlapping slice closed it" in p for p in found), found


def test_the_checker_catches_a_dangling_flow():
    found = problems(decode(_bad_trace(overlap=False, dangling=True)))
    assert found == ["flow 1: 1 start(s), 0 end(s)"]


def test_the_checker_catches_an_unclosed_slice_and_an_end_too_many():
    t = pb.Trace()
    t.ParseFromString(_bad_trace(overlap=False, dangling=False))
    del t.packet[-1]
    assert any("never closed" in p for p in problems(decode(t.SerializeToString())))
    end = pb.TracePacket()
    end.CopyFrom(t.packet[-1])
    t.packet.add().CopyFrom(end)
    t.packet.add().CopyFrom(end)
    assert any("no open slice" in p for p in problems(decode(t.SerializeToString())))


def test_partial_overlaps_by_itself():
    assert partial_overlaps([(0, 10), (2, 5), (5, 10), (10, 20), (10, 10)]) == []
    assert partial_overlaps([(0, 10), (5, 15)]) == [((0, 10), (5, 15))]


def test_lanes_put_partial_overlaps_on_their_own_lane():
    spans = [(0, 100), (10, 20), (50, 150), (60, 70), (100, 100), (140, 200), (150, 160), (0, 0)]
    slices = [_Slice(a, b, f"s{i}", []) for i, (a, b) in enumerate(spans)]
    lanes = _lanes(slices)
    assert len(lanes) == 2
    placed = [s for lane in lanes for _, s in lane if s is not None]
    assert sorted(id(s) for s in placed) == sorted(id(s) for s in slices)
    for lane in lanes:
        times = [ts for ts, _ in lane]
        assert times == sorted(times)
        assert partial_overlaps([(s.start, s.end) for _, s in lane if s is not None]) == []
        depth = 0
        for _, s in lane:
            depth += 1 if s is not None else -1
            assert depth >= 0
        assert depth == 0


# --------------------------------------------------------------------------- real exports


def _export(path: Path, **kw):
    profile = open_profile(path, cache=FrameCache(enabled=False), **kw)
    diagnosis = diagnose(profile)
    trace = perfetto_trace(profile, diagnosis)
    return profile, diagnosis, trace, decode(trace.data)


def _task_truth(tasks: pl.DataFrame) -> Counter:
    rows = tasks.select("card", "op_name", "start_ns", "duration_us").iter_rows()
    return Counter((c, n, s, s + round(max(d or 0.0, 0.0) * 1000)) for c, n, s, d in rows)


def _host_truth(events: pl.DataFrame | None) -> Counter:
    if events is None:
        return Counter()
    x = events.filter((pl.col("ph") == "X") & ~pl.col("process").is_in(list(NOT_HOST_PROCESSES)))
    rows = x.select("card", "process", "thread", "name", "ts_ns", "dur_ns").iter_rows()
    return Counter((c, f"{p} {t}", n, ts, ts + d) for c, p, t, n, ts, d in rows)


def _decoded_tasks(d: Decoded) -> Counter:
    return Counter((d.card_of(s.track).removeprefix("card "), s.name, s.ts, s.end) for s in d.on(*TASK_TRACKS))


def _decoded_host(d: Decoded) -> Counter:
    host = [s for s in d.slices if not d.base(s.track).startswith((*TASK_TRACKS, *FIXED))]
    return Counter((d.card_of(s.track).removeprefix("card "), d.base(s.track), s.name, s.ts, s.end) for s in host)


CAPTURES = {
    "demo (msprof Era B)": (DEMO, {}),
    "torch_npu 2024 level1": (TORCH_NPU, {}),
    "msprof db 2023": (MSPROF_DB, {}),
    "msprof golden (nested tasks)": (GOLDEN, {}),
    "torch_npu 2023 (overlapping tasks)": (GPT3_RANK1, {}),
}


@pytest.mark.parametrize("name", list(CAPTURES))
def test_export_nests_and_equals_the_frames(name):
    path, kw = CAPTURES[name]
    profile, diagnosis, trace, d = _export(path, **kw)
    assert problems(d) == []
    assert d.slices and all(isinstance(s.ts, int) and s.ts > 0 for s in d.slices + d.instants)
    # Tasks: every row of the tasks frame, on its card, with its start and duration.
    assert _decoded_tasks(d) == _task_truth(profile.tasks)
    assert trace.tasks == profile.tasks.height
    # Host events: every complete event of the host processes, per thread.
    assert _decoded_host(d) == _host_truth(profile.events)
    assert trace.host_slices == sum(_host_truth(profile.events).values())
    # Wait causes and args ride on the task slices.
    truth = Counter(
        (n, s, c) for n, s, c in diagnosis.tasks.select("op_name", "start_ns", "wait_cause").iter_rows() if c
    )
    assert (
        Counter((s.name, s.ts, s.args.get("wait_cause")) for s in d.on(*TASK_TRACKS) if "wait_cause" in s.args) == truth
    )
    waits = d.on("Waits")
    assert Counter((s.end, s.args["wait_cause"]) for s in waits) == Counter((s, c) for _, s, c in truth.elements())
    # Steps: the step windows of the Steps tab.
    steps_from = "STEP_TIME" if profile.source_kind == "db" else "step_trace"
    windows = step_windows(profile.tasks, profile.steps, profile.events, list(profile.cards), steps_from).frame
    assert sorted((s.ts, s.end) for s in d.on("Steps")) == sorted(windows.select("start_ns", "end_ns").iter_rows())
    # Findings: one instant per finding, and the rule on its evidence tasks.
    assert Counter(s.args["rule"] for s in d.instants) == Counter(f.rule for f in diagnosis.findings)
    for f in diagnosis.findings:
        for ev in f.evidence if not f.view else ():
            if ev.get("row") is None:
                continue
            row = diagnosis.tasks.row(ev["row"], named=True)
            hits = [s for s in d.on(*TASK_TRACKS) if s.ts == row["start_ns"] and s.name == row["op_name"]]
            assert any(f.rule in str(s.args.get("findings", "")).split(", ") for s in hits), (f.rule, row["op_name"])
    # Flows: each joins a host slice to a later (or simultaneous) slice, and they are counted.
    flow_src = {f: s for s in d.slices for f in s.flows}
    flow_dst = {f: s for s in d.slices for f in s.terminating}
    assert len(flow_src) == trace.flows
    assert all(flow_src[f].ts <= flow_dst[f].ts for f in flow_src)


def test_the_demo_matches_its_source_files():
    """Truth read from the files with csv and json: tasks, host events, HostToDevice flows."""
    _, _, trace, d = _export(DEMO)
    with open(next(DEMO_OUT.glob("op_summary_*.csv")), newline="") as fh:
        rows = list(csv.DictReader(fh))

    def ns(text: str) -> int:
        whole, _, frac = text.strip().partition(".")
        return int(whole) * 1000 + int((frac + "000")[:3])

    truth = Counter(
        (
            r["Device_id"],
            r["Op Name"],
            ns(r["Task Start Time(us)"]),
            ns(r["Task Start Time(us)"]) + round(float(r["Task Duration(us)"]) * 1000),
        )
        for r in rows
    )
    assert _decoded_tasks(d) == truth
    events = json.loads(next(DEMO_OUT.glob("msprof_*.json")).read_text())
    proc = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    host = Counter(
        (e["name"], ns(str(e["ts"])), ns(str(e["ts"])) + round(float(e["dur"]) * 1000))
        for e in events
        if e["ph"] == "X" and proc[e["pid"]] not in NOT_HOST_PROCESSES
    )
    decoded_host = Counter((n, ts, end) for _, _, n, ts, end in _decoded_host(d).elements())
    assert decoded_host == host
    # Every HostToDevice pair of the file ends on a task of the CSV: all are written.
    ids = Counter((e["id"], e["ph"]) for e in events if e.get("cat") == "HostToDevice" and e["ph"] in "sf")
    pairs = {i for i, ph in ids if ph == "s" and ids[(i, "f")]}
    assert trace.flows == len(pairs) == len(rows) and trace.flows_dropped == 0
    # ... from a CANN API slice to a task slice.
    src = {f: s for s in d.slices for f in s.flows}
    dst = {f: s for s in d.slices for f in s.terminating}
    assert all(d.base(src[f].track).startswith("CANN ") for f in src)
    assert all(d.base(dst[f].track).startswith(TASK_TRACKS) for f in dst)


def test_overlapping_tasks_of_a_stream_go_on_an_overlap_track():
    """A real kernel_details where a task of Stream 2 starts before the one before it ends."""
    profile, _, trace, d = _export(GPT3_RANK1)
    stream = profile.tasks.filter(pl.col("stream_id") == "2").sort("start_ns")
    ends = [s + round(u * 1000) for s, u in stream.select("start_ns", "duration_us").iter_rows()]
    starts = stream["start_ns"].to_list()
    assert any(starts[i + 1] < ends[i] < ends[i + 1] for i in range(len(starts) - 1))  # a partial overlap
    overlap = [u for u, t in d.tracks.items() if t["name"] == "Stream 2 (overlap 1)"]
    assert trace.overlap_tracks == len(overlap) == 1
    assert d.tracks[overlap[0]]["parent"] in {u for u, t in d.tracks.items() if t["name"] == "Stream 2"}
    assert [s for s in d.slices if s.track == overlap[0]]
    assert problems(d) == []
    assert len(d.on("Stream 2")) == stream.height


def test_torch_npu_flows_and_threads():
    """The real torch_npu capture: CANN and Python threads, HostToDevice and async_npu flows;
    the flows that could not be bound are counted, never written half."""
    profile, _, trace, d = _export(TORCH_NPU)
    tracks = {d.base(s.track) for s in d.slices}
    assert any(t.startswith("CANN Thread") for t in tracks) and any(t.startswith("Python Thread") for t in tracks)
    ev = profile.events
    ids = ev.filter(pl.col("ph").is_in(["s", "f"])).group_by("flow_id").agg(pl.col("ph").sort().str.join(""))
    assert trace.flows + trace.flows_dropped == ids.filter(pl.col("ph") == "fs").height
    h2d = ev.filter((pl.col("cat") == "HostToDevice") & (pl.col("ph") == "s")).height
    assert trace.flows >= h2d - 3  # the three collectives' ends lie inside the collective, not at its start
    dst = {f: s for s in d.slices for f in s.terminating}
    assert sum(d.base(s.track).startswith(TASK_TRACKS) for s in dst.values()) >= h2d - 3


def test_an_era_a_capture(tmp_path):
    from npuscope.fixtures.generate import generate

    g = generate(tmp_path / "gen", layout="era_a", cards=2, steps=2, ops_per_step=60)
    profile, _, trace, d = _export(g.root)
    assert problems(d) == []
    assert _decoded_tasks(d) == _task_truth(profile.tasks)
    assert _decoded_host(d) == _host_truth(profile.events)
    assert {d.card_of(s.track) for s in d.slices} == {f"card {c}" for c in profile.cards}
    assert trace.flows > 0


# --------------------------------------------------------------------------- the command


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["export", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_command_writes_whole_and_refuses_to_replace(tmp_path, capsys):
    src = tmp_path / "profile"
    shutil.copytree(TORCH_NPU, src)
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    out = tmp_path / "out" / "run.pftrace"
    out.parent.mkdir()
    code, text, err = _run(capsys, str(src), "--perfetto", str(out))
    assert code == 0, err
    assert "wrote" in text and "ui.perfetto.dev" in text
    assert problems(decode(out.read_bytes())) == []
    assert sorted(p.relative_to(src) for p in src.rglob("*")) == before  # nothing into the profile
    assert os.listdir(out.parent) == ["run.pftrace"]  # no temporary file left
    first = [(s.name, s.ts, s.end) for s in decode(out.read_bytes()).slices]
    out.write_bytes(b"mine")
    code, text, err = _run(capsys, str(src), "--perfetto", str(out))
    assert code == 2 and err.count("\n") == 1 and "--force" in err and "Traceback" not in err
    assert out.read_bytes() == b"mine"
    code, _, err = _run(capsys, str(src), "--perfetto", str(out), "--force")
    assert code == 0, err
    assert [(s.name, s.ts, s.end) for s in decode(out.read_bytes()).slices] == first
    assert os.listdir(out.parent) == ["run.pftrace"]


def test_command_one_card(tmp_path, capsys):
    out = tmp_path / "card1.pftrace"
    code, _, err = _run(capsys, str(DEMO), "--perfetto", str(out), "--card", "1")
    assert code == 0, err
    d = decode(out.read_bytes())
    assert problems(d) == []
    assert {d.card_of(s.track) for s in d.slices} == {"card 1"}
    code, _, err = _run(capsys, str(DEMO), "--perfetto", str(tmp_path / "x.pftrace"), "--card", "7")
    assert code == 2 and err.count("\n") == 1 and "no card '7'" in err


@pytest.mark.parametrize(
    "case",
    ["missing profile", "out is a folder", "no such folder", "not a profile", "a cluster"],
)
def test_command_bad_input_is_one_line(tmp_path, capsys, case):
    out = tmp_path / "t.pftrace"
    path = str(DEMO)
    if case == "missing profile":
        path = str(tmp_path / "nowhere")
    elif case == "out is a folder":
        out = tmp_path
    elif case == "no such folder":
        out = tmp_path / "no" / "t.pftrace"
    elif case == "not a profile":
        (tmp_path / "empty").mkdir()
        path = str(tmp_path / "empty")
    else:
        path = str(SAMPLES / "real" / "torch_npu_2024_cnn" / "level1")
    code, _, err = _run(capsys, path, "--perfetto", str(out))
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("npuscope: ") and "Traceback" not in err
    assert not (tmp_path / "t.pftrace").exists()


def test_a_failed_write_leaves_nothing(tmp_path, capsys, monkeypatch):
    out = tmp_path / "t.pftrace"

    def broken(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken)
    code, _, err = _run(capsys, str(DEMO), "--perfetto", str(out))
    assert code == 2 and err.count("\n") == 1 and "free some space" in err
    assert os.listdir(tmp_path) == []
