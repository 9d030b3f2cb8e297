"""The diagnosis finds exactly the problems the generator planted, and nothing on a clean run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from npuscope.analysis import diagnose
from npuscope.analysis.training_rules import TRAINING_RULES
from npuscope.fixtures.generate import generate
from npuscope.parsers import FrameCache, open_profile

DEFAULT = ("recompilation", "host_op_wait", "ai_cpu", "long_task", "dominant_op_type")


def _warnings(root):
    diag = diagnose(open_profile(root, cache=FrameCache(enabled=False)))
    return diag, [f for f in diag.findings if f.severity in ("warning", "critical")]


@pytest.mark.parametrize("layout", ["era_b", "era_a", "torch_npu"])
@pytest.mark.parametrize("timeline", [True, False], ids=["timeline", "no-timeline"])
def test_planted_problems_and_nothing_else(tmp_path, layout, timeline):
    g = generate(tmp_path, layout=layout, cards=2, timeline=timeline, problems=DEFAULT)
    diag, warnings = _warnings(g.root)
    expected = {(p.rule, p.op_type, p.card): p.count for p in g.planted}
    if not timeline:  # a host-side op is never claimed without the host's timeline
        expected = {k: v for k, v in expected.items() if k[0] != "host_op_wait"}
    got = {(f.rule, f.op_types[0], f.card): f.count for f in warnings}
    assert got == expected
    assert {p.card for p in g.planted} == {"0", "1"}  # problems spread over both cards
    recompile = next(f for f in warnings if f.rule == "recompilation")
    assert recompile.confidence == ("evidence" if timeline else "suspected")
    # Every evidence row points at a real task of the right type and card.
    for f in warnings:
        for ev in f.evidence:
            row = diag.tasks.row(ev["row"], named=True)
            assert (row["op_type"], row["card"]) == (f.op_types[0], f.card)


@pytest.mark.parametrize("layout", ["era_b", "era_a", "torch_npu"])
def test_clean_profile_raises_no_warning(tmp_path, layout):
    g = generate(tmp_path, layout=layout, cards=2, problems=())
    diag, warnings = _warnings(g.root)
    assert warnings == []
    dominant = [f for f in diag.findings if f.rule == "dominant_op_type"]
    assert all(f.severity == "info" and f.op_types[0].startswith("MatMul") for f in dominant)
    # Step-boundary gaps are long but expected, not blamed on the host.
    causes = set(diag.tasks["wait_cause"].drop_nulls().unique())
    assert causes <= {"expected"}


def test_duration_outlier_is_found(tmp_path):
    # ~17 RmsNorm tasks a step (ops_per_step=400): one at 30x the rest passes Max >= 10 x Avg.
    g = generate(tmp_path, layout="era_b", cards=1, steps=6, ops_per_step=400, problems=("duration_outlier",))
    _, warnings = _warnings(g.root)
    (planted,) = g.planted
    assert [(f.rule, f.op_types[0]) for f in warnings] == [("duration_outlier", planted.op_type)]


def test_report_json_names_the_planted_op_types(tmp_path):
    g = generate(tmp_path / "p", layout="era_b", cards=2, problems=DEFAULT)
    res = subprocess.run(
        [sys.executable, "-m", "npuscope", "report", str(g.root), "--format", "json", "--no-cache"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["schema"] == "npuscope.report/1"
    assert set(report["source"]) >= {"path", "layout", "files"}
    got = {
        (f["rule"], tuple(f["op_types"]), card["card"])
        for card in report["cards"]
        for f in card["findings"]
        if f["severity"] == "warning"
    }
    operator = {k for k in got if k[0] not in TRAINING_RULES}
    assert operator == {(p.rule, (p.op_type,), p.card) for p in g.planted}
    # The operator plants are not spread evenly: card 0 carries the TransData-dominated
    # compute, the AI_CPU tasks and the recompilation waits, so its compute and free time per
    # step are far above card 1's, and msprof-analyze's slow-rank rule rightly names it.
    assert got - operator == {("slow_rank", (), "0")}
    for card in report["cards"]:
        assert set(card) >= {"card", "summary", "op_statistic", "top_duration", "top_wait", "findings"}
        assert set(card["summary"]) == {"tasks", "compute_us", "communication_us", "wait_us", "span_us", "op_types"}
        assert card["summary"]["tasks"] == g.rows_per_card[card["card"]]
        durations = [r["duration_us"] for r in card["top_duration"]]
        assert durations == sorted(durations, reverse=True) and len(durations) == 10
        waits = [r["wait_us"] for r in card["top_wait"]]
        assert waits == sorted(waits, reverse=True)
        assert all("wait_cause" in r for r in card["top_wait"])
        totals = [r["total_us"] for r in card["op_statistic"]]
        assert totals == sorted(totals, reverse=True)
        for f in card["findings"]:
            assert set(f) >= {
                "rule",
                "severity",
                "title",
                "op_types",
                "op_names",
                "count",
                "time_us",
                "share_pct",
                "advice",
                "confidence",
                "evidence",
            }
