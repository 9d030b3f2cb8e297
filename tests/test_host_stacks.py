"""`host_dispatch` and the user's code frame: from operator_details.csv's Call Stack."""

from __future__ import annotations

import csv
import re
import shutil
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from npuscope.analysis import diagnose
from npuscope.analysis.findings import Finding
from npuscope.analysis.stacks import with_stacks
from npuscope.analysis.thresholds import Thresholds
from npuscope.fixtures.generate import generate
from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.stacks import read_operator_details, read_stacks

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
    diag = diagnose(profile)
    assert not [f for f in diag.findings if f.rule == "host_dispatch"]
    for card in ("0", "1"):
        frame, host = _heaviest(_truth(int(card)))
        recompiled = [f for f in diag.findings if f.card == card and f.rule == "recompilation"]
        assert recompiled
        named = [f for f in recompiled if frame in f.title]
        # One finding of the card says it, the largest; its time and evidence are the rule's own.
        assert len(named) == 1 and named[0].time_us == max(f.time_us for f in recompiled)
        assert f"{host:,.0f} us" in named[0].title
    plain = diagnose(profile, Thresholds(host_dispatch_pct=1e9))
    assert [f.time_us for f in plain.findings] == [f.time_us for f in diag.findings]


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
    assert not [f for f in diag.findings if f.rule == "host_dispatch" or "most host time" in f.title]


def test_a_damaged_stack_file_leaves_the_diagnosis_standing(tmp_path):
    copy = tmp_path / "gpt3"
    shutil.copytree(GPT3, copy)
    (copy / "test_rank_0" / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv").write_bytes(b'Name,"Call Stack\n\x00"')
    diag = diagnose(open_profile(copy, cache=FrameCache(enabled=False)))
    assert diag.findings  # the rest of the rules ran
    assert not [f for f in diag.findings if f.card == "0" and "most host time" in f.title]
