"""The parallel view (`p`) and the communication matrix (`m`) of a cluster, from the Ranks view.

Two generated clusters for the module: a tp1 pp2 dp2 torch_npu job with profiler_metadata.json
(fixtures/parallel_cluster.py: stage imbalance, a slow rank, pipeline bubbles, rank 3 without
kernel_details.csv), and a 24-rank ring with a slow link (fixtures/generate.py), wider and
taller than an 80x24 terminal. The truth is read from the rank folders with the csv and json
modules: each rank's step_trace_time.csv (means per step), its profiler_metadata.json (sizes,
pipeline groups, hence stages) and its communication_matrix.json (the links). Each view is
driven in Pilot at 80x24 and 160x50; the screen's text is checked for lines cut at the edge.
Pure parts (rank lists, packing, bar cells, compact numbers, link cells) are tested without
an app.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console
from rich.style import Style

from npuscope.analysis.parallel import Group
from npuscope.fixtures.generate import generate_cluster
from npuscope.fixtures.parallel_cluster import generate_parallel
from npuscope.parsers.cluster import RankSummary
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.digits import group_digits
from npuscope.tui.ranks_state import parse_rank_filter, rank_positions, rank_rows, training_only_line
from npuscope.tui.screens.matrix_screen import MatrixScreen
from npuscope.tui.screens.parallel_screen import ParallelScreen
from npuscope.tui.screens.ranks_screen import RanksScreen
from npuscope.tui.widgets.link_matrix import CELL, LinkMatrix, compact, link_cells
from npuscope.tui.widgets.rank_bars import RankBars
from npuscope.tui.widgets.ranks_table import RanksTable, figure_format
from npuscope.tui.widgets.stage_chart import (
    NO_SPLIT,
    BarRow,
    ChartData,
    ChartLines,
    StageChart,
    _pack,
    bubble_parts,
    group_lines,
    part_cells,
    rank_list_text,
)

WAIT = 120.0  # seconds before a wait gives up (a timeout, not a timing assertion)
SIZES = [(80, 24), (160, 50)]
PARTIAL = "3"


async def until(pilot, predicate: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause()


def screen_text(app) -> list[str]:
    """The screen as plain text, as `App.export_screenshot` draws it."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system=None,
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return [line.rstrip() for line in console.export_text(styles=False).splitlines()]


def near(value: float):
    """The summary's figures are rounded to the nanosecond (3 decimals of us)."""
    return pytest.approx(value, abs=2e-3)


def joined(lines: list[str]) -> str:
    """Wrapped lines back as one text, single spaces: a sentence cut at the edge is not in it."""
    return " ".join(" ".join(lines).split())


# ---------------------------------------------------------------- the clusters and their truth


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("parallel") / "job"
    generated = generate_parallel(
        root,
        tp=1,
        pp=2,
        dp=2,
        problems=("stage_imbalance", "slow_rank", "pipeline_bubble", "partial"),
        partial=(int(PARTIAL),),
    )
    return root, generated


@pytest.fixture(scope="module")
def ring(tmp_path_factory):
    root = tmp_path_factory.mktemp("ring") / "ring"
    generate_cluster(root, ranks=24, steps=2, ops_per_step=60, timeline=False, problems=("slow_link",))
    return root


def rank_folders(root: Path) -> dict[str, Path]:
    out = {}
    for folder in root.iterdir():
        (info,) = folder.glob("profiler_info_*.json")
        out[info.stem.removeprefix("profiler_info_")] = folder
    return out


def step_means(folder: Path) -> dict[str, float]:
    """Means per step of step_trace_time.csv: step = Computing + Comm(Not Overlapped) + Free."""
    with next(folder.rglob("step_trace_time.csv")).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    mean = {k: statistics.fmean(float(r[k]) for r in rows) for k in rows[0] if k != "Step"}
    return {
        "compute_us": mean["Computing"],
        "exposed_comm_us": mean["Communication(Not Overlapped)"],
        "free_us": mean["Free"],
        "bubble_us": mean["Bubble"],
        "step_us": mean["Computing"] + mean["Communication(Not Overlapped)"] + mean["Free"],
    }


