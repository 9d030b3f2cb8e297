"""The `sh` scripts a capture runs on the training host, and readers for what they print.

A run lives in ``ROOT/runs/ID/`` on the host (ROOT defaults to ``~/.cache/npuscope/capture``):

    run.sh   the detached job (bootstrap, then msprof export on npu)
    run.json the spec, one JSON line (for listing and reattaching)
    pid      the job's process group id      log    everything it printed
    phase    training | export | done        exit   its exit code, written last
    out/     the bootstrap's output (Paddle trace, PROF_* folders, npuscope_capture.json)
    fetched  written once a client has copied the results

The job is started as ``cd RUN || exit; NPUSCOPE_RUN_ID=ID setsid sh run.sh </dev/null >/dev/null
2>&1 &``: the setup is separated by ``;`` so only the job goes to the background, with every
standard stream off the SSH channel, which therefore closes at once. Every value that comes from
the user is passed through `shlex.quote`.

A pid file is not trusted on its own: the run's process group counts as running only when one of
its processes carries ``NPUSCOPE_RUN_ID=ID`` in its environment (`ALIVE`), so a finished run whose
pid was reused by another program is never signalled, and a pid file holding anything but a
process group id above 1 is refused. What the host prints back (its log, run.json, file names)
is read as untrusted text: `parse_runs` and `parse_record` never raise.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from npuscope.text import one_line

from .spec import DEFAULT_MSPROF, DEVICES, CaptureSpec

# Exit codes written to `exit`: 0-4 come from the bootstrap, the rest from run.sh or the shell.
EXIT_MESSAGES = {
    2: "the bootstrap refused its arguments",
    3: "the device cannot be profiled on this host",
    4: "training ended before the capture window",
    20: "cannot enter the working directory",
    21: "msprof not found",
    22: "msprof --export failed",
    23: "no PROF folder produced",
    126: "the python command is not executable",
    127: "command not found",
    137: "the job was killed",
    143: "the job was stopped",
}
MARK_EXIT = "NPUSCOPE_EXIT"
LOG_SNAPSHOT = "log.fetch"  # the copy of the log that is fetched
MARK_NO_RUN = "NPUSCOPE_NO_RUN"
MARK_DISK = "NPUSCOPE_DISK"  # KiB free where the run lives, said when the exit code is missing
FULL_DISK_KIB = 1024  # below this a missing exit code is blamed on a full disk
MAX_STEP = 10**12  # larger step numbers in a run's record or progress are not believed
RUN_ENV = "NPUSCOPE_RUN_ID"

# `alive DIR`: DIR's process group runs and is this run's. The pid must be a number above 1 (a
# pid file holding 1 or 0 would make `kill -1` / `kill 0` reach far more than the job); the group
# must exist; and its leader, or when the leader has gone (--keep-running after run.sh ended)
# another process of the group, must carry NPUSCOPE_RUN_ID=<DIR's name> in its environment. A
# leader alive without it is a reused pid. Needs /proc (Linux).
ALIVE = r"""alive() {
  _p=$(cat "$1/pid" 2>/dev/null); _id=${1##*/}
  case $_p in ''|0*|1|*[!0-9]*) return 1;; esac
  kill -0 -"$_p" 2>/dev/null || return 1
  for _s in /proc/"$_p"/stat /proc/[0-9]*/stat; do
    _st=; read -r _st 2>/dev/null < "$_s" || continue
    _st=${_st##*) }; set -- $_st
    [ "$3" = "$_p" ] && [ "$1" != Z ] || continue
    _q=${_s#/proc/}; _q=${_q%/stat}
    tr '\000' '\n' 2>/dev/null < /proc/"$_q"/environ | grep -qxF "NPUSCOPE_RUN_ID=$_id" && return 0
    [ "$_q" = "$_p" ] && return 1
  done
  return 1
}
"""
DISK_FREE = "df -Pk . 2>/dev/null | awk 'NR==2 {print $4}'"


def root_expr(root: str) -> str:
    """A shell word for a remote folder; a leading ~ means the remote $HOME."""
    if root == "~":
        return '"$HOME"'
    if root.startswith("~/"):
        return '"$HOME"/' + shlex.quote(root[2:])
    return shlex.quote(root)


def bootstrap_name(source: str) -> str:
    return "bootstrap-" + hashlib.sha256(source.encode()).hexdigest()[:12] + ".py"


def probe_script(spec: CaptureSpec) -> str:
    """Resolve ROOT, check the tools a run needs, the working directory and the python."""
    q = shlex.quote
    workdir = (
        f"cd {root_expr(spec.workdir)} || {{ echo 'NPUSCOPE_PROBLEM workdir'; exit 0; }}\n" if spec.workdir else ""
    )  # relative to the login folder; ~/ is the remote home
    # $PWD, not $(pwd): a trailing newline would be cut. A control character in a path would
    # split this answer into another path: refused.
    # listing, following or cancelling a run needs no command
    python = (
        f"command -v {q(spec.command[0])} >/dev/null 2>&1 || echo 'NPUSCOPE_PROBLEM python'\n" if spec.command else ""
    )
    return f"""mkdir -p {root_expr(spec.remote_root)}/runs || {{ echo 'NPUSCOPE_PROBLEM root'; exit 0; }}
cd {root_expr(spec.remote_root)} || {{ echo 'NPUSCOPE_PROBLEM root'; exit 0; }}
case $PWD in *[[:cntrl:]]*) echo 'NPUSCOPE_PROBLEM root-name'; exit 0;; esac
echo "NPUSCOPE_ROOT $PWD"
for tool in setsid tar tail find; do
  command -v "$tool" >/dev/null 2>&1 || echo "NPUSCOPE_MISSING $tool"
done
find . -maxdepth 0 -printf '' >/dev/null 2>&1 || echo "NPUSCOPE_MISSING GNU find (-printf)"
cd
{workdir}case $PWD in *[[:cntrl:]]*) echo 'NPUSCOPE_PROBLEM workdir-name'; exit 0;; esac
echo "NPUSCOPE_WORKDIR $PWD"
{python}"""


@dataclass(frozen=True)
class Probe:
    root: str = ""
    workdir: str = ""
    missing: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


def parse_probe(text: str) -> Probe:
    root = workdir = ""
    missing, problems = [], []
    for line in text.splitlines():
        word, _, rest = line.partition(" ")
        if word == "NPUSCOPE_ROOT":
            root = rest
        elif word == "NPUSCOPE_WORKDIR":
            workdir = rest
        elif word == "NPUSCOPE_MISSING":
            missing.append(rest)
        elif word == "NPUSCOPE_PROBLEM":
            problems.append(rest)
    return Probe(root, workdir, tuple(missing), tuple(problems))


def run_script(spec: CaptureSpec, run_dir: str, bootstrap: str, workdir: str) -> str:
    """run.sh: the detached job. `run_dir` and `bootstrap` are absolute remote paths."""
    q = shlex.quote
    python, script, *args = spec.command
    boot = [
        python,
        bootstrap,
        "--device",
        spec.device,
        "--start-step",
        str(spec.start_step),
        "--steps",
        str(spec.steps),
        "--out",
        run_dir + "/out",
    ]
    if spec.jit_compile:
        boot += ["--jit-compile", spec.jit_compile]
    if spec.keep_running:
        boot.append("--keep-running")
    boot += ["--", script, *args]
    exports = "".join(f"export {k}={q(v)}\n" for k, v in spec.env)
    export_step = _export_step(spec) if spec.device == "npu" else ""
    captured = "  captured && break\n" if spec.keep_running else ""
    return f"""# npuscope capture run (detached job); safe to delete once fetched
