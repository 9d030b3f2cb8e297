"""The `/` filter language, sorting and totals of the explorer's tables, on tiny frames."""

from __future__ import annotations

import random
import subprocess
import sys

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiny import profile, task

from npuscope.analysis import diagnose
from npuscope.analysis.query import (
    QUERY_HELP,
    Query,
    QueryError,
    filter_stats,
    filter_tasks,
    parse_query,
    sort_frame,
    totals,
)
from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.parsers import FrameCache, open_profile

TASK_SCHEMA = {
    "row": pl.UInt32,
    "card": pl.String,
    "op_name": pl.String,
    "op_type": pl.String,
    "task_type": pl.String,
    "op_state": pl.String,
    "is_aclnn": pl.Boolean,
    "duration_us": pl.Float64,
    "wait_us": pl.Float64,
    "input_shapes": pl.String,
    "input_dtypes": pl.String,
    "wait_cause": pl.String,
}
TASKS = pl.DataFrame(
    [
        (
            0,
            "0",
            "aclnnMatmul_MatMulCommon_MatMulV2",
            "MatMulV2",
            "AI_CORE",
            "static",
            True,
            500.0,
            0.0,
            "8,4096;4096,4096",
            "BF16;BF16",
            None,
        ),
        (
            1,
            "0",
            "Cast_1",
            "Cast",
            "AI_VECTOR_CORE",
            "dynamic",
            False,
            20.0,
            1500.0,
            "8,4096",
            "FLOAT16",
            "recompilation",
        ),
        (
            2,
            "0",
            "FlashAttentionScore_3",
            "FlashAttentionScore",
            "MIX_AIC",
            "dynamic",
            True,
            1000.0,
            10.0,
            "1,8,2048,128",
            "bf16",
            "expected",
        ),
        (3, "1", "NonZero_7", "NonZero", "AI_CPU", "static", False, 2000.0, 3000.0, "64", "INT64", "host_op"),
        (4, "1", "aten::mm", "MatMulV3", "AI_CORE", None, True, 1000.0, None, None, None, "unexplained"),
        (5, "1", "hcom allReduce_5", "hcom_allReduce", "COMMUNICATION", None, None, 300.0, 20.0, None, None, None),
        (
            6,
            "0",
            "FlashAttentionScoreGrad_4",
            "FlashAttentionScoreGrad",
            "MIX_AIV",
            "dynamic",
            False,
            700.0,
            5.0,
            "1,8,2048,128",
            "BF16",
            None,
        ),
    ],
    schema=TASK_SCHEMA,
    orient="row",
)
ALL = list(range(TASKS.height))


def rows(query: str, frame: pl.DataFrame = TASKS) -> list[int]:
    return filter_tasks(frame, parse_query(query))["row"].to_list()


# Every term form, each on its own: (query, matching rows).
FORMS = [
    ("matmul", [0, 4]),  # op name of 0, op type of 4
    ("MATMULV3", [4]),
    ("nonzero_7", [3]),
    ("type:Cast", [1]),
    ("type:cast", [1]),
    ("type:Ca", []),  # equality, not substring
    ("type:MatMul*", [0, 4]),
    ("type:*grad", [6]),
    ("name:matmul", [0]),  # op name only: not the MatMulV3 type of row 4
    ("name:REDUCE", [5]),
    ("core:AI_CPU", [3]),
    ("core:ai_cpu", [3]),
    ("task:ai_cpu", [3]),
    ("core:ai-cpu", [3]),
    ("core:AI_CORE", [0, 4]),
    ("core:mix", [2, 6]),
    ("core:MIX_AIV", [6]),
    ("dur>1000", [3]),
    ("dur>=1000", [2, 3, 4]),
    ("dur<300", [1]),
    ("dur<=300", [1, 5]),
    ("dur=1000", [2, 4]),
    ("dur==1000", [2, 4]),
    ("dur>1ms", [3]),
    ("dur>0.0015s", [3]),
    ("dur<20.5us", [1]),
    ("duration>=2000", [3]),
    ("wait>1000", [1, 3]),
    ("wait>=1500", [1, 3]),
    ("wait<10", [0, 6]),
    ("wait<=10", [0, 2, 6]),
    ("wait=20", [5]),
    ("cause:recompilation", [1]),
    ("cause:recompile", [1]),
    ("cause:host_op", [3]),
    ("cause:host", [3]),
    ("cause:HOST_OP", [3]),
    ("cause:expected", [2]),
    ("cause:unexplained", [4]),
    ("cause:any", [1, 2, 3, 4]),
    ("cause:none", [0, 5, 6]),
    ("aclnn", [0, 2, 4]),
    ("ACLNN", [0, 2, 4]),
    ("aclop", [1, 3, 6]),  # row 5 has no aclnn flag: neither
    ("shape:8,4096", [0, 1]),
    ("shape:4096,4096", [0]),
    ('shape:"8, 4096"', [0, 1]),
    ("dtype:BF16", [0, 2, 6]),
    ("dtype:int", [3]),
    ("card:0", [0, 1, 2, 6]),
    ("card:1", [3, 4, 5]),
    ("card:2", []),
    ("state:dynamic", [1, 2, 6]),
    ("state:STATIC", [0, 3]),
    ("aten::mm", [4]),  # a double colon is text, not an unknown key
]