def metadata(folder: Path) -> dict:
    return json.loads((folder / "profiler_metadata.json").read_text())


def stages_of(folders: dict[str, Path]) -> dict[str, int]:
    """A rank's stage: its place in its pipeline group (profiler_metadata.json)."""
    out = {}
    for rank, folder in folders.items():
        (pp,) = [g for g in metadata(folder)["parallel_group_info"].values() if g["group_name"] == "pp"]
        out[rank] = sorted(pp["global_ranks"]).index(int(rank))
    return out


def matrix_truth(folders: dict[str, Path], transport: str | None = None) -> dict[tuple[int, int], tuple[float, float]]:
    """(src, dst) -> (size MB, time us) summed over every rank's communication_matrix.json:
    each group's ops (the `-total` ones where a group has them), every step."""
    out: dict[tuple[int, int], tuple[float, float]] = {}
    for folder in folders.values():
        data = json.loads(next(folder.rglob("communication_matrix.json")).read_text())
        for step in data.values():
            for ops in step.values():
                named = {k: v for k, v in ops.items() if "@" in k}
                groups = {k.rpartition("@")[2] for k in named}
                for gid in groups:
                    mine = {k: v for k, v in named.items() if k.rpartition("@")[2] == gid}
                    totals = {k: v for k, v in mine.items() if k.rpartition("@")[0].endswith("-total")}
                    for links in (totals or mine).values():
                        for key, link in links.items():
                            if transport is not None and link["Transport Type"] != transport:
                                continue
                            src, dst = (int(x) for x in key.split("-"))
                            size, us = out.get((src, dst), (0.0, 0.0))
                            out[(src, dst)] = (size + link["Transit Size(MB)"], us + link["Transit Time(ms)"] * 1000.0)
    return out


def _app(root: Path) -> NpuscopeApp:
    return NpuscopeApp(root, cache=False, clusters=True)


async def _ranks(pilot) -> RanksScreen:
    app = pilot.app
    await until(pilot, lambda: app.ranks is not None and app.screen is app.ranks, "the Ranks view")
    await pilot.pause()
    return app.ranks


def table_text(table: RanksTable, key: str, value: float) -> str:
    """`value` as the Ranks table writes column `key` (its unit and decimals), with the unit."""
    shown = next(s for s in table.shown_columns if s.column.key == key)
    unit = shown.title[len(shown.column.title) + 1 : -1]
    return f"{value / shown.scale:,.{shown.column.decimals}f} {unit}"


# ---------------------------------------------------------------- without an app


def test_rank_lists_packing_and_bar_cells():
    assert rank_list_text([0, 1, 2, 3]) == "0-3"
    assert rank_list_text([56, 0, 8, 16, 24, 32, 40, 48]) == "0-56 by 8"
    assert rank_list_text([0, 2]) == "0,2"
    assert rank_list_text([0, 1, 2, 8, 9, 10, 12]) == "0-2,8-10,12"
    assert rank_list_text([5]) == "5"
    items = [f"[{i},{i + 8}]" for i in range(30)]
    packed = _pack(items, 30, 3)
    assert len(packed) == 3 and all(len(line) <= 30 for line in packed)
    shown = " ".join(packed).split()
    more = int(shown[-2].lstrip("+"))
    assert shown[-1] == "more" and len(shown) - 2 + more == len(items)  # every group counted
    assert _pack(items[:3], 80, 3) == [" ".join(items[:3])]
    lines = group_lines([Group("tp", (i,)) for i in range(64)] + [Group("pp", (0, 16, 32, 48))], 80)
    assert [line.plain.split()[:2] for line in lines] == [["tp", "×64"], ["pp", "[0-48"]]
    assert "one rank each (0-63)" in lines[0].plain
    # The parts of a bar end where their running sums do: never more cells than the bar.
    assert part_cells((50.0, 25.0, 0.0, 25.0), 100.0, 40) == (20, 10, 0, 10)
    assert sum(part_cells((33.3, 33.3, 0.1, 33.3), 100.0, 7)) == 7
    assert part_cells((1.0, 1.0), 0.0, 10) == (0, 0)
    assert bubble_parts(100.0, 30.0) == (70.0, 30.0)
    assert bubble_parts(100.0, 250.0) == (0.0, 100.0)  # the bubble drawn is part of the comm
    assert bubble_parts(100.0, None) == (100.0, 0.0)


