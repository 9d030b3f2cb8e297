"""`npuscope sql`: the tables are the report's frames, every input kind answers, nothing escapes.

Truth: the report's own JSON (`report --format json`, run in process) where the same figures
appear, the frames the report is built from (open_profile -> diagnose -> training views), and
for the real captures the files themselves read with the csv / sqlite3 modules. Each query runs
through `npuscope.cli.main`, as a user runs it.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import sqlite3
from pathlib import Path

import orjson
import polars as pl
import pytest

from npuscope.analysis import diagnose
from npuscope.analysis.sql import TABLES, profile_tables, run_sql
from npuscope.analysis.training_rules import training_findings
from npuscope.cli import main
from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.fixtures.generate import generate_cluster
from npuscope.parsers import open_profile
from npuscope.parsers.training import read_training_views

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "fixtures" / "samples" / "real"


def cli(*args: str) -> tuple[int, bytes, str]:
    out, err = io.BytesIO(), io.StringIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err):
        code = main(list(args))
    stdout.flush()
    return code, out.getvalue(), err.getvalue()


def rows(path: Path | str, query: str, *extra: str) -> list[dict]:
    code, out, err = cli("sql", str(path), query, "--format", "json", *extra)
    assert code == 0, err
    return orjson.loads(out)


def report(path: Path | str, *extra: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", str(path), "--format", "json", "--top", "100000", *extra]) == 0
    return orjson.loads(out.getvalue())


def close(a: float | None, b: float | None, tol: float = 2e-3) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=tol)


# --------------------------------------------------------------------------- the demo, table by table


@pytest.fixture(scope="module")
def demo_report() -> dict:
    return report(ensure_demo())


@pytest.fixture(scope="module")
def demo_frames():
    """The frames the report is built from, by the report's own path."""
    profile = open_profile(ensure_demo(), cache=None)
    diagnosis = diagnose(profile)
    views = read_training_views(profile)
    diagnosis = diagnosis.with_findings(training_findings(profile, diagnosis, views))
    return profile, diagnosis, views


def test_tasks_are_the_reports_tasks(demo_report, demo_frames):
    _, diagnosis, _ = demo_frames
    got = rows("demo", "SELECT * FROM tasks ORDER BY row")
    truth = diagnosis.tasks.sort("row")
    assert len(got) == truth.height == 2240
    for column in ("row", "card", "op_name", "op_type", "task_type", "start_ns", "duration_us", "wait_us", "wait_cause",
                   "stream_id", "step_id", "input_shapes"):  # fmt: skip
        assert [r[column] for r in got] == truth[column].to_list(), column
    assert all(r["end_ns"] == r["start_ns"] + round(r["duration_us"] * 1000) for r in got)
    # The report's longest tasks and waits are the top of the same rows.
    for card in demo_report["cards"]:
        mine = [r for r in got if r["card"] == card["card"]]
        longest = sorted(mine, key=lambda r: (-r["duration_us"], r["row"]))[:10]
        assert [r["op_name"] for r in longest] == [t["op_name"] for t in card["top_duration"][:10]]
        waits = sorted(mine, key=lambda r: (-(r["wait_us"] or 0), r["row"]))[:10]
        assert [(r["op_name"], r["wait_cause"]) for r in waits] == [
            (t["op_name"], t["wait_cause"]) for t in card["top_wait"][:10]
        ]


def test_card_totals_by_sql_equal_the_report(demo_report):
    got = rows(
        "demo",
        "SELECT card, count(*) AS tasks, sum(duration_us) FILTER (WHERE NOT is_communication) AS compute_us, "
        "coalesce(sum(duration_us) FILTER (WHERE is_communication), 0) AS communication_us, "
        "sum(coalesce(wait_us, 0)) AS wait_us, (max(end_ns) - min(start_ns)) / 1000 AS span_us "
        "FROM tasks GROUP BY card ORDER BY card",
    )
    assert [r["card"] for r in got] == [c["card"] for c in demo_report["cards"]]
    for r, card in zip(got, demo_report["cards"]):
        s = card["summary"]
        assert r["tasks"] == s["tasks"]
        for key in ("compute_us", "communication_us", "wait_us", "span_us"):
            assert close(r[key], s[key]), (key, r[key], s[key])


