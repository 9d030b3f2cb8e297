"""What real captures showed in the field (issue 22), each checked against the files themselves.

- Host API (and every training-level view) on the card the capture's tasks are on, when a
  torch_npu kernel_details carries a Device_id that is not the folder's rank.
- A flat folder's `api_statistic.csv` beside `op_summary.csv` is read.
- Notes say what was read: a step_trace_time.csv read but of no use is said once, and no
  note claims a file is missing that was there.
- small_packets uses msprof-analyze's per-transport sizes (SDMA 16 MB, RDMA 1 MB).
- compare of a Level0 capture (no op types) with a Level1 one says why op types are not
  compared instead of listing every type as vanished / new.

Real captures are copied into tmp_path and edited there with the csv / json modules; the
truth is read back from the edited files with the same modules, never from npuscope.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from npuscope.analysis import diagnose
from npuscope.analysis.thresholds import Thresholds
from npuscope.analysis.training_rules import training_findings
from npuscope.cli import main
from npuscope.fixtures.generate import generate
from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.training import read_training_views

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real"
CNN = REAL / "torch_npu_2024_cnn"
GPT3 = REAL / "torch_npu_2023_gpt3_2rank"

# An api_statistic as msprof and torch_npu write it (FORMATS.md section 5): Device_id `host`.
API_HEADER = ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance"]
API_ROWS = [
    ["host", level, api, f"{total:.3f}", str(count), f"{total / count:.3f}", "1.000", f"{top:.3f}", "0.000"]
    for level, api, total, count, top in [
        ("acl", "aclopCompileAndExecute", 115014.487, 24, 7663.643),
        ("acl", "aclrtMemcpy", 2706.317, 1, 2706.317),
        ("acl", "aclrtSynchronizeStream", 2101.136, 1, 2101.136),
        ("acl", "aclopExecuteV2", 594.121, 36, 29.364),
        ("acl", "aclrtMemcpyAsync", 321.5, 12, 60.0),
        ("acl", "aclrtMalloc", 210.25, 5, 90.5),
        ("acl", "aclrtFree", 120.75, 5, 40.25),
        ("acl", "aclCreateTensorDesc", 88.5, 40, 4.5),
        ("acl", "aclDestroyTensorDesc", 60.25, 40, 3.25),
        ("acl", "aclrtSetDevice", 1500.0, 1, 1500.0),
        ("runtime", "rtKernelLaunch", 900.5, 60, 30.5),
        ("runtime", "rtStreamSynchronize", 2050.0, 1, 2050.0),
        ("runtime", "rtMemcpyAsync", 300.0, 12, 50.0),
        ("node", "launch", 450.0, 60, 20.0),
        ("model", "ModelExecute", 75.0, 3, 30.0),
        ("hccl", "HcclAllReduce", 640.0, 4, 400.0),
    ]
]


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def _write(path: Path, rows: list[list[str]]) -> None:
    if path.exists():
        path.chmod(0o644)  # the shared samples are read-only; their copies are edited
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows(rows)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def _with_device_id(kernel_details: Path, device: str) -> None:
    """A newer torch_npu kernel_details: a leading Device_id column."""
    rows = _rows(kernel_details)
    _write(kernel_details, [["Device_id", *rows[0]], *([device, *r] for r in rows[1:])])


def _write_api_statistic(out: Path) -> dict[str, tuple[int, float]]:
    _write(out / "api_statistic.csv", [API_HEADER, *API_ROWS])
    rows = _rows(out / "api_statistic.csv")
    return {r[2]: (int(r[4]), float(r[3])) for r in rows[1:]}


def _run(*args: str) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(list(args)) == 0
    return buffer.getvalue()


def _report(path: Path) -> dict:
    return json.loads(_run("report", str(path), "--format", "json", "--no-cache"))


def _views(path: Path):
    return read_training_views(open_profile(path, cache=FrameCache(enabled=False)))


# --------------------------------------------------------------------------- host API's card


def test_host_api_on_the_card_of_the_tasks(tmp_path):
    """A torch_npu capture whose kernel_details say Device_id 6 (its profiler_info says rank 0):
    the api_statistic rows and the step_trace_time row are card 6's, as its tasks are."""
    cap = _copy(CNN / "level1" / "rank0_ascend_pt", tmp_path / "cap" / "rank0_ascend_pt")
    out = cap / "ASCEND_PROFILER_OUTPUT"
    _with_device_id(out / "kernel_details.csv", "6")
    truth = _write_api_statistic(out)
    assert len(truth) == 16
    step_row = dict(zip(*_rows(out / "step_trace_time.csv")[:2]))

    report = _report(tmp_path / "cap")
    (card,) = report["cards"]
    assert card["card"] == "6"
    got = {r["api"]: (r["count"], r["total_us"]) for r in card["host_api"]}
    assert set(got) == set(truth)
    for api, (count, total) in truth.items():
        assert got[api][0] == count and got[api][1] == pytest.approx(total, abs=1e-3)
    (step,) = card["steps"]
    assert step["compute_us"] == pytest.approx(float(step_row["Computing"]), abs=1e-3)
    assert step["free_us"] == pytest.approx(float(step_row["Free"]), abs=1e-3)
    notes = report["source"]["view_notes"]
    assert not [n for n in notes if "derived from the tasks" in n], notes


