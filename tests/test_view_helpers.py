"""The small-frame helpers of the training views (parsers/training_files.py): the one-pass
number check names the first bad column and row as a column-by-column check would, and rows
come out in card order (numbers as numbers, `host` last) then by the keys, ties in input order.
Truth by plain Python sorting and scanning."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import polars as pl
import pytest

from npuscope.parsers import ProfileError
from npuscope.parsers.training_files import check_frame_numbers, normalise_op_types, sort_cards

PATH = Path("step_trace_time.csv")


def _first_bad(rows: dict[str, list[float | None]]) -> tuple[str, int] | None:
    for column, values in rows.items():
        for i, v in enumerate(values):
            if v is not None and (not math.isfinite(v) or abs(v) > 1e15 or v < -1e-3):
                return column, i
    return None


@pytest.mark.parametrize(
    "rows",
    [
        {"a": [1.0, 2.0, -1e-4], "b": [0.0, 5.0, None]},
        {"a": [1.0, 2.0, 3.0], "b": [0.0, float("nan"), -7.0]},
        {"a": [1.0, None, 2e15], "b": [float("inf"), 1.0, 1.0]},
    ],
)
def test_number_check_names_the_first_bad_column_and_row(rows):
    frame = pl.DataFrame(rows, schema={"a": pl.Float64, "b": pl.Float64})
    bad = _first_bad(rows)
    if bad is None:
        got = check_frame_numbers(frame, ("a", "b", "absent"), PATH, "step_trace_time")
        want = {c: [None if v is None else max(v, 0.0) for v in vs] for c, vs in rows.items()}
        assert got.to_dict(as_series=False) == want
        return
    with pytest.raises(ProfileError) as err:
        check_frame_numbers(frame, ("a", "b"), PATH, "step_trace_time")
    column, row = bad
    assert f"step_trace_time: {column} holds" in str(err.value) and f"on row {row + 1}," in str(err.value)


def _card(c: str) -> tuple[int, int | str]:
    return (0, int(c)) if c.isdigit() else (1, c)


@pytest.mark.parametrize("cards", [["3"] * 5, ["10", "2", "host", "2", "10", "1"]])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_cards_is_card_order_then_keys_ties_kept(cards, descending):
    keys = [5.0, 1.0, None, 1.0, 3.0, 2.0][: len(cards)]
    frame = pl.DataFrame({"card": cards, "x": keys, "i": list(range(len(cards)))})
    got = sort_cards(frame, "x", descending=descending)["i"].to_list()

    def key(i: int) -> tuple[object, ...]:
        x = keys[i]
        return (_card(cards[i]), x is None, (-x if descending else x) if x is not None else 0.0)

    assert got == sorted(range(len(cards)), key=key)  # stable: ties stay in input order
    assert sort_cards(frame)["i"].to_list() == sorted(range(len(cards)), key=lambda i: _card(cards[i]))


def test_normalise_op_types_small_and_large_agree():
    names = ["hcom_allReduce__538_0_1", None, "HcomAllGather", "MatMul", "hcom_broadcast_", "MatMul"]
    want = ["allReduce", None, "allGather", "MatMul", "broadcast", "MatMul"]
    assert normalise_op_types(pl.Series("n", names)).to_list() == want
    large = normalise_op_types(pl.Series("n", names * 1000))  # past the Python path's rows
    assert large.to_list() == want * 1000 and large.name == "n"


def test_views_without_collectives_are_a_whole_read_but_communication(tmp_path):
    from npuscope.parsers import FrameCache, open_profile
    from npuscope.parsers.training import VIEWS, read_training_views

    root = tmp_path / "level1"
    shutil.copytree(Path(__file__).parent.parent / "fixtures/samples/real/torch_npu_2024_cnn/level1", root)
    damaged = root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    damaged.write_text(damaged.read_text()[:100])  # truncated: a note, the tasks give rank 0's collectives
    profile = open_profile(root, cache=FrameCache(enabled=False))
    whole = read_training_views(profile)
    light = read_training_views(profile, collectives=False)
    assert light.communication.height == 0 and light.communication.schema == whole.communication.schema
    assert whole.communication.height and {"0", "1"} <= set(whole.communication["card"])
    for view in VIEWS:
        if view != "communication":  # as row sets: memory_top_ops orders its ties as they come
            a, b = getattr(light, view), getattr(whole, view)
            assert a.sort(a.columns, nulls_last=True).equals(b.sort(b.columns, nulls_last=True)), view
    assert light.found == whole.found and light.notes == whole.notes
    assert any("communication.json" in n for n in light.notes)
