"""The explorer and `npuscope report` show the same findings and the same bound types.

The explorer opens profiles with the pipe ratio columns only (`pmu="ratios"`), the report with
every PMU column: on real captures with PMU data (the 2024 CNN text export, the 2025 db
export) every finding of every card (rule, title, time at stake), the training-level ones
included once the views are read, and the Bound of every op type in Op statistics are the
ones the report's JSON gives. Both captures are clusters of two ranks: the explorer opens
them as their Ranks view and each rank from there, the report with `--card all`.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from pilot_helpers import wait_loaded

from npuscope.cli import main
from npuscope.tui.app import NpuscopeApp
from npuscope.tui.widgets.frame_table import FrameTable
from npuscope.tui.widgets.ranks_table import RanksTable

CAPTURES = ("real/torch_npu_2024_cnn/level1", "real/torch_npu_2025_db/level1")


def _report(path) -> dict:
    # Both captures are clusters of two rank folders: --card all reports every rank after the
    # cluster section, as the explorer opens them one at a time from its Ranks view. In this
    # process (cli.main): the real command line is tested in test_report.py / test_cli.py.
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["report", str(path), "--format", "json", "--no-cache", "--card", "all"]) == 0
    return json.loads(buffer.getvalue())


def _key(rule: str, title: str, time_us: float) -> tuple[str, str, float]:
    return rule, title, round(time_us, 3)


async def _until(pilot, predicate, what: str) -> None:
    for _ in range(6000):  # a bound on the wait, not a timing assertion
        if predicate():
            return
        await pilot.pause(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("capture", CAPTURES)
async def test_explorer_findings_and_bounds_are_the_reports(samples, tmp_path, monkeypatch, capture):
    path = samples / capture
    report = _report(path)
    monkeypatch.setenv("NPUSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    app = NpuscopeApp(path, cache=True, export_dir=tmp_path / "exports", clusters=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await _until(pilot, lambda: app.ranks is not None and app.screen is app.ranks, "the Ranks view")
        await _until(pilot, lambda: app.ranks.query(RanksTable), "the ranks table")
        await pilot.pause()
        # The cluster's own findings (slow ranks, slow links) are the report's.
        summary = app.ranks.summary
        assert list(summary.slow_ranks) == report["cluster"]["slow_ranks"]
        assert list(summary.slow_links) == report["cluster"]["slow_links"]
        ranks = [c["card"] for c in report["cards"]]
        assert ranks == [r.rank for r in summary.ranks]
        bounds_seen = set()
        for n, card in enumerate(report["cards"]):
            if n == 0:
                app.ranks.query_one(RanksTable).move_to_key(card["card"], key="rank")
                await pilot.press("enter")
            else:
                await pilot.press("]")
            await _until(pilot, lambda c=card: app.rank == c["card"] and app.loading is None, "the rank")
            screen = await wait_loaded(pilot)
            await _until(pilot, lambda s=screen: s.views is not None, "the training views")
            await app.workers.wait_for_complete()
            await pilot.pause()
            diagnosis = screen.loaded[1]
            assert list(diagnosis.cards) == [card["card"]]
            want = sorted(_key(f["rule"], f["title"], f["time_us"]) for f in card["findings"])
            got = sorted(_key(f.rule, f.title, f.time_us) for f in diagnosis.for_card(card["card"]))
            assert got == want, card["card"]
            # Op statistics: the Bound column the explorer shows for the rank.
            await pilot.press("2")
            await pilot.pause()
            table = screen.query_one("#stats-table", FrameTable)
            # The tab counts op types as the header and the report do (distinct OP Types).
            status = str(screen.query_one("#status").render())
            assert status.startswith(f"{card['summary']['op_types']:,} op types"), status
            shown = {(r["op_type"], r["core_type"]): r["bound"] for r in table.frame.to_dicts()}
            want_bounds = {(s["op_type"], s["core_type"]): s["bound"] for s in card["op_statistic"]}
            assert shown == want_bounds
            bounds_seen |= set(shown.values())
            await pilot.press("1")
        # The captures have PMU ratios: bounds are named, not all unknown.
        assert bounds_seen - {"unknown", "mixed"}


def test_ratios_keep_only_the_pipe_ratio_columns(samples):
    from npuscope.parsers import FrameCache, open_profile
    from npuscope.parsers.columns import TASK_ORDER

    golden = samples / "msprof_golden"
    full = open_profile(golden, cache=FrameCache(enabled=False))
    ratios = open_profile(golden, cache=FrameCache(enabled=False), pmu="ratios")
    header = next(p for p in full.files if p.name.startswith("op_summary")).read_text().splitlines()[0]
    want = [c.strip() for c in header.split(",") if c.strip().endswith("_ratio")]
    assert want and [c for c in ratios.tasks.columns if c not in TASK_ORDER] == want
    assert ratios.tasks.select(want).equals(full.tasks.select(want))
