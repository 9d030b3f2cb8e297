"""One vocabulary: the explorer's header and KPI cards, the report (its card sections and its
`== cards ==` table), the cards view and the comparison give the same compute, communication,
wait and op types for the same card, and they are the files' own figures (read with csv)."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import pytest

from npuscope.analysis import diagnose
from npuscope.analysis.card_spread import card_spread
from npuscope.analysis.compare import compare_runs
from npuscope.analysis.kpis import card_kpis
from npuscope.analysis.report import build_report
from npuscope.analysis.totals import VOCABULARY, card_summary
from npuscope.fixtures.generate import DEFAULT_PROBLEMS, generate
from npuscope.parsers import FrameCache, open_profile
from npuscope.parsers.training import empty_views

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "real"
COMMUNICATION = ("COMMUNICATION", "HCCL")


class Truth:
    """Per card: compute, communication and wait (us) and the op types, from the files."""

    def __init__(self) -> None:
        self.compute: dict[str, float] = defaultdict(float)
        self.communication: dict[str, float] = defaultdict(float)
        self.wait: dict[str, float] = defaultdict(float)
        self.types: dict[str, set[str]] = defaultdict(set)

    def add(self, card: str, op_type: str, task_type: str, duration: str, wait: str) -> None:
        if task_type in COMMUNICATION:
            self.communication[card] += float(duration)
        else:
            self.compute[card] += float(duration)
            self.types[card].add(op_type)
        self.wait[card] += float(wait) if wait not in ("", "N/A") else 0.0


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and the rows with as many fields as the header (a short row is damaged: the
    profile skips it with a note)."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]


def era_b_truth(root: Path) -> Truth:
    truth = Truth()
    for path in sorted(root.rglob("op_summary_*.csv")):
        header, rows = _rows(path)
        col = {name: header.index(name) for name in header}
        for r in rows:
            truth.add(
                r[col["Device_id"]],
                r[col["OP Type"]],
                r[col["Task Type"]],
                r[col["Task Duration(us)"]],
                r[col["Task Wait Time(us)"]],
            )
    return truth


def torch_truth(cards: dict[str, Path]) -> Truth:
    truth = Truth()
    for card, folder in cards.items():
        header, rows = _rows(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
        col = {name: header.index(name) for name in header}
        for r in rows:
            truth.add(card, r[col["Type"]], r[col["Accelerator Core"]], r[col["Duration(us)"]], r[col["Wait Time(us)"]])
    return truth


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> tuple[Path, Truth]:
    root = tmp_path_factory.mktemp("vocabulary")
    generate(root, layout="era_b", cards=2, problems=DEFAULT_PROBLEMS)
    return root, era_b_truth(root)


CASES = {
    "gpt3_2rank": (REAL / "torch_npu_2023_gpt3_2rank", {"0": "test_rank_0", "1": "test_rank_1"}),
    "cnn_level1": (REAL / "torch_npu_2024_cnn" / "level1", {"0": "rank0_ascend_pt", "1": "rank1_ascend_pt"}),
}


def _case(name: str, generated: tuple[Path, Truth]) -> tuple[Path, Truth]:
    if name == "generated":
        return generated
    root, folders = CASES[name]
    return root, torch_truth({card: root / f for card, f in folders.items()})


def _us(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.mark.parametrize("name", ["generated", *CASES])
def test_every_view_gives_the_same_totals_as_the_files(name, generated):
    root, truth = _case(name, generated)
    profile = open_profile(root, cache=FrameCache(enabled=False))
    diagnosis = diagnose(profile)
    assert set(profile.cards) == set(truth.compute) and len(profile.cards) == 2
    report = build_report(profile, diagnosis, views=empty_views())
    spread = {c.card: c for c in card_spread(profile).cards}
    spread_json = {c["card"]: c for c in report["card_spread"]["cards"]}
    compared = {
        c.card: c.totals
        for c in compare_runs(profile, profile, base_diagnosis=diagnosis, new_diagnosis=diagnosis).cards
    }
    for section in report["cards"]:
        card = section["card"]
        compute, comm, wait = truth.compute[card], truth.communication[card], truth.wait[card]
        assert comm > 0 or name == "generated"  # the real captures hold collectives
        tasks = diagnosis.tasks.filter(diagnosis.tasks["card"] == card)
        header = card_summary(profile, diagnosis.tasks, card)
        kpis = {k.key: k for k in card_kpis(tasks)}
        kpi = kpis["compute_wait"]
        # Header, the report's card section, its card table, the cards view and compare.
        for got in (
            header,
            section["summary"],
            spread_json[card],
            {k: getattr(spread[card], k) for k in ("compute_us", "communication_us", "wait_us")},
            {k: compared[card][k].base for k in ("compute_us", "communication_us", "wait_us")},
            {k: compared[card][k].new for k in ("compute_us", "communication_us", "wait_us")},
        ):
            assert got["compute_us"] == pytest.approx(compute, abs=2e-3)
            assert got["communication_us"] == pytest.approx(comm, abs=2e-3)
            assert got["wait_us"] == pytest.approx(wait, abs=2e-3)
        assert compared[card]["device_us"].base == pytest.approx(compute + comm, abs=2e-3)
        # The "Compute vs wait" card: compute without communication, and its share of compute + wait.
        assert kpi.detail == f"compute {compute:,.0f} us, waiting {wait:,.0f} us"
        assert kpi.value.startswith(f"{100.0 * compute / (compute + wait):.0f}% / ")
        # The "aclop vs aclnn" card counts the aclop_share finding's tasks.
        (aclop,) = [f for f in diagnosis.for_card(card) if f.rule == "aclop_share"]
        assert kpis["aclop"].value.startswith(f"{aclop.count:,} / ")
        # Op types: the distinct types of the compute tasks, the Op statistics' distinct types.
        assert header["op_types"] == section["summary"]["op_types"] == len(truth.types[card])
        assert len({r["op_type"] for r in section["op_statistic"]}) == len(truth.types[card])


def test_report_text_says_the_same_compute_in_both_sections(generated):
    from npuscope.analysis.report import render

    root, truth = generated
    profile = open_profile(root, cache=FrameCache(enabled=False))
    text = render(build_report(profile, diagnose(profile), views=empty_views()), "text")
    for card in profile.cards:
        line = next(x for x in text.splitlines() if x.startswith(f"{card} ") or x.startswith(f"| {card} |"))
        table_compute = _us(line.split()[2])
        section = text.split(f"== card {card} ==")[1].splitlines()[1]
        section_compute = _us(section.split("compute ")[1].split(" us")[0])
        assert table_compute == pytest.approx(truth.compute[card], abs=0.01)
        assert section_compute == pytest.approx(truth.compute[card], abs=0.06)


def test_vocabulary_names_every_word_once():
    words = [line.split()[0] for line in VOCABULARY.splitlines() if line and not line.startswith(" ")]
    assert words == ["compute", "communication", "device", "wait", "span", "step", "op"]
    assert "never compute" in VOCABULARY
    assert max(len(line) for line in VOCABULARY.splitlines()) <= 78  # the help screen at 80 columns
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "## Vocabulary" in readme
    for line in VOCABULARY.splitlines():
        assert line.strip() in readme, line
