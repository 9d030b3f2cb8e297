"""msprof CSV files (op_summary, kernel_details, op_statistic) to typed polars frames.

Columns are matched by header name through the specs in `columns.py`; every cell is decoded
by polars with an explicit schema (nothing is inferred), then the few quirky columns (start
times, quoted shapes) are fixed with vectorised expressions. A big file is parsed in pieces of
~24 MB cut at line ends, each named by the header: a caller's hook sees the bytes read after
each piece, so a progress bar moves and a cancelled load stops inside one file.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import BinaryIO

import polars as pl

from .columns import NULL_VALUES, START_UNITS, ColumnSpec
from .errors import ProfileError, reading
from .in_order import in_order
from .memory import ensure_fits
from .notes import Note, skipped_rows
from .progress import BytesHook

_TAIL_BYTES = 1 << 16

PIECE_BYTES = 24 << 20
"""A CSV file of at least twice this size is parsed in pieces of about this size (~0.1 s each
for polars on two cores; one piece holds ~75,000 op_summary rows). Below 32 MB on purpose:
glibc serves smaller blocks from its heap once one is freed, so each piece reuses the memory
of the one before; a bigger block is a fresh mapping, zero-filled page by page (reading 670 MB
in 32 MB pieces took 0.40 s of CPU, in 24 or 30 MB pieces 0.09-0.13 s)."""


def read_header(path: Path) -> list[str]:
    """The header row of a CSV file, checked for the bad-input cases the user can hit."""
    with reading(path, "a CSV file"), open(path, "rb") as fh:
        first = fh.readline(1 << 20)
    if not first.strip():
        raise ProfileError(f"{path}: the file is empty; re-export the profile with msprof")
    if first.startswith(b"\xef\xbb\xbf"):
        first = first[3:]
    if b"\r" in first.rstrip(b"\r\n"):
        raise ProfileError(
            f"{path}: lines end with a bare CR (old Mac / spreadsheet line endings); convert "
            "them with `tr '\\r' '\\n'` or export the file again"
        )
    try:
        text = first.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{path}: the header is not UTF-8 text (byte {exc.start}); is this an msprof CSV?") from None
    try:
        return next(csv.reader([text.rstrip("\r\n")]))
    except csv.Error as exc:  # a header cell over the csv module's 128 KiB field limit
        raise ProfileError(f"{path}: the header is not a CSV header ({exc}); is this an msprof CSV?") from None


def _check_body(path: Path, header: list[str]) -> None:
    """Reject header-only files and a last line cut short by an interrupted copy."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        fh.seek(max(0, size - _TAIL_BYTES))
        tail = fh.read()
    lines = tail.splitlines()
    # A header-only file: the header is the last (only) non-empty line.
    body = [ln for ln in lines if ln.strip()]
    if size <= _TAIL_BYTES and len(body) <= 1:
        raise ProfileError(
            f"{path}: has a header but no data rows; the capture recorded nothing: capture a "
            "longer window or check that the job ran on the NPU"
        )
    if tail.endswith(b"\n"):
        return
    last = body[-1].decode("utf-8", "replace")
    try:
        fields = next(csv.reader([last]))
    except csv.Error:
        fields = []
    unterminated_quote = last.count('"') % 2 == 1
    if len(fields) < len(header) or unterminated_quote:
        lineno = _count_lines(path)
        raise ProfileError(
            f"{path}: the last line (line {lineno}) is cut short ({len(fields)} of "
            f"{len(header)} fields); the file was truncated, copy or export it again"
        )


def _count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            n += block.count(b"\n")
    return n + 1


