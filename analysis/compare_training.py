"""Run against run at the training level: mean step time and communication per op type.

`compare_training` lines up the training views (`read_training_views`) of a BASE and a NEW
profile for the compared cards:

- steps, per card and, with several cards, `all` (every step row of every compared card,
  each counting once): the number of steps and the mean per step of the step time, compute,
  communication, communication not overlapped and free time. Runs that captured different
  numbers of steps are compared per step mean.
- communication per op type, the compared cards summed: count, total (elapse), wait and the
  bandwidth (the data moved over the time it took to move it, as the report computes it),
  largest change of the total first.

Rows a file records for the whole capture (card `host`) stand for a card with none of its
own, counted once however many cards they stand for. A view that one side does not have is
said so ("steps: not in BASE") and its numbers are None, never zeros.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from npuscope.parsers.training import TrainingViews

from .change import Change, Status, status_of
from .training_report import per_op_type

STEP_KEYS = ("step_us", "compute_us", "communication_us", "comm_not_overlapped_us", "free_us")
COMM_KEYS = ("count", "total_us", "wait_us", "bandwidth_gbps")
ALL = "all"
HOST = "host"


@dataclass(frozen=True)
class StepChange:
    """The steps of one card (or one base/new pair, or `all`) before and after.

    `base_steps` / `new_steps` count the steps (None: that side has no steps for the card);
    `means` holds, per STEP_KEYS, the mean per step.
    """

    card: str
    base_card: str | None
    new_card: str | None
    base_steps: int | None
    new_steps: int | None
    means: dict[str, Change]


@dataclass(frozen=True)
class CommChange:
    """One communication op type before and after, per COMM_KEYS (the compared cards summed).

    An op type a side's view does not list has count 0 and total 0 there; a side without the
    view has None everywhere.
    """

    op_type: str
    values: dict[str, Change]

    @property
    def status(self) -> Status | None:
        """new / vanished / faster / slower / same by the total; None when a side has no view."""
        count = self.values["count"]
        if not count.known:
            return None
        if not count.base:
            return "new"
        if not count.new:
            return "vanished"
        return status_of(self.values["total_us"])


@dataclass(frozen=True)
class TrainingChanges:
    """Steps and communication of the compared cards; `notes` say what a side lacks."""

    steps: tuple[StepChange, ...] = ()
    communication: tuple[CommChange, ...] = ()
    steps_in: tuple[bool, bool] = (False, False)  # (BASE, NEW) have a steps view
    communication_in: tuple[bool, bool] = (False, False)
    notes: tuple[str, ...] = ()

    @property
    def headline(self) -> StepChange | None:
        """The row the gate reads: `all` with several cards, else the one card."""
        if not self.steps:
            return None
        return next((s for s in self.steps if s.card == ALL), self.steps[0])


def _rows_of(frame: pl.DataFrame, cards: tuple[str, ...]) -> pl.DataFrame:
    """The rows of `cards`; the `host` rows (once) when one of them has none of its own."""
    own = frame.filter(pl.col("card").is_in(list(cards)))
    have = set(own["card"].to_list())
    if all(c in have for c in cards):
        return own
    return pl.concat([own, frame.filter(pl.col("card") == HOST)])


def _missing(view: str, have: tuple[bool, bool]) -> str | None:
    lacking = [side for side, h in zip(("BASE", "NEW"), have) if not h]
    return f"{view}: not in {' or '.join(lacking)}" if lacking else None


def _sources(frame: pl.DataFrame) -> str:
    return ", ".join(sorted(set(frame["source"].drop_nulls().to_list())))


def _source_note(view: str, base: pl.DataFrame, new: pl.DataFrame) -> str | None:
    sb, sn = _sources(base), _sources(new)
    if base.height and new.height and sb != sn:
        return f"{view}: BASE from {sb}, NEW from {sn}: the figures may be measured differently"
    return None


# --------------------------------------------------------------------------- steps


def _step_count(rows: pl.DataFrame) -> int:
    """Distinct steps (a whole-capture row, step null, counts as one)."""
    return int(rows["step"].n_unique())


def _step_means(rows: pl.DataFrame) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key in STEP_KEYS:
        m = rows[key].mean()
        out[key] = float(m) if isinstance(m, (int, float)) else None
    return out


def _step_change(
    label: str, cards: tuple[tuple[str, ...], tuple[str, ...]], frames: tuple[pl.DataFrame, pl.DataFrame]
) -> StepChange:
    rows = [_rows_of(f, cs) for f, cs in zip(frames, cards)]
    counts = [_step_count(r) if r.height else None for r in rows]
    means = [_step_means(r) if r.height else dict.fromkeys(STEP_KEYS) for r in rows]
    single = len(cards[0]) == 1
    return StepChange(
        card=label,
        base_card=cards[0][0] if single else None,
        new_card=cards[1][0] if single else None,
        base_steps=counts[0],
        new_steps=counts[1],
        means={k: Change(means[0][k], means[1][k]) for k in STEP_KEYS},
    )


def _steps(
    base: pl.DataFrame, new: pl.DataFrame, pairs: tuple[tuple[str, str], ...], labels: dict[tuple[str, str], str]
) -> tuple[tuple[StepChange, ...], list[str]]:
    notes: list[str] = []
    frames = (base, new)
    out = [_step_change(labels[p], ((p[0],), (p[1],)), frames) for p in pairs]
    for s in out:
        for side, n in (("BASE", s.base_steps), ("NEW", s.new_steps)):
            if n is None and frames[side == "NEW"].height:
                notes.append(f"steps: card {s.base_card if side == 'BASE' else s.new_card} not in {side}")
    if len(pairs) > 1:
        out.append(_step_change(ALL, (tuple(b for b, _ in pairs), tuple(n for _, n in pairs)), frames))
    b_all = _rows_of(base, tuple(b for b, _ in pairs))
    n_all = _rows_of(new, tuple(n for _, n in pairs))
    for side, rows in (("BASE", b_all), ("NEW", n_all)):
        if rows.height and rows["step"].null_count():
            notes.append(
                f"steps: {side} has no step boundaries on some cards: its row there is the whole capture, not one step"
            )
    per_card = [(s.base_steps, s.new_steps) for s in out if s.card != ALL]
    if any(b is not None and n is not None and b != n for b, n in per_card):
        b_n = sorted({b for b, _ in per_card if b is not None})
        n_n = sorted({n for _, n in per_card if n is not None})
        notes.append(
            f"steps: BASE has {'/'.join(map(str, b_n))} step(s) per card, NEW {'/'.join(map(str, n_n))}: "
            "steps are compared per step mean; communication totals cover the steps each run captured"
        )
    source = _source_note("steps", b_all, n_all)
    return tuple(out), notes + ([source] if source else [])


# --------------------------------------------------------------------------- communication


def _per_op_type(rows: pl.DataFrame) -> dict[str, dict[str, float | None]]:
    """Per op type: count, total, wait (null when no row has it) and bandwidth in GB/s, as
    the report counts them (`per_op_type`)."""
    per = per_op_type(rows)
    return {
        r["op_type"]: {k: (None if r[k] is None else float(r[k])) for k in COMM_KEYS} for r in per.iter_rows(named=True)
    }


def _absent() -> dict[str, float | None]:
    """An op type the side's view does not list: no calls, no time, no bandwidth."""
    return {"count": 0.0, "total_us": 0.0, "wait_us": 0.0, "bandwidth_gbps": None}