@pytest.mark.parametrize("query,expected", FORMS)
def test_each_form_and_its_negation(query, expected):
    assert rows(query) == expected
    assert rows("-" + query) == [r for r in ALL if r not in expected]


BIG_REPEAT = 17_500  # 122,500 rows: large enough for the distinct-value lookup of repetitive columns
BIG = (
    pl.concat([TASKS.drop("row")] * BIG_REPEAT)
    .with_row_index("row")
    .with_columns(
        # Unique op names: this column takes the row-by-row path, the others the distinct-value one.
        pl.format("{}#{}", pl.col("op_name"), pl.col("row"))
    )
    .rechunk()
)


def _big_rows(small_rows: list[int]) -> list[int]:
    return BIG.filter((pl.col("row") % TASKS.height).is_in(small_rows))["row"].to_list()


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("query,expected", FORMS)
def test_each_form_on_a_large_frame(query, expected):
    assert rows(query, BIG) == _big_rows(expected)
    assert rows("-" + query, BIG) == _big_rows([r for r in ALL if r not in expected])


def test_combination_on_a_large_frame():
    assert rows("matmul -type:Cast* core:AI_CORE -cause:any", BIG) == _big_rows([0])
    assert rows("name:nonzero_7# dur>1ms type:non*", BIG) == _big_rows([3])


def test_negated_comparison_keeps_rows_without_a_value():
    assert 4 not in rows("wait<=10") and 4 not in rows("wait>10")
    assert 4 in rows("-wait<=10") and 4 in rows("-wait>10")


@pytest.mark.parametrize(
    "query,expected",
    [
        ('"allReduce hcom"', []),  # one phrase, in this order
        ("allReduce hcom", [5]),  # two terms
        ('"hcom allreduce"', [5]),
        ('name:"hcom allreduce"', [5]),
        ('-"hcom allreduce"', [0, 1, 2, 3, 4, 6]),
        ('"aclnn"', [0]),  # quoted: text in the op name, not the aclnn flag
        ('"dur>1000"', []),  # quoted: text, not a comparison
        ('"type:Cast"', []),
        ('"-cast"', []),  # the dash is inside the quotes: text, not negation
        ('""', ALL),
    ],
)
def test_quoting(query, expected):
    assert rows(query) == expected


@pytest.mark.parametrize(
    "query,expected",
    [
        ("matmul dur>600", [4]),
        ("core:mix -type:*Grad", [2]),
        ("card:0 aclnn -cause:any", [0]),
        ("type:MatMul* card:1 cause:unexplained", [4]),
        ("cause:any -cause:expected wait>1000", [1, 3]),
        ("flash   dtype:bf16\tstate:dynamic", [2, 6]),
        ("-card:0 -core:AI_CPU -aclnn", [5]),
        ("matmul -matmul", []),
    ],
)
def test_terms_are_and_ed(query, expected):
    assert rows(query) == expected


@pytest.mark.parametrize("text", ["", "   ", "\t\n"])
def test_empty_query_matches_everything(text):
    q = parse_query(text)
    assert q.terms == () and q.text == text
    assert filter_tasks(TASKS, q).equals(TASKS)
    assert filter_stats(STATS, q).equals(STATS)


def test_terms_are_kept_as_typed():
    q = parse_query('  matmul  -"a b"   type:X*  name:"c d"  ')
    assert isinstance(q, Query)
    assert q.terms == ("matmul", '-"a b"', "type:X*", 'name:"c d"')
    assert parse_query("dur>5 aclnn") == parse_query("dur>5 aclnn")
    with pytest.raises(AttributeError):
        q.text = "other"  # frozen


