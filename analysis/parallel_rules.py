"""The cluster's rules that read its parallel layout (analysis/parallel.py): ranks judged
against the ranks that do the same work, and the pipeline and expert balance.

- slow_rank, per stage: msprof-analyze's slow-rank analysis (training_rules.slow_ranks) over
  the ranks of one pipeline stage only, so a stage that computes more is not a slow rank.
- stage_imbalance: the heaviest stage's mean compute per step exceeds the lightest's by more
  than Thresholds.stage_imbalance_pct; the others wait for it (in their pipeline receives).
  At stake: per step, the heaviest stage's compute above the mean of the stages (what an even
  split of the layers would save it), times its steps.
- pipeline_bubble: a stage waits in pipeline receives (step_trace's Bubble, else its P2P
  receive tasks) more than Thresholds.pipeline_bubble_pct of its step, counting only the wait
  a heavier stage does not explain (with stage_imbalance, the heavy stage's extra compute is
  that stage's finding, not a bubble). At stake: that wait, times the steps.
- expert_imbalance: in an expert-parallel group, a rank's MoE compute per step (GroupedMatmul
  and Moe* op types of its tasks) exceeds the median of the group's other ranks by more than
  Thresholds.expert_imbalance_pct; the others wait for it in the all-to-all. Ranks without
  tasks (partial ranks) cannot be compared and are said so.

A stage's finding is on card `stage N`; a rank's on the rank.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace

import polars as pl

from npuscope.parsers.cluster import RankEntry

from . import training_rules
from .card_data import share
from .evidence import view_rows
from .findings import Finding
from .parallel import ParallelLayout, Stage
from .rule_names import EXPERT_IMBALANCE, PIPELINE_BUBBLE, STAGE_IMBALANCE

STAGE_CARD = "stage "
CLUSTER_RULES = (STAGE_IMBALANCE, PIPELINE_BUBBLE, EXPERT_IMBALANCE)
"""The rules of this module (slow_rank is training_rules'), run by the cluster summary."""


def stage_card(stage: int) -> str:
    return f"{STAGE_CARD}{stage}"


def _steps(entries: Sequence[RankEntry], ranks: Sequence[str]) -> int:
    counts = [e.summary.steps for e in entries if e.rank in ranks and e.summary.steps > 0]
    return int(statistics.median(counts)) if counts else 0


def _straggles(
    rank: str,
    peers: Sequence[str],
    entries: Sequence[RankEntry],
    dims: dict[str, list[training_rules.SlowRank]],
    th_pct: float,
) -> bool:
    """Whether `rank` holds its peers back: the slow-rank analysis names it for the most
    compute (not only for waiting least or idling most), and its step is not shorter than the
    median of its peers' (`peers`: its stage, itself included) by more than th_pct % (the
    steps of synchronous ranks even out; the one others wait for is never much shorter)."""
    if not any(d.column == "compute_us" and d.most for d in dims.get(rank, ())):
        return False
    by = {e.rank: e.summary for e in entries if e.rank in peers and e.summary.steps > 0}
    me = by.get(rank)
    if me is None or me.step_us is None or len(by) < 2:
        return False
    step = statistics.median(s.step_us or 0.0 for s in by.values())
    return me.step_us >= step * (1.0 - th_pct / 100.0)


def peer_sets(layout: ParallelLayout | None, names: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The ranks of `names` compared with each other: each stage's (all of them without a
    layout of two stages or more)."""
    if layout is None or len(layout.stages) < 2:
        return [names]
    return [tuple(r for r in names if r in s.ranks) for s in layout.stages]


def slow_ranks_by_stage(
    ctx: training_rules._Context, layout: ParallelLayout | None, names: tuple[str, ...], entries: Sequence[RankEntry]
) -> list[Finding]:
    """slow_rank over the ranks of each stage (all ranks as one stage without a layout), kept
    for the ranks that hold their peers back (_straggles)."""
    stages = peer_sets(layout, names)
    out: list[Finding] = []
    steps = ctx.views.steps
    for peers in stages:
        if len(peers) < 2:
            continue
        ctx.views = replace(ctx.views, steps=steps.filter(pl.col("card").is_in(peers)))
        dims = training_rules.slow_ranks(ctx.views.steps, ctx.th.slow_rank_pct)
        for f in training_rules.slow_rank(ctx, peers):
            if not _straggles(f.card, peers, entries, dims, ctx.th.slow_rank_pct):
                continue
            if len(stages) > 1:
                stage = layout.stage_of.get(f.card) if layout is not None else None
                f = replace(f, title=f"{f.title}, against the {len(peers)} ranks of pipeline stage {stage}")
            out.append(f)
    ctx.views = replace(ctx.views, steps=steps)
    return out


def stage_imbalance(
    ctx: training_rules._Context, layout: ParallelLayout, entries: Sequence[RankEntry]
) -> Finding | None:
    timed = [s for s in layout.stages if s.step_us > 0]
    if len(timed) < 2:
        return None
    heavy = max(timed, key=lambda s: (s.compute_us, -s.stage))
    light = min(timed, key=lambda s: (s.compute_us, s.stage))
    if light.compute_us <= 0:
        return None
    over_pct = 100.0 * (heavy.compute_us - light.compute_us) / light.compute_us
    if over_pct <= ctx.th.stage_imbalance_pct:
        return None
    mean = statistics.fmean(s.compute_us for s in timed)
    excess = heavy.compute_us - mean
    n = _steps(entries, heavy.ranks)
    at_stake = excess * n
    pct = share(excess, heavy.step_us)
    return ctx.finding(
        STAGE_IMBALANCE,
        stage_card(heavy.stage),
        severity="critical" if pct >= 25.0 else "warning",
        title=(
            f"Pipeline stage {heavy.stage} computes {heavy.compute_us:,.0f} us per step, "
            f"{heavy.compute_us / light.compute_us:.2f}x stage {light.stage} ({light.compute_us:,.0f} us): "
            "the other stages wait for it"
        ),
        count=n,
        time_us=round(at_stake, 3),
        share_pct=pct,
        evidence=view_rows(
            ctx.views.steps.filter(pl.col("card").is_in(heavy.ranks)), "compute_us", ctx.th.evidence_rows
        ),
        threshold=f"heaviest stage's compute > {ctx.th.stage_imbalance_pct:g}% above the lightest's",
        view="steps",
    )


def unexplained_bubble(stage: Stage, heavy: Stage | None) -> float:
    """The stage's receive wait per step that a heavier stage's extra compute does not explain."""
    explained = max(0.0, heavy.compute_us - stage.compute_us) if heavy is not None and heavy is not stage else 0.0
    return max(0.0, stage.bubble_us - explained)


def pipeline_bubble(
    ctx: training_rules._Context, layout: ParallelLayout, entries: Sequence[RankEntry], imbalance: Finding | None
) -> list[Finding]:
    timed = [s for s in layout.stages if s.step_us > 0]
    if len(timed) < 2:
        return []
    heavy = None
    if imbalance is not None:
        heavy = next(s for s in timed if stage_card(s.stage) == imbalance.card)
    out = []
    for stage in timed:
        residual = unexplained_bubble(stage, heavy)
        pct = share(residual, stage.step_us)
        if pct <= ctx.th.pipeline_bubble_pct:
            continue
        n = _steps(entries, stage.ranks)
        out.append(
            ctx.finding(
                PIPELINE_BUBBLE,
                stage_card(stage.stage),
                severity="critical" if pct >= 2 * ctx.th.pipeline_bubble_pct else "warning",
                title=(
                    f"Pipeline stage {stage.stage} waits {stage.bubble_us:,.0f} us per step in pipeline receives "
                    f"({share(stage.bubble_us, stage.step_us):.1f}% of its step"
                    + (
                        f"; {residual:,.0f} us not explained by stage {heavy.stage}'s extra compute)"
                        if heavy is not None and heavy is not stage
                        else ")"
                    )
                ),
                count=n,
                time_us=round(residual * n, 3),
                share_pct=pct,
                evidence=view_rows(
                    ctx.views.steps.filter(pl.col("card").is_in(stage.ranks)), "bubble_us", ctx.th.evidence_rows
                ),
                threshold=f"receive wait not explained by a heavier stage > {ctx.th.pipeline_bubble_pct:g}% of the step",
                view="steps",
            )
        )
    return out


def expert_imbalance(
    ctx: training_rules._Context, layout: ParallelLayout, entries: Sequence[RankEntry]
) -> tuple[list[Finding], list[str]]:
    """Findings, and notes for expert groups that cannot be compared."""
    by_rank = {e.rank: e for e in entries if e.summary.error is None}
    out: list[Finding] = []
    notes: list[str] = []
    for group in layout.groups_named("ep"):
        labels = [str(r) for r in group.ranks if str(r) in by_rank]
        values = {r: by_rank[r].summary.moe_us for r in labels}
        known = {r: v for r, v in values.items() if v is not None}
        if len(known) < 2:
            continue
        if len(known) < len(labels):
            left = sorted(set(labels) - set(known), key=lambda r: int(r) if r.isdigit() else 0)
            notes.append(
                f"expert group {list(group.ranks)}: rank(s) {', '.join(left)} have no MoE tasks to compare (no kernel_details)"
            )
        worst = max(known, key=lambda r: (known[r], r))
        value = known[worst]
        median = statistics.median(v for r, v in known.items() if r != worst)  # of the others
        if median <= 0 or 100.0 * (value - median) / median <= ctx.th.expert_imbalance_pct:
            continue
        entry = by_rank[worst]
        n = entry.summary.steps or 1
        excess = value - median
        pct = share(excess, entry.summary.step_us or 0.0)
        out.append(
            ctx.finding(
                EXPERT_IMBALANCE,
                worst,
                severity="critical" if pct >= 25.0 else "warning",
                title=(
                    f"Expert rank {worst} spends {value:,.0f} us per step in MoE compute, {value / median:.2f}x the "
                    f"other ranks of its expert group {list(group.ranks)} (median {median:,.0f} us): they wait for it "
                    "in the all-to-all"
                ),
                count=n,
                time_us=round(excess * n, 3),
                share_pct=pct,
                evidence=view_rows(ctx.views.steps.filter(pl.col("card") == worst), "compute_us", ctx.th.evidence_rows),
                threshold=f"a rank's MoE compute > {ctx.th.expert_imbalance_pct:g}% above the median of its expert group's other ranks",
                view="steps",
            )
        )
    return out, notes
