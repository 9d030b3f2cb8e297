"""Findings and advice follow the device kind of the capture: no NPU advice on a CPU or GPU trace.

The CPU capture is the real Paddle CPU trace of the tiny MLP training (fixtures/samples/paddle_cpu,
SOURCES.md). No GPU here: the GPU trace is HAND-BUILT from that real trace, in the format
Paddle's ChromeTracingLogger writes on a CUDA build (paddle/fluid/platform/profiler/
chrometracing_logger.cc; the `Device %lld (%s)` process name as in paddlepaddle 3.3.1's
libpaddle.so): `deviceProperties`, a `cudaLaunchKernel` (CudaRuntime) per operator, the
`Kernel` it launches on pid = device 0, tid = stream 7, with the kernel args Paddle writes,
the `launch` flow events, and the `Device 0 (GPU)` / `stream 7` metadata.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys
from pathlib import Path

import polars as pl
import pytest
from tiny import event, profile, task

from npuscope.analysis import advice, rules, training_rules
from npuscope.analysis import diagnose as diagnose_fn
from npuscope.analysis.device_kind import DEVICE_KINDS, device_kind, paddle_device, profile_device, tasks_device
from npuscope.analysis.framework import FRAMEWORKS
from npuscope.analysis.kpis import card_kpis
from npuscope.analysis.rules_capture import DEVICE_GAPS
from npuscope.analysis.training_rules import training_findings
from npuscope.cli import main
from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.columns import EVENT_SCHEMA
from npuscope.parsers.training import read_training_views

diagnose_module = sys.modules["npuscope.analysis.diagnose"]  # the package exports the function of that name
SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
PADDLE_CPU = SAMPLES / "paddle_cpu"
NPU_TERMS = (
    "AI_CORE", "AI_CPU", "aclop", "aclnn", "TransData", "CANN", "PMU", "FLAGS_npu", "HCCL", "hcom",
    "msprof", "npu-smi", "hccn_tool", "torch_npu", "Ascend", "NPU", "Block Dim", "recompil",
)  # fmt: skip
"""Words of an Ascend NPU's stack: none may reach a finding, its advice or a KPI of another device."""
NPU_ONLY_ADVICE = (
    "ai_cpu",
    "recompilation",
    "aclop_share",
    "dynamic_shape",
    "custom_kernel",
    "low_parallelism",
    "dominant_aclnn",
)


def npu_terms(text: str) -> list[str]:
    return [t for t in NPU_TERMS if t in text]


# ---------------------------------------------------------------------------- the HAND-BUILT GPU trace


