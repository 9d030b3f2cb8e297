"""Compare's arithmetic on its own: the same band, the statuses, the verdict and the gate.

No profile is read: Change, OpChange and the totals are built by hand, so each boundary is
pinned at the exact number where the status or the verdict flips.
"""

from __future__ import annotations

import pytest

from npuscope.analysis.compare import (
    SAME_PCT,
    SAME_US,
    Change,
    Comparison,
    FindingChanges,
    OpChange,
    Run,
    _status,
    _verdict,
    regression,
)
from npuscope.analysis.compare_training import ALL, STEP_KEYS, StepChange, TrainingChanges
from npuscope.analysis.totals import TOTAL_KEYS


def test_the_same_band_is_one_us_and_one_percent():
    assert (SAME_US, SAME_PCT) == (1.0, 1.0)


@pytest.mark.parametrize(
    "base, new, status",
    [
        (None, 5.0, "new"),
        (5.0, None, "vanished"),
        (None, None, "new"),
        (100.0, 100.0, "same"),
        (100.0, 100.99, "same"),  # < 1 us
        (100.0, 101.0, "slower"),  # 1 us and 1 %: both at the edge, neither under it
        (100.0, 99.0, "faster"),
        (1000.0, 1009.99, "same"),  # 9.99 us but < 1 %
        (1000.0, 1010.0, "slower"),  # exactly 1 %
        (1000.0, 990.0, "faster"),
        (0.0, 0.5, "same"),  # no percentage from 0; < 1 us
        (0.0, 5.0, "slower"),  # no percentage from 0; the us decide
        (0.0, 0.0, "same"),
    ],
)
def test_status_boundaries(base, new, status):
    assert _status(Change(base, new)) == status


def test_change_delta_and_percent():
    assert Change(None, 3.0).delta == 3.0 and Change(3.0, None).delta == -3.0
    assert Change(200.0, 150.0).delta_pct == -25.0
    assert Change(0.0, 4.0).delta_pct is None  # nothing to be relative to
    assert Change(0.0, 0.0).delta_pct == 0.0 and Change(None, None).delta_pct == 0.0


def test_op_change_averages_labels_and_status():
    o = OpChange("MatMulV2", "AI_CORE", 4, 2, 400.0, 300.0, 40.0, 30.0)
    assert (o.base_avg_us, o.new_avg_us, o.delta_us, o.delta_pct) == (100.0, 150.0, -100.0, -25.0)
    assert o.status == "faster" and o.label == "MatMulV2 (AI_CORE)"
    gone = OpChange("Cast", "AI_VECTOR_CORE", 3, None, 30.0, None, 1.0, None)
    assert gone.status == "vanished" and gone.new_avg_us is None and gone.delta_us == -30.0
    new = OpChange("Add", "AI_VECTOR_CORE", None, 1, None, 5.0, None, 0.5, op_name="Add_1", input_shapes="")
    assert new.status == "new" and new.delta_pct is None and new.label == "Add_1 [-]"


def _totals(**deltas: tuple[float, float]) -> dict[str, Change]:
    """Every total 0 -> 0, but the ones given as (base, new)."""
    out = {k: Change(0.0, 0.0) for k in TOTAL_KEYS}
    out.update({k: Change(*v) for k, v in deltas.items()})
    return out


def _op(name: str, base: float, new: float) -> OpChange:
    return OpChange(name, "AI_CORE", 1, 1, base, new, None, None)


def test_verdict_about_the_same_under_the_band():
    totals = _totals(device_us=(1000.0, 1005.0), compute_us=(1000.0, 1005.0), wait_us=(100.0, 100.0))
    assert _verdict(totals, ()).startswith("About the same: device time + wait +5.0 us (+0.5%)")


def test_verdict_names_the_change_that_explains_most_of_it():
    totals = _totals(
        device_us=(1000.0, 800.0),
        compute_us=(1000.0, 800.0),
        wait_us=(500.0, 550.0),
        wait_recompilation_us=(400.0, 450.0),
        wait_short_us=(100.0, 100.0),
    )
    ops = (_op("MatMulV2", 600.0, 420.0), _op("Cast", 400.0, 380.0))
    verdict = _verdict(totals, ops)
    assert verdict.startswith("NEW is faster: device time + wait -150.0 us (-10.0%)")
    # Only changes in the direction of the whole count; MatMulV2's -180 us is 120% of -150 us.
    assert verdict.endswith("most of it: MatMulV2 (AI_CORE) -180.0 us (120% of the change).")