def test_op_stats_findings_and_views_equal_the_report(demo_report):
    stats_all = rows("demo", "SELECT * FROM op_stats")
    found_all = rows("demo", "SELECT * FROM findings")
    steps_all = rows("demo", "SELECT * FROM steps ORDER BY card, step")
    # The report sums communication and host API per op type / API: the same sums in SQL.
    comm_all = rows(
        "demo",
        "SELECT card, op_type, sum(count) AS count, sum(total_us) AS total_us FROM communication "
        "GROUP BY card, op_type ORDER BY total_us DESC, op_type",
    )
    api_all = rows(
        "demo",
        "SELECT card, api, sum(count) AS count, sum(total_us) AS total_us, max(max_us) AS max_us FROM host_api "
        "GROUP BY card, api ORDER BY total_us DESC, api",
    )
    keys = ("op_type", "core_type", "count", "total_us", "min_us", "avg_us", "max_us", "ratio_pct", "bound")
    for card in demo_report["cards"]:
        c = card["card"]
        stats = [r for r in stats_all if r["card"] == c]
        assert len(stats) == len(card["op_statistic"]) > 0
        for a, b in zip(stats, card["op_statistic"]):
            assert all(close(a[k], b[k]) if isinstance(b[k], float) else a[k] == b[k] for k in keys), (a, b)
        found = [f for f in found_all if f["card"] == c]
        assert [(f["rule"], f["title"], f["count"]) for f in found] == [
            (f["rule"], f["title"], f["count"]) for f in card["findings"]
        ]
        assert all(close(a["time_us"], b["time_us"]) for a, b in zip(found, card["findings"]))
        assert [json.loads(f["evidence"]) for f in found] == [f["evidence"] for f in card["findings"]]
        steps = [r for r in steps_all if r["card"] == c]
        assert [str(s["step"]) for s in steps] == [s["step"] for s in card["steps"]]
        for a, b in zip(steps, card["steps"]):
            for key in ("step_us", "compute_us", "communication_us", "comm_not_overlapped_us", "free_us"):
                assert close(a[key], b[key]), key
        comm = [r for r in comm_all if r["card"] == c]
        assert [(r["op_type"], r["count"]) for r in comm] == [(r["op_type"], r["count"]) for r in card["communication"]]
        assert comm and all(close(a["total_us"], b["total_us"]) for a, b in zip(comm, card["communication"]))
        api = [r for r in api_all if r["card"] == c]
        assert [(r["api"], r["count"]) for r in api] == [(r["api"], r["count"]) for r in card["host_api"]]
        assert api and all(close(a["total_us"], b["total_us"]) and close(a["max_us"], b["max_us"])
                           for a, b in zip(api, card["host_api"]))  # fmt: skip


@pytest.fixture(scope="module")
def rank_frames():
    """A real torch_npu rank with links, memory and communication files (the demo has none)."""
    profile = open_profile(REAL / "torch_npu_2023_gpt3_2rank" / "test_rank_0", cache=None)
    diagnosis = diagnose(profile)
    views = read_training_views(profile)
    return profile, diagnosis.with_findings(training_findings(profile, diagnosis, views)), views


@pytest.mark.parametrize("which", ["demo_frames", "rank_frames"])
def test_every_table_holds_the_frames(which, request):
    """Each table against the frame it comes from, cell for cell (the columns they share)."""
    profile, diagnosis, views = request.getfixturevalue(which)
    tables = profile_tables(profile, diagnosis, views, findings=diagnosis.findings)
    nonempty = {"demo_frames": {"steps", "communication", "host_api", "events"},
                "rank_frames": {"steps", "communication", "links", "memory", "memory_ops"}}[which]  # fmt: skip
    truth = {
        "steps": views.steps,
        "communication": views.communication,
        "links": views.links,
        "host_api": views.host_api,
        "memory": views.memory,
        "memory_ops": views.memory_top_ops,
        "events": profile.events,
    }
    for name, frame in truth.items():
        if frame is None:  # no timeline: the events table is empty, with the event columns
            frame = pl.DataFrame(schema=tables.frame("events").schema)
        assert (frame.height > 0) == (name in nonempty), name
        got = run_sql(tables, f"SELECT * FROM {name}")
        assert got.height == frame.height, name
        assert got.select(frame.columns).equals(frame), name
    assert run_sql(tables, "SELECT count(*) AS n FROM findings")["n"][0] == len(diagnosis.findings)
    assert set(TABLES) - {"ranks"} == set(tables.names)