def test_compact_numbers_and_link_cells():
    for value, text in [(0.0, "0.00"), (0.001, "<0.01"), (9.996, "10.0"), (12.34, "12.3"), (236.4, "236")]:
        assert compact(value) == text
    for value, text in [(8826.8, "8827"), (11058.6, "11.1k"), (999600.0, "1.00M"), (2.5e9, "2.50G")]:
        assert compact(value) == text
    assert all(len(compact(10**e * m)) <= 5 for e in range(-3, 14) for m in (1.0, 4.99, 9.9951, 9.9))
    links = pl.DataFrame(
        {
            "card": ["0", "1", "0", "0"],
            "group": ["g", "g", "g", "h"],
            "src": [0, 0, 0, 1],
            "dst": [1, 1, 0, 0],
            "transport": ["HCCS", "HCCS", "LOCAL", "RDMA"],
            "size_mb": [10.0, 30.0, 5.0, 1.0],
            "time_us": [1000.0, 1000.0, 10.0, 500.0],
            "bandwidth_gbps": [10.0, 30.0, 500.0, 2.0],
        }
    )
    cells = link_cells(links, slow_links=("1->0 RDMA",))
    assert set(cells) == {(0, 1), (0, 0), (1, 0)}
    both = cells[(0, 1)]  # recorded by both ends: summed, as msprof-analyze's cluster matrix does
    assert (both.size_mb, both.time_us, both.bandwidth_gbps, both.cards) == (40.0, 2000.0, 20.0, ("0", "1"))
    assert cells[(1, 0)].slow and not cells[(0, 1)].slow
    assert set(link_cells(links, "HCCS")) == {(0, 1)}
    assert link_cells(links, "SIO") == {}


def test_rank_rows_carry_stage_steps_and_missing_files():
    def rank(label: str, stage: int, tasks: int, missing: tuple[str, ...] = ()) -> RankSummary:
        return RankSummary(
            rank=label,
            folder=Path(f"/x/rank{label}_ascend_pt"),
            step_us=10.0,
            compute_us=5.0,
            communication_us=4.0,
            exposed_comm_us=3.0,
            free_us=2.0,
            wait_us=None if not tasks else 1.0,
            tasks=tasks,
            steps=2,
            bubble_us=1.0,
            stage=stage,
            missing=missing,
        )

    ranks = [rank("0", 0, 10), rank("1", 1, 0, ("kernel_details.csv", "trace_view.json")), rank("2", 1, 9)]
    frame = rank_rows(ranks, ())
    assert frame["stage"].to_list() == [0, 1, 1] and frame["steps"].to_list() == [2, 2, 2]
    assert frame["note"].to_list() == [None, "no kernel_details.csv, trace_view.json", None]

    def shown(text: str) -> list[str]:
        return frame["rank"].gather(rank_positions(frame, parse_rank_filter(text), "row", False)).to_list()

    assert shown("stage:1") == ["1", "2"] and shown("is:partial") == ["1"] and shown("kernel_details") == ["1"]
    assert shown("-is:partial stage:0-1") == ["0", "2"] and shown("bubble>0.5") == ["0", "1", "2"]
    line = training_only_line(ranks[1])
    assert line is not None and "training-level files only" in line and "kernel_details.csv" in line
    assert training_only_line(ranks[0]) is None


