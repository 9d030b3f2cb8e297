"""`npuscope compare` and card against card, on generated pairs whose differences are known.

The expected numbers are summed from the generated op_summary CSVs with the csv module, not
by the code under test.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from npuscope.analysis.card_spread import card_spread
from npuscope.analysis.compare import SCHEMA, STATUSES, compare_runs, regression
from npuscope.analysis.compare_render import comparison_json, render_comparison
from npuscope.fixtures.generate import generate
from npuscope.parsers import FrameCache, ProfileError, open_profile

OP_STAT_HEADER = "OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)"
OP_KEYS = {
    "op_type",
    "core_type",
    "base_total_us",
    "new_total_us",
    "delta_us",
    "delta_pct",
    "base_ratio_pct",
    "new_ratio_pct",
    "status",
}


def _cli(*args: str) -> subprocess.CompletedProcess:
    # conftest points NPUSCOPE_CACHE_DIR at a private folder; the child inherits it.
    return subprocess.run(
        [sys.executable, "-m", "npuscope", "compare", *map(str, args)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )


def _in_process(*args: str) -> subprocess.CompletedProcess:
    """`_cli` through `cli.main` in this process: the same code and output without starting an
    interpreter (~1 s each on a loaded machine). Every behaviour keeps a real `_cli` run too."""
    from npuscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["compare", *map(str, args)])
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def _open(root: Path):
    return open_profile(root, cache=FrameCache(enabled=False))


def _summary_rows(g) -> list[dict[str, str]]:
    """op_summary rows of a generated Era B export, read with the csv module."""
    rows: list[dict[str, str]] = []
    for f in sorted(p for p in g.files if p.name.startswith("op_summary")):
        with open(f, newline="") as fh:
            rows += [{k.strip(): (v or "").strip() for k, v in r.items()} for r in csv.DictReader(fh)]
    return rows


def _sum(rows, column: str, **match: str) -> float:
    return sum(float(r[column]) for r in rows if all(r[k] == v for k, v in match.items()))


def _compute(rows, **match: str) -> float:
    return sum(
        float(r["Task Duration(us)"])
        for r in rows
        if r["Task Type"] not in ("COMMUNICATION", "HCCL") and all(r[k] == v for k, v in match.items())
    )


@pytest.fixture(scope="module")
def recompile_pair(tmp_path_factory):
    """Same seed, with and without the planted recompilation (ReduceSum on card 0).

    With seed 0 the aclop ranking of card 0 reshuffles too (ReduceSum moves), which must not
    read as an aclop_share finding resolved and a new one.
    """
    root = tmp_path_factory.mktemp("recompile")
    base = generate(root / "base", layout="era_b", cards=2, problems=("recompilation",), seed=0)
    new = generate(root / "new", layout="era_b", cards=2, problems=(), seed=0)
    return base, new


@pytest.fixture(scope="module")
def slow_pair(tmp_path_factory):
    """Same seed; NEW adds long MatMulV3 tasks (a large LM head) on card 1 only."""
    root = tmp_path_factory.mktemp("slow")
    base = generate(root / "base", layout="era_b", cards=2, problems=("ai_cpu",), seed=5)
    new = generate(root / "new", layout="era_b", cards=2, problems=("ai_cpu", "long_task"), seed=5)
    return base, new


def _write_stat(path: Path, rows: list[tuple]) -> Path:
    path.write_text("\n".join([OP_STAT_HEADER] + [",".join(map(str, r)) for r in rows]) + "\n")
    return path


@pytest.fixture
def transdata_pair(tmp_path):
    """The seed's example: TransData's Ratio(%) falls from 19.637 to 18.176 with JIT compilation off.

    MatMulV2 takes the same time in both, so its ratio rises: only the times say who changed.
    """
    new_td = round(0.18176 * 8036.3 / (1 - 0.18176), 3)  # 1785.146 us: 18.176% of the new total
    base = _write_stat(
        tmp_path / "jit_on_op_statistic.csv",
        [
            ("TransData", "AI_CORE", 400, 1963.7, 2.0, 4.909, 40.0, 19.637),
            ("MatMulV2", "AI_CORE", 100, 8036.3, 60.0, 80.363, 120.0, 80.363),
        ],
    )
    new = _write_stat(
        tmp_path / "jit_off_op_statistic.csv",
        [
            ("TransData", "AI_CORE", 400, new_td, 2.0, round(new_td / 400, 3), 40.0, 18.176),
            ("MatMulV2", "AI_CORE", 100, 8036.3, 60.0, 80.363, 120.0, 81.824),
        ],
    )
    return base, new, new_td


# --------------------------------------------------------------------------- a recompilation removed


def test_removed_recompilation_reads_as_faster_and_resolved(recompile_pair):
    gb, gn = recompile_pair
    (planted,) = gb.planted
    assert (planted.rule, planted.op_type, planted.card) == ("recompilation", "ReduceSum", "0")
    c = compare_runs(_open(gb.root), _open(gn.root))
    rb, rn = _summary_rows(gb), _summary_rows(gn)

    # The recompilation waits are the planted ReduceSum waits on card 0, all gone in NEW.
    planted_wait = _sum(rb, "Task Wait Time(us)", Device_id="0", **{"OP Type": "ReduceSum"})
    assert planted_wait > 2000 * planted.count
    assert c.totals["wait_recompilation_us"].base == pytest.approx(planted_wait, abs=0.01)
    assert c.totals["wait_recompilation_us"].new == 0
    assert c.totals["wait_us"].base == pytest.approx(_sum(rb, "Task Wait Time(us)"), abs=0.01)
    assert c.totals["wait_us"].new == pytest.approx(_sum(rn, "Task Wait Time(us)"), abs=0.01)
    assert c.totals["compute_us"].delta == pytest.approx(_compute(rn) - _compute(rb), abs=0.01)
    parts = ("recompilation", "host_op", "expected", "unexplained", "short")
    for side in ("base", "new"):
        split = sum(getattr(c.totals[f"wait_{p}_us"], side) for p in parts)
        assert split == pytest.approx(getattr(c.totals["wait_us"], side), abs=0.01)

    assert c.verdict.startswith("NEW is faster")
    assert "most of it: recompilation wait" in c.verdict
    # The recompilation made card 0 the slow rank (most free time): both findings are resolved.
    assert [(f.rule, f.op_types, f.card) for f in c.findings.resolved] == [
        ("recompilation", ("ReduceSum",), "0"),
        ("slow_rank", (), "0"),
    ]
    assert c.findings.new == ()
    assert {(b.rule, b.card) for b, _ in c.findings.unchanged} >= {("aclop_share", "0"), ("aclop_share", "1")}
    assert regression(c, 0.0) is None  # nothing grew

    # The other way round it is a regression of the wait, and the gate says so.
    back = compare_runs(_open(gn.root), _open(gb.root))
    assert back.verdict.startswith("NEW is slower")
    reason = regression(back, 5.0)
    assert reason is not None and "total wait" in reason and "device time" not in reason
    assert [(f.rule, f.card) for f in back.findings.new] == [("recompilation", "0"), ("slow_rank", "0")]


# --------------------------------------------------------------------------- an op type slower on one card


def test_op_type_made_slower_on_one_card(slow_pair):
    gb, gn = slow_pair
    (slow,) = gn.planted_for("long_task")
    assert (slow.op_type, slow.card) == ("MatMulV3", "1")
    c = compare_runs(_open(gb.root), _open(gn.root))
    rb, rn = _summary_rows(gb), _summary_rows(gn)
    mm = {"OP Type": "MatMulV3"}

    top = c.op_types[0]
    assert (top.op_type, top.core_type, top.status) == ("MatMulV3", "AI_CORE", "slower")
    assert top.base_total_us == pytest.approx(_sum(rb, "Task Duration(us)", **mm), abs=0.01)
    assert top.new_total_us == pytest.approx(_sum(rn, "Task Duration(us)", **mm), abs=0.01)
    assert top.delta_pct == pytest.approx(100 * top.delta_us / top.base_total_us)
    assert all(o.status == "same" for o in c.op_types[1:])  # nothing else moved
    deltas = [abs(o.delta_us) for o in c.op_types]
    assert deltas == sorted(deltas, reverse=True)

    per = {cc.card: cc.totals["compute_us"] for cc in c.cards}
    assert per["1"].delta == pytest.approx(_compute(rn, Device_id="1") - _compute(rb, Device_id="1"), abs=0.01)
    assert per["1"].delta > 10_000
    assert per["0"].delta == pytest.approx(0.0, abs=0.01)
    # The long MatMulV3 tasks make card 1 the slow rank: a training-level finding, new too.
    assert [(f.rule, f.op_types, f.card) for f in c.findings.new] == [
        ("long_task", ("MatMulV3",), "1"),
        ("slow_rank", (), "1"),
    ]
    assert c.findings.resolved == ()
    assert c.verdict.startswith("NEW is slower") and "MatMulV3 (AI_CORE)" in c.verdict

    # Negative: card 0 alone did not change at all.
    only0 = compare_runs(_open(gb.root), _open(gn.root), cards=("0",))
    assert only0.pairs == (("0", "0"),)
    assert only0.verdict.startswith("About the same")
    assert {o.status for o in only0.op_types} == {"same"}
    assert only0.findings.new == () and only0.findings.resolved == ()
    assert regression(only0, 0.0) is None


def test_card_spread_finds_the_slow_card(slow_pair):
    gb, gn = slow_pair
    rn, rb = _summary_rows(gn), _summary_rows(gb)
    s = card_spread(_open(gn.root))
    compute = {card: _compute(rn, Device_id=card) for card in ("0", "1")}
    assert {t.card: t.compute_us for t in s.cards} == pytest.approx(compute, abs=0.01)
    mean = sum(compute.values()) / 2
    assert s.compute_spread_pct == pytest.approx(100 * (max(compute.values()) - min(compute.values())) / mean, abs=1e-6)
    assert s.slowest_card == "1" and s.flagged
    comm = sum(float(r["Task Duration(us)"]) for r in rn if r["Device_id"] == "1" and r["Task Type"] == "COMMUNICATION")
    assert comm > 0 and next(t for t in s.cards if t.card == "1").communication_us == pytest.approx(comm, abs=0.01)
    top = s.op_types[0]
    assert (top.op_type, top.slowest_card, top.fastest_card) == ("MatMulV3", "1", "0")
    # NonZero (AI_CPU) runs on card 0 only: that is where it is slowest.
    nonzero = next(o for o in s.op_types if o.op_type == "NonZero")
    assert (nonzero.slowest_card, nonzero.fastest_total_us) == ("0", 0.0)

    # Negative: without the slow LM head the two cards are within 5% of each other.
    base = card_spread(_open(gb.root))
    assert base.compute_spread_pct < 5.0 and not base.flagged
    assert max(_compute(rb, Device_id=c) for c in "01") / min(_compute(rb, Device_id=c) for c in "01") < 1.05


def test_report_json_carries_card_spread(slow_pair):
    from npuscope.analysis import diagnose
    from npuscope.analysis.report import build_report

    _, gn = slow_pair
    p = _open(gn.root)
    report = build_report(p, diagnose(p, None, ("0",)))
    spread = report["card_spread"]
    assert [c["card"] for c in spread["cards"]] == ["0", "1"]  # every card, whatever --card says
    assert spread["slowest_card"] == "1" and spread["flagged"] is True
    assert spread["op_types"][0]["op_type"] == "MatMulV3"


# --------------------------------------------------------------------------- same run, by shape, cards


def test_a_run_against_itself_is_the_same(recompile_pair):
    gb, _ = recompile_pair
    c = compare_runs(_open(gb.root), _open(gb.root))
    assert {o.status for o in c.op_types} == {"same"}
    assert c.verdict.startswith("About the same")
    assert c.findings.new == () and c.findings.resolved == ()
    assert len(c.findings.unchanged) >= 3
    assert regression(c, 0.0) is None


def test_by_shape_matches_op_name_and_input_shapes(slow_pair):
    gb, gn = slow_pair
    c = compare_runs(_open(gb.root), _open(gn.root), by="shape")
    changed = [o for o in c.op_types if o.status != "same"]
    assert changed and {o.op_type for o in changed} == {"MatMulV3"}
    new_shapes = {o.input_shapes for o in changed if o.status == "new"}
    # The slow LM head of the generator has a 152,064-word vocabulary: shapes BASE never had.
    assert new_shapes and all("152064" in s for s in new_shapes)
    assert all(o.op_name for o in c.op_types)
    # By shape or by type, the rows add up to the same change in compute.
    assert sum(o.delta_us for o in c.op_types) == pytest.approx(c.totals["compute_us"].delta, abs=0.01)
    doc = comparison_json(c)
    assert {"op_name", "input_shapes"} <= set(doc["op_types"][0])


def test_different_cards_are_noted_and_listed(tmp_path, recompile_pair):
    gb, _ = recompile_pair
    one = generate(tmp_path / "one", layout="era_b", cards=1, problems=(), seed=0)
    c = compare_runs(_open(gb.root), _open(one.root))
    assert c.pairs == (("0", "0"),)
    assert any("different cards" in n for n in c.notes)
    listed = {cc.card: (cc.base_card, cc.new_card) for cc in c.cards}
    assert listed == {"0": ("0", "0"), "1": ("1", None)}
    with pytest.raises(ProfileError, match="no card '1' in NEW"):
        compare_runs(_open(gb.root), _open(one.root), cards=("1",))


def test_single_cards_with_different_ids_are_paired(tmp_path, transdata_pair):
    base, _, _ = transdata_pair
    other = tmp_path / "card3_op_statistic.csv"
    other.write_text("Device_id," + OP_STAT_HEADER + "\n3,TransData,AI_CORE,400,1963.7,2.0,4.909,40.0,100.0\n")
    c = compare_runs(_open(base), _open(other))
    assert c.pairs == (("0", "3"),)
    assert any("BASE card 0 is compared with NEW card 3" in n for n in c.notes)
    assert {o.op_type: o.status for o in c.op_types} == {"TransData": "same", "MatMulV2": "vanished"}


# --------------------------------------------------------------------------- the TransData example


def test_transdata_ratio_falling_is_an_improvement(transdata_pair):
    base, new, new_td = transdata_pair
    c = compare_runs(_open(base), _open(new))
    rows = {o.op_type: o for o in c.op_types}
    td = rows["TransData"]
    assert (td.base_ratio_pct, td.new_ratio_pct) == (19.637, 18.176)
    assert td.status == "faster" and td.delta_us == pytest.approx(new_td - 1963.7)
    # MatMulV2's ratio rose only because the whole fell: its time did not move.
    assert rows["MatMulV2"].new_ratio_pct > rows["MatMulV2"].base_ratio_pct
    assert rows["MatMulV2"].status == "same"
    assert c.totals["compute_us"].delta < 0
    assert c.verdict.startswith("NEW is faster") and "slower" not in c.verdict
    assert "TransData (AI_CORE)" in c.verdict
    assert regression(c, 0.0) is None

    text = _cli(base, new)
    assert text.returncode == 0, text.stderr
    line = next(x for x in text.stdout.splitlines() if x.startswith("TransData"))
    assert "19.637" in line and "18.176" in line and line.split()[-1] == "faster"
    assert "NEW is faster" in text.stdout and "NEW is slower" not in text.stdout

    res = _in_process(base, new, "--format", "json")  # json through `_cli`: test_json_and_markdown_through_the_cli
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema"] == SCHEMA == "npuscope.compare/1"
    assert set(doc) >= {"schema", "base", "new", "totals", "op_types", "findings", "verdict"}
    assert set(doc["findings"]) >= {"resolved", "new"}
    entry = next(o for o in doc["op_types"] if o["op_type"] == "TransData")
    assert OP_KEYS <= set(entry)
    assert (entry["base_ratio_pct"], entry["new_ratio_pct"], entry["status"]) == (19.637, 18.176, "faster")
    assert entry["delta_us"] < 0
    assert doc["verdict"].startswith("NEW is faster")


# --------------------------------------------------------------------------- CLI: formats and the gate


def test_json_and_markdown_through_the_cli(recompile_pair):
    gb, gn = recompile_pair
    res = _cli(gb.root, gn.root, "--format", "json", "--no-cache")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["base"]["cards"] == ["0", "1"] and doc["new"]["path"] == str(gn.root.resolve())
    assert all(OP_KEYS <= set(o) and o["status"] in STATUSES for o in doc["op_types"])
    deltas = [abs(o["delta_us"]) for o in doc["op_types"]]
    assert deltas == sorted(deltas, reverse=True)
    assert doc["totals"]["wait_recompilation_us"]["new"] == 0
    assert doc["totals"]["wait_recompilation_us"]["delta_pct"] == -100.0
    assert [f["rule"] for f in doc["findings"]["resolved"]] == ["recompilation", "slow_rank"]
    assert doc["findings"]["new"] == []

    md = _cli(gb.root, gn.root, "--format", "markdown", "--top", "3")
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("# npuscope compare")
    assert "## Verdict" in md.stdout and "| OP Type | Core Type |" in md.stdout
    op_lines = md.stdout.split("## Op types", 1)[1].split("## Steps", 1)[0].splitlines()
    assert sum(1 for x in op_lines if x.startswith("| ") and "OP Type" not in x) == 3


def test_regression_gate_exit_codes(slow_pair):
    gb, gn = slow_pair
    device_growth = (
        100
        * (_compute(_summary_rows(gn)) - _compute(_summary_rows(gb)))
        / sum(float(r["Task Duration(us)"]) for r in _summary_rows(gb))
    )
    assert 5 < device_growth < 50  # the numbers the gate below must see

    slower = _cli(gb.root, gn.root, "--fail-on-regression", "5")
    assert slower.returncode == 1
    # The mean step time (the number users care about most) is said first, then the device time.
    assert slower.stderr.startswith("npuscope: regression: mean step time grew")
    assert "; total device time grew" in slower.stderr
    assert slower.stderr.count("\n") == 1
    assert "NEW is slower" in slower.stdout  # the comparison is printed all the same

    assert _cli(gb.root, gn.root, "--fail-on-regression", "50").returncode == 0
    assert _in_process(gb.root, gn.root).returncode == 0  # no gate, no failure
    assert _in_process(gn.root, gb.root, "--fail-on-regression", "0").returncode == 0  # faster passes
    assert _in_process(gb.root, gn.root, "--card", "0", "--fail-on-regression", "0").returncode == 0


def test_regression_gate_counts_the_wait(recompile_pair):
    rb, rn = recompile_pair  # adding recompilation grows the wait, not the device time
    waits = _in_process(rn.root, rb.root, "--fail-on-regression", "10", "--format", "json")
    assert waits.returncode == 1
    assert "total wait grew" in waits.stderr and "device time" not in waits.stderr
    assert json.loads(waits.stdout)["verdict"].startswith("NEW is slower")


@pytest.mark.parametrize(
    "args, message, run",
    [
        (("--fail-on-regression", "-1"), "must be a percentage >= 0", _cli),
        (("--fail-on-regression", "ten"), "not a number", _cli),
        # read from the profiles (a real process exits 2 on those: test_missing_profile_exits_2_with_one_line)
        (("--card", "7"), "no card '7' in BASE and NEW", _in_process),
        (("--by", "shape"), "--by shape needs tasks", _in_process),
    ],
)
def test_bad_input_exits_2(transdata_pair, args, message, run):
    base, new, _ = transdata_pair
    res = run(base, new, *args)
    assert res.returncode == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""


def test_missing_profile_exits_2_with_one_line(tmp_path, transdata_pair):
    base, _, _ = transdata_pair
    res = _cli(base, tmp_path / "missing")
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("npuscope: ")
    assert res.stdout == ""


def test_help_names_the_gate_and_compare_is_listed():
    res = subprocess.run([sys.executable, "-m", "npuscope", "compare", "--help"], capture_output=True, text=True)
    assert res.returncode == 0
    assert "--fail-on-regression" in res.stdout and "npuscope.compare/1" in res.stdout
    top = subprocess.run([sys.executable, "-m", "npuscope", "--help"], capture_output=True, text=True)
    assert "compare" in top.stdout


def test_render_text_lists_sections_in_order(recompile_pair):
    gb, gn = recompile_pair
    text = render_comparison(compare_runs(_open(gb.root), _open(gn.root)), "text", top=5)
    order = ["Verdict", "Totals", "Per card", "Findings", "Op types (by |delta|, top 5 of"]
    positions = [text.index("\n" + s) for s in order]
    assert positions == sorted(positions)
    assert "resolved (2):" in text and "new (0)" in text
