"""compare's training-level part: mean step time and its parts, communication per op type.

Checked on the real GPT-3 2-rank torch_npu capture (against itself: every delta exactly 0;
against the real 2024 CNN capture) with the truth read from step_trace_time.csv and
communication.json by the csv / json modules, and on generated runs against sums over the
rows of their views frames done here in Python.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from npuscope.analysis.compare import compare_runs, regression
from npuscope.analysis.compare_render import comparison_json, render_comparison
from npuscope.analysis.compare_training import ALL, COMM_KEYS, STEP_KEYS
from npuscope.fixtures.generate import generate
from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.training import read_training_views

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real"
GPT3 = REAL / "torch_npu_2023_gpt3_2rank"
CNN = REAL / "torch_npu_2024_cnn" / "level1"
DATA_TRANSPORTS = ("SDMA", "RDMA")  # an op's data: SDMA (the sum of HCCS, PCIE, SIO) + RDMA


def _open(root: Path):
    return open_profile(root, cache=FrameCache(enabled=False))


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    # conftest points NPUSCOPE_CACHE_DIR at a private folder; the child inherits it.
    return subprocess.run(
        [sys.executable, "-m", "npuscope", "compare", *map(str, args), "--no-cache"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )


# --------------------------------------------------------------------------- truth from the files


def _outputs(root: Path) -> dict[str, Path]:
    """card -> ASCEND_PROFILER_OUTPUT, the card being the rank of profiler_info_<rank>.json."""
    return {i.stem.rsplit("_", 1)[1]: i.parent / "ASCEND_PROFILER_OUTPUT" for i in root.glob("*/profiler_info_*.json")}


def _step_rows(root: Path) -> dict[str, list[dict[str, float]]]:
    """Per card, the steps of step_trace_time.csv; the step time is compute + not overlapped + free."""
    out = {}
    for card, folder in _outputs(root).items():
        with open(folder / "step_trace_time.csv", newline="") as fh:
            rows = []
            for r in csv.DictReader(fh):
                compute, nov, free = (float(r[k]) for k in ("Computing", "Communication(Not Overlapped)", "Free"))
                rows.append(
                    {
                        "step_us": compute + nov + free,
                        "compute_us": compute,
                        "communication_us": float(r["Communication"]),
                        "comm_not_overlapped_us": nov,
                        "free_us": free,
                    }
                )
        out[card] = rows
    return out


def _mean(rows: list[dict[str, float]], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


def _comm_truth(root: Path) -> dict[str, dict[str, float | None]]:
    """Per op type over every rank: count, elapse, wait (us) and the bandwidth of the ops that
    moved data (their data over the time it took, MB per ms = GB/s), from communication.json."""
    per: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for folder in _outputs(root).values():
        for step in json.loads((folder / "communication.json").read_text()).values():
            for kind in step.values():
                for key, op in kind.items():
                    if key == "Total Op Info":
                        continue
                    match = re.match(r"hcom_([A-Za-z]+)_", key)
                    assert match, key
                    t = per[match.group(1)]
                    info = op["Communication Time Info"]
                    t["count"] += 1
                    t["total_us"] += info["Elapse Time(ms)"] * 1000
                    t["wait_us"] += info["Wait Time(ms)"] * 1000
                    bw = op["Communication Bandwidth Info"]
                    size = sum(bw[x]["Transit Size(MB)"] for x in DATA_TRANSPORTS if x in bw)
                    ms = sum(bw[x]["Transit Time(ms)"] for x in DATA_TRANSPORTS if x in bw)
                    if size > 0 and ms > 0:
                        t["_mb"] += size
                        t["_ms"] += ms
    return {
        op: {
            "count": t["count"],
            "total_us": t["total_us"],
            "wait_us": t["wait_us"],
            "bandwidth_gbps": t["_mb"] / t["_ms"] if t["_ms"] else None,
        }
        for op, t in per.items()
    }


def _section(text: str, title: str) -> list[str]:
    """The lines of one section of the text output (up to the next blank line + title)."""
    body = text.split(f"\n{title}", 1)[1]
    return body.split("\n\n", 1)[0].splitlines()


# --------------------------------------------------------------------------- real: against itself


def test_real_capture_against_itself_every_delta_is_exactly_zero():
    c = compare_runs(_open(GPT3), _open(GPT3))
    t = c.training
    truth = _step_rows(GPT3)
    assert t.steps_in == (True, True) and t.communication_in == (True, True) and t.notes == ()
    assert [s.card for s in t.steps] == ["0", "1", ALL]
    for s in t.steps:
        rows = [r for card, rs in sorted(truth.items()) for r in rs] if s.card == ALL else truth[s.card]
        assert s.base_steps == s.new_steps == 1  # one step (step 2) per rank
        for key in STEP_KEYS:
            ch = s.means[key]
            assert ch.base == ch.new == pytest.approx(_mean(rows, key), rel=1e-12)
            assert ch.delta == 0.0 and ch.delta_pct == 0.0 and ch.ratio == 1.0
    comm = _comm_truth(GPT3)
    assert {x.op_type for x in t.communication} == set(comm)
    for x in t.communication:
        assert x.status == "same"
        for key in COMM_KEYS:
            ch, want = x.values[key], comm[x.op_type][key]
            assert ch.base == ch.new
            assert (ch.base is None) == (want is None)
            if want is not None:
                assert ch.base == pytest.approx(want, rel=1e-9)
                assert ch.delta == 0.0

    doc = comparison_json(c)
    for card in doc["steps"]["cards"]:
        assert all(card[k]["delta"] == 0 and card[k]["ratio"] == 1 for k in STEP_KEYS)
    for op in doc["communication"]["op_types"]:
        assert op["total_us"]["delta"] == 0 and op["count"]["delta"] == 0
    assert regression(c, 0.0) is None


# --------------------------------------------------------------------------- real: GPT-3 against the CNN


def test_real_captures_step_means_and_communication_against_the_files():
    c = compare_runs(_open(GPT3), _open(CNN))
    t = c.training
    tb, tn = _step_rows(GPT3), _step_rows(CNN)
    by_card = {s.card: s for s in t.steps}
    for card in ("0", "1"):
        s = by_card[card]
        assert (s.base_card, s.new_card, s.base_steps, s.new_steps) == (card, card, 1, 1)
        for key in STEP_KEYS:
            b, n = _mean(tb[card], key), _mean(tn[card], key)
            assert s.means[key].base == pytest.approx(b, rel=1e-9)
            assert s.means[key].new == pytest.approx(n, rel=1e-9)
            assert s.means[key].delta == pytest.approx(n - b, rel=1e-9)
            assert s.means[key].ratio == pytest.approx(n / b, rel=1e-9)
    every = by_card[ALL]
    for key in STEP_KEYS:  # every step of both ranks, each counting once
        assert every.means[key].base == pytest.approx((_mean(tb["0"], key) + _mean(tb["1"], key)) / 2, rel=1e-9)
        assert every.means[key].new == pytest.approx((_mean(tn["0"], key) + _mean(tn["1"], key)) / 2, rel=1e-9)
    assert every.means["step_us"].delta < 0  # the CNN's step is the shorter one

    cb, cn = _comm_truth(GPT3), _comm_truth(CNN)
    assert set(cn) == {"allReduce"} and {"allGather", "broadcast", "reduceScatter", "send"} <= set(cb)
    for x in t.communication:
        want_b, want_n = cb.get(x.op_type), cn.get(x.op_type)
        assert want_b is not None
        assert x.status == (
            "vanished" if want_n is None else ("faster" if x.values["total_us"].delta < 0 else "slower")
        )
        for key in ("count", "total_us", "wait_us"):
            assert x.values[key].base == pytest.approx(want_b[key], rel=1e-9)
            assert x.values[key].new == pytest.approx(0.0 if want_n is None else want_n[key], rel=1e-9, abs=1e-9)
        assert x.values["bandwidth_gbps"].base == pytest.approx(want_b["bandwidth_gbps"], rel=1e-9)
        if want_n is None:
            assert x.values["bandwidth_gbps"].new is None
        else:
            assert x.values["bandwidth_gbps"].new == pytest.approx(want_n["bandwidth_gbps"], rel=1e-9)
    deltas = [abs(x.values["total_us"].delta) for x in t.communication]
    assert deltas == sorted(deltas, reverse=True)  # largest change first

    text = render_comparison(c, "text")
    assert text.index("Op types") < text.index("\nSteps (mean per step, us)") < text.index("\nCommunication per op")
    steps = _section(text, "Steps (mean per step, us)")
    comm = _section(text, "Communication per op type")
    assert all(len(line) <= 80 for line in steps + comm), max(steps + comm, key=len)
    row = next(line for line in steps if line.split()[:1] == ["0"])
    assert row.split()[1:] == ["steps", "1", "1"]
    gone = comm[comm.index(next(x for x in comm if x.startswith("send "))) + 1]
    assert gone.split()[0] == "vanished"
    md = render_comparison(c, "markdown")
    assert "## Steps (mean per step, us)" in md and "| Card | Per step | BASE | NEW | Delta | Ratio |" in md


# --------------------------------------------------------------------------- generated runs


@pytest.fixture(scope="module")
def seeds_pair(tmp_path_factory):
    """Two torch_npu runs of different seeds (the same planted problems)."""
    root = tmp_path_factory.mktemp("seeds")
    base = generate(root / "base", layout="torch_npu", cards=2, steps=4, seed=1)
    new = generate(root / "new", layout="torch_npu", cards=2, steps=4, seed=2)
    return base, new


def _view_means(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows if r[key] is not None]
    return sum(values) / len(values)


def test_generated_runs_against_their_views(seeds_pair):
    gb, gn = seeds_pair
    pb, pn = _open(gb.root), _open(gn.root)
    vb, vn = read_training_views(pb), read_training_views(pn)
    c = compare_runs(pb, pn, base_views=vb, new_views=vn)
    t = c.training
    rows_b = list(vb.steps.iter_rows(named=True))
    rows_n = list(vn.steps.iter_rows(named=True))
    for s in t.steps:
        mine_b = [r for r in rows_b if s.card == ALL or r["card"] == s.card]
        mine_n = [r for r in rows_n if s.card == ALL or r["card"] == s.card]
        assert s.base_steps == len({r["step"] for r in mine_b}) == 4
        assert s.new_steps == len({r["step"] for r in mine_n}) == 4
        for key in STEP_KEYS:
            b, n = _view_means(mine_b, key), _view_means(mine_n, key)
            assert s.means[key].base == pytest.approx(b, rel=1e-12)
            assert s.means[key].delta == pytest.approx(n - b, rel=1e-9, abs=1e-9)
    head = t.headline
    assert head is not None and head.card == ALL
    assert head.means["step_us"].ratio == pytest.approx(
        _view_means(rows_n, "step_us") / _view_means(rows_b, "step_us"), rel=1e-9
    )

    # Communication from the tasks: counts and durations only, no wait or bandwidth.
    comm_b: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in vb.communication.iter_rows(named=True):
        comm_b[r["op_type"]][0] += r["count"]
        comm_b[r["op_type"]][1] += r["total_us"]
    assert {x.op_type for x in t.communication} == set(comm_b)
    for x in t.communication:
        assert x.values["count"].base == comm_b[x.op_type][0]
        assert x.values["total_us"].base == pytest.approx(comm_b[x.op_type][1], rel=1e-12)
        assert x.values["wait_us"].base is None and x.values["wait_us"].ratio is None
    doc = comparison_json(c)
    op = doc["communication"]["op_types"][0]
    assert op["wait_us"] == {"base": None, "new": None, "delta": None, "delta_pct": None, "ratio": None}


def test_runs_of_different_step_counts_compare_per_step_mean(tmp_path):
    gb = generate(tmp_path / "four", layout="era_b", cards=2, steps=4, seed=7)
    gn = generate(tmp_path / "two", layout="era_b", cards=2, steps=2, seed=7)
    pb, pn = _open(gb.root), _open(gn.root)
    c = compare_runs(pb, pn)
    vb, vn = read_training_views(pb), read_training_views(pn)
    assert [(s.card, s.base_steps, s.new_steps) for s in c.training.steps] == [("0", 4, 2), ("1", 4, 2), (ALL, 4, 2)]
    for s in c.training.steps:
        for side, views in (("base", vb), ("new", vn)):
            rows = [r for r in views.steps.iter_rows(named=True) if s.card == ALL or r["card"] == s.card]
            assert getattr(s.means["step_us"], side) == pytest.approx(_view_means(rows, "step_us"), rel=1e-12)
    assert any("BASE has 4 step(s) per card, NEW 2" in n for n in c.training.notes)
    text = render_comparison(c, "text")
    steps = _section(text, "Steps (mean per step, us)")
    assert any("compared per step mean" in line for line in steps)
    assert next(line for line in steps if line.startswith("all ")).split()[1:] == ["steps", "4", "2"]


def test_a_side_without_steps_says_so(tmp_path):
    # An op_statistic alone: no tasks, so no steps and no communication in BASE.
    gb = generate(tmp_path / "stat", layout="era_b", cards=2, seed=3, op_summary=False, timeline=False)
    gn = generate(tmp_path / "full", layout="era_b", cards=2, seed=3)
    pb, pn = _open(gb.root), _open(gn.root)
    assert read_training_views(pb).steps.height == 0
    c = compare_runs(pb, pn)
    t = c.training
    assert t.steps_in == (False, True) and t.communication_in == (False, True)
    assert "steps: not in BASE" in t.notes and "communication: not in BASE" in t.notes
    for s in t.steps:
        assert s.base_steps is None and s.new_steps == 4
        assert all(s.means[k].base is None and not s.means[k].known for k in STEP_KEYS)
    assert all(x.status is None for x in t.communication)
    doc = comparison_json(c)
    assert doc["steps"]["in_base"] is False and doc["steps"]["in_new"] is True
    for card in doc["steps"]["cards"]:
        assert card["base_steps"] is None
        assert card["step_us"]["base"] is None and card["step_us"]["delta"] is None  # no invented zero
        assert card["step_us"]["new"] is not None
    text = render_comparison(c, "text")
    assert "note: steps: not in BASE" in _section(text, "Steps (mean per step, us)")
    assert "note: communication: not in BASE" in _section(text, "Communication per op type")

    back = compare_runs(pn, pb)
    assert "steps: not in NEW" in back.training.notes
    assert back.training.headline is not None and not back.training.headline.means["step_us"].known
    assert "step time" not in (regression(back, 0.0) or "")  # unknown on one side: not counted


# --------------------------------------------------------------------------- CLI


def test_cli_json_keys_and_the_step_time_gate():
    res = _cli(GPT3, CNN, "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    # The existing keys stay; the training-level ones are added.
    assert set(doc) >= {"schema", "base", "new", "totals", "cards", "op_types", "findings", "verdict"}
    assert set(doc["steps"]) == {"in_base", "in_new", "cards"}
    assert set(doc["communication"]) == {"in_base", "in_new", "op_types"}
    assert doc["training_notes"] == []
    card = doc["steps"]["cards"][0]
    assert set(card) == {"card", "base_card", "new_card", "base_steps", "new_steps", *STEP_KEYS}
    assert set(card["step_us"]) == {"base", "new", "delta", "delta_pct", "ratio"}
    truth = _step_rows(GPT3)["0"][0]["step_us"], _step_rows(CNN)["0"][0]["step_us"]
    assert card["step_us"]["base"] == round(truth[0], 3) and card["step_us"]["new"] == round(truth[1], 3)
    op = doc["communication"]["op_types"][0]
    assert set(op) == {"op_type", "status", *COMM_KEYS} and isinstance(op["count"]["base"], int)

    # CNN -> GPT-3: the mean step time grows about fourfold; the gate names it first.
    worse = _cli(CNN, GPT3, "--fail-on-regression", "5")
    assert worse.returncode == 1
    assert worse.stderr.startswith("npuscope: regression: mean step time grew +")
    assert worse.stderr.count("\n") == 1 and "Traceback" not in worse.stderr
    assert _cli(GPT3, GPT3, "--fail-on-regression", "0").returncode == 0  # nothing grew
    one = _cli(GPT3, CNN, "--card", "1", "--format", "json")
    assert one.returncode == 0, one.stderr
    assert [s["card"] for s in json.loads(one.stdout)["steps"]["cards"]] == ["1"]


# --------------------------------------------------------------------------- training findings


def test_a_planted_training_problem_removed_is_resolved_and_the_steps_say_why(tmp_path):
    """BASE: larger gradient buckets (communication not overlapped on every card); NEW clean."""
    gb = generate(tmp_path / "base", layout="torch_npu", cards=2, steps=4, problems=("comm_not_overlapped",), seed=11)
    gn = generate(tmp_path / "new", layout="torch_npu", cards=2, steps=4, problems=(), seed=11, training=True)
    assert {(p.rule, p.card) for p in gb.planted} == {("comm_not_overlapped", "0"), ("comm_not_overlapped", "1")}
    c = compare_runs(_open(gb.root), _open(gn.root))
    assert [(f.rule, f.card) for f in c.findings.resolved] == [
        ("comm_not_overlapped", "0"),
        ("comm_not_overlapped", "1"),
    ]
    assert all(f.rule != "comm_not_overlapped" for f in c.findings.new)

    tb, tn = _step_rows(gb.root), _step_rows(gn.root)  # the generated step_trace_time.csv
    for s in c.training.steps:
        rows_b = [r for rs in tb.values() for r in rs] if s.card == ALL else tb[s.card]
        rows_n = [r for rs in tn.values() for r in rs] if s.card == ALL else tn[s.card]
        assert (s.base_steps, s.new_steps) == (len(tb["0"]), len(tn["0"])) == (4, 4)
        for key in STEP_KEYS:
            want = _mean(rows_n, key) - _mean(rows_b, key)
            assert s.means[key].delta == pytest.approx(want, rel=1e-9, abs=1e-6)
        # Only the communication not overlapped moved: compute stays, the step shrinks by it.
        nov, step = s.means["comm_not_overlapped_us"], s.means["step_us"]
        assert nov.delta < 0 and step.delta == pytest.approx(nov.delta, rel=1e-9)
        assert s.means["compute_us"].delta == pytest.approx(0.0, abs=1e-6)
    comm = {x.op_type: x for x in c.training.communication}
    cb, cn = _comm_truth(gb.root), _comm_truth(gn.root)
    assert set(comm) == set(cb) == set(cn)
    for op, x in comm.items():
        assert x.values["count"].delta == cn[op]["count"] - cb[op]["count"]
        assert x.values["total_us"].delta == pytest.approx(cn[op]["total_us"] - cb[op]["total_us"], rel=1e-9)

    # The other way round: the training finding is new and the gate names the step time.
    back = compare_runs(_open(gn.root), _open(gb.root))
    assert {(f.rule, f.card) for f in back.findings.new} >= {("comm_not_overlapped", "0"), ("comm_not_overlapped", "1")}
    reason = regression(back, 5.0)
    assert reason is not None and reason.startswith("mean step time grew +")
    text = render_comparison(back, "text")
    assert "comm_not_overlapped: Communication not overlapped" in text
    doc = comparison_json(back)
    views = {(f["rule"], f["view"]) for f in doc["findings"]["new"]}
    assert ("comm_not_overlapped", "steps") in views
    assert all(f["view"] == "" for f in doc["findings"]["unchanged"] if f["rule"] == "aclop_share")
