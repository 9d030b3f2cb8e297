"""`msprof op` folders (`OPPROF_<timestamp>_<random>/`): the per-kernel profile of an operator
developer's on-board run, read into a small typed result.

Where the format facts come from:

- Folder layouts (Ascend/msopprof `docs/zh/user_guide/msopprof_user_guide.md`, "启动工具"):
  one kernel on one card writes its CSVs straight into `OPPROF_*/` (beside `dump/`, raw data,
  and `visualize_data.bin`, for MindStudio Insight); several kernels write
  `OPPROF_*/<OpName>/<launch>/<Metric>_<timestamp>.csv`; several cards (MC2 / LCCL kernels)
  `OPPROF_*/device<N>/<OpName>/<launch>/...`. `msprof op simulator` writes
  `OPPROF_*/simulator/` (per-core instruction and code-line CSVs, `trace.json`), listed here but
  not read.
- Columns and units (Ascend/msopprof `docs/en/user_guide/msopprof_performance_data.md`):
  `OpBasicInfo.csv` has one row per kernel: `Op Name`, `Op Type` (`vector`, `cube`, `mix`),
  `Task Duration(us)`, `Block Dim`, `Mix Block Dim` (`NA` unless a mix kernel), `Device Id`,
  `Pid`, `Current Freq`, `Rated Freq` (MHz). The other files have one row per sub-block
  (`block_id`, `sub_block_id` = `cube0` / `vector0` / `vector1`...): `aic_*` columns for cube
  cores, `aiv_*` for vector cores, `NA` where a row is of the other kind. `*_ratio` are the
  shares of cycles a pipe was busy (0..1); `*_datas(KB)` amounts moved; `*(GB/s)` bandwidths;
  L2 counts `*_hit` / `*_miss_allocate` (`*_miss` on Ascend 950) with `*_hit_rate(%)`.
  A real set (910B2, CANN 8.5.2) is in `fixtures/samples/msprof_op/` (SOURCES.md there).

How the per-sub-block rows become one kernel's figures (each file in `Kernel.files`):

- pipe ratio of a column: the mean over the rows that have it. On the real sample every
  row's `*_ratio` is its `*_time(us)` over one shared time (7.0 us for all three sub-blocks),
  so the mean is the share of the kernel's time the pipe was busy, averaged over its cores.
  From `PipeUtilization.csv`; a column it lacks is taken from `ArithmeticUtilization.csv`
  (cube, vec) or `Memory.csv` (mte1/2/3), which carry the same values.
- `bound_pipes`: the five pipes of `analysis/bound.py` (cube, vector, memory-in = MTE2,
  memory-out = MTE3 / FixPipe, scalar), each the largest of its columns (the cube and vector
  cores of a mix kernel run side by side); the op report names the busiest one as the bound.
- memory: `*_datas(KB)` summed over the rows (each core moves its own data); `*(GB/s)`
  columns of Memory / MemoryUB / MemoryL0 averaged over the rows that have them; `*(%)`
  bandwidth usage rates: the largest row.
- L2 hit rate: all hits over all requests (hits + misses) of every row, total / read /
  write; this gives back each row's own `*_hit_rate(%)` on the sample. Without counts (Atlas
  inference products: only `aic_l2_cache_hit_rate(%)`), the mean of the rate columns.
- `*_fops` summed; `*_cflt_ratio` (UB bank conflicts) averaged.

Bad input: a missing, empty or damaged `OpBasicInfo.csv` is a ProfileError (one line); a
damaged other file is left out with a note naming it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from .errors import ProfileError, reading

BASIC = "OpBasicInfo"
METRICS = (
    BASIC,
    "PipeUtilization",
    "ArithmeticUtilization",
    "Memory",
    "MemoryL0",
    "MemoryUB",
    "L2Cache",
    "ResourceConflictRatio",
)
"""The summary CSVs `msprof op` writes (--aic-metrics=Default and its parts), without suffix."""
METRIC_FILE_RE = re.compile(r"^(?P<metric>[A-Za-z][A-Za-z0-9]*?)(?:_(?P<stamp>\d+))?\.csv$")
"""`L2Cache.csv` (one kernel) or `L2Cache_20240603022812284.csv` (several kernels)."""
NULLS = ["NA", "N/A", ""]
SKIPPED_DIRS = ("dump", "simulator")
_MAX_DEPTH = 3  # OPPROF/device<N>/<OpName>/<launch>
RATIO_RE = re.compile(r"^(?P<core>aic|aiv)_(?P<unit>[a-z0-9]+)_ratio$")
UNITS = ("cube", "mac", "vec", "scalar", "mte1", "mte2", "mte3", "fixpipe")
"""Pipe units of the `ai*_<unit>_ratio` columns, in display order (others follow)."""
BOUND_PIPES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cube", ("aic_cube_ratio", "aic_mac_ratio")),
    ("vector", ("aiv_vec_ratio", "aic_vec_ratio")),
    ("memory-in", ("aic_mte2_ratio", "aiv_mte2_ratio")),
    ("memory-out", ("aic_mte3_ratio", "aiv_mte3_ratio", "aic_fixpipe_ratio")),
    ("scalar", ("aic_scalar_ratio", "aiv_scalar_ratio")),
)
"""The pipes of analysis/bound.py's PIPES (same names, same order), spelled as msprof op's
columns (`aic_cube_ratio` where op_summary says `aic_mac_ratio`; Atlas inference products
count vector work on the AI core: `aic_vec_ratio`). MTE1 feeds the cube unit: no bound."""
MIX_SUFFIXES = ("_mix_aic", "_mix_aiv")
"""Suffixes of a mix kernel's name in msprof op that op_summary leaves out (the real runs in
fixtures/samples/msprof_op: `main_kernel_mix_aic` there, `main_kernel` in op_summary)."""


@dataclass(frozen=True)
class Figure:
    """One number of a kernel: what it is, its value and unit, and the column it comes from."""

    label: str
    value: float
    unit: str
    source: str  # file and column(s)


@dataclass(frozen=True)
class Kernel:
    """One kernel launch of an msprof op folder, its summary figures."""

    folder: Path
    launch: str  # the kernel's folder inside the OPPROF folder ("" when it is the OPPROF folder)
    op_name: str
    op_type: str
    duration_us: float | None
    block_dim: int | None
    mix_block_dim: int | None
    device: str | None
    current_freq_mhz: float | None
    rated_freq_mhz: float | None
    ratios: tuple[tuple[str, str, float], ...] = ()  # (core aic/aiv, unit, mean ratio 0..1)
    bound_pipes: tuple[tuple[str, float | None], ...] = ()  # BOUND_PIPES names -> ratio
    memory: tuple[Figure, ...] = ()
    bandwidth: tuple[Figure, ...] = ()
    l2: tuple[Figure, ...] = ()  # hit rates (%) and counts
    other: tuple[Figure, ...] = ()  # fops, bank conflicts
    files: tuple[Path, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def base_name(self) -> str:
        """The name without a mix kernel's `_mix_aic` / `_mix_aiv` suffix."""
        for suffix in MIX_SUFFIXES:
            if self.op_name.endswith(suffix) and len(self.op_name) > len(suffix):
                return self.op_name[: -len(suffix)]
        return self.op_name

    def named(self, name: str | None) -> bool:
        """Whether `name` (an op name or op type of a capture's task) is this kernel."""
        return bool(name) and name in (self.op_name, self.base_name)

    def ratio(self, core: str, unit: str) -> float | None:
        return next((v for c, u, v in self.ratios if c == core and u == unit), None)


