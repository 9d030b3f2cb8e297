"""What a cluster keeps of one rank beyond its tasks: its figures per step, the kinds of file
its folder holds, and the HCCL groups its communication files show.

`per_step(steps, tasks)`: the means per step of the steps view (one source per figure: a
rank's compute is step_trace's Computing where the file exists, the union of overlapping
kernels, so step = compute + exposed communication + free holds); the bubble from
step_trace's Bubble, else from the rank's P2P receive tasks; the MoE compute from its tasks.

`file_kinds(files)`: the files of a rank folder as kinds ("kernel_details.csv", "db export",
...), so the cluster can say what a rank lacks that the others have.

`comm_groups(folder)`: per HCCL group id of communication_matrix.json (or analysis.db
CommAnalyzerMatrix), the kind of its ops and the ranks its links name: the input of the
parallel layout's inference where no metadata declares it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from .communication import parse_matrix_json, read_analysis_db
from .errors import ProfileError
from .frames import is_communication
from .layout import DB_RE
from .parallel_meta import op_kind

MOE_OP_RE = r"(?i)^(?:grouped_?mat_?mul|moe)"
"""Op types of an MoE layer's expert compute and routing (GroupedMatmul, GroupedMatmulSwiglu,
MoeDistributeDispatch / Combine, MoeInitRouting, MoeFinalizeRouting, MoeGatingTopK...)."""
RECEIVE_RE = r"(?i)hcom_(?:receive|batchsendrecv)"
"""P2P tasks a pipeline stage waits in for its neighbour's activations or gradients."""
MAX_MATRIX_BYTES = 256 << 20


def finite(x: object) -> float:
    """A figure in us to the ns (0 when missing or not finite): sums of the same rows in
    another order (a cached frame's chunks) then give the same figure."""
    return round(float(x), 3) if isinstance(x, (int, float)) and math.isfinite(x) else 0.0


@dataclass(frozen=True)
class PerStep:
    steps: int
    step_us: float | None
    compute_us: float
    communication_us: float
    exposed_comm_us: float
    free_us: float
    wait_us: float | None  # None: the rank has no tasks (training-level files only)
    bubble_us: float | None
    moe_us: float | None


def per_step(steps: pl.DataFrame, tasks: pl.DataFrame) -> PerStep:
    """The rank's figures per step (RankSummary's docstring); totals when it has no steps."""
    comm = is_communication()
    sums = tasks.select(
        pl.col("duration_us").filter(~comm).sum().alias("compute"),
        pl.col("duration_us").filter(comm).sum().alias("communication"),
        pl.col("wait_us").fill_null(0.0).sum().alias("wait"),
        pl.col("duration_us").filter(pl.col("op_name").str.contains(RECEIVE_RE).fill_null(False)).sum().alias("recv"),
        pl.col("duration_us")
        .filter(pl.col("op_type").str.contains(MOE_OP_RE).fill_null(False) & ~comm)
        .sum()
        .alias("moe"),
        pl.col("op_type").str.contains(MOE_OP_RE).fill_null(False).any().alias("has_moe"),
        pl.col("op_name").str.contains(RECEIVE_RE).fill_null(False).any().alias("has_recv"),
    ).row(0, named=True)
    n = steps.height
    div = max(n, 1)
    wait = finite(sums["wait"] / div) if tasks.height else None
    moe = finite(sums["moe"] / div) if sums["has_moe"] else None
    if n == 0:
        return PerStep(
            0,
            None,
            finite(sums["compute"]),
            finite(sums["communication"]),
            0.0,
            0.0,
            wait,
            finite(sums["recv"]) if sums["has_recv"] else None,
            moe,
        )
    parts = pl.col("compute_us").fill_null(0.0) + pl.col("comm_not_overlapped_us").fill_null(0.0)
    each = pl.coalesce(pl.col("step_us"), parts + pl.col("free_us").fill_null(0.0))
    got = steps.select(
        each.mean().alias("step"),
        pl.col("compute_us").fill_null(0.0).mean().alias("compute"),
        pl.col("communication_us").mean().alias("communication"),
        pl.col("comm_not_overlapped_us").fill_null(0.0).mean().alias("exposed"),
        pl.col("free_us").fill_null(0.0).mean().alias("free"),
        pl.col("bubble_us").mean().alias("bubble"),
        pl.col("bubble_us").is_not_null().any().alias("has_bubble"),
        pl.col("communication_us").is_not_null().any().alias("has_comm"),
    ).row(0, named=True)
    if got["has_bubble"]:
        bubble: float | None = finite(got["bubble"])
    else:
        bubble = finite(sums["recv"] / n) if sums["has_recv"] else None
    communication = finite(got["communication"]) if got["has_comm"] else finite(sums["communication"] / n)
    return PerStep(
        n,
        finite(got["step"]),
        finite(got["compute"]),
        communication,
        finite(got["exposed"]),
        finite(got["free"]),
        wait,
        bubble,
        moe,
    )


