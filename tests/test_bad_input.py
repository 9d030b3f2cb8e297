"""Bad input: every case gives one single-line `ProfileError` that names the file or folder
and says what to do; through the CLI, exit 2 with one `npuscope: ` line on stderr and no
traceback. A bad input never writes into the profile folder and never leaves a partial cache
file behind.

Bad files are built from the real samples (fixtures/samples/msprof_golden) in tmp_path.
Permission cases need a process for which chmod 000 really denies reads: root runs them in a
subprocess as `nobody`, or, when `nobody` cannot run this interpreter (it lives under a
0700 /root here), as root without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH (tests/unpriv.py).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson
import polars as pl
import pytest
from unpriv import cli_env, make_dir, open_unprivileged, run_python, snapshot, unpriv, world_dir  # noqa: F401 - fixtures

from npuscope.cli import main
from npuscope.parsers import FrameCache, ProfileError, open_profile
from npuscope.parsers.cache import _KEY

GOLDEN = Path("msprof_golden") / "mindstudio_profiler_output"
OP_SUMMARY = "op_summary_20240605100000.csv"
OP_STAT = "op_statistic_20240605100000.csv"
MSPROF = "msprof_20240605100000.json"
PROF = "PROF_000001_20240605100000000_ABCDEFG"
MSOUT = "mindstudio_profiler_output"

# An instruction to the user: an imperative verb opening a clause.
HINT = re.compile(
    r"(?:^|[;,:(]\s*|\b(?:and|or|then)\s+)"
    r"(?:re-?export|export|copy|convert|make|run|check|chmod|point|re-?capture|capture|give|"
    r"pass|use|fix|remove)\b",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------- helpers


def assert_no_partial_cache(cache: Path) -> None:
    """Only complete, keyed entries in the cache folder (and in the private u<uid> folder it
    gets when others can write it): no temp file, no half-written one."""
    if not cache.exists():
        return
    for p in cache.iterdir():
        if p.is_dir() and re.fullmatch(r"u\d+", p.name):
            assert_no_partial_cache(p)
            continue
        assert re.fullmatch(r"[0-9a-f]{32}\.parquet", p.name), f"stray file in cache: {p.name}"
        assert _KEY in pl.read_parquet_metadata(p), f"cache entry without key: {p.name}"


def check_message(exc: BaseException, named: Path, expect: tuple[str, ...]) -> str:
    msg = str(exc)
    assert msg, "empty message"
    assert "\n" not in msg and "\r" not in msg, f"not one line: {msg!r}"
    assert str(named) in msg, f"message does not name {named}: {msg!r}"
    for pattern in expect:
        assert re.search(pattern, msg, re.IGNORECASE), f"{pattern!r} not in {msg!r}"
    assert "Traceback" not in msg
    return msg


def assert_not_chained(exc: BaseException) -> None:
    """Exactly one error: no `During handling of ...` chain behind it."""
    assert exc.__cause__ is None
    assert exc.__context__ is None or exc.__suppress_context__


def has_hint(msg: str, named: Path) -> bool:
    return HINT.search(msg.replace(str(named), "<path>")) is not None


def open_written(f: Path, data: bytes, cache_dir: Path, match: str | None = None) -> ProfileError:
    """Write `data` to `f` and open it: the ProfileError it raises (matching `match`)."""
    f.write_bytes(data)
    with pytest.raises(ProfileError, match=match) as info:
        open_profile(f, cache=FrameCache(cache_dir))
    return info.value


def start_cli(target: Path, cache: Path, cwd: Path, home: Path | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "npuscope", "inspect", str(target)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=cli_env(cache, home),
        **kw,
    )


def finish_cli(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def assert_cli_error(proc: subprocess.CompletedProcess, named: Path) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("npuscope: "), lines[0]
    assert str(named) in lines[0], lines[0]
    assert proc.stdout == ""
    return lines[0]


def golden(samples: Path, name: str) -> bytes:
    return (samples / GOLDEN / name).read_bytes()


def make_capture(root: Path, samples: Path, damaged: str | None = None, data: bytes = b"") -> Path:
    """root/PROF_.../mindstudio_profiler_output with the three golden files, one replaced."""
    out = root / PROF / MSOUT
    out.mkdir(parents=True)
    for name in (OP_SUMMARY, OP_STAT, MSPROF):
        (out / name).write_bytes(golden(samples, name))
        (out / name).chmod(0o644)
    for d in (root, root / PROF, out):
        d.chmod(0o755)
    if damaged is not None:
        (out / damaged).write_bytes(data)
    return out


# --------------------------------------------------------------------------- damaged files


def _empty(s: Path) -> tuple[str, bytes]:
    return OP_SUMMARY, b""


def _whitespace(s: Path) -> tuple[str, bytes]:
    return OP_SUMMARY, b"  \r\n\n\t \n"


def _header_only(s: Path) -> tuple[str, bytes]:
    return OP_SUMMARY, golden(s, OP_SUMMARY).split(b"\n")[0] + b"\n"


def _truncated_last_line(s: Path) -> tuple[str, bytes]:
    data = golden(s, OP_SUMMARY).rstrip(b"\n")
    assert data.count(b"\n") == 3  # header + 3 rows: the cut row is line 4
    last = data.rsplit(b"\n", 1)[1]
    return OP_SUMMARY, data[: len(data) - len(last) // 2]


def _unknown_columns(s: Path) -> tuple[str, bytes]:
    return OP_SUMMARY, b"foo,bar,baz\n1,2,3\n4,5,6\n"


def _missing_duration(s: Path) -> tuple[str, bytes]:
    data = golden(s, OP_SUMMARY)
    assert b'"' not in data  # plain comma split is exact for this file
    rows = [ln.split(b",") for ln in data.rstrip(b"\n").split(b"\n")]
    i = rows[0].index(b"Task Duration(us)")
    return OP_SUMMARY, b"\n".join(b",".join(r[:i] + r[i + 1 :]) for r in rows) + b"\n"


def _non_utf8(s: Path) -> tuple[str, bytes]:
    # GBK text (a Chinese Windows export) in the op name of line 3.
    data = golden(s, OP_SUMMARY)
    assert data.count(b"MatMulV3_1,") == 1 and data.split(b"\n")[2].count(b"MatMulV3_1,") == 1
    return OP_SUMMARY, data.replace(b"MatMulV3_1,", b"MatMulV3_" + "算子".encode("gbk") + b",")


def _non_numeric_duration(s: Path) -> tuple[str, bytes]:
    data = golden(s, OP_SUMMARY)
    assert data.count(b",15.000,") == 1
    return OP_SUMMARY, data.replace(b",15.000,", b",fast,")


def _non_numeric_statistic(s: Path) -> tuple[str, bytes]:
    data = golden(s, OP_STAT)
    assert data.count(b",771407100,") == 1
    return OP_STAT, data.replace(b",771407100,", b",lots,")


def pretty_timeline(s: Path) -> bytes:
    """The golden timeline with one event per line (as FORMATS.md shows it)."""
    events = orjson.loads(golden(s, MSPROF))
    return b"[\n" + b",\n".join(orjson.dumps(e) for e in events) + b"\n]\n"


def _truncated_json(s: Path) -> tuple[str, bytes]:
    data = pretty_timeline(s)
    lines = data.split(b"\n")
    assert len(lines) > 12
    cut = sum(len(ln) + 1 for ln in lines[:9]) + len(lines[9]) // 2  # middle of line 10
    return MSPROF, data[:cut]


def _empty_json(s: Path) -> tuple[str, bytes]:
    return MSPROF, b" \n"


def _json_not_trace(s: Path) -> tuple[str, bytes]:
    return MSPROF, b'{"a": 1}'


# --------------------------------------------------------------------------- folder cases


def _no_data(root: Path, s: Path) -> tuple[Path, Path]:
    folder = root / "ascend_profiling"
    (folder / "logs").mkdir(parents=True)
    (folder / "notes.txt").write_text("run 1\n")
    (folder / "results.csv").write_text("epoch,loss\n1,0.5\n")
    (folder / "logs" / "train.log").write_text("ok\n")
    return folder, folder


def _nonexistent(root: Path, s: Path) -> tuple[Path, Path]:
    target = root / "PROF_000001_20240605100000000_NOSUCH"
    return target, target


def _raw_prof(root: Path) -> Path:
    prof = root / "ascend_profiling" / PROF
    for sub in ("device_0/data", "host/data"):
        (prof / sub).mkdir(parents=True)
    (prof / "device_0" / "data" / "ts_track.data.0.slice_0").write_bytes(b"\x00\x01\x02\x03")
    (prof / "device_0" / "start_info.0").write_text('{"collectionTimeBegin": "1717575960208020"}')
    (prof / "host" / "data" / "api_event.data.slice_0").write_bytes(b"\x00\x01")
    return prof


def _raw_only(root: Path, s: Path) -> tuple[Path, Path]:
    prof = _raw_prof(root)
    return prof, prof


def _raw_only_parent(root: Path, s: Path) -> tuple[Path, Path]:
    prof = _raw_prof(root)
    return prof.parent, prof


@dataclass(frozen=True)
class Case:
    id: str
    expect: tuple[str, ...]
    damage: Callable[[Path], tuple[str, bytes]] | None = None  # one export file made bad
    folder: Callable[[Path, Path], tuple[Path, Path]] | None = None  # (target, named)
    # A damaged timeline beside a good op_summary is left out with a note, not an error:
    # only opening the timeline file itself must fail.
    timeline: bool = False

    @property
    def variants(self) -> tuple[str, ...]:
        return ("file", "folder") if self.damage is not None else ("folder",)

    def build(self, root: Path, samples: Path, variant: str) -> tuple[Path, Path]:
        """(path to open, path the message must name)."""
        if self.folder is not None:
            return self.folder(root, samples)
        name, data = self.damage(samples)
        out = make_capture(root, samples, name, data)
        return (out / name if variant == "file" else root / PROF), out / name


CASES = [
    Case("empty_file", (r"\bempty\b",), damage=_empty),
    Case("whitespace_only", (r"\bempty\b",), damage=_whitespace),
    Case("header_only", (r"no data rows",), damage=_header_only),
    Case("truncated_last_line", (r"\bline 4\b", r"truncat|cut short"), damage=_truncated_last_line),
    Case(
        "unknown_columns",
        (r"missing", r"Op Name", r"OP Type", r"Task Duration\(us\)", r"found.*\bfoo, bar, baz\b"),
        damage=_unknown_columns,
    ),
    Case(
        "missing_duration_column",
        (r"missing column\(s\) Task Duration\(us\)", r"found .*Device_id.*Op Name"),
        damage=_missing_duration,
    ),
    Case("non_utf8_body", (r"\bline 3\b", r"UTF-8"), damage=_non_utf8),
    Case(
        "non_numeric_duration",
        (r"Task Duration\(us\)", r"\bfast\b"),
        damage=_non_numeric_duration,
    ),
    Case(
        "non_numeric_statistic",
        (r"Total Time\(us\)", r"\blots\b"),
        damage=_non_numeric_statistic,
    ),
    Case(
        "truncated_json",
        (r"\bbyte \d+", r"\bline 10\b", r"truncat|ends too early"),
        damage=_truncated_json,
        timeline=True,
    ),
    Case("empty_json", (r"\bempty\b",), damage=_empty_json, timeline=True),
    Case("json_not_a_trace", (r"not a Chrome-trace",), damage=_json_not_trace, timeline=True),
    Case(
        "folder_without_profile_data",
        (r"no profile data", r"PROF_\*", r"mindstudio_profiler_output", r"op_summary", r"msprof", r"paddle_trace"),
        folder=_no_data,
    ),
    Case("nonexistent_path", (r"no such file",), folder=_nonexistent),
    Case("prof_raw_data_only", (r"raw data only", r"msprof --export=on"), folder=_raw_only),
    Case("parent_of_raw_prof", (r"raw data only", r"msprof --export=on"), folder=_raw_only_parent),
]
# Cases where the brief asks for specific content instead of an instruction: columns
# expected/found, what was looked for and where, what a trace must look like.
NO_HINT_NEEDED = {"unknown_columns", "missing_duration_column", "json_not_a_trace", "folder_without_profile_data"}


def _params(with_variant: bool):
    out = []
    for case in CASES:
        variants = case.variants if with_variant else (case.variants[-1],)
        for v in variants:
            out.append(pytest.param(case, v, id=f"{case.id}-{v}"))
    return out


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize(("case", "variant"), _params(with_variant=True))
def test_open_profile_raises_one_line_error(case: Case, variant: str, tmp_path, samples, cache_dir):
    root = tmp_path / "profile"
    root.mkdir()
    target, named = case.build(root, samples, variant)
    before = snapshot(root)
    cache = FrameCache(cache_dir)
    if case.timeline and variant == "folder":
        prof = open_profile(target, cache=cache)
        assert prof.events is None and prof.tasks.height > 0
        note = next(n for n in prof.notes if n.startswith("timeline not read"))
        check_message(ProfileError(note), named, case.expect)
        assert snapshot(root) == before, "the profile folder was modified"
        return
    with pytest.raises(ProfileError, match=re.escape(str(named))) as info:
        open_profile(target, cache=cache)
    check_message(info.value, named, case.expect)
    assert_not_chained(info.value)
    assert snapshot(root) == before, "the profile folder was modified"
    assert_no_partial_cache(cache_dir)


SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"


# Cases also run as a real `python -m npuscope inspect` (exit code and stderr of the
# interpreter itself): one bad file, one bad timeline, one bad folder. The others run the same
# command in this process (cli.main), each start of an interpreter costing ~0.5 s of CPU.
OWN_PROCESS = {"empty_file", "truncated_json", "prof_raw_data_only"}


def run_cli_here(target: Path, cache: Path, cwd: Path) -> subprocess.CompletedProcess:
    """`npuscope inspect TARGET` through cli.main, with the environment and folder a process
    would get: its exit code, stdout and stderr (an escaping exception and every warning are
    written to stderr as the interpreter would, so the one-line checks see them)."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name, value in cli_env(cache).items():
            if os.environ.get(name) != value:
                mp.setenv(name, value)
        mp.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(["inspect", str(target)])
            except BaseException:  # noqa: BLE001 - shown as the interpreter would show it
                err.write("Traceback (most recent call last):\n" + traceback.format_exc())
                code = 1
    for w in caught:
        err.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno))
    return subprocess.CompletedProcess(["npuscope", "inspect", str(target)], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    """Every case through the CLI: the real processes (OWN_PROCESS) all at once, the rest
    through cli.main meanwhile."""
    base = tmp_path_factory.mktemp("cli")
    runs, pending = {}, []
    for case in CASES:
        variant = "file" if case.timeline else case.variants[-1]
        home = base / case.id
        root = home / "profile"
        root.mkdir(parents=True)
        target, named = case.build(root, SAMPLES, variant)
        cache = home / "cache"
        runs[case.id] = {"root": root, "named": named, "cache": cache, "before": snapshot(root)}
        if case.id in OWN_PROCESS:
            pending.append((case.id, start_cli(target, cache, cwd=home)))
        else:
            runs[case.id]["proc"] = run_cli_here(target, cache, cwd=home)
    for cid, proc in pending:
        runs[cid]["proc"] = finish_cli(proc)
    return runs


@pytest.mark.parametrize(("case", "variant"), _params(with_variant=False))
def test_cli_exits_2_with_one_stderr_line(case: Case, variant: str, cli_runs):
    run = cli_runs[case.id]
    line = assert_cli_error(run["proc"], run["named"])
    for pattern in case.expect:
        assert re.search(pattern, line, re.IGNORECASE), (pattern, line)
    assert snapshot(run["root"]) == run["before"], "the profile folder was modified"
    assert_no_partial_cache(run["cache"])


def _hint_params():
    out = []
    for case in CASES:
        if case.id in NO_HINT_NEEDED:
            continue
        out.append(pytest.param(case, id=case.id))
    return out


@pytest.mark.parametrize("case", _hint_params())
def test_error_message_tells_what_to_do(case: Case, tmp_path, samples, cache_dir):
    root = tmp_path / "profile"
    root.mkdir()
    target, named = case.build(root, samples, case.variants[0])
    with pytest.raises(ProfileError) as info:
        open_profile(target, cache=FrameCache(cache_dir))
    msg = str(info.value)
    assert has_hint(msg, named), f"no instruction for the user in: {msg!r}"


def test_hint_pattern_is_not_vacuous():
    """The instruction check above tells a diagnosis from an instruction."""
    p = Path("/x/op_summary.csv")
    assert has_hint(f"{p}: the file is empty; re-export the profile with msprof", p)
    assert has_hint(f"{p}: permission denied; make the file readable (chmod +r)", p)
    assert not has_hint(f"{p}: has a header but no data rows; the capture recorded nothing", p)
    assert not has_hint(f"{p}: no such file or folder", p)


def test_missing_column_message_lists_only_the_missing_one(tmp_path, samples, cache_dir):
    _, data = _missing_duration(samples)
    err = open_written(
        tmp_path / OP_SUMMARY, data, cache_dir, match=r"missing column\(s\) Task Duration\(us\) or Duration\(us\);"
    )
    missing_part = str(err).split("; found")[0]
    for present in ("Op Name", "OP Type", "Task Type", "Task Start Time(us)"):
        assert present not in missing_part


def test_truncated_json_reports_byte_offset_of_the_cut(tmp_path, samples, cache_dir):
    _, data = _truncated_json(samples)
    err = open_written(tmp_path / MSPROF, data, cache_dir, match=r"byte (\d+)")
    offset = int(re.search(r"byte (\d+)", str(err)).group(1))
    assert len(data) - 2 <= offset <= len(data)  # the error is at the cut, not elsewhere


def test_non_utf8_json_gives_the_line(tmp_path, samples, cache_dir):
    lines = pretty_timeline(samples).split(b"\n")
    assert b"Node@launch" in lines[6]
    lines[6] = lines[6].replace(b"Node@launch", "算子".encode("gbk") + b"@launch")
    f = tmp_path / MSPROF
    msg = check_message(open_written(f, b"\n".join(lines), cache_dir), f, ())
    assert re.search(r"\bline 7\b", msg), msg
    assert has_hint(msg, f), msg


def test_json_array_of_non_events_is_not_a_trace(tmp_path, samples, cache_dir):
    open_written(tmp_path / MSPROF, b'[{"foo": 1}, {"bar": 2}]', cache_dir, match="not a Chrome-trace")


# --------------------------------------------------------------------------- permissions


def _lock_op_summary(prof: Path) -> tuple[Path, Path, Path]:
    f = prof / MSOUT / OP_SUMMARY
    return f, f, f


def _lock_op_summary_open_folder(prof: Path) -> tuple[Path, Path, Path]:
    f = prof / MSOUT / OP_SUMMARY
    return f, prof, f


def _lock_timeline(prof: Path) -> tuple[Path, Path, Path]:
    f = prof / MSOUT / MSPROF
    return f, f, f


def _lock_prof(prof: Path) -> tuple[Path, Path, Path]:
    return prof, prof, prof


def _lock_export_folder(prof: Path) -> tuple[Path, Path, Path]:
    return prof / MSOUT, prof, prof / MSOUT


def _lock_export_folder_open_file(prof: Path) -> tuple[Path, Path, Path]:
    # The message may name the locked folder or the file (whose path contains the folder's).
    return prof / MSOUT, prof / MSOUT / OP_SUMMARY, prof / MSOUT


def _lock_prof_open_parent(prof: Path) -> tuple[Path, Path, Path]:
    return prof, prof.parent, prof


PY_LT_313 = sys.version_info < (3, 13)
PERM_CASES = [
    pytest.param(_lock_op_summary, id="file-open_file"),
    pytest.param(_lock_op_summary_open_folder, id="file-open_capture"),
    pytest.param(_lock_timeline, id="timeline_file-open_file"),
    pytest.param(_lock_prof, id="folder-open_folder"),
    pytest.param(_lock_export_folder, id="export_folder-open_capture"),
    pytest.param(
        _lock_export_folder_open_file,
        id="folder-open_file_inside",
    ),
    pytest.param(
        _lock_prof_open_parent,
        id="folder-open_parent",
    ),
]


@pytest.mark.parametrize("lock", PERM_CASES)
def test_permission_denied(lock, unpriv, world_dir, samples):
    mode, kw = unpriv
    root = make_dir(world_dir / "profile", 0o755)
    prof = make_capture(root, samples).parent
    cache = make_dir(world_dir / "cache", 0o777)
    locked, target, named = lock(prof)
    locked.chmod(0)
    before = snapshot(root)

    cli = start_cli(target, cache, cwd=world_dir, home=world_dir, **kw)  # runs alongside
    res = open_unprivileged(target, cache, mode, kw, world_dir)
    proc = finish_cli(cli)
    assert res["outcome"] == "error", res
    assert not res["chained"]
    msg = check_message(ProfileError(res["message"]), named, (r"permission denied",))
    assert res["message"] == msg
    assert has_hint(msg, named), msg

    line = assert_cli_error(proc, named)
    assert "permission denied" in line

    assert snapshot(root) == before, "the profile folder was modified"
    assert_no_partial_cache(cache)


def test_unreadable_unrelated_subfolder_does_not_crash(unpriv, world_dir, samples):
    mode, kw = unpriv
    root = make_dir(world_dir / "profile", 0o755)
    make_capture(root, samples)
    locked = make_dir(root / "lost+found", 0)
    cache = make_dir(world_dir / "cache", 0o777)
    before = snapshot(root)

    cli = start_cli(root, cache, cwd=world_dir, home=world_dir, **kw)
    res = open_unprivileged(root, cache, mode, kw, world_dir)
    proc = finish_cli(cli)
    assert res["outcome"] in ("ok", "error"), res["message"]
    if res["outcome"] == "ok":
        assert res["tasks"] == 3
    else:
        check_message(ProfileError(res["message"]), locked, (r"permission denied",))
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 2), proc.stderr
    assert snapshot(root) == before
    assert_no_partial_cache(cache)


def test_permission_runner_really_denies(unpriv, world_dir):
    """Guard: the unprivileged runner is denied a chmod-000 file that root could read."""
    mode, kw = unpriv
    f = world_dir / "secret.txt"
    f.write_text("x")
    f.chmod(0)
    code = "import sys\ntry:\n    open(sys.argv[1]).read()\nexcept PermissionError:\n    print('denied')\n"
    if mode == "inprocess":
        with pytest.raises(PermissionError):
            f.read_text()
    else:
        r = run_python(["-c", code, f], cache=world_dir, cwd=world_dir, **kw)
        assert r.stdout.strip() == "denied", r.stderr
