"""Run against run: did a change help, by how much, and why?

A profile on its own says what is slow; the question after a change (a flag, a CANN upgrade,
a new kernel) is whether it helped. `compare_runs` lines up the diagnoses of a BASE and a NEW
profile: per op type (or op name + input shapes) the time before and after, the totals
(compute, communication, wait split by cause, span; defined in `totals`), which findings were
resolved, which are new (the training-level findings of `training_rules` among them), and a
one-line verdict naming what explains most of the change;
from the training views, the mean step time and its parts and communication per op type
(`compare_training`). `regression` turns it into a CI gate. `compare_render` writes the result as the
`npuscope.compare/1` JSON document, text or markdown.

An op type is "same" when its time moved by less than SAME_US or less than SAME_PCT: a
change counts as faster / slower only when it is both at least 1 us and at least 1%
(`change`).

No Textual, no Rich: the `compare` command and the explorer both call this.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, get_args

import polars as pl

from npuscope.parsers import Profile, ProfileError
from npuscope.parsers.frames import is_communication
from npuscope.parsers.layout import Layout
from npuscope.parsers.profile import TasksFrom
from npuscope.parsers.training import TrainingViews, read_training_views

from .change import SAME_PCT as SAME_PCT
from .change import SAME_US as SAME_US
from .change import STATUSES as STATUSES
from .change import Change as Change
from .change import Status as Status
from .change import status_of as _status
from .compare_training import TrainingChanges, compare_training
from .diagnose import Diagnosis
from .findings import SEVERITIES, Finding
from .rule_names import ACLOP_SHARE
from .session import Diagnosed, Options, diagnosed
from .table import signed
from .thresholds import Thresholds
from .totals import TOTAL_KEYS, card_totals, sum_totals
from .training_rules import TRAINING_RULES

SCHEMA = "npuscope.compare/1"
By = Literal["type", "shape"]
BY: tuple[By, ...] = get_args(By)

# Rules whose op_types is a ranking (the busiest aclop types), not what the finding is about:
# they are matched by rule and card only, or every reshuffle would read as resolved + new.
_RANKING_RULES = (ACLOP_SHARE,)

CAUSE_LABELS = {
    "recompilation": "recompilation",
    "host_op": "host op",
    "expected": "expected (step boundary)",
    "unexplained": "unexplained",
    "communication": "communication (inside a collective)",
}

# --------------------------------------------------------------------------- data types


@dataclass(frozen=True)
class Run:
    """Where one side of the comparison comes from."""

    path: str
    capture: str
    layout: Layout
    era: str
    cards: tuple[str, ...]
    tasks_from: TasksFrom

    @classmethod
    def of(cls, profile: Profile) -> Run:
        return cls(
            path=str(profile.path.resolve()),
            capture=profile.capture.name,
            layout=profile.layout,
            era=profile.era,
            cards=tuple(profile.cards),
            tasks_from=profile.tasks_from,
        )


@dataclass(frozen=True)
class OpChange:
    """One op type (and core type), or with `by="shape"` one op name + input shapes."""

    op_type: str
    core_type: str
    base_count: int | None
    new_count: int | None
    base_total_us: float | None
    new_total_us: float | None
    base_ratio_pct: float | None
    new_ratio_pct: float | None
    op_name: str | None = None
    input_shapes: str | None = None

    @property
    def total(self) -> Change:
        return Change(self.base_total_us, self.new_total_us)

    @property
    def delta_us(self) -> float:
        return self.total.delta

    @property
    def delta_pct(self) -> float | None:
        return None if self.base_total_us is None else self.total.delta_pct

    @property
    def base_avg_us(self) -> float | None:
        return self.base_total_us / self.base_count if self.base_count and self.base_total_us is not None else None

    @property
    def new_avg_us(self) -> float | None:
        return self.new_total_us / self.new_count if self.new_count and self.new_total_us is not None else None

    @property
    def status(self) -> Status:
        return _status(self.total)

    @property
    def label(self) -> str:
        if self.op_name is not None:
            return f"{self.op_name} [{self.input_shapes or '-'}]"
        return f"{self.op_type} ({self.core_type})"


@dataclass(frozen=True)
class CardChange:
    """The totals of one card id (or one base/new pair of ids) before and after."""

    card: str
    base_card: str | None
    new_card: str | None
    totals: dict[str, Change]


@dataclass(frozen=True)
class FindingChanges:
    resolved: tuple[Finding, ...]
    new: tuple[Finding, ...]
    unchanged: tuple[tuple[Finding, Finding], ...]  # (base, new)


@dataclass(frozen=True)
class Comparison:
    """Immutable result of `compare_runs`; `comparison_json` is its contract."""

    base: Run
    new: Run
    by: By
    pairs: tuple[tuple[str, str], ...]  # (base card, new card) summed into `totals`
    totals: dict[str, Change]
    cards: tuple[CardChange, ...]  # every card id of either run
    op_types: tuple[OpChange, ...]  # by |delta_us|, largest first
    findings: FindingChanges
    notes: tuple[str, ...]
    long_wait_us: float
    verdict: str
    training: TrainingChanges = field(default_factory=TrainingChanges)  # steps, communication
    # Why op_types is empty though both runs have tasks (one side has no op types), else "".
    op_types_note: str = ""


# --------------------------------------------------------------------------- op rows

_OP_SCHEMA = {
    "op_type": pl.String,
    "core_type": pl.String,
    "op_name": pl.String,
    "input_shapes": pl.String,
    "count": pl.Int64,
    "total_us": pl.Float64,
    "ratio_pct": pl.Float64,
}


def _type_rows(profile: Profile, cards: tuple[str, ...]) -> pl.DataFrame:
    """op_statistic summed over `cards`; a single card keeps the file's own Ratio(%)."""
    stat = profile.op_statistic.filter(pl.col("card").is_in(list(cards)))
    g = stat.group_by("op_type", "core_type").agg(
        pl.col("count").sum(), pl.col("total_us").sum(), pl.col("ratio_pct").sum()
    )
    if len(cards) > 1:
        whole = float(g["total_us"].sum() or 0.0)
        g = g.with_columns((pl.col("total_us") / whole * 100 if whole else pl.lit(0.0)).alias("ratio_pct"))
    return g.with_columns(pl.lit(None, pl.String).alias("op_name"), pl.lit(None, pl.String).alias("input_shapes"))


