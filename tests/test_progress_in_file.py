"""Progress and cancel inside one file: a CSV table piece by piece, a db export batch by batch.

A generated op_summary of ~4 MB is read in pieces of 128 KB (`piece_bytes`), a generated db
export in batches of 64 rows (`batch_rows`): progress comes many times within the one file, by
bytes only rising, and a cancel set from the progress callback stops the read before the file
is done. Pieces and batches change nothing of the frames: the real kernel_details sample read
in pieces of 4 KB gives what the csv module reads, a cut inside a quoted cell holding a line
break reads as the whole file does, damage is reported as it is without pieces, and a real db
export read in batches of 16 rows gives the frames of the read in one go.
"""

from __future__ import annotations

import csv
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest
from progress_sink import Seen

from npuscope.fixtures.generate import generate
from npuscope.parsers import Cancelled, FrameCache, ProfileError, open_profile
from npuscope.tui import load_job
from npuscope.tui.app import ReadOptions

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real"
KERNELS = REAL / "torch_npu_2024_cnn" / "level1" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
REAL_DB = REAL / "torch_npu_2025_db" / "level1" / "rank0_ascend_pt"
PIECE = 128 << 10
BATCH = 64


def _open(path: Path, **kw):
    return open_profile(path, cache=FrameCache(enabled=False), **kw)


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    g = generate(tmp_path_factory.mktemp("csv") / "p", rows=12_000, timeline=False)
    (summary,) = [p for p in g.files if p.name.startswith("op_summary")]
    return g, summary


@pytest.fixture(scope="module")
def db_export(tmp_path_factory):
    g = generate(tmp_path_factory.mktemp("db") / "p", rows=3_000, db="only")
    (db,) = [p for p in g.files if p.suffix == ".db"]
    return g, db


# ---------------------------------------------------------------- CSV


def test_op_summary_progress_moves_piece_by_piece(export):
    g, summary = export
    size = summary.stat().st_size
    seen = Seen()
    _open(g.root, progress=seen, piece_bytes=PIECE)
    total = sum(p.stat().st_size for p in g.files)
    inside = seen.of("op summary")
    assert size > 20 * PIECE
    assert len(inside) >= size // PIECE - 1  # one report per piece, not one per file
    assert inside == sorted(inside) and inside[0] <= PIECE + 4096 and inside[-1] == size
    assert [d for d, _, _ in seen.calls] == sorted(d for d, _, _ in seen.calls)
    assert all(t == total for _, t, _ in seen.calls) and seen.calls[-1][0] == total