def _utf8_error(path: Path) -> ProfileError:
    offset = 0
    with open(path, "rb") as fh:
        carry = b""
        for block in iter(lambda: fh.read(1 << 20), b""):
            data = carry + block
            try:
                data.decode("utf-8")
                carry = b""
            except UnicodeDecodeError as exc:
                if exc.end < len(data) or len(data) - exc.start > 3:
                    line = _line_at(path, offset - len(carry) + exc.start)
                    return ProfileError(
                        f"{path}: line {line} is not UTF-8 text (byte offset "
                        f"{offset - len(carry) + exc.start}); re-export the file or convert it "
                        "to UTF-8"
                    )
                carry = data[exc.start :]
            offset += len(block)
    return ProfileError(f"{path}: the file is not UTF-8 text; convert it to UTF-8")


def _line_at(path: Path, offset: int) -> int:
    with open(path, "rb") as fh:
        return fh.read(offset).count(b"\n") + 1


_PARSE_ERROR = re.compile(r"could not parse `(.*?)` as dtype `[^`]+` at column '(.*?)'")


def _line_of_value(path: Path, header: list[str], column: str, value: str) -> int | None:
    """The line holding a bad cell: error path only, so a plain scan is fine."""
    try:
        col = header.index(column)
    except ValueError:
        return None
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.reader(fh)
        try:
            for row in reader:
                if len(row) > col and row[col] == value and reader.line_num > 1:
                    return reader.line_num
        except csv.Error:  # a cell over the csv module's field limit: the line stays unknown
            return None
    return None


def match_columns(
    path: Path, header: Sequence[str], specs: Sequence[ColumnSpec], what: str
) -> tuple[dict[str, ColumnSpec], list[str]]:
    """Header name -> spec for known columns, plus the headers no spec knows."""
    by_alias = {alias: spec for spec in specs for alias in spec.aliases}
    matched: dict[str, ColumnSpec] = {}
    extra: list[str] = []
    for name in header:
        spec = by_alias.get(name.strip())
        if spec is not None and spec not in matched.values():
            matched[name] = spec
        else:
            extra.append(name)
    missing = [s for s in specs if s.required and s not in matched.values()]
    if missing:
        expected = ", ".join(" or ".join(s.aliases) for s in missing)
        found = ", ".join(h for h in header[:12]) + (", ..." if len(header) > 12 else "")
        raise ProfileError(f"{path}: not a valid {what}: missing column(s) {expected}; found {found}")
    return matched, extra


def _csv(
    source: Path | io.BytesIO, schema: dict[str, pl.DataType], header: bool = True, columns: Columns = None
) -> pl.DataFrame:
    """The file with every NULL_VALUES cell null (only the `columns` at those positions, when
    given: the others are not parsed at all).

    The reader is given only `N/A` (the one msprof writes; every null value given costs a
    comparison per cell, ~15% of the read for the five): a number column holding another
    one fails to parse and the file is read again with all of them, and text cells holding
    one are made null afterwards, as the reader would have.
    """
    try:
        df = _read_csv(source, schema, [_NA], header, columns)
    except pl.exceptions.ComputeError:
        if isinstance(source, io.BytesIO):
            source.seek(0)
        return _read_csv(source, schema, list(NULL_VALUES), header, columns)
    text = [name for name, dtype in df.schema.items() if dtype == pl.String]
    if not text:
        return df
    others = [v for v in NULL_VALUES if v != _NA]
    found = df.select(pl.col(name).is_in(others).any() for name in text).row(0)
    fix = [name for name, hit in zip(text, found) if hit]
    if not fix:
        return df
    return df.with_columns(pl.when(~pl.col(name).is_in(others)).then(pl.col(name)).alias(name) for name in fix)


_NA = "N/A"

# Positions of the header's columns to parse (ascending), or None for all of them.
Columns = list[int] | None


