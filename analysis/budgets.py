"""Budgets for CI: bounds on a run's headline figures (analysis/headline.py), read from TOML.

A budgets file names a figure per table and bounds it with one or more keys:

  [step_time]              Headline.step_mean_us
  [device_time]            Headline.device_us
  [exposed_communication]  Headline.exposed_communication_us
  [free_time]              Headline.free_us
  [wait.<cause>]           Headline.wait_by_cause_us[cause], a cause of analysis/waits.py
  [op_type.<TYPE>]         Headline.op_type_share_pct[TYPE], percent of compute (0 when absent)

  max_us            an absolute bound in microseconds (not for op_type: use max_share_pct)
  max_increase_pct  relative to the baseline's same figure: new <= base * (1 + pct / 100)
  max_share_pct     op_type only: the share of compute, in percent

A budget breaks only when the figure is strictly greater than its bound: equal holds. A figure
the run (or the baseline) lacks, such as the step time of a capture without steps, is "not
measured": listed with a note, never counted as broken and never as held.

Every problem of the file is one ProfileError line that starts with the file's name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from npuscope.parsers import ProfileError
from npuscope.parsers.rules_file import read_toml_file
from npuscope.text import printable

from .headline import Headline
from .waits import CAUSES

SCHEMA = "npuscope.gate/1"


FIGURES: dict[str, str] = {
    "step_time": "step_mean_us",
    "device_time": "device_us",
    "exposed_communication": "exposed_communication_us",
    "free_time": "free_us",
}
"""The tables that bound one figure of the whole run: table -> Headline field."""

WAIT = "wait"
OP_TYPE = "op_type"
TABLES = (*FIGURES, f"{WAIT}.<cause>", f"{OP_TYPE}.<TYPE>")

MAX_US = "max_us"
MAX_INCREASE_PCT = "max_increase_pct"
MAX_SHARE_PCT = "max_share_pct"
US_KEYS = (MAX_US, MAX_INCREASE_PCT)
SHARE_KEYS = (MAX_SHARE_PCT, MAX_INCREASE_PCT)

ABSURD = 1e15
"""A bound above this is a typo (1e15 us is over 31 years), refused."""

Status = Literal["ok", "broken", "not measured"]

_MISSING = {
    "step_mean_us": "no steps",
    "exposed_communication_us": "no step breakdown (exposed communication)",
    "free_us": "no step breakdown (free time)",
}


@dataclass(frozen=True)
class Budget:
    """One key of a budgets file: `table` (step_time, wait.recompilation, op_type.MatMulV3),
    `key` (max_us, max_increase_pct, max_share_pct) and the number it was given."""

    table: str
    key: str
    limit: float

    @property
    def name(self) -> str:
        return f"{self.table}.{self.key}"

    @property
    def relative(self) -> bool:
        return self.key == MAX_INCREASE_PCT

    @property
    def figure(self) -> str:
        """The Headline figure bounded: a field, or field.key for a wait cause or op type."""
        group, _, item = self.table.partition(".")
        if group == WAIT:
            return f"wait_by_cause_us.{item}"
        if group == OP_TYPE:
            return f"op_type_share_pct.{item}"
        return FIGURES[group]

    @property
    def unit(self) -> str:
        return "%" if self.table.startswith(OP_TYPE + ".") else "us"


@dataclass(frozen=True)
class Budgets:
    file: str  # the file's name as given
    budgets: tuple[Budget, ...]

    @property
    def relative(self) -> tuple[Budget, ...]:
        return tuple(b for b in self.budgets if b.relative)


@dataclass(frozen=True)
class Checked:
    """A budget against a run: the figure's value, the bound it had to stay within (in the
    figure's unit: for max_increase_pct the baseline's figure grown by the percentage), the
    baseline's figure, the status and, when not measured, why."""

    budget: Budget
    value: float | None
    bound: float | None
    baseline: float | None
    status: Status
    note: str = ""


# --------------------------------------------------------------------------- reading


def read_budgets(path: str) -> Budgets:
    """The budgets of the TOML file at `path`, or one ProfileError line naming the file and the
    table or key at fault (a TOML syntax error keeps its line and column)."""
    doc = read_toml_file(Path(path), "budgets file")
    return parse_budgets(doc, path)


