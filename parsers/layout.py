"""Where the files are: captures, cards and the file set of each, for every export layout.

Names and folder structure decide (no file is parsed), so discovery of a folder with GBs of
exports is instant. See FORMATS.md section 1 for the layouts. Two exceptions, both bounded:
when no name matches anything, the `*.json` / `*.csv` files of the folder given are
recognised by the first 64 KB of their content (`sniff_trace`, `sniff_csv`; the largest
`MAX_SNIFFED` of them: a capture found by name is never joined by stray files), and a
single trace JSON's first 64 KB tell a torch_npu timeline from an msprof one. `msprof op`
folders (`OPPROF_*`, parsers/msprof_op.py) are found by name too and attached to the
captures beside them (`Capture.msprof_op`); alone they raise `MsprofOpOnly`.
"""

from __future__ import annotations

import csv
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from .csv_table import sniff_kind
from .errors import ProfileError

PROF_RE = re.compile(r"^PROF_\d{6}_(\d{17})_\w+$")
DEVICE_RE = re.compile(r"^device_(\d+)$")
# <kind>[_<ids>][_slice_<k>][_<YYYYmmddHHMMSS>].<ext>, e.g. op_summary_slice_0_20240605100000.csv,
# op_summary_0_1_1_20230905213000.csv, msprof_0_2_1.json, kernel_details.csv.
FILE_RE = re.compile(
    r"^(?P<kind>op_summary|op_statistic|step_trace|msprof|kernel_details|trace_view)"
    r"(?P<rest>(?:_[0-9A-Za-z]+)*)\.(?P<ext>csv|json)$"
)
KIND_OF = {
    "op_summary": "tasks",
    "kernel_details": "tasks",
    "op_statistic": "statistic",
    "step_trace": "steps",
    "msprof": "timeline",
    "trace_view": "timeline",
}
# msprof `--type=db` (and beside the text export from CANN 8.x), torch_npu `export_type=db`.
# MindSpore writes ascend_mindspore_profiler_<rank>.db; some torch_npu versions leave out the rank.
DB_RE = re.compile(r"^(?:msprof_(\d+)|(?:ascend_pytorch|ascend_mindspore)_profiler(?:_(\d+))?)\.db$")
PADDLE_SUFFIX = ".paddle_trace.json"
TORCH_DIR_RE = re.compile(r"_ascend_(pt|ms)$")
_MAX_DEPTH = 4
# `msprof op` writes OPPROF_<timestamp>_<random>/ (Ascend/msopprof docs, msopprof_user_guide.md);
# a folder holding OpBasicInfo.csv is one too whatever its name (real copies are renamed).
OPPROF_PREFIX = "OPPROF_"
OPBASIC_RE = re.compile(r"^OpBasicInfo(?:_\d+)?\.csv$")
SNIFF_BYTES = 64 << 10
"""How much of a file no name matches is read to tell what it is."""
MAX_SNIFFED = 16
"""At most this many such files of the folder given are read (the largest first: profile
files are big, and a folder of thousands of small unrelated files stays instant)."""
_TRACE_MARKERS = (
    '"Ascend Hardware"',
    '"CANN"',
    '"Overlap Analysis"',
    '"AscendCL@',
    '"HostToDevice',
    '"Physic Stream Id"',
    '"Task Type"',
)
"""Strings of msprof / torch_npu timelines (FORMATS.md section 4): their process names, host
API names, flows and device task args."""
_TORCH_MARKERS = ('"cpu_op"', '"torch_to_npu"', '"async_npu"')
"""Event categories only torch_npu's trace_view.json has (its framework-side events, which
open the file), beside the process name `Python` (sample: fixtures/samples/torch_npu_ascend_pt)."""
_STRING_TS = re.compile(r'"ts"\s*:\s*"\d')
_PYTHON_PROCESS = re.compile(r'"name"\s*:\s*"process_name"[^{}]*"args"\s*:\s*\{\s*"name"\s*:\s*"Python"')

Layout = Literal["era_b", "era_a", "torch_npu", "mindspore", "paddle", "file"]


