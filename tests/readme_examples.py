"""The README's examples, produced by the code: every code block of README.md carries a marker
on the line before its fence, saying how its text is made or that it is not output.

    <!-- example: npuscope report --card 0 --top 3 -->
        the command's stdout (run as `python -m npuscope ...` in an empty folder, exit 0); the
        block may begin with the command as typed, `$ npuscope report ...  # a comment`
    <!-- example: npuscope compare base/ new/ (in recompile-pair) -->
        the same, run in the folder of a generated profile (PROFILES below)
    <!-- example: npuscope gate demo/ --budgets budgets.toml (in budgets, exit 1) -->
        the same, a command that must end with that exit code
    <!-- example: explorer demo 80x24 keys=w -->
        the explorer's screen text at that size, in Textual's Pilot, once the profile is loaded
        and the keys (comma-separated Textual key names) are pressed; `demo` or a PROFILES name
    <!-- example: text npuscope.analysis.totals:VOCABULARY -->
        a string of the code, as it is
    <!-- not output: a command to type -->
        not compared (commands, code); the words after the colon say what it is

Elisions in a block: a line `...` matches any run of lines (none too); elsewhere in a line
`...` matches any text (`text...` a line beginning with `text`, `...text` one ending with it:
machine-dependent paths, long advice). `…` is not an elision: the explorer and the tables draw
it themselves where they cut a cell, so it is compared as it is. Trailing whitespace is ignored.

    python tests/readme_examples.py            # compare every block, print the differences
    python tests/readme_examples.py --update   # rewrite the blocks that differ

The update keeps the README's elisions: a `...` line stays and swallows what it did, a line cut
with `...` is cut again at the same place in the new text; the rest is the new output. Each new
block is checked against the output before it is written (else the whole output is written and
said). tests/test_readme_examples.py runs the same comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GAP = "..."

MARKER = re.compile(r"^<!-- (example|not output): (.+?) -->\s*$")
FENCE = re.compile(r"^(```+|~~~+)(.*)$")
IN_PROFILE = re.compile(r"^(.*?)\s+\(in ([\w-]+)(?:, exit (\d+))?\)$")
SIZE = re.compile(r"^(\d+)x(\d+)$")


# ----------------------------------------------------------------------------- the README's blocks


@dataclass
class Block:
    """One fenced code block: `start` is the index of its first content line in the file's lines,
    `end` that of its closing fence; `kind` is "example", "not output" or None (no marker)."""

    start: int
    end: int
    lines: list[str]
    kind: str | None
    spec: str

    @property
    def line(self) -> int:  # 1-based line of the opening fence, for messages
        return self.start

    @property
    def label(self) -> str:
        return f"README.md:{self.line} {self.kind or 'no marker'}: {self.spec}"


def blocks(text: str) -> list[Block]:
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group(1)
        j = i + 1
        while j < len(lines) and not lines[j].startswith(fence):
            j += 1
        before = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        marker = MARKER.match(before)
        kind, spec = (marker.group(1), marker.group(2).strip()) if marker else (None, "")
        out.append(Block(i + 1, j, lines[i + 1 : j], kind, spec))
        i = j + 1
    return out


def indented_code(text: str) -> list[int]:
    """1-based lines that open an indented (4 spaces) code block outside the fences: such a
    block cannot carry a marker, so output is shown fenced."""
    out, fenced, previous = [], False, ""
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith(("    ", "\t")) and line.strip() and not previous.strip():
            out.append(n)
        previous = line
    return out


# ----------------------------------------------------------------------------- matching and update


def _is_gap(line: str) -> bool:
    return line.rstrip() == GAP


@cache
def _pattern(line: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in line.rstrip().split(GAP)), re.DOTALL)


def line_matches(expected: str, actual: str) -> bool:
    if GAP not in expected:
        return expected.rstrip() == actual.rstrip()
    return _pattern(expected).fullmatch(actual.rstrip()) is not None


def matches(expected: list[str], actual: list[str]) -> bool:
    """`expected` (the README's lines, with elisions) matches `actual` (the output's) in full."""
    m, n = len(expected), len(actual)
    # ok[i][j]: expected[i:] matches actual[j:]
    ok = [[False] * (n + 1) for _ in range(m + 1)]
    ok[m][n] = True
    for i in range(m - 1, -1, -1):
        gap = _is_gap(expected[i])
        for j in range(n, -1, -1):
            if gap:
                ok[i][j] = ok[i + 1][j] or (j < n and ok[i][j + 1])
            else:
                ok[i][j] = j < n and ok[i + 1][j + 1] and line_matches(expected[i], actual[j])
    return ok[0][0]


def _similarity(expected: str, actual: str) -> float:
    parts = expected.rstrip().split(GAP)
    actual = actual.rstrip()
    if len(parts) == 2 and len(parts[0]) + len(parts[1]) <= len(actual):
        head, tail = parts
        actual = actual[: len(head)] + (actual[len(actual) - len(tail) :] if tail else "")
    return difflib.SequenceMatcher(None, "".join(parts), actual, autojunk=False).ratio()


def _recut(expected: str, actual: str) -> str:
    """`actual` cut with `...` where `expected` was: a prefix as long (back to a space when the
    README's cut was after one), a suffix as long; with two cuts or more, `actual` whole."""
    parts = expected.rstrip().split(GAP)
    actual = actual.rstrip()
    if len(parts) != 2 or len(parts[0]) + len(parts[1]) >= len(actual):
        return actual
    head, tail = parts
    cut = len(head)
    if head[-1:].isspace():
        space = actual.rfind(" ", 0, cut)
        cut = space + 1 if space > 0 else cut
    start = len(actual) - len(tail)
    if tail[:1] in ("/", " "):  # a path or words: from the next one on
        found = actual.find(tail[0], start)
        start = found if found >= cut else start
    return actual[:cut] + GAP + (actual[start:] if tail else "")


DROP, INSERT = 2.0, 1.0  # an expected line with no counterpart / an output line added


def refresh(expected: list[str], actual: list[str]) -> list[str]:
    """The block to write for output `actual`, keeping the elisions of `expected`.

    A least-cost alignment: a `...` line swallows output lines for nothing; an expected line is
    paired with an output line (free when it matches, else by how unlike they are), dropped, or
    an output line is added. Lines that still match are kept as written (their elisions too), a
    line cut with `...` is cut again in the new text, every other line is the new output (in a
    block that cuts lines, a new one wider than its widest whole line is cut too)."""
    if not any(GAP in line for line in expected):
        return [line.rstrip() for line in actual]
    # A new line wider than the block's widest whole line is cut as the README cuts lines.
    width = max((len(line.rstrip()) for line in expected if GAP not in line), default=0)
    cuts = any(GAP in line and not _is_gap(line) for line in expected)

    def new_line(line: str) -> str:
        line = line.rstrip()
        if cuts and width and len(line) > width:
            space = line.rfind(" ", 0, width - len(GAP))
            if space > width // 2:
                return line[: space + 1] + GAP
        return line

    m, n = len(expected), len(actual)
    inf = float("inf")
    cost = [[inf] * (n + 1) for _ in range(m + 1)]
    step: list[list[str]] = [[""] * (n + 1) for _ in range(m + 1)]
    cost[m][n] = 0.0
    for i in range(m, -1, -1):
        for j in range(n, -1, -1):
            if i == m and j == n:
                continue
            best, how = inf, ""
            if i < m and _is_gap(expected[i]):
                best, how = cost[i + 1][j], "close"
                if j < n and cost[i][j + 1] < best:
                    best, how = cost[i][j + 1], "swallow"
            else:
                if i < m and j < n:
                    pair = (
                        0.0
                        if line_matches(expected[i], actual[j])
                        else 0.5 + 3 * (1 - _similarity(expected[i], actual[j]))
                    )
                    if pair + cost[i + 1][j + 1] < best:
                        best, how = pair + cost[i + 1][j + 1], "pair"
                if i < m and DROP + cost[i + 1][j] < best:
                    best, how = DROP + cost[i + 1][j], "drop"
                if j < n and INSERT + cost[i][j + 1] < best:
                    best, how = INSERT + cost[i][j + 1], "insert"
            cost[i][j], step[i][j] = best, how
    out, i, j = [], 0, 0
    while (i, j) != (m, n):
        how = step[i][j]
        if how == "close":
            out.append(GAP)
            i += 1
        elif how == "swallow":
            j += 1
        elif how == "pair":
            e, a = expected[i], actual[j]
            if line_matches(e, a):
                out.append(e.rstrip())
            elif GAP in e and _similarity(e, a) >= 0.5:
                out.append(_recut(e, a))
            elif GAP in e:
                out.append(new_line(a))
            else:  # a whole line stays whole
                out.append(a.rstrip())
            i, j = i + 1, j + 1
        elif how == "drop":
            i += 1
        else:
            out.append(new_line(actual[j]))
            j += 1
    if not matches(out, actual):  # cannot happen by construction; never write a wrong block
        return [line.rstrip() for line in actual]
    return out


# ----------------------------------------------------------------------------- producing the output


def _demo(root: Path) -> Path:
    from npuscope.fixtures.demo_profile import ensure_demo

    return ensure_demo()


def _cluster_4(root: Path) -> Path:
    """The Ranks view's cluster of tests/test_snapshots.py (`cluster`): four ranks, rank 0 and
    the link 1 -> 2 planted slow, in a folder named `job` (the header shows the name)."""
    from npuscope.fixtures.generate import generate

    path = root / "job"
    generate(
        path,
        layout="torch_npu",
        cards=4,
        problems=("slow_rank", "slow_link"),
        training=True,
        timeline=False,
        steps=2,
        ops_per_step=60,
    )
    return path


def _recompile_pair(root: Path) -> Path:
    """tests/test_compare.py's `recompile_pair`: the same run (seed 0) with and without the
    planted recompilation, as `base/` and `new/`."""
    from npuscope.fixtures.generate import generate

    generate(root / "base", layout="era_b", cards=2, problems=("recompilation",), seed=0)
    generate(root / "new", layout="era_b", cards=2, problems=(), seed=0)
    return root


def _budgets(root: Path) -> Path:
    """The bundled demo as `demo/` beside README's budgets file (npuscope gate's EXAMPLE)."""
    from npuscope.gate_cmd import EXAMPLE

    (root / "demo").symlink_to(_demo(root), target_is_directory=True)
    (root / "budgets.toml").write_text(EXAMPLE)
    return root


@dataclass(frozen=True)
class Profile:
    build: Callable[[Path], Path]
    cluster: bool = False  # opened as a cluster: the Ranks view first


PROFILES = {
    "demo": Profile(_demo),
    "cluster-4": Profile(_cluster_4, cluster=True),
    "recompile-pair": Profile(_recompile_pair),
    "budgets": Profile(_budgets),
}


class ExampleError(Exception):
    """A marker that cannot be run, or a command that failed: one message."""


@dataclass
class Workspace:
    """A folder for the generated profiles (each built once) and the commands' caches."""

    root: Path
    built: dict[str, Path] = field(default_factory=dict)
    runs: int = 0

    def profile(self, name: str) -> Path:
        if name not in PROFILES:
            raise ExampleError(f"unknown profile {name!r} (known: {', '.join(PROFILES)})")
        if name not in self.built:
            folder = self.root / "profiles" / name
            folder.mkdir(parents=True, exist_ok=True)
            self.built[name] = PROFILES[name].build(folder)
        return self.built[name]

    def fresh(self, what: str) -> Path:
        self.runs += 1
        path = self.root / f"{what}-{self.runs}"
        path.mkdir(parents=True)
        return path


def command_of(spec: str) -> tuple[str, str | None, int]:
    """An example's command, the profile it runs in (None: an empty folder) and the exit code
    it must end with (0 unless the marker says `, exit N`)."""
    m = IN_PROFILE.match(spec)
    return (m.group(1), m.group(2), int(m.group(3) or 0)) if m else (spec, None, 0)


def run_cli(spec: str, ws: Workspace) -> list[str]:
    command, profile, code = command_of(spec)
    argv = shlex.split(command)
    if argv[:1] != ["npuscope"]:
        raise ExampleError(f"not an npuscope command: {command}")
    cwd = ws.profile(profile) if profile else ws.fresh("cwd")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NPUSCOPE_CACHE_DIR")}
    env["NPUSCOPE_CACHE_DIR"] = str(ws.fresh("cache"))
    env["NPUSCOPE_RUNS_DB"] = "off"  # the examples are not runs of the user's
    res = subprocess.run(
        [sys.executable, "-m", "npuscope", *argv[1:]],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if res.returncode != code:
        tail = "\n".join(res.stderr.splitlines()[-15:])
        raise ExampleError(f"`{command}` exited {res.returncode}, not {code}:\n{tail}")
    return res.stdout.splitlines()


def screen_text(app) -> list[str]:
    """The screen as text, drawn as `App.export_screenshot` draws it (the compositor's full
    update), exported as plain text instead of SVG."""
    from rich.console import Console

    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system=None,
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return [line.rstrip() for line in console.export_text(styles=False).splitlines()]


async def _explorer(path: Path, cluster: bool, size: tuple[int, int], keys: list[str]) -> list[str]:
    from pilot_helpers import wait_loaded
    from textual.widgets import Input

    from npuscope.tui.app import NpuscopeApp

    app = NpuscopeApp(path, cache=False, clusters=cluster)
    async with app.run_test(size=size) as pilot:
        if cluster:  # as tests/test_snapshots.py's _ranks_view, within a minute
            for _ in range(6000):
                if app.ranks is not None and app.screen is app.ranks:
                    break
                await pilot.pause(0.01)
            else:
                raise ExampleError(f"the Ranks view of {path} did not open within a minute")
        else:
            await wait_loaded(pilot)
        for key in keys:
            await pilot.press(key)
        await app.workers.wait_for_complete()
        await pilot.pause()
        for entry in app.screen.query(Input):  # a blinking cursor would differ between runs
            entry.cursor_blink = False
        await pilot.pause()
        return screen_text(app)


def run_explorer(spec: str, ws: Workspace) -> list[str]:
    words = spec.split()
    if len(words) < 2 or not SIZE.match(words[1]):
        raise ExampleError(f"expected `explorer PROFILE WxH [keys=K1,K2]`: {spec}")
    name, size = words[0], SIZE.match(words[1])
    keys: list[str] = []
    for word in words[2:]:
        if not word.startswith("keys="):
            raise ExampleError(f"unknown option {word!r} in `explorer {spec}`")
        keys = [k for k in word[len("keys=") :].split(",") if k]
    path = ws.profile(name)
    return asyncio.run(_explorer(path, PROFILES[name].cluster, (int(size[1]), int(size[2])), keys))


def run_text(spec: str, ws: Workspace) -> list[str]:
    module, _, name = spec.partition(":")
    try:
        value = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ExampleError(f"text {spec}: {exc}") from None
    return str(value).splitlines()


def output(block: Block, ws: Workspace) -> list[str]:
    """What the block's marker produces."""
    kind, _, rest = block.spec.partition(" ")
    if kind == "npuscope":
        return run_cli(block.spec, ws)
    if kind == "explorer":
        return run_explorer(rest, ws)
    if kind == "text":
        return run_text(rest.strip(), ws)
    raise ExampleError(f"unknown example kind {kind!r}: {block.spec}")


def split_prompt(block: Block) -> tuple[list[str], list[str]]:
    """A CLI example's leading `$ command` line (as typed) and the lines that are output."""
    if block.spec.startswith("npuscope ") and block.lines and block.lines[0].startswith("$ "):
        return block.lines[:1], block.lines[1:]
    return [], block.lines


def prompt_problem(block: Block) -> str | None:
    """The `$ ` line, if any, must be the command the marker runs (a `  # comment` aside)."""
    prompt, _ = split_prompt(block)
    if not prompt:
        return None
    typed = re.sub(r"\s+#.*$", "", prompt[0][2:]).strip()
    command, _, _ = command_of(block.spec)
    return None if typed == command else f"the block shows `$ {typed}` but its marker runs `{command}`"


@dataclass
class Result:
    block: Block
    new: list[str] | None  # the block's lines to write (None: the example failed)
    error: str | None = None

    @property
    def changed(self) -> bool:
        return self.new is not None and [x.rstrip() for x in self.new] != [x.rstrip() for x in self.block.lines]


def evaluate(block: Block, ws: Workspace) -> Result:
    problem = prompt_problem(block)
    if problem:
        return Result(block, None, problem)
    prompt, shown = split_prompt(block)
    try:
        actual = output(block, ws)
    except ExampleError as exc:
        return Result(block, None, str(exc))
    if matches(shown, actual):
        return Result(block, block.lines)
    return Result(block, prompt + refresh(shown, actual))


def examples(text: str) -> list[Block]:
    return [b for b in blocks(text) if b.kind == "example"]


def diff(result: Result) -> str:
    return "\n".join(
        difflib.unified_diff(
            [x.rstrip() for x in result.block.lines],
            [x.rstrip() for x in result.new or []],
            "README.md (now)",
            "the code's output",
            lineterm="",
        )
    )


def apply(text: str, results: list[Result]) -> tuple[str, list[Result]]:
    """`text` with the changed blocks replaced, and the results that could not be: each is put
    where a block with the same marker and the same old lines is now (README.md may have been
    edited elsewhere while the examples ran), from the last, so the indices stay right."""
    lines = text.splitlines()
    now = blocks(text)
    placed, missing = [], []
    for r in results:
        if not r.changed:
            continue
        same = [b for b in now if (b.kind, b.spec, b.lines) == (r.block.kind, r.block.spec, r.block.lines)]
        if len(same) == 1:
            placed.append((same[0], r.new))
        else:
            missing.append(r)
    for b, new in sorted(placed, key=lambda x: x[0].start, reverse=True):
        lines[b.start : b.end] = new
    return "\n".join(lines) + ("\n" if text.endswith("\n") else ""), missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Compare (or --update) the README's example blocks with the code's output."
    )
    parser.add_argument("--update", action="store_true", help="rewrite the blocks that differ")
    parser.add_argument("--readme", type=Path, default=README, help="the file (default: the checkout's README.md)")
    args = parser.parse_args(argv)
    readme = args.readme
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # pilot_helpers
    text = readme.read_text(encoding="utf-8")
    unmarked = [b for b in blocks(text) if b.kind is None]
    for b in unmarked:
        print(f"{b.label}: a code block needs <!-- example: ... --> or <!-- not output: ... --> before it")
    for n in indented_code(text):
        print(f"README.md:{n}: an indented code block (fence it and give it a marker)")
    with tempfile.TemporaryDirectory(prefix="readme-examples-") as tmp:
        ws = Workspace(Path(tmp))
        results = [evaluate(b, ws) for b in examples(text)]
    failed = [r for r in results if r.error]
    changed = [r for r in results if r.changed]
    for r in failed:
        print(f"{r.block.label}: FAILED (left as it is): {r.error}")
    for r in changed:
        print(f"{r.block.label}: {'updated' if args.update else 'differs'}")
        print(diff(r))
    if args.update and changed:
        new_text, missing = apply(readme.read_text(encoding="utf-8"), changed)
        readme.write_text(new_text, encoding="utf-8")
        for r in missing:
            print(f"{r.block.label}: edited while the examples ran: not written, run --update again")
        if missing:
            return 1
    print(
        f"{len(results)} example block(s): {len(changed)} {'updated' if args.update else 'differ'}, {len(failed)} failed"
    )
    return 1 if failed or unmarked or (changed and not args.update) else 0


if __name__ == "__main__":
    sys.exit(main())
