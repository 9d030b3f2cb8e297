"""An experiment measured: did the change help? The verdict of `npuscope experiment` and the
explorer's experiment screen, as data, as the `npuscope.experiment/1` JSON document and as text.

`measure(base, new, change)` takes the two runs' analyses (the run captured before and the
run captured again with the change) and gives:
- the change of the mean step time with its confidence interval (analysis/step_stats.py) and
  the verdict it supports: improved, regressed, or no measurable change;
- device time and wait by cause before and after (analysis/headline.py);
- the finding that motivated the change (the base's first finding whose advice names it as an
  action, analysis/actions.py): gone, smaller, larger or unchanged in the new run;
- the findings resolved, new and unchanged (analysis/compare.py matches them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from npuscope.parsers import FrameCache, open_profile
from npuscope.text import printable

from .actions import action_for
from .compare import Comparison, compare_runs
from .compare_render import finding_json
from .findings import SEVERITY_MARK, Finding
from .headline import WAIT_CAUSES, Headline, headline
from .session import Analysis, Options, analyse
from .step_stats import CONFIDENCE, DEFAULT_MIN_CHANGE_PCT, StepChange, Verdict, step_change, verdict
from .table import rounded
from .thresholds import Thresholds

SCHEMA = "npuscope.experiment/1"
SAME_FINDING_PCT = 5.0
"""A motivating finding whose time at stake moved less than this is "unchanged"."""
FindingState = Literal["gone", "smaller", "larger", "unchanged"]


@dataclass(frozen=True)
class Change:
    """What the new run changed: environment variables set, the JIT setting, the steps."""

    env: tuple[tuple[str, str], ...] = ()
    jit_compile: str | None = None
    steps: int = 0

    @property
    def text(self) -> str:
        parts = [f"{k}={v}" for k, v in self.env]
        if self.jit_compile is not None:
            parts.append(f"JIT compile {self.jit_compile}")
        return ", ".join(parts) or "no change (the same job again)"

    def to_dict(self) -> dict[str, Any]:
        return {"env": dict(self.env), "jit_compile": self.jit_compile, "steps": self.steps}


@dataclass(frozen=True)
class Motivation:
    base: Finding
    new: Finding | None
    state: FindingState


@dataclass(frozen=True)
class Experiment:
    base_path: str
    new_path: str
    change: Change
    verdict: Verdict
    min_change_pct: float
    step: StepChange | None  # None: a run without steps
    base: Headline
    new: Headline
    comparison: Comparison
    motivation: Motivation | None
    notes: tuple[str, ...] = field(default=())


def motivating(findings: tuple[Finding, ...], change: Change) -> Finding | None:
    """The first finding (by time at stake) whose actions the change sets."""
    wanted = {(k, v.lower()) for k, v in change.env}
    if change.jit_compile == "off":  # the capture's JIT switch is Paddle's flag
        wanted.add(("FLAGS_npu_jit_compile", "false"))
    for f in findings:
        if any((a.key, a.value.lower()) in wanted for a in f.actions):
            return f
    return None


def _motivation(base: Finding | None, c: Comparison) -> Motivation | None:
    if base is None:
        return None
    for b, n in c.findings.unchanged:
        if b is base:
            moved = 100.0 * (n.time_us - b.time_us) / b.time_us if b.time_us else 0.0
            state: FindingState = (
                "unchanged" if abs(moved) < SAME_FINDING_PCT else ("smaller" if moved < 0 else "larger")
            )
            return Motivation(b, n, state)
    return Motivation(base, None, "gone")


def analyse_run(path: Path, thresholds: Thresholds, *, use_cache: bool = True) -> Analysis:
    """The whole analysis of the run at `path`, as `report` makes it (what the explorer's
    experiment measures; the command line reads with progress on stderr instead)."""
    cache = FrameCache(enabled=use_cache)
    profile = open_profile(path, cache=cache)
    return analyse(profile, Options(thresholds, cache=cache, views_cache=FrameCache(enabled=use_cache)))


def measure(
    base: Analysis,
    new: Analysis,
    change: Change,
    *,
    min_change_pct: float = DEFAULT_MIN_CHANGE_PCT,
    base_path: str = "",
    new_path: str = "",
) -> Experiment:
    hb, hn = headline(base), headline(new)
    comparison = compare_runs(
        base.profile,
        new.profile,
        thresholds=base.diagnosis.thresholds,
        base_diagnosis=base.diagnosis,
        new_diagnosis=new.diagnosis,
        base_views=base.views,
        new_views=new.views,
    )
    notes: list[str] = list(comparison.notes)
    step = step_change(hb.step_times_us, hn.step_times_us) if hb.steps and hn.steps else None
    if step is None:
        notes.append(
            f"{'the base run' if not hb.steps else 'the new run'} has no steps: no step time to judge "
            "(the verdict needs the steps of both runs)"
        )
    elif step.ci_us is None:
        notes.append(
            "a run with a single profiled step has no spread: no interval (capture the base with --steps 5 or more)"
        )
    judged: Verdict = verdict(step, min_change_pct) if step is not None else "no measurable change"
    if step is not None and step.excludes_zero and judged == "no measurable change":
        notes.append(
            f"the interval excludes 0 but the change ({step.delta_pct:+.1f}%) is under the {min_change_pct:g}% "
            "floor (--min-change): two runs of one job differ by that much without a change"
        )
    if change.env and all(action_for(k, v) is None for k, v in change.env) and change.jit_compile is None:
        notes.append("the change is no switch a finding named: no motivating finding")
    return Experiment(
        base_path=base_path or base.profile.path.as_posix(),
        new_path=new_path or new.profile.path.as_posix(),
        change=change,
        verdict=judged,
        min_change_pct=min_change_pct,
        step=step,
        base=hb,
        new=hn,
        comparison=comparison,
        motivation=_motivation(motivating(base.findings, change), comparison),
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------- JSON


def _pct(new: float | None, base: float | None) -> float | None:
    if new is None or base is None or not base:
        return None
    return rounded(100.0 * (new - base) / base)


def experiment_json(e: Experiment) -> dict[str, Any]:
    """The `npuscope.experiment/1` document."""
    s = e.step
    f = e.comparison.findings
    m = e.motivation
    return {
        "schema": SCHEMA,
        "base": e.base_path,
        "new": e.new_path,
        "change": e.change.to_dict(),
        "verdict": e.verdict,
        "min_change_pct": e.min_change_pct,
        "confidence": CONFIDENCE,
        "step_time": {
            "base_mean_us": rounded(e.base.step_mean_us),
            "new_mean_us": rounded(e.new.step_mean_us),
            "delta_pct": rounded(s.delta_pct) if s else None,
            "ci_pct": [rounded(s.ci_pct[0]), rounded(s.ci_pct[1])] if s and s.ci_pct else None,
            "steps": {"base": e.base.steps, "new": e.new.steps},
            "base_steps_us": [rounded(v) for v in e.base.step_times_us],
            "new_steps_us": [rounded(v) for v in e.new.step_times_us],
        },
        "device_time": {
            "base_us": rounded(e.base.device_us),
            "new_us": rounded(e.new.device_us),
            "delta_pct": _pct(e.new.device_us, e.base.device_us),
        },
        "wait_by_cause": {
            c: {"base_us": rounded(e.base.wait_by_cause_us.get(c)), "new_us": rounded(e.new.wait_by_cause_us.get(c))}
            for c in WAIT_CAUSES
        },
        "motivating_finding": None
        if m is None
        else {
            "state": m.state,
            "base": finding_json(m.base),
            "new": finding_json(m.new) if m.new is not None else None,
        },
        "findings": {
            "resolved": [finding_json(x) for x in f.resolved],
            "new": [finding_json(x) for x in f.new],
            "unchanged": [finding_json(n) for _, n in f.unchanged],
        },
        "notes": list(e.notes),
    }


# --------------------------------------------------------------------------- text


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f} us"


def _signed(v: float | None) -> str:
    return "" if v is None else f"{v:+.1f}%"


def verdict_line(e: Experiment) -> str:
    """The verdict in one line: what the explorer's screen and the text start with."""
    s = e.step
    if s is None:
        return f"{e.verdict}: no step times to compare"
    ci = f"{CONFIDENCE:.0%} interval {s.ci_pct[0]:+.1f}% .. {s.ci_pct[1]:+.1f}%" if s.ci_pct else "no interval"
    return f"{e.verdict}: mean step time {s.delta_pct:+.1f}% ({ci})"