@pytest.mark.parametrize(
    "text,bad",
    [
        ("dur>abc", "dur>abc"),
        ("matmul dur>abc", "dur>abc"),
        ("wait<=1x", "wait<=1x"),
        ("dur>", "dur>"),
        ("dur>inf", "dur>inf"),
        ("dur>1,000", "dur>1,000"),
        ("foo:bar", "foo:bar"),
        ("matmul -foo:bar", "-foo:bar"),
        ('name:"abc', 'name:"abc'),
        ('matmul "unbalanced phrase', '"unbalanced phrase'),
        ("type:", "type:"),
        ("cause:maybe", "cause:maybe"),
        ("dur:5", "dur:5"),
        ("size>5", "size>5"),
        ("dur > 5", ">"),
        ("-", "-"),
    ],
)
def test_bad_terms_raise_one_line_naming_the_term(text, bad):
    with pytest.raises(QueryError) as info:
        parse_query(text)
    err = info.value
    msg = str(err)
    assert isinstance(err, ValueError)
    assert err.term == bad
    assert "\n" not in msg
    assert msg.startswith(f"bad filter term {bad!r}: ")
    for form in (
        "type:Cast",
        "name:",
        "core:AI_CPU",
        "dur>1000",
        "wait>",
        "cause:",
        "aclnn",
        "aclop",
        "shape:",
        "dtype:",
        "card:",
        "state:",
        '"quoted text"',
        "-term",
    ):
        assert form in msg


def test_bad_number_message_says_what_was_wrong():
    with pytest.raises(QueryError, match=r"'abc' is not a number"):
        parse_query("dur>abc")
    with pytest.raises(QueryError, match=r"unknown key foo:"):
        parse_query("foo:bar")
    with pytest.raises(QueryError, match=r"quote is not closed"):
        parse_query('"abc')


def test_a_term_on_a_missing_column_is_a_query_error():
    with pytest.raises(QueryError, match=r"'wait>5': this table has no wait_us column"):
        filter_tasks(TASKS.drop("wait_us"), parse_query("wait>5"))
    assert rows("dur>5", TASKS.drop("wait_us")) == ALL


def test_filter_keeps_columns_and_order():
    out = filter_tasks(TASKS, parse_query("-card:1"))
    assert out.columns == TASKS.columns and out.schema == TASKS.schema
    assert out["row"].to_list() == [0, 1, 2, 6]


def test_filter_on_a_diagnosed_tiny_profile():
    diag = diagnose(
        profile(
            [
                task("MatMul_1", 0, 100, op_type="MatMulV2", shapes="8,4096", dtypes="BF16"),
                task("Where_2", 200, 30, op_type="Where", task_type="AI_CPU", state="dynamic"),
                task("Add_3", 300, 5, op_type="Add", task_type="AI_VECTOR_CORE"),
            ]
        )
    )
    names = lambda q: filter_tasks(diag.tasks, parse_query(q))["op_name"].to_list()  # noqa: E731
    assert names("core:ai_cpu") == ["Where_2"]
    assert names("-core:ai_cpu dur>=5") == ["MatMul_1", "Add_3"]
    assert names("state:dynamic") == ["Where_2"]
    assert names("shape:4096 dtype:bf16") == ["MatMul_1"]
    assert names("cause:any") == []
    assert names("-cause:any") == ["MatMul_1", "Where_2", "Add_3"]


# --- op statistics ---------------------------------------------------------------------------

STATS = pl.DataFrame(
    [
        ("0", "MatMulV2", "AI_CORE", 10, 500.0),
        ("0", "Cast", "AI_VECTOR_CORE", 5, 100.0),
        ("0", "FlashAttentionScore", "MIX_AIC", 2, 300.0),
        ("1", "NonZero", "AI_CPU", 1, 50.0),
    ],
    schema={"card": pl.String, "op_type": pl.String, "core_type": pl.String, "count": pl.Int64, "total_us": pl.Float64},
    orient="row",
)


def types(query: str) -> list[str]:
    return filter_stats(STATS, parse_query(query))["op_type"].to_list()