def _read_csv(
    source: Path | io.BytesIO,
    schema: dict[str, pl.DataType],
    nulls: list[str],
    header: bool = True,
    columns: Columns = None,
) -> pl.DataFrame:
    """The CSV text under its header line, or without one (a piece) named by `schema`.

    Read with `N/A` alone as null value, a text last column keeps its `N/A` cells as text
    (`_na_last` makes them null after the row checks): a null there is then an empty cell or
    one a short row lacks, never the `N/A` msprof writes in every row of some columns."""
    names = list(schema)
    last = names[-1] if names else None
    null_values: list[str] | dict[str, str] = nulls
    if nulls == [_NA] and last is not None and schema[last] == pl.String:
        null_values = {name: _NA for name in names[:-1]}
    return pl.read_csv(
        source,
        has_header=header,
        columns=columns,
        schema_overrides=schema if header else None,
        schema=None if header else schema,
        infer_schema=False,
        null_values=null_values,
        quote_char='"',
        encoding="utf8",
        truncate_ragged_lines=False,
        glob=False,  # a folder named `run[1]` is a name, not a pattern
    )


def _in_pieces(
    path: Path, schema: dict[str, pl.DataType], hook: BytesHook | None, piece_bytes: int, columns: Columns = None
) -> pl.DataFrame:
    """`_csv` of the file, from pieces of ~`piece_bytes` cut after a line end, each parsed
    as those lines under the header; `hook(bytes_read)` runs after each piece.

    A cut lands inside a quoted cell only when that cell holds a line break: the reader then
    refuses the piece (its last cell's quote is never closed, and the next piece's first cell
    holds a quote it did not open), and the file is parsed whole, as a small one always is. A
    file that cannot be parsed (damage) is parsed whole too, so the errors and the row checks
    that follow see what they always saw.
    """
    size = path.stat().st_size
    frames = _pieces(path, schema, hook, piece_bytes, columns) if size >= 2 * piece_bytes else None
    if frames is None:
        frame = _csv(path, schema, columns=columns)
        if hook is not None:
            hook(size)
        return frame
    return pl.concat(frames, how="vertical", rechunk=False)


def _pieces(
    path: Path, schema: dict[str, pl.DataType], hook: BytesHook | None, piece_bytes: int, columns: Columns = None
) -> list[pl.DataFrame] | None:
    """The frames of the file's pieces, in order, or None when the reader refused one.

    Each piece is read once, up to the end of the line `piece_bytes` into it, and parsed
    without a header line, its columns named by `schema` (the header's names, in order): a
    piece parses as the same lines under the header would, except that a first line with
    another number of fields than the header is refused (a schema error), and the file is
    then read whole. Two pieces are parsed at a time (the next one is read meanwhile): one
    piece alone leaves a core idle while its last rows are parsed, which cost ~8% of the read.
    `hook` runs in this thread after each piece, in order; if it raises, the piece still being
    parsed is left to finish on its own.
    """
    frames: list[pl.DataFrame] = []
    size = path.stat().st_size
    parse = partial(_piece, schema=schema, columns=columns)
    with open(path, "rb") as fh:
        fh.readline()  # the header
        for end, frame in in_order(parse, _cuts(fh, size, piece_bytes), at_once=_PIECES_AT_ONCE, name="npuscope-csv"):
            if frame is None:
                return None
            frames.append(frame)
            if hook is not None:
                hook(end)
    return frames


def _cuts(fh: BinaryIO, size: int, piece_bytes: int) -> Iterator[tuple[int, bytes]]:
    """(where it ends, its bytes) of each piece from the file's position on: `piece_bytes`
    and the rest of the line they end in."""
    start = fh.tell()
    while start < size:
        fh.seek(start + piece_bytes)
        fh.readline()
        end = min(fh.tell(), size)
        fh.seek(start)
        yield end, fh.read(end - start)
        start = end


_PIECES_AT_ONCE = 2


def _piece(data: bytes, schema: dict[str, pl.DataType], columns: Columns = None) -> pl.DataFrame | None:
    try:
        return _csv(io.BytesIO(data), schema, header=False, columns=columns)
    except pl.exceptions.PolarsError:
        return None