def _shape_rows(tasks: pl.DataFrame, cards: tuple[str, ...]) -> pl.DataFrame:
    """Compute tasks of `cards` by (op name, input shapes)."""
    t = tasks.select("card", "op_name", "op_type", "task_type", "duration_us", "input_shapes").filter(
        pl.col("card").is_in(list(cards)) & ~is_communication()
    )
    g = (
        t.with_columns(pl.col("input_shapes").fill_null(""))
        .group_by("op_name", "input_shapes")
        .agg(
            pl.col("op_type").first(),
            pl.col("task_type").first().alias("core_type"),
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("duration_us").sum().alias("total_us"),
        )
    )
    whole = float(g["total_us"].sum() or 0.0)
    return g.with_columns((pl.col("total_us") / whole * 100 if whole else pl.lit(0.0)).alias("ratio_pct"))


def _op_changes(base: pl.DataFrame, new: pl.DataFrame, by: By) -> tuple[OpChange, ...]:
    key = ["op_name", "input_shapes"] if by == "shape" else ["op_type", "core_type"]
    base = base.select([pl.col(c).cast(t) for c, t in _OP_SCHEMA.items()])
    new = new.select([pl.col(c).cast(t) for c, t in _OP_SCHEMA.items()])
    j = base.join(new, on=key, how="full", coalesce=True, suffix="_new", nulls_equal=True)
    rows = []
    for r in j.iter_rows(named=True):
        in_base, in_new = r["count"] is not None, r["count_new"] is not None
        rows.append(
            OpChange(
                op_type=r["op_type"] if by == "type" else (r["op_type"] or r["op_type_new"]),
                core_type=r["core_type"] if by == "type" else (r["core_type"] or r["core_type_new"]),
                base_count=r["count"],
                new_count=r["count_new"],
                base_total_us=float(r["total_us"]) if in_base else None,
                new_total_us=float(r["total_us_new"]) if in_new else None,
                base_ratio_pct=float(r["ratio_pct"]) if in_base else None,
                new_ratio_pct=float(r["ratio_pct_new"]) if in_new else None,
                op_name=r["op_name"] if by == "shape" else None,
                input_shapes=r["input_shapes"] if by == "shape" else None,
            )
        )
    rows.sort(
        key=lambda o: (-abs(o.delta_us), o.op_type or "", o.core_type or "", o.op_name or "", o.input_shapes or "")
    )
    return tuple(rows)


