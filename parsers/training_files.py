"""Where the training-level files of a capture are, and reading them without a traceback.

The layout (layout.py) finds the files of the operator views: op_summary, op_statistic,
step_trace, the timeline and the db export. The training-level views (steps, communication,
host API, memory) live beside them: torch_npu's ASCEND_PROFILER_OUTPUT holds
`step_trace_time.csv`, `communication.json`, `communication_matrix.json`, `api_statistic.csv`,
`memory_record.csv`, `operator_memory.csv`, `npu_module_mem.csv` and, with `export_type=db`,
`analysis.db` beside `ascend_pytorch_profiler_<rank>.db`; msprof's mindstudio_profiler_output
holds `api_statistic_<ts>.csv`, `communication_statistic_<ts>.csv`, `npu_module_mem_<ts>.csv`.
A `Place` is one source of the layout with the folders those files are looked for in.

Every read goes through `Reading.attempt`: whatever is wrong with a file (missing keys, wrong
types, NaN, absurd values, truncated JSON, a damaged db) becomes one note naming the file,
and the caller goes on with the next source of the view; only with `strict` is it a one-line
ProfileError.
"""

from __future__ import annotations

import csv
import math
import os
import re
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import orjson
import polars as pl

from ..text import one_line
from .errors import ProfileError
from .layout import Capture, name_tokens

T = TypeVar("T")

TEXT = "text"
DB = "db"
ANALYSIS_DB = "analysis.db"

# Times, sizes and counts beyond this are damage, not measurements (1e15 us is 31 years), as
# the CSV reader rules for op_summary; a negative time or size is damage too.
MAX_NUMBER = 1e15
# Float rounding leaves tiny negatives in differences (Overlapped = Communication - not
# overlapped): those are zero, anything below this is damage.
_NEGATIVE_SLACK = 1e-3


@dataclass(frozen=True)
class Place:
    """One source of the layout: its card label and where its training-level files are."""

    card: str | None  # None: the files say which card each row is (Device_id)
    folders: tuple[Path, ...]
    db: Path | None = None
    analysis_db: Path | None = None
    tasks: tuple[Path, ...] = ()  # the source's op_summary / kernel_details (which card it says)

    def files(self, stem: str, ext: str) -> tuple[Path, ...]:
        """The newest export of `<stem>[_<ids>][_slice_<k>][_<ts>].<ext>` in the folders
        (slices in order; the first folder that has one wins)."""
        for folder in self.folders:
            found = pick(folder, stem, ext)
            if found:
                return found
        return ()

    def file(self, stem: str, ext: str) -> Path | None:
        found = self.files(stem, ext)
        return found[0] if found else None


def pick(folder: Path, stem: str, ext: str) -> tuple[Path, ...]:
    """Files of one kind in `folder`: the newest export per id group, slices in order.

    `communication` does not take `communication_matrix.json`, nor `step_trace` take
    `step_trace_time.csv`: what follows the stem must be ids, a slice or a timestamp.
    """
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return ()
    groups: dict[tuple[str, ...], dict[str, list[tuple[int, Path]]]] = defaultdict(lambda: defaultdict(list))
    suffix = "." + ext
    for entry in entries:
        name = entry.name
        if not (name.startswith(stem) and name.endswith(suffix)):
            continue
        parsed = name_tokens(name[len(stem) : -len(suffix)])
        if parsed is None:
            continue
        try:
            if not entry.is_file():
                continue
        except OSError:
            continue
        ids, slice_k, stamp = parsed
        groups[ids][stamp].append((slice_k, Path(entry.path)))
    out: list[Path] = []
    for ids in sorted(groups, key=lambda k: [int(i) for i in k]):
        by_stamp = groups[ids]
        out.extend(p for _, p in sorted(by_stamp[max(by_stamp)]))
    return tuple(out)


def places(capture: Capture) -> tuple[Place, ...]:
    """A Place per source of the capture, with the folders its files sit in."""
    out = []
    for src in capture.sources:
        folders: list[Path] = []
        for path in (*src.text_files, *((src.db,) if src.db is not None else ()), *src.training):
            if path.parent not in folders:
                folders.append(path.parent)
        if (
            capture.layout == "file"
            and not _is_dir(capture.path)
            and not any(p.parent.name in _EXPORT_FOLDERS for p in src.files)
        ):
            # A single file opened on its own: nothing beside it is part of the request (a
            # folder opened, flat or not, is: its api_statistic.csv beside op_summary.csv).
            folders = []
        analysis = next((f / "analysis.db" for f in folders if _is_file(f / "analysis.db")), None)
        out.append(Place(src.card, tuple(folders), src.db, analysis, src.tasks))
    return tuple(out)