def test_cancel_from_progress_stops_inside_the_op_summary(export):
    g, summary = export
    size = summary.stat().st_size
    seen = Seen("op summary", stop_at=size // 3)
    with pytest.raises(Cancelled):
        _open(g.root, progress=seen, cancel=seen.cancel, piece_bytes=PIECE)
    inside = seen.of("op summary")
    # The piece after the one that set the event was never reported: the read stopped there.
    assert inside[-1] >= size // 3 and inside[-1] < size // 3 + PIECE + 4096
    assert all(label != "op statistic" for _, _, label in seen.calls)


def test_the_explorers_loader_cancels_inside_the_op_summary(export, monkeypatch):
    """Esc during a load (the explorer's own loader, its cancel event set mid-file)."""
    g, summary = export
    size = summary.stat().st_size
    real = load_job.open_profile

    def small_pieces(*args, **kwargs):
        return real(*args, piece_bytes=PIECE, **kwargs)

    monkeypatch.setattr(load_job, "open_profile", small_pieces)
    seen = Seen("op summary", stop_at=size // 2)
    with pytest.raises(Cancelled):
        load_job.load_profile(
            g.root,
            capture=None,
            read=ReadOptions(),
            thresholds=None,
            use_cache=False,
            cancel=seen.cancel,
            progress=seen,
        )
    assert 2 < len(seen.of("op summary")) and seen.of("op summary")[-1] < size


def test_pieces_give_the_frames_of_the_whole_file(export):
    g, _ = export
    pieces, whole = _open(g.root, piece_bytes=PIECE, progress=Seen()), _open(g.root)
    assert pieces.tasks.equals(whole.tasks) and pieces.op_statistic.equals(whole.op_statistic)
    assert pieces.steps is not None and whole.steps is not None and pieces.steps.equals(whole.steps)
    assert pieces.notes == whole.notes


SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
TEXT_SAMPLES = {
    "msprof_golden": SAMPLES / "msprof_golden",
    "cann5x": SAMPLES / "cann5x_device_summary" / "device_0",
    "cann5x_spreadsheet": SAMPLES / "cann5x_device_summary" / "op_summary_spreadsheet_mangled.csv",
    "torch_npu": SAMPLES / "torch_npu_ascend_pt",
    "gpt3_short_row": REAL / "torch_npu_2023_gpt3_2rank" / "test_rank_0",
    "cnn_level0": REAL / "torch_npu_2024_cnn" / "level0" / "rank0_ascend_pt",
}


@pytest.mark.parametrize("name", sorted(TEXT_SAMPLES))
def test_every_text_sample_in_tiny_pieces_reads_as_whole(name):
    """Pieces of 128 bytes (a line or two each: many start on a damaged or odd line)."""
    path = TEXT_SAMPLES[name]
    cut, whole = _open(path, piece_bytes=128, progress=Seen()), _open(path)
    assert cut.tasks.equals(whole.tasks) and cut.op_statistic.equals(whole.op_statistic)
    assert (cut.steps is None) == (whole.steps is None)
    assert cut.steps is None or whole.steps is None or cut.steps.equals(whole.steps)
    assert cut.notes == whole.notes and cut.time_problem == whole.time_problem


def _ns(cell: str) -> int:
    return int(Decimal(cell.strip('\t" ')) * 1000)


def test_real_kernel_details_in_pieces_match_the_csv_module(tmp_path):
    out = tmp_path / "ASCEND_PROFILER_OUTPUT"
    out.mkdir()
    (out / "kernel_details.csv").write_bytes(KERNELS.read_bytes())
    with open(KERNELS, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = [dict(zip(header, r)) for r in reader if len(r) == len(header)]
    seen = Seen()
    prof = _open(tmp_path, progress=seen, piece_bytes=4096)
    assert len(seen.of("op summary")) >= KERNELS.stat().st_size // 4096 - 1
    t = prof.tasks
    got = sorted(
        zip(t["op_name"].to_list(), t["start_ns"].to_list(), t["duration_us"].to_list(), t["wait_us"].to_list())
    )
    want = sorted(
        (r["Name"], _ns(r["Start Time(us)"]), float(r["Duration(us)"]), float(r["Wait Time(us)"])) for r in rows
    )
    assert got == want and len(want) > 100


def _with_line_break_at_a_cut(src: Path, dst: Path) -> tuple[int, str]:
    """A copy of `src` whose row 60 has a name holding a line break, and the piece size that
    makes the first cut fall right after that line break (inside the quoted cell)."""
    lines = src.read_bytes().splitlines(keepends=True)
    name = lines[60].split(b",")[4]
    broken = b'"' + name[:5] + b"\n" + name[5:] + b'"'
    lines[60] = lines[60].replace(b"," + name + b",", b"," + broken + b",", 1)
    data = b"".join(lines)
    dst.write_bytes(data)
    at = data.index(broken) + 1 + 5  # the line break inside the cell
    return at - len(lines[0]), (name[:5] + b"\n" + name[5:]).decode()


def test_a_cut_inside_a_quoted_line_break_reads_as_the_whole_file(tmp_path):
    out = tmp_path / "ASCEND_PROFILER_OUTPUT"
    out.mkdir()
    piece, name = _with_line_break_at_a_cut(KERNELS, out / "kernel_details.csv")
    assert 2 * piece < (out / "kernel_details.csv").stat().st_size  # it is read in pieces
    with open(out / "kernel_details.csv", newline="") as fh:
        assert name in [r["Name"] for r in csv.DictReader(fh)]
    cut = _open(tmp_path, piece_bytes=piece, progress=Seen())
    whole = _open(tmp_path)
    assert name in cut.tasks["op_name"].to_list()
    assert cut.tasks.equals(whole.tasks) and cut.notes == whole.notes


def _damaged_copy(tmp_path: Path, change) -> Path:
    out = tmp_path / "ASCEND_PROFILER_OUTPUT"
    out.mkdir()
    lines = KERNELS.read_bytes().splitlines(keepends=True)
    lines[300] = change(lines[300])
    (out / "kernel_details.csv").write_bytes(b"".join(lines))
    return tmp_path


def test_a_short_row_in_a_piece_is_skipped_as_without_pieces(tmp_path):
    root = _damaged_copy(tmp_path, lambda line: line.rsplit(b",", 1)[0] + b"\n")  # its last cell lost
    cut, whole = _open(root, piece_bytes=4096, progress=Seen()), _open(root)
    assert cut.skipped_rows == whole.skipped_rows == 1
    assert cut.notes == whole.notes and cut.tasks.equals(whole.tasks)


def test_a_bad_number_in_a_piece_is_reported_as_without_pieces(tmp_path):
    def bad_duration(line: bytes) -> bytes:
        cells = line.split(b",")
        cells[9] = b"12x"
        return b",".join(cells)

    root = _damaged_copy(tmp_path, bad_duration)
    with pytest.raises(ProfileError) as cut:
        _open(root, piece_bytes=4096, progress=Seen())
    with pytest.raises(ProfileError) as whole:
        _open(root)
    assert str(cut.value) == str(whole.value) and "line 301" in str(cut.value)


# ---------------------------------------------------------------- db


def test_db_progress_moves_batch_by_batch(db_export):
    g, db = db_export
    size = db.stat().st_size
    seen = Seen()
    _open(g.root, progress=seen, batch_rows=BATCH)
    inside = seen.of("db export")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    (tasks,) = con.execute("SELECT COUNT(*) FROM TASK").fetchone()
    con.close()
    assert len(inside) > tasks // BATCH  # every batch of every query, not once per file
    assert inside == sorted(inside) and inside[-1] == size
    assert inside[len(inside) // 2] < size  # bytes in proportion to rows: halfway is not the end


def test_cancel_from_progress_stops_inside_the_db(db_export):
    g, db = db_export
    size = db.stat().st_size
    seen = Seen("db export", stop_at=size // 4)
    with pytest.raises(Cancelled):
        _open(g.root, progress=seen, cancel=seen.cancel, batch_rows=BATCH)
    inside = seen.of("db export")
    assert inside[-1] >= size // 4 and inside[-1] < size


def test_db_batches_give_the_frames_of_one_read(db_export):
    g, _ = db_export
    batches, whole = _open(g.root, progress=Seen(), batch_rows=BATCH), _open(g.root)
    assert batches.tasks.equals(whole.tasks) and batches.notes == whole.notes
    assert batches.events is not None and whole.events is not None and batches.events.equals(whole.events)


def test_real_db_in_batches_matches_sqlite(tmp_path):
    seen = Seen()
    batches = _open(REAL_DB, progress=seen, batch_rows=16)
    whole = _open(REAL_DB)
    assert batches.tasks.equals(whole.tasks) and batches.notes == whole.notes
    (db,) = (REAL_DB / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler_*.db")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    (compute,) = con.execute(
        "SELECT COUNT(*) FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"
    ).fetchone()
    (comm,) = con.execute("SELECT COUNT(*) FROM COMMUNICATION_OP").fetchone()
    con.close()
    assert batches.tasks.height == compute + comm
    assert len(seen.of("db export")) > compute // 16


def test_a_db_read_by_the_sqlite3_module_reports_and_cancels_too(db_export, tmp_path):
    """A text id far down TASK makes ADBC refuse the query; the sqlite3 module reads it in
    batches just the same."""
    g, db = db_export
    odd = tmp_path / "odd"
    odd.mkdir()
    copy = odd / db.name
    copy.write_bytes(db.read_bytes())
    con = sqlite3.connect(copy)
    con.execute("UPDATE TASK SET streamId = 'stream-7' WHERE rowid = (SELECT MAX(rowid) FROM TASK)")
    con.commit()
    con.close()
    seen = Seen()
    batches = _open(odd, progress=seen, batch_rows=BATCH)
    assert "stream-7" in batches.tasks["stream_id"].to_list()
    assert batches.tasks.equals(_open(odd).tasks)
    inside = seen.of("db export")
    assert inside == sorted(inside) and inside[-1] == copy.stat().st_size
    seen = Seen("db export", stop_at=copy.stat().st_size // 4)
    with pytest.raises(Cancelled):
        _open(odd, progress=seen, cancel=seen.cancel, batch_rows=BATCH)
