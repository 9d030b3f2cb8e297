"""The training-level keys of `report` (steps, communication, links, host API, memory) and
the views `inspect` lists, checked on the real captures against figures computed here from
the files with the csv / json / sqlite3 modules, never from npuscope."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real"
SAMPLES = REAL.parent
GPT3 = REAL / "torch_npu_2023_gpt3_2rank"
CNN = REAL / "torch_npu_2024_cnn" / "level1"
DB25 = REAL / "torch_npu_2025_db" / "level1"
TOP = 5
NEW_KEYS = ("steps", "communication", "links", "host_api", "memory")
SDMA_LINKS = {"HCCS", "PCIE", "SIO"}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "npuscope", *args, "--no-cache"], capture_output=True, text=True)


def _in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """`_cli` through `cli.main` in this process: the same code and output without starting an
    interpreter (~1 s each on a loaded machine). Every behaviour keeps a real `_cli` run too."""
    from npuscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([*args, "--no-cache"])
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


_REPORTS: dict[Path, dict] = {}


def _report(path: Path) -> dict:
    if path not in _REPORTS:
        # `--card all`: every rank of a cluster (GPT3, CNN and DB25 are; the default is the
        # slowest rank only), every card of one capture.
        res = _in_process("report", str(path), "--format", "json", "--top", str(TOP), "--card", "all")
        assert res.returncode == 0, res.stderr
        _REPORTS[path] = orjson.loads(res.stdout)
    return _REPORTS[path]


def _cards(report: dict) -> dict[str, dict]:
    return {c["card"]: c for c in report["cards"]}


def _ranks(root: Path) -> dict[str, Path]:
    """card -> ASCEND_PROFILER_OUTPUT, the card being the rank of profiler_info_<rank>.json."""
    out = {}
    for info in root.glob("*/profiler_info_*.json"):
        out[info.stem.rsplit("_", 1)[1]] = info.parent / "ASCEND_PROFILER_OUTPUT"
    return out


def close(a: float | None, b: float | None) -> bool:
    """`a` (rounded to 3 decimals by the report) is `b`."""
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= max(6e-4, 1e-6 * abs(b))


# --------------------------------------------------------------------------- truths from the files


def _steps_truth(rows: list[dict[str, float | str]]) -> list[dict]:
    out = []
    for r in rows:
        comp, nov, ov, comm, free = (float(r[k]) for k in ("compute", "nov", "ov", "comm", "free"))
        out.append(
            {
                "step": str(int(float(r["step"]))),
                "step_us": comp + nov + free,
                "compute_us": comp,
                "communication_us": comm,
                "comm_not_overlapped_us": nov,
                "overlapped_us": ov,
                "free_us": free,
            }
        )
    return sorted(out, key=lambda s: int(s["step"]))


def _steps_csv(out: Path) -> list[dict]:
    with open(out / "step_trace_time.csv", newline="") as f:
        rows = [
            {
                "step": r["Step"],
                "compute": r["Computing"],
                "nov": r["Communication(Not Overlapped)"],
                "ov": r["Overlapped"],
                "comm": r["Communication"],
                "free": r["Free"],
            }
            for r in csv.DictReader(f)
        ]
    return _steps_truth(rows)


def _steps_db(out: Path) -> list[dict]:
    with sqlite3.connect(f"file:{out / 'analysis.db'}?mode=ro", uri=True) as db:
        rows = [
            {"step": s, "compute": c, "nov": n, "ov": o, "comm": m, "free": f}
            for s, c, n, o, m, f in db.execute(
                "SELECT step, computing, communication_not_overlapped, overlapped, communication, free "
                "FROM StepTraceTime"
            )
        ]
    return _steps_truth(rows)


def _op_type(op_name: str) -> str:
    """`hcom_allReduce__538_0_1` -> `allReduce`."""
    return op_name.removeprefix("hcom_").split("_")[0]


class _Comm:
    """Per op type: count, times (us), data moved and the time it took."""

    def __init__(self) -> None:
        self.per: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def op(self, name: str, elapse: float, transit: float, wait: float, sync: float) -> None:
        t = self.per[_op_type(name)]
        t["count"] += 1
        t["total_us"] += elapse * 1000
        t["transit_us"] += transit * 1000
        t["wait_us"] += wait * 1000
        t["sync_us"] += sync * 1000

    def data(self, name: str, transports: dict[str, tuple[float, float]]) -> None:
        """transports: {transport: (size MB, time ms)} of one op."""
        t = self.per[_op_type(name)]
        for transport, (size, ms) in transports.items():
            if transport == "LOCAL" or ("SDMA" in transports and transport in SDMA_LINKS):
                continue
            t["size_mb"] += size
            if size > 0 and ms > 0:
                t["_mb"] += size
                t["_ms"] += ms

    def rows(self) -> list[dict]:
        out = []
        for op_type, t in self.per.items():
            out.append(
                {
                    "op_type": op_type,
                    "count": int(t["count"]),
                    **{k: t[k] for k in ("total_us", "transit_us", "wait_us", "sync_us", "size_mb")},
                    "bandwidth_gbps": t["_mb"] / t["_ms"] if t["_ms"] > 0 else None,
                }
            )
        return sorted(out, key=lambda r: (-r["total_us"], r["op_type"]))


def _comm_json(out: Path) -> list[dict]:
    data = json.loads((out / "communication.json").read_text())
    comm = _Comm()
    for step in data.values():
        for kind in step.values():
            for key, op in kind.items():
                if key == "Total Op Info":
                    continue
                name = key.split("@")[0]
                info = op["Communication Time Info"]
                comm.op(
                    name,
                    info["Elapse Time(ms)"],
                    info["Transit Time(ms)"],
                    info["Wait Time(ms)"],
                    info["Synchronization Time(ms)"],
                )
                bw = op["Communication Bandwidth Info"]
                comm.data(name, {t: (v["Transit Size(MB)"], v["Transit Time(ms)"]) for t, v in bw.items()})
    return comm.rows()


def _comm_db(out: Path) -> list[dict]:
    comm = _Comm()
    with sqlite3.connect(f"file:{out / 'analysis.db'}?mode=ro", uri=True) as db:
        for name, elapse, transit, wait, sync in db.execute(
            "SELECT hccl_op_name, elapse_time, transit_time, wait_time, synchronization_time FROM CommAnalyzerTime"
        ):
            comm.op(name, elapse, transit, wait, sync)
        per_op: dict[tuple[str, str], dict[str, tuple[float, float]]] = defaultdict(dict)
        for step, name, transport, size, ms in db.execute(
            "SELECT step, hccl_op_name, transport_type, transit_size, transit_time FROM CommAnalyzerBandwidth"
        ):
            per_op[(step, name)].setdefault(transport, (size, ms))  # one row per packet size: read once
    for (_, name), transports in per_op.items():
        comm.data(name, transports)
    return comm.rows()


def _links_truth(entries: list[tuple[str, str, str, str, str, float, float]]) -> list[dict]:
    """entries: (group, entry, src, dst, transport, size MB, time ms); `-total` entries only,
    where a group has them."""
    with_total = {g for g, e, *_ in entries if e.endswith("-total")}
    per: dict[tuple[str, int, int, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for group, entry, src, dst, transport, size, ms in entries:
        if group in with_total and not entry.endswith("-total"):
            continue
        t = per[(group, int(src), int(dst), transport)]
        t[0] += size
        t[1] += ms
    return [
        {
            "group": g,
            "src": str(s),
            "dst": str(d),
            "transport": tr,
            "size_mb": size,
            "bandwidth_gbps": size / ms if ms > 0 else None,
        }
        for (g, s, d, tr), (size, ms) in sorted(per.items())
    ]


def _links_json(out: Path) -> list[dict]:
    data = json.loads((out / "communication_matrix.json").read_text())
    entries = []
    for step in data.values():
        for kind in step.values():
            for key, links in kind.items():
                if key == "Total Op Info":
                    continue
                entry, _, group = key.partition("@")
                for link, v in links.items():
                    src, dst = link.split("-")
                    entries.append(
                        (group, entry, src, dst, v["Transport Type"], v["Transit Size(MB)"], v["Transit Time(ms)"])
                    )
    return _links_truth(entries)


def _links_db(out: Path) -> list[dict]:
    with sqlite3.connect(f"file:{out / 'analysis.db'}?mode=ro", uri=True) as db:
        entries = list(
            db.execute(
                "SELECT group_name, hccl_op_name, src_rank, dst_rank, transport_type, transit_size, transit_time "
                "FROM CommAnalyzerMatrix"
            )
        )
    return _links_truth(entries)


def _framework(rows: list[tuple[str, float | None, float]]) -> tuple[float | None, float]:
    """(peak allocated, peak reserved) of the first of PTA+GE, PTA, GE a card records."""
    components = {c for c, _, _ in rows}
    chosen = next(c for c in ("PTA+GE", "PTA", "GE") if c in components)
    mine = [(a, r) for c, a, r in rows if c == chosen]
    allocated = [a for a, _ in mine if a is not None]
    return (max(allocated) if allocated else None), max(r for _, r in mine)


def _memory_csv(out: Path) -> tuple[float | None, float]:
    with open(out / "memory_record.csv", newline="") as f:
        rows = [
            (
                r["Component"],
                float(r["Total Allocated(MB)"]) if r["Total Allocated(MB)"] else None,
                float(r["Total Reserved(MB)"]),
            )
            for r in csv.DictReader(f)
        ]
    return _framework(rows)


def _top_ops(sizes: list[tuple[str, float]]) -> list[dict]:
    largest: dict[str, float] = {}
    for name, mb in sizes:
        largest[name] = max(largest.get(name, mb), mb)
    ranked = sorted(largest.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
    return [{"op_name": n, "size_mb": mb} for n, mb in ranked]


def _top_ops_csv(out: Path) -> list[dict]:
    with open(out / "operator_memory.csv", newline="") as f:
        return _top_ops([(r["Name"], float(r["Size(KB)"]) / 1024) for r in csv.DictReader(f)])


def _db(out: Path) -> sqlite3.Connection:
    path = next(out.glob("ascend_pytorch_profiler_*.db"))
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _memory_db(out: Path) -> tuple[float | None, float]:
    with _db(out) as db:
        rows = [
            (c, a / 2**20 if a is not None else None, r / 2**20)
            for c, a, r in db.execute(
                "SELECT s.value, m.totalAllocated, m.totalReserved FROM MEMORY_RECORD m "
                "JOIN STRING_IDS s ON s.id = m.component"
            )
        ]
    return _framework(rows)


def _top_ops_db(out: Path) -> list[dict]:
    with _db(out) as db:
        return _top_ops(
            [
                (n, size / 2**20)
                for n, size in db.execute("SELECT s.value, o.size FROM OP_MEMORY o JOIN STRING_IDS s ON s.id = o.name")
            ]
        )


def _host_api_db(out: Path) -> dict[str, tuple[int, float, float]]:
    """api -> (count, total us, longest us) from CANN_API."""
    per: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    with _db(out) as db:
        for name, dur in db.execute(
            "SELECT s.value, c.endNs - c.startNs FROM CANN_API c JOIN STRING_IDS s ON s.id = c.name"
        ):
            t = per[name]
            t[0] += 1
            t[1] += dur / 1000
            t[2] = max(t[2], dur / 1000)
    return {k: (int(v[0]), v[1], v[2]) for k, v in per.items()}


# --------------------------------------------------------------------------- comparisons


def _same_rows(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        assert set(g) >= set(w), (g, w)
        for k, v in w.items():
            if isinstance(v, float) or v is None:
                assert close(g[k], v), (k, g, w)
            else:
                assert g[k] == v, (k, g, w)


TEXT_CASES = [
    pytest.param(GPT3, _steps_csv, _comm_json, _links_json, _memory_csv, _top_ops_csv, id="gpt3_2023_text"),
    pytest.param(CNN, _steps_csv, _comm_json, _links_json, _memory_csv, _top_ops_csv, id="cnn_2024_text"),
    pytest.param(DB25, _steps_db, _comm_db, _links_db, _memory_db, _top_ops_db, id="db_2025"),
]


@pytest.mark.parametrize(("root", "steps", "comm", "links", "memory", "top_ops"), TEXT_CASES)
def test_report_json_training_keys_match_the_files(root, steps, comm, links, memory, top_ops):
    report = _report(root)
    cards = _cards(report)
    ranks = _ranks(root)
    assert sorted(cards) == sorted(ranks)
    for card, out in ranks.items():
        got = cards[card]
        _same_rows(got["steps"], steps(out))
        _same_rows(got["communication"], comm(out))
        _same_rows(got["links"], links(out))
        allocated, reserved = memory(out)
        assert close(got["memory"]["peak_allocated_mb"], allocated)
        assert close(got["memory"]["peak_reserved_mb"], reserved)
        _same_rows(got["memory"]["top_ops"], top_ops(out))
    assert report["source"]["views"]


def test_report_json_host_api_counts_match_cann_api():
    cards = _cards(_report(DB25))
    for card, out in _ranks(DB25).items():
        want = _host_api_db(out)
        got = {r["api"]: r for r in cards[card]["host_api"]}
        assert set(got) == set(want)
        for api, (count, total, longest) in want.items():
            assert got[api]["count"] == count, api
            assert close(got[api]["total_us"], total), api
            assert close(got[api]["max_us"], longest), api
            assert close(got[api]["avg_us"], total / count), api
        totals = [r["total_us"] for r in cards[card]["host_api"]]
        assert totals == sorted(totals, reverse=True)


def test_report_json_rows_have_the_contract_types():
    for root in (GPT3, CNN, DB25):
        for card in _report(root)["cards"]:
            for s in card["steps"]:
                assert isinstance(s["step"], str)
            for c in card["communication"]:
                assert isinstance(c["op_type"], str) and isinstance(c["count"], int)
            for link in card["links"]:
                assert isinstance(link["src"], str) and isinstance(link["dst"], str)
                assert isinstance(link["transport"], str)
            for h in card["host_api"]:
                assert isinstance(h["api"], str) and isinstance(h["count"], int)
            assert set(card["memory"]) == {"peak_allocated_mb", "peak_reserved_mb", "top_ops"}
            assert len(card["memory"]["top_ops"]) <= TOP


def test_report_json_is_deterministic():
    # Two interpreters (a child and this one), each with its own hash seed. The child is also
    # the json report's run through `python -m npuscope`; `_report` reads it in process.
    first = _cli("report", str(CNN), "--format", "json")
    second = _in_process("report", str(CNN), "--format", "json")
    assert first.returncode == 0 and first.stdout == second.stdout


def test_capture_without_training_files_has_empty_views():
    report = _report(SAMPLES / "msprof_golden")
    for card in report["cards"]:
        assert card["communication"] == [] and card["links"] == []
        assert card["memory"] == {"peak_allocated_mb": None, "peak_reserved_mb": None, "top_ops": []}
        # No step boundaries: the one step the tasks give is the whole capture.
        assert [s["step"] for s in card["steps"]] == ["all"]
    found = report["source"]["views"]
    assert not any(f.split(":")[0] in {"communication", "links", "memory", "memory_top_ops"} for f in found)
    res = _in_process("inspect", str(SAMPLES / "msprof_golden"))
    assert res.returncode == 0, res.stderr
    views = res.stdout.split("views     ", 1)[1]
    for name in ("communication", "links", "memory"):
        assert f"  {name} " not in views


def test_report_without_views_has_empty_keys():
    from npuscope.analysis import diagnose
    from npuscope.analysis.report import build_report
    from npuscope.parsers import FrameCache, open_profile

    prof = open_profile(SAMPLES / "msprof_golden", cache=FrameCache(enabled=False))
    report = build_report(prof, diagnose(prof), top=3)
    for card in report["cards"]:
        assert card["steps"] == card["communication"] == card["links"] == card["host_api"] == []
        assert card["memory"] == {"peak_allocated_mb": None, "peak_reserved_mb": None, "top_ops": []}


def test_inspect_lists_the_views_found_and_their_files():
    res = _cli("inspect", str(CNN))
    assert res.returncode == 0, res.stderr
    views = res.stdout.split("views     ", 1)[1].splitlines()
    listed = {line.split()[0]: line.split(None, 1)[1] for line in views[1:] if line.startswith("  ")}
    assert listed["steps"] == "step_trace_time.csv"
    assert listed["communication"] == "communication.json"
    assert listed["links"] == "communication_matrix.json"
    assert listed["memory"] == "memory_record.csv"
    assert listed["memory_top_ops"] == "operator_memory.csv"
    res = _in_process("inspect", str(DB25))
    assert res.returncode == 0, res.stderr
    assert "analysis.db StepTraceTime" in res.stdout and "CANN_API" in res.stdout


HEADINGS = ("Steps", "Communication", "Links", "Host API", "Memory")
SAMPLE_FOLDERS = sorted(
    {p.parent for p in REAL.rglob("ASCEND_PROFILER_OUTPUT")} | {p for p in REAL.glob("*") if p.is_dir()}
) + [SAMPLES / "msprof_golden", SAMPLES / "cann5x_device_summary", SAMPLES / "torch_npu_ascend_pt"]


def _has_the_sections(res: subprocess.CompletedProcess[str], fmt: str) -> None:
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    lines = res.stdout.splitlines()
    for title in HEADINGS:
        heading = f"### {title}" if fmt == "markdown" else title
        assert heading in lines, (fmt, title)
    waits = lines.index("### Longest waits" if fmt == "markdown" else "Longest waits")
    assert lines.index("### Steps" if fmt == "markdown" else "Steps") > waits


@pytest.mark.parametrize("folder", SAMPLE_FOLDERS, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_text_and_markdown_have_the_sections(folder):
    for fmt in ("text", "markdown"):
        _has_the_sections(_in_process("report", str(folder), "--format", fmt, "--top", "3"), fmt)


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_text_and_markdown_have_the_sections_from_the_command(fmt):
    """The same through `python -m npuscope`, on a small capture with every training view."""
    _has_the_sections(_cli("report", str(GPT3 / "test_rank_1"), "--format", fmt, "--top", "3"), fmt)


def test_text_report_shows_the_numbers():
    res = _in_process("report", str(CNN), "--card", "0", "--top", "3")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    step = _steps_csv(_ranks(CNN)["0"])[0]
    assert f"{step['step_us']:,.3f}" in out
    comm = _comm_json(_ranks(CNN)["0"])[0]
    assert f"{comm['op_type']}" in out and f"{comm['total_us']:,.3f}" in out
    allocated, reserved = _memory_csv(_ranks(CNN)["0"])
    assert f"peak allocated {allocated:,.1f} MB, peak reserved {reserved:,.1f} MB" in out


def test_damaged_training_file_is_a_note_or_with_strict_a_one_line_error(tmp_path):
    import shutil

    copy = tmp_path / "cnn"
    shutil.copytree(CNN, copy)
    for comm in copy.glob("*/ASCEND_PROFILER_OUTPUT/communication.json"):
        comm.write_text(comm.read_text()[:200])  # truncated
    res = _cli("report", str(copy), "--format", "json")
    assert res.returncode == 0, res.stderr
    report = orjson.loads(res.stdout)
    assert any("communication.json" in n for n in report["source"]["view_notes"])
    assert all(c["communication"] for c in report["cards"])  # from the tasks instead
    res = _in_process("inspect", str(copy))
    assert res.returncode == 0 and "communication.json" in res.stdout.split("views     ", 1)[1]
    for run, command in ((_cli, "report"), (_in_process, "inspect")):
        res = run(command, str(copy), "--strict")
        assert res.returncode == 2, res.stdout
        assert "communication.json" in res.stderr and "Traceback" not in res.stderr


def test_text_links_rank_links_between_ranks_before_local_copies():
    res = _in_process("report", str(DB25), "--card", "0", "--top", "3")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    start = lines.index("Links")
    assert lines[start + 1] == "the 3 largest of 8 links"
    rows = lines[start + 4 : start + 7]
    assert all(" HCCS " in r for r in rows), rows
