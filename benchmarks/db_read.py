"""Read speed of an msprof / torch_npu db export: the ways to get SQLite rows into polars.

    python benchmarks/db_read.py                      # 2,000,000-row TASK table, 3 rounds
    python benchmarks/db_read.py --rows 200000 --repeat 1   # a quick look

A synthetic db with the real schema (the tables and columns of a torch_npu
`ascend_pytorch_profiler_N.db`: TASK, COMPUTE_TASK_INFO, STRING_IDS, COMMUNICATION_OP,
CANN_API, ENUM_API_TYPE, STEP_TIME, RANK_DEVICE_MAP) is generated into a temporary folder
and removed afterwards. Every measurement runs in a fresh Python process, so each figure
holds nothing but the work named, and that process's peak RSS is reported beside it.
Readers that are not installed are listed as such (`pip install connectorx
adbc-driver-sqlite pyarrow` to measure them all). Prints a markdown table; BENCHMARKS.md
holds a copy of the last full run.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE_NS = 1_736_407_067_946_125_104

SCHEMA = """
CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY,value TEXT);
CREATE TABLE TASK (startNs INTEGER,endNs INTEGER,deviceId INTEGER,connectionId INTEGER,globalTaskId INTEGER,globalPid INTEGER,taskType INTEGER,contextId INTEGER,streamId INTEGER,taskId INTEGER,modelId INTEGER);
CREATE TABLE COMPUTE_TASK_INFO (name INTEGER,globalTaskId INTEGER PRIMARY KEY,blockDim INTEGER,mixBlockDim INTEGER,taskType INTEGER,opType INTEGER,inputFormats INTEGER,inputDataTypes INTEGER,inputShapes INTEGER,outputFormats INTEGER,outputDataTypes INTEGER,outputShapes INTEGER,attrInfo INTEGER);
CREATE TABLE COMMUNICATION_OP (opName INTEGER,startNs INTEGER,endNs INTEGER,connectionId INTEGER,groupName INTEGER,opId INTEGER PRIMARY KEY,relay INTEGER,retry INTEGER,dataType INTEGER,algType INTEGER,count NUMERIC,opType INTEGER);
CREATE TABLE CANN_API (startNs INTEGER,endNs INTEGER,type INTEGER,globalTid INTEGER,connectionId INTEGER PRIMARY KEY,name INTEGER);
CREATE TABLE ENUM_API_TYPE (id INTEGER PRIMARY KEY,name TEXT);
CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER);
CREATE TABLE RANK_DEVICE_MAP (rankId INTEGER, deviceId INTEGER);
"""

OP_TYPES = [
    "MatMulV2",
    "MatMulV3",
    "BatchMatMulV2",
    "Add",
    "Mul",
    "Cast",
    "TransData",
    "ReduceSum",
    "Softmax",
    "LayerNorm",
    "Gelu",
    "FlashAttentionScore",
    "Transpose",
    "Slice",
    "ConcatD",
    "RealDiv",
    "Sub",
    "Exp",
    "Sqrt",
    "Rsqrt",
    "ApplyAdamW",
    "NonZero",
    "Gather",
    "ScatterNd",
]
TASK_TYPES = ["AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU"]
OTHER_TASK_TYPES = ["EVENT_RECORD", "EVENT_WAIT", "MEMCPY_ASYNC", "Notify Wait", "SDMA"]
DTYPES = ["FLOAT16", "FLOAT", "DT_BF16;DT_BF16", "INT64", "FLOAT16;FLOAT16;FLOAT16"]
FORMATS = ["ND", "ND;ND", "NCHW", "FRACTAL_NZ;ND", "NC1HWC0"]
API_TYPES = [(5000, "runtime"), (5500, "hccl"), (10000, "node"), (15000, "model"), (20000, "acl")]


def generate(path: Path, rows: int, seed: int = 7) -> None:
    """A db export with `rows` TASK rows (80% compute), half as many CANN_API rows."""
    rnd = random.Random(seed)
    con = sqlite3.connect(path)
    con.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + SCHEMA)
    strings: dict[str, int] = {}

    def sid(value: str) -> int:
        if value not in strings:
            strings[value] = len(strings)
        return strings[value]

    shapes = [f'"{rnd.randint(1, 64)},{rnd.choice([512, 1024, 4096])};{rnd.randint(1, 8192)}"' for _ in range(3000)]
    names = [f"aclnn{t}_{t}Common_{t}_{k}" for t in OP_TYPES for k in range(200)]
    apis = ["aclnnMatmul", "aclopCompileAndExecute", "launch", "aclrtSynchronizeStream", "aclnnAdd"]
    other_ids = [sid(t) for t in OTHER_TASK_TYPES]
    kernel_id = sid("KERNEL_AICORE")

    def tasks():
        t = BASE_NS
        for g in range(rows):
            t += rnd.randint(1_000, 40_000)
            dur = rnd.randint(500, 30_000)
            device = (g // 2) % 2  # the two tasks of one launch run on one card
            compute = g % 5 != 4
            yield (
                t,
                t + dur,
                device,
                g // 2,
                g,
                3_055_835,
                kernel_id if compute else rnd.choice(other_ids),
                4294967295,
                rnd.randint(0, 8),
                g % 65536,
                4294967295,
            )

    def compute():
        for g in range(rows):
            if g % 5 == 4:
                continue
            op = rnd.randrange(len(OP_TYPES))
            yield (
                sid(names[op * 200 + rnd.randrange(200)]),
                g,
                rnd.choice([1, 8, 20, 40]),
                0,
                sid(rnd.choice(TASK_TYPES)),
                sid(OP_TYPES[op]),
                sid(rnd.choice(FORMATS)),
                sid(rnd.choice(DTYPES)),
                sid(rnd.choice(shapes)),
                sid(rnd.choice(FORMATS)),
                sid(rnd.choice(DTYPES)),
                sid(rnd.choice(shapes)),
                sid("N/A"),
            )

    def cann():
        t = BASE_NS - 50_000
        for c in range(rows // 2):
            t += rnd.randint(2_000, 60_000)
            api = rnd.choice(API_TYPES)[0]
            yield (t, t + rnd.randint(1_000, 20_000), api, 13124711390031316 + c % 4, c, sid(rnd.choice(apis)))

    con.executemany("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)", tasks())
    con.executemany("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", compute())
    con.executemany("INSERT INTO CANN_API VALUES (?,?,?,?,?,?)", cann())
    comm = max(1, rows // 1000)
    con.executemany(
        "INSERT INTO COMMUNICATION_OP VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            (
                sid(f"hcom_allReduce__{512 + k}_0_1"),
                BASE_NS + k * 1_000_000,
                BASE_NS + k * 1_000_000 + 400_000,
                k * 500,
                sid("group"),
                k,
                0,
                0,
                4,
                92,
                4097000,
                sid("hcom_allReduce_"),
            )
            for k in range(comm)
        ),
    )
    con.executemany("INSERT INTO ENUM_API_TYPE VALUES (?,?)", API_TYPES)
    con.executemany(
        "INSERT INTO STEP_TIME VALUES (?,?,?)",
        ((s, BASE_NS + s * 10**9, BASE_NS + (s + 1) * 10**9) for s in range(100)),
    )
    con.executemany("INSERT INTO RANK_DEVICE_MAP VALUES (?,?)", [(0, 0), (1, 1)])
    con.executemany("INSERT INTO STRING_IDS VALUES (?,?)", ((i, v) for v, i in strings.items()))
    con.commit()
    con.close()


# Each snippet reads sys.argv[1] and prints "<seconds> <peak rss bytes> <rows>" last.
PRELUDE = """
import resource, sys, time
def done(t0, df):
    print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, df.height)