RUN={q(run_dir)}
LOG="$RUN/log"
cd "$RUN" || exit 20
{{ echo $$ > pid.tmp && [ -s pid.tmp ] && mv pid.tmp pid; }} || {{ rm -f pid.tmp; exit 24; }}  # a full disk
say() {{ echo "npuscope: $*" >> "$LOG"; }}
finish() {{ echo "$1" > "$RUN/exit.tmp"; mv "$RUN/exit.tmp" "$RUN/exit"; exit "$1"; }}
phase() {{ echo "$1" > "$RUN/phase"; printf 'NPUSCOPE {{"event": "phase", "phase": "%s"}}\\n' "$1" >> "$LOG"; }}
trap 'say "the job was stopped by a signal"; finish 143' HUP INT TERM
captured() {{  # --keep-running: the window is on disk (every rank of a distributed launch)
  grep -q '"status": "captured"' "$RUN/out/npuscope_capture.json" 2>/dev/null && return 0
  set -- "$RUN"/out/rank_*
  [ -d "$1" ] || return 1
  for r in "$@"; do
    grep -qE '"status": "(captured|ok|partial)"' "$r/npuscope_capture.json" 2>/dev/null || return 1
  done
}}
phase training
cd {q(workdir)} || {{ say "cannot enter the working directory "{q(workdir)}; finish 20; }}
export PYTHONUNBUFFERED="${{PYTHONUNBUFFERED:-1}}"  # the log is followed live
{exports}( {" ".join(q(a) for a in boot)} >> "$LOG" 2>&1; echo $? > "$RUN/rc.tmp"; mv "$RUN/rc.tmp" "$RUN/rc" ) &
while [ ! -f "$RUN/rc" ]; do
{captured}  sleep 0.2
done
rc=$(cat "$RUN/rc" 2>/dev/null || echo 0)
[ "$rc" = 0 ] || finish "$rc"
{export_step}phase done
finish 0
"""


def _export_step(spec: CaptureSpec) -> str:
    q = shlex.quote
    if spec.msprof:
        find = (
            f'M={q(spec.msprof)}\ncommand -v "$M" >/dev/null 2>&1 || '
            f'{{ say "msprof not found: "{q(spec.msprof)}" (check --msprof)"; finish 21; }}\n'
        )
    else:
        find = (
            f"M={q(DEFAULT_MSPROF)}\n"
            '[ -x "$M" ] || M=$(command -v msprof) || '
            f'{{ say "msprof not found: not at {DEFAULT_MSPROF} and not on PATH; give --msprof PATH"; finish 21; }}\n'
        )
    return f"""phase export
{find}find "$RUN/out" -type d -name 'PROF_*' -prune > "$RUN/prof.list"
[ -s "$RUN/prof.list" ] || {{ say "no PROF folder produced under $RUN/out (did the NPU profiler run?)"; finish 23; }}
while IFS= read -r p; do
  say "exporting $p"
  "$M" --export=on --output="$p" >> "$LOG" 2>&1 || {{ say "msprof --export=on failed for $p"; finish 22; }}