def _read_one(
    path: Path,
    header: list[str],
    schema: dict[str, pl.DataType],
    rows: RowPolicy,
    tail: list[str],
    hook: BytesHook | None = None,
    piece_bytes: int = PIECE_BYTES,
    columns: Columns = None,
) -> pl.DataFrame:
    return _na_last(_read_checked(path, header, schema, rows, tail, hook, piece_bytes, columns))


def _na_last(df: pl.DataFrame) -> pl.DataFrame:
    """The `N/A` cells of a text last column (read as text: `_read_csv`) made null."""
    last = df.columns[-1] if df.width else None
    if last is None or df.schema[last] != pl.String:
        return df
    return df.with_columns(pl.when(pl.col(last) != _NA).then(pl.col(last)).alias(last))


def _read_checked(
    path: Path,
    header: list[str],
    schema: dict[str, pl.DataType],
    rows: RowPolicy,
    tail: list[str],
    hook: BytesHook | None = None,
    piece_bytes: int = PIECE_BYTES,
    columns: Columns = None,
) -> pl.DataFrame:
    try:
        df = _in_pieces(path, schema, hook, piece_bytes, columns)
    except pl.exceptions.ComputeError as exc:
        # A row with fewer fields shifts its values left: the first symptom is often a
        # text value in a numeric column. Look for such rows before blaming the value.
        short = short_lines(path, len(header))
        if short:
            return _without(path, header, schema, short, rows, columns)
        raise _compute_error(path, header, exc) from None
    if _suspect_short(df, tail) and _fewer_fields(path, df, len(header)):
        short = short_lines(path, len(header))
        if short:
            return _without(path, header, schema, short, rows, columns)
    return df


def _suspect_short(df: pl.DataFrame, tail: list[str]) -> bool:
    """Whether a row may have lost a field: its last cell is empty (or missing: a text last
    column holds `N/A` as text here) while the cells before it (`tail`: the PMU block, else
    the column before the last) are not.

    A legitimate empty last cell comes with its whole block (`N/A` in every PMU column of an
    AI_CPU or communication task); a short row shifts a value into the block. Only then is
    the file's comma count checked (a second pass over the file, ~1 s per 700 MB).
    """
    last = df.columns[-1]
    if df.height == 0 or df[last].null_count() == 0 or not tail:
        return False
    others = pl.any_horizontal([pl.col(c).is_not_null() for c in tail])
    return bool(df.select((pl.col(last).is_null() & others).any()).item())


def _compute_error(path: Path, header: list[str], exc: Exception) -> ProfileError:
    msg = str(exc).splitlines()[0]
    if "utf-8" in msg.lower() or "utf8" in msg.lower():
        return _utf8_error(path)
    bad = _PARSE_ERROR.search(msg)
    if bad:
        value, column = bad.group(1), bad.group(2)
        line = _line_of_value(path, header, column, value)
        where = f" on line {line}" if line else ""
        return ProfileError(
            f"{path}: column {column!r} holds the non-numeric value {value!r}{where}; "
            "the file is damaged or edited: export it again"
        )
    return ProfileError(f"{path}: {msg}; the file does not look like an msprof export: export it again")


def _fewer_fields(path: Path, df: pl.DataFrame, fields: int) -> bool:
    """Whether some row has fewer fields than the header, from comma counts alone.

    polars fills the missing fields of a short row with nulls (only an over-long row is an
    error), so a short row shows up as a null in the last column: legitimate there too
    (`N/A`). Every field separator of the file is either one of the `fields - 1` per line or
    a comma inside a quoted cell, which the parsed text cells still hold: when the counts
    agree no row is short, and the exact line scan is skipped.
    """
    inside = 0
    for name, dtype in df.schema.items():
        if dtype == pl.String:
            inside += int(df[name].str.count_matches(",", literal=True).sum() or 0)
    commas = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 24), b""):
            commas += block.count(b",")
    return commas != (df.height + 1) * (fields - 1) + inside