def parse_budgets(doc: Mapping[str, Any], file: str) -> Budgets:
    """The budgets of a budgets file's TOML document; `file` names it in the errors."""
    found: list[Budget] = []
    for table, body in doc.items():
        if table in FIGURES:
            found += _table(file, table, body, US_KEYS)
        elif table == WAIT:
            for cause, inner in _sub_tables(file, table, body, "cause"):
                if cause not in CAUSES:
                    raise ProfileError(f"{file}: unknown wait cause {_named(table, cause)}; known: {', '.join(CAUSES)}")
                found += _table(file, f"{table}.{cause}", inner, US_KEYS)
        elif table == OP_TYPE:
            for op_type, inner in _sub_tables(file, table, body, "TYPE"):
                if not op_type.strip():
                    raise ProfileError(f"{file}: op_type.{op_type!r}: an op type name cannot be blank")
                found += _table(file, f"{table}.{op_type}", inner, SHARE_KEYS)
        else:
            raise ProfileError(f"{file}: unknown table {_shown_name(table)}; known: {', '.join(TABLES)}")
    if not found:
        raise ProfileError(f"{file}: no budget in the file (for example: [step_time] max_us = 100000)")
    return Budgets(file, tuple(found))


def _sub_tables(file: str, table: str, body: object, what: str) -> list[tuple[str, object]]:
    if not isinstance(body, dict) or not body:
        raise ProfileError(f"{file}: {table} must hold tables [{table}.<{what}>], got {_shown(body)}")
    return list(body.items())


def _table(file: str, table: str, body: object, keys: tuple[str, ...]) -> list[Budget]:
    if not isinstance(body, dict):
        raise ProfileError(
            f"{file}: {_shown_name(table)} must be a table ([{table}] {keys[0]} = ...), got {_shown(body)}"
        )
    if not body:
        raise ProfileError(f"{file}: [{_shown_name(table)}] holds no budget; give {' or '.join(keys)}")
    out: list[Budget] = []
    for key, value in body.items():
        name = _named(table, key)
        if key not in keys:
            if key == MAX_US and table.startswith(OP_TYPE + "."):
                raise ProfileError(f"{file}: {name}: an op type is bounded by its share of compute; use max_share_pct")
            raise ProfileError(f"{file}: unknown key {name}; known: {', '.join(keys)}")
        out.append(Budget(table, key, _number(file, name, key, value)))
    return out