_FIXED = (
    "step_trace_time.csv",
    "communication.json",
    "communication_matrix.json",
    "analysis.db",
    "profiler_metadata.json",
)
_PREFIXES = (
    ("kernel_details", ".csv", "kernel_details.csv"),
    ("trace_view", ".json", "trace_view.json"),
    ("op_summary", ".csv", "op_summary.csv"),
    ("op_statistic", ".csv", "op_statistic.csv"),
    ("msprof", ".json", "msprof.json"),
)


def file_kinds(files: Sequence[Path]) -> tuple[str, ...]:
    """The kinds of file among `files` that make a rank's figures (sorted)."""
    kinds: set[str] = set()
    for f in files:
        name = f.name
        if name in _FIXED:
            kinds.add(name)
        elif DB_RE.match(name):
            kinds.add("db export")
        elif name.endswith(".paddle_trace.json"):
            kinds.add("paddle trace")
        else:
            for prefix, ext, kind in _PREFIXES:
                if name.startswith(prefix) and name.endswith(ext):
                    kinds.add(kind)
    return tuple(sorted(kinds))


def comm_groups(folder: Path) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
    """(group id, op kind, ranks) per group and kind of op of the rank's communication matrix
    (communication_matrix.json, else analysis.db CommAnalyzerMatrix); () when neither can
    be read (the inference then has nothing of this rank)."""
    output = folder / "ASCEND_PROFILER_OUTPUT"
    matrix: pl.DataFrame | None = None
    for d in (output, folder):
        path = d / "communication_matrix.json"
        try:
            if path.is_file() and os.stat(path).st_size <= MAX_MATRIX_BYTES:
                with open(path, "rb") as fh:
                    matrix = parse_matrix_json(json.loads(fh.read()), path, "")
                break
        except (OSError, ValueError, RecursionError, ProfileError):
            matrix = None
    if matrix is None:
        for d in (output, folder):
            path = d / "analysis.db"
            try:
                if path.is_file():
                    matrix = read_analysis_db(path, "", [])[3]
                    break
            except (OSError, ProfileError):
                matrix = None
    if matrix is None or matrix.height == 0:
        return ()
    rows = matrix.filter(pl.col("group").is_not_null())
    found: dict[tuple[str, str], set[int]] = {}
    for group, entry, src, dst in rows.select("group", "entry", "src", "dst").iter_rows():
        ranks = found.setdefault((str(group), op_kind(entry)), set())
        ranks.update(r for r in (src, dst) if r is not None)
    return tuple(sorted((g, k, tuple(sorted(r))) for (g, k), r in found.items()))


def kinds_missing(own: Sequence[str], every: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """The kinds of file some rank of `every` has and `own` lacks (a db export stands for the
    kernel_details.csv of a text export and the other way round: they hold the same tasks)."""
    held = set(own)
    tasks = {"kernel_details.csv", "db export"}
    seen = {k for kinds in every for k in kinds}
    out = []
    for kind in sorted(seen - held):
        if kind in tasks and held & tasks:
            continue
        out.append(kind)
    return tuple(out)