def test_steps_of_tasks_are_the_steps_table():
    got = rows("demo", "SELECT card, step, count(*) AS n FROM tasks GROUP BY ALL ORDER BY ALL")
    steps = rows("demo", "SELECT card, step FROM steps ORDER BY ALL")
    assert {(r["card"], r["step"]) for r in got} == {(r["card"], r["step"]) for r in steps}
    assert sum(r["n"] for r in got) == 2240


# --------------------------------------------------------------------------- every input kind


def _kernel_rows(folder: Path) -> int:
    """Rows of the kernel_details.csv files under `folder` (csv module), damaged rows left out."""
    n = 0
    for path in sorted(folder.rglob("kernel_details.csv")):
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader)
            n += sum(1 for row in reader if len(row) == len(header))
    return n


@pytest.mark.parametrize(
    "sample",
    [
        "msprof_db_2023",
        "torch_npu_2024_cnn",
        "torch_npu_2025_db",
        "torch_npu_2024_cnn/level0",
        "torch_npu_2023_gpt3_2rank",
        "torch_npu_2025_db/level0",
    ],
)
def test_real_captures_answer_as_the_report(sample):
    """Per card (per rank on a cluster) tasks, compute and wait: SQL against the report."""
    path = REAL / sample
    doc = report(path)
    if "cluster" in doc:
        ranks = rows(
            path,
            "SELECT r.*, t.n, t.w FROM ranks r LEFT JOIN (SELECT rank, count(*) AS n, sum(coalesce(wait_us, 0)) AS w "
            "FROM tasks GROUP BY rank) t USING (rank) ORDER BY rank",
        )
        assert [(r["rank"], r["tasks"]) for r in ranks] == [(r["rank"], r["tasks"]) for r in doc["cluster"]["ranks"]]
        for a, b in zip(ranks, doc["cluster"]["ranks"]):
            for key in ("step_us", "compute_us", "communication_us", "exposed_comm_us", "free_us", "wait_us"):
                assert close(a[key], b[key]), key
            assert a["n"] == b["tasks"] and close(a["w"], b["wait_us"])  # the per-rank tasks table
        detailed = doc["rank"]
        found = rows(path, f"SELECT rule, title FROM findings WHERE rank = '{detailed}'")
        assert [(f["rule"], f["title"]) for f in found] == [
            (f["rule"], f["title"]) for c in doc["cards"] for f in c["findings"]
        ]
        if "db" not in sample:
            assert sum(r["n"] for r in ranks) == _kernel_rows(path)
        return
    got = rows(
        path,
        "SELECT card, count(*) AS tasks, sum(duration_us) FILTER (WHERE NOT is_communication) AS compute_us, "
        "sum(coalesce(wait_us, 0)) AS wait_us FROM tasks GROUP BY card ORDER BY card",
    )
    cards = {c["card"]: c["summary"] for c in doc["cards"]}
    assert {r["card"] for r in got} == set(cards)
    for r in got:
        s = cards[r["card"]]
        assert (
            r["tasks"] == s["tasks"]
            and close(r["compute_us"] or 0.0, s["compute_us"])
            and close(r["wait_us"], s["wait_us"])
        )
    if sample == "msprof_db_2023":  # the db itself: TASK rows with a COMPUTE_TASK_INFO row are the tasks
        con = sqlite3.connect(f"file:{path / 'msprof_0.db'}?mode=ro&immutable=1", uri=True)
        try:
            n = con.execute(
                "SELECT count(*) FROM TASK t JOIN COMPUTE_TASK_INFO c ON t.globalTaskId = c.globalTaskId"
            ).fetchone()[0]
        finally:
            con.close()
        assert sum(r["tasks"] for r in got) == n > 0
    if sample == "torch_npu_2024_cnn":
        assert sum(r["tasks"] for r in got) == _kernel_rows(path)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sql-cluster") / "job"
    generate_cluster(root, ranks=3, steps=2, ops_per_step=60, timeline=False)
    return root


