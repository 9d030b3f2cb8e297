"""`fusible_sequence`: runs of device tasks one fused CANN operator does, found per card."""

from __future__ import annotations

import csv
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from npuscope.analysis import diagnose
from npuscope.analysis.fusion import find_sequences, fusible_findings, pattern_regex
from npuscope.analysis.fusion_patterns import ATEN_DEVICE_TYPES, PATTERNS
from npuscope.analysis.thresholds import Thresholds
from npuscope.fixtures.generate import generate
from npuscope.parsers import FrameCache, open_profile

KEY = {p.key: i for i, p in enumerate(PATTERNS)}


def _tasks(cards: dict[str, list[tuple[str, float]]], interleave: bool = True) -> pl.DataFrame:
    """A tasks frame by hand: per card, (op type, duration us) in start order; the cards'
    start times interleave, so a sequence could only cross cards if cards were mixed."""
    rows = []
    for c, (card, ops) in enumerate(cards.items()):
        for i, (op_type, dur) in enumerate(ops):
            comm = op_type.startswith("hcom_")
            rows.append(
                {
                    "card": card,
                    "op_name": f"{op_type}_{i}",
                    "op_type": op_type,
                    "task_type": "COMMUNICATION" if comm else "AI_CORE",
                    "start_ns": 1_000_000 * i + (c * 1000 if interleave else c * 10**12),
                    "duration_us": dur,
                    "row": len(rows),
                }
            )
    # Rows handed over out of order: matching must sort by card and start.
    return pl.DataFrame(rows).sort("start_ns", descending=True)


def _found(tasks: pl.DataFrame) -> list[tuple[str, str, list[str], float]]:
    occ = find_sequences(tasks)
    types = occ.tasks["op_type"].to_list()
    return [
        (card, PATTERNS[p].key, types[first : first + n], t)
        for card, p, first, n, t in occ.found.sort("card", "first").iter_rows()
    ]


def test_every_pattern_reads_and_names_device_types():
    for p in PATTERNS:
        re.compile(pattern_regex(p.aten))
        names = set(re.findall(r"[a-z_]+", p.aten))
        assert names <= set(ATEN_DEVICE_TYPES), p.key
        assert p.fused_op and p.torch_npu and p.source and p.cann
    # A device type stands for one aten operator only: a task gets one letter.
    all_types = [t.lower() for types in ATEN_DEVICE_TYPES.values() for t in types]
    assert len(all_types) == len(set(all_types))


def test_a_whole_sequence_is_found_with_its_time():
    ops = [
        ("MatMulV2", 50.0),
        ("Pow", 3.0),
        ("ReduceMean", 4.0),
        ("Adds", 1.0),
        ("Rsqrt", 2.0),
        ("Mul", 5.0),
        ("Cast", 6.0),
        ("MatMulV2", 50.0),
    ]
    got = _found(_tasks({"0": ops}))
    # The yaml's trailing (type_as){0,1} takes the Cast: greedy, like its regex.
    assert got == [("0", "rms_norm", ["Pow", "ReduceMean", "Adds", "Rsqrt", "Mul", "Cast"], 21.0)]


def test_an_interrupted_sequence_is_not_found():
    ops = [
        ("BatchMatMulV2", 10.0),
        ("SoftmaxV2", 2.0),
        ("Transpose", 1.0),
        ("BatchMatMulV2", 10.0),
        ("Split", 1.0),
        ("TransData", 1.0),
        ("Swish", 2.0),
        ("Mul", 1.0),
    ]
    assert _found(_tasks({"0": ops})) == []
    # The same without the interruptions: attention and SwiGlu.
    whole = [o for o in ops if o[0] not in ("Transpose", "TransData")]
    assert [(k, seq) for _, k, seq, _ in _found(_tasks({"0": whole}))] == [
        ("fusion_attention", ["BatchMatMulV2", "SoftmaxV2", "BatchMatMulV2"]),
        ("swiglu", ["Split", "Swish", "Mul"]),
    ]


def test_a_collective_between_does_not_interrupt():
    ops = [("BatchMatMul", 10.0), ("hcom_allReduce_", 500.0), ("SoftmaxV2", 2.0), ("BatchMatMul", 10.0)]
    assert _found(_tasks({"0": ops})) == [("0", "fusion_attention", ["BatchMatMul", "SoftmaxV2", "BatchMatMul"], 22.0)]