def test_chart_without_a_layout_and_with_damaged_and_stepless_ranks():
    """No layout: the chart says so and draws every rank's bar; a damaged rank and one without
    steps (totals, not means) get a line, not a bar on the per-step scale."""

    def rank(label: str, step: float | None, steps: int, error: str | None = None) -> RankSummary:
        return RankSummary(
            rank=label,
            folder=Path(f"/x/rank{label}_ascend_pt"),
            step_us=step,
            compute_us=(step or 900_000.0) * 0.5,
            communication_us=0.0,
            exposed_comm_us=(step or 900_000.0) * 0.3,
            free_us=(step or 900_000.0) * 0.2,
            wait_us=1.0,
            tasks=10,
            error=error,
            steps=steps,
        )

    ranks = (rank("0", 1000.0, 3), rank("1", 2000.0, 3), rank("2", None, 0), rank("3", None, 0, "broken\nfile"))
    fmt = figure_format(rank_rows(ranks, ()))
    lines = ChartLines(ChartData(None, ranks, ("1",), ()), fmt, Console(width=80), 80)
    text = [item.plain for item in lines.items if not isinstance(item, BarRow)]
    body = joined(text)
    assert "No parallel layout" in body and "rank 2 has no steps" in body and "rank 3 damaged: broken file" in body
    bars = [item for item in lines.items if isinstance(item, BarRow)]
    assert [b.label for b in bars] == ["rank 0", "rank 1"] and bars[1].flags == "slow"
    assert lines.longest_us == pytest.approx(2000.0)  # the stepless rank's totals are no scale
    strips = lines.strips({p: Style() for p in ("compute", "comm", "bubble", "free")}, Style(), Style())
    assert all(s.cell_length == 80 for s in strips)
    widest = max(sum(s.text.count(g) for g in "█▓▒░") for s in strips if "rank 1" in s.text)
    assert widest == sum(part_cells(bars[1].parts, 2000.0, widest))


# ---------------------------------------------------------------- the Ranks view of the job


async def test_ranks_view_shows_stages_missing_files_and_refuses_an_empty_rank(job):
    root, generated = job
    folders = rank_folders(root)
    stages = stages_of(folders)
    app = _app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _ranks(pilot)
        table = screen.query_one(RanksTable)
        rows = {r["rank"]: r for r in table.frame.to_dicts()}
        assert {r: row["stage"] for r, row in rows.items()} == stages
        assert rows[PARTIAL]["note"] == "no kernel_details.csv" and rows[PARTIAL]["tasks"] == 0
        assert [r for r, row in rows.items() if row["note"]] == [PARTIAL]
        bars = screen.query_one(RankBars)
        lines = [bars.render_line(y).text.rstrip() for y in range(len(rows) + 1)]
        for rank, bar, line in zip(rows, bars.rows, lines[1:]):
            truth = step_means(folders[rank])
            assert bar.bar.compute_us == near(truth["compute_us"])
            assert bar.bar.comm_us == near(truth["exposed_comm_us"])
            assert bar.bar.free_us == near(truth["free_us"])
            assert line.endswith(table_text(table, "step_us", rows[rank]["step_us"])), line
        # Enter on the rank of training-level files only: one line, nothing loads.
        table.move_to_key(PARTIAL, key="rank")
        await pilot.pause()
        assert "no kernel_details.csv" in str(screen.query_one("#ranks-status").render())
        await pilot.press("enter")
        await pilot.pause()
        assert app.loading is None and app.screen is screen and app.main.profile is None
        assert "training-level files only" in screen.message and "kernel_details.csv" in screen.message


# ---------------------------------------------------------------- the parallel view