def device_of(paths: tuple[Path, ...]) -> str | None:
    """The `Device_id` of the first data row of a tasks CSV (newer torch_npu kernel_details
    carry one), or None: no such column, no row, not a number, unreadable. Two lines are read."""
    if not paths:
        return None
    try:
        with open(paths[0], newline="", encoding="utf-8", errors="replace") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            row = next(reader, None)
    except (OSError, csv.Error):
        return None
    if not header or not row:
        return None
    names = [h.strip().lstrip("\ufeff") for h in header]
    if "Device_id" not in names:
        return None
    i = names.index("Device_id")
    value = row[i].strip() if i < len(row) else ""
    return value if value.isascii() and value.isdigit() else None


# Folders whose other files belong to the export even when one file of them was opened.
_EXPORT_FOLDERS = ("ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output", "summary", "timeline")


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


# --------------------------------------------------------------------------- reading


def damaged(path: Path, detail: str) -> ProfileError:
    """The one-line error for a file whose content is not what the format says."""
    return ProfileError(f"{path}: {one_line(detail)}; the file is damaged or edited: export it again")


@dataclass
class Reading:
    """Notes of one read of the training views; `strict` turns a bad file into an error."""

    strict: bool = False
    notes: list[str] = field(default_factory=list)
    failed: set[Path] = field(default_factory=set)  # files a read refused (each has its note)

    def note(self, text: str) -> None:
        text = " ".join(text.split())
        if text not in self.notes:
            self.notes.append(text)

    def attempt(self, path: Path, what: str, read: Callable[[], T]) -> T | None:
        """`read()`, or None with a note (a ProfileError with `strict`) when it fails."""
        try:
            return read()
        except ProfileError as exc:
            if self.strict:
                raise
            self.failed.add(path)
            self.note(f"{exc} ({what} not read from it)")
        except (
            sqlite3.Error,
            OSError,
            ValueError,
            TypeError,
            KeyError,
            IndexError,
            ArithmeticError,
            RecursionError,
            MemoryError,
            pl.exceptions.PolarsError,
        ) as exc:
            reason = one_line(" ".join(str(exc).split()))[:200] or type(exc).__name__
            message = f"{path}: cannot be read ({reason}); export it again"
            if self.strict:
                raise ProfileError(message) from None
            self.failed.add(path)
            self.note(f"{message} ({what} not read from it)")
        return None


def load_json_object(path: Path) -> object:
    """A small JSON file (communication.json, communication_matrix.json), parsed."""
    from .memory import ensure_fits
    from .timeline import load_json  # the one-line errors for empty, truncated, non-UTF-8 JSON

    ensure_fits((path,), "json")
    return load_json(path)


