"""Each diagnosis rule and each wait-attribution path on tiny inline profiles."""

from __future__ import annotations

import polars as pl
import pytest
from tiny import event, profile, task

from npuscope.analysis import Thresholds, diagnose
from npuscope.analysis.card_data import SMALL_SAMPLE_TASKS
from npuscope.parsers import ProfileError


def _rule(diag, rule):
    return [f for f in diag.findings if f.rule == rule]


def _causes(diag):
    return diag.tasks["wait_cause"].to_list()


# --- dominant_op_type ---------------------------------------------------------------------


def _stat(rows):
    return pl.DataFrame(
        rows,
        schema={
            "card": pl.String,
            "op_type": pl.String,
            "core_type": pl.String,
            "count": pl.Int64,
            "total_us": pl.Float64,
            "min_us": pl.Float64,
            "avg_us": pl.Float64,
            "max_us": pl.Float64,
            "ratio_pct": pl.Float64,
        },
        orient="row",
    )


def test_dominant_non_matrix_is_warning_matrix_is_info():
    stat = _stat(
        [
            ("0", "TransData", "AI_CORE", 10, 400.0, 40.0, 40.0, 40.0, 40.0),
            ("0", "MatMulV2", "AI_CORE", 10, 450.0, 45.0, 45.0, 45.0, 45.0),
            ("0", "Add", "AI_VECTOR_CORE", 10, 150.0, 15.0, 15.0, 15.0, 15.0),
        ]
    )
    diag = diagnose(profile([task("TransData", 0, 40)], stat=stat))
    found = {f.op_types[0]: f for f in _rule(diag, "dominant_op_type")}
    assert set(found) == {"TransData", "MatMulV2"}
    assert found["TransData"].severity == "warning"
    assert "FLAGS_npu_jit_compile=false" in found["TransData"].advice
    assert found["MatMulV2"].severity == "info"
    assert found["TransData"].share_pct == 40.0 and found["TransData"].time_us == 400.0


def test_dominant_below_threshold_and_matrix_on_ai_cpu():
    stat = _stat(
        [
            ("0", "Cast", "AI_CORE", 10, 399.0, 1.0, 1.0, 1.0, 39.99),
            ("0", "MatMul", "AI_CPU", 10, 601.0, 1.0, 1.0, 1.0, 60.01),
        ]
    )
    diag = diagnose(profile([task("Cast", 0, 1)], stat=stat))
    (only,) = _rule(diag, "dominant_op_type")
    assert only.op_types == ("MatMul",) and only.severity == "warning"  # matrix, but not on AI_CORE


# --- long_task, duration_outlier, ai_cpu --------------------------------------------------


def test_long_task_counts_only_tasks_over_threshold():
    tasks = [task("Conv", 0, 1000.0), task("Conv", 2000, 1000.5), task("Conv", 4000, 3000), task("Add", 8000, 5)]
    (f,) = _rule(diagnose(profile(tasks)), "long_task")
    assert (f.op_types, f.count, f.time_us, f.severity) == (("Conv",), 2, 4000.5, "warning")
    assert [e["duration_us"] for e in f.evidence] == [3000.0, 1000.5]
    assert "shape and dtype" in f.advice


def test_long_task_threshold_is_configurable():
    tasks = [task("Conv", 0, 600.0)]
    assert _rule(diagnose(profile(tasks)), "long_task") == []
    assert len(_rule(diagnose(profile(tasks), Thresholds(long_task_us=500)), "long_task")) == 1


def test_duration_outlier_needs_calls_and_ratio():
    many = [task("Mul", i * 10, 1.0) for i in range(19)] + [task("Mul", 500, 19.0)]
    (f,) = _rule(diagnose(profile(many)), "duration_outlier")
    assert f.op_types == ("Mul",) and f.count == 1
    assert f.time_us == pytest.approx(19.0 - 38.0 / 20)
    just_under = [task("Mul", i * 10, 1.0) for i in range(19)] + [task("Mul", 500, 18.0)]
    assert _rule(diagnose(profile(just_under)), "duration_outlier") == []
    few = [task("Mul", 0, 1.0), task("Mul", 10, 1.0), task("Mul", 20, 1.0), task("Mul", 30, 100.0)]
    assert _rule(diagnose(profile(few)), "duration_outlier") == []  # < 5 calls