@pytest.mark.parametrize(
    "query,expected",
    [
        ("matmul", ["MatMulV2"]),
        ("-matmul", ["Cast", "FlashAttentionScore", "NonZero"]),
        ("type:cast", ["Cast"]),
        ("type:MatMul*", ["MatMulV2"]),
        ("-type:Cast card:0", ["MatMulV2", "FlashAttentionScore"]),
        ("core:mix", ["FlashAttentionScore"]),
        ("task:ai_cpu", ["NonZero"]),
        ("-core:AI_CORE", ["Cast", "FlashAttentionScore", "NonZero"]),
        ("card:1", ["NonZero"]),
        # Task-only terms are ignored on op statistics.
        ("name:zzz dur>1000 wait>5 cause:any aclnn aclop shape:9 dtype:INT8 state:x", STATS["op_type"].to_list()),
        ("name:zzz matmul dur>1000", ["MatMulV2"]),
    ],
)
def test_filter_stats(query, expected):
    assert types(query) == expected


def test_stats_ignored_terms_are_listed():
    q = parse_query('matmul name:zzz -dur>5 type:X card:0 core:mix "a b" aclnn')
    assert q.ignored_on_stats() == ("name:zzz", "-dur>5", "aclnn")


def test_filter_stats_on_the_demo():
    prof = open_profile(ensure_demo(), cache=FrameCache(enabled=False))
    out = filter_stats(prof.op_statistic, parse_query("type:matmul* card:0"))
    assert out.height > 0
    assert all(t.lower().startswith("matmul") for t in out["op_type"].to_list())
    assert set(out["card"].to_list()) == {"0"}


# --- sorting and totals ------------------------------------------------------------------------


def test_sort_numeric_ties_by_row_in_both_directions():
    desc = sort_frame(TASKS, "duration_us", True)["row"].to_list()
    asc = sort_frame(TASKS, "duration_us", False)["row"].to_list()
    assert desc == [3, 2, 4, 6, 0, 5, 1]
    assert asc == [1, 5, 0, 6, 2, 4, 3]


def test_sort_puts_nulls_last_in_both_directions():
    assert sort_frame(TASKS, "wait_us", False)["row"].to_list() == [0, 6, 2, 5, 1, 3, 4]
    assert sort_frame(TASKS, "wait_us", True)["row"].to_list() == [3, 1, 5, 2, 6, 0, 4]
    assert sort_frame(TASKS, "op_state", False)["row"].to_list() == [1, 2, 6, 0, 3, 4, 5]
    assert sort_frame(TASKS, "op_state", True)["row"].to_list() == [0, 3, 1, 2, 6, 4, 5]


def test_sort_breaks_ties_by_row_when_the_frame_is_not_in_row_order():
    shuffled = TASKS.sample(fraction=1.0, shuffle=True, seed=3)
    assert shuffled["row"].to_list() != ALL
    assert sort_frame(shuffled, "card", False)["row"].to_list() == [0, 1, 2, 6, 3, 4, 5]
    assert sort_frame(shuffled, "card", True)["row"].to_list() == [3, 4, 5, 0, 1, 2, 6]
    assert sort_frame(shuffled, "row", False)["row"].to_list() == ALL
    assert sort_frame(shuffled, "row", True)["row"].to_list() == ALL[::-1]


def test_sort_without_row_column_keeps_the_order_of_ties():
    frame = pl.DataFrame({"k": [2, 1, 2, 1, None, 1], "tag": list("abcdef")})
    assert sort_frame(frame, "k", False)["tag"].to_list() == list("bdface")
    assert sort_frame(frame, "k", True)["tag"].to_list() == list("acbdfe")


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("in_row_order", [False, True])
@pytest.mark.parametrize("n", [20_000, 150_000])  # large frames take the repeated-strings path
def test_sort_matches_a_reference_on_many_ties(descending, in_row_order, n):
    rng = random.Random(7)
    keys = [rng.choice([None, 1.5, 2.0, 3.25, -1.0]) for _ in range(n)]
    names = [rng.choice([None, "Add", "add", "Cast", "MatMulV2", "Ä"]) for _ in range(n)]
    unique = [None if i % 97 == 0 else f"op{rng.randrange(n)}" for i in range(n)]
    frame = pl.DataFrame({"row": pl.Series(range(n), dtype=pl.UInt32), "k": keys, "name": names, "u": unique})
    if not in_row_order:
        frame = frame.sample(fraction=1.0, shuffle=True, seed=11)
    for col, values in (("k", keys), ("name", names), ("u", unique)):
        present = sorted((r for r in range(n) if values[r] is not None), key=lambda r: values[r], reverse=descending)
        expected = present + [r for r in range(n) if values[r] is None]
        got = sort_frame(frame, col, descending)
        assert got["row"].to_list() == expected, col
        assert got.columns == frame.columns and got.schema == frame.schema