def number(value: object, path: Path, where: str, *, required: bool = True) -> float | None:
    """A time, size or bandwidth from a JSON value: finite, not negative, not absurd.

    A missing value is None when not `required`; anything else that is not such a number
    (a bool, text, a list, NaN, 1e400, -5) is damage.
    """
    if value is None:
        if required:
            raise damaged(path, f"{where} is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise damaged(path, f"{where} is {_shown(value)}, not a number")
    try:
        x = float(value)
    except (ValueError, OverflowError):
        raise damaged(path, f"{where} is {_shown(value)}, not a number") from None
    if not math.isfinite(x) or abs(x) > MAX_NUMBER or x < -_NEGATIVE_SLACK:
        raise damaged(path, f"{where} is {_shown(value)}, not a usable number")
    return max(x, 0.0)


def _shown(value: object) -> str:
    try:
        text = orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _bad_number(c: str) -> pl.Expr:
    col = pl.col(c)
    return (~col.is_finite() | (col.abs() > MAX_NUMBER) | (col < -_NEGATIVE_SLACK)).fill_null(False)


def number_clips(frame: pl.DataFrame, columns: Iterable[str], path: Path, what: str) -> list[pl.Expr]:
    """Refuse NaN, inf, absurd and negative values in numeric columns (the first bad column
    and row named); the expressions that clip their tiny negatives, for the caller to apply."""
    cols = [c for c in columns if c in frame.columns]
    if not cols:
        return []
    try:  # one pass over every column; the error names the first bad one, as column by column
        hits = frame.select(_bad_number(c).any().alias(str(i)) for i, c in enumerate(cols)).row(0)
    except pl.exceptions.PolarsError:
        hits = (True,) * len(cols)  # a column that is no number: found (and said) below
    for c, hit in zip(cols, hits):
        if not hit:
            continue
        bad = _bad_number(c)
        at, found = frame.select(bad.arg_max().alias("at"), bad.any().alias("any")).row(0)
        if found:
            raise damaged(path, f"{what}: {c} holds {frame[c][at]!r} on row {at + 1}, not a usable number")
    return [pl.col(c).clip(lower_bound=0.0) for c in cols]


def check_frame_numbers(frame: pl.DataFrame, columns: Iterable[str], path: Path, what: str) -> pl.DataFrame:
    """Refuse NaN, inf, absurd and negative values in numeric columns; clip tiny negatives."""
    clips = number_clips(frame, columns, path, what)
    return frame.with_columns(clips) if clips else frame


def card_key(card: str) -> tuple[int, int | str]:
    return (0, int(card)) if card.isascii() and card.isdigit() else (1, card)


SMALL_ROWS = 4096
"""Up to this many rows a column's distinct values are found in Python: a polars query costs
more on a few rows (a rank of a cluster reads dozens of such frames)."""


def distinct(values: pl.Series) -> list[object]:
    """The distinct values of a column, in order of first appearance."""
    if values.len() <= SMALL_ROWS:
        return list(dict.fromkeys(values.to_list()))
    out: list[object] = values.unique(maintain_order=True).to_list()
    return out


def card_order(cards: pl.Series) -> list[str]:
    """The distinct cards of a column in card order (numbers as numbers, `host` last)."""
    return sorted(distinct(cards), key=card_key)  # type: ignore[arg-type]


def collect(frame: pl.LazyFrame) -> pl.DataFrame:
    """A query run as polars runs an eager operation: in memory, the plan as written. The
    default engine's start-up (streaming, with the optimiser) costs ~0.7 ms a query, more
    than the whole query on the few rows of a view."""
    return frame.collect(engine="in-memory", optimizations=pl.QueryOptFlags.none(simplify_expression=True))


def by_cards(frame: pl.LazyFrame, order: list[str], *by: str, descending: bool = False) -> pl.LazyFrame:
    """`frame` sorted as sort_cards sorts it, `order` holding (at least) its cards in card order."""
    if len(order) <= 1:
        if not by:
            return frame
        return frame.sort(list(by), descending=[descending] * len(by), nulls_last=True, maintain_order=True)
    rank = pl.col("card").replace_strict(order, list(range(len(order))), return_dtype=pl.Int64)
    keys: list[pl.Expr] = [rank, *(pl.col(b) for b in by)]
    desc = [False, *([descending] * len(by))]
    return frame.sort(keys, descending=desc, nulls_last=True, maintain_order=True)


def sort_cards(frame: pl.DataFrame, *by: str, descending: bool = False) -> pl.DataFrame:
    """Rows in card order (numbers as numbers, `host` last), then by `by`."""
    if frame.height == 0:
        return frame
    order = card_order(frame["card"])
    if len(order) <= 1 and not by:
        return frame
    return collect(by_cards(frame.lazy(), order, *by, descending=descending))


def empty(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


def conform(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """`frame` with exactly the schema's columns, in order, typed (missing ones null)."""
    return frame.select(conformed(frame.columns, schema))


def conformed(columns: Iterable[str], schema: dict[str, pl.DataType]) -> list[pl.Expr]:
    """The select of `conform` for a frame of `columns` (a lazy frame's too)."""
    have = set(columns)
    return [(pl.col(c) if c in have else pl.lit(None)).cast(t).alias(c) for c, t in schema.items()]


STEP_LABEL = re.compile(r"^\s*(?:step)?\s*(\d{1,18})\s*$", re.IGNORECASE)


def step_number(label: object) -> int | None:
    """`50`, `step50`, `Step 50` -> 50; anything else (an empty label) -> None."""
    if isinstance(label, bool):
        return None
    if isinstance(label, int):
        return label if 0 <= label < (1 << 62) else None
    if isinstance(label, float):
        return int(label) if label.is_integer() and 0 <= label < 2**62 else None
    if isinstance(label, str):
        m = STEP_LABEL.match(label)
        return int(m.group(1)) if m else None
    return None


_OP_TYPE = re.compile(r"^(?:hcom_?|Hcom)?([A-Za-z][A-Za-z0-9]*?)(?:_+\d*)*(?:_*)$")


def collective_type(name: str | None) -> str | None:
    """The collective of an op name or type: `hcom_allReduce__538_0_1`, `hcom_allReduce_`,
    `HcomAllReduce` -> `allReduce`; other names are kept as they are."""
    if not name:
        return None
    base = name.split("@", 1)[0].strip()
    m = _OP_TYPE.match(base) if base.lower().startswith("hcom") else None
    if m is None:
        return base or None
    word = m.group(1)
    return word[:1].lower() + word[1:]


def op_type_mapping(names: pl.Series) -> dict[str, str | None]:
    """`collective_type` of each distinct name of a column (nulls left out)."""
    return {n: collective_type(n) for n in distinct(names) if isinstance(n, str)}


def normalise_op_types(names: pl.Series) -> pl.Series:
    """`collective_type` over a column, once per distinct value."""
    if names.dtype == pl.String and names.len() <= SMALL_ROWS:
        mapping = op_type_mapping(names)
        return pl.Series(names.name, [None if n is None else mapping[n] for n in names.to_list()], dtype=pl.String)
    distinct_names = names.drop_nulls().unique().to_list()
    mapping = {n: collective_type(n) for n in distinct_names}
    out: pl.Series = names.replace_strict(mapping, default=None, return_dtype=pl.String)
    return out