def handbuilt_gpu_trace(folder: Path) -> Path:
    """HAND-BUILT: the real CPU trace with the device side of a CUDA build added (module docstring)."""
    (src,) = PADDLE_CPU.glob("*.paddle_trace.json")
    real = json.loads(src.read_text())
    out: list[dict] = []
    n = 0
    for e in (e for e in real["traceEvents"] if e):
        out.append(e)
        if e.get("cat") != "Operator":
            continue
        n += 1
        t0 = e["ts"] + 1
        dur = round(max(1.5, e["dur"] * 0.3), 3)
        kernel = (
            "volta_sgemm_128x64_nn"
            if "matmul" in e["name"]
            else "void phi::funcs::VectorizedElementwiseKernel<float, 4>"
        )
        out += [
            {"name": "cudaLaunchKernel[3.100 us]", "pid": e["pid"], "tid": e["tid"], "ts": t0, "dur": 3.1,
             "ph": "X", "cat": "CudaRuntime", "cname": "thread_state_running",
             "args": {"correlation id": n, "start_time": "0.000 us", "end_time": "3.100 us"}},
            {"name": "launch", "id": n, "pid": e["pid"], "tid": e["tid"], "ts": t0 + 1, "ph": "s", "cat": "async"},
            {"name": f"{kernel}[{dur:.3f} us]", "pid": 0, "tid": 7, "ts": t0 + 4, "dur": dur,
             "ph": "X", "cat": "Kernel", "cname": "cq_build_failed",
             "args": {"start_time": "0.000 us", "end_time": f"{dur:.3f} us", "device": 0, "context": 1,
                      "stream": 7, "correlation id": n, "registers per thread": 32, "shared memory": 0,
                      "blocks per SM": 0.074074, "warps per SM": 0.296296, "grid": [8, 1, 1],
                      "block": [128, 1, 1], "theoretical achieved occupancy %": 3.125}},
            {"name": "launch", "id": n, "pid": 0, "tid": 7, "ts": t0 + 5, "ph": "f", "cat": "async", "bp": "e"},
        ]  # fmt: skip
    out += [
        {"name": "process_name", "pid": 0, "tid": 7, "ph": "M", "args": {"name": "Device 0 (GPU)"}},
        {"name": "thread_name", "pid": 0, "tid": 7, "ph": "M", "args": {"name": "stream 7"}},
        {"name": "process_sort_index", "pid": 0, "tid": 7, "ph": "M", "args": {"sort_index": 0x10000000}},
        {"name": "thread_sort_index", "pid": 0, "tid": 7, "ph": "M", "args": {"sort_index": 7}},
        {},
    ]
    gpu = {"id": 0, "name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42505273344, "computeMajor": 8,
           "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
           "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
           "sharedMemPerMultiprocessor": 167936, "smCount": 108, "sharedMemPerBlockOptin": 166912}  # fmt: skip
    trace = {
        "schemaVersion": real["schemaVersion"], "displayTimeUnit": real["displayTimeUnit"],
        "span_index": real["span_index"], "deviceProperties": [gpu], "traceEvents": out,
        "ExtraInfo": real["ExtraInfo"],
    }  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "host_vmpid_4513_time_gpu_handbuilt.paddle_trace.json"
    path.write_text(json.dumps(trace, indent=1))
    assert sum(e.get("cat") == "Kernel" for e in out) == n > 0
    return folder


@pytest.fixture(scope="module")
def gpu_folder(tmp_path_factory) -> Path:
    return handbuilt_gpu_trace(tmp_path_factory.mktemp("gpu") / "paddle_gpu_handbuilt")


def _open(path: Path):
    return open_profile(path, cache=FrameCache(enabled=False))


def _everything(path: Path) -> tuple[object, object, list]:
    """The profile, its diagnosis with the training findings, and each card's KPIs."""
    prof = _open(path)
    diag = diagnose_fn(prof)
    diag = diag.with_findings(training_findings(prof, diag, read_training_views(prof)))
    cards = [card_kpis(diag.tasks.filter(pl.col("card") == c)) for c in diag.cards]
    return prof, diag, cards


def _words(diag, cards) -> str:
    """Every text of the findings (all fields) and of the KPI cards."""
    found = json.dumps([f.to_dict() for f in diag.findings])
    return found + json.dumps([[dataclasses.asdict(k) for k in kp] for kp in cards])


# ---------------------------------------------------------------------------- the device kind


@pytest.mark.parametrize(
    ("sample", "kind"),
    [
        ("msprof_golden", "NPU"),
        ("cann5x_device_summary", "NPU"),
        ("torch_npu_ascend_pt", "NPU"),
        ("real/msprof_db_2023", "NPU"),
        ("real/torch_npu_2023_gpt3_2rank/test_rank_0", "NPU"),
        ("real/torch_npu_2024_cnn/level1/rank0_ascend_pt", "NPU"),
        ("real/torch_npu_2025_db/level1/rank0_ascend_pt", "NPU"),
        ("paddle_cpu", "CPU"),
    ],
)
def test_device_kind_of_every_sample(sample, kind):
    assert device_kind(_open(SAMPLES / sample)) == kind


def test_single_files(tmp_path):
    """One msprof timeline file is an NPU's; a Paddle trace renamed (read as a plain file) is still
    told by its events."""
    msprof = SAMPLES / "msprof_golden" / "mindstudio_profiler_output" / "msprof_20240605100000.json"
    assert device_kind(_open(msprof)) == "NPU"
    (trace,) = PADDLE_CPU.glob("*.paddle_trace.json")
    renamed = tmp_path / "trace.json"
    renamed.write_bytes(trace.read_bytes())
    prof = _open(renamed)
    assert prof.layout == "file" and device_kind(prof) == "CPU"


