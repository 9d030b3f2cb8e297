"""Actions on findings (analysis/actions.py): the switches a finding's advice names, as data,
for the framework that made the capture; real captures and the advice table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from npuscope.analysis.actions import NO_ACTION, SWITCHES, action_for, actions_in
from npuscope.analysis.advice import ADVICE, PADDLE, TORCH_NPU

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
REAL = SAMPLES / "real"


def report_json(path: Path) -> dict:
    res = subprocess.run(
        [sys.executable, "-m", "npuscope", "report", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def findings(doc: dict) -> list[dict]:
    out = list(doc.get("findings") or [])
    for card in doc.get("cards") or []:
        out += card.get("findings") or []
    return out


def test_every_switch_an_advice_names_is_an_action_of_its_framework():
    for topic, places in ADVICE.items():
        for place, advice in places.items():
            for action in actions_in(advice):
                assert action.text in advice, topic
                if place == PADDLE:
                    assert action.framework == "paddle", (topic, action)
                if place == TORCH_NPU:
                    assert action.framework == "torch_npu", (topic, action)


def test_paddle_advice_for_recompilation_is_the_jit_switch_and_torch_memory_the_allocator():
    from npuscope.analysis.advice import RECOMPILATION

    assert [a.text for a in actions_in(ADVICE[RECOMPILATION][PADDLE])] == ["FLAGS_npu_jit_compile=false"]
    # torch_npu's answer to recompilation is a call, not a switch: no action
    torch = next((v for k, v in ADVICE[RECOMPILATION].items() if k == TORCH_NPU), None)
    if torch is not None:
        assert "FLAGS_npu_jit_compile" not in torch
    texts = {a.text for places in ADVICE.values() for a in actions_in(places.get(TORCH_NPU, ""))}
    assert texts <= {"PYTORCH_NPU_ALLOC_CONF=expandable_segments:True"}
    assert "code change" in NO_ACTION


def test_action_for_knows_the_switches_and_nothing_else():
    assert action_for("FLAGS_npu_jit_compile", "FALSE") == SWITCHES[0]
    assert action_for("FLAGS_npu_jit_compile", "true") is None
    assert action_for("MY_VAR", "1") is None


def test_a_capture_of_unknown_framework_carries_the_paddle_switch_labelled_paddle():
    doc = report_json(SAMPLES / "cann5x_device_summary")
    dominant = [f for f in findings(doc) if f["rule"] == "dominant_op_type"]
    assert dominant
    for f in dominant:
        assert "FLAGS_npu_jit_compile=false" in f["advice"]
        assert f["actions"] == [
            {"kind": "env", "key": "FLAGS_npu_jit_compile", "value": "false", "framework": "paddle"}
        ]


@pytest.mark.parametrize("name", ["torch_npu_2024_cnn", "torch_npu_2023_gpt3_2rank", "torch_npu_2025_db"])
def test_real_torch_npu_captures_never_get_a_paddle_switch(name):
    doc = report_json(REAL / name)
    every = findings(doc)
    assert every, "the capture has findings"
    for f in every:
        assert isinstance(f["actions"], list)
        for a in f["actions"]:
            assert a["framework"] == "torch_npu", (f["rule"], a)
            assert f"{a['key']}={a['value']}" in f["advice"]