def _communication(base: pl.DataFrame | None, new: pl.DataFrame | None) -> tuple[CommChange, ...]:
    """None for a side without the view."""
    b = _per_op_type(base) if base is not None else {}
    n = _per_op_type(new) if new is not None else {}
    unknown: dict[str, float | None] = dict.fromkeys(COMM_KEYS)
    out = []
    for op in sorted(set(b) | set(n)):
        vb = b.get(op, _absent()) if base is not None else unknown
        vn = n.get(op, _absent()) if new is not None else unknown
        out.append(CommChange(op, {k: Change(vb[k], vn[k]) for k in COMM_KEYS}))

    def size(c: CommChange) -> float:
        t = c.values["total_us"]
        return abs(t.delta) if t.known else abs(t.base or t.new or 0.0)

    return tuple(sorted(out, key=lambda c: (-size(c), c.op_type)))


# --------------------------------------------------------------------------- both


def compare_training(
    base: TrainingViews,
    new: TrainingViews,
    pairs: tuple[tuple[str, str], ...],
    labels: dict[tuple[str, str], str],
) -> TrainingChanges:
    """Steps and communication of the compared (base card, new card) pairs."""
    notes: list[str] = []
    steps_in = (base.steps.height > 0, new.steps.height > 0)
    steps: tuple[StepChange, ...] = ()
    missing = _missing("steps", steps_in)
    if missing:
        notes.append(missing)
    if any(steps_in):
        steps, step_notes = _steps(base.steps, new.steps, pairs, labels)
        notes += step_notes

    b_cards, n_cards = tuple(b for b, _ in pairs), tuple(n for _, n in pairs)
    b_rows, n_rows = _rows_of(base.communication, b_cards), _rows_of(new.communication, n_cards)
    b_comm, n_comm = (b_rows if b_rows.height else None), (n_rows if n_rows.height else None)
    comm_in = (b_comm is not None, n_comm is not None)
    missing = _missing("communication", comm_in)
    if missing:
        notes.append(missing)
    if b_comm is not None and n_comm is not None:
        source = _source_note("communication", b_comm, n_comm)
        if source:
            notes.append(source)
    return TrainingChanges(
        steps=steps,
        communication=_communication(b_comm, n_comm) if any(comm_in) else (),
        steps_in=steps_in,
        communication_in=comm_in,
        notes=tuple(notes),
    )