@dataclass(frozen=True)
class MsprofOp:
    """An OPPROF folder: its kernels, the simulator files (not read) and notes."""

    path: Path
    kernels: tuple[Kernel, ...]
    simulator: tuple[Path, ...] = ()
    notes: tuple[str, ...] = field(default=())


def read_msprof_op(folder: Path) -> MsprofOp:
    """Read every kernel of the OPPROF folder `folder`."""
    folder = Path(folder)
    if not os.access(folder, os.R_OK | os.X_OK):
        raise ProfileError(f"{folder}: permission denied; make the folder readable (chmod +rx)")
    kernels: list[Kernel] = []
    simulator: list[Path] = []
    for kdir in _kernel_dirs(folder, 0, simulator):
        kernels.extend(_read_kernel(folder, kdir))
    notes: list[str] = []
    if simulator:
        notes.append(
            f"msprof op simulator output ({len(simulator)} file(s) under simulator/) is not read: "
            "open visualize_data.bin or trace.json in MindStudio Insight"
        )
    if not kernels and not simulator:
        raise ProfileError(
            f"{folder}: no OpBasicInfo.csv found (an msprof op folder holds OpBasicInfo.csv, "
            "PipeUtilization.csv, ...); was `msprof op` interrupted?"
        )
    return MsprofOp(folder, tuple(kernels), tuple(simulator), tuple(notes))