def test_cluster_tables(cluster):
    doc = report(cluster)
    ranks = rows(cluster, "SELECT * FROM ranks ORDER BY rank")
    assert [r["rank"] for r in ranks] == ["0", "1", "2"]
    assert [r["slow"] for r in ranks] == [r["rank"] in doc["cluster"]["slow_ranks"] for r in doc["cluster"]["ranks"]]
    per = rows(cluster, "SELECT rank, card, count(*) AS n FROM tasks GROUP BY ALL ORDER BY ALL")
    assert [(r["rank"], r["n"]) for r in per] == [(r["rank"], r["tasks"]) for r in doc["cluster"]["ranks"]]
    # The slow rank's findings are the report's detailed rank's, the cluster's own among them.
    slow = doc["rank"]
    found = rows(cluster, f"SELECT rule FROM findings WHERE rank = '{slow}'")
    assert [f["rule"] for f in found] == [f["rule"] for c in doc["cards"] for f in c["findings"]]
    assert "slow_rank" in {f["rule"] for f in found}
    one = rows(cluster, "SELECT DISTINCT rank FROM steps", "--rank", "1")
    assert one == [{"rank": "1"}]
    code, _, err = cli("sql", str(cluster), "SELECT * FROM tasks", "--rank", "9")
    assert code == 2 and err.count("\n") == 1 and "no rank '9'" in err


def test_cluster_refuses_unbounded_per_rank_tables(cluster, monkeypatch):
    import npuscope.sql_cmd as sql_cmd

    monkeypatch.setattr(sql_cmd, "MAX_CLUSTER_TASKS", 10)
    code, _, err = cli("sql", str(cluster), "SELECT count(*) FROM tasks")
    assert code == 2 and "--rank" in err and err.count("\n") == 1
    assert rows(cluster, "SELECT count(*) AS n FROM ranks") == [{"n": 3}]  # the summary alone: no rank loaded


# --------------------------------------------------------------------------- formats and output


def test_formats(tmp_path):
    q = "SELECT op_type, count(*) AS n, sum(duration_us) AS total_us FROM tasks WHERE card = '0' GROUP BY 1 ORDER BY 3 DESC"
    truth = rows("demo", q)
    code, out, _ = cli("sql", "demo", q)
    text = out.decode()
    lines = text.splitlines()
    assert code == 0 and lines[0].split() == ["op_type", "n", "total_us"] and set(lines[1]) == {"-", " "}
    assert lines[2].split()[0] == truth[0]["op_type"] and lines[-1] == f"({len(truth)} rows)"
    assert f"{truth[0]['total_us']:,.3f}" in lines[2]
    code, out, _ = cli("sql", "demo", q, "--format", "csv")
    parsed = list(csv.DictReader(io.StringIO(out.decode())))
    assert [(r["op_type"], int(r["n"])) for r in parsed] == [(r["op_type"], r["n"]) for r in truth]
    target = tmp_path / "result.parquet"
    target.write_bytes(b"old")
    code, out, err = cli("sql", "demo", q, "--format", "parquet", "--out", str(target))
    assert code == 0 and out == b"" and f"{len(truth)} row(s) written to" in err
    assert pl.read_parquet(target).to_dicts() == truth
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.parquet"]  # no temporary file left