def test_sort_unknown_key_is_an_error():
    with pytest.raises(ValueError, match="no such column"):
        sort_frame(TASKS, "nope", False)


def test_sort_of_tiny_frames():
    assert sort_frame(TASKS.head(0), "duration_us", True).height == 0
    assert sort_frame(TASKS.head(1), "duration_us", True)["row"].to_list() == [0]


def test_totals():
    n, dur, wait = totals(TASKS)
    assert (n, dur, wait) == (7, 5520.0, 4535.0)  # the null wait counts as nothing
    assert isinstance(n, int) and isinstance(dur, float) and isinstance(wait, float)
    assert totals(TASKS.head(0)) == (0, 0.0, 0.0)
    assert totals(filter_tasks(TASKS, parse_query("card:1"))) == (3, 3300.0, 3020.0)
    assert totals(TASKS.drop("wait_us")) == (7, 5520.0, 0.0)
    assert totals(TASKS.filter(pl.col("row") == 4)) == (1, 1000.0, 0.0)


# --- help and layering -------------------------------------------------------------------------


def test_help_lists_every_form_and_its_examples_parse():
    lines = QUERY_HELP.splitlines()
    assert len(lines) > 5
    for form in (
        "type:Cast",
        "type:MatMul*",
        "name:",
        "core:AI_CPU",
        "task:",
        "core:mix",
        "dur>1000",
        "dur>=",
        "dur<",
        "dur<=",
        "dur=",
        "wait>1000",
        "recompilation",
        "host_op",
        "expected",
        "unexplained",
        "any",
        "aclnn",
        "aclop",
        "shape:8,4096",
        "dtype:BF16",
        "card:0",
        "state:dynamic",
        '"quoted text"',
        "-term",
    ):
        assert form in QUERY_HELP, form
    examples = [line.split()[0] for line in lines if line.startswith("  ")]
    assert len(examples) >= 10
    for example in examples:
        parse_query(example)