def short_lines(path: Path, fields: int) -> list[int]:
    """Line numbers (1-based) of data rows with fewer fields than the header."""
    lines = pl.read_csv(
        path,
        has_header=False,
        separator="\x1f",
        quote_char=None,
        new_columns=["line"],
        schema={"line": pl.String},
        truncate_ragged_lines=True,
        encoding="utf8-lossy",
        glob=False,
    )
    counts = lines.with_row_index("no", offset=1).select(
        "no",
        pl.col("line")
        .str.strip_chars_end("\r")
        .str.replace_all('"[^"]*"', "")
        .str.count_matches(",", literal=True)
        .alias("seps"),
        pl.col("line").str.strip_chars().str.len_bytes().alias("width"),
    )
    bad = counts.filter((pl.col("no") > 1) & (pl.col("width") > 0) & (pl.col("seps") < fields - 1))
    return [int(n) for n in bad["no"].to_list()]


@dataclass
class RowPolicy:
    """What to do with damaged rows: skip them with a note (default) or refuse the file."""

    strict: bool = False
    notes: list[Note] = field(default_factory=list)


def _without(
    path: Path,
    header: list[str],
    schema: dict[str, pl.DataType],
    short: list[int],
    rows: RowPolicy,
    columns: Columns = None,
) -> pl.DataFrame:
    shown = ", ".join(str(n) for n in short[:5]) + (", ..." if len(short) > 5 else "")
    if rows.strict:
        raise ProfileError(
            f"{path}: line {short[0]} has fewer fields than the header ({len(short):,} such "
            f"line(s): {shown}); the file is damaged or hand-edited: export it again, or leave "
            "out --strict to skip such rows"
        )
    rows.notes.append(skipped_rows(path, short))
    drop = set(short)
    with open(path, "rb") as fh:
        kept = [line for no, line in enumerate(fh, start=1) if no not in drop]
    try:
        return _csv(io.BytesIO(b"".join(kept)), schema, columns=columns)
    except pl.exceptions.ComputeError as exc:
        raise _compute_error(path, header, exc) from None


def _read_polars(
    paths: Sequence[Path],
    header: list[str],
    schema: dict[str, pl.DataType],
    rows: RowPolicy,
    extra: list[str],
    hook: BytesHook | None = None,
    piece_bytes: int = PIECE_BYTES,
    parsed: set[str] | None = None,
) -> pl.DataFrame:
    """The files' cells as `schema` types: every column, or those named in `parsed` (the last
    column and the few `_tail` gives are always parsed: the check for short rows reads them)."""
    tail = _tail(header, extra, parsed)
    columns = None
    if parsed is not None:
        wanted = parsed | set(tail) | {header[-1]}
        columns = [i for i, name in enumerate(header) if name in wanted]
    frames = []
    before = 0  # bytes of the slices read before this one
    for path in paths:
        this = None if hook is None else partial(_after, hook, before)
        try:
            with reading(path):
                frames.append(_read_one(path, header, schema, rows, tail, this, piece_bytes, columns))
                before += path.stat().st_size
        except pl.exceptions.NoDataError:
            raise ProfileError(f"{path}: the file is empty; re-export the profile with msprof") from None
    return pl.concat(frames, how="vertical", rechunk=False) if len(frames) > 1 else frames[0]