import polars as pl
URI = "file:" + sys.argv[1] + "?mode=ro&immutable=1"
TASK = "SELECT startNs, endNs, deviceId, connectionId, globalTaskId, globalPid, taskType, contextId, streamId, taskId, modelId FROM TASK"
COLS = ["startNs", "endNs", "deviceId", "connectionId", "globalTaskId", "globalPid", "taskType", "contextId", "streamId", "taskId", "modelId"]
"""

JOIN_SQL = """
SELECT t.startNs, t.endNs, t.deviceId, t.connectionId, t.streamId, t.taskId, t.modelId,
       n.value AS op_name, o.value AS op_type, k.value AS task_type, c.blockDim,
       s1.value AS input_shapes, s2.value AS output_shapes, d1.value AS input_dtypes,
       d2.value AS output_dtypes, f1.value AS input_formats, f2.value AS output_formats
FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId
LEFT JOIN STRING_IDS n ON n.id = c.name LEFT JOIN STRING_IDS o ON o.id = c.opType
LEFT JOIN STRING_IDS k ON k.id = c.taskType LEFT JOIN STRING_IDS s1 ON s1.id = c.inputShapes
LEFT JOIN STRING_IDS s2 ON s2.id = c.outputShapes LEFT JOIN STRING_IDS d1 ON d1.id = c.inputDataTypes
LEFT JOIN STRING_IDS d2 ON d2.id = c.outputDataTypes LEFT JOIN STRING_IDS f1 ON f1.id = c.inputFormats
LEFT JOIN STRING_IDS f2 ON f2.id = c.outputFormats
"""

ADBC_FRAME = """
import adbc_driver_manager as am, adbc_driver_sqlite
db = adbc_driver_sqlite.connect(URI)
conn = am.AdbcConnection(db)
def frame(sql):
    st = am.AdbcStatement(conn)
    st.set_options(**{"adbc.sqlite.query.batch_rows": "65536"})
    st.set_sql_query(sql)
    stream, _ = st.execute_query()
    try:
        return pl.DataFrame(stream).rechunk()  # Arrow C stream: no pyarrow needed
    finally:
        st.close()