# --------------------------------------------------------------------------- findings


FindingKey = tuple[str, tuple[str, ...], str]
"""(rule, op types, card): how a finding of BASE is matched with one of NEW."""


def _finding_key(f: Finding, card: str) -> FindingKey:
    return (f.rule, () if f.rule in _RANKING_RULES else f.op_types, card)


def _finding_changes(
    base: Diagnosis, new: Diagnosis, pairs: tuple[tuple[str, str], ...], labels: dict[tuple[str, str], str]
) -> FindingChanges:
    """Matched by (rule, op types, card); a pair of different card ids counts as one card."""

    def keyed(diag: Diagnosis, side: int) -> dict[FindingKey, list[Finding]]:
        out: dict[FindingKey, list[Finding]] = {}
        for pair in pairs:
            for f in diag.for_card(pair[side]):
                out.setdefault(_finding_key(f, labels[pair]), []).append(f)
        return out

    b, n = keyed(base, 0), keyed(new, 1)
    resolved: list[Finding] = []
    added: list[Finding] = []
    same: list[tuple[Finding, Finding]] = []
    for key, fs in b.items():
        others = n.get(key, [])
        same += list(zip(fs, others))
        resolved += fs[len(others) :]
    for key, fs in n.items():
        added += fs[len(b.get(key, [])) :]
    rank = {s: i for i, s in enumerate(SEVERITIES)}

    def by_stake(f: Finding) -> tuple[int, float, str, str, tuple[str, ...]]:
        return (rank[f.severity], -f.time_us, f.rule, f.card, f.op_types)

    return FindingChanges(
        resolved=tuple(sorted(resolved, key=by_stake)),
        new=tuple(sorted(added, key=by_stake)),
        unchanged=tuple(sorted(same, key=lambda p: by_stake(p[1]))),
    )


# --------------------------------------------------------------------------- compare_runs


def _pairs(base: Profile, new: Profile, cards: tuple[str, ...] | None) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """(base card, new card) to compare and sum, and notes on what was left out."""
    notes: list[str] = []
    bc, nc = tuple(base.cards), tuple(new.cards)
    if cards is not None:
        for card in cards:
            missing = [side for side, have in (("BASE", bc), ("NEW", nc)) if card not in have]
            if missing:
                raise ProfileError(
                    f"no card {card!r} in {' and '.join(missing)}; BASE cards: {', '.join(bc) or 'none'}; "
                    f"NEW cards: {', '.join(nc) or 'none'}"
                )
        return tuple((c, c) for c in cards), notes
    common = tuple(c for c in bc if c in nc)
    if bc != nc:
        if common:
            notes.append(
                f"the runs have different cards (BASE {', '.join(bc)}; NEW {', '.join(nc)}): "
                f"totals and op types sum the cards in both ({', '.join(common)}); "
                "every card id is listed per card"
            )
        elif len(bc) == 1 and len(nc) == 1:
            notes.append(f"the runs have different cards: BASE card {bc[0]} is compared with NEW card {nc[0]}")
            return ((bc[0], nc[0]),), notes
        else:
            raise ProfileError(
                f"the runs have no card in common (BASE {', '.join(bc) or 'none'}; NEW {', '.join(nc) or 'none'})"
            )
    return tuple((c, c) for c in common), notes


