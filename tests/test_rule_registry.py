"""The rule registries, the advice table and the evidence rows' type: every finding carries the
name it is registered under, rules are selected by that name, every rule has its advice, and
every evidence row of every sample holds columns of `EvidenceRow` with values of their type."""

from __future__ import annotations

import types
import typing
from pathlib import Path

import polars as pl
import pytest

from npuscope.analysis import advice, diagnose, parallel_rules, rule_names, rules, training_rules
from npuscope.analysis.evidence import EVIDENCE_FIELDS, TASK_EVIDENCE, EvidenceRow
from npuscope.analysis.findings import Finding
from npuscope.fixtures.generate import generate
from npuscope.parsers import open_profile
from npuscope.parsers.cluster import RANK_LINKS_SCHEMA, RANK_STEPS_SCHEMA
from npuscope.parsers.columns import TASK_SCHEMA
from npuscope.parsers.training import SCHEMAS, read_training_views

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
REAL_CAPTURES = (
    SAMPLES / "msprof_golden",
    SAMPLES / "paddle_cpu",
    SAMPLES / "torch_npu_ascend_pt",
    SAMPLES / "real" / "torch_npu_2024_cnn" / "level1",
    SAMPLES / "real" / "torch_npu_2025_db" / "level1",
    SAMPLES / "real" / "torch_npu_2023_gpt3_2rank",
)
NAMES = {v for k, v in vars(rule_names).items() if k.isupper() and isinstance(v, str)}
DOMINANT_CASES = {advice.DOMINANT_WARNING, advice.DOMINANT_ACLNN, advice.DOMINANT_INFO, advice.CUSTOM_KERNEL}


def test_every_registered_rule_is_a_named_rule_once():
    operator = set(rules.OPERATOR_RULES)
    training = set(training_rules.PER_CARD) | set(training_rules.ACROSS_CARDS)
    assert operator <= NAMES and training <= NAMES
    assert not operator & training and not set(training_rules.PER_CARD) & set(training_rules.ACROSS_CARDS)
    assert training == set(training_rules.TRAINING_RULES) and len(training_rules.TRAINING_RULES) == len(training)
    cluster = set(parallel_rules.CLUSTER_RULES)
    assert len(cluster) == len(parallel_rules.CLUSTER_RULES) and not cluster & (operator | training)
    assert NAMES - operator - training - cluster == {rule_names.FUSIBLE_SEQUENCE, rule_names.HOST_DISPATCH}
    assert rules.RULES == tuple(rules.OPERATOR_RULES.values())


def test_rules_are_selected_by_their_registered_name():
    every = dict(rules.OPERATOR_RULES)
    assert rules.rules_for("NPU") == tuple(every.values())
    off_npu = set(every) - set(rules.NPU_ONLY_RULES)
    assert {n for n, r in every.items() if r in rules.rules_for("GPU")} == off_npu
    assert {n for n, r in every.items() if r in rules.rules_for("unknown")} == off_npu
    assert {n for n, r in every.items() if r in rules.rules_for("CPU")} == off_npu - set(rules.HOST_SKIPPED_RULES)
    assert set(rules.NPU_ONLY_RULES) | set(rules.HOST_SKIPPED_RULES) <= set(every)
    for name in training_rules.TRAINING_RULES:
        assert training_rules.runs_on(name, "NPU")
        assert training_rules.runs_on(name, "CPU") == (
            name not in training_rules.NPU_ONLY_RULES + training_rules.HOST_SKIPPED_RULES
        )
        assert training_rules.runs_on(name, "GPU") == (name not in training_rules.NPU_ONLY_RULES)


def test_every_rule_has_its_advice_and_every_topic_a_rule():
    topics = set(advice.ADVICE)
    named = (
        set(rules.OPERATOR_RULES) - {rule_names.DOMINANT_OP_TYPE}
        | set(training_rules.TRAINING_RULES)
        | set(parallel_rules.CLUSTER_RULES)
    )
    assert topics == named | DOMINANT_CASES
    assert set(rules.NPU_ONLY_RULES) | set(training_rules.NPU_ONLY_RULES) <= advice.NPU_ONLY <= topics
    for texts in advice.ADVICE.values():
        assert all(text.strip() and text == text.strip() for text in texts.values())