@dataclass(frozen=True)
class Source:
    """The files of one card (or of all cards, for a merged Era B export)."""

    card: str | None  # None: the files say which card each row is (Device_id, NPU labels)
    tasks: tuple[Path, ...] = ()
    statistic: tuple[Path, ...] = ()
    timeline: tuple[Path, ...] = ()
    steps: tuple[Path, ...] = ()
    db: Path | None = None  # the SQLite export of the same data, when there is one
    # A torch_npu / MindSpore rank without tasks (no kernel_details, no db export): the
    # training-level files it holds (step_trace_time.csv, communication*.json, analysis.db,
    # profiler_metadata.json). It is a rank of its cluster; the profile reads no tasks from it.
    training: tuple[Path, ...] = ()

    @property
    def text_files(self) -> tuple[Path, ...]:
        return self.tasks + self.statistic + self.steps + self.timeline

    @property
    def files(self) -> tuple[Path, ...]:
        return self.text_files + ((self.db,) if self.db is not None else ()) + self.training


@dataclass(frozen=True)
class Capture:
    name: str
    path: Path
    layout: Layout
    sources: tuple[Source, ...]
    stamp: str = ""  # sortable capture time, newest first
    notes: tuple[str, ...] = field(default=())
    msprof_op: tuple[Path, ...] = ()  # `msprof op` folders found beside it (parsers/msprof_op.py)

    @property
    def files(self) -> tuple[Path, ...]:
        return tuple(p for s in self.sources for p in s.files)


class MsprofOpOnly(ProfileError):
    """The path holds `msprof op` folders and no capture: `report` / `inspect` read them
    (parsers/msprof_op.py); the explorer says so in one line."""

    title = "An msprof op folder"

    def __init__(self, root: Path, folders: tuple[Path, ...]) -> None:
        names = ", ".join(f.name for f in folders[:3]) + (", ..." if len(folders) > 3 else "")
        super().__init__(
            f"{root}: an msprof op folder ({names}: the per-kernel profile of `msprof op`), not a "
            f"training capture; `npuscope report {root}` prints its op report, `npuscope inspect "
            f"{root}` what it holds"
        )
        self.root = root
        self.folders = folders


def is_msprof_op_folder(folder: Path) -> bool:
    """An `msprof op` output folder: named OPPROF_*, or holding an OpBasicInfo CSV."""
    if folder.name.startswith(OPPROF_PREFIX):
        return True
    try:
        return any(OPBASIC_RE.match(e.name) and _entry_is_file(e) for e in os.scandir(folder))
    except OSError:
        return False


def msprof_op_alone(path: str | os.PathLike[str]) -> tuple[Path, ...]:
    """The msprof op folders at `path` when it holds nothing else (a capture of their own
    kind), else (): then `discover` gives the captures, with these folders attached."""
    try:
        discover(path)
    except MsprofOpOnly as only:
        return only.folders
    except ProfileError:
        return ()
    return ()