def test_cluster_rank_on_another_device(tmp_path):
    """Rank 1 of a two-rank job ran on device 4 (its kernel_details say so): its files' steps,
    communication and host API rows are device 4's, each once (no derived second row)."""
    root = tmp_path / "job"
    for rank in (0, 1):
        _copy(CNN / "level1" / f"rank{rank}_ascend_pt", root / f"rank{rank}_ascend_pt")
    out = root / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    _with_device_id(out / "kernel_details.csv", "4")
    truth = _write_api_statistic(out)
    ops = sum(
        1
        for step in json.loads((out / "communication.json").read_text()).values()
        for kind in step.values()
        for name in kind
        if name != "Total Op Info"
    )

    views = _views(root / "rank1_ascend_pt")
    assert set(views.steps["card"].to_list()) == {"4"} and views.steps.height == 1
    assert set(views.communication["card"].to_list()) == {"4"} and views.communication.height == ops
    assert set(views.host_api["card"].to_list()) == {"4"}
    assert {r["api"]: r["count"] for r in views.host_api.iter_rows(named=True)} == {k: v[0] for k, v in truth.items()}
    assert not [n for n in views.notes if "derived" in n], views.notes


# --------------------------------------------------------------------------- flat api_statistic.csv


def test_flat_api_statistic_beside_op_summary(tmp_path):
    flat = tmp_path / "flat"
    flat.mkdir()
    shutil.copyfile(
        CNN / "level1" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", flat / "op_summary.csv"
    )
    truth = _write_api_statistic(flat)

    views = _views(flat)
    assert "host_api: api_statistic.csv" in views.found
    got = {r["api"]: (r["count"], r["total_us"]) for r in views.host_api.iter_rows(named=True)}
    assert set(got) == set(truth)
    for api, (count, total) in truth.items():
        assert got[api][0] == count and got[api][1] == pytest.approx(total, abs=1e-3)
    # The file opened on its own still reads nothing beside it.
    alone = _views(flat / "op_summary.csv")
    assert not [f for f in alone.found if f.startswith("host_api")]


# --------------------------------------------------------------------------- notes


def _inspect(path: Path) -> list[str]:
    return _run("inspect", str(path), "--no-cache").splitlines()


def _gpt3_rank0(tmp_path: Path, edit) -> Path:
    cap = _copy(GPT3 / "test_rank_0", tmp_path / "cap" / "test_rank_0")
    path = cap / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    _write(path, edit(_rows(path)))
    return tmp_path / "cap"


def test_a_damaged_step_file_is_said_once_and_not_called_missing(tmp_path):
    def empty_computing(rows):
        rows[1][rows[0].index("Computing")] = ""
        return rows

    lines = _inspect(_gpt3_rank0(tmp_path, empty_computing))
    notes = [line for line in lines if line.startswith("note")]
    assert len([n for n in notes if "step_trace_time.csv" in n]) == 1, notes
    (derived,) = [n for n in notes if "steps derived from the tasks" in n]
    assert "step_trace_time.csv" not in derived
    assert not [line for line in lines if line.split()[:2] == ["steps", "step_trace_time.csv"]]


def test_step_values_missing_on_every_row(tmp_path):
    """Two rows, no Step value: they cannot be told apart; said once, steps from the tasks."""

    def two_unnamed(rows):
        rows[1][0] = ""
        return [rows[0], rows[1], list(rows[1])]

    lines = _inspect(_gpt3_rank0(tmp_path, two_unnamed))
    notes = [line for line in lines if line.startswith("note")]
    said = [n for n in notes if "step_trace_time.csv" in n]
    assert len(said) == 1 and "step_trace_time.csv has no Step values: steps derived from the tasks" in said[0]
    assert [line.split() for line in lines if line.strip().startswith("steps ")] == [
        ["steps", "tasks,", "steps", "by", "Step", "Id"]
    ]


def test_one_row_without_a_step_is_used_and_no_derived_note(tmp_path):
    """torch_npu leaves Step empty on its one row when the run has no step boundaries; with the
    card of its tasks elsewhere (Device_id 6) the file is still the card's, and no note says
    steps were derived."""
    cap = _copy(CNN / "level1" / "rank0_ascend_pt", tmp_path / "cap" / "rank0_ascend_pt")
    out = cap / "ASCEND_PROFILER_OUTPUT"
    _with_device_id(out / "kernel_details.csv", "6")
    rows = _rows(out / "step_trace_time.csv")
    rows[1][0] = ""
    _write(out / "step_trace_time.csv", rows)
    lines = _inspect(tmp_path / "cap")
    assert ["steps", "step_trace_time.csv"] in [line.split() for line in lines]
    assert not [
        line for line in lines if "derived from the tasks (no step_trace_time" in line or "steps derived" in line
    ]