def test_a_sequence_at_the_cards_end_and_never_across_cards():
    card0 = [("Cast", 1.0), ("Rsqrt", 2.0), ("Mul", 3.0)]  # the card's last tasks
    card1 = [("BatchMatMul", 5.0), ("SoftmaxV2", 1.0)]  # ends half-way
    card2 = [("BatchMatMul", 5.0), ("Neg", 1.0), ("ConcatD", 1.0)]  # rotary without its add
    for interleave in (True, False):
        got = _found(_tasks({"0": card0, "1": card1, "2": card2}, interleave))
        assert got == [("0", "rms_norm", ["Rsqrt", "Mul"], 5.0)]
    # Card 1 ends with half an attention and card 2 starts with the rest: still two cards.
    got = _found(_tasks({"1": [("BatchMatMul", 5.0), ("SoftmaxV2", 1.0)], "2": [("BatchMatMul", 5.0)]}, False))
    assert got == []


def test_occurrences_do_not_overlap_and_the_first_pattern_wins():
    # Split-Sigmoid-Mul-Mul is a SwiGlu; its Sigmoid-Mul is not also a SiLU. Then a lone SiLU.
    ops = [("Split", 1.0), ("Sigmoid", 1.0), ("Mul", 1.0), ("Mul", 1.0), ("Sigmoid", 2.0), ("Mul", 2.0)]
    got = _found(_tasks({"0": ops}))
    assert [(k, seq) for _, k, seq, _ in got] == [
        ("swiglu", ["Split", "Sigmoid", "Mul", "Mul"]),
        ("silu", ["Sigmoid", "Mul"]),
    ]


def test_types_are_compared_without_case():
    got = _found(_tasks({"0": [("StridedSliceD", 1.0), ("GeLU", 4.0), ("Mul", 1.0)]}))
    assert [(k, seq) for _, k, seq, _ in got] == [("geglu", ["StridedSliceD", "GeLU", "Mul"])]


def test_findings_per_card_and_pattern_with_evidence_and_advice():
    rms = [("Pow", 3.0), ("ReduceMean", 4.0), ("Adds", 1.0), ("Rsqrt", 2.0), ("Mul", 5.0)]
    ops = [*rms, ("MatMulV2", 50.0), *rms[3:], ("MatMulV2", 50.0)]
    tasks = _tasks({"0": ops, "1": [("MatMulV2", 1.0)]}).with_columns(
        (pl.col("start_ns") / 1000.0).alias("start_us"), pl.lit(0.0).alias("wait_us")
    )
    th = Thresholds()
    (f,) = fusible_findings(tasks, ("0", "1"), th, "torch_npu")
    assert (f.rule, f.card, f.count, f.severity) == ("fusible_sequence", "0", 2, "info")
    assert f.time_us == pytest.approx(15.0 + 7.0)
    # The longest occurrence's first type, then every other matched type sorted: stable run to run.
    assert f.op_types == ("Pow", "Adds", "Mul", "ReduceMean", "Rsqrt")
    assert f.share_pct == pytest.approx(100 * 22.0 / 122.0, abs=1e-3)
    assert "torch_npu.npu_rms_norm" in f.advice and "RmsNorm" in f.title
    assert "fused_rms_norm" not in f.advice  # a torch_npu capture is told its own API
    assert "fused_rms_norm" in fusible_findings(tasks, ("0",), th, "paddle")[0].advice
    # Evidence: the first task of each occurrence, longest first, pointing at its row.
    assert [(e["op_type"], e["sequence"], e["sequence_us"]) for e in f.evidence] == [
        ("Pow", "Pow-ReduceMean-Adds-Rsqrt-Mul", 15.0),
        ("Rsqrt", "Rsqrt-Mul", 7.0),
    ]
    by_row = {r["row"]: r for r in tasks.iter_rows(named=True)}
    assert all(by_row[e["row"]]["op_name"] == e["op_name"] for e in f.evidence)
    assert fusible_findings(tasks, ("0",), Thresholds(fusible_min_count=3), "torch_npu") == []


def _csv_types(root) -> dict[str, list[str]]:
    """Op types of each generated kernel_details.csv, in start order (csv module)."""
    out = {}
    for path in sorted(root.rglob("kernel_details*.csv")):
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        rows.sort(key=lambda r: float(r["Start Time(us)"].strip()))
        out[str(path)] = [r["Type"] for r in rows]
    return out


@pytest.mark.parametrize("problems", [(), ("recompilation", "host_op_wait", "ai_cpu", "long_task")])
def test_generated_profiles_hold_fused_operators_and_raise_nothing(tmp_path, problems):
    # The generated model runs RmsNorm and FlashAttentionScore fused, its rotary embedding as
    # one Mul and GeLU straight into a MatMul: none of the patterns is there to find.
    g = generate(tmp_path, layout="torch_npu", cards=2, problems=problems)
    types = _csv_types(g.root)
    assert types and all({"RmsNorm", "FlashAttentionScore"} <= set(t) for t in types.values())
    for seq in types.values():  # no Rsqrt, SoftmaxV2 between two matmuls, Neg or Sigmoid
        assert not {"Rsqrt", "Neg", "Sigmoid", "Swish"} & set(seq)
    diag = diagnose(open_profile(g.root, cache=FrameCache(enabled=False)))
    assert [f for f in diag.findings if f.rule in ("fusible_sequence", "host_dispatch")] == []