done < "$RUN/prof.list"
"""


def upload_script(root: str, run_id: str) -> str:
    """Unpack the tar on stdin (bootstrap, run.sh, run.json) into ROOT; when that fails (a full
    disk) remove the half-written run folder."""
    q = shlex.quote
    return f"cd {q(root)} || exit 20\ntar xf - || {{ rc=$?; rm -rf runs/{q(run_id)}; exit $rc; }}\n"


def record_script(run_dir: str) -> str:
    """The run's run.json, or nothing."""
    return f"cat {shlex.quote(run_dir)}/run.json 2>/dev/null; exit 0\n"


def launch_script(run_dir: str) -> str:
    """Start run.sh detached, its run id in its environment, and print its pid once it has
    written it (else the free space, a full disk being the likely reason)."""
    q = shlex.quote
    run_id = run_dir.rstrip("/").rsplit("/", 1)[-1]
    return f"""cd {q(run_dir)} || exit 20; command -v setsid >/dev/null 2>&1 || {{ echo 'NPUSCOPE_MISSING setsid'; exit 0; }}
{RUN_ENV}={q(run_id)} setsid sh run.sh </dev/null >/dev/null 2>&1 &
i=0; while [ ! -s pid ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
echo "NPUSCOPE_PID $(cat pid 2>/dev/null)"
[ -s pid ] || echo "{MARK_DISK} $({DISK_FREE})"
"""


def follow_script(run_dir: str, token: str = "") -> str:
    """The job's log from the start, live, until the job ends; then its exit code (and the free
    space when there is none). The markers end with `token`, which the job cannot know: a log
    line can never pass for them."""
    q = shlex.quote
    t = f"-{token}" if token else ""
    return f"""RUN={q(run_dir)}
cd "$RUN" 2>/dev/null || {{ echo {MARK_NO_RUN}{t}; exit 0; }}
{ALIVE}i=0; while [ ! -s pid ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
touch log 2>/dev/null
if [ -f exit ] || ! alive "$RUN"; then cat log
elif tail --help 2>&1 | grep -q -e --pid; then tail -n +1 -f -s 0.2 --pid="$(cat pid)" log  # -s: look for the pid every 0.2 s (default 1 s)
else  # a tail without --pid (busybox): no live log, all of it at the end
  while [ ! -f exit ] && alive "$RUN"; do sleep 1; done; cat log
fi
printf '\\n{MARK_EXIT}{t} %s\\n' "$(cat exit 2>/dev/null)"  # after a last line without newline
[ -s exit ] || echo "{MARK_DISK}{t} $({DISK_FREE})"
"""


