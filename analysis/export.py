"""Writing the explorer's current table (CSV and markdown) and op reports to files.

An export must be safe to press at any time: it never writes into the profile folder the
data came from, never replaces an earlier export, and never leaves a half-written file
(each file is written under a temporary name in the target folder, then renamed into place).
Textual-free, so a headless command can export the same way.
"""

from __future__ import annotations

import csv
import errno
import io
import os
import re
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

import polars as pl

from npuscope.parsers import ProfileError
from npuscope.parsers.layout import PROF_RE
from npuscope.text import printable, spreadsheet_cell

EXPORT_DIR_ENV = "NPUSCOPE_EXPORT_DIR"
EXPORT_FOLDER = "npuscope-exports"
MARKDOWN_ROWS = 1000


class ExportError(ProfileError):
    """An export that could not be written; the message says where and why."""

    title = "Cannot write export"


def export_dir(profile_path: Path) -> Path:
    """`$NPUSCOPE_EXPORT_DIR`, else ./npuscope-exports, else ~/npuscope-exports.

    The home folder is used when the working directory is inside the profile folder (a
    single profile file counts as its folder, a folder inside a PROF_* capture as the
    capture), so nothing is written among the user's profile files. The variable is
    obeyed as it is: the user chose it.
    """
    chosen = os.environ.get(EXPORT_DIR_ENV, "").strip()
    if chosen:
        return Path(chosen).expanduser()
    cwd = Path.cwd().resolve()
    root = _profile_folder(Path(profile_path))
    if cwd == root or root in cwd.parents:
        return Path.home() / EXPORT_FOLDER
    return cwd / EXPORT_FOLDER


def _profile_folder(profile_path: Path) -> Path:
    root = profile_path.expanduser().resolve()
    if root.is_file():
        root = root.parent
    captures = [p for p in (root, *root.parents) if PROF_RE.match(p.name)]
    return captures[-1] if captures else root


def export_table(
    frame: pl.DataFrame, columns: Sequence[tuple[str, str]], out_dir: Path, stem: str
) -> tuple[Path, Path]:
    """Write `<stem>.csv` (every row) and `<stem>.md` (the first 1000 rows) into `out_dir`.

    `columns` are (column key, title) pairs, in order; titles are the header. An existing
    `<stem>` makes it `<stem>-2`, `<stem>-3`, ...; both files always share one stem. The
    stem is reduced to letters, digits, `.`, `_` and `-`. Returns (csv path, md path).
    """
    columns = list(columns)
    missing = [key for key, _ in columns if key not in frame.columns]
    if missing:
        raise ValueError(f"cannot export column {missing[0]!r}: the table has no such column")
    # Positional names: two columns may share a key or a title.
    data = frame.select(pl.col(key).alias(f"c{i}") for i, (key, _) in enumerate(columns))
    titles = [title for _, title in columns]
    folder = _ensure_dir(Path(out_dir))
    writers = (lambda f: _write_csv(f, data, titles), lambda f: f.write(_markdown(data, titles).encode()))
    temps: list[Path] = []
    placed: list[Path] = []
    where = folder
    try:
        for write in writers:
            temps.append(_write_temp(folder, write))
        for tmp, target in zip(temps, _free_names(folder, _safe_stem(stem), (".csv", ".md"))):
            where = target
            os.replace(tmp, target)
            placed.append(target)
    except (OSError, pl.exceptions.PolarsError) as exc:
        for path in placed:
            _discard(path)
        raise _error(where, exc) from None
    finally:
        for tmp in temps:
            _discard(tmp)
    return placed[0], placed[1]


def write_text_atomic(path: Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path`, or to `<stem>-2<suffix>`, ... when it exists.

    Never replaces a file; the folder is created. Returns the path actually written.
    """
    path = Path(path)
    folder = _ensure_dir(path.parent)
    tmp: Path | None = None
    try:
        tmp = _write_temp(folder, lambda f: f.write(text.encode("utf-8")))
        (target,) = _free_names(folder, path.stem, (path.suffix,))
        os.replace(tmp, target)
    except OSError as exc:
        raise _error(path, exc) from None
    finally:
        if tmp is not None:
            _discard(tmp)
    return target


def _ensure_dir(folder: Path) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _error(folder, exc, "cannot create the export folder") from None
    if not folder.is_dir():
        raise ExportError(f"{folder}: is not a folder; set {EXPORT_DIR_ENV} to a writable folder")
    return folder


def _write_temp(folder: Path, write: Callable[[BinaryIO], object]) -> Path:
    """A complete, synced file under a hidden temporary name in `folder`."""
    tmp = folder / f".npuscope-{secrets.token_hex(6)}.part"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _discard(tmp)
        raise
    return tmp


def _free_names(folder: Path, stem: str, suffixes: Sequence[str]) -> list[Path]:
    n = 1
    while True:
        name = stem if n == 1 else f"{stem}-{n}"
        paths = [folder / f"{name}{suffix}" for suffix in suffixes]
        if not any(os.path.lexists(p) for p in paths):
            return paths
        n += 1


def _safe_stem(stem: str) -> str:
    return re.sub(r"[^\w.-]+", "_", stem).strip("._-")[:120] or "export"


def _discard(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _error(where: Path, exc: BaseException, what: str = "cannot write the export") -> ExportError:
    why = getattr(exc, "strerror", None) or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    full = getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT)
    fix = "free some space" if full else f"set {EXPORT_DIR_ENV} to a writable folder"
    return ExportError(f"{where}: {what} ({why}); {fix}")


def _write_csv(f: BinaryIO, data: pl.DataFrame, titles: list[str]) -> None:
    header = io.StringIO()
    csv.writer(header, lineterminator="\n").writerow([spreadsheet_cell(t) for t in titles])
    f.write(header.getvalue().encode("utf-8"))
    text = [c for c, t in data.schema.items() if t == pl.String]
    data.with_columns(_cell(pl.col(c)).alias(c) for c in text).write_csv(f, include_header=False)


def _cell(col: pl.Expr) -> pl.Expr:
    """`spreadsheet_cell` for a whole column: control characters but tab and newline shown as `?`, a leading
    `= + - @` made text, so a name from a profile never runs as a spreadsheet formula."""
    clean = col.str.replace_all(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", "?")  # CSV quotes tab and newline
    return pl.when(clean.str.contains(r"^[=+\-@]")).then(pl.lit("'") + clean).otherwise(clean)


def _markdown(data: pl.DataFrame, titles: list[str]) -> str:
    numeric = [dtype.is_numeric() for dtype in data.dtypes]
    lines = [
        "| " + " | ".join(_md_cell(t) for t in titles) + " |",
        "| " + " | ".join("---:" if n else "---" for n in numeric) + " |",
    ]
    for row in data.head(MARKDOWN_ROWS).iter_rows():
        lines.append("| " + " | ".join(_md_cell(v) for v in row) + " |")
    left_out = data.height - MARKDOWN_ROWS
    if left_out > 0:
        lines += ["", f"{left_out:,} more rows left out; the CSV file has all {data.height:,} rows."]
    return "\n".join(lines) + "\n"


def _md_cell(value: object) -> str:
    if value is None:
        return ""
    text = f"{value:,.3f}" if isinstance(value, float) else printable(str(value))
    return " ".join(text.split()).replace("|", "\\|")
