"""Every sample capture, real ones included, opens in the explorer: no error, no warning."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from pilot_helpers import wait_loaded

from npuscope.tui.app import NpuscopeApp

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
REAL = SAMPLES / "real"
OPENABLE = [
    SAMPLES / "msprof_golden",
    SAMPLES / "cann5x_device_summary",
    SAMPLES / "cann5x_device_summary" / "op_summary_spreadsheet_mangled.csv",
    SAMPLES / "torch_npu_ascend_pt",
    SAMPLES / "paddle_cpu",
    REAL / "torch_npu_2023_gpt3_2rank",
    REAL / "torch_npu_2024_cnn" / "level0",
    REAL / "torch_npu_2024_cnn" / "level1",
    REAL / "torch_npu_2024_cnn" / "level1" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json",
    REAL / "torch_npu_2025_db" / "level0",
    REAL / "torch_npu_2025_db" / "level1",
    REAL / "msprof_db_2023",
]


@pytest.mark.parametrize("path", OPENABLE, ids=lambda p: str(p.relative_to(SAMPLES)))
async def test_sample_opens_in_the_explorer(path, tmp_path):
    app = NpuscopeApp(path, cache=False, export_dir=tmp_path / "exports")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await wait_loaded(pilot)
            assert app.error_message is None
            header = str(screen.query_one("#header").render())
            assert "tasks" in header and "None" not in header and "N/A" not in header
            for card in screen.profile.cards[1:2]:  # the next card renders too
                await pilot.press("right_square_bracket")
                await pilot.pause()
                assert screen.card == card


async def test_header_says_damaged_times_and_skipped_rows(tmp_path):
    mangled = SAMPLES / "cann5x_device_summary" / "op_summary_spreadsheet_mangled.csv"
    app = NpuscopeApp(mangled, cache=False, export_dir=tmp_path / "exports")
    async with app.run_test(size=(160, 30)) as pilot:
        screen = await wait_loaded(pilot)
        assert "start times damaged" in str(screen.query_one("#header").render())
    app = NpuscopeApp(REAL / "torch_npu_2023_gpt3_2rank", cache=False, export_dir=tmp_path / "exports")
    async with app.run_test(size=(160, 30)) as pilot:
        screen = await wait_loaded(pilot)
        assert "1 damaged row(s) skipped" in str(screen.query_one("#header").render())