def test_out_is_written_whole_or_not_at_all(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("keep")
    code, _, err = cli("sql", "demo", "SELECT nosuch FROM tasks", "--out", str(target))
    assert code == 2 and target.read_text() == "keep" and err.count("\n") == 1
    code, _, err = cli("sql", "demo", "SELECT 1 AS x", "--out", str(tmp_path / "no" / "such" / "r.csv"))
    assert code == 2 and "no such folder" in err and err.count("\n") == 1
    code, _, _ = cli("sql", "demo", "SELECT 1 AS x", "--format", "json", "--out", str(target))
    assert code == 0 and orjson.loads(target.read_bytes()) == [{"x": 1}]
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_result_types_are_plain():
    got = rows(
        "demo",
        "SELECT sum(count) AS calls, 1.5 AS dec, INTERVAL 1 DAY AS iv, 'ab'::BLOB AS b, list(DISTINCT card) AS cards "
        "FROM op_stats",
    )
    assert len(got) == 1 and sorted(got[0].pop("cards")) == ["0", "1"]
    assert got == [{"calls": 2216, "dec": 1.5, "iv": "1 day", "b": "ab"}]
    code, out, _ = cli("sql", "demo", "SELECT list(DISTINCT card ORDER BY card) AS cards FROM tasks", "--format", "csv")
    assert code == 0 and list(csv.reader(io.StringIO(out.decode()))) == [["cards"], ["[0, 1]"]]


def test_booleans_read_as_words():
    code, out, _ = cli("sql", "demo", "SELECT true AS yes, false AS no")
    assert code == 0 and out.decode().splitlines()[2].split() == ["true", "false"]


def test_escape_sequences_never_reach_the_terminal():
    code, out, _ = cli("sql", "demo", "SELECT chr(27) || ']52;c;aGk=' || chr(7) || 'name' AS x")
    assert code == 0 and b"\x1b" not in out and b"name" in out


# --------------------------------------------------------------------------- safety and bad input

FORBIDDEN = {
    "copy": "COPY tasks TO '{out}/x.csv'",
    "copy select": "COPY (SELECT 1) TO '{out}/x.parquet' (FORMAT parquet)",
    "attach": "ATTACH '{out}/x.db' AS x",
    "export": "EXPORT DATABASE '{out}/exported'",
    "read_csv": "SELECT * FROM read_csv('{secret}')",
    "read_csv_auto": "SELECT * FROM read_csv_auto('{secret}')",
    "read_parquet": "SELECT * FROM read_parquet('{out}/*.parquet')",
    "read_text": "SELECT * FROM read_text('{secret}')",
    "read_json": "SELECT * FROM read_json('{secret}')",
    "glob": "SELECT * FROM glob('{out}/*')",
    "file as table": "SELECT * FROM '{secret}'",
    "install": "INSTALL httpfs",
    "load": "LOAD httpfs",
    "set": "SET enable_external_access = true",
    "reset": "RESET lock_configuration",
    "pragma": "PRAGMA enable_profiling = 'json'",
    "two statements": "SELECT 1; COPY tasks TO '{out}/y.csv'",
    "python variable": "SELECT * FROM FORBIDDEN",
}


@pytest.mark.parametrize("what", list(FORBIDDEN))
def test_queries_cannot_read_or_write_files(what, tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("password\nhunter2\n")
    out = tmp_path / "out"
    out.mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, stdout, err = cli("sql", "demo", FORBIDDEN[what].format(out=out, secret=secret))
    assert code == 2, (what, stdout, err)
    assert err.startswith("npuscope: ") and err.count("\n") == 1 and "Traceback" not in err
    assert b"hunter2" not in stdout and "hunter2" not in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert not list(Path.cwd().glob(".tmp*"))  # nothing spilled beside the user


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("SELEC 1", "syntax error"),
        ("SELECT nosuch FROM tasks", "nosuch"),
        ("SELECT * FROM task", "The tables: tasks"),
        ("", "empty query"),
        ("SELECT 1/0::INTEGER + 'x'", "Conversion Error"),
    ],
)
def test_a_bad_query_is_one_line(query, words):
    code, out, err = cli("sql", "demo", query)
    assert code == 2 and out == b""
    assert err.startswith("npuscope: ") and err.count("\n") == 1 and words in err, err