def _read_prefix(path: Path, size: int = SNIFF_BYTES) -> bytes:
    """The first `size` bytes of a file (b"" when it cannot be read): what content sniffing
    looks at; the one place it opens files (tests count the calls)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError:
        return b""


def sniff_trace(prefix: bytes) -> Literal["torch_npu", "msprof", "paddle"] | None:
    """What a JSON file's first bytes say it is: a torch_npu trace_view (its `cpu_op` /
    `torch_to_npu` / `async_npu` events with string `ts`, or a `Python` process), an msprof
    timeline (an Ascend process name, host API or device task arg: `_TRACE_MARKERS`), Paddle's
    trace (an object with `traceEvents` and `span_index` / `ProfileStep#`), or None. Every one
    is a Chrome trace: `ph` and `ts` keys."""
    text = prefix.decode("utf-8", "ignore").lstrip("\ufeff \t\r\n")
    if not text.startswith(("[", "{")) or '"ph"' not in text or '"ts"' not in text:
        return None
    if text.startswith("{") and '"traceEvents"' in text and ('"span_index"' in text or "ProfileStep#" in text):
        return "paddle"
    if _PYTHON_PROCESS.search(text) or (any(m in text for m in _TORCH_MARKERS) and _STRING_TS.search(text)):
        return "torch_npu"
    if any(m in text for m in _TRACE_MARKERS):
        return "msprof"
    return None


def sniff_csv(prefix: bytes) -> Literal["tasks", "statistic"] | None:
    """What a CSV file's first line says it is: an op_summary / kernel_details header
    (`Task Duration(us)` or `Duration(us)` with `OP Type` or `Type`) or an op_statistic one
    (`OP Type`, `Core Type`, `Ratio(%)`); the rules of csv_table.sniff_kind, on a prefix."""
    end = prefix.find(b"\n")
    if end < 0:
        return None
    line = prefix[:end].rstrip(b"\r")
    if line.startswith(b"\xef\xbb\xbf"):
        line = line[3:]
    try:
        header = {h.strip() for h in next(csv.reader([line.decode("utf-8")]), [])}
    except (UnicodeDecodeError, csv.Error):
        return None
    if header & {"Task Duration(us)", "Duration(us)"} and header & {"OP Type", "Type"}:
        return "tasks"
    if {"OP Type", "Core Type", "Ratio(%)"} <= header:
        return "statistic"
    return None


def _named(name: str) -> bool:
    """Whether discovery takes a file by its name alone."""
    return _parse_name(name) is not None or bool(DB_RE.match(name)) or name.endswith(PADDLE_SUFFIX)


def _sniff_folder(entries: list[os.DirEntry[str]], found: dict[str, list[Any]]) -> None:
    """Profile files of the folder given that no name matches, by their content (bounded)."""
    candidates = []
    for entry in entries:
        lower = entry.name.lower()
        if entry.name.startswith(".") or not lower.endswith((".json", ".csv")) or _named(entry.name):
            continue
        if OPBASIC_RE.match(entry.name) or not _entry_is_file(entry):
            continue
        try:
            size = entry.stat().st_size
        except OSError:
            continue
        if size > 0:
            candidates.append((size, entry.name, Path(entry.path)))
    candidates.sort(key=lambda c: (-c[0], c[1]))
    for _, name, path in candidates[:MAX_SNIFFED]:
        prefix = _read_prefix(path)
        kind = sniff_trace(prefix) if name.lower().endswith(".json") else sniff_csv(prefix)
        if kind is not None:
            found["sniffed"].append((path, kind))
    found["unsniffed"].extend(p for _, _, p in candidates[MAX_SNIFFED:])


def _is_dir(path: Path) -> bool:
    """`Path.is_dir` that treats an unreadable parent as 'no' (it raises before Python 3.13)."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def _readable(folder: Path) -> bool:
    return os.access(folder, os.R_OK | os.X_OK)


def _denied(folder: Path) -> ProfileError:
    return ProfileError(f"{folder}: permission denied; make the folder readable (chmod +rx)")


def _parse_name(name: str) -> tuple[str, tuple[str, ...], int, str] | None:
    """(kind, ids, slice index, timestamp) of an export file name, or None."""
    m = FILE_RE.match(name)
    if not m:
        return None
    kind = m.group("kind")
    if (m.group("ext") == "json") != (KIND_OF[kind] == "timeline"):
        return None
    parsed = name_tokens(m.group("rest"))
    if parsed is None:
        return None
    ids, slice_k, stamp = parsed
    return KIND_OF[kind], ids, slice_k, stamp


def name_tokens(rest: str) -> tuple[tuple[str, ...], int, str] | None:
    """(ids, slice index, stamp) of what follows the stem in an export file name, or None.

    `_0_1_slice_2_20240605100000` -> (("0", "1"), 2, "20240605100000"). Digits are ASCII
    digits only (`²` is a digit to `str.isdigit`, not to `int`).
    """
    if rest and not rest.startswith("_"):
        return None
    tokens = [t for t in rest.split("_") if t]
    ids: list[str] = []
    slice_k, stamp, i = 0, "", 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "slice" and i + 1 < len(tokens) and _ascii_digits(tokens[i + 1]):
            slice_k = int(tokens[i + 1])
            i += 2
            continue
        if len(tok) == 14 and _ascii_digits(tok):
            stamp = tok
        elif _ascii_digits(tok):
            ids.append(tok)
        else:
            return None
        i += 1
    return tuple(ids), slice_k, stamp


