"""Low parallelism (Block Dim far below the card's cores) and advice for an application's own
kernel: a custom Ascend C matmul captured with `msprof --application`, written here as the
msprof text export it makes (the real Era B op_summary header of the golden sample), must be
told low-parallelism and memory-bound, never recompilation, online compilation or aclop."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest

from npuscope.analysis import diagnose
from npuscope.analysis.report import build_report, render
from npuscope.analysis.rules import custom_kernel, framework_of
from npuscope.fixtures.generate import generate
from npuscope.parsers import open_profile
from npuscope.parsers.device_info import CHIP_CORES, device_info

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
GOLDEN = SAMPLES / "msprof_golden" / "mindstudio_profiler_output" / "op_summary_20240605100000.csv"
FORBIDDEN = ("jit", "FLAGS_npu", "set_compile_mode", "aclop", "recompil", "aclopSetCompileFlag")
CALLS = 12
KERNEL_US = 1500.0  # long enough for long_task too: its advice must be the kernel's own


def _header() -> list[str]:
    with GOLDEN.open(newline="") as fh:
        return next(csv.reader(fh))


def _kernel_row(header: list[str], i: int, *, block: int = 2) -> list[str]:
    """One call of the custom matmul: Block Dim 2, aic_mac_ratio 0.044, aic_mte2_ratio 0.33."""
    values = {
        "Device_id": "0",
        "Model ID": "4294967295",
        "Task ID": str(10 + i),
        "Stream ID": "2",
        "Op Name": "matmul_custom",
        "OP Type": "matmul_custom",
        "OP State": "N/A",
        "Task Type": "AI_CORE",
        "Task Start Time(us)": f"{1717575960208020 + i * 2000}.758\t",
        "Task Duration(us)": f"{KERNEL_US:.3f}",
        "Task Wait Time(us)": "0" if i == 0 else "500.000000",
        "Block Num": str(block),
        "Mix Block Num": "0",
        "HF32 Eligible": "N/A",
        "Context ID": "N/A",
        "aicore_time(us)": "1480.0",
        "aic_total_cycles": "5043798",
        "aic_mac_time(us)": "65.1",
        "aic_mac_ratio": "0.044",
        "aic_scalar_time(us)": "148.0",
        "aic_scalar_ratio": "0.1",
        "aic_mte1_time(us)": "74.0",
        "aic_mte1_ratio": "0.05",
        "aic_mte2_time(us)": "488.4",
        "aic_mte2_ratio": "0.33",
        "aic_fixpipe_time(us)": "29.6",
        "aic_fixpipe_ratio": "0.02",
        "aic_icache_miss_rate": "0.01",
    }
    return [
        values.get(h, "N/A" if h in ("Input Shapes", "Output Shapes") or "Format" in h or "Data Types" in h else "0")
        for h in header
    ]


def _export(root: Path, *, info: dict | None) -> Path:
    """A PROF_ folder of the kernel's export; `info` is device_0/info.json.0 (None: absent)."""
    prof = root / "PROF_000001_20260101000000000_CUSTOMK"
    out = prof / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    header = _header()
    with (out / "op_summary_20260101000000.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i in range(CALLS):
            w.writerow(_kernel_row(header, i))
    if info is not None:
        (prof / "device_0").mkdir()
        (prof / "device_0" / "info.json.0").write_text(json.dumps(info))
    return prof


INFO = {
    "DeviceInfo": [{"id": 0, "ai_core_num": 24, "aiv_num": 48, "aic_frequency": "1800"}],
    "platform_version": "Ascend910B2",
    "rank_id": 0,
}


@pytest.fixture
def kernel_capture(tmp_path) -> Path:
    return _export(tmp_path, info=INFO)


def test_header_is_the_real_era_b_header():
    header = _header()
    assert "Block Num" in header and "aic_mac_ratio" in header and "aic_mte2_ratio" in header


def test_custom_kernel_is_low_parallelism_and_memory_bound(kernel_capture):
    profile = open_profile(kernel_capture)
    assert framework_of(profile.layout, profile) == "acl"
    diag = diagnose(profile)
    low = [f for f in diag.findings if f.rule == "low_parallelism"]
    assert len(low) == 1
    f = low[0]
    assert f.count == CALLS and f.time_us == pytest.approx(CALLS * KERNEL_US)
    assert "Block Dim 2" in f.title and "24 AI cores" in f.title and "memory-bound" in f.title
    assert "info.json.0" in f.threshold and "assumed" not in f.threshold
    assert f.op_types == ("matmul_custom",) and len(f.evidence) == diag.thresholds.evidence_rows
    dominant = next(f for f in diag.findings if f.rule == "dominant_op_type")
    assert "custom kernel" in dominant.title and "memory-bound" in dominant.title
    assert dominant.severity == "warning" and "Block Dim" in dominant.advice
    rules = {f.rule for f in diag.findings}
    assert "recompilation" not in rules and "aclop_share" not in rules
    for finding in diag.findings:
        text = f"{finding.title} {finding.advice}"
        assert not any(word in text for word in FORBIDDEN), (finding.rule, text)


def test_custom_kernel_report_op_statistics_say_memory_bound(kernel_capture):
    profile = open_profile(kernel_capture)
    report = build_report(profile, diagnose(profile))
    (row,) = report["cards"][0]["op_statistic"]
    assert row["op_type"] == "matmul_custom" and row["bound"] == "memory-in"
    text = render(report, "text")
    assert "Bound" in text and "memory-in" in text
    assert not any(word in text for word in ("FLAGS_npu_jit_compile", "set_compile_mode"))


def test_block_dim_at_the_core_count_is_not_low(tmp_path):
    prof = tmp_path / "PROF_000001_20260101000000000_CUSTOMK"
    _export(tmp_path, info=INFO)
    path = prof / "mindstudio_profiler_output" / "op_summary_20260101000000.csv"
    header = _header()
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i in range(CALLS):
            w.writerow(_kernel_row(header, i, block=24))
    diag = diagnose(open_profile(prof))
    assert not [f for f in diag.findings if f.rule == "low_parallelism"]


def test_without_core_counts_no_low_parallelism_but_still_no_recompilation_advice(tmp_path):
    profile = open_profile(_export(tmp_path, info=None))
    assert device_info(profile.capture, profile.cards) == {}
    diag = diagnose(profile)
    assert "low_parallelism" not in {f.rule for f in diag.findings}
    for finding in diag.findings:
        assert not any(word in f"{finding.title} {finding.advice}" for word in FORBIDDEN), finding.rule


def test_core_counts_assumed_from_the_chip_name_are_said(tmp_path):
    """An info.json that names the chip without counts: the counts of CHIP_CORES, said so."""
    profile = open_profile(_export(tmp_path, info={"platform_version": "Ascend910B3", "DeviceInfo": [{"id": 0}]}))
    (f,) = [f for f in diagnose(profile).findings if f.rule == "low_parallelism"]
    aic, aiv = CHIP_CORES["Ascend910B3"]
    assert f"{aic} AI cores" in f.title and "assumed from the chip name Ascend910B3" in f.threshold


def test_core_counts_of_real_db_exports_come_from_npu_info():
    """Real db exports name the chip in NPU_INFO (read here with sqlite3): counts assumed."""
    for folder, db in (
        ("real/msprof_db_2023", "real/msprof_db_2023/msprof_0.db"),
        (
            "real/torch_npu_2025_db/level1",
            "real/torch_npu_2025_db/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db",
        ),
    ):
        con = sqlite3.connect(f"file:{SAMPLES / db}?mode=ro&immutable=1", uri=True)
        chips = {str(i): n for i, n in con.execute("SELECT id, name FROM NPU_INFO")}
        con.close()
        profile = open_profile(SAMPLES / folder)
        infos = device_info(profile.capture, profile.cards)
        assert infos, folder
        for info in infos.values():
            assert info.assumed and info.chip in chips.values()
            assert (info.ai_core_num, info.aiv_num) == CHIP_CORES[info.chip]


def test_era_a_generated_counts_come_from_info_json(tmp_path):
    generate(tmp_path, layout="era_a", cards=2, problems=())
    profile = open_profile(tmp_path)
    infos = device_info(profile.capture, profile.cards)
    for card in profile.cards:
        doc = json.loads(next(tmp_path.rglob(f"device_{card}/info.json.{card}")).read_text())
        assert infos[card].ai_core_num == doc["DeviceInfo"][0]["ai_core_num"]
        assert infos[card].aiv_num == doc["DeviceInfo"][0]["aiv_num"] and not infos[card].assumed


@pytest.mark.parametrize("layout", ["era_a", "era_b", "torch_npu"])
def test_clean_generated_profiles_raise_no_new_finding(tmp_path, layout):
    generate(tmp_path, layout=layout, cards=2, problems=())
    profile = open_profile(tmp_path)
    assert framework_of(profile.layout, profile) == ("torch_npu" if layout == "torch_npu" else "unknown")
    assert not profile.tasks.select(custom_kernel().any()).item()
    diag = diagnose(profile)
    assert "low_parallelism" not in {f.rule for f in diag.findings}
    assert not any("custom kernel" in f.title for f in diag.findings)


def test_kernel_export_leaves_the_folder_as_it_was(kernel_capture):
    before = sorted(p.relative_to(kernel_capture) for p in kernel_capture.rglob("*"))
    profile = open_profile(kernel_capture)
    device_info(profile.capture, profile.cards)
    assert sorted(p.relative_to(kernel_capture) for p in kernel_capture.rglob("*")) == before


def test_cached_findings_follow_the_core_counts_and_the_pmu_columns(kernel_capture, cache_dir):
    """The explorer opens profiles without PMU columns (no bound to name) and the core
    counts live beside the files: neither is served the other's cached findings."""
    from npuscope.parsers import FrameCache

    def titles(pmu: bool) -> set[str]:
        profile = open_profile(kernel_capture, cache=FrameCache(enabled=False), pmu=pmu)
        return {f.title for f in diagnose(profile, cache=FrameCache(cache_dir)).findings if f.rule == "low_parallelism"}

    with_pmu = titles(True)
    without = titles(False)
    assert any("memory-bound" in t for t in with_pmu) and not any("memory-bound" in t for t in without)
    assert titles(True) == with_pmu
    info = kernel_capture / "device_0" / "info.json.0"
    info.write_text(json.dumps({**INFO, "DeviceInfo": [{"id": 0, "ai_core_num": 2, "aiv_num": 4}]}))
    assert titles(True) == set()  # Block Dim 2 of 2 cores is not low


def test_torch_npu_reads_the_info_json_of_its_inner_prof_folder(tmp_path):
    """torch_npu keeps msprof's raw PROF_* inside *_ascend_pt/: its info.json gives the counts."""
    import shutil

    rank = tmp_path / "run" / "node_1_20240605_ascend_pt"
    shutil.copytree(SAMPLES / "torch_npu_ascend_pt", rank)
    device = rank / "PROF_000001_20240605162600123_ABCDEFGH" / "device_3"
    device.mkdir(parents=True)
    (device / "info.json.3").write_text(json.dumps(INFO))
    profile = open_profile(tmp_path / "run")
    (card,) = profile.cards
    info = device_info(profile.capture, profile.cards)[card]
    assert (info.ai_core_num, info.aiv_num, info.source, info.assumed) == (24, 48, "info.json.3", False)


def test_op_report_gives_the_bound_and_the_cores(kernel_capture):
    from npuscope.analysis.op_report import find_task, op_report

    profile = open_profile(kernel_capture)
    diag = diagnose(profile)
    text = op_report(profile, diag, find_task(diag, "matmul_custom"))
    assert "| Block Num | 2 (of 24 AI cores, info.json.0) |" in text
    assert "| Bound (matmul_custom on this card) | memory-in: memory-bound" in text
    assert "cube 0.044" in text and "memory-in 0.330" in text


@pytest.mark.parametrize("task_type", ["AI_CPU", "COMMUNICATION"])
def test_never_on_ai_cpu_or_communication_tasks(tmp_path, task_type):
    prof = _export(tmp_path, info=INFO)
    path = prof / "mindstudio_profiler_output" / "op_summary_20260101000000.csv"
    header = _header()
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i in range(CALLS):
            row = _kernel_row(header, i, block=1)
            row[header.index("Task Type")] = task_type
            w.writerow(row)
    assert "low_parallelism" not in {f.rule for f in diagnose(open_profile(prof)).findings}