def _tail(header: list[str], extra: list[str], parsed: set[str] | None) -> list[str]:
    """The cells a short row would shift into: the PMU block before the last column, else the
    one column before it.

    When only some columns are parsed (`parsed`), three columns of the block stand for it (its
    first, middle and next-to-last): parsing the whole block would cost what leaving it out
    saves. A short row whose shifted values are null in those three but not elsewhere in the
    block is then not noticed (its row is kept as parsed); within an msprof block, cells are
    null together (AI_CPU and communication tasks) or not at all.
    """
    block = [n for n in extra if n != header[-1]] if header[-1] in extra else []
    if not block:
        return header[-2:-1]
    if parsed is None or len(block) <= 3:
        return block
    return sorted({block[0], block[len(block) // 2], block[-1]}, key=block.index)


def _after(hook: BytesHook, before: int, read: int) -> None:
    hook(before + read)


# Of a table's progress (in bytes of its files) the parse takes this share, the conversions and
# checks after it the rest, step by step: the bar moves while 2M rows are converted and checked
# (~1 s of CPU), and the caller's advance past the table gives the last 5%.
_PARSE_PERCENT = 80


def _scaled(hook: BytesHook, percent: int, read: int) -> None:
    hook(read * percent // 100)


def start_to_ns(col: str, unit_ns: int) -> pl.Expr:
    """Epoch-scale start times to Int64 ns without passing through Float64.

    Cells look like `1717575960208020.758\\t`, `"1717575960208020.758\\t"`, `542118179416190`
    (CANN 5.x, ns) or a spreadsheet's `5.42118E+14`. Each is read as an exact decimal (a
    128-bit integer of units of 10^-scale; an exponent is exact too) and scaled to ns, the
    digits below the nanosecond dropped: the value is `int(Decimal(cell) * unit_ns)` for cells
    of up to 18 digits below the nanosecond (toward minus infinity for a damaged negative
    start). A cell that is no number, or a start beyond the year 2262, gives null.
    """
    digits = len(str(unit_ns)) - 1
    # As many decimals as Decimal(38) leaves room for beside the largest usable start (one
    # integer digit to spare, so a value just beyond the limit is caught below, not lost).
    scale = 38 - (len(str(_MAX_EPOCH_NS // unit_ns)) + 1)
    text = pl.col(col).str.strip_chars("\t\"' \r")
    units = text.cast(pl.Decimal(38, scale), strict=False).to_physical()
    ns = (units // 10 ** (scale - digits)).cast(pl.Int64, strict=False)
    # Whole units up to the limit, with their fraction.
    return pl.when(ns.abs() < _MAX_EPOCH_NS + unit_ns).then(ns)


def times_to_ns(values: pl.Series, unit_ns: int) -> pl.Series:
    """`start_to_ns` for a whole column (one parse per cell; ~0.3 s of CPU for 2M cells)."""
    return values.rename("s").to_frame().select(start_to_ns("s", unit_ns).alias("ns"))["ns"]


# Epoch nanoseconds up to the year 2262 stay exact in Int64; anything beyond is damage
# (an overflowing multiplication would wrap around silently).
_MAX_EPOCH_NS = 9_000_000_000_000_000_000


_CARD_MARKS = "\ufeff\u200b\u200c\u200d\u2060 \t\r\"'"


def _cast(spec: ColumnSpec, src: str) -> pl.Expr:
    col = pl.col(src)
    if spec.kind == "str":
        return col.alias(spec.name)
    if spec.kind == "id":
        # Ids are opaque: 2^64-1 and spreadsheet forms exist, so no integer cast.
        return col.alias(spec.name)
    if spec.kind == "list":
        # Shape cells keep their own quotes after CSV decoding: `"81920,4096;8192,512"`.
        # Stripping copies the column, so only cells that start with a quote are touched.
        return pl.when(col.str.starts_with('"')).then(col.str.strip_chars('"\t ')).otherwise(col).alias(spec.name)
    if spec.kind in ("int", "float"):
        # Read as Float64 (spreadsheets write counts as `4.29E+09`); whole-number columns are
        # cast to Int64 once `_check_numbers` has ruled out inf, nan and out-of-range values.
        return col.cast(pl.Float64).alias(spec.name)
    raise ValueError(spec.kind)


def read_table(
    paths: Sequence[Path],
    specs: Sequence[ColumnSpec],
    *,
    what: str,
    extra_as_float: bool,
    rows: RowPolicy | None = None,
    hook: BytesHook | None = None,
    piece_bytes: int = PIECE_BYTES,
    keep_extra: Callable[[list[str]], list[str]] | None = None,
    skip: Collection[str] = (),
) -> tuple[pl.DataFrame, list[str]]:
    """Read one logical table (slices concatenated in order) into canonical columns.

    Returns the frame and the names of the extra (unknown) headers that were kept as Float64
    (PMU counters) when `extra_as_float` is set; otherwise extra headers are dropped.
    `keep_extra(extra)`, when given, picks the extra headers to keep (stripped names): the
    others are not even parsed (the PMU block is two thirds of a 2M-row op_summary).
    `skip` names canonical columns not to parse: the frame does not have them.
    `hook(bytes)` is called after each piece of ~`piece_bytes` (and once per smaller file)
    with the bytes read over all the slices, scaled to the parse's share of the work, then
    between the conversions and checks that follow (up to 95% of the bytes); whatever it
    raises ends the read.
    """
    header = read_header(paths[0])
    ensure_fits(paths, "csv")
    for path in paths:
        this = read_header(path) if path is not paths[0] else header
        if this != header:
            raise ProfileError(
                f"{path}: its columns differ from {paths[0].name}; slices of one export must share a header"
            )
        _check_body(path, header)
    matched, extra = match_columns(paths[0], header, specs, what)
    wanted = {name: spec for name, spec in matched.items() if spec.name not in skip}
    schema: dict[str, pl.DataType] = {}
    for name in header:
        spec = matched.get(name)
        if spec is None:
            schema[name] = pl.Float64() if extra_as_float else pl.String()
        elif spec.kind in ("int", "float"):
            schema[name] = pl.Float64()
        else:
            schema[name] = pl.String()
    if len(set(header)) != len(header):
        dup = sorted({h for h in header if header.count(h) > 1})
        raise ProfileError(f"{paths[0]}: duplicate column(s) {', '.join(dup)}")
    size = sum(p.stat().st_size for p in paths) if hook is not None else 0

    def step(percent: int) -> None:
        if hook is not None:
            hook(size * percent // 100)

    parse = None if hook is None else partial(_scaled, hook, _PARSE_PERCENT)
    kept_extra = [name for name in extra if name.strip()] if extra_as_float else []
    parsed = None
    if keep_extra is not None or len(wanted) < len(matched):
        chosen = set(keep_extra([name.strip() for name in kept_extra])) if keep_extra is not None else None
        kept_extra = [name for name in kept_extra if chosen is None or name.strip() in chosen]
        parsed = set(wanted) | set(kept_extra)
    matched = wanted
    df = _read_polars(
        paths, header, schema, rows if rows is not None else RowPolicy(), extra, parse, piece_bytes, parsed
    )
    times = {name: spec for name, spec in matched.items() if spec.kind in ("start", "time")}
    exprs = [_cast(spec, name) for name, spec in matched.items() if name not in times]
    exprs += [pl.col(name).alias(name.strip()) for name in kept_extra]
    time_cols = [times_to_ns(df[name], START_UNITS[name.strip()]).alias(spec.name) for name, spec in times.items()]
    step(_PARSE_PERCENT + 5)
    order = [spec.name for spec in matched.values()] + [n.strip() for n in kept_extra]
    df = df.select(exprs).with_columns(time_cols).select(order)
    step(_PARSE_PERCENT + 10)
    start = next((s.name for s in matched.values() if s.kind == "start"), None)
    if start is not None:
        _check_starts(paths, df, start, next(n for n, s in matched.items() if s.kind == "start"))
    _check_numbers(paths, df, matched)
    df = _checked_cards(paths, df, matched)
    step(_PARSE_PERCENT + 15)
    ints = [pl.col(spec.name).cast(pl.Int64) for spec in matched.values() if spec.kind == "int"]
    if ints:
        df = df.with_columns(ints)
    return df, [n.strip() for n in kept_extra]


# Durations, waits and counts beyond this are damage, not measurements (1e15 us is 31 years);
# it also keeps every sum and every conversion to integer nanoseconds inside Int64.
_MAX_NUMBER = 1e15


def _check_numbers(paths: Sequence[Path], df: pl.DataFrame, matched: dict[str, ColumnSpec]) -> None:
    """inf, nan, 1e400 and other absurd values in numeric columns: one line, not a traceback."""
    numbers = {h: s for h, s in matched.items() if s.kind in ("int", "float")}

    def bad(spec: ColumnSpec) -> pl.Expr:
        col = pl.col(spec.name)
        # A required number (Task Duration) must be there; optional ones may be N/A.
        return (~col.is_finite() | (col.abs() > _MAX_NUMBER)).fill_null(spec.required)

    # One pass over every numeric column; the row is looked up only when one is bad.
    flags = df.select(bad(s).any().alias(s.name) for s in numbers.values()).row(0, named=True)
    for header, spec in numbers.items():
        if not flags[spec.name]:
            continue
        row = df.select(bad(spec).arg_max().alias("at"), bad(spec).any().alias("any")).row(0)
        if row[1]:
            value = df[spec.name][row[0]]
            what = "an empty value" if value is None else repr(value)
            raise ProfileError(
                f"{paths[0]}: column {header.strip()!r} holds {what} on data row {row[0] + 1}, "
                "not a usable number; the file is damaged or edited: export it again"
            )


def _checked_cards(paths: Sequence[Path], df: pl.DataFrame, matched: dict[str, ColumnSpec]) -> pl.DataFrame:
    """`df` with its card ids cleaned; one line for a Device_id cell that is empty (while others
    are not) or neither a device number nor `host` (the host rows of api_statistic files).

    Files of several machines concatenated keep each one's BOM at the start of a line: `\ufeff0`
    would be a second card 0 that prints the same. Invisible marks and blanks around a card id
    are never part of it. The few distinct ids are looked at, not the 2M cells (~15 ms)."""
    header = next((h for h, s in matched.items() if s.name == "card"), None)
    if header is None or df["card"].null_count() == df.height:
        return df
    ids = df["card"].unique()
    if any(v is not None and v != v.strip(_CARD_MARKS) for v in ids.to_list()):
        df = df.with_columns(pl.col("card").str.strip_chars(_CARD_MARKS))
        ids = df["card"].unique()
    bad = [v for v in ids.to_list() if v is None or not (_DEVICE_ID.fullmatch(v) or v == "host")]
    if bad:
        at = df.select(pl.col("card").is_in(bad, nulls_equal=True).arg_max()).item()
        value = df["card"][at]
        what = "an empty value" if value is None or value == "" else repr(value)
        raise ProfileError(
            f"{paths[0]}: column {header.strip()!r} holds {what} on data row {at + 1}, not a device "
            "number; the file is damaged or edited: export it again"
        )
    return df


_DEVICE_ID = re.compile(r"[0-9]{1,9}")


def _check_starts(paths: Sequence[Path], df: pl.DataFrame, col: str, header: str) -> None:
    bad = df.select(pl.col(col).is_null().arg_max()).item() if df[col].null_count() else None
    if bad is not None:
        raise ProfileError(
            f"{paths[0]}: column {header!r} has an empty, unreadable or out-of-range start time "
            f"on data row {bad + 1}; the file is damaged, export it again"
        )


def sniff_kind(path: Path) -> str:
    """'tasks', 'statistic', 'steps' or 'unknown' from a CSV file's header alone."""
    try:
        header = {h.strip() for h in read_header(path)}
    except ProfileError:
        return "unknown"
    if header & {"Task Duration(us)", "Duration(us)"} and header & {"OP Type", "Type"}:
        return "tasks"
    if {"Iteration ID", "Iteration End(us)"} <= header:
        return "steps"
    if {"OP Type", "Core Type", "Ratio(%)"} <= header:
        return "statistic"
    return "unknown"