def test_verdict_of_a_slower_run_can_blame_a_wait_cause():
    totals = _totals(device_us=(1000.0, 1000.0), wait_us=(0.0, 300.0), wait_host_op_us=(0.0, 300.0))
    assert _verdict(totals, ()) == (
        "NEW is slower: device time + wait +300.0 us (+30.0%): compute 0.0 us, communication 0.0 us, "
        "wait +300.0 us; most of it: host op wait +300.0 us (100% of the change)."
    )


def _comparison(totals: dict[str, Change], training: TrainingChanges | None = None) -> Comparison:
    run = Run("/p", "PROF_1", "era_b", "CANN 7.0+", ("0",), "op_summary")
    return Comparison(
        run,
        run,
        "type",
        (("0", "0"),),
        totals,
        (),
        (),
        FindingChanges((), (), ()),
        (),
        500.0,
        "",
        training or TrainingChanges(),
    )


def _steps(*cards: tuple[str, float | None, float | None]) -> TrainingChanges:
    """Steps of (card, mean step time BASE, NEW); the other means equal on both sides."""
    return TrainingChanges(
        steps=tuple(
            StepChange(
                card, None, None, 4, 4, {k: Change(b, n) if k == "step_us" else Change(1.0, 1.0) for k in STEP_KEYS}
            )
            for card, b, n in cards
        ),
        steps_in=(True, True),
    )


@pytest.mark.parametrize(
    "cards, pct, regressed",
    [
        ((("0", 1000.0, 1050.0),), 5.0, False),  # exactly the limit is not over it
        ((("0", 1000.0, 1050.1),), 5.0, True),
        ((("0", 1000.0, 900.0),), 0.0, False),  # faster
        ((("0", 0.0, 1.0),), 50.0, True),  # grew from nothing
        ((("0", None, 5000.0),), 0.0, False),  # BASE has no steps: unknown, not counted
        # With several cards the gate reads `all` (every step of every card), not the worst card.
        ((("0", 1000.0, 1200.0), ("1", 1000.0, 1000.0), (ALL, 1000.0, 1040.0)), 5.0, False),
        ((("0", 1000.0, 1000.0), ("1", 1000.0, 1000.0), (ALL, 1000.0, 1060.0)), 5.0, True),
    ],
)
def test_regression_gate_counts_the_mean_step_time(cards, pct, regressed):
    reason = regression(_comparison(_totals(), _steps(*cards)), pct)
    assert (reason is not None) == regressed
    if reason is not None:
        assert reason.startswith("mean step time grew") and "more than" in reason and "device time" not in reason


def test_training_delta_and_ratio_need_both_sides():
    assert Change(200.0, 150.0).ratio == 0.75 and Change(200.0, 150.0).known
    assert Change(None, 150.0).ratio is None and not Change(None, 150.0).known
    assert Change(0.0, 150.0).ratio is None and Change(0.0, 150.0).known
    assert Change(3.0, None).ratio is None


@pytest.mark.parametrize(
    "device, wait, pct, regressed",
    [
        ((1000.0, 1050.0), (0.0, 0.0), 5.0, False),  # exactly the limit is not over it
        ((1000.0, 1050.1), (0.0, 0.0), 5.0, True),
        ((1000.0, 900.0), (100.0, 104.0), 5.0, False),
        ((1000.0, 1000.0), (100.0, 106.0), 5.0, True),
        ((1000.0, 1000.0), (0.0, 1.0), 50.0, True),  # wait grew from nothing: always a regression
        ((1000.0, 1001.0), (0.0, 0.0), 0.0, True),
    ],
)
def test_regression_gate_boundaries(device, wait, pct, regressed):
    reason = regression(_comparison(_totals(device_us=device, wait_us=wait)), pct)
    assert (reason is not None) == regressed
    if reason is not None:
        assert "more than" in reason and ("from nothing" in reason or "%" in reason)