def test_handbuilt_gpu_trace_is_gpu(gpu_folder):
    prof = _open(gpu_folder)
    assert prof.layout == "paddle"
    dev = profile_device(prof)
    assert dev.kind == "GPU" and "'GPU'" in dev.reason
    assert set(prof.tasks["task_type"].unique().to_list()) == {"CPU", "KERNEL"}


def _events(*rows: tuple[str, str | None]) -> pl.DataFrame:
    """Events of the given (process, cat), Paddle style."""
    base = event("x", 0, 1)
    return pl.DataFrame([{**base, "process": p, "cat": c} for p, c in rows], schema=EVENT_SCHEMA)


HOST = ("Process 4513 (CPU)", "Operator")


@pytest.mark.parametrize(
    ("rows", "kind"),
    [
        ((HOST,), "CPU"),
        ((HOST, ("Device 0 (GPU)", "Kernel")), "GPU"),
        ((HOST, ("Deivce 1 (GPU)", "Memcpy")), "GPU"),  # Paddle before 2.5 spelt it so
        ((HOST, ("Device 0 (npu)", "Kernel")), "NPU"),  # PaddleCustomDevice's Ascend plugin
        ((HOST, ("Device 0 (MLU)", "Kernel")), "unknown"),
        ((HOST, ("Device 0 (GPU)", "Kernel"), ("Device 1 (npu)", "Kernel")), "unknown"),
        ((HOST, ("Process 4513 (CPU)", "CudaRuntime")), "GPU"),
        ((HOST, ("", "Kernel")), "unknown"),  # device work of no named device: never NPU
        ((HOST, ("CANN", None)), "NPU"),
    ],
)
def test_paddle_device_from_its_events(rows, kind):
    assert paddle_device(_events(*rows)).kind == kind


def test_paddle_device_without_events_is_unknown():
    assert paddle_device(None).kind == "unknown"
    assert paddle_device(_events()).kind == "unknown"


def test_tasks_device():
    def frame(*types: str) -> pl.DataFrame:
        return pl.DataFrame({"task_type": list(types)}, schema={"task_type": pl.String})

    assert tasks_device(frame("CPU", "CPU")) == "CPU"
    assert tasks_device(frame("CPU", "KERNEL")) == "unknown"
    assert tasks_device(frame("AI_CORE", "CPU")) == "NPU"
    assert tasks_device(frame()) == "NPU"


# ---------------------------------------------------------------------------- the real CPU capture


def test_cpu_capture_diagnosis_and_kpis_have_no_npu_terms():
    prof, diag, cards = _everything(PADDLE_CPU)
    assert diag.device == "CPU"
    assert diag.findings, "the capture has findings to word"
    assert npu_terms(_words(diag, cards)) == []
    rules_seen = {f.rule for f in diag.findings}
    assert not rules_seen & set(rules.NPU_ONLY_RULES)
    assert "recompilation" not in diag.tasks["wait_cause"].drop_nulls().to_list()
    (kp,) = cards
    assert [k.key for k in kp] == ["compute_wait", "host_ops"]
    assert kp[1].value == f"{prof.tasks.height:,} ops"
    # The explorer calls card_kpis with the tasks alone: the same cards.
    assert card_kpis(diag.tasks, device="CPU") == kp


