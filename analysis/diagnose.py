"""`diagnose(profile)`: wait causes per task and the findings of every rule, per card.

The rules read the profile's frames and what the parsers read beside its files (call stacks,
core counts: parsers/capture_extras.py), handed in as one value; nothing here opens a file.
The whole analysis of a profile (these findings, the training-level ones and a cluster's)
is analysis/session.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path

import orjson
import polars as pl

from npuscope.parsers import FrameCache, Profile
from npuscope.parsers.cache import source_digest
from npuscope.parsers.capture_extras import CaptureExtras, capture_extras
from npuscope.parsers.device_info import DeviceInfo

from .bound import RATIO_COLUMNS
from .card_groups import Cards
from .device_kind import DeviceKind, device_kind
from .findings import Finding, order
from .fusion import fusible_findings, optimizer_findings
from .rules import framework_of, rules_for
from .stacks import with_stacks
from .thresholds import Thresholds
from .waits import attribute_waits, compile_event_counts

ANALYSIS_VERSION = source_digest(Path(__file__).parent)
CAUSE_COLUMNS = ("wait_cause", "wait_confidence")

RULE_COLUMNS = (
    "row",
    "card",
    "op_name",
    "op_type",
    "task_type",
    "op_state",
    "is_aclnn",
    "start_us",
    "duration_us",
    "wait_us",
    "input_shapes",
    "input_dtypes",
    "wait_cause",
    "wait_confidence",
    "block_num",
)


@dataclass(frozen=True)
class Diagnosis:
    """Immutable result: the tasks with their wait causes, and ordered findings."""

    tasks: pl.DataFrame  # canonical tasks + row, start_us, wait_cause, wait_confidence
    findings: tuple[Finding, ...]
    thresholds: Thresholds
    cards: tuple[str, ...]
    compile_events: dict[str, int] = field(default_factory=dict)
    device: DeviceKind = "NPU"  # the capture's device kind (analysis/device_kind.py)
    devices: Mapping[str, DeviceInfo] = field(default_factory=dict)  # each card's core counts, when told

    def for_card(self, card: str) -> tuple[Finding, ...]:
        return self._by_card.get(card, ())

    @cached_property
    def _by_card(self) -> dict[str, tuple[Finding, ...]]:
        """The findings of each card, in order: one pass, however many cards are asked for."""
        got: dict[str, list[Finding]] = {}
        for f in self.findings:
            got.setdefault(f.card, []).append(f)
        return {card: tuple(fs) for card, fs in got.items()}

    def with_findings(self, extra: Iterable[Finding]) -> Diagnosis:
        """The same diagnosis with `extra` findings (the training-level ones) added, all of
        them in display order; this one is left as it is."""
        return replace(self, findings=tuple(order([*self.findings, *extra])))


def diagnose(
    profile: Profile,
    thresholds: Thresholds | None = None,
    cards: tuple[str, ...] | None = None,
    cache: FrameCache | None = None,
    extras: CaptureExtras | None = None,
) -> Diagnosis:
    """Wait causes and findings for `cards` (default: all) of `profile`.

    `extras`: what the parsers read beside the profile's files for the rules (call stacks,
    core counts: parsers/capture_extras.py), read when not given.

    With a `cache`, the per-task causes and the findings are cached beside the frames they
    come from (keyed by the same files, the thresholds and the analysis code): on 2M rows
    the diagnosis is ~0.6 s, most of the explorer's start-up once the frames are cached.
    """
    th = thresholds or Thresholds()
    extras = extras if extras is not None else capture_extras(profile)
    wanted = cards or profile.cards
    tasks = profile.tasks
    if cards is not None:
        tasks = tasks.filter(pl.col("card").is_in(list(cards)))
    if cache is not None and not (cache.enabled and profile.files):
        cache = None
    extra = [ANALYSIS_VERSION, asdict(th), list(wanted), profile.capture.name, _stack_key(extras)]
    # Bound types in finding titles come from the PMU ratio columns, absent when the
    # profile was opened with pmu=False (the explorer): findings of either kind stay apart.
    extra.append(sorted(set(profile.tasks.columns) & set(RATIO_COLUMNS)))
    # low_parallelism reads the core counts beside the files (info.json.N, NPU_INFO).
    extra.append(sorted((c, d.describe()) for c, d in extras.devices.items()))
    if profile.time_problem is not None:
        # Waits from damaged start times would be attributed to whatever lies in a fake gap.
        tasks = tasks.with_columns(pl.lit(None, dtype=pl.String).alias(c) for c in CAUSE_COLUMNS)
    elif cache is not None:
        causes = cache.load_or_build(
            "wait_causes",
            profile.files,
            lambda: attribute_waits(tasks, profile.events, th, profile.steps).select(CAUSE_COLUMNS),
            extra,
            # One cause per task, as text; anything else would not line up with the tasks.
            schema=lambda f: (
                f.height == tasks.height and f.columns == list(CAUSE_COLUMNS) and all(t == pl.String for t in f.dtypes)
            ),
        )
        tasks = tasks.with_columns(causes)
    else:
        tasks = attribute_waits(tasks, profile.events, th, profile.steps)
    kind = device_kind(profile)
    if kind != "NPU" and "wait_cause" in tasks.columns:
        # `recompilation` is the online compilation of an aclop operator: on another device
        # the first call of a shape before a long wait tells nothing about the wait.
        tasks = tasks.with_columns(
            pl.when(pl.col("wait_cause") == "recompilation")
            .then(pl.lit("unexplained"))
            .otherwise(pl.col("wait_cause"))
            .alias("wait_cause")
        )
    tasks = tasks.with_row_index("row").with_columns(
        # Start relative to the card's first task: what the user reads on screen.
        ((pl.col("start_ns") - pl.col("start_ns").min().over("card")) / 1000).alias("start_us")
    )

    compile_events = compile_event_counts(profile.events)
    if cache is not None:

        def run_rules() -> pl.DataFrame:
            found = _findings(profile, extras, tasks, wanted, th, compile_events, kind)
            return pl.DataFrame({"findings": [orjson.dumps([f.to_dict() for f in found]).decode()]})

        stored = cache.load_or_build(
            "findings",
            profile.files,
            run_rules,
            extra,
            schema=lambda f: f.height == 1 and f.schema == {"findings": pl.String} and _stored(f) is not None,
        )
        cache.start_writes()
        findings = _stored(stored)
    else:
        findings = _findings(profile, extras, tasks, wanted, th, compile_events, kind)
    return Diagnosis(
        tasks=tasks,
        findings=tuple(findings),
        thresholds=th,
        cards=tuple(wanted),
        compile_events=compile_events,
        device=kind,
        devices=extras.devices,
    )


def _stored(frame: pl.DataFrame) -> list[Finding]:
    """The findings of a cached one-cell frame (JSON)."""
    return [Finding.from_dict(d) for d in orjson.loads(frame["findings"][0])]


def _findings(
    profile: Profile,
    extras: CaptureExtras,
    tasks: pl.DataFrame,
    wanted: tuple[str, ...],
    th: Thresholds,
    compile_events: dict[str, int],
    kind: DeviceKind = "NPU",
) -> list[Finding]:
    # The rules read these columns only, every card at once (analysis/card_groups.py).
    stat = profile.op_statistic
    if set(stat["card"].unique().to_list()) - set(wanted):
        stat = stat.filter(pl.col("card").is_in(list(wanted)))
    framework = framework_of(profile.layout, profile)
    cards = Cards(
        cards=tuple(wanted),
        tasks=tasks.select(RULE_COLUMNS),
        stat=stat,
        has_timeline=profile.has_timeline,
        compile_events={card: compile_events.get(card, 0) + compile_events.get("host", 0) for card in wanted},
        statistic_derived=profile.statistic_derived,
        pmu=bool(profile.pmu_columns),
        time_problem=profile.time_problem,
        framework=framework,
        profile=profile,
        kind=kind,
        devices=extras.devices,
    )
    findings: list[Finding] = []
    for rule in rules_for(kind):
        findings.extend(rule(cards, th))
    return order(_sequence_findings(profile, extras, tasks, wanted, th, findings, framework, kind))


def _sequence_findings(
    profile: Profile,
    extras: CaptureExtras,
    tasks: pl.DataFrame,
    wanted: tuple[str, ...],
    th: Thresholds,
    findings: list[Finding],
    framework: str,
    kind: DeviceKind = "NPU",
) -> list[Finding]:
    """The findings of op sequences (analysis/fusion.py) and of the user's code behind the
    host time (analysis/stacks.py), which may name a frame in a `recompilation` finding.
    Fusion names fused CANN operators: an NPU's only."""
    out = list(findings)
    if profile.time_problem is None and kind == "NPU":  # start order is the sequence: damaged starts have none
        out += fusible_findings(tasks, wanted, th, framework)
    stacks = extras.stacks.filter(pl.col("card").is_in(list(wanted)))
    if framework == "torch_npu":  # the fused optimizers are torch_npu's
        out += optimizer_findings(extras.optimizer_steps, wanted, th)
    spans: dict[str, float] = {}
    if profile.time_problem is None and tasks.height:
        ends = tasks.group_by("card").agg(
            ((pl.col("start_us") + pl.col("duration_us").fill_null(0.0)).max() - pl.col("start_us").min()).alias("span")
        )
        spans = {str(c): float(v or 0.0) for c, v in ends.iter_rows()}
    return with_stacks(out, stacks, spans, th, extras.api_frames)


def _stack_key(extras: CaptureExtras) -> list[object]:
    """The stack files the findings read besides the profile's files, for the cache key."""
    return [list(k) for k in extras.stack_key]
