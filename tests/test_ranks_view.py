"""The explorer on a cluster: the Ranks view first (a row and a bar per rank, slow and damaged
ranks marked, sort and filter), Enter opens a rank in the usual views, `[` `]` move between
ranks, `R` goes back; loading a cluster or a rank never blocks (progress, Esc, stale results).

One generated 4-rank torch_npu cluster for the module (planted slow rank and slow link), rank 3
damaged by hand; the truth is read from the rank folders with the csv module. The ranks are
parsed in worker processes once: the tests share one cache folder, so later opens read the
ranks' cache entries. Pure parts (rows, filter, order, neighbours) are tested without an app.
"""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pilot_helpers import wait_loaded

from npuscope.analysis.cluster import RankSummary
from npuscope.fixtures.generate import generate
from npuscope.parsers import Cancelled, ReadOptions
from npuscope.tui import load_job
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.messages import LoadRequested
from npuscope.tui.ranks_state import (
    RankFilterError,
    neighbour,
    parse_rank_filter,
    rank_positions,
    rank_rows,
)
from npuscope.tui.screens.help_screen import HelpScreen
from npuscope.tui.screens.ranks_screen import RanksScreen
from npuscope.tui.widgets.rank_bars import RankBars
from npuscope.tui.widgets.ranks_table import RanksTable

WAIT = 120.0  # seconds before a wait gives up (a timeout, not a timing assertion)
DAMAGED_RANK = "3"


