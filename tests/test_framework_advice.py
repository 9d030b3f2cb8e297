"""Advice in the words of the capture's framework (issue 16): torch_npu captures get
torch_npu's switches, never Paddle-only ones; an export that does not tell gets both."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl
import pytest
from tiny import event, profile, task

from npuscope.analysis import diagnose
from npuscope.analysis.advice import ACL, ADVICE, ANY, NPU, advice
from npuscope.analysis.device_kind import DEVICE_KINDS
from npuscope.analysis.framework import FRAMEWORKS, framework_of
from npuscope.parsers import open_profile

TORCH_SWITCH = "torch_npu.npu.set_compile_mode(jit_compile=False)"
PADDLE_ONLY = ("FLAGS_npu_jit_compile", "GLOG_v")
SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"


def _framework_profile(layout: str, extra: tuple[dict, ...] = ()):
    """Stat dominated by TransData, a wait covered by a compile API (recompilation) and one
    covered by a synchronisation (host op): every rule whose advice names a framework."""
    tasks = [
        task("TransData", 0, 40),
        task("Mul", 1040, 10),
        task("Add", 2050, 10),
        *extra,
    ]
    events = [
        event("AscendCL@aclopCompileAndExecute", 50, 900),
        event("AscendCL@aclrtSynchronizeStream", 1060, 950),
    ]
    stat = pl.DataFrame(
        [
            ("0", "TransData", "AI_CORE", 1, 40.0, 40.0, 40.0, 40.0, 66.0),
            ("0", "Mul", "AI_CORE", 1, 10.0, 10.0, 10.0, 10.0, 17.0),
            ("0", "Add", "AI_CORE", 1, 10.0, 10.0, 10.0, 10.0, 17.0),
        ],
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
    return dataclasses.replace(profile(tasks, events, stat=stat), layout=layout)


def _advice(layout: str) -> dict[str, str]:
    diag = diagnose(_framework_profile(layout))
    found = {f.rule: f.advice for f in diag.findings if f.rule in ("dominant_op_type", "recompilation", "host_op_wait")}
    assert set(found) == {"dominant_op_type", "recompilation", "host_op_wait"}
    return found


def test_torch_npu_capture_gets_torch_npu_switches_only():
    found = _advice("torch_npu")
    assert TORCH_SWITCH in found["recompilation"] and TORCH_SWITCH in found["dominant_op_type"]
    assert "with_stack=True" in found["host_op_wait"]
    for text in found.values():
        assert not any(p in text for p in PADDLE_ONLY)


def test_paddle_capture_gets_paddle_switches_only():
    found = _advice("paddle")
    assert "FLAGS_npu_jit_compile=false" in found["recompilation"]
    assert "FLAGS_npu_jit_compile=false" in found["dominant_op_type"]
    assert "GLOG_v=6" in found["host_op_wait"]
    for text in found.values():
        assert "torch_npu" not in text


def test_mindspore_capture_gets_neither_switch():
    found = _advice("mindspore")
    assert "Cell.set_inputs" in found["recompilation"]
    for text in found.values():
        assert "torch_npu" not in text and not any(p in text for p in PADDLE_ONLY)


@pytest.mark.parametrize("layout", ["era_b", "era_a", "file"])
def test_msprof_export_that_does_not_tell_names_both_switches(layout):
    found = _advice(layout)
    for rule in ("recompilation", "dominant_op_type"):
        assert "FLAGS_npu_jit_compile=false" in found[rule] and TORCH_SWITCH in found[rule]
    assert "GLOG_v=6" in found["host_op_wait"] and "with_stack=True" in found["host_op_wait"]


def test_framework_from_the_layout_of_real_samples():
    assert framework_of(open_profile(SAMPLES / "torch_npu_ascend_pt").layout) == "torch_npu"
    assert framework_of(open_profile(SAMPLES / "paddle_cpu").layout) == "paddle"
    assert framework_of(open_profile(SAMPLES / "msprof_golden").layout) == "unknown"


def test_real_torch_npu_capture_has_no_paddle_advice():
    diag = diagnose(open_profile(SAMPLES / "real" / "torch_npu_2025_db" / "level1"))
    rules = {f.rule for f in diag.findings}
    assert "recompilation" in rules
    for f in diag.findings:
        assert not any(p in f.advice for p in PADDLE_ONLY), f.rule
    assert any(TORCH_SWITCH in f.advice for f in diag.findings if f.rule == "recompilation")


@pytest.mark.parametrize("layout", ["era_b", "era_a", "file"])
def test_msprof_export_with_an_own_kernel_is_a_plain_acl_application(layout):
    """Frameworks launch CANN operators; a kernel named like a C function (`matmul_custom`)
    or a msOpGen custom operator (`AddCustom`) is the application's own."""
    for op_type in ("matmul_custom", "AddCustom"):
        prof = dataclasses.replace(profile([task(op_type, 0, 40), task("Cast", 100, 10)]), layout=layout)
        assert framework_of(prof.layout, prof) == "acl"
    plain = dataclasses.replace(profile([task("MatMulV3", 0, 40), task("Cast", 100, 10)]), layout=layout)
    assert framework_of(plain.layout, plain) == "unknown"


def test_framework_layouts_win_over_what_the_capture_holds():
    for layout in ("torch_npu", "mindspore", "paddle"):
        prof = dataclasses.replace(profile([task("matmul_custom", 0, 40)]), layout=layout)
        assert framework_of(prof.layout, prof) == layout


def test_acl_application_gets_acl_words_for_its_cann_operators():
    """A kernel of its own marks the export as an ACL application: the CANN operators it also
    calls get ACL's words (aclopSetCompileFlag), never a framework switch."""
    prof = _framework_profile("era_b", (task("add_custom", 2070, 1),))
    assert framework_of(prof.layout, prof) == "acl"
    diag = diagnose(prof)
    found = {f.rule: f.advice for f in diag.findings if f.rule in ("recompilation", "dominant_op_type")}
    assert "aclopSetCompileFlag" in found["recompilation"] and "aclopSetCompileFlag" in found["dominant_op_type"]
    for f in diag.findings:
        assert TORCH_SWITCH not in f.advice and not any(p in f.advice for p in PADDLE_ONLY), f.rule


def test_table_covers_known_frameworks_and_rules():
    for topic, texts in ADVICE.items():
        assert NPU in texts, topic  # words of a framework only where the NPU has words of its own
        for kind, framework in texts:
            assert kind in DEVICE_KINDS and framework in (*FRAMEWORKS, ANY), (topic, kind, framework)
            assert framework == ANY or kind == "NPU", (topic, kind, framework)
    # The plain ACL application (msprof --application) has its own words, kept in the table.
    assert "aclopSetCompileFlag" in ADVICE["recompilation"][ACL]
    assert advice("recompilation", "acl") == ADVICE["recompilation"][ACL]