def test_cpu_capture_report_json_and_text_have_no_npu_terms(capsys):
    assert main(["report", str(PADDLE_CPU), "--no-cache", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (card,) = report["cards"]
    assert card["findings"] and npu_terms(json.dumps(card["findings"])) == []
    assert npu_terms(json.dumps(report)) == []
    assert main(["report", str(PADDLE_CPU), "--no-cache"]) == 0
    text = capsys.readouterr().out
    section = text.split("Findings (by time at stake)")[1].split("\n\n")[0]
    assert section.count("[WARN]") + section.count("[INFO]") == len(card["findings"])
    assert npu_terms(text) == []
    assert "No operator running" in text  # free_time in a CPU's words


def test_cpu_capture_report_names_its_device_and_its_op_report_has_no_npu_rows(capsys):
    assert main(["report", str(PADDLE_CPU), "--no-cache", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"]["device"] == "CPU"
    assert main(["report", str(PADDLE_CPU), "--no-cache"]) == 0
    assert "(paddle, Paddle profiler, device CPU)" in capsys.readouterr().out.splitlines()[1]
    assert main(["report", str(PADDLE_CPU), "--no-cache", "--op", "#3"]) == 0
    op = capsys.readouterr().out
    assert "| Task Type | CPU |" in op  # the op report itself is there
    assert npu_terms(op) == [] and "interface" not in op and "Pipe ratios" not in op


def test_npu_capture_report_says_npu_in_json_only(capsys):
    golden = SAMPLES / "msprof_golden"
    assert main(["report", str(golden), "--no-cache", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"]["device"] == "NPU"
    assert main(["report", str(golden), "--no-cache", "--op", "#0"]) == 0
    assert "| interface | " in capsys.readouterr().out


def test_forcing_the_npu_brings_back_the_npu_words(monkeypatch):
    """The check above can fail: the same capture taken for an NPU (as before device kinds)
    gets TransData, CANN / PMU and AI_CORE words, which npu_terms finds."""
    monkeypatch.setattr(diagnose_module, "device_kind", lambda profile: "NPU")
    monkeypatch.setattr(training_rules, "device_kind", lambda profile: "NPU")
    prof = _open(PADDLE_CPU)
    diag = diagnose_fn(prof)
    diag = diag.with_findings(training_findings(prof, diag, read_training_views(prof)))
    words = _words(diag, [card_kpis(diag.tasks, device="NPU")])
    assert {"TransData", "CANN", "PMU", "AI_CORE"} <= set(npu_terms(words))


# ---------------------------------------------------------------------------- the HAND-BUILT GPU trace


def test_gpu_trace_gets_gpu_words(gpu_folder, capsys):
    prof, diag, cards = _everything(gpu_folder)
    assert diag.device == "GPU" and diag.findings
    assert npu_terms(_words(diag, cards)) == []
    (kp,) = cards
    assert [k.key for k in kp] == ["compute_wait", "kernels"]
    kernels = prof.tasks.filter(pl.col("task_type") == "KERNEL")["duration_us"].sum()
    assert kp[1].value == f"{100.0 * kernels / prof.tasks['duration_us'].sum():.0f}%"
    assert card_kpis(diag.tasks, device="GPU") == kp  # the tasks alone tell a non-NPU device too
    assert main(["report", str(gpu_folder), "--no-cache", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert npu_terms(json.dumps(report)) == []
    gpu_advice = {f["advice"] for c in report["cards"] for f in c["findings"]}
    assert any("GPU" in a or "cuDNN" in a for a in gpu_advice)


# ---------------------------------------------------------------------------- every text a rule can give


@pytest.mark.parametrize("kind", [k for k in DEVICE_KINDS if k != "NPU"])
def test_device_advice_tables_have_no_npu_terms(kind):
    npu_only = set(NPU_ONLY_ADVICE) | set(training_rules.NPU_ONLY_RULES)
    assert set(advice.NPU_ONLY) == npu_only
    for fw in FRAMEWORKS:
        for topic in advice.ADVICE:
            if topic in npu_only:
                with pytest.raises(KeyError):
                    advice.advice(topic, fw, kind)
            else:
                assert npu_terms(advice.advice(topic, fw, kind)) == [], (kind, fw, topic)
        for rule in training_rules.TRAINING_RULES:
            if training_rules.runs_on(rule, kind):
                assert npu_terms(training_rules.advice(rule, fw, kind)) == [], (kind, fw, rule)
    assert npu_terms(DEVICE_GAPS.get(kind, "")) == []


def _busy_host_profile(layout: str, task_type: str, events: list[dict], names=("slice", "matmul", "add")):
    """Tasks that fire most operator rules: a dominant matmul that is also long, a slice with an
    outlier, a long wait before the matmul and an idle span. Paddle's op names by default."""
    small, big, last = names
    tasks = [task(small, 10.0 * i, 5.0, task_type=task_type) for i in range(15)]
    tasks += [task(small, 200.0, 200.0, task_type=task_type), task(big, 3000.0, 1500.0, task_type=task_type)]
    tasks += [task(last, 20000.0 + 10 * i, 2.0, task_type=task_type) for i in range(3)]
    return dataclasses.replace(profile(tasks, events), layout=layout)


@pytest.mark.parametrize(
    ("kind", "task_type", "process"),
    [("CPU", "CPU", "Process 1 (CPU)"), ("GPU", "KERNEL", "Device 0 (GPU)"), ("unknown", "KERNEL", "Device 0 (XPU)")],
)
def test_operator_rules_on_a_host_or_gpu_capture(kind, task_type, process):
    events = [event("ProfileStep#1[3.000 ms]", 0, 30000, process="Process 1 (CPU)"), event("k", 0, 1, process=process)]
    prof = _busy_host_profile("paddle", task_type, events)
    assert device_kind(prof) == kind
    diag = diagnose_fn(prof)
    found = {f.rule for f in diag.findings}
    assert {"idle_device", "dominant_op_type", "long_task", "duration_outlier"} <= found, found
    assert npu_terms(json.dumps([f.to_dict() for f in diag.findings])) == []
    assert not found & set(rules.NPU_ONLY_RULES)
    idle = next(f for f in diag.findings if f.rule == "idle_device")
    assert idle.title.startswith("No operator running" if kind == "CPU" else "Device idle")
    # The same tasks on an NPU: the NPU's rules and words.
    npu = _busy_host_profile("era_b", "AI_CORE", [event("k", 0, 1)], ("Slice", "MatMulV2", "Add"))
    npu_found = diagnose_fn(npu).findings
    assert {f.rule for f in npu_found} & set(rules.NPU_ONLY_RULES)
    assert npu_terms(json.dumps([f.to_dict() for f in npu_found]))


# ---------------------------------------------------------------------------- NPU captures unchanged

NPU_PINNED = {
    # sample: (rules found, sha256[:16] of the sorted (rule, severity, advice, threshold) set), as
    # the diagnosis gave before device kinds existed; since then waits before a collective are
    # communication (never recompilation), aclop_share needs aclop tasks and the
    # communication_wait advice no longer names a `== cards ==` section.
    "real/torch_npu_2025_db/level1/rank0_ascend_pt": (
        "aclop_share comm_not_overlapped communication_wait data_gaps duration_outlier fusible_sequence "
        "host_op_wait recompilation sync_heavy",
        "df0d9b9054c8010c",
    ),
    "real/msprof_db_2023": ("data_gaps dominant_op_type host_op_wait idle_device", "dce3c33cbdbe075b"),
    "cann5x_device_summary": ("aclop_share ai_cpu data_gaps dominant_op_type", "3566c60dc1b20da5"),
    "real/torch_npu_2023_gpt3_2rank/test_rank_0": (
        "aclop_share ai_cpu comm_not_overlapped communication_wait data_gaps dominant_op_type idle_device long_task "
        "recompilation",
        "874c7c4bb685a57a",
    ),
}


@pytest.mark.parametrize("sample", sorted(NPU_PINNED))
def test_npu_capture_findings_unchanged(sample):
    prof, diag, cards = _everything(SAMPLES / sample)
    assert diag.device == "NPU"
    words = sorted({(f.rule, f.severity, f.advice, f.threshold) for f in diag.findings})
    found = " ".join(sorted({f.rule for f in diag.findings}))
    assert (found, hashlib.sha256(json.dumps(words).encode()).hexdigest()[:16]) == NPU_PINNED[sample]
    for card, kp in zip(diag.cards, cards):
        assert [k.key for k in kp][:2] == ["compute_wait", "ai_core"]
        assert kp == card_kpis(diag.tasks.filter(pl.col("card") == card), device="NPU")
    assert any(re.search(r"aclop|aclnn|AI_C", f.title + f.advice) for f in diag.findings)