def test_ai_cpu_over_20us_only():
    tasks = [
        task("NonZero", 0, 21.0, task_type="AI_CPU", dtypes="INT64"),
        task("NonZero", 100, 20.0, task_type="AI_CPU"),
        task("Unique", 200, 5.0, task_type="AI_CPU"),
        task("Add", 300, 80.0, task_type="AI_CORE"),
    ]
    (f,) = _rule(diagnose(profile(tasks)), "ai_cpu")
    assert (f.op_types, f.count, f.time_us) == (("NonZero",), 1, 21.0)
    assert "INT64" in f.title and "float64" in f.advice


# --- wait attribution with a timeline ------------------------------------------------------


def _gap_profile(host_events, *, step_event=False):
    """Add ends at 10 us; Mul starts at 1010 us: a 1000 us device gap before Mul."""
    tasks = [task("Add", 0, 10, state="static"), task("Mul", 1010, 5, state="static")]
    events = list(host_events)
    if step_event:
        events.append(event("ProfileStep#101", 900, 5000, process="Python"))
    return profile(tasks, events)


def test_compile_covering_gap_is_recompilation_evidence():
    diag = diagnose(_gap_profile([event("AscendCL@aclopCompileAndExecute", 50, 900)]))
    assert _causes(diag) == [None, "recompilation"]
    assert diag.tasks["wait_confidence"].to_list() == [None, "evidence"]
    (f,) = _rule(diag, "recompilation")
    assert (f.op_types, f.count, f.time_us, f.confidence) == (("Mul",), 1, 1000.0, "evidence")


def test_sync_in_gap_is_host_op():
    diag = diagnose(_gap_profile([event("AscendCL@aclrtSynchronizeStream", 20, 950)]))
    assert _causes(diag) == [None, "host_op"]
    (f,) = _rule(diag, "host_op_wait")
    assert f.op_types == ("Mul",) and f.confidence == "evidence"


def test_idle_host_is_host_op_and_busy_launching_host_is_unexplained():
    idle = diagnose(_gap_profile([event("Node@launch", 1000, 5)]))
    assert _causes(idle) == [None, "host_op"]
    busy = diagnose(_gap_profile([event("AscendCL@aclnnMul", 20, 400), event("Node@launch", 420, 500)]))
    assert _causes(busy) == [None, "unexplained"]
    assert _rule(busy, "host_op_wait") == [] and _rule(busy, "recompilation") == []


def test_compile_covering_little_of_the_gap_is_not_recompilation():
    diag = diagnose(_gap_profile([event("AscendCL@aclopCompileAndExecute", 50, 300), event("Node@launch", 350, 650)]))
    assert _causes(diag) == [None, "unexplained"]


def test_step_boundary_gap_is_expected():
    diag = diagnose(_gap_profile([], step_event=True))
    assert _causes(diag) == [None, "expected"]
    assert _rule(diag, "host_op_wait") == []


def test_short_wait_gets_no_cause():
    tasks = [task("Add", 0, 10), task("Mul", 400, 5)]
    diag = diagnose(profile(tasks, [event("AscendCL@aclopCompileAndExecute", 10, 390)]))
    assert _causes(diag) == [None, None]


def test_many_compile_calls_without_attributed_waits():
    events = [event("AscendCL@aclopCompileAndExecute", i * 100, 10) for i in range(20)]
    (f,) = _rule(diagnose(profile([task("Add", 0, 10)], events)), "recompilation")
    assert f.count == 20 and f.op_types == () and "20 aclopCompileAndExecute" in f.title
    fewer = diagnose(profile([task("Add", 0, 10)], events[:19]))
    assert _rule(fewer, "recompilation") == []


# --- wait attribution without a timeline ---------------------------------------------------