REFS = ["name", "taskType", "opType", "inputShapes", "outputShapes", "inputDataTypes", "outputDataTypes", "inputFormats", "outputFormats"]
def strings(df):
    ids = frame("SELECT id, value FROM STRING_IDS")
    return df.with_columns(pl.col(c).replace_strict(ids["id"], ids["value"], default=None, return_dtype=pl.String) for c in REFS)
"""

SNIPPETS = {
    "sqlite3: fetchall, polars from rows": (
        "",
        """
import sqlite3
t0 = time.perf_counter()
con = sqlite3.connect(URI, uri=True)
rows = con.execute(TASK).fetchall()
df = pl.DataFrame(rows, schema=COLS, orient="row")
del rows; done(t0, df)
""",
    ),
    "sqlite3: fetchall, polars from columns": (
        "",
        """
import sqlite3
t0 = time.perf_counter()
con = sqlite3.connect(URI, uri=True)
rows = con.execute(TASK).fetchall()
df = pl.DataFrame({c: pl.Series(c, v, dtype=pl.Int64) for c, v in zip(COLS, zip(*rows))})
del rows; done(t0, df)
""",
    ),
    "polars read_database (sqlite3 connection)": (
        "",
        """
import sqlite3
t0 = time.perf_counter()
con = sqlite3.connect(URI, uri=True)
df = pl.read_database(TASK, con)
done(t0, df)
""",
    ),
    "connectorx read_sql (polars)": (
        "connectorx",
        """
import connectorx as cx
t0 = time.perf_counter()
df = cx.read_sql("sqlite://" + sys.argv[1], TASK, return_type="polars")
done(t0, df)
""",
    ),
    "polars read_database_uri (connectorx)": (
        "connectorx",
        """
t0 = time.perf_counter()
df = pl.read_database_uri(TASK, "sqlite://" + sys.argv[1], engine="connectorx")
done(t0, df)
""",
    ),
    "adbc-driver-sqlite, Arrow C stream to polars (npuscope)": (
        "adbc_driver_sqlite",
        ADBC_FRAME
        + """
t0 = time.perf_counter()
df = frame(TASK)
done(t0, df)
""",
    ),
    "polars read_database (adbc dbapi connection)": (
        "adbc_driver_sqlite pyarrow",
        """
import adbc_driver_sqlite.dbapi as dbapi
t0 = time.perf_counter()
con = dbapi.connect(URI)
df = pl.read_database(TASK, con)
done(t0, df)
""",
    ),
}

# The compute-tasks frame (TASK + COMPUTE_TASK_INFO + 9 STRING_IDS lookups), two ways.
JOIN_SNIPPETS = {
    "join and 9 STRING_IDS lookups in SQLite (adbc)": (
        "adbc_driver_sqlite",
        ADBC_FRAME
        + """