@pytest.mark.parametrize("size", SIZES)
async def test_parallel_view_sizes_groups_and_stage_bars(job, size):
    root, generated = job
    folders = rank_folders(root)
    stages = stages_of(folders)
    args = metadata(folders["0"])["distributed_args"]
    width = size[0]
    app = _app(root)
    async with app.run_test(size=size) as pilot:
        ranks = await _ranks(pilot)
        table = ranks.query_one(RanksTable)
        summary = app.cluster
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ParallelScreen), "the parallel view")
        screen = app.screen
        chart = screen.query_one(StageChart)
        await until(pilot, lambda: chart.lines is not None, "the chart")
        await pilot.pause()

        # The header: the declared sizes and where they come from, wrapped, never cut.
        text = screen_text(app)
        assert all(len(line) <= width for line in text)
        said = joined(text)
        sizes = (
            f"tp {args['tensor_model_parallel_size']} · pp {args['pipeline_model_parallel_size']} · "
            f"dp {args['data_parallel_size']} · cp {args['context_parallel_size']} · "
            f"ep {args['expert_model_parallel_size']} · world {args['world_size']}"
        )
        assert sizes in said and "declared in the ranks' profiler_metadata.json" in said

        # The groups as the metadata lists them (singletons folded into one line).
        lines = chart.text_lines
        body = joined(lines)
        for folder in folders.values():
            for group in metadata(folder)["parallel_group_info"].values():
                ranks_of = group["global_ranks"]
                if len(ranks_of) > 1:
                    assert f"[{rank_list_text(ranks_of)}]" in body, group
        assert NO_SPLIT in body  # said in full: wrapped at words, not cut

        # Per stage: its title, its mean bar and one bar per rank, totals as the table writes them.
        by_stage: dict[int, list[str]] = {}
        for rank, stage in sorted(stages.items()):
            by_stage.setdefault(stage, []).append(rank)
        assert [s.stage for s in summary.parallel.stages] == sorted(by_stage)
        for stage in summary.parallel.stages:
            members = by_stage[stage.stage]
            assert list(stage.ranks) == members
            truth = {k: statistics.fmean(step_means(folders[r])[k] for r in members) for k in step_means(folders["0"])}
            for key, value in truth.items():
                assert getattr(stage, key) == near(value), (stage.stage, key)
            title = next(i for i, line in enumerate(lines) if line.startswith(f"stage {stage.stage} "))
            assert f"{len(members)} ranks: {rank_list_text([int(r) for r in members])}" in lines[title]
            step = table_text(table, "step_us", stage.step_us)
            assert lines[title].endswith(f"mean step {step}")
            section = joined(lines[title : title + 12])
            for label, key in (("compute", "compute_us"), ("exposed comm", "exposed_comm_us"), ("free", "free_us")):
                assert f"{label} {table_text(table, key, getattr(stage, key))}" in section
            assert f"bubble {table_text(table, 'bubble_us', stage.bubble_us)} of it" in section
            mean = next(line for line in lines[title:] if line.lstrip().startswith("mean ") and "█" in line)
            assert mean.rstrip().endswith(step)
            for rank in members:
                r = summary.rank(rank)
                (line,) = [x for x in lines if x.startswith(f"  rank {rank} ") and "█" in x]
                assert table_text(table, "step_us", r.step_us) in line
                assert r.step_us == near(step_means(folders[rank])["step_us"])
                assert line.endswith("slow") == (rank in summary.slow_ranks)
                assert ("partial" in line) == (rank == PARTIAL)
        assert "rank 3 (partial): no kernel_details.csv" in body
        # The planted problems are the stage's findings, under their stage.
        planted = {p.rule: p for p in generated.planted}
        heavy = planted["stage_imbalance"].stage
        title = next(i for i, line in enumerate(lines) if line.startswith(f"stage {heavy} "))
        assert "computes" in joined(lines[title:]) and summary.slow_ranks == planted["slow_rank"].ranks
        # Every bar to one scale: the longest rank fills the bar's room, the mean is shorter.
        bars = [line for line in lines if line.startswith(("  mean ", "  rank ")) and "█" in line]
        assert len(bars) == len(summary.parallel.stages) + len(summary.ranks)
        assert len({line.index("█") for line in bars}) == 1
        cells = [sum(line.count(g) for g in "█▓▒░") for line in bars]
        assert max(cells) >= (width - 34 if width >= 160 else width // 2)  # the width is used
        # Each rank's bar: compute, exposed comm less the bubble, the bubble, free, from its file.
        longest = max(step_means(f)["step_us"] for f in folders.values())
        for rank, folder in folders.items():
            t = step_means(folder)
            parts = (t["compute_us"], t["exposed_comm_us"] - t["bubble_us"], t["bubble_us"], t["free_us"])
            (line,) = [x for x in bars if x.startswith(f"  rank {rank} ")]
            assert tuple(line.count(g) for g in "█▓▒░") == part_cells(parts, longest, max(cells)), rank
        # Every finding of the cluster is said in full in its stage's section.
        for finding in summary.findings:
            assert group_digits(finding.title) in body, finding.title

        # Scroll: at 80x24 the chart is taller than the screen; n goes to the next stage.
        if chart.max_scroll_y:
            await pilot.press("end")
            assert chart.scroll_y == chart.max_scroll_y
            assert screen_text(app)[-2].startswith("  rank") or "partial" in joined(screen_text(app)[-4:])
            await pilot.press("home")
            assert chart.scroll_y == 0
            await pilot.press("pagedown")
            assert chart.scroll_y > 0
        await pilot.press("n", "n")
        want = min(chart.lines.stage_lines[1], chart.max_scroll_y)
        assert chart.scroll_y == want

        # m: the matrix in its place; Esc: the Ranks view; p again, Esc again.
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MatrixScreen), "the matrix")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is ranks, "the Ranks view")
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ParallelScreen), "the parallel view again")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is ranks, "the Ranks view again")