def compare_runs(
    base: Profile,
    new: Profile,
    *,
    cards: tuple[str, ...] | None = None,
    by: By = "type",
    thresholds: Thresholds | None = None,
    base_diagnosis: Diagnosis | None = None,
    new_diagnosis: Diagnosis | None = None,
    base_views: TrainingViews | None = None,
    new_views: TrainingViews | None = None,
) -> Comparison:
    """BASE against NEW: `cards` None compares (and sums) every card id both runs have.

    A diagnosis the caller already has (the explorer's of the open profile) is used as it is
    when it covers the compared cards with the same thresholds; otherwise the cards are
    diagnosed here. The training views the caller has read are used, else they are read
    here (not strict: a damaged file is a note). Raises ProfileError for a card missing on
    one side, or `by="shape"` without tasks.
    """
    if by not in BY:
        raise ValueError(f"by must be one of {BY}, not {by!r}")
    th = thresholds or (base_diagnosis.thresholds if base_diagnosis is not None else Thresholds())
    pairs, notes = _pairs(base, new, cards)
    base_cards = tuple(b for b, _ in pairs)
    new_cards = tuple(n for _, n in pairs)
    if by == "shape":
        for side, prof, cs in (("BASE", base, base_cards), ("NEW", new, new_cards)):
            if prof.tasks.filter(pl.col("card").is_in(list(cs))).height == 0:
                raise ProfileError(
                    f"--by shape needs tasks (op_summary, kernel_details or a timeline); {side} "
                    f"{prof.capture.name} has only an op_statistic"
                )
    labels = {(b, n): b if b == n else f"{b}->{n}" for b, n in pairs}

    # Every card of either run gets totals; only the paired cards are diagnosed for findings,
    # the training-level ones included (from the views).
    bv = base_views if base_views is not None else read_training_views(base)
    nv = new_views if new_views is not None else read_training_views(new)
    bd = _diagnosis(base, base_diagnosis, th, base_cards, bv)
    nd = _diagnosis(new, new_diagnosis, th, new_cards, nv)
    b_all = card_totals(base, _with_causes(base.tasks, bd), base.cards)
    n_all = card_totals(new, _with_causes(new.tasks, nd), new.cards)
    totals_b = sum_totals([b_all[b] for b in base_cards])
    totals_n = sum_totals([n_all[n] for n in new_cards])
    totals = {k: Change(totals_b[k], totals_n[k]) for k in TOTAL_KEYS}

    per_card = [
        CardChange(labels[p], p[0], p[1], {k: Change(b_all[p[0]][k], n_all[p[1]][k]) for k in TOTAL_KEYS})
        for p in pairs
    ]
    if cards is None:
        paired_b, paired_n = set(base_cards), set(new_cards)
        for c in sorted(set(base.cards) - paired_b, key=_card_order):
            per_card.append(CardChange(c, c, None, {k: Change(b_all[c][k], None) for k in TOTAL_KEYS}))
        for c in sorted(set(new.cards) - paired_n, key=_card_order):
            per_card.append(CardChange(c, None, c, {k: Change(None, n_all[c][k]) for k in TOTAL_KEYS}))

    untyped = _untyped_side(base, new)
    op_note = ""
    if untyped is not None:
        # A Level0 run's tasks are all `unknown`: every type of the other run would read as
        # new and `unknown` as vanished, a difference of capture level, not of the run.
        typed = "NEW" if untyped == "BASE" else "BASE"
        rows = "per-type rows" if by == "type" else "per-name + shape rows (no input shapes either)"
        op_note = (
            f"{untyped} has no op types (torch_npu Level0 leaves Type N/A on every task): {rows} are not "
            f"comparable and are not listed; findings about op types can exist only in {typed}; capture "
            "both at Level1 to compare op types"
        )
        notes.append(op_note)
        ops: tuple[OpChange, ...] = ()
    elif by == "shape":
        ops = _op_changes(_shape_rows(bd.tasks, base_cards), _shape_rows(nd.tasks, new_cards), by)
    else:
        ops = _op_changes(_type_rows(base, base_cards), _type_rows(new, new_cards), by)

    tb, tn = totals["tasks"].base or 0, totals["tasks"].new or 0
    if tb and tn and abs(tn - tb) / tb > 0.05:
        notes.append(
            f"NEW has {tn:,.0f} tasks, BASE {tb:,.0f}: if the captures cover different numbers of "
            "steps, compare averages rather than totals"
        )
    for side, prof in (("BASE", base), ("NEW", new)):
        if prof.tasks.height == 0:
            notes.append(
                f"{side} has no tasks (an op_statistic only): its wait, span and task findings are unknown, shown as 0"
            )

    training = compare_training(bv, nv, pairs, labels)

    findings = _finding_changes(bd, nd, pairs, labels)
    verdict = _verdict(totals, ops)
    return Comparison(
        base=Run.of(base),
        new=Run.of(new),
        by=by,
        pairs=pairs,
        totals=totals,
        cards=tuple(per_card),
        op_types=ops,
        findings=findings,
        notes=tuple(notes),
        long_wait_us=th.long_wait_us,
        verdict=verdict,
        training=training,
        op_types_note=op_note,
    )


def _untyped_side(base: Profile, new: Profile) -> str | None:
    """ "BASE" or "NEW" when that run's compute tasks carry no op type and the other's do
    (a torch_npu Level0 capture beside a Level1 one), else None."""
    b, n = base.types_known, new.types_known
    if b == n:
        return None
    return "BASE" if not b else "NEW"