t0 = time.perf_counter()
df = frame(\"\"\""""
        + JOIN_SQL
        + """\"\"\")
done(t0, df)
""",
    ),
    "join in SQLite, STRING_IDS mapped once in polars (adbc; npuscope)": (
        "adbc_driver_sqlite",
        ADBC_FRAME
        + """
t0 = time.perf_counter()
df = strings(frame("SELECT t.startNs, t.endNs, t.deviceId, t.connectionId, t.streamId, t.taskId, t.modelId, c.name, c.taskType, c.opType, c.blockDim, c.inputShapes, c.outputShapes, c.inputDataTypes, c.outputDataTypes, c.inputFormats, c.outputFormats FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"))
done(t0, df)
""",
    ),
    "both tables read, joined in polars, STRING_IDS once (adbc)": (
        "adbc_driver_sqlite",
        ADBC_FRAME
        + """
t0 = time.perf_counter()
task = frame(TASK)
cti = frame("SELECT name, globalTaskId, blockDim, taskType, opType, inputShapes, outputShapes, inputDataTypes, outputDataTypes, inputFormats, outputFormats FROM COMPUTE_TASK_INFO")
df = strings(task.join(cti, on="globalTaskId", how="inner", maintain_order="left"))
done(t0, df)
""",
    ),
    "join and lookups in SQLite (sqlite3 + polars from rows)": (
        "",
        """
import sqlite3
t0 = time.perf_counter()
con = sqlite3.connect(URI, uri=True)
cur = con.execute(\"\"\""""
        + JOIN_SQL
        + """\"\"\")
cols = [d[0] for d in cur.description]
df = pl.DataFrame(cur.fetchall(), schema=cols, orient="row")
done(t0, df)
""",
    ),
    "npuscope read_db: the whole export (tasks, host API events, steps)": (
        "",
        """
from pathlib import Path
from npuscope.parsers.db import read_db
t0 = time.perf_counter()
exp = read_db(Path(sys.argv[1]))
done(t0, exp.tasks)
""",
    ),
}


def available(modules: str) -> bool:
    for m in modules.split():
        try:
            __import__(m)
        except ImportError:
            return False
    return True


def measure(code: str, db: Path) -> tuple[float, int, int] | str:
    res = subprocess.run([sys.executable, "-c", PRELUDE + code, str(db)], capture_output=True, text=True)
    if res.returncode != 0:
        return (res.stderr.strip().splitlines() or ["failed"])[-1][:120]
    secs, rss, rows = res.stdout.split()[-3:]
    return float(secs), int(rss), int(rows)


def run(snippets: dict, db: Path, repeat: int) -> list[tuple[str, str]]:
    results: dict[str, list] = {name: [] for name in snippets}
    for _ in range(repeat):
        for name, (needs, code) in snippets.items():
            if not available(needs):
                results[name] = f"not installed ({needs})"
                continue
            out = measure(code, db)
            if isinstance(results[name], list):
                results[name].append(out)
    rows = []
    for name, got in results.items():
        if isinstance(got, str):
            rows.append((name, got))
            continue
        errors = [g for g in got if isinstance(g, str)]
        if errors:
            rows.append((name, f"failed: {errors[0]}"))
            continue
        secs = [g[0] for g in got]
        rss = statistics.median(g[1] for g in got) / 2**20
        rows.append(
            (
                name,
                f"{statistics.median(secs):.2f} s | {min(secs):.2f} - {max(secs):.2f} | {rss:,.0f} MB | {got[0][2]:,}",
            )
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000, help="TASK rows (default 2,000,000)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="npuscope-db-bench-") as tmp:
        db = Path(tmp) / "ascend_pytorch_profiler_0.db"
        t0 = time.perf_counter()
        generate(db, args.rows)
        print(
            f"generated {db.stat().st_size / 2**20:,.0f} MB db with {args.rows:,} TASK rows "
            f"in {time.perf_counter() - t0:.1f} s; {args.repeat} round(s), median\n"
        )
        header = "| reader | median | min - max | peak RSS | rows |\n|---|---:|---:|---:|---:|"
        print("Reading TASK (11 INTEGER columns) into a polars frame\n")
        print(header)
        for name, cells in run(SNIPPETS, db, args.repeat):
            print(f"| {name} | {cells} |" if "|" in cells else f"| {name} | {cells} | | | |")
        print("\nThe compute-tasks frame (TASK joined to COMPUTE_TASK_INFO, 9 STRING_IDS lookups)\n")
        print(header)
        for name, cells in run(JOIN_SNIPPETS, db, args.repeat):
            print(f"| {name} | {cells} |" if "|" in cells else f"| {name} | {cells} | | | |")


if __name__ == "__main__":
    main()