def _ascii_digits(token: str) -> bool:
    return token.isascii() and token.isdigit()


def pick_files(folder: Path) -> dict[str, tuple[Path, ...]]:
    """Per kind, the files to read in order: newest export per stem, slices in order.

    Stems that differ by ids (Era A model/iteration files) are all kept, in id order.
    """
    groups: dict[tuple[str, tuple[str, ...]], dict[str, list[tuple[int, Path]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    try:
        entries = list(os.scandir(folder))
    except PermissionError:
        raise _denied(folder) from None
    for entry in entries:
        if not _entry_is_file(entry):
            continue
        parsed = _parse_name(entry.name)
        if parsed is None:
            continue
        kind, ids, slice_k, stamp = parsed
        groups[(kind, ids)][stamp].append((slice_k, Path(entry.path)))
    out: dict[str, list[Path]] = defaultdict(list)
    for kind, ids in sorted(groups, key=lambda k: (k[0], [int(i) for i in k[1]])):
        by_stamp = groups[(kind, ids)]
        newest = max(by_stamp)
        out[kind].extend(p for _, p in sorted(by_stamp[newest]))
    return {k: tuple(v) for k, v in out.items()}


def _number_in(pattern: re.Pattern[str], name: str) -> int:
    """The number a name that `pattern` matched carries in its groups (-1: none)."""
    m = pattern.match(name)
    assert m is not None, name
    number = next((g for g in m.groups() if g), None)
    return int(number) if number is not None else -1


def _entry_is_file(entry: os.DirEntry[str]) -> bool:
    """`is_file` that says no for a symlink loop or a vanished target (it raises)."""
    try:
        return entry.is_file()
    except OSError:
        return False


def pick_db(folder: Path) -> Path | None:
    """The db export in `folder`: the newest `msprof_<ts>.db` (re-exports leave several)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    names = [e.name for e in entries if DB_RE.match(e.name) and _entry_is_file(e)]
    if not names:
        return None
    return folder / max(names, key=lambda n: _number_in(DB_RE, n))


def _real(path: Path) -> str:
    try:
        return os.path.realpath(path)
    except OSError:
        return str(path)


def _source(card: str | None, *folders: Path) -> Source | None:
    found: dict[str, tuple[Path, ...]] = {}
    db = None
    seen: set[str] = set()  # real paths and names already taken: each file is read once
    for folder in folders:
        if _is_dir(folder):
            for kind, paths in pick_files(folder).items():
                # A copy of op_summary in device_0/ beside summary/, or `timeline` as a symlink
                # to `summary`: the first folder's file wins.
                fresh = tuple(p for p in paths if _real(p) not in seen and p.name not in seen)
                seen.update(_real(p) for p in fresh)
                seen.update(p.name for p in fresh)
                found[kind] = found.get(kind, ()) + fresh
            db = db or pick_db(folder)
    if not found and db is None:
        return None
    return Source(
        card=card,
        tasks=found.get("tasks", ()),
        statistic=found.get("statistic", ()),
        timeline=found.get("timeline", ()),
        steps=found.get("steps", ()),
        db=db,
    )


def _device_source(device_dir: Path) -> Source | None:
    m = DEVICE_RE.match(device_dir.name)
    card = m.group(1) if m else "0"
    return _source(card, device_dir / "summary", device_dir / "timeline", device_dir)


def _prof_capture(prof: Path) -> Capture | None:
    if not _readable(prof):
        raise _denied(prof)
    m = PROF_RE.match(prof.name)
    stamp = m.group(1) if m else ""
    merged = prof / "mindstudio_profiler_output"
    if _is_dir(merged) and not _readable(merged):
        raise _denied(merged)
    # CANN 8.x writes msprof_<ts>.db in the PROF folder, beside mindstudio_profiler_output.
    src = _source(None, merged, prof) if _is_dir(merged) else _source(None, prof)
    if src is not None and src.text_files:
        return Capture(prof.name, prof, "era_b", (src,), stamp)
    devices = sorted(
        (d for d in _subdirs(prof) if DEVICE_RE.match(d.name)),
        key=lambda d: _number_in(DEVICE_RE, d.name),
    )
    sources = tuple(s for s in (_device_source(d) for d in devices) if s is not None)
    if sources:
        return Capture(prof.name, prof, "era_a", sources, stamp)
    if src is not None:  # a db export beside raw device_N/data folders
        return Capture(prof.name, prof, "era_b", (src,), stamp)
    return None


def _torch_card(pt_dir: Path, index: int) -> str:
    """The rank, from `profiler_info_<rank>.json` beside the output (any folder name)."""
    folders = [pt_dir]
    if pt_dir.name == "ASCEND_PROFILER_OUTPUT":
        folders.append(pt_dir.parent)  # test_rank_1/ASCEND_PROFILER_OUTPUT
    for folder in folders:
        for f in sorted(folder.glob("profiler_info_*.json")):
            rank = f.stem.rsplit("_", 1)[-1]
            if rank.isdigit():
                return rank
    return str(index)


TRAINING_FILES = (
    "step_trace_time.csv",
    "communication.json",
    "communication_matrix.json",
    "analysis.db",
    "profiler_metadata.json",
)
"""The training-level files that make a torch_npu folder without tasks a rank (FORMATS.md 5c:
real clusters hold ranks with these files only)."""


def _training_source(card: str, pt: Path, out: Path) -> Source | None:
    """A rank that holds only training-level files: step_trace_time.csv, communication*.json or
    analysis.db in its output folder (profiler_metadata.json alone is not a capture)."""
    found = [d / name for d in (out, pt) for name in TRAINING_FILES if _is_file(d / name)]
    if not any(p.name != "profiler_metadata.json" for p in found):
        return None
    return Source(card=card, training=tuple(dict.fromkeys(found)))


def _torch_capture(pt_dirs: list[Path], root: Path) -> Capture | None:
    sources = []
    layout: Layout = "torch_npu"
    for i, pt in enumerate(sorted(pt_dirs)):
        if pt.name.endswith("_ascend_ms"):
            layout = "mindspore"
        out = pt / "ASCEND_PROFILER_OUTPUT" if pt.name != "ASCEND_PROFILER_OUTPUT" else pt
        if not _readable(pt) or (_is_dir(out) and not _readable(out)):
            raise _denied(out if _readable(pt) else pt)
        src = _source(_torch_card(pt, i), out) or _training_source(_torch_card(pt, i), pt, out)
        if src is not None:
            sources.append(src)
    if not sources:
        return None
    cards = [s.card for s in sources]
    if len(set(cards)) != len(cards):  # ranks unknown or clashing: number them in order
        sources = [replace(s, card=str(i)) for i, s in enumerate(sources)]
    stamp = max((str(int(p.stat().st_mtime)) for p in pt_dirs), default="")
    return Capture(root.name, root, layout, tuple(sources), stamp)


def _paddle_capture(traces: list[Path], root: Path) -> Capture:
    traces = sorted(traces)
    base = root if root.is_dir() else root.parent
    folders = [t.parent.relative_to(base).as_posix() if t.parent.is_relative_to(base) else "" for t in traces]
    folders = ["" if f == "." else f for f in folders]
    if len(set(folders)) == len(traces) and all(folders):
        # One trace per folder (`npuscope capture`: host/rank_N): name cards by where they ran.
        cards = [f.replace("rank_", "") for f in folders]
    else:
        cards = [str(i) for i in range(len(traces))]
    sources = tuple(Source(c, timeline=(t,)) for c, t in zip(cards, traces))
    stamp = max(t.name for t in traces)
    return Capture(root.name, root, "paddle", sources, stamp)


def _subdirs(folder: Path) -> list[Path]:
    try:
        return sorted(Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False))
    except PermissionError:
        raise _denied(folder) from None
    except OSError:
        return []


def _file_capture(path: Path, sniffed: str | None = None) -> Capture:
    """The capture of one file; `sniffed`: what its content was already found to be."""
    name = path.name
    if name.endswith(PADDLE_SUFFIX):
        return _paddle_capture([path], path)
    if OPBASIC_RE.match(name):
        raise MsprofOpOnly(path.parent, (path.parent,))
    if path.suffix == ".json":
        # A torch_npu trace_view (renamed or not) says so in its first events (sniff_trace).
        kind = sniffed if sniffed is not None else sniff_trace(_read_prefix(path))
        layout: Layout = "torch_npu" if kind == "torch_npu" else "file"
        return Capture(name, path, layout, (Source(None, timeline=(path,)),), name)
    if path.suffix == ".db":
        return Capture(name, path, "file", (Source(None, db=path),), name)
    if path.suffix.lower() == ".csv":
        kind = sniff_kind(path)
        if kind == "unknown":
            parsed = _parse_name(name)
            kind = parsed[0] if parsed else "unknown"
        if kind == "tasks":
            return Capture(name, path, "file", (Source(_card_from_path(path), tasks=(path,)),), name)
        if kind == "statistic":
            return Capture(name, path, "file", (Source(_card_from_path(path), statistic=(path,)),), name)
        # Let the reader say what is wrong with the header.
        return Capture(name, path, "file", (Source(_card_from_path(path), tasks=(path,)),), name)
    if path.suffix == ".toml":
        raise ProfileError(
            f"{path}: a nodes file (ranks on other machines) opens with `npuscope report` or the explorer; "
            "this command reads profiles on this machine"
        )
    raise ProfileError(
        f"{path}: not a profile file; expected an op_summary / op_statistic / kernel_details "
        "CSV, an msprof / trace_view JSON, an msprof_*.db / ascend_pytorch_profiler_*.db or a "
        "*.paddle_trace.json"
    )


def _card_from_path(path: Path) -> str | None:
    for parent in path.parents:
        m = DEVICE_RE.match(parent.name)
        if m:
            return m.group(1)
    return None


def _scan(folder: Path, depth: int, found: dict[str, list[Any]]) -> None:
    """Collect PROF folders, torch_npu outputs, export folders and Paddle traces below."""
    name = folder.name
    if depth > 0 and not _readable(folder) and not PROF_RE.match(name):
        # An unrelated unreadable folder (lost+found) must not hide the captures beside it.
        found["unreadable"].append(folder)
        return
    if PROF_RE.match(name) or _is_dir(folder / "mindstudio_profiler_output"):
        cap = _prof_capture(folder)
        if cap is not None:
            found["prof"].append(cap)
        else:
            found["raw"].append(folder)
        return
    if TORCH_DIR_RE.search(name) or name == "ASCEND_PROFILER_OUTPUT":
        found["torch"].append(folder)
        return
    if name.startswith(OPPROF_PREFIX):
        found["msprof_op"].append(folder)
        return
    if DEVICE_RE.match(name):
        src = _device_source(folder)
        if src is not None:
            found["device"].append((folder, src))
        return
    if name == "mindstudio_profiler_output":
        src = _source(None, folder)
        if src is not None:
            found["merged"].append((folder, src))
        return
    try:
        entries = list(os.scandir(folder))
    except PermissionError:
        raise _denied(folder) from None
    except OSError:
        return
    if any(OPBASIC_RE.match(e.name) and _entry_is_file(e) for e in entries):
        found["msprof_op"].append(folder)  # an msprof op folder renamed (OPPROF_001)
        return
    for entry in entries:
        if entry.name.endswith(PADDLE_SUFFIX) and _entry_is_file(entry):
            found["paddle"].append(Path(entry.path))
    if depth == 0:
        found["root_entries"] = entries  # sniffed by content if no name matches anything
        loose = _source(_card_from_path(folder / "_"), folder)
    else:  # a db export copied out on its own
        db = pick_db(folder)
        loose = Source(_card_from_path(folder / "_"), db=db) if db is not None else None
    if loose is not None:
        found["merged"].append((folder, loose))
    if depth >= _MAX_DEPTH:
        return
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."):
            _scan(Path(entry.path), depth + 1, found)


def discover(path: str | os.PathLike[str]) -> list[Capture]:
    """Every capture at or below `path`, newest first."""
    root = Path(path).expanduser()
    try:
        exists = root.exists()
    except PermissionError:
        parent = next((p for p in root.parents if not _readable(p)), root.parent)
        raise _denied(parent) from None
    if not exists:
        blocked = next((p for p in reversed(root.parents) if p.exists() and not _readable(p)), None)
        if blocked is not None:
            raise _denied(blocked)
        raise ProfileError(f"{root}: no such file or folder; check the path")
    if root.is_file():
        return [_file_capture(root)]
    if not root.is_dir():
        raise ProfileError(
            f"{root}: not a regular file or folder (a FIFO, socket or device); point npuscope at an exported profile"
        )
    if not _readable(root):
        raise _denied(root)
    found: dict[str, list[Any]] = defaultdict(list)
    _scan(root, 0, found)
    captures: list[Capture] = list(found["prof"])
    if found["torch"]:
        cap = _torch_capture(found["torch"], root)
        if cap is not None:
            captures.append(cap)
    for folder, src in found["merged"]:
        era: Layout = "era_b" if folder.name == "mindstudio_profiler_output" else "file"
        if src.card is not None:
            era = "era_a"
        parent = folder.parent if folder.name == "mindstudio_profiler_output" else folder
        captures.append(Capture(parent.name, parent, era, (src,), _stamp_of(src)))
    if found["device"]:
        devices = found["device"]
        parent = devices[0][0].parent
        captures.append(Capture(parent.name, parent, "era_a", tuple(s for _, s in devices), _stamp_of(devices[0][1])))
    if found["paddle"]:
        captures.append(_paddle_capture(found["paddle"], root))
    if not captures and not found["raw"]:
        _sniff_folder(found["root_entries"], found)
        captures.extend(_file_capture(p, kind) for p, kind in found["sniffed"])
    opprof = tuple(found["msprof_op"])
    if not captures and opprof:
        raise MsprofOpOnly(root, opprof)
    if opprof:
        captures = [replace(c, msprof_op=opprof) for c in captures]
    if not captures and found["unreadable"]:
        raise _denied(found["unreadable"][0])
    if not captures:
        raw = found["raw"]
        if raw:
            raise ProfileError(
                f"{raw[0]}: raw data only, nothing exported; run `msprof --export=on --output={raw[0]}` first"
            )
        raise ProfileError(
            f"{root}: no profile data found (looked for PROF_* folders, "
            "mindstudio_profiler_output/, device_N/summary|timeline, *_ascend_pt/, "
            "op_summary*.csv, op_statistic*.csv, msprof*.json, kernel_details.csv, "
            "trace_view.json, msprof_*.db, ascend_pytorch_profiler_*.db, *.paddle_trace.json "
            "up to 4 levels down, OPPROF_* folders, and by content the largest "
            f"{MAX_SNIFFED} .json / .csv files of the folder{_unsniffed(found)}); point npuscope at "
            "an exported profile"
        )
    captures.sort(key=lambda c: stamp_seconds(c), reverse=True)
    return captures


def _unsniffed(found: dict[str, list[Any]]) -> str:
    left = len(found["unsniffed"])
    return f": {left:,} smaller one(s) not looked into; give a file directly" if left else ""


def stamp_seconds(capture: Capture) -> float:
    """A capture's time as epoch seconds, whatever its stamp is: a PROF name's 17-digit
    local time, an export's 14-digit stamp, a folder's mtime in seconds, or, failing all of
    them, the newest file's mtime. Comparing the stamps as text would rank by their kind."""
    import datetime as dt

    stamp = capture.stamp
    for digits, fmt in ((17, "%Y%m%d%H%M%S%f"), (14, "%Y%m%d%H%M%S")):
        if len(stamp) == digits and stamp.isdigit():
            text = stamp + ("000" if digits == 17 else "")
            try:
                return dt.datetime.strptime(text, fmt).timestamp()
            except ValueError:
                break
    if stamp.isdigit() and len(stamp) <= 11:
        return float(stamp)
    times = []
    for path in capture.files:
        try:
            times.append(path.stat().st_mtime)
        except OSError:
            pass
    return max(times, default=0.0)


def _stamp_of(src: Source) -> str:
    for p in src.files:
        parsed = _parse_name(p.name)
        if parsed and parsed[3]:
            return parsed[3]
    return ""