def _kernel_dirs(folder: Path, depth: int, simulator: list[Path]) -> list[Path]:
    """Folders that hold an OpBasicInfo CSV, at or below `folder` (in name order)."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except PermissionError:
        raise ProfileError(f"{folder}: permission denied; make the folder readable (chmod +rx)") from None
    except OSError:
        return []
    out: list[Path] = []
    if any(_metric_of(e.name) == BASIC and _is_file(e) for e in entries):
        out.append(folder)
    for e in entries:
        if not _is_dir(e):
            continue
        if e.name == "simulator":
            simulator.extend(_files_below(Path(e.path)))
        elif e.name not in SKIPPED_DIRS and depth < _MAX_DEPTH:
            out.extend(_kernel_dirs(Path(e.path), depth + 1, simulator))
    return out


def _files_below(folder: Path, limit: int = 10_000) -> list[Path]:
    out: list[Path] = []
    for root, _dirs, files in os.walk(folder):
        out.extend(Path(root) / f for f in sorted(files))
        if len(out) >= limit:
            break
    return out[:limit]


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _metric_of(name: str) -> str | None:
    m = METRIC_FILE_RE.match(name)
    return m.group("metric") if m and m.group("metric") in METRICS else None


def metric_files(kdir: Path) -> dict[str, Path]:
    """Per metric, its CSV in `kdir` (the newest timestamp when a run left several)."""
    found: dict[str, tuple[str, Path]] = {}
    for e in sorted(os.scandir(kdir), key=lambda e: e.name):
        m = METRIC_FILE_RE.match(e.name)
        if not m or m.group("metric") not in METRICS or not _is_file(e):
            continue
        stamp = m.group("stamp") or ""
        metric = m.group("metric")
        if metric not in found or stamp > found[metric][0]:
            found[metric] = (stamp, Path(e.path))
    return {m: p for m, (_, p) in found.items()}


def _read_csv(path: Path) -> pl.DataFrame:
    """Every cell as text (`NA` / `N/A` / empty: null), the trailing empty column dropped."""
    with reading(path, "a CSV file"):
        if path.stat().st_size == 0:
            raise ProfileError(f"{path}: the file is empty; run `msprof op` again")
        try:
            frame = pl.read_csv(path, infer_schema=False, null_values=NULLS, encoding="utf8-lossy")
        except pl.exceptions.PolarsError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ProfileError(f"{path}: not a readable CSV ({first})") from None
    keep = [c for c in frame.columns if c.strip()]
    if not keep:
        raise ProfileError(f"{path}: no header; run `msprof op` again")
    return frame.select(keep)


def _numbers(frame: pl.DataFrame, path: Path, column: str) -> list[float | None]:
    """A column as floats (null stays None); text, inf or nan is a ProfileError naming the cell."""
    values: list[float | None] = []
    for i, cell in enumerate(frame[column].to_list()):
        if cell is None:
            values.append(None)
            continue
        try:
            v = float(str(cell).strip())
        except ValueError:
            v = math.nan
        if not math.isfinite(v):
            raise ProfileError(f"{path}: column {column!r}, row {i + 1}: {cell!r} is not a number")
        values.append(v)
    return values


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _sum(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _read_kernel(opprof: Path, kdir: Path) -> list[Kernel]:
    files = metric_files(kdir)
    basic_path = files[BASIC]
    basic = _read_csv(basic_path)
    need = ("Op Name", "Task Duration(us)")
    missing = [c for c in need if c not in basic.columns]
    if missing:
        raise ProfileError(
            f"{basic_path}: no {', '.join(repr(c) for c in missing)} column; is this msprof op's OpBasicInfo.csv?"
        )
    if basic.height == 0:
        raise ProfileError(f"{basic_path}: no kernel row; run `msprof op` again")
    notes: list[str] = []
    if basic.height > 1:
        notes.append(f"{basic_path.name}: {basic.height} rows; the first is read")

    def cell(column: str) -> float | None:
        return _numbers(basic, basic_path, column)[0] if column in basic.columns else None

    def text(column: str) -> str | None:
        value = basic[column][0] if column in basic.columns else None
        return None if value is None else str(value).strip()

    device = text("Device Id")
    if device is None:
        device = next(
            (p.name[len("device") :] for p in (kdir, *kdir.parents) if re.fullmatch(r"device\d+", p.name)), None
        )
    block = cell("Block Dim")
    mix = cell("Mix Block Dim")
    tables: dict[str, pl.DataFrame] = {}
    used = [basic_path]
    for metric in METRICS[1:]:
        path = files.get(metric)
        if path is None:
            continue
        try:
            table = _read_csv(path)
            for column in table.columns:
                if column not in ("block_id", "sub_block_id"):
                    _numbers(table, path, column)  # damaged cells: the file is left out
        except ProfileError as exc:
            notes.append(f"{exc} (its figures are left out)")
            continue
        if table.height == 0:
            notes.append(f"{path.name}: no rows (its figures are left out)")
            continue
        tables[metric] = table
        used.append(path)
    ratios = _ratios(tables, files)
    by_column = {f"{core}_{unit}_ratio": v for core, unit, v in ratios}
    bound = tuple(
        (pipe, max((by_column[c] for c in cols if c in by_column), default=None)) for pipe, cols in BOUND_PIPES
    )
    launch = kdir.relative_to(opprof).as_posix() if kdir != opprof else ""
    kernel = Kernel(
        folder=kdir,
        launch=launch,
        op_name=text("Op Name") or "",
        op_type=text("Op Type") or "",
        duration_us=cell("Task Duration(us)"),
        block_dim=None if block is None else int(block),
        mix_block_dim=None if mix is None else int(mix),
        device=device,
        current_freq_mhz=cell("Current Freq"),
        rated_freq_mhz=cell("Rated Freq"),
        ratios=ratios,
        bound_pipes=bound,
        memory=_memory(tables, files),
        bandwidth=_bandwidth(tables, files),
        l2=_l2(tables, files),
        other=_other(tables, files),
        files=tuple(used),
        notes=tuple(notes),
    )
    return [kernel]


def _ratios(tables: Mapping[str, pl.DataFrame], files: Mapping[str, Path]) -> tuple[tuple[str, str, float], ...]:
    """Mean of every `ai*_<unit>_ratio` column: PipeUtilization first, then the files that
    repeat some of its columns (ArithmeticUtilization: cube / vec; Memory: mte1/2/3)."""
    found: dict[tuple[str, str], float] = {}
    for metric in ("PipeUtilization", "ArithmeticUtilization", "Memory"):
        table = tables.get(metric)
        if table is None:
            continue
        for column in table.columns:
            m = RATIO_RE.match(column)
            key = (m.group("core"), m.group("unit")) if m else None
            if key is None or key in found:
                continue
            mean = _mean(_numbers(table, files[metric], column))
            if mean is not None:
                found[key] = mean
    order = {u: i for i, u in enumerate(UNITS)}
    keys = sorted(found, key=lambda k: (order.get(k[1], len(UNITS)), k[1], k[0]))
    return tuple((core, unit, found[(core, unit)]) for core, unit in keys)


MEMORY_LABELS = {
    "read_main_memory_datas(KB)": "main memory (GM) read",
    "write_main_memory_datas(KB)": "main memory (GM) write",
    "GM_to_UB_datas(KB)": "GM -> UB",
    "UB_to_GM_datas(KB)": "UB -> GM",
    "GM_to_L1_datas(KB)": "GM -> L1",
    "L1_to_GM_datas(KB)(estimate)": "L1 -> GM (estimate)",
    "L0C_to_L1_datas(KB)": "L0C -> L1",
    "L0C_to_GM_datas(KB)": "L0C -> GM",
}
"""Memory.csv's data columns (KB moved on each path), named for the report."""