def cancel_script(run_dir: str) -> str:
    """Stop the job's whole process group: TERM, then KILL after 5 s; only when the group is
    still this run's (`ALIVE`), never a pid that names anything else."""
    q = shlex.quote
    return f"""RUN={q(run_dir)}
cd "$RUN" 2>/dev/null || {{ echo {MARK_NO_RUN}; exit 0; }}
{ALIVE}p=$(cat pid 2>/dev/null)
[ -n "$p" ] || {{ echo NPUSCOPE_NOT_RUNNING; exit 0; }}
case $p in 0*|1|*[!0-9]*) printf 'NPUSCOPE_BAD_PID %.40s\\n' "$p"; exit 0;; esac
alive "$RUN" || {{ echo NPUSCOPE_NOT_RUNNING; exit 0; }}
echo cancelled > cancelled
kill -TERM -"$p" 2>/dev/null
i=0; while alive "$RUN" && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
alive "$RUN" && kill -KILL -"$p" 2>/dev/null
[ -f exit ] || {{ echo 143 > exit; }}
echo NPUSCOPE_CANCELLED
"""


def list_script(root: str) -> str:
    return f"""cd {root_expr(root)}/runs 2>/dev/null || exit 0
{ALIVE}field() {{ printf '%s' "$1" | tr '\\t\\n\\r' '   '; }}  # one field of one line
for d in */; do
  d=${{d%/}}; [ -d "$d" ] || continue
  e=$(head -c 64 "$d/exit" 2>/dev/null); ph=$(head -c 64 "$d/phase" 2>/dev/null)
  a=0; alive "$d" && a=1
  f=0; [ -f "$d/fetched" ] && f=1
  printf 'NPUSCOPE_RUN\\t%s\\t%s\\t%s\\t%s\\t%s\\t' "$(field "$d")" "$(field "$e")" "$a" "$(field "$ph")" "$f"
  head -n 1 "$d/run.json" 2>/dev/null | tr -d '\\r\\n'; echo
done
"""


ABANDONED_MIN = 10  # a run folder without a pid this old never started (upload or launch failed)


def clean_script(root: str) -> str:
    """Delete every run that has ended and was fetched, or failed, or was lost (no exit code and
    no process left), or never started (no pid after ABANDONED_MIN minutes: a failed upload);
    keep running and unfetched ones.

    A run folder's age is its mtime against a file made now in the same folder: both stamped by
    the clock that stamps the host's files (an NFS server's may differ from the host's own, and
    the client's is never asked); `date` only when no file can be made (a full disk)."""
    return f"""cd {root_expr(root)}/runs 2>/dev/null || exit 0
{ALIVE}stamp() {{ _t=$(find "$1" -maxdepth 0 -printf '%T@' 2>/dev/null); _t=${{_t%.*}}; case $_t in ''|*[!0-9]*) return 1;; esac; echo "$_t"; }}
ref=".npuscope-now.$$"; now=
: > "$ref" 2>/dev/null && now=$(stamp "$ref"); rm -f "$ref"
[ -n "$now" ] || now=$(date +%s)
for d in */; do
  d=${{d%/}}
  if [ ! -s "$d/pid" ]; then  # starting, or never started
    m=$(stamp "$d") || continue
    [ $((now - m)) -gt {ABANDONED_MIN * 60} ] || continue
  else
    alive "$d" && continue  # running
    [ "$(cat "$d/exit" 2>/dev/null)" = 0 ] && [ ! -f "$d/fetched" ] && continue  # not fetched yet
  fi
  kb=$(du -sk "$d" | cut -f1)
  rm -rf "$d" && printf 'NPUSCOPE_CLEANED\t%s\t%s\n' "$d" "$kb"
done
"""


def parse_cleaned(text: str) -> list[tuple[str, int]]:
    """(run id, KiB freed) for each run `clean_script` deleted."""
    cleaned = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0] == "NPUSCOPE_CLEANED" and _NUMBER.match(parts[2]):
            cleaned.append((parts[1], int(parts[2])))
    return cleaned


_NUMBER = re.compile(r"^[0-9]{1,18}$")  # ASCII digits only: str.isdigit() accepts '²', int() does not
_EXIT = re.compile(r"^-?[0-9]{1,9}$")


def parse_exit(text: str) -> int | None:
    """An exit code as written by run.sh, or None for anything else (empty, garbage)."""
    text = text.strip()
    return int(text) if _EXIT.match(text) else None


def parse_json_object(text: str) -> dict[str, Any] | None:
    """`text` as a JSON object, or None: never raises (deep nesting, huge numbers, bad UTF-8)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError, TypeError):
        return None
    return data if isinstance(data, dict) else None


def whole(value: object, low: int = 0, high: int = MAX_STEP) -> int | None:
    """`value` when it is a JSON whole number in [low, high] (not a bool, a float or a string)."""
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    return None


@dataclass(frozen=True)
class RunRecord:
    """What a client needs from a run's run.json, checked; `problem` says why it is not usable."""

    command: tuple[str, ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)  # device, start_step, steps, keep_running
    created: float | None = None
    problem: str = ""


