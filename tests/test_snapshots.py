"""SVG snapshots of the explorer at the sizes people run it in (update with --snapshot-update,
after looking at the difference in snapshot_report.html); the Ranks view of a generated
4-rank cluster at 80x24."""

from __future__ import annotations

import pytest
from pilot_helpers import wait_loaded
from textual.widgets import Input

from npuscope.fixtures.demo_profile import ensure_demo
from npuscope.fixtures.generate import generate
from npuscope.tui.app import NpuscopeApp


def _app() -> NpuscopeApp:
    return NpuscopeApp(ensure_demo(), cache=False)


async def _loaded(pilot) -> None:
    await wait_loaded(pilot)
    for field in pilot.app.screen.query(Input):  # a blinking cursor would differ between runs
        field.cursor_blink = False


def _after(*keys: str):
    async def run(pilot) -> None:
        await _loaded(pilot)
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
        for field in pilot.app.screen.query(Input):
            field.cursor_blink = False

    return run


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_main_screen_after_w(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, run_before=_after("w"))


def test_task_detail_80x24(snap_compare):
    assert snap_compare(_app(), terminal_size=(80, 24), run_before=_after("w", "enter"))


def test_cards_view_80x24(snap_compare):
    assert snap_compare(_app(), terminal_size=(80, 24), run_before=_after("v"))


def test_finding_detail(snap_compare):
    assert snap_compare(_app(), terminal_size=(120, 40), run_before=_after("i"))


def test_capture_screen(snap_compare, tmp_path, monkeypatch):
    monkeypatch.setenv("NPUSCOPE_CONFIG_DIR", str(tmp_path))  # no remembered host
    assert snap_compare(_app(), terminal_size=(120, 40), run_before=_after("c"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Four ranks, a slow rank and a slow link planted (the name is the same every run)."""
    root = tmp_path_factory.mktemp("snapshot-cluster") / "job"
    generate(
        root,
        layout="torch_npu",
        cards=4,
        problems=("slow_rank", "slow_link"),
        training=True,
        timeline=False,
        steps=2,
        ops_per_step=60,
    )
    return root


async def _ranks_view(pilot) -> None:
    app = pilot.app
    while app.ranks is None or app.screen is not app.ranks:  # waits on the app's messages
        await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def test_ranks_view_80x24(snap_compare, cluster):
    assert snap_compare(
        NpuscopeApp(cluster, cache=False, clusters=True), terminal_size=(80, 24), run_before=_ranks_view
    )


@pytest.fixture(scope="module")
def parallel_job(tmp_path_factory):
    """tp1 pp2 dp2 with every plant; the last stage's ranks without kernel_details."""
    from npuscope.fixtures.parallel_cluster import generate_parallel

    root = tmp_path_factory.mktemp("snapshot-parallel") / "job"
    generate_parallel(root, tp=1, pp=2, dp=2)
    return root


def _ranks_then(key: str):
    async def run(pilot) -> None:
        await _ranks_view(pilot)
        pilot.app.clear_notifications()  # the cluster's note, shown as a toast on opening
        await pilot.press(key)
        await pilot.pause()

    return run


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
@pytest.mark.parametrize("key", ["p", "m"])
def test_parallel_and_matrix_views(snap_compare, parallel_job, key, size):
    app = NpuscopeApp(parallel_job, cache=False, clusters=True)
    assert snap_compare(app, terminal_size=size, run_before=_ranks_then(key))