def _finding_line(f: Finding) -> str:
    return printable(f"[{SEVERITY_MARK[f.severity]}] {f.rule}: {f.title} (card {f.card})")


def render_experiment(e: Experiment) -> str:
    out = [
        f"Experiment: {printable(e.change.text)}",
        f"  base  {printable(e.base_path)}",
        f"  new   {printable(e.new_path)}",
        "",
        f"Verdict: {verdict_line(e)}",
        f"  step time    {_us(e.base.step_mean_us)} -> {_us(e.new.step_mean_us)}  "
        f"({e.base.steps} and {e.new.steps} steps; floor {e.min_change_pct:g}%)",
        f"  device time  {_us(e.base.device_us)} -> {_us(e.new.device_us)}  "
        f"{_signed(_pct(e.new.device_us, e.base.device_us))}",
    ]
    waits = [
        f"{c} {e.base.wait_by_cause_us.get(c, 0.0):,.0f} -> {e.new.wait_by_cause_us.get(c, 0.0):,.0f} us"
        for c in WAIT_CAUSES
        if e.base.wait_by_cause_us.get(c) or e.new.wait_by_cause_us.get(c)
    ]
    out.append("  wait         " + ("; ".join(waits) if waits else "none"))
    m = e.motivation
    if m is not None:
        after = "" if m.new is None else f" ({m.base.time_us:,.0f} -> {m.new.time_us:,.0f} us at stake)"
        out.append(f"Motivating finding: {m.state}{after}")
        out.append("  " + _finding_line(m.base))
    f = e.comparison.findings
    out.append(f"Findings: {len(f.resolved)} resolved, {len(f.new)} new, {len(f.unchanged)} unchanged")
    out += ["  resolved " + _finding_line(x) for x in f.resolved]
    out += ["  new      " + _finding_line(x) for x in f.new]
    out += [f"note: {printable(n)}" for n in e.notes]
    return "\n".join(out) + "\n"