def test_no_timeline_first_shape_aclop_is_suspected_recompilation():
    tasks = [
        task("ReduceSum", 0, 10, shapes="8,8"),
        task("ReduceSum", 1010, 10, shapes="8,16"),  # new shape, long wait: recompiles
        task("ReduceSum", 2020, 10, shapes="8,16"),  # same shape again, long wait: unexplained
        task("aclnnAdd_AddAiCore_Add", 3030, 10, op_type="Add", shapes="4"),  # aclnn never recompiles
    ]
    diag = diagnose(profile(tasks))
    assert _causes(diag) == [None, "recompilation", "unexplained", "unexplained"]
    assert diag.tasks["wait_confidence"].to_list() == [None, "suspected", "suspected", "suspected"]
    (f,) = _rule(diag, "recompilation")
    assert f.confidence == "suspected" and f.count == 1
    assert _rule(diag, "host_op_wait") == []  # never claimed without a timeline


def test_no_timeline_dynamic_op_state_is_suspected_recompilation():
    tasks = [task("Add", 0, 10), task("Add", 1010, 10, state="dynamic"), task("Add", 2020, 10, state="static")]
    assert _causes(diagnose(profile(tasks))) == [None, "recompilation", "unexplained"]


def test_no_timeline_step_id_change_is_expected():
    tasks = [task("Add", 0, 10, step=1), task("Add", 1010, 10, step=2, shapes="9,9")]
    assert _causes(diagnose(profile(tasks))) == [None, "expected"]


# --- info rules ----------------------------------------------------------------------------


def test_aclop_share_counts_calls_and_time():
    tasks = [
        task("aclnnMatmul_MatMulCommon_MatMulV2", 0, 30, op_type="MatMulV2"),
        task("Cast", 100, 10),
        task("Cast", 200, 10),
        task("hcom_allReduce__1", 300, 50, op_type="allReduce", task_type="COMMUNICATION"),
    ]
    (f,) = _rule(diagnose(profile(tasks)), "aclop_share")
    assert f.severity == "info" and f.count == 2 and f.time_us == 20.0 and f.op_types == ("Cast",)
    assert "aclnn: 1 call(s)" in f.title


def test_dynamic_shape_only_when_every_state_is_dynamic():
    dyn = [task("Add", 0, 1, state="dynamic"), task("Mul", 10, 1, state="dynamic"), task("X", 20, 1, state=None)]
    (f,) = _rule(diagnose(profile(dyn)), "dynamic_shape")
    assert f.count == 2
    mixed = [task("Add", 0, 1, state="dynamic"), task("Mul", 10, 1, state="static")]
    assert _rule(diagnose(profile(mixed)), "dynamic_shape") == []


def test_data_gaps_lists_what_is_missing():
    (f,) = _rule(diagnose(profile([task("Add", 0, 1, state=None)])), "data_gaps")
    assert "no timeline" in f.title and "no OP State" in f.title and "no PMU" in f.title
    # A derived op_statistic is what msprof computes from the same tasks: a note, not a gap.
    assert "derived" not in f.title
    assert "only 1 operator task(s): a small sample" in f.title
    full = profile(
        [task("Add", 0, 1)],
        [event("Node@launch", 0, 1)],
        pmu=True,
        stat=_stat([("0", "Add", "AI_CORE", 1, 1.0, 1.0, 1.0, 1.0, 100.0)]),
    )
    (only,) = _rule(diagnose(full), "data_gaps")
    assert only.count == 1 and "small sample" in only.title
    many = [task("Add", 10 * i, 1) for i in range(SMALL_SAMPLE_TASKS)]
    full = profile(
        many,
        [event("Node@launch", 0, 1)],
        pmu=True,
        stat=_stat([("0", "Add", "AI_CORE", len(many), 100.0, 1.0, 1.0, 1.0, 100.0)]),
    )
    assert _rule(diagnose(full), "data_gaps") == []


def test_findings_ordered_by_time_at_stake_and_per_card():
    tasks = [
        task("Conv", 0, 1500),
        task("Conv", 2000, 5000, card="1"),
        task("NonZero", 10000, 30, task_type="AI_CPU"),
    ]
    diag = diagnose(profile(tasks))
    times = [f.time_us for f in diag.findings]
    assert times == sorted(times, reverse=True)
    assert {f.card for f in _rule(diag, "long_task")} == {"0", "1"}
    only1 = diagnose(profile(tasks), cards=("1",))
    assert {f.card for f in only1.findings} == {"1"}


# --- thresholds file -----------------------------------------------------------------------


