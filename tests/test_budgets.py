"""Budgets (analysis/budgets.py) on Headline objects built by hand, and every malformed file.

A budget breaks exactly when its figure crosses the bound: the bound itself holds, the next
float above it breaks; the same for bounds relative to a baseline.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pytest

from npuscope.analysis.budgets import (
    Budget,
    Budgets,
    check_baseline,
    check_budget,
    check_budgets,
    gate_json,
    parse_budgets,
    read_budgets,
    render_gate,
)
from npuscope.analysis.headline import Headline
from npuscope.analysis.waits import CAUSES
from npuscope.parsers import ProfileError


def _headline(**values: object) -> Headline:
    base: dict[str, object] = {
        "step_mean_us": 1000.0,
        "step_times_us": (1000.0,),
        "exposed_communication_us": 50.0,
        "free_us": 20.0,
        "device_us": 5000.0,
        "compute_us": 4000.0,
        "communication_us": 1000.0,
        "wait_us": 300.0,
        "wait_by_cause_us": {c: 0.0 for c in CAUSES} | {"recompilation": 250.0},
        "op_type_share_pct": {"MatMulV3": 40.0, "Add": 10.0},
    }
    base.update(values)
    return Headline(**base)  # type: ignore[arg-type]


def _above(x: float) -> float:
    return math.nextafter(x, math.inf)


FIGURE_OF = {
    "step_time": 1000.0,
    "device_time": 5000.0,
    "exposed_communication": 50.0,
    "free_time": 20.0,
    "wait.recompilation": 250.0,
    "wait.host_op": 0.0,
}


@pytest.mark.parametrize("table", sorted(FIGURE_OF))
def test_absolute_budget_breaks_exactly_above_its_bound(table):
    value = FIGURE_OF[table]
    run = _headline()
    at = check_budget(Budget(table, "max_us", value), run)
    assert (at.status, at.value, at.bound) == ("ok", value, value)
    below = check_budget(Budget(table, "max_us", _above(value) if value else 0.0), run)
    assert below.status == "ok"
    # the bound a hair under the figure: broken (for a 0 figure, a figure a hair over 0)
    if value:
        assert check_budget(Budget(table, "max_us", math.nextafter(value, 0.0)), run).status == "broken"
    else:
        tiny = _headline(wait_by_cause_us={c: 0.0 for c in CAUSES} | {"host_op": _above(0.0)})
        assert check_budget(Budget(table, "max_us", 0.0), tiny).status == "broken"


def test_figure_crossing_the_bound_breaks():
    budget = Budget("step_time", "max_us", 1234.5)
    assert check_budget(budget, _headline(step_mean_us=1234.5)).status == "ok"
    assert check_budget(budget, _headline(step_mean_us=_above(1234.5))).status == "broken"


def test_op_type_share_bound_and_absent_type_is_zero():
    run = _headline()
    assert check_budget(Budget("op_type.MatMulV3", "max_share_pct", 40.0), run).status == "ok"
    crossed = check_budget(Budget("op_type.MatMulV3", "max_share_pct", math.nextafter(40.0, 0.0)), run)
    assert crossed.status == "broken" and crossed.value == 40.0
    absent = check_budget(Budget("op_type.Conv2D", "max_share_pct", 0.0), run)
    assert (absent.status, absent.value) == ("ok", 0.0)


def test_relative_budget_breaks_exactly_above_base_times_growth():
    base = _headline(step_mean_us=1000.0)
    budget = Budget("step_time", "max_increase_pct", 25.0)  # bound 1250 exactly
    held = check_budget(budget, _headline(step_mean_us=1250.0), base)
    assert (held.status, held.bound, held.baseline) == ("ok", 1250.0, 1000.0)
    assert check_budget(budget, _headline(step_mean_us=_above(1250.0)), base).status == "broken"


def test_relative_zero_percent_holds_on_equal_and_breaks_on_any_increase():
    base = _headline()
    budget = Budget("device_time", "max_increase_pct", 0.0)
    assert check_budget(budget, _headline(), base).status == "ok"
    assert check_budget(budget, _headline(device_us=_above(5000.0)), base).status == "broken"
    smaller = check_budget(budget, _headline(device_us=4000.0), base)
    assert smaller.status == "ok"


def test_relative_op_type_share_is_a_relative_increase_of_the_share():
    base = _headline(op_type_share_pct={"MatMulV3": 40.0})
    budget = Budget("op_type.MatMulV3", "max_increase_pct", 50.0)  # 40 * 1.5 = 60 share points
    assert check_budget(budget, _headline(op_type_share_pct={"MatMulV3": 60.0}), base).status == "ok"
    crossed = check_budget(budget, _headline(op_type_share_pct={"MatMulV3": _above(60.0)}), base)
    assert (crossed.status, crossed.bound, crossed.baseline) == ("broken", 60.0, 40.0)
    # not 40 + 50 share points: 61 breaks
    assert check_budget(budget, _headline(op_type_share_pct={"MatMulV3": 61.0}), base).status == "broken"


def test_figure_the_run_lacks_is_not_measured_never_ok_nor_broken():
    no_steps = _headline(step_mean_us=None, step_times_us=(), exposed_communication_us=None, free_us=None)
    budgets = Budgets(
        "b.toml",
        (
            Budget("step_time", "max_us", 0.0),
            Budget("free_time", "max_us", 0.0),
            Budget("step_time", "max_increase_pct", 0.0),
            Budget("device_time", "max_us", 1.0),
        ),
    )
    results = check_budgets(budgets, no_steps, _headline())
    assert [r.status for r in results] == ["not measured", "not measured", "not measured", "broken"]
    assert results[0].note == "the run has no steps"
    # the baseline lacking the figure: not measured too, and says which side lacks it
    lacking_base = check_budget(Budget("step_time", "max_increase_pct", 5.0), _headline(), no_steps)
    assert (lacking_base.status, lacking_base.note) == ("not measured", "the baseline has no steps")
    doc = gate_json(results, run="new", baseline="base", budgets_file="b.toml")
    assert doc["passed"] is False and doc["broken"] == ["device_time.max_us"]
    assert doc["not_measured"] == ["step_time.max_us", "free_time.max_us", "step_time.max_increase_pct"]
    text = render_gate(results, run="new", baseline="base", budgets_file="b.toml")
    assert "not measured  step_time.max_us 0: the run has no steps" in text
    assert "it does not break" in text
    assert text.splitlines()[-1] == (
        "gate: 1 of 4 budgets broken: device_time.max_us; 3 not measured (skipped): "
        "step_time.max_us, free_time.max_us, step_time.max_increase_pct"
    )


def test_only_not_measured_passes_and_says_so():
    results = check_budgets(Budgets("b.toml", (Budget("step_time", "max_us", 1.0),)), _headline(step_mean_us=None))
    assert gate_json(results, run="r", baseline=None, budgets_file="b.toml")["passed"] is True
    last = render_gate(results, run="r", baseline=None, budgets_file="b.toml").splitlines()[-1]
    assert last == "gate: no budget broken, 0 of 1 hold; 1 not measured (skipped): step_time.max_us"


def test_text_lines_name_figure_bound_and_baseline():
    base, new = _headline(step_mean_us=1000.0), _headline(step_mean_us=1235.0)
    budgets = parse_budgets({"step_time": {"max_increase_pct": 10}, "wait": {"recompilation": {"max_us": 300}}}, "b")
    results = check_budgets(budgets, new, base)
    lines = render_gate(results, run="new", baseline="base", budgets_file="b").splitlines()
    assert lines[1].startswith("BROKEN  step_time.max_increase_pct 10: 1,235.0 us vs baseline 1,000.0 us (+23.5%)")
    assert lines[1].endswith(", bound 1,100.0 us")
    assert lines[2] == "ok      wait.recompilation.max_us 300: 250.0 us, bound 300.0 us"
    assert lines[-1] == "gate: 1 of 2 budgets broken: step_time.max_increase_pct"
    held = check_budgets(budgets, base, base)
    assert render_gate(held, run="n", baseline="b", budgets_file="b").splitlines()[-1] == "gate: all 2 budgets hold"


def test_relative_budget_without_baseline_is_one_line_naming_the_key():
    budgets = parse_budgets({"device_time": {"max_us": 1}, "op_type": {"Add": {"max_increase_pct": 5}}}, "b.toml")
    with pytest.raises(ProfileError) as err:
        check_baseline(budgets, have_baseline=False)
    assert (
        str(err.value) == "b.toml: op_type.Add.max_increase_pct is relative to a baseline: give --baseline @NAME|PATH"
    )
    check_baseline(budgets, have_baseline=True)  # no error
    check_baseline(parse_budgets({"device_time": {"max_us": 1}}, "b.toml"), have_baseline=False)


def test_file_order_and_every_table_kind_parse(tmp_path):
    f = tmp_path / "budgets.toml"
    f.write_text(
        "[free_time]\nmax_us = 5\n[step_time]\nmax_us = 1.5e3\nmax_increase_pct = 10\n"
        "[exposed_communication]\nmax_us = 0\n[device_time]\nmax_increase_pct = 0.5\n"
        '[wait.host_op]\nmax_us = 7\n[op_type."MatMul.V3"]\nmax_share_pct = 100\n'
    )
    budgets = read_budgets(str(f))
    assert [(b.name, b.limit) for b in budgets.budgets] == [
        ("free_time.max_us", 5.0),
        ("step_time.max_us", 1500.0),
        ("step_time.max_increase_pct", 10.0),
        ("exposed_communication.max_us", 0.0),
        ("device_time.max_increase_pct", 0.5),
        ("wait.host_op.max_us", 7.0),
        ("op_type.MatMul.V3.max_share_pct", 100.0),
    ]
    assert [b.figure for b in budgets.budgets][-2:] == ["wait_by_cause_us.host_op", "op_type_share_pct.MatMul.V3"]


KNOWN_CAUSES = ", ".join(CAUSES)
BAD_FILES = [
    ("", "budgets.toml: no budget in the file (for example: [step_time] max_us = 100000)"),
    ("# only a comment\n", "budgets.toml: no budget in the file (for example: [step_time] max_us = 100000)"),
    ("[step_time]\nmax_ms = 5\n", "budgets.toml: unknown key step_time.max_ms; known: max_us, max_increase_pct"),
    (
        "[steps]\nmax_us = 5\n",
        "budgets.toml: unknown table steps; known: step_time, device_time, exposed_communication, free_time, "
        "wait.<cause>, op_type.<TYPE>",
    ),
    (
        "max_us = 5\n",
        "budgets.toml: unknown table max_us; known: step_time, device_time, exposed_communication, "
        "free_time, wait.<cause>, op_type.<TYPE>",
    ),
    ("[step_time]\n", "budgets.toml: [step_time] holds no budget; give max_us or max_increase_pct"),
    ("step_time = 5\n", "budgets.toml: step_time must be a table ([step_time] max_us = ...), got 5"),
    ("[step_time.inner]\nmax_us = 5\n", "budgets.toml: unknown key step_time.inner; known: max_us, max_increase_pct"),
    ("[step_time]\nmax_us = true\n", "budgets.toml: step_time.max_us must be a number, got true"),
    ("[step_time]\nmax_us = '5'\n", "budgets.toml: step_time.max_us must be a number, got '5'"),
    ("[step_time]\nmax_us = [5]\n", "budgets.toml: step_time.max_us must be a number, got [5]"),
    ("[step_time]\nmax_us = nan\n", "budgets.toml: step_time.max_us must be a finite number, got nan"),
    ("[device_time]\nmax_us = inf\n", "budgets.toml: device_time.max_us must be a finite number, got inf"),
    ("[free_time]\nmax_us = -1\n", "budgets.toml: free_time.max_us must be >= 0, got -1"),
    ("[free_time]\nmax_increase_pct = -0.5\n", "budgets.toml: free_time.max_increase_pct must be >= 0, got -0.5"),
    ("[step_time]\nmax_us = 1e16\n", "budgets.toml: step_time.max_us = 1e+16 is absurd; at most 1e+15"),
    (
        "[wait.recompile]\nmax_us = 5\n",
        f"budgets.toml: unknown wait cause wait.recompile; known: {KNOWN_CAUSES}",
    ),
    ("[wait]\nmax_us = 5\n", f"budgets.toml: unknown wait cause wait.max_us; known: {KNOWN_CAUSES}"),
    ("[wait]\n", "budgets.toml: wait must hold tables [wait.<cause>], got a table"),
    (
        "[wait.expected]\nmax_share_pct = 5\n",
        "budgets.toml: unknown key wait.expected.max_share_pct; known: max_us, max_increase_pct",
    ),
    (
        "[op_type.MatMulV3]\nmax_us = 5\n",
        "budgets.toml: op_type.MatMulV3.max_us: an op type is bounded by its share of compute; use max_share_pct",
    ),
    (
        "[op_type.MatMulV3]\nmax_share_pct = 101\n",
        "budgets.toml: op_type.MatMulV3.max_share_pct = 101: a share of compute is at most 100 (percent)",
    ),
    (
        "[step_time]\nmax_us = 1" + "0" * 400 + "\n",
        "budgets.toml: step_time.max_us = 1" + "0" * 36 + "... is absurd; at most 1e+15",
    ),
    (
        "[step_time]\nmax_us = -1" + "0" * 400 + "\n",
        "budgets.toml: step_time.max_us must be >= 0, got -" + "1" + "0" * 35 + "...",
    ),
    ('[op_type.""]\nmax_share_pct = 5\n', "budgets.toml: op_type.'': an op type name cannot be blank"),
    ("op_type = 3\n", "budgets.toml: op_type must hold tables [op_type.<TYPE>], got 3"),
]


@pytest.mark.parametrize(("text", "message"), BAD_FILES)
def test_malformed_budgets_file_is_one_line(tmp_path, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    Path("budgets.toml").write_text(text)
    with pytest.raises(ProfileError) as err:
        read_budgets("budgets.toml")
    assert str(err.value) == message
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("[step_time]\nmax_us = 5\n\n[device_time\nmax_us = 1\n", 4),
        ("[step_time]\nmax_us = = 5\n", 2),
        ("[step_time]\nmax_us = 5\nmax_us = 6\n", 3),  # a key given twice
        ("\n\n\n\n\n\n[wait.expected]\nmax_us = 5x\n", 8),
    ],
)
def test_toml_syntax_error_keeps_its_line(tmp_path, monkeypatch, text, line):
    monkeypatch.chdir(tmp_path)
    Path("budgets.toml").write_text(text)
    with pytest.raises(ProfileError) as err:
        read_budgets("budgets.toml")
    message = str(err.value)
    assert message.startswith("budgets.toml: invalid TOML: ")
    assert re.search(rf"\(at line {line}, column \d+\)$", message), message
    assert "\n" not in message


def test_file_not_found_not_regular_too_big_not_utf8(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ProfileError, match=r"^missing\.toml: budgets file not found$"):
        read_budgets("missing.toml")
    os.mkdir("folder.toml")
    with pytest.raises(ProfileError, match=r"^folder\.toml: the budgets file is not a regular file$"):
        read_budgets("folder.toml")
    os.mkfifo("fifo.toml")  # would block a read: refused before it is opened
    with pytest.raises(ProfileError, match=r"^fifo\.toml: the budgets file is not a regular file$"):
        read_budgets("fifo.toml")
    Path("big.toml").write_text("[step_time]\nmax_us = 5\n" + "#" * (1 << 20))
    with pytest.raises(ProfileError) as err:
        read_budgets("big.toml")
    assert str(err.value).startswith(
        "big.toml: the budgets file is 1,048,599 bytes; a budgets file is at most 1,048,576"
    )
    Path("full.toml").write_text("[step_time]\nmax_us = 5\n" + "#" * ((1 << 20) - 23))  # exactly 1 MB: read
    assert os.path.getsize("full.toml") == 1 << 20
    assert [b.name for b in read_budgets("full.toml").budgets] == ["step_time.max_us"]
    Path("latin1.toml").write_bytes(b"[step_time]\nmax_us = 5 # \xe9\n")
    with pytest.raises(ProfileError, match=r"^latin1\.toml: cannot read the budgets file"):
        read_budgets("latin1.toml")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file without read permission")
def test_unreadable_file_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("budgets.toml").write_text("[step_time]\nmax_us = 5\n")
    os.chmod("budgets.toml", 0)
    with pytest.raises(ProfileError, match=r"^budgets\.toml: cannot read the budgets file \(.*\)$"):
        read_budgets("budgets.toml")