def _write_kernel_details(path, ops):
    header = ["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)"]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        start = 1_700_000_000_000_000.0
        for i, (op_type, dur) in enumerate(ops):
            w.writerow([1, f"{op_type}_{i}", op_type, "AI_VECTOR_CORE", f"{start:.3f}", dur, 0])
            start += dur + 2.0


def test_report_json_names_the_sequences(tmp_path):
    ops = [("MatMulV2", 40.0), ("Rsqrt", 2.0), ("Mul", 3.0), ("MatMulV2", 40.0), ("Neg", 1.0)] * 3
    folder = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    folder.mkdir(parents=True)
    _write_kernel_details(
        folder / "kernel_details.csv",
        [("StridedSlice", 1.0), ("Neg", 1.0), ("ConcatD", 1.0), ("Mul", 1.0), ("Add", 1.0), *ops],
    )
    res = subprocess.run(
        [sys.executable, "-m", "npuscope", "report", str(tmp_path), "--format", "json", "--no-cache"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    found = [f for card in json.loads(res.stdout)["cards"] for f in card["findings"] if f["rule"] == "fusible_sequence"]
    got = sorted((f["count"], round(f["time_us"], 6), f["evidence"][0]["sequence"]) for f in found)
    assert got == [(1, 5.0, "StridedSlice-Neg-ConcatD-Mul-Add"), (3, 15.0, "Rsqrt-Mul")]
    assert any("npu_rotary_mul" in f["advice"] for f in found)


REAL = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real"


def test_optimizer_steps_of_the_real_text_capture():
    # torch_npu 2024 CNN: one Optimizer.step#SGD.step per rank in trace_view.json (json module).
    root = REAL / "torch_npu_2024_cnn" / "level1"
    truth = {}
    for rank in (0, 1):
        trace = json.loads((root / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
        events = trace if isinstance(trace, list) else trace["traceEvents"]
        durs = [float(e["dur"]) for e in events if e.get("name") == "Optimizer.step#SGD.step" and e.get("ph") == "X"]
        truth[str(rank)] = (len(durs), sum(durs))
    diag = diagnose(open_profile(root, cache=FrameCache(enabled=False)))
    found = [f for f in diag.findings if f.rule == "fusible_sequence"]
    assert {f.card: (f.count, pytest.approx(f.time_us)) for f in found} == truth
    assert all("torch_npu.optim.NpuFusedSGD" in f.title and "called from" not in f.title for f in found)
    assert all(f.severity == "info" and "timeline_fusion_ops.yaml" in f.advice for f in found)


def test_optimizer_steps_of_the_real_db_capture_name_the_caller():
    root = REAL / "torch_npu_2025_db" / "level1"
    diag = diagnose(open_profile(root, cache=FrameCache(enabled=False)))
    for rank in (0, 1):
        path = root / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{rank}.db"
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = con.execute(
            "SELECT a.startNs, a.endNs, a.callchainId FROM PYTORCH_API a JOIN STRING_IDS s ON s.id = a.name "
            "WHERE s.value = 'Optimizer.step#SGD.step'"
        ).fetchall()
        (start, end, chain) = rows[0]
        stack = [
            v
            for _, v in con.execute(
                "SELECT c.stackDepth, s.value FROM PYTORCH_CALLCHAINS c JOIN STRING_IDS s ON s.id = c.stack "
                "WHERE c.id = ? ORDER BY c.stackDepth",
                (chain,),
            )
        ]
        con.close()
        user = next(t for t in stack if "site-packages" not in t and "/lib/python" not in t and not t.startswith("<"))
        m = re.match(r"^(.*)\((\d+)\): (.*)$", user)
        frame = f"{m[1]}:{m[2]} ({m[3]})"
        (f,) = [f for f in diag.findings if f.rule == "fusible_sequence" and f.card == str(rank)]
        assert len(rows) == f.count == 1
        assert f.time_us == pytest.approx((int(end) - int(start)) / 1000.0)
        assert f.title.endswith(f"step() called from {frame}") and f.evidence[0]["frame"] == frame


def test_no_optimizer_finding_without_the_event():
    # GPT-3 (no timeline) and the generated torch_npu runs (no framework events) hold no step call.
    for root in (REAL / "torch_npu_2023_gpt3_2rank",):
        diag = diagnose(open_profile(root, cache=FrameCache(enabled=False)))
        assert not [f for f in diag.findings if f.rule == "fusible_sequence"]