# --------------------------------------------------------------------------- small packets


@pytest.fixture(scope="module")
def clean_job(tmp_path_factory) -> Path:
    """A clean generated two-rank torch_npu job with its training-level files."""
    g = generate(
        tmp_path_factory.mktemp("job"),
        layout="torch_npu",
        cards=2,
        problems=(),
        training=True,
        steps=2,
        ops_per_step=60,
        timeline=False,
    )
    return g.root


def _resize(job: Path, to: Path, transport: str, mb: float) -> dict[str, tuple[int, int, float, float]]:
    """A copy of `job` whose collectives each move `mb` MB over `transport` (and nothing over
    the others); per rank folder: (calls, calls that moved data, their elapse us, all elapse us)."""
    shutil.copytree(job, to)
    truth = {}
    for path in sorted(to.glob("*/ASCEND_PROFILER_OUTPUT/communication.json")):
        data = json.loads(path.read_text())
        calls = moved = 0
        small_us = total_us = 0.0
        for step in data.values():
            for kind in step.values():
                for name, op in kind.items():
                    if name == "Total Op Info":
                        continue
                    for t, info in op["Communication Bandwidth Info"].items():
                        size = mb if t == transport or (transport == "SDMA" and t == "HCCS") else 0.0
                        info["Transit Size(MB)"] = size
                    calls += 1
                    elapse = op["Communication Time Info"]["Elapse Time(ms)"] * 1000.0
                    total_us += elapse
                    if op["Communication Bandwidth Info"][transport]["Transit Size(MB)"] > 0:
                        moved += 1
                        small_us += elapse
        path.write_text(json.dumps(data))
        truth[path.parent.parent.name] = (calls, moved, small_us, total_us)
    return truth


def _small(path: Path, th: Thresholds | None = None):
    profile = open_profile(path, cache=FrameCache(enabled=False))
    return [
        f
        for f in training_findings(profile, diagnose(profile), read_training_views(profile), th)
        if f.rule == "small_packets"
    ]


def test_sdma_calls_under_16_mb_are_small(clean_job, tmp_path):
    # 32 packets of 0.262144 MB per call: 8.4 MB over SDMA, above the old 1 MB for every call.
    mb = 32 * 0.262144
    truth = _resize(clean_job, tmp_path / "sdma", "SDMA", mb)
    assert 1.0 < mb < 16.0
    for folder, (calls, moved, small_us, total_us) in truth.items():
        assert moved == calls > 0 and small_us == pytest.approx(total_us)
        (f,) = _small(tmp_path / "sdma" / folder)
        assert f.count == calls and f.time_us == pytest.approx(small_us, rel=1e-6)
        assert f.share_pct == pytest.approx(100.0, abs=1e-3) and "SDMA under 16 MB" in f.title
    # With the old single size (16 MB moved down to 1 MB), nothing.
    old = Thresholds(small_sdma_mb=1.0)
    assert all(_small(tmp_path / "sdma" / folder, old) == [] for folder in truth)


def test_rdma_calls_of_2_mb_are_not_small_and_of_half_a_mb_are(clean_job, tmp_path):
    truth = _resize(clean_job, tmp_path / "rdma2", "RDMA", 2.0)
    for folder in truth:
        assert _small(tmp_path / "rdma2" / folder) == []
    truth = _resize(clean_job, tmp_path / "rdma05", "RDMA", 0.5)
    for folder, (calls, _, small_us, _) in truth.items():
        (f,) = _small(tmp_path / "rdma05" / folder)
        assert f.count == calls and f.time_us == pytest.approx(small_us, rel=1e-6) and "RDMA under 1 MB" in f.title


# --------------------------------------------------------------------------- compare Level0 / Level1


def test_compare_level0_with_level1_says_why_op_types_are_not_compared():
    base = str(CNN / "level0" / "rank0_ascend_pt")
    new = str(CNN / "level1" / "rank0_ascend_pt")
    with open(CNN / "level0" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as fh:
        assert {r["Type"] for r in csv.DictReader(fh)} == {"N/A"}  # Level0: no op types
    for fmt in ("text", "markdown"):
        out = _run("compare", base, new, "--format", fmt, "--no-cache")
        assert out.count("BASE has no op types") == 1, out
        assert "capture both at Level1" in out
        assert "vanished" not in out and "Vanished:" not in out and "New:" not in out
        section = out.split("Op types", 1)[1].split("Steps", 1)[0]
        assert "not comparable" in section and "TransData" not in section  # a Level1 type, not "new"
    doc = json.loads(_run("compare", base, new, "--format", "json", "--no-cache"))
    assert doc["schema"] == "npuscope.compare/1" and doc["op_types"] == []
    assert len([n for n in doc["notes"] if "BASE has no op types" in n]) == 1
    # Level1 against Level1 still compares every type.
    same = json.loads(_run("compare", new, new, "--format", "json", "--no-cache"))
    assert same["op_types"] and not [n for n in same["notes"] if "no op types" in n]