async def until(pilot, predicate: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """4 ranks (slow rank and slow link planted), rank 3's task table replaced by garbage."""
    root = tmp_path_factory.mktemp("ranks") / "cluster"
    generated = generate(
        root,
        layout="torch_npu",
        cards=4,
        problems=("slow_rank", "slow_link"),
        training=True,
        timeline=False,
        steps=2,
        ops_per_step=60,
    )
    folders = _rank_folders(root)
    kernels = next(folders[DAMAGED_RANK].rglob("kernel_details.csv"))
    kernels.write_text('"Name","Type"\nnot,a kernel table\n')
    return generated


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ranks-cache")


@pytest.fixture
def shared_cache(module_cache, monkeypatch) -> Path:
    """The module's cache folder in place of the test's own: the ranks are parsed once."""
    monkeypatch.setenv("NPUSCOPE_CACHE_DIR", str(module_cache))
    return module_cache


def _rank_folders(root: Path) -> dict[str, Path]:
    """rank -> folder, from each folder's profiler_info_<rank>.json (not from the parser)."""
    out = {}
    for folder in root.iterdir():
        (info,) = folder.glob("profiler_info_*.json")
        out[info.stem.removeprefix("profiler_info_")] = folder
    return out


def _kernel_rows(folder: Path) -> list[dict[str, str]]:
    with next(folder.rglob("kernel_details.csv")).open(newline="") as fh:
        return list(csv.DictReader(fh))


def _slow_rank(generated) -> str:
    (planted,) = [p for p in generated.planted if p.rule == "slow_rank"]
    return planted.card


def _app(root: Path) -> NpuscopeApp:
    return NpuscopeApp(root, cache=True, clusters=True)


async def _ranks(pilot) -> RanksScreen:
    app = pilot.app
    await until(pilot, lambda: app.ranks is not None and app.screen is app.ranks, "the Ranks view")
    await pilot.pause()
    return app.ranks


def _status(screen) -> str:
    return str(screen.query_one("#ranks-status").render())


def _shown_ranks(screen: RanksScreen) -> list[str]:
    return screen.query_one(RanksTable).frame["rank"].to_list()


# ---------------------------------------------------------------- without an app


def _summary(rank: str, step: float | None, wait: float, tasks: int, error: str | None = None) -> RankSummary:
    return RankSummary(
        rank=rank,
        folder=Path(f"/x/node_{rank}_ascend_pt"),
        step_us=step,
        compute_us=step or 0.0,
        communication_us=10.0,
        exposed_comm_us=5.0,
        free_us=1.0,
        wait_us=wait,
        tasks=tasks,
        error=error,
    )


def test_rows_filter_order_and_neighbours_without_an_app():
    ranks = [
        _summary("0", 100.0, 7.0, 10),
        _summary("1", 300.0, 1.0, 20),
        _summary("2", None, 0.0, 0, error="broken\nfile"),
        _summary("10", 200.0, 9.0, 30),
    ]
    frame = rank_rows(ranks, slow_ranks=("1",))
    assert frame["mark"].to_list() == ["", "slow", "damaged", ""]
    assert frame["error"].to_list() == [None, None, "broken file", None]  # one line

    def shown(text: str, key: str = "row", desc: bool = False) -> list[str]:
        return frame["rank"].gather(rank_positions(frame, parse_rank_filter(text), key, desc)).to_list()

    assert shown("") == ["0", "1", "2", "10"]
    assert shown("", "step_us", True) == ["1", "10", "0", "2"]  # no step time: last either way
    assert shown("", "step_us", False) == ["0", "10", "1", "2"]
    assert shown("", "wait_us", True) == ["10", "0", "1", "2"]
    assert shown("", "row", True) == ["10", "2", "1", "0"]
    assert shown("rank:0-2") == ["0", "1", "2"]
    assert shown("rank:1,10") == ["1", "10"]
    assert shown("is:slow") == ["1"] and shown("slow") == ["1"]
    assert shown("is:damaged") == ["2"] and shown("broken") == ["2"]
    assert shown("is:ok") == ["0", "10"]
    assert shown("-is:damaged step>=150") == ["1", "10"]
    assert shown("step>0.15ms") == ["1", "10"]
    assert shown("tasks<25 -rank:0") == ["1", "2"]
    assert shown("node_10") == ["10"]
    for bad in ("step>>1", "rank:", "is:fast", "tasks>1ms", "speed>3", "rank:5-2"):
        with pytest.raises(RankFilterError):
            parse_rank_filter(bad)

    # [ ] move in rank order, skipping the damaged rank, around the ends.
    assert neighbour(frame, "1", 1) == "10"
    assert neighbour(frame, "10", 1) == "0"
    assert neighbour(frame, "10", -1) == "1"
    assert neighbour(frame, "0", -1) == "10"
    assert neighbour(frame, None, 1) == "0"
    assert neighbour(rank_rows(ranks[:1], ()), "0", 1) is None  # no other rank


# ---------------------------------------------------------------- the loader


def test_load_cluster_counts_ranks_and_bytes_and_stops_on_its_cancel_event(cluster, shared_cache):
    seen: list[tuple[int, int, str]] = []
    summary = load_job.load_cluster(
        cluster.root,
        read=ReadOptions(),
        thresholds=None,
        use_cache=True,
        cancel=threading.Event(),
        progress=lambda *a: seen.append(a),
    )
    assert [r.rank for r in summary.ranks] == ["0", "1", "2", "3"]
    labels = [label for _, _, label in seen]
    assert labels[0] == "rank 0/4" and all(f"rank {n}/4" in " ".join(labels) for n in range(1, 5))
    total = seen[-1][1]
    assert seen[-1][0] == total > 0 and [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        load_job.load_cluster(cluster.root, read=ReadOptions(), thresholds=None, use_cache=True, cancel=cancel)


# ---------------------------------------------------------------- the Ranks view


async def test_ranks_view_rows_bars_marks_sort_and_filter(cluster, shared_cache):
    folders = _rank_folders(cluster.root)
    slow = _slow_rank(cluster)
    app = _app(cluster.root)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _ranks(pilot)
        summary = app.cluster
        assert app.main.profile is None  # nothing but the summary is loaded

        # Every rank, with the summary's numbers; the tasks are each rank's kernel_details rows.
        table = screen.query_one(RanksTable)
        rows = table.frame.to_dicts()
        assert [r["rank"] for r in rows] == ["0", "1", "2", "3"]
        for row, rank in zip(rows, summary.ranks):
            for key in ("step_us", "compute_us", "communication_us", "exposed_comm_us", "free_us", "wait_us"):
                assert row[key] == pytest.approx(getattr(rank, key)), (row["rank"], key)
            if row["rank"] != DAMAGED_RANK:
                assert row["tasks"] == len(_kernel_rows(folders[row["rank"]]))
        assert "4 of 4 ranks" in _status(screen)
        visible = [s.column.key for s in table._display][:8]
        assert visible == ["rank", "mark", "stage", "step_us", "compute_us", "exposed_comm_us", "free_us", "note"]

        # The planted slow rank and the damaged rank are marked, in the table and on the bars.
        marks = {r["rank"]: r["mark"] for r in rows}
        assert marks[slow] == "slow" and marks[DAMAGED_RANK] == "damaged"
        assert [m for r, m in marks.items() if r not in (slow, DAMAGED_RANK)] == ["", ""]
        assert summary.slow_ranks == (slow,)
        bars = screen.query_one(RankBars)
        assert [b.label for b in bars.bars] == ["0", "1", "2", "3"]
        lines = [bars.render_line(y).text for y in range(5)]
        assert "compute" in lines[0] and "free" in lines[0]
        assert f"rank {slow} slow" in lines[1 + int(slow)]
        damaged_line = lines[1 + int(DAMAGED_RANK)]
        assert "damaged" in damaged_line and "kernel_details.csv" in damaged_line and "█" not in damaged_line
        # A bar is the table's row: its parts the row's compute / exposed / free, its total the
        # row's Step as the table writes it (its unit and decimals).
        step = next(c for c in table.shown_columns if c.column.key == "step_us")
        unit = step.title[len("Step(") : -1]
        for row, bar, line in zip(rows, bars.rows, lines[1:]):
            if row["rank"] == DAMAGED_RANK:
                continue
            assert (bar.bar.compute_us, bar.bar.comm_us, bar.bar.free_us) == (
                row["compute_us"],
                row["exposed_comm_us"],
                row["free_us"],
            )
            assert bar.bar.total_us == pytest.approx(row["step_us"])
            assert line.rstrip().endswith(f"{row['step_us'] / step.scale:,.1f} {unit}"), line
        # The cluster's findings: the slow rank and the slow link.
        findings = str(screen.query_one("#ranks-findings").render())
        assert "Slow rank" in findings and "Slow link" in findings
        header = str(screen.query_one("#ranks-header").render())
        assert "cluster" in header and "4 ranks" in header and "1 damaged" in header and f"slow: {slow}" in header

        # Sort: d by step time (worst first, again reverses), w by wait, t rank order.
        ok = [r for r in summary.ranks if r.error is None]
        await pilot.press("d")
        by_step = [r.rank for r in sorted(ok, key=lambda r: -r.step_us)]
        assert _shown_ranks(screen) == by_step + [DAMAGED_RANK]
        assert [b.label for b in bars.bars] == by_step + [DAMAGED_RANK]  # the bars follow
        await pilot.press("d")
        assert _shown_ranks(screen) == by_step[::-1] + [DAMAGED_RANK]
        await pilot.press("w")
        assert _shown_ranks(screen) == [r.rank for r in sorted(ok, key=lambda r: -r.wait_us)] + [DAMAGED_RANK]
        assert "sorted by wait_us ▼" in _status(screen)
        await pilot.press("t")
        assert _shown_ranks(screen) == ["0", "1", "2", "3"]
        await pilot.press("r")
        assert _shown_ranks(screen) == ["3", "2", "1", "0"]
        await pilot.press("t")

        # Filter: by rank, by mark, by text; a bad term is said and changes nothing.
        await pilot.press("/", *"rank:1-2", "enter")
        assert _shown_ranks(screen) == ["1", "2"] and "2 of 4 ranks" in _status(screen)
        assert [b.label for b in bars.bars] == ["1", "2"]
        await pilot.press("escape")
        assert _shown_ranks(screen) == ["0", "1", "2", "3"]
        # (typed once above; the other filters set as the filter bar's Enter sets them)
        assert screen.apply_filter("is:slow")
        assert _shown_ranks(screen) == [slow]
        pid = folders["2"].name.split("_")[1]  # <host>_<pid>_<time>_ascend_pt
        assert screen.apply_filter(pid)
        assert _shown_ranks(screen) == ["2"]
        assert not screen.apply_filter("step>>1")  # said, and the filter stays
        await pilot.pause()
        assert _shown_ranks(screen) == ["2"] and app.screen is screen

        # ? lists the Ranks view's keys and its filter language.
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert ("ranks", "Enter", "Open rank") in app.screen.rows
        assert ("ranks", "p", "Parallel view") in app.screen.rows and ("ranks", "m", "Comm matrix") in app.screen.rows
        assert ("main", "R", "Ranks view (a cluster)") in app.screen.rows
        assert "is:damaged" in str(app.screen.query_one("#help-ranks-query").render())


async def test_enter_opens_a_rank_brackets_move_and_r_goes_back(cluster, shared_cache):
    """Three ranks are opened whole (tasks, diagnosis, training views): ~3-5 s here."""
    folders = _rank_folders(cluster.root)
    app = _app(cluster.root)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _ranks(pilot)
        table = screen.query_one(RanksTable)

        # A damaged rank: Enter says its one-line error and loads nothing.
        table.move_to_key(DAMAGED_RANK, key="rank")
        await pilot.press("enter")
        assert app.loading is None and app.screen is screen
        status = _status(screen)
        assert f"rank {DAMAGED_RANK} cannot be opened" in status and "kernel_details.csv" in status

        # Enter on rank 2: the usual main screen with that rank's tasks only.
        table.move_to_key("2", key="rank")
        await pilot.press("enter")
        main = await wait_loaded(pilot)
        assert app.screen is main and app.rank == "2"
        assert str(main.query_one("#header").render()).startswith("rank  2  3/4")
        truth = _kernel_rows(folders["2"])
        tasks = main.card_tasks()
        assert tasks.height == len(truth)
        assert sorted(tasks["duration_us"].to_list()) == pytest.approx(sorted(float(r["Duration(us)"]) for r in truth))
        assert main.profile.path == folders["2"]
        keys = {key: b.binding.description for key, b in main.active_bindings.items() if b.enabled}
        assert keys["left_square_bracket"] == "Prev rank" and keys["right_square_bracket"] == "Next rank"

        # ] the next rank (3 is damaged: stepped over, around the end), [ the previous.
        await pilot.press("]")
        await until(pilot, lambda: app.rank == "0" and app.loading is None, "rank 0")
        await wait_loaded(pilot)
        assert str(main.query_one("#header").render()).startswith("rank  0  1/4")
        assert main.card_tasks().height == len(_kernel_rows(folders["0"]))
        assert main.profile.path == folders["0"]
        await pilot.press("[")
        await until(pilot, lambda: app.rank == "2" and app.loading is None, "rank 2 again")
        await wait_loaded(pilot)
        assert main.profile.path == folders["2"]

        # R: back to the same Ranks view (not reloaded), the cursor on the open rank.
        jobs = len(app.jobs)
        await pilot.press("R")
        await pilot.pause()
        assert app.screen is screen and len(app.jobs) == jobs
        assert table.current_row["rank"] == "2"
        assert _shown_ranks(screen) == ["0", "1", "2", "3"]


class Gate:
    """Holds `load_job.open_rank` until `open()`; records how the held call ended."""

    def __init__(self, real: Callable) -> None:
        self.real = real
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.outcomes: list[str] = []

    def __call__(self, *args, **kwargs):
        self.entered.set()
        self.opened.wait(WAIT)
        try:
            result = self.real(*args, **kwargs)
        except Cancelled:
            self.outcomes.append("cancelled")
            raise
        self.outcomes.append("done")
        return result

    def open(self) -> None:
        self.opened.set()


async def test_escape_cancels_a_rank_load_and_the_ranks_view_stays(cluster, shared_cache, monkeypatch):
    gate = Gate(load_job.open_rank)
    monkeypatch.setattr(load_job, "open_rank", gate)
    app = _app(cluster.root)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _ranks(pilot)
        screen.query_one(RanksTable).move_to_key("1", key="rank")
        await pilot.press("enter")
        await until(pilot, gate.entered.is_set, "the rank load to start")
        job = app.loading
        assert job is not None and screen.query_one("#ranks-loading").display
        await pilot.press("escape")
        assert job.cancel.is_set() and app.loading is None
        assert app.screen is screen and "loading cancelled" in _status(screen)
        assert not screen.query_one("#ranks-loading").display
        gate.open()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert gate.outcomes == ["cancelled"]
        assert ("LoadCancelled", job.generation) in app.dropped
        assert app.screen is screen and app.main.profile is None and app.is_running


async def test_a_cluster_load_replaced_by_a_capture_is_dropped(cluster, shared_cache, monkeypatch, samples):
    """The cluster's summary is held while a single capture is opened: the capture opens as
    it always does, and the summary, posted last, is dropped (no Ranks view)."""
    real = load_job.open_cluster
    entered, opened = threading.Event(), threading.Event()

    def held(*args, **kwargs):
        entered.set()
        opened.wait(WAIT)
        return real(*args, **kwargs)

    monkeypatch.setattr(load_job, "open_cluster", held)
    capture = samples / "msprof_golden"
    app = NpuscopeApp(cluster.root, cache=True, clusters=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, entered.is_set, "the cluster load to start")
        first = app.loading
        assert first is not None
        app.post_message(LoadRequested(capture))
        await until(pilot, lambda: app.main.profile is not None, "the capture")
        assert app.main.profile.path == capture and first.cancel.is_set()
        opened.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.ranks is None and app.cluster is None and app.screen is app.main
        assert app.main.rank is None and str(app.main.query_one("#header").render()).startswith("card")
        assert any(generation == first.generation for _, generation in app.dropped)


async def test_escape_during_the_cluster_load_cancels_it(cluster, shared_cache, monkeypatch):
    """Esc while the summary is read: the load stops at its next check between ranks, the app
    stays and says so; the cancelled job's message is dropped."""
    real = load_job.open_cluster
    entered, opened = threading.Event(), threading.Event()
    outcomes: list[str] = []

    def held(*args, **kwargs):
        entered.set()
        opened.wait(WAIT)
        try:
            return real(*args, **kwargs)
        except Cancelled:
            outcomes.append("cancelled")
            raise

    monkeypatch.setattr(load_job, "open_cluster", held)
    app = _app(cluster.root)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, entered.is_set, "the cluster load to start")
        job = app.loading
        await pilot.press("escape")
        assert job is not None and job.cancel.is_set() and app.loading is None
        assert "loading cancelled" in str(app.main.query_one("#loading-label").render())
        opened.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert outcomes == ["cancelled"] and ("LoadCancelled", job.generation) in app.dropped
        assert app.is_running and app.ranks is None and app.cluster is None


@pytest.mark.parametrize(
    ("extra", "ranks_view"),
    [((), True), (("--all-cards",), False), (("--capture", "0"), False)],
)
def test_command_line_opens_a_cluster_as_its_ranks_view(cluster, monkeypatch, extra, ranks_view):
    """`npuscope CLUSTER` starts the explorer with the Ranks view; --all-cards, or naming a
    capture, opens the ranks as the cards of one capture. The app's run is replaced: what is
    checked is the app the command line builds (the view itself is tested above)."""
    from npuscope.cli import main

    built: list[NpuscopeApp] = []
    monkeypatch.setattr(NpuscopeApp, "run", lambda self, *a, **k: built.append(self))
    assert main([str(cluster.root), "--no-cache", *extra]) == 0
    (app,) = built
    assert app.clusters is ranks_view