def test_thresholds_from_toml(tmp_path):
    path = tmp_path / "rules.toml"
    path.write_text("[thresholds]\nlong_task_us = 250\nlong_wait_us = 100.5\noutlier_min_calls = 3\n")
    th = Thresholds.load(path)
    assert (th.long_task_us, th.long_wait_us, th.outlier_min_calls, th.ai_cpu_us) == (250.0, 100.5, 3, 20.0)
    path.write_text("[thresholds]\nlong_task = 1\n")
    with pytest.raises(ProfileError, match="unknown threshold.*long_task"):
        Thresholds.load(path)
    path.write_text("[thresholds\n")
    with pytest.raises(ProfileError, match="invalid TOML"):
        Thresholds.load(path)
    path.write_text('[thresholds]\nlong_task_us = "big"\n')
    with pytest.raises(ProfileError, match="must be a number"):
        Thresholds.load(path)
    with pytest.raises(ProfileError, match="not found"):
        Thresholds.load(tmp_path / "missing.toml")


# --- an application's own kernel (custom Ascend C kernel) -----------------------------------


def test_compile_api_before_a_custom_kernel_names_another_operator():
    """An Ascend C kernel is built ahead of time: a compile call over the gap before it was
    the host compiling some other operator, and the title says so."""
    tasks = [task("Add", 0, 10), task("matmul_custom", 1010, 5)]
    diag = diagnose(profile(tasks, [event("AscendCL@aclopCompileAndExecute", 50, 900)]))
    assert _causes(diag) == [None, "recompilation"]
    (f,) = _rule(diag, "recompilation")
    assert f.op_types == ("matmul_custom",) and f.time_us == 1000.0
    assert "compiled another operator" in f.title and f.confidence == "evidence"


def test_no_timeline_first_call_of_a_custom_kernel_is_not_recompilation():
    """Without a timeline a long wait before an aclop's first shape is suspected
    recompilation; an application's own kernel is not compiled online: no finding."""
    tasks = [task("Add", 0, 10), task("matmul_custom", 1010, 5)]
    diag = diagnose(profile(tasks))
    assert diag.tasks["wait_confidence"].to_list()[1] == "suspected"
    assert _rule(diag, "recompilation") == [] and _rule(diag, "host_op_wait") == []
    plain = diagnose(profile([task("Add", 0, 10), task("Mul", 1010, 5)]))
    assert [f.op_types for f in _rule(plain, "recompilation")] == [("Mul",)]


def test_aclop_share_leaves_custom_kernels_out():
    tasks = [task("add_custom", 0, 30), task("AddCustom", 100, 30), task("Cast", 200, 10)]
    (f,) = _rule(diagnose(profile(tasks)), "aclop_share")
    assert f.count == 1 and f.op_types == ("Cast",) and f.time_us == 10.0
    only_kernels = [task("matmul_custom", 0, 30), task("matmul_custom", 100, 30)]
    assert _rule(diagnose(profile(only_kernels)), "aclop_share") == []


def test_dominant_custom_kernel_gets_the_kernel_advice_and_its_bound():
    tasks = [task("matmul_custom", i * 100, 90) for i in range(5)] + [task("Cast", 600, 10)]
    (f,) = _rule(diagnose(profile(tasks, pmu=True)), "dominant_op_type")
    # tiny's PMU column is aic_mac_ratio = 1.0 on every task: cube-bound
    assert f.severity == "warning" and "custom kernel, cube-bound" in f.title
    assert "Block Dim" in f.advice and "FLAGS_npu_jit_compile" not in f.advice
    assert "jit_compile" not in f.advice and "recompil" not in f.advice


def test_long_custom_kernel_gets_the_kernel_advice():
    (f,) = _rule(diagnose(profile([task("matmul_custom", 0, 5000)])), "long_task")
    assert "operator team" not in f.advice and "Ascend C" in f.advice
    (g,) = _rule(diagnose(profile([task("MatMulV3", 0, 5000)])), "long_task")
    assert "operator team" in g.advice


def test_low_parallelism_needs_core_counts():
    """tiny's capture has no info.json and no db: the rule cannot judge Block Dim."""
    assert _rule(diagnose(profile([task("matmul_custom", 0, 5000)])), "low_parallelism") == []