async def test_parallel_view_says_an_inferred_layout_plainly(ring):
    app = _app(ring)
    async with app.run_test(size=(80, 24)) as pilot:
        await _ranks(pilot)
        assert app.cluster.parallel is not None and app.cluster.parallel.source == "inferred"
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ParallelScreen), "the parallel view")
        await pilot.pause()
        text = screen_text(app)
        assert all(len(line) <= 80 for line in text)
        assert "INFERRED, not declared" in joined(text) and "tp ? · pp 1" in joined(text)
        lines = app.screen.query_one(StageChart).text_lines
        assert len([line for line in lines if line.startswith("  rank ") and "█" in line]) == 24


# ---------------------------------------------------------------- the communication matrix


@pytest.mark.parametrize("size", SIZES)
async def test_matrix_cells_slow_links_scroll_and_toggles(ring, size):
    folders = rank_folders(ring)
    truth = matrix_truth(folders)
    axis = sorted({x for pair in truth for x in pair})
    width, height = size
    app = _app(ring)
    async with app.run_test(size=size) as pilot:
        ranks = await _ranks(pilot)
        summary = app.cluster
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MatrixScreen), "the matrix")
        await pilot.pause()
        screen = app.screen
        matrix = screen.query_one(LinkMatrix)
        assert list(matrix.axis) == axis == list(range(24))

        # Every cell is the links the files hold, bandwidth = size / time.
        assert set(matrix.cells) == set(truth)
        for (src, dst), (size_mb, time_us) in truth.items():
            cell = matrix.cells[(src, dst)]
            assert cell.size_mb == pytest.approx(size_mb) and cell.time_us == pytest.approx(time_us)
            text = matrix.cell_text(src, dst)
            assert text.endswith(compact(size_mb / time_us * 1000.0).rjust(5)) and len(text) == CELL
        # The slow link: the summary's, the slowest HCCS link of the files, marked "!".
        slowest = min(truth, key=lambda k: truth[k][0] / truth[k][1])
        assert summary.slow_links == (f"{slowest[0]}->{slowest[1]} HCCS",)
        marked = [(s, d) for s in axis for d in axis if matrix.cell_text(s, d).startswith("!")]
        assert marked == [slowest]
        assert matrix.cell_text(0, 5) == "     ·"

        # On screen: the headers, whole cells only, the one-line legend; nothing past the edge.
        text = screen_text(app)
        assert all(len(line) <= width for line in text)
        legend = screen.query_one("#matrix-legend")
        assert legend.region.height == 1 and "cell GB/s · transport all · ! slow link" in str(legend.render())
        (head,) = [line for line in text if "src\\dst │" in line]
        shown_cols = head.split("│")[1].split()
        assert shown_cols == [str(a) for a in axis[: len(shown_cols)]]
        assert len(head.split("│")[1]) % CELL == 0  # no part of a cell at the right edge
        fits = len(shown_cols) == len(axis)
        assert fits == (width >= 160)
        matrix.move_to(*slowest)
        await pilot.pause()
        status = str(screen.query_one("#matrix-status").render())
        assert f"{slowest[0]} -> {slowest[1]} · HCCS" in status and "slow link" in status
        row = next(line for line in screen_text(app) if line.strip().startswith(f"{slowest[0]} │"))
        assert "!" in row

        # Scroll beyond the screen: the last column and the last row; the headers stay.
        matrix.focus()
        await pilot.press("end")
        await pilot.press(*["pagedown"] * 3)
        await pilot.pause()
        assert (matrix.row, matrix.col) == (len(axis) - 1, len(axis) - 1)
        text = screen_text(app)
        (head,) = [line for line in text if "src\\dst │" in line]
        assert head.split("│")[1].split()[-1] == str(axis[-1])
        assert any(line.strip().startswith(f"{axis[-1]} │") for line in text)
        if not fits:
            assert matrix.scroll_x > 0 and matrix.scroll_x % CELL == 0
        await pilot.press("home", "up")
        assert (matrix.row, matrix.col) == (len(axis) - 2, 0)

        # v: time, size, bandwidth again; t: the transports and back to all.
        src, dst = slowest
        size_mb, time_us = truth[slowest]
        await pilot.press("v")
        assert matrix.cell_text(src, dst) == f"!{compact(time_us):>5}" and "cell us" in str(legend.render())
        await pilot.press("v")
        assert matrix.cell_text(src, dst) == f"!{compact(size_mb):>5}" and "cell MB" in str(legend.render())
        await pilot.press("v")
        assert matrix.cell_text(src, dst) == f"!{compact(size_mb / time_us * 1000.0):>5}"
        assert screen.transports == ("all", "HCCS")
        await pilot.press("t")
        assert "transport HCCS" in str(legend.render()) and set(matrix.cells) == set(truth)
        await pilot.press("t")
        assert "transport all" in str(legend.render())

        await pilot.press("escape")
        await until(pilot, lambda: app.screen is ranks, "the Ranks view")


async def test_matrix_transport_filter_on_the_job(job):
    root, _ = job
    folders = rank_folders(root)
    app = _app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await _ranks(pilot)
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MatrixScreen), "the matrix")
        screen = app.screen
        matrix = screen.query_one(LinkMatrix)
        assert screen.transports == ("all", "HCCS", "LOCAL")
        everything = matrix_truth(folders)
        assert set(matrix.cells) == set(everything)
        for transport in ("HCCS", "LOCAL"):
            await pilot.press("t")
            assert screen.transport == transport
            truth = matrix_truth(folders, transport)
            assert set(matrix.cells) == set(truth) and set(truth) < set(everything)
            for key, (size_mb, time_us) in truth.items():
                assert matrix.cells[key].size_mb == pytest.approx(size_mb)
                assert matrix.cells[key].time_us == pytest.approx(time_us)
        assert all(src == dst for src, dst in matrix.cells)  # LOCAL: a rank with itself
        await pilot.press("t")
        assert screen.transport == "all"
        # p: the parallel view in its place.
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, ParallelScreen), "the parallel view")