def _recorded(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Finding]]:
    """Every registry's functions wrapped to record the findings each returns, by its name."""
    seen: dict[str, list[Finding]] = {}

    def wrap(name, rule):
        def recording(*args):
            found = rule(*args)
            seen.setdefault(name, []).extend(found)
            return found

        return recording

    operator = {name: wrap(name, rule) for name, rule in rules.OPERATOR_RULES.items()}
    monkeypatch.setattr(rules, "OPERATOR_RULES", operator)
    monkeypatch.setattr(rules, "RULES", tuple(operator.values()))
    for registry in ("PER_CARD", "ACROSS_CARDS"):
        wrapped = {name: wrap(name, rule) for name, rule in getattr(training_rules, registry).items()}
        monkeypatch.setattr(training_rules, registry, wrapped)
    return seen


def _everything(path: Path) -> list[Finding]:
    profile = open_profile(path)
    diagnosis = diagnose(profile)
    found = training_rules.training_findings(profile, diagnosis, read_training_views(profile))
    return [*diagnosis.findings, *found]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ...]:
    root = tmp_path_factory.mktemp("registry")
    every = ("duration_outlier", "comm_not_overlapped", "free_time", "sync_heavy", "slow_rank", "slow_link")
    generate(root / "operators", layout="era_b", cards=2, steps=6, ops_per_step=400)
    generate(root / "training", layout="era_b", cards=4, problems=(*every, "small_packets"))
    generate(root / "torch", layout="torch_npu", cards=1, timeline=False)
    return root / "operators", root / "training", root / "torch"


def test_every_finding_carries_the_name_of_its_rule(monkeypatch, generated):
    seen = _recorded(monkeypatch)
    for path in (*REAL_CAPTURES, *generated):
        _everything(path)
    for name, found in seen.items():
        assert found == [] or {f.rule for f in found} == {name}, name
    fired = {name for name, found in seen.items() if found}
    # The samples make most rules fire, on an NPU and off one (paddle_cpu).
    assert len(fired) >= 12, fired


def _annotation_types(annotation: object) -> tuple[type, ...]:
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    return tuple(type(None) if a is None else typing.cast(type, a) for a in args)


HINTS = {k: _annotation_types(v) for k, v in typing.get_type_hints(EvidenceRow).items()}
PYTHON_OF = {pl.String: str, pl.Int64: int, pl.UInt32: int, pl.Float64: float}


@pytest.mark.parametrize(
    ("what", "schema"),
    [
        *((name, SCHEMAS[name]) for name in ("steps", "communication", "links", "host_api", "memory")),
        ("rank steps", RANK_STEPS_SCHEMA),
        ("rank links", RANK_LINKS_SCHEMA),
        ("tasks", {k: TASK_SCHEMA[k] for k in EVIDENCE_FIELDS if k in TASK_SCHEMA}),
    ],
)
def test_every_column_an_evidence_row_takes_is_typed(what, schema):
    for column, dtype in schema.items():
        assert column in HINTS, (what, column)
        assert PYTHON_OF[type(dtype)] in HINTS[column], (what, column, dtype)
    assert set(TASK_EVIDENCE) <= set(HINTS)


def test_every_evidence_row_of_the_samples_is_an_evidence_row(generated):
    rows = 0
    for path in (*REAL_CAPTURES, *generated):
        for f in _everything(path):
            for row in f.evidence:
                rows += 1
                for key, value in row.items():
                    assert key in HINTS, (f.rule, key)
                    # a bool is an int to isinstance; no column of a row is a bool
                    assert isinstance(value, HINTS[key]) and not isinstance(value, bool), (f.rule, key, value)
    assert rows > 100
