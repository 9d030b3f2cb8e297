"""A finding's drill-down shows exactly what it counts: the filter `drill_down` writes, applied
to the tasks of the finding's card as the explorer applies it, selects its count of tasks,
and their durations (or waits) sum to its time where the rule sums them; with the default
thresholds and with a `--rules` file that moves them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl
import pytest

from npuscope.analysis import diagnose
from npuscope.analysis.drilldown import NO_TASK_RULES, TASK_COLUMNS, TASK_RULES, drill_down
from npuscope.analysis.findings import Finding
from npuscope.analysis.query import parse_query, task_positions, totals_at
from npuscope.analysis.rules import RULES
from npuscope.analysis.thresholds import Thresholds
from npuscope.analysis.training_rules import TRAINING_RULES, training_findings
from npuscope.fixtures.generate import DEFAULT_PROBLEMS, generate
from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.training import read_training_views

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
REAL = SAMPLES / "real"
GOLDEN = SAMPLES / "msprof_golden" / "mindstudio_profiler_output" / "op_summary_20240605100000.csv"
REAL_CAPTURES = [
    REAL / "msprof_db_2023",
    REAL / "torch_npu_2023_gpt3_2rank",
    REAL / "torch_npu_2024_cnn" / "level0",
    REAL / "torch_npu_2024_cnn" / "level1",
    REAL / "torch_npu_2025_db" / "level0",
    REAL / "torch_npu_2025_db" / "level1",
]
RULES_TOML = """\
[thresholds]
long_task_us = 300.0
ai_cpu_us = 12.5
outlier_max_over_avg = 4.0
outlier_min_calls = 3
long_wait_us = 200.0
low_block_pct = 90.0
dominant_ratio_pct = 20.0
"""
DURATION_SUMS = ("dominant_op_type", "long_task", "ai_cpu", "low_parallelism", "aclop_share", "fusible_sequence")
WAIT_SUMS = ("recompilation", "host_op_wait", "communication_wait")


def selected(diagnosis_tasks: pl.DataFrame, finding: Finding, text: str) -> tuple[pl.DataFrame, int, float, float]:
    """The tasks of the finding's card the filter selects, as the explorer's op summary does
    (its table in row order, the positions and totals of analysis.query)."""
    tasks = diagnosis_tasks.filter(pl.col("card") == finding.card).select("row", *TASK_COLUMNS)
    positions = task_positions(tasks, parse_query(text), "row", False)
    n, dur, wait = totals_at(tasks, positions)
    return tasks[positions], n, dur, wait


def check(profile, diagnosis) -> list[str]:
    """Every finding of `diagnosis` against what its filter selects; the rules seen."""
    th = diagnosis.thresholds
    seen = []
    for f in diagnosis.findings:
        text, (key, _) = drill_down(f, th)
        seen.append(f.rule)
        assert key in diagnosis.tasks.columns
        host = bool(f.evidence) and all(e.get("row") is None for e in f.evidence)  # host operators
        if f.rule in NO_TASK_RULES or (f.rule == "recompilation" and not f.op_types) or host:
            assert text == "", f
            continue
        assert f.rule in TASK_RULES, f.rule
        rows, n, dur, wait = selected(diagnosis.tasks, f, text)
        where = f"{f.rule} {f.card} {f.op_types[:1]}: {text!r}"
        # Its worst tasks are among them.
        assert {e["row"] for e in f.evidence if "row" in e} <= set(rows["row"].to_list()), where
        if f.rule == "fusible_sequence":  # counts occurrences; selects their tasks
            assert n >= 2 * f.count, where
        else:
            assert n == f.count, where
        if f.rule in DURATION_SUMS:
            assert dur == pytest.approx(f.time_us, rel=1e-9, abs=2e-3), where
        elif f.rule in WAIT_SUMS:
            assert wait == pytest.approx(f.time_us, rel=1e-9, abs=2e-3), where
        elif f.rule == "duration_outlier":  # their excess over the type's average
            card = diagnosis.tasks.filter(pl.col("card") == f.card)
            mean = card.filter((pl.col("op_type") == f.op_types[0]) & (pl.col("task_type") == rows["task_type"][0]))[
                "duration_us"
            ].mean()
            assert f.time_us == pytest.approx(dur - n * mean, rel=1e-6, abs=2e-3), where
        if "dur>" in text and f.rule in ("long_task", "ai_cpu"):
            limit = th.long_task_us if f.rule == "long_task" else th.ai_cpu_us
            assert float(text.split("dur>")[1].split()[0]) == limit
    return seen


def rules_file(tmp_path: Path) -> Thresholds:
    path = tmp_path / "rules.toml"
    path.write_text(RULES_TOML, encoding="utf-8")
    return Thresholds.from_file(path)


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("drilldown")
    generate(root, layout="era_b", cards=2, problems=(*DEFAULT_PROBLEMS, "duration_outlier"))
    return root


def test_every_rule_has_its_drill_down():
    """A rule added to RULES without a drill-down here fails this test."""
    assert {r.__name__ for r in RULES} <= set(TASK_RULES) | set(NO_TASK_RULES)


@pytest.mark.parametrize("moved", [False, True], ids=["defaults", "rules_file"])
def test_generated_findings_select_what_they_count(generated, tmp_path, moved):
    th = rules_file(tmp_path) if moved else Thresholds()
    profile = open_profile(generated, cache=FrameCache(enabled=False))
    seen = check(profile, diagnose(profile, th))
    # The planted outliers (4 of 36 calls) lift their type's average: Max is 7.5x it, found
    # at the rules file's 4x only.
    for rule in (*DEFAULT_PROBLEMS, "aclop_share", *(("duration_outlier",) if moved else ())):
        assert rule in seen


@pytest.mark.parametrize("moved", [False, True], ids=["defaults", "rules_file"])
@pytest.mark.parametrize("capture", REAL_CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_findings_select_what_they_count(capture, tmp_path, moved):
    th = rules_file(tmp_path) if moved else Thresholds()
    profile = open_profile(capture, cache=FrameCache(enabled=False))
    assert check(profile, diagnose(profile, th))


def test_the_rules_file_moves_the_filter(generated, tmp_path):
    profile = open_profile(generated, cache=FrameCache(enabled=False))
    moved = rules_file(tmp_path)
    default_long = [f for f in diagnose(profile).findings if f.rule == "long_task"]
    moved_long = [f for f in diagnose(profile, moved).findings if f.rule == "long_task"]
    assert default_long and moved_long
    assert all("dur>1000" in drill_down(f, Thresholds())[0] for f in default_long)
    assert all("dur>300" in drill_down(f, moved)[0] for f in moved_long)
    assert sum(f.count for f in moved_long) > sum(f.count for f in default_long)


# --- low parallelism: a kernel capture with the card's core counts ------------------------------


def _golden_header() -> list[str]:
    with GOLDEN.open(newline="") as fh:
        return next(csv.reader(fh))


KERNELS = [  # (op type, task type, Block Dim, duration us) on 24 AI cores, 48 vector cores
    ("MatMulV2", "AI_CORE", 2, 300.0),  # low: 2 < 12
    ("Add", "AI_VECTOR_CORE", 20, 200.0),  # low: 20 < 24
    ("Mul", "AI_VECTOR_CORE", 40, 100.0),  # not low (low at 90%: 40 < 43.2)
    ("FlashAttentionScore", "MIX_AIC", 12, 150.0),  # at half the cores: not low (low at 90%)
    ("FlashAttentionScoreGrad", "MIX_AIV", 23, 120.0),  # low: 23 < 24
    ("Cast", "AI_CORE", 24, 50.0),  # every core: never low
    ("add_custom", "AI_VECTOR_CORE", 4, 80.0),  # the application's own kernel: low, never aclop
    ("hcom_allReduce_", "COMMUNICATION", 1, 400.0),  # not a core task
]


def _kernel_capture(root: Path) -> Path:
    prof = root / "PROF_000001_20260101000000000_BLOCKS"
    out = prof / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    header = _golden_header()
    with (out / "op_summary_20260101000000.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i in range(30):
            op_type, task_type, block, dur = KERNELS[i % len(KERNELS)]
            values = {
                "Device_id": "0",
                "Model ID": "4294967295",
                "Task ID": str(10 + i),
                "Stream ID": "2",
                "Op Name": f"{op_type}_{i}",
                "OP Type": op_type,
                "OP State": "static",
                "Task Type": task_type,
                "Task Start Time(us)": f"{1717575960208020 + i * 1000}.758\t",
                "Task Duration(us)": f"{dur:.3f}",
                "Task Wait Time(us)": "0" if i == 0 else "10.000000",
                "Block Num": str(block),
                "Mix Block Num": "0",
            }
            w.writerow([values.get(h, "N/A") for h in header])
    (prof / "device_0").mkdir()
    info = {"DeviceInfo": [{"id": 0, "ai_core_num": 24, "aiv_num": 48}], "platform_version": "Ascend910B2"}
    (prof / "device_0" / "info.json.0").write_text(json.dumps(info))
    return prof


@pytest.mark.parametrize(
    "moved, low",
    [
        (False, {"MatMulV2", "Add", "FlashAttentionScoreGrad", "add_custom"}),
        (True, {"MatMulV2", "Add", "Mul", "FlashAttentionScore", "FlashAttentionScoreGrad", "add_custom"}),
    ],
)
def test_low_parallelism_selects_the_low_blocks_of_each_kind(tmp_path, moved, low):
    th = rules_file(tmp_path) if moved else Thresholds()
    profile = open_profile(_kernel_capture(tmp_path), cache=FrameCache(enabled=False))
    diagnosis = diagnose(profile, th)
    (finding,) = [f for f in diagnosis.findings if f.rule == "low_parallelism"]
    text, _ = drill_down(finding, th)
    rows, n, dur, _ = selected(diagnosis.tasks, finding, text)
    assert set(rows["op_type"].to_list()) == low
    assert (n, dur) == (finding.count, pytest.approx(finding.time_us))
    (aclop,) = [f for f in diagnosis.findings if f.rule == "aclop_share"]
    rows, n, _, _ = selected(diagnosis.tasks, aclop, drill_down(aclop, th)[0])
    assert "add_custom" not in rows["op_type"].to_list() and "hcom_allReduce_" not in rows["op_type"].to_list()
    check(profile, diagnosis)


# --- fusible sequences: a torch_npu capture by hand -----------------------------------------------


def _kernel_details(root: Path, ops: list[tuple[str, str, float]]) -> Path:
    folder = root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    folder.mkdir(parents=True)
    header = ["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)"]
    with (folder / "kernel_details.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        start = 1_700_000_000_000_000.0
        for i, (op_type, core, dur) in enumerate(ops):
            w.writerow([1, f"{op_type}_{i}", op_type, core, f"{start:.3f}", dur, 0])
            start += dur + 2.0
    return root


def test_fusible_sequence_selects_the_tasks_of_its_occurrences(tmp_path):
    v, c = "AI_VECTOR_CORE", "AI_CORE"
    rms = [("MatMulV2", c, 40.0), ("Rsqrt", v, 2.0), ("Mul", v, 3.0)]
    ops = [*rms, ("hcom_allReduce_", "HCCL", 50.0), *rms, ("Neg", v, 1.0), ("Rsqrt", v, 4.0), ("Add", v, 1.0)]
    ops += [("StridedSlice", v, 1.0), ("Neg", v, 1.0), ("ConcatD", v, 1.0), ("Mul", v, 1.0), ("Add", v, 1.0)]
    profile = open_profile(_kernel_details(tmp_path, ops), cache=FrameCache(enabled=False))
    diagnosis = diagnose(profile)
    found = [f for f in diagnosis.findings if f.rule == "fusible_sequence"]
    assert len(found) == 2
    for f in found:
        text, _ = drill_down(f, diagnosis.thresholds)
        rows, n, dur, _ = selected(diagnosis.tasks, f, text)
        assert text.startswith("fused:") and dur == pytest.approx(f.time_us)
        expected = {"Rsqrt", "Mul"} if f.count == 2 else {"StridedSlice", "Neg", "ConcatD", "Mul", "Add"}
        assert set(rows["op_type"].to_list()) == expected
        assert n == (4 if f.count == 2 else 5)  # the lone Rsqrt and the collective are not in one
    check(profile, diagnosis)


# --- training-level findings: their tab ----------------------------------------------------------


def test_training_findings_drill_into_their_tab_not_the_tasks(tmp_path):
    generate(tmp_path, layout="torch_npu", cards=2, problems=("comm_not_overlapped", "sync_heavy"))
    profile = open_profile(tmp_path, cache=FrameCache(enabled=False))
    diagnosis = diagnose(profile)
    found = training_findings(profile, diagnosis, read_training_views(profile))
    assert {f.rule for f in found} >= {"comm_not_overlapped", "sync_heavy"}
    for f in found:
        assert f.rule in TRAINING_RULES and f.view
        assert drill_down(f, diagnosis.thresholds) == ("", ("row", False))