def _memory(tables: Mapping[str, pl.DataFrame], files: Mapping[str, Path]) -> tuple[Figure, ...]:
    table = tables.get("Memory")
    if table is None:
        return ()
    out = []
    for column in table.columns:
        if "_datas(KB)" not in column:
            continue
        total = _sum(_numbers(table, files["Memory"], column))
        if total is not None:
            out.append(Figure(MEMORY_LABELS.get(column, column), total, "KB", f"Memory.csv {column}, sum over cores"))
    return tuple(out)


def _bandwidth(tables: Mapping[str, pl.DataFrame], files: Mapping[str, Path]) -> tuple[Figure, ...]:
    out = []
    for metric in ("Memory", "MemoryUB", "MemoryL0"):
        table = tables.get(metric)
        if table is None:
            continue
        for column in table.columns:
            values = _numbers(table, files[metric], column) if "(GB/s)" in column or "(%)" in column else []
            if "(GB/s)" in column and (mean := _mean(values)) is not None:
                out.append(
                    Figure(column.replace("(GB/s)", ""), mean, "GB/s", f"{metric}.csv {column}, mean over cores")
                )
            elif (
                "usage_rate(%)" in column
                and (top := max((v for v in values if v is not None), default=None)) is not None
            ):
                out.append(Figure(column.replace("(%)", ""), top, "%", f"{metric}.csv {column}, busiest core"))
    return tuple(out)


