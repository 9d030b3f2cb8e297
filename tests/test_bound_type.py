"""The bound type of each op type (analysis/bound.py) on the real captures with PMU columns
equals the one computed here from the files with csv / sqlite3 and the documented rule:
per pipe the largest of its ratio columns per task, the duration-weighted mean per op type,
the busiest pipe wins, `mixed` below bound_min_pct, `unknown` without values."""

from __future__ import annotations

import csv
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from npuscope.analysis import diagnose
from npuscope.analysis.report import build_report
from npuscope.analysis.thresholds import Thresholds
from npuscope.parsers import open_profile

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
REAL = SAMPLES / "real"
# The documented pipes, written out again here (README "Bound type"), in tie order.
PIPES = {
    "cube": ("aic_mac_ratio", "mac_ratio"),
    "vector": ("aiv_vec_ratio", "vec_ratio"),
    "memory-in": ("aic_mte2_ratio", "aiv_mte2_ratio", "mte2_ratio"),
    "memory-out": ("aiv_mte3_ratio", "mte3_ratio", "aic_fixpipe_ratio"),
    "scalar": ("aic_scalar_ratio", "aiv_scalar_ratio", "scalar_ratio"),
}
NOT_CORE = {"AI_CPU", "CPU", "HCCL", "COMMUNICATION"}
MIN_PCT = Thresholds().bound_min_pct


def _number(text: str | None) -> float | None:
    try:
        return float(str(text).strip())
    except (TypeError, ValueError):
        return None


def _bounds(tasks: list[tuple[str, float, dict[str, float | None]]]) -> dict[str, str]:
    """op type -> bound from (op type, duration, {column: ratio}) per task."""
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    seen: dict[str, set[str]] = defaultdict(set)
    for op_type, dur, ratios in tasks:
        for pipe, cols in PIPES.items():
            values = [v for c in cols if (v := ratios.get(c)) is not None]
            if values:
                acc = sums[op_type][pipe]
                acc[0] += max(values) * dur
                acc[1] += dur
                seen[op_type].add(pipe)
    out = {}
    for op_type, _, _ in tasks:
        means = [(p, sums[op_type][p][0] / sums[op_type][p][1]) for p in PIPES if p in seen[op_type]]
        if not means:
            out[op_type] = "unknown"
            continue
        best = max(means, key=lambda pv: pv[1])
        out[op_type] = best[0] if best[1] * 100 >= MIN_PCT else "mixed"
    return out


def _report_bounds(folder: Path) -> dict[str, dict[str, str]]:
    profile = open_profile(folder)
    report = build_report(profile, diagnose(profile))
    return {c["card"]: {r["op_type"]: r["bound"] for r in c["op_statistic"]} for c in report["cards"]}


def _csv_truth(path: Path, type_col: str, core_col: str, dur_col: str) -> dict[str, str]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    tasks = [
        (r[type_col], float(r[dur_col]), {c: _number(r.get(c)) for cols in PIPES.values() for c in cols})
        for r in rows
        if r[core_col] not in NOT_CORE
    ]
    return _bounds(tasks)


def test_torch_npu_2024_cnn_level1_old_pmu_names():
    got = _report_bounds(REAL / "torch_npu_2024_cnn" / "level1")
    for rank in ("0", "1"):
        path = (
            REAL
            / "torch_npu_2024_cnn"
            / "level1"
            / f"rank{rank}_ascend_pt"
            / "ASCEND_PROFILER_OUTPUT"
            / "kernel_details.csv"
        )
        truth = _csv_truth(path, "Type", "Accelerator Core", "Duration(us)")
        assert truth and set(truth.values()) - {"unknown", "mixed"}  # the sample has real ratios
        for op_type, bound in got[rank].items():
            assert bound == truth.get(op_type, "unknown"), (rank, op_type)


def test_torch_npu_2025_db_level1_task_pmu_info():
    got = _report_bounds(REAL / "torch_npu_2025_db" / "level1")
    for rank in ("0", "1"):
        db = (
            REAL
            / "torch_npu_2025_db"
            / "level1"
            / f"rank{rank}_ascend_pt"
            / "ASCEND_PROFILER_OUTPUT"
            / f"ascend_pytorch_profiler_{rank}.db"
        )
        con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
        names = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        pmu: dict[int, dict[str, float | None]] = defaultdict(dict)
        for gid, name, value in con.execute("SELECT globalTaskId, name, value FROM TASK_PMU_INFO"):
            pmu[gid][names[name]] = _number(value)
        tasks = [
            (names[op], (end - start) / 1000.0, pmu.get(gid, {}))
            for gid, op, tt, start, end in con.execute(
                "SELECT c.globalTaskId, c.opType, c.taskType, t.startNs, t.endNs FROM COMPUTE_TASK_INFO c "
                "JOIN TASK t ON t.globalTaskId = c.globalTaskId"
            )
            if names.get(tt) not in NOT_CORE
        ]
        con.close()
        truth = _bounds(tasks)
        assert {"memory-in", "scalar"} <= set(truth.values())
        assert got[rank] and all(bound == truth.get(op, "unknown") for op, bound in got[rank].items()), rank


def test_golden_msprof_and_torch_npu_sample():
    for folder, path, cols in (
        (
            SAMPLES / "msprof_golden",
            SAMPLES / "msprof_golden" / "mindstudio_profiler_output" / "op_summary_20240605100000.csv",
            ("OP Type", "Task Type", "Task Duration(us)"),
        ),
        (
            SAMPLES / "torch_npu_ascend_pt",
            SAMPLES / "torch_npu_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv",
            ("Type", "Accelerator Core", "Duration(us)"),
        ),
    ):
        truth = _csv_truth(path, *cols)
        (card,) = _report_bounds(folder).values()
        # The golden rows have empty OP Type and Task Type: npuscope's `unknown` type.
        for op_type, bound in card.items():
            assert bound == truth.get(op_type, truth.get("", "unknown")), (folder.name, op_type)


def test_no_ratio_columns_means_unknown():
    """The GPT-3 capture's metric set (memory bandwidths) has no *_ratio column."""
    with (
        REAL / "torch_npu_2023_gpt3_2rank" / "test_rank_1" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    ).open() as fh:
        header = next(csv.reader(fh))
    assert not any(c.endswith("_ratio") for c in header)
    for card in _report_bounds(REAL / "torch_npu_2023_gpt3_2rank").values():
        assert set(card.values()) == {"unknown"}


@pytest.mark.parametrize("min_pct", [0.0, 100.0])
def test_bound_min_pct_moves_the_mixed_line(min_pct):
    from npuscope.analysis.bound import op_type_bounds

    profile = open_profile(REAL / "torch_npu_2024_cnn" / "level1")
    bounds = set(op_type_bounds(profile.tasks, min_pct)["bound"].to_list())
    if min_pct == 0.0:
        assert "mixed" not in bounds
    else:  # no pipe is busy all the time
        assert bounds <= {"mixed", "unknown"}