def _diagnosis(
    profile: Profile, given: Diagnosis | None, th: Thresholds, cards: tuple[str, ...], views: TrainingViews
) -> Diagnosis:
    """The operator findings (the caller's diagnosis when it fits) and the training-level ones
    from `views`; training findings a given diagnosis may already hold are made again from
    `views`, never counted twice."""
    if given is not None and set(cards) <= set(given.cards) and given.thresholds == th:
        first = Diagnosed.of(
            profile, replace(given, findings=tuple(f for f in given.findings if f.rule not in TRAINING_RULES))
        )
    else:
        first = diagnosed(profile, Options(th, cards))
    return first.with_views(views).diagnosis


def _with_causes(tasks: pl.DataFrame, diagnosis: Diagnosis) -> pl.DataFrame:
    """The diagnosed cards carry wait causes; the others (unpaired) only raw waits."""
    return (
        diagnosis.tasks
        if set(diagnosis.cards) >= set(tasks["card"].unique().to_list())
        else pl.concat(
            [
                diagnosis.tasks.select("card", "task_type", "duration_us", "wait_us", "wait_cause"),
                tasks.filter(~pl.col("card").is_in(list(diagnosis.cards)))
                .select("card", "task_type", "duration_us", "wait_us")
                .with_columns(pl.lit(None, pl.String).alias("wait_cause")),
            ]
        )
    )


def _card_order(card: str) -> tuple[int, int, str]:
    return (0, int(card), "") if card.isdigit() else (1, 0, card)


def _us(v: float) -> str:
    return signed(v, 1, " us")


def _verdict(totals: dict[str, Change], ops: tuple[OpChange, ...]) -> str:
    """Faster or slower in device time + wait, and the one change that explains most of it."""
    device, wait = totals["device_us"], totals["wait_us"]
    whole = Change((device.base or 0) + (wait.base or 0), (device.new or 0) + (wait.new or 0))
    pct = whole.delta_pct
    pct_s = f" ({pct:+.1f}%)" if pct is not None else ""
    parts = (
        f"compute {_us(totals['compute_us'].delta)}, communication "
        f"{_us(totals['communication_us'].delta)}, wait {_us(wait.delta)}"
    )
    if _status(whole) == "same":
        return f"About the same: device time + wait {_us(whole.delta)}{pct_s}; {parts}."
    word = "faster" if whole.delta < 0 else "slower"
    head = f"NEW is {word}: device time + wait {_us(whole.delta)}{pct_s}: {parts}"
    candidates = [(o.label, o.delta_us) for o in ops]
    candidates.append(("communication", totals["communication_us"].delta))
    candidates += [(f"{CAUSE_LABELS[c]} wait", totals[f"wait_{c}_us"].delta) for c in CAUSE_LABELS]
    candidates.append(("short waits", totals["wait_short_us"].delta))
    same_sign = [(name, d) for name, d in candidates if d * whole.delta > 0]
    if not same_sign:
        return head + "."
    name, d = max(same_sign, key=lambda x: abs(x[1]))
    return f"{head}; most of it: {name} {_us(d)} ({100 * d / whole.delta:.0f}% of the change)."


# --------------------------------------------------------------------------- gate


def regression(c: Comparison, pct: float) -> str | None:
    """Why NEW is a regression, else None: the mean step time (of all compared cards, from
    the steps view; not counted when a side has none), total device time or total wait grew
    by more than `pct` %."""
    reasons = []
    head = c.training.headline
    step = head.means["step_us"] if head is not None else None
    if step is not None and step.known and step.delta > 0:
        grew = step.delta_pct
        if grew is None or grew > pct:
            rel = "from nothing" if grew is None else f"{grew:+.1f}%"
            reasons.append(
                f"mean step time grew {rel} ({step.base or 0:,.1f} -> {step.new or 0:,.1f} us), more than {pct:g}%"
            )
    for key, what in (("device_us", "total device time"), ("wait_us", "total wait")):
        ch = c.totals[key]
        if ch.delta <= 0:
            continue
        grew = ch.delta_pct
        if grew is None or grew > pct:
            rel = "from nothing" if grew is None else f"{grew:+.1f}%"
            reasons.append(f"{what} grew {rel} ({ch.base or 0:,.1f} -> {ch.new or 0:,.1f} us), more than {pct:g}%")
    return "; ".join(reasons) or None