def test_a_bad_query_fails_before_the_profile_is_read(tmp_path):
    """The query is parsed first: a syntax error costs no load (the path does not even exist)."""
    code, _, err = cli("sql", str(tmp_path / "nothing-here"), "SELEC 1")
    assert code == 2 and "syntax error" in err
    code, _, err = cli("sql", str(tmp_path / "nothing-here"), "SELECT 1")
    assert code == 2 and "syntax error" not in err and err.count("\n") == 1


def test_nothing_is_written_into_the_profile_folder(tmp_path):
    import shutil

    folder = tmp_path / "p"
    shutil.copytree(REAL / "torch_npu_2024_cnn" / "level1" / "rank0_ascend_pt", folder / "rank0_ascend_pt")
    before = sorted((p.relative_to(folder), p.stat().st_mtime_ns) for p in folder.rglob("*"))
    assert rows(folder, "SELECT count(*) AS n FROM tasks")[0]["n"] > 0
    assert sorted((p.relative_to(folder), p.stat().st_mtime_ns) for p in folder.rglob("*")) == before


def test_help_is_instant():
    """`--help` never imports DuckDB (nor polars: the CLI defers them)."""
    import subprocess
    import sys

    code = "import sys; from npuscope.cli import main\ntry: main(['sql', '--help'])\nexcept SystemExit: pass\nprint(sorted(m for m in ('duckdb', 'polars') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


PROJECTION_CASES = [
    "SELECT * FROM op_stats ORDER BY ALL",
    "SELECT s.* FROM op_stats s ORDER BY ALL",
    "SELECT COLUMNS('.*_us') FROM op_stats ORDER BY ALL",
    "SELECT #1, #2 FROM op_stats ORDER BY ALL",
    "SELECT s FROM op_stats s ORDER BY s.op_type, s.card, s.core_type",
    "SELECT a, b FROM op_stats AS s(a, b) ORDER BY ALL",
    "SELECT count(*) AS n FROM op_stats s NATURAL JOIN op_stats r",
    "SELECT count(*) AS n FROM tasks JOIN op_stats USING (card, op_type)",
    "SELECT count(*) AS n, count(1) AS m FROM tasks",
    "SELECT t.op_name, s.op_type FROM tasks t ASOF JOIN tasks s ON t.card = s.card AND t.start_ns > s.start_ns ORDER BY ALL LIMIT 5",
    'SELECT "card", max("duration_us") AS d FROM tasks GROUP BY ALL ORDER BY ALL',
    "PIVOT (SELECT card, op_type, duration_us FROM tasks) ON card USING sum(duration_us) ORDER BY op_type",
    "DESCRIBE findings",
    "SUMMARIZE op_stats",
]


@pytest.mark.parametrize("query", PROJECTION_CASES)
def test_only_the_columns_a_query_names_are_handed_over(query, demo_frames, monkeypatch):
    """The projection of the frames (analysis/sql.py `_columns`) never changes a result."""
    import npuscope.analysis.sql as sql

    profile, diagnosis, views = demo_frames
    tables = profile_tables(profile, diagnosis, views, findings=diagnosis.findings)
    got = run_sql(tables, query)
    monkeypatch.setattr(sql, "_columns", lambda tree, wanted: {t: None for t in wanted})
    whole = run_sql(tables, query)
    assert got.height > 0 and got.equals(whole)


def test_a_ranks_tables_in_the_explorer_carry_its_rank(cluster):
    """The explorer's open rank of a cluster (sql_screen): its tables with `rank`, and `ranks`."""
    from npuscope.analysis.cluster import open_cluster, open_rank
    from npuscope.analysis.sql import with_rank

    summary = open_cluster(cluster, jobs=1)
    profile = open_rank(summary, "1")
    diagnosis = diagnose(profile)
    tables = with_rank(profile_tables(profile, diagnosis, lambda: read_training_views(profile)), "1", summary)
    got = run_sql(tables, "SELECT rank, count(*) AS n FROM tasks GROUP BY rank")
    assert got.to_dicts() == [{"rank": "1", "n": diagnosis.tasks.height}]
    ranks = run_sql(tables, "SELECT rank, tasks FROM ranks ORDER BY rank")
    assert ranks.to_dicts() == [{"rank": r.rank, "tasks": r.tasks} for r in summary.ranks]
