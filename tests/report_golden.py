"""Report JSON of every shared sample and of generated cases, against a stored copy.

A refactor keeps behaviour identical: `npuscope report --format json` (default card and
`--card all`) over every sample of fixtures/samples, the demo and a set of generated exports
(every layout, db and text, a cluster), and `npuscope compare --format json` of two generated
runs, must print the same bytes before and after. tests/golden_reports/ holds the outputs;
tests/test_report_golden.py compares them.

    python tests/report_golden.py            # compare, print the cases that differ
    python tests/report_golden.py --update   # rewrite the stored outputs

A command that fails stores its exit code and its one-line error instead. Paths are the only
machine-dependent text: the case's root is written `<ROOT>`.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "fixtures" / "samples"
STORED = Path(__file__).resolve().parent / "golden_reports"

# Each sample folder (or file) a user would open, relative to fixtures/samples.
SAMPLE_CASES = (
    "msprof_golden",
    "cann5x_device_summary",
    "cann5x_device_summary/op_summary_spreadsheet_mangled.csv",
    "torch_npu_ascend_pt",
    "paddle_cpu",
    "msprof_op/tilelang_app_910b2",
    "msprof_op/vec_add_910b2",
    "real/msprof_db_2023",
    "real/torch_npu_2023_gpt3_2rank",
    "real/torch_npu_2023_gpt3_2rank/test_rank_0",
    "real/torch_npu_2024_cnn/level0",
    "real/torch_npu_2024_cnn/level1",
    "real/torch_npu_2024_cnn/level1/rank0_ascend_pt",
    "real/torch_npu_2025_db/level0",
    "real/torch_npu_2025_db/level1",
    "real/torch_npu_2025_db/level1/rank1_ascend_pt",
)


@dataclass(frozen=True)
class Generated:
    name: str
    make: Callable[[Path], None]


def _gen(**kwargs: object) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        from npuscope.fixtures.generate import generate

        generate(folder, **kwargs)  # type: ignore[arg-type]

    return make


def _cluster(**kwargs: object) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        from npuscope.fixtures.generate import generate_cluster

        generate_cluster(folder, **kwargs)  # type: ignore[arg-type]

    return make


def _parallel(**kwargs: object) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        from npuscope.fixtures.parallel_cluster import generate_parallel

        generate_parallel(folder, **kwargs)  # type: ignore[arg-type]

    return make


def _demo(folder: Path) -> None:
    from npuscope.fixtures.generate import write_demo

    write_demo(folder)


GENERATED = (
    Generated("demo", _demo),
    Generated("era_b_2cards", _gen(cards=2, steps=3, ops_per_step=120, seed=3)),
    Generated("era_b_db", _gen(cards=1, steps=3, ops_per_step=120, seed=4, db=True)),
    Generated("era_b_clean", _gen(cards=1, steps=2, ops_per_step=80, seed=5, problems=())),
    Generated("era_a", _gen(layout="era_a", cards=1, steps=3, ops_per_step=100, seed=6)),
    Generated("torch_training", _gen(layout="torch_npu", cards=2, steps=3, ops_per_step=100, seed=7, training=True)),
    Generated("cluster_4", _cluster(ranks=4, steps=3, ops_per_step=80, seed=8)),
    Generated("cluster_db_only", _cluster(ranks=3, steps=2, ops_per_step=60, seed=9, db="only")),
    # Pipeline and data parallel, every plant, the last stage's ranks without kernel_details.
    Generated("parallel_tp1pp2dp2", _parallel(tp=1, pp=2, dp=2)),
)


def _run(argv: list[str], root: Path) -> str:
    from npuscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    text = out.getvalue() if code == 0 else f"exit {code}\n{err.getvalue()}"
    return text.replace(str(root), "<ROOT>")


def _report_cases(name: str, path: Path, root: Path) -> Iterator[tuple[str, Callable[[], str]]]:
    base = ["report", str(path), "--format", "json", "--no-cache"]
    yield f"{name}.report", lambda: _run(base, root)
    yield f"{name}.report-all", lambda: _run([*base, "--card", "all"], root)


def _cases(root: Path) -> Iterator[tuple[str, Callable[[], str]]]:
    for rel in SAMPLE_CASES:
        yield from _report_cases("sample-" + rel.replace("/", "-"), SAMPLES / rel, SAMPLES)
    for case in GENERATED:
        yield from _report_cases("gen-" + case.name, root / case.name, root)
    argv = ["compare", str(root / "era_b_2cards"), str(root / "era_b_db"), "--format", "json", "--no-cache"]
    yield "gen-compare", lambda: _run(argv, root)


def outputs(only: str | None = None) -> Iterator[tuple[str, str]]:
    """(case name, output) of every case, or of those whose name contains `only`; a generated
    export is written when a case needs it."""
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        root = Path(tmp)
        made: dict[str, Path] = {}
        for name, run in _cases(root):
            if only is not None and only not in name:
                continue
            for case in GENERATED:
                needed = name.startswith(f"gen-{case.name}.") or (
                    name == "gen-compare" and case.name in ("era_b_2cards", "era_b_db")
                )
                if needed and case.name not in made:
                    case.make(root / case.name)
                    made[case.name] = root / case.name
            yield name, run()


def compare(only: str | None = None) -> list[str]:
    """The differences from the stored outputs, one block per case (empty when none)."""
    problems = []
    for name, text in outputs(only):
        stored = STORED / f"{name}.json"
        if not stored.exists():
            problems.append(f"{name}: no stored output (run with --update)")
            continue
        old = stored.read_text(encoding="utf-8")
        if old != text:
            diff = difflib.unified_diff(old.splitlines(), text.splitlines(), "stored", "now", lineterm="", n=1)
            problems.append(f"{name}:\n" + "\n".join(list(diff)[:40]))
    return problems


def update() -> int:
    STORED.mkdir(exist_ok=True)
    names = set()
    for name, text in outputs():
        names.add(name)
        (STORED / f"{name}.json").write_text(text, encoding="utf-8")
    for stale in STORED.glob("*.json"):
        if stale.stem not in names:
            stale.unlink()
    print(f"{len(names)} outputs written to {STORED}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite the stored outputs")
    parser.add_argument("--only", help="the cases whose name contains this")
    args = parser.parse_args(argv)
    if args.update:
        return update()
    problems = compare(args.only)
    for problem in problems:
        print(problem)
    print("same as stored" if not problems else f"{len(problems)} case(s) differ")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
