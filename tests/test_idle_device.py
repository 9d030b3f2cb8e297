"""An idle device is the top finding (issue 16): a host-bound job before any operator finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from npuscope.analysis import diagnose
from npuscope.analysis.findings import Finding, order
from npuscope.analysis.thresholds import Thresholds
from npuscope.fixtures.generate import generate
from npuscope.parsers import FrameCache, open_profile

HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Num,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats"
)
T0 = 1_717_575_960_000_000.0


def _idle_capture(root: Path, tasks: list[tuple[str, str, float, float]]) -> Path:
    """An Era B export with one op_summary: (op name, op type, start offset us, duration us)."""
    out = root / "PROF_000001_20240605100000000_IDLEAAAA" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    lines = [HEADER]
    prev_end = None
    for i, (name, op_type, at, dur) in enumerate(tasks):
        wait = 0.0 if prev_end is None else max(at - prev_end, 0.0)
        lines.append(
            f"0,4294967295,{i + 1},1,{name},{op_type},static,AI_CORE,{T0 + at:.3f}\t,{dur:.3f},{wait:.3f},"
            f'24,"8,1024;1024,1024",FLOAT16;FLOAT16,ND;ND,"8,1024",FLOAT16,ND'
        )
        prev_end = at + dur
    (out / "op_summary_20240605100000.csv").write_text("\n".join(lines) + "\n")
    return root


# Like the torch_npu 2.7.1 capture: ~174 us of kernels spread over a 10.4 ms span, MatMulV2
# the largest share of compute.
MOSTLY_IDLE = [
    ("MatMulV2", "MatMulV2", 0.0, 68.0),
    ("Add", "Add", 2_000.0, 10.0),
    ("MatMulV2_1", "MatMulV2", 4_000.0, 68.0),
    ("Cast", "Cast", 7_000.0, 8.0),
    ("Mul", "Mul", 10_380.0, 20.0),
]


def test_mostly_idle_capture_leads_with_idle_device(tmp_path: Path) -> None:
    profile = open_profile(_idle_capture(tmp_path, MOSTLY_IDLE), cache=FrameCache(enabled=False))
    diag = diagnose(profile)
    top = diag.findings[0]
    assert top.rule == "idle_device"
    assert top.severity == "warning"
    span = 10_400.0
    busy = sum(t[3] for t in MOSTLY_IDLE)
    assert top.time_us == pytest.approx(span - busy)
    assert top.share_pct == pytest.approx(100.0 * (span - busy) / span, abs=0.001)
    assert "host-bound" in top.title and "dispatch" in top.advice and "data loading" in top.advice
    # The operator findings are still there, after it.
    assert any(f.rule == "dominant_op_type" and f.op_types == ("MatMulV2",) for f in diag.findings[1:])


def test_overlapping_tasks_count_once(tmp_path: Path) -> None:
    # Two streams run at once: the busy time is the union of the intervals, not their sum.
    tasks = [("A", "Add", 0.0, 1_000.0), ("B", "Add", 0.0, 1_000.0), ("C", "Add", 9_000.0, 1_000.0)]
    diag = diagnose(open_profile(_idle_capture(tmp_path, tasks), cache=FrameCache(enabled=False)))
    (idle,) = [f for f in diag.findings if f.rule == "idle_device"]
    assert idle.time_us == pytest.approx(8_000.0)


def test_threshold_from_the_rules_file(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text("[thresholds]\nidle_busy_pct = 1.0\n")
    th = Thresholds.from_file(rules)
    assert th.idle_busy_pct == 1.0
    profile = open_profile(_idle_capture(tmp_path / "p", MOSTLY_IDLE), cache=FrameCache(enabled=False))
    assert not [f for f in diagnose(profile, th).findings if f.rule == "idle_device"]


@pytest.mark.parametrize("problems", [(), ("recompilation", "host_op_wait", "ai_cpu", "long_task", "dominant_op_type")])
def test_busy_generated_profiles_raise_none(tmp_path: Path, problems: tuple[str, ...]) -> None:
    g = generate(tmp_path, layout="era_b", cards=2, problems=problems)
    diag = diagnose(open_profile(g.root, cache=FrameCache(enabled=False)))
    assert not [f for f in diag.findings if f.rule == "idle_device"]


def test_busy_real_capture_raises_none() -> None:
    root = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real" / "torch_npu_2024_cnn"
    assert not [f for f in diagnose(open_profile(root)).findings if f.rule == "idle_device"]


def test_unusable_start_times_raise_none() -> None:
    root = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "cann5x_device_summary"
    profile = open_profile(root)
    assert profile.time_problem is not None
    assert not [f for f in diagnose(profile).findings if f.rule == "idle_device"]


def test_order_puts_it_first_whatever_the_time_at_stake() -> None:
    def finding(rule: str, time_us: float) -> Finding:
        return Finding(rule, "warning", rule, "0", (), (), 1, time_us, 0.0, "")

    got = order([finding("long_task", 5_000.0), finding("idle_device", 10.0), finding("ai_cpu", 900.0)])
    assert [f.rule for f in got] == ["idle_device", "long_task", "ai_cpu"]