def _l2(tables: Mapping[str, pl.DataFrame], files: Mapping[str, Path]) -> tuple[Figure, ...]:
    table = tables.get("L2Cache")
    if table is None:
        return ()
    path = files["L2Cache"]

    def total(columns: list[str]) -> float:
        return sum(_sum(_numbers(table, path, c)) or 0.0 for c in columns)

    hits = [c for c in table.columns if c.endswith("_hit")]
    misses = [c for c in table.columns if c.endswith("_miss_allocate") or c.endswith("_miss")]
    if hits and misses:
        out = []
        for label, part in (("total", ""), ("read", "read"), ("write", "write")):
            h = total([c for c in hits if part in c])
            m = total([c for c in misses if part in c])
            if h + m > 0:
                glob = f"*{part}*" if part else "*"
                source = f"L2Cache.csv {glob}_hit / ({glob}_hit + {glob}_miss*), all cores"
                out.append(Figure(f"L2 hit rate ({label})", 100.0 * h / (h + m), "%", source))
        h, m = total(hits), total(misses)
        out.append(Figure("L2 requests", h + m, "requests", "L2Cache.csv *_hit + *_miss*, all cores"))
        return tuple(out)
    rates = [c for c in table.columns if c.endswith("hit_rate(%)") and ("total" in c or "l2_cache" in c)]
    values = [v for c in rates for v in _numbers(table, path, c)]
    mean = _mean(values)
    return () if mean is None else (Figure("L2 hit rate (total)", mean, "%", f"L2Cache.csv {', '.join(rates)}, mean"),)


def _other(tables: Mapping[str, pl.DataFrame], files: Mapping[str, Path]) -> tuple[Figure, ...]:
    out = []
    arith = tables.get("ArithmeticUtilization")
    if arith is not None:
        for column in (c for c in arith.columns if c.endswith("_fops")):
            total = _sum(_numbers(arith, files["ArithmeticUtilization"], column))
            if total is not None:
                out.append(Figure(column, total, "ops", f"ArithmeticUtilization.csv {column}, sum over cores"))
    conflicts = tables.get("ResourceConflictRatio")
    if conflicts is not None:
        for column in (c for c in conflicts.columns if c.endswith("_cflt_ratio")):
            mean = _mean(_numbers(conflicts, files["ResourceConflictRatio"], column))
            if mean is not None:
                out.append(Figure(column, mean, "ratio", f"ResourceConflictRatio.csv {column}, mean over cores"))
    return tuple(out)
