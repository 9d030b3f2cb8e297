"""The SQL engine of `npuscope sql`: DuckDB over the frames' Arrow streams, or polars' SQLContext.

    python benchmarks/sql.py                          # 2,000,000 tasks (4 cards x 500,000), 5 rounds
    python benchmarks/sql.py --path /tmp/big2m --rounds 3

Without `--path` the project's generator writes an Era B export of 4 cards x 500,000 tasks with
a ~200 MB timeline (its host API calls become the `host_api` table and the `events`) into
`benchmarks/data/sql2m/` (once, ~10 s). The profile is opened and diagnosed once (the cache
helps a second run) and the tables are built once; then each query runs on each engine in
rounds, the engines alternating first, and the median is printed. DuckDB is timed through
npuscope's own path (`analysis.sql.run_sql`: a fresh locked in-memory database, the frames
registered as Arrow C streams, the result read back into polars); polars is timed as
`pl.SQLContext(frames).execute(query, eager=True)`. The results of the two are compared.
Then dialect coverage: which of a list of queries an analyst writes each engine runs at all,
on the demo profile's tables. Prints markdown; BENCHMARKS.md holds the last run's figures.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent

QUERIES: dict[str, str] = {
    "group-by (op type per card)": (
        "SELECT card, op_type, count(*) AS n, sum(duration_us) AS total_us, avg(wait_us) AS wait_us "
        "FROM tasks GROUP BY card, op_type ORDER BY total_us DESC"
    ),
    "join tasks x host_api (aclnn API: host vs device)": (
        "SELECT h.api, h.count AS calls, h.total_us AS host_us, count(*) AS tasks, sum(t.duration_us) AS device_us "
        "FROM (SELECT split_part(op_name, '_', 1) AS api, duration_us FROM tasks) AS t "
        "JOIN host_api AS h ON t.api = h.api GROUP BY h.api, h.count, h.total_us ORDER BY device_us DESC"
    ),
    "window (gap before each task, per card)": (
        "SELECT card, max(gap_ns) AS max_gap_ns, sum(gap_ns) AS gaps_ns FROM ("
        "SELECT card, start_ns - lag(end_ns) OVER (PARTITION BY card ORDER BY start_ns) AS gap_ns FROM tasks"
        ") AS g GROUP BY card ORDER BY card"
    ),
}

COVERAGE: dict[str, str] = {
    "GROUP BY, ORDER BY, LIMIT": "SELECT op_type, count(*) AS n FROM tasks GROUP BY op_type ORDER BY n DESC LIMIT 3",
    "equi-join": "SELECT t.card, count(*) AS n FROM tasks t JOIN op_stats s ON t.card = s.card AND t.op_type = s.op_type GROUP BY t.card",
    "window: lag": "SELECT start_ns - lag(end_ns) OVER (PARTITION BY card ORDER BY start_ns) AS gap FROM tasks",
    "window: rank + QUALIFY": "SELECT op_name, duration_us FROM tasks QUALIFY rank() OVER (PARTITION BY card ORDER BY duration_us DESC) <= 3",
    "window frame (ROWS BETWEEN)": "SELECT sum(duration_us) OVER (PARTITION BY card ORDER BY start_ns ROWS BETWEEN 9 PRECEDING AND CURRENT ROW) AS s FROM tasks",
    "CTE (WITH)": "WITH w AS (SELECT card, sum(wait_us) AS w FROM tasks GROUP BY card) SELECT * FROM w",
    "scalar subquery": "SELECT count(*) FROM tasks WHERE duration_us > (SELECT avg(duration_us) FROM tasks)",
    "aggregate FILTER (WHERE ...)": "SELECT card, sum(wait_us) FILTER (WHERE wait_cause = 'recompilation') AS w FROM tasks GROUP BY card",
    "percentile_cont WITHIN GROUP": "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_us) AS p50 FROM tasks",
    "range join (task in step window)": "SELECT s.step, count(*) FROM tasks t JOIN tasks s ON t.start_ns BETWEEN s.start_ns AND s.end_ns AND t.card = s.card AND s.row < 5 GROUP BY s.step",
    "string_agg": "SELECT card, string_agg(DISTINCT wait_cause, ',') AS causes FROM tasks GROUP BY card",
    "regexp_extract": "SELECT regexp_extract(op_name, '^([A-Za-z]+)', 1) AS head, count(*) FROM tasks GROUP BY head",
    "list column (findings.op_types)": "SELECT rule, op_types[1] AS first_type FROM findings",
    "UNION ALL": "SELECT card FROM tasks UNION ALL SELECT card FROM op_stats",
    "GROUP BY ALL": "SELECT card, op_type, sum(duration_us) FROM tasks GROUP BY ALL",
    "ASOF JOIN": "SELECT t.op_name, s.op_type FROM tasks t ASOF JOIN tasks s ON t.card = s.card AND t.start_ns >= s.start_ns",
    "median, stddev": "SELECT card, median(duration_us), stddev(duration_us) FROM tasks GROUP BY card",
    "file function (read_csv), must be refused": "SELECT * FROM read_csv('/etc/hostname')",
}


def ensure_data(path: Path | None) -> Path:
    if path is not None:
        return path
    out = HERE / "data" / "sql2m"
    if not (out / "ascend_profiling").is_dir():
        print(f"writing {out} (once) ...", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "npuscope.fixtures.generate", str(out), "--rows", "500000", "--cards", "4",
             "--json-mb", "200", "--training", "--quiet"],
            check=True,
        )  # fmt: skip
    return out / "ascend_profiling"


def load_tables(path: Path):  # noqa: ANN201
    from npuscope.analysis import diagnose
    from npuscope.analysis.sql import profile_tables
    from npuscope.parsers import FrameCache, open_profile
    from npuscope.parsers.views_cache import cached_training_views

    t0 = time.perf_counter()
    cache = FrameCache()
    profile = open_profile(path, cache=cache)
    diagnosis = diagnose(profile, cache=FrameCache())
    views = cached_training_views(profile, FrameCache())
    tables = profile_tables(profile, diagnosis, views)
    frames = {name: tables.frame(name) for name in ("tasks", "host_api", "op_stats", "findings")}
    return tables, frames, time.perf_counter() - t0


def duckdb_runner(tables) -> Callable[[str], pl.DataFrame]:  # noqa: ANN001
    from npuscope.analysis.sql import run_sql

    return lambda q: run_sql(tables, q)


def polars_runner(frames: dict[str, pl.DataFrame]) -> Callable[[str], pl.DataFrame]:
    def run(q: str) -> pl.DataFrame:
        ctx = pl.SQLContext(frames={k: v.lazy() for k, v in frames.items()})
        return ctx.execute(q, eager=True)

    return run


def timed(run: Callable[[str], pl.DataFrame], q: str) -> tuple[float, pl.DataFrame]:
    t0 = time.perf_counter()
    out = run(q)
    return time.perf_counter() - t0, out


def same(a: pl.DataFrame, b: pl.DataFrame) -> str:
    if a.shape != b.shape:
        return f"differ: {a.shape} vs {b.shape}"
    a2 = a.rename(dict(zip(a.columns, b.columns))).sort(b.columns, nulls_last=True)
    b2 = b.sort(b.columns, nulls_last=True)
    for x, y in zip(a2.iter_columns(), b2.iter_columns()):
        if x.dtype.is_float() or y.dtype.is_float():
            if ((x.cast(pl.Float64) - y.cast(pl.Float64)).abs() > 1e-6 * (1 + y.cast(pl.Float64).abs())).any():
                return "differ"
        elif x.cast(pl.String).to_list() != y.cast(pl.String).to_list():
            return "differ"
    return "same"


def coverage() -> list[tuple[str, str, str]]:
    from npuscope.analysis import diagnose
    from npuscope.analysis.sql import profile_tables, run_sql
    from npuscope.fixtures.demo_profile import ensure_demo
    from npuscope.parsers import open_profile
    from npuscope.parsers.training import read_training_views

    profile = open_profile(ensure_demo(), cache=None)
    tables = profile_tables(profile, diagnose(profile), lambda: read_training_views(profile))
    frames = {name: tables.frame(name) for name in ("tasks", "op_stats", "findings")}
    rows = []
    for what, q in COVERAGE.items():
        cells = [what]
        for run in (lambda q: run_sql(tables, q), polars_runner(frames)):
            try:
                run(q)
                cells.append("yes")
            except BaseException as exc:  # noqa: BLE001 - polars panics are BaseException
                cells.append("no: " + " ".join(str(exc).split())[:70])
        rows.append((cells[0], cells[1], cells[2]))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", type=Path, help="a profile to query (default: generate 4 x 500,000 tasks)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    path = ensure_data(args.path)
    tables, frames, load_s = load_tables(path)
    import duckdb

    print(f"profile {path}: {frames['tasks'].height:,} tasks, {frames['host_api'].height:,} host_api rows; "
          f"open + diagnose + views + tables {load_s:.1f} s")  # fmt: skip
    print(
        f"polars {pl.__version__}, duckdb {duckdb.__version__}, Python {sys.version.split()[0]}, {args.rounds} rounds\n"
    )
    engines = {"DuckDB (npuscope run_sql)": duckdb_runner(tables), "polars SQLContext": polars_runner(frames)}
    times: dict[tuple[str, str], list[float]] = {}
    results: dict[tuple[str, str], pl.DataFrame] = {}
    for r in range(args.rounds):
        order = list(engines) if r % 2 == 0 else list(reversed(engines))
        for name, q in QUERIES.items():
            for engine in order:
                try:
                    s, out = timed(engines[engine], q)
                except BaseException as exc:  # noqa: BLE001
                    print(f"{engine} failed on {name}: {' '.join(str(exc).split())[:200]}", file=sys.stderr)
                    continue
                times.setdefault((name, engine), []).append(s)
                results[(name, engine)] = out
    print("| query | " + " | ".join(f"{e} median (min-max)" for e in engines) + " | rows | results |")
    print("|---|" + "---:|" * len(engines) + "---:|---|")
    for name in QUERIES:
        cells = []
        for engine in engines:
            ts = times.get((name, engine))
            cells.append(f"{statistics.median(ts):.3f} s ({min(ts):.3f}-{max(ts):.3f})" if ts else "fails")
        outs = [results.get((name, e)) for e in engines]
        rows = f"{outs[0].height:,}" if outs[0] is not None else "-"
        verdict = same(outs[0], outs[1]) if all(o is not None for o in outs) else "-"
        print(f"| {name} | " + " | ".join(cells) + f" | {rows} | {verdict} |")
    print("\n| dialect (demo tables) | DuckDB | polars SQLContext |\n|---|---|---|")
    for what, d, p in coverage():
        print(f"| {what} | {d} | {p} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