def _number(file: str, name: str, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProfileError(f"{file}: {name} must be a number, got {_shown(value)}")
    if isinstance(value, int) and value < 0:
        raise ProfileError(f"{file}: {name} must be >= 0, got {_shown(value)}")
    if isinstance(value, int) and value > ABSURD:  # also an integer beyond any float
        raise ProfileError(f"{file}: {name} = {_shown(value)} is absurd; at most {ABSURD:g}")
    number = float(value)
    if not math.isfinite(number):
        raise ProfileError(f"{file}: {name} must be a finite number, got {_shown(value)}")
    if number < 0:
        raise ProfileError(f"{file}: {name} must be >= 0, got {_shown(value)}")
    if number > ABSURD:
        raise ProfileError(f"{file}: {name} = {_shown(value)} is absurd; at most {ABSURD:g}")
    if key == MAX_SHARE_PCT and number > 100:
        raise ProfileError(f"{file}: {name} = {_shown(value)}: a share of compute is at most 100 (percent)")
    return number


def _named(table: str, key: str) -> str:
    return _shown_name(f"{table}.{key}")


def _shown_name(name: str) -> str:
    text = printable(name)
    return text if len(text) <= 80 else text[:77] + "..."


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_baseline(budgets: Budgets, have_baseline: bool) -> None:
    """A max_increase_pct budget needs a baseline: one line naming the first such key."""
    if budgets.relative and not have_baseline:
        first = budgets.relative[0]
        raise ProfileError(
            f"{budgets.file}: {_shown_name(first.name)} is relative to a baseline: give --baseline @NAME|PATH"
        )


# --------------------------------------------------------------------------- checking


def figure_value(headline: Headline, budget: Budget) -> float | None:
    """The figure `budget` bounds, read from `headline`; None when the run lacks it."""
    group, _, item = budget.table.partition(".")
    if group == WAIT:
        return headline.wait_by_cause_us.get(item)
    if group == OP_TYPE:
        return headline.op_type_share_pct.get(item, 0.0)
    value = getattr(headline, FIGURES[group])
    return None if value is None else float(value)


def check_budget(budget: Budget, new: Headline, base: Headline | None = None) -> Checked:
    """`budget` against the run `new` (and, for max_increase_pct, the baseline `base`)."""
    value = figure_value(new, budget)
    if not budget.relative:
        if value is None:
            return Checked(budget, None, budget.limit, None, "not measured", f"the run has {_lacks(budget)}")
        return Checked(budget, value, budget.limit, None, "broken" if value > budget.limit else "ok")
    if base is None:
        raise ValueError(f"{budget.name} needs a baseline")
    base_value = figure_value(base, budget)
    if base_value is None:
        return Checked(budget, value, None, None, "not measured", f"the baseline has {_lacks(budget)}")
    bound = base_value * (1.0 + budget.limit / 100.0)
    if value is None:
        return Checked(budget, None, bound, base_value, "not measured", f"the run has {_lacks(budget)}")
    return Checked(budget, value, bound, base_value, "broken" if value > bound else "ok")


def _lacks(budget: Budget) -> str:
    figure = budget.figure
    if figure.startswith("wait_by_cause_us."):
        return f"no wait figure for {figure.partition('.')[2]}"
    return _MISSING.get(figure, f"no {figure}")


def check_budgets(budgets: Budgets, new: Headline, base: Headline | None = None) -> list[Checked]:
    """Every budget of `budgets` against `new`, in the file's order."""
    check_baseline(budgets, base is not None)
    return [check_budget(b, new, base) for b in budgets.budgets]


def broken(results: list[Checked]) -> list[Checked]:
    return [r for r in results if r.status == "broken"]


# --------------------------------------------------------------------------- output


def gate_json(results: list[Checked], *, run: str, baseline: str | None, budgets_file: str) -> dict[str, Any]:
    """The npuscope.gate/1 document: `bound` is in the figure's unit (us, or percent of compute
    for op_type), `limit` the number the budgets file gave; `note` says why a budget was not
    measured (it neither breaks nor holds)."""
    return {
        "schema": SCHEMA,
        "run": run,
        "baseline": baseline,
        "budgets_file": budgets_file,
        "passed": not broken(results),
        "broken": [r.budget.name for r in broken(results)],
        "not_measured": [r.budget.name for r in results if r.status == "not measured"],
        "budgets": [
            {
                "name": r.budget.name,
                "figure": r.budget.figure,
                "unit": r.budget.unit,
                "limit": r.budget.limit,
                "value": r.value,
                "bound": r.bound,
                "baseline": r.baseline,
                "status": r.status,
                "note": r.note,
            }
            for r in results
        ],
    }


_LABEL: dict[str, str] = {"ok": "ok", "broken": "BROKEN", "not measured": "not measured"}


def render_gate(results: list[Checked], *, run: str, baseline: str | None, budgets_file: str) -> str:
    """One line per budget (ok, BROKEN, not measured: the figure, its bound, the baseline's
    figure for a relative budget), then the verdict line `gate: ...`."""
    against = f", baseline {printable(baseline)}" if baseline else ""
    lines = [f"gate: {printable(run)} against {printable(budgets_file)}{against}"]
    lines += [
        f"{_LABEL[r.status]:<6}  {_shown_name(r.budget.name)} {_limit(r.budget.limit)}: {_detail(r)}" for r in results
    ]
    lines.append(_verdict(results))
    return "\n".join(lines) + "\n"


def _detail(r: Checked) -> str:
    unit = r.budget.unit
    if r.status == "not measured":
        return f"{r.note} (skipped; it does not break the gate)"
    assert r.value is not None and r.bound is not None
    if not r.budget.relative:
        return f"{_figure(r.value, unit)}, bound {_figure(r.bound, unit)}"
    assert r.baseline is not None
    change = f" ({(r.value - r.baseline) / r.baseline * 100.0:+,.1f}%)" if r.baseline else ""
    return f"{_figure(r.value, unit)} vs baseline {_figure(r.baseline, unit)}{change}, bound {_figure(r.bound, unit)}"


def _figure(value: float, unit: str) -> str:
    return f"{value:.3f}% of compute" if unit == "%" else f"{value:,.1f} us"


def _limit(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:.10g}"


def _verdict(results: list[Checked]) -> str:
    total = len(results)
    noun = "budget" if total == 1 else "budgets"
    bad = broken(results)
    skipped = [r.budget.name for r in results if r.status == "not measured"]
    tail = f"; {len(skipped)} not measured (skipped): {', '.join(map(_shown_name, skipped))}" if skipped else ""
    if bad:
        return f"gate: {len(bad)} of {total} {noun} broken: {', '.join(_shown_name(r.budget.name) for r in bad)}{tail}"
    if skipped:
        held = total - len(skipped)
        return f"gate: no budget broken, {held} of {total} hold{tail}"
    return f"gate: all {total} {noun} hold" if total > 1 else "gate: the 1 budget holds"