def test_query_and_export_import_no_ui_library():
    code = (
        "import sys, npuscope.analysis.query, npuscope.analysis.export\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "assert not bad, bad\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


# --- properties of the filter language -------------------------------------------------------------


TERMS = st.sampled_from(
    [
        "matmul",
        "cast",
        '"Cast_1"',
        "name:gather",
        "type:Cast",
        "type:MatMul*",
        "core:AI_CPU",
        "core:mix",
        "task:AI_CORE",
        "dur>100",
        "dur>=500",
        "dur<1ms",
        "wait>1000",
        "wait=10",
        "cause:recompilation",
        "cause:host",
        "cause:any",
        "cause:none",
        "aclnn",
        "aclop",
        "shape:8,4096",
        "dtype:bf16",
        "card:0",
        "state:dynamic",
        "aten::mm",
    ]
)
QUERIES = st.lists(st.tuples(st.booleans(), TERMS), max_size=4).map(
    lambda ts: " ".join(("-" if neg else "") + t for neg, t in ts)
)


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_any_text_parses_or_is_one_query_error(text):
    try:
        q = parse_query(text)
    except QueryError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("bad filter term")
    else:
        assert parse_query(q.text).terms == q.terms


@settings(max_examples=200, deadline=None)
@given(a=QUERIES, b=QUERIES)
def test_terms_are_anded(a, b):
    both = filter_tasks(TASKS, parse_query(f"{a} {b}"))["row"].to_list()
    one_then_other = filter_tasks(filter_tasks(TASKS, parse_query(a)), parse_query(b))["row"].to_list()
    assert sorted(both) == sorted(one_then_other)
    assert set(both) <= set(TASKS["row"].to_list())


@settings(max_examples=100, deadline=None)
@given(term=TERMS)
def test_a_term_and_its_negation_split_the_tasks(term):
    kept = set(filter_tasks(TASKS, parse_query(term))["row"].to_list())
    dropped = set(filter_tasks(TASKS, parse_query("-" + term))["row"].to_list())
    assert kept | dropped == set(TASKS["row"].to_list()) and not kept & dropped


# --- the terms drill-downs use: alternatives, kinds, Block Dim, relative durations, sequences --


def _kernels() -> pl.DataFrame:
    """One card: an RmsNorm sequence (Rsqrt, Mul), a collective that is not aclop although
    its name is no aclnn, a CPU task, an application's own kernel and its second call."""
    rows = [
        # op_name, op_type, task_type, is_aclnn, duration, block, wait_confidence
        ("Rsqrt_0", "Rsqrt", "AI_VECTOR_CORE", False, 2.0, 48, None),
        ("Mul_1", "Mul", "AI_VECTOR_CORE", False, 3.0, 48, None),
        ("hcom_allReduce__2", "hcom_allReduce_", "HCCL", False, 50.0, 0, "evidence"),
        ("Mul_3", "Mul", "AI_VECTOR_CORE", False, 30.0, 8, None),
        ("aclnnAdd_4", "Add", "AI_VECTOR_CORE", True, 1.0, 48, "suspected"),
        ("host_5", "MemCopy", "CPU", False, 4.0, None, None),
        ("add_custom_6", "add_custom", "AI_VECTOR_CORE", False, 9.0, 2, "suspected"),
        ("add_custom_7", "add_custom", "AI_CPU", False, 1.0, 2, None),  # the type is custom: its rows too
    ]
    return pl.DataFrame(
        [(i, "0", *r[:3], r[3], r[4], i * 1000, r[5], r[6], 0.0) for i, r in enumerate(rows)],
        schema={
            "row": pl.UInt32,
            "card": pl.String,
            "op_name": pl.String,
            "op_type": pl.String,
            "task_type": pl.String,
            "is_aclnn": pl.Boolean,
            "duration_us": pl.Float64,
            "start_ns": pl.Int64,
            "block_num": pl.Int64,
            "wait_confidence": pl.String,
            "wait_us": pl.Float64,
        },
        orient="row",
    )


@pytest.mark.parametrize(
    "query, expected",
    [
        ("aclop", [0, 1, 3, 7]),  # not the collective, the CPU task, aclnn or the own kernel's core task
        ("aclnn", [4]),
        ("kind:compute", [0, 1, 3, 4, 5, 6, 7]),
        ("kind:comm", [2]),
        ("-kind:communication", [0, 1, 3, 4, 5, 6, 7]),
        ("kind:custom", [6, 7]),
        ("block<10", [2, 3, 6, 7]),
        ("block>0 block<10", [3, 6, 7]),
        ("core:AI_VECTOR_CORE block<24 | core:AI_CPU", [3, 6, 7]),
        ("type:Mul | type:Rsqrt | kind:comm", [0, 1, 2, 3]),
        ("type:Mul dur>10 | type:Rsqrt", [0, 3]),
        ("dur>=1.5xavg", [3]),  # Mul: mean 16.5, 30 >= 24.75; add_custom's two task types are apart
        ("dur>=1xavg", [0, 2, 3, 4, 5, 6, 7]),
        ("fused:RmsNorm", [0, 1]),
        ("fused:rmsnorm -type:Mul", [0]),
        ("confidence:suspected", [4, 6]),
        ("-confidence:suspected", [0, 1, 2, 3, 5, 7]),
    ],
)
def test_drill_down_terms(query, expected):
    assert rows(query, _kernels()) == expected


def test_alternatives_split_at_a_lone_bar_only():
    assert rows('type:Mul "|"', _kernels()) == []  # quoted: text
    q = parse_query("type:Mul | type:Rsqrt")
    assert q.terms == ("type:Mul", "type:Rsqrt")
    assert filter_stats(STATS, parse_query("type:Cast | type:NonZero"))["op_type"].to_list() == ["Cast", "NonZero"]
    # An alternative of terms op statistics ignore keeps every row there.
    assert filter_stats(STATS, parse_query("type:Cast | dur>5")).height == STATS.height


@pytest.mark.parametrize(
    "query, word",
    [
        ("| type:Mul", "both sides"),
        ("type:Mul |", "both sides"),
        ("type:Mul | | type:Add", "both sides"),
        ("kind:gpu", "unknown kind"),
        ("fused:NoSuchOp", "no fused operator"),
        ("confidence:maybe", "unknown confidence"),
        ("block<ten", "not a number"),
        ("dur>=xavg", "not a number"),
    ],
)
def test_drill_down_terms_report_their_errors(query, word):
    with pytest.raises(QueryError) as exc:
        parse_query(query)
    assert word in str(exc.value) and "\n" not in str(exc.value)


def test_block_needs_its_column():
    with pytest.raises(QueryError, match="no block_num column"):
        filter_tasks(TASKS, parse_query("block<10"))


@settings(max_examples=200, deadline=None)
@given(a=QUERIES, b=QUERIES)
def test_alternatives_are_the_union(a, b):
    if not a.strip() or not b.strip():
        return
    either = set(rows(f"{a} | {b}"))
    assert either == set(rows(a)) | set(rows(b))