def parse_record(text: str) -> RunRecord:
    """run.json's first line, checked field by field; a bad record names its first problem."""
    if not text.strip():
        return RunRecord(problem="no run.json")
    data = parse_json_object(text)
    if data is None:
        return RunRecord(problem="not a JSON object")
    spec = data.get("spec", {})
    if not isinstance(spec, dict):
        return RunRecord(problem="spec is not an object")
    command = spec.get("command", [])
    if not isinstance(command, list) or not all(isinstance(w, str) for w in command):
        return RunRecord(problem="command is not a list of words")
    fields: dict[str, Any] = {}
    for key, low in (("start_step", 0), ("steps", 1)):
        if key in spec:
            value = whole(spec[key], low)
            if value is None:
                return RunRecord(problem=f"{key} is not a whole number from {low} to {MAX_STEP}")
            fields[key] = value
    if "device" in spec:
        if spec["device"] not in DEVICES:
            return RunRecord(problem=f"device is not one of {', '.join(DEVICES)}")
        fields["device"] = spec["device"]
    if "keep_running" in spec:
        if not isinstance(spec["keep_running"], bool):
            return RunRecord(problem="keep_running is not true or false")
        fields["keep_running"] = spec["keep_running"]
    created = data.get("created")
    if not (isinstance(created, (int, float)) and not isinstance(created, bool) and 0 <= created < 1e11):
        created = None
    return RunRecord(tuple(command), fields, float(created) if created is not None else None)


@dataclass(frozen=True)
class RunInfo:
    """One run as `--list` shows it. Every text field comes from the host: `label()` is printable."""

    id: str
    exit: int | None
    alive: bool
    phase: str
    fetched: bool
    record: dict[str, Any]  # run.json's checked fields: {"created": float} when known, else {}
    problem: str = ""  # why run.json is bad ("" when it is fine)
    words: tuple[str, ...] = ()  # the training command

    @property
    def state(self) -> str:
        if self.exit is None:
            return "running" if self.alive else "lost"
        if self.exit != 0:
            return f"failed ({self.exit})"
        if self.alive:  # --keep-running: captured, training goes on
            return "fetched+run" if self.fetched else "captured+run"
        return "fetched" if self.fetched else "finished"

    @property
    def command(self) -> str:
        return " ".join(self.words)

    def label(self) -> str:
        """One line for listings: id, state, phase, command (or why run.json is bad)."""
        what = f"[bad run.json: {self.problem}]" if self.problem else self.command
        return one_line(f"{self.id}  {self.state:<12} {self.phase or '-':<9} {what}")


def parse_runs(text: str) -> list[RunInfo]:
    """`list_script`'s lines as runs, newest first; a line that is not one is skipped, a bad
    run.json gives a run whose `problem` says so."""
    runs = []
    for line in text.splitlines():
        parts = line.split("\t", 6)
        if len(parts) != 7 or parts[0] != "NPUSCOPE_RUN":
            continue
        _, rid, code, alive, phase, fetched, record = parts
        rec = parse_record(record)
        runs.append(
            RunInfo(
                rid,
                parse_exit(code),
                alive == "1",
                phase.strip(),
                fetched == "1",
                {"created": rec.created} if rec.created is not None else {},
                rec.problem,
                rec.command,
            )
        )
    runs.sort(key=lambda r: r.id, reverse=True)
    return runs


def listing_script(run_dir: str) -> str:
    """Sizes and paths of what the job wrote, relative to the run folder, each ended by a NUL (a
    file name may hold a newline). The log is copied first: a job that goes on (--keep-running)
    keeps writing it while tar reads."""
    q = shlex.quote
    return (
        f"cd {q(run_dir)} && cp log {LOG_SNAPSHOT} 2>/dev/null; "
        f"find out {LOG_SNAPSHOT} -type f -printf '%s\\t%p\\0' 2>/dev/null; exit 0\n"
    )


def tar_script(run_dir: str) -> str:
    """A tar of the NUL-separated paths read from stdin, on stdout. GNU tar's exit 1 only says
    a file changed while it was read (a rank's manifest rewritten at the end of training)."""
    return f"cd {shlex.quote(run_dir)} && {{ tar cf - --null --no-unquote -T -; rc=$?; [ $rc -le 1 ] || exit $rc; }}\n"


def mark_fetched_script(run_dir: str, local: str) -> str:
    return f"printf '%s\\n' {shlex.quote(local)} > {shlex.quote(run_dir)}/fetched\n"
