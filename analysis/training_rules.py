"""The training-level rules: findings from the steps, communication, links, host API and memory
views (`npuscope.parsers.training.read_training_views`), one per card they concern.

`training_findings(profile, diagnosis, views)` runs them for the diagnosed cards; the caller
adds them with `Diagnosis.with_findings`. Each finding's `view` names the view its evidence
rows come from (that view's columns: analysis/evidence.py; the worst first, at most
evidence_rows), and its
time at stake is the time that could be saved: the communication not overlapped, the free time
no operator rule explains, the synchronising API time, the slow rank's excess over the median
card, the slow links' time beyond the median bandwidth's, the small collectives' time (0 for
memory_peak). `share_pct` is the measure compared with the threshold (for slow_rank and
slow_link, the time at stake as a share of the card's step time). `op_types` stays empty: a
view finding is about no op type, and the comparison matches it by rule and card. Rows a file
records for the whole capture (card `host`) stand for a card with none of its own, as in the
report. Thresholds and where they come from: thresholds.py and the README's rules table.

The registry is PER_CARD (rules of one card) and ACROSS_CARDS (rules comparing the cards), by
the names of analysis/rule_names.py; to add a rule: its name there, its function here, its
entry in the registry and TRAINING_RULES (NPU_ONLY_RULES / HOST_SKIPPED_RULES if it does not
run everywhere), its advice in analysis/advice.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from npuscope.parsers import Profile
from npuscope.parsers.by_card import card_or_host_rows, card_rows, per_frame
from npuscope.parsers.training import TrainingViews
from npuscope.parsers.training_files import step_number

from .advice import advice as advice  # also the words of the cluster findings (cluster.py)
from .card_data import share
from .device_kind import DeviceKind, device_kind
from .diagnose import Diagnosis
from .evidence import view_rows
from .findings import Finding, order
from .framework import framework_of
from .rule_names import (
    COMM_NOT_OVERLAPPED,
    FREE_TIME,
    IDLE_DEVICE,
    MEMORY_PEAK,
    SLOW_LINK,
    SLOW_RANK,
    SMALL_PACKETS,
    SYNC_HEAVY,
)
from .thresholds import Thresholds

HOST = "host"

TRAINING_RULES = (
    COMM_NOT_OVERLAPPED,
    FREE_TIME,
    SYNC_HEAVY,
    SLOW_RANK,
    SLOW_LINK,
    SMALL_PACKETS,
    MEMORY_PEAK,
)
"""The names of the training rules (the keys of PER_CARD and ACROSS_CARDS), as the README's
table lists them."""

EXPLAINED_CAUSES = ("recompilation", "host_op")
"""Wait causes (analysis/waits.py) whose time an operator rule already blames: free time
they account for is not counted again by `free_time`."""

SYNC_API = (
    r"^(aclrtSynchronize(Stream|Device|Event)\w*|aclrtMemcpy|aclrtMemcpy2d|"
    r"rtStreamSynchronize\w*|rtDeviceSynchronize\w*|rtEventSynchronize\w*|rtMemcpy)$"
)
"""Host APIs that block the host until the device is done: the synchronise calls of AscendCL
and the runtime, and the synchronous copies (`aclrtMemcpy`, not `aclrtMemcpyAsync`)."""


NPU_ONLY_RULES = (SYNC_HEAVY,)
"""Rules about what only an Ascend capture records: the AscendCL / runtime synchronising APIs."""
HOST_SKIPPED_RULES = (SLOW_LINK, MEMORY_PEAK)
"""Rules about device links and device memory: nothing of them on a CPU."""


def runs_on(rule: str, kind: str) -> bool:
    """Whether the training rule `rule` applies to a capture of device `kind`."""
    if kind == "NPU":
        return True
    return rule not in NPU_ONLY_RULES and not (kind == "CPU" and rule in HOST_SKIPPED_RULES)


# ---------------------------------------------------------------------------- helpers


_of_card = card_or_host_rows  # the card's rows, else the whole capture's (card `host`)


def _total(frame: pl.DataFrame, column: str) -> float:
    value = frame[column].sum() if frame.height else 0.0
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0.0


def _step_parts() -> pl.Expr:
    """A step's time: step_us, else compute + not overlapped + free."""
    parts = pl.col("compute_us").fill_null(0.0) + pl.col("comm_not_overlapped_us").fill_null(0.0)
    return pl.coalesce(pl.col("step_us"), parts + pl.col("free_us").fill_null(0.0))


def _step_time(steps: pl.DataFrame) -> float:
    """The time in the steps of `steps`."""
    if steps.height == 0:
        return 0.0
    t = steps.select(_step_parts().sum()).item()
    return float(t or 0.0)


def _step_times(steps: pl.DataFrame) -> dict[str, float]:
    """Card -> its time in steps, every card in one pass."""
    got = steps.group_by("card").agg(_step_parts().sum().alias("t"))
    return {str(card): float(t or 0.0) for card, t in got.iter_rows()}


def _card_step_time(c: _Context, card: str) -> float:
    """The card's time in steps (those of the whole capture, card `host`, if it has none)."""
    times = per_frame(c.views.steps, "step_times", _step_times)
    return times[card] if card in times else times.get(HOST, 0.0)


def _steps_text(steps: pl.DataFrame) -> str:
    n = steps.height
    return "the capture" if n == 1 and steps["step"][0] is None else f"{n} step(s)"


# ---------------------------------------------------------------------------- rules


class _Context:
    """What every rule reads: the views, the diagnosis, the thresholds, the framework, the
    device kind (a context built without a profile keeps the NPU's)."""

    kind: DeviceKind = "NPU"

    def __init__(self, profile: Profile, diagnosis: Diagnosis, views: TrainingViews, th: Thresholds) -> None:
        self.profile = profile
        self.diagnosis = diagnosis
        self.views = views
        self.th = th
        self.framework = framework_of(profile.layout, profile)
        self.kind = device_kind(profile)

    def finding(self, rule: str, card: str, **kw: Any) -> Finding:
        return Finding(
            rule=rule,
            severity=kw.pop("severity", "warning"),
            card=card,
            op_types=kw.pop("op_types", ()),
            op_names=kw.pop("op_names", ()),
            advice=advice(rule, self.framework, self.kind),
            **kw,
        )


def comm_not_overlapped(c: _Context, card: str) -> list[Finding]:
    """Communication not hidden behind compute, as a share of the card's step time."""
    steps = _of_card(c.views.steps, card)
    exposed = _total(steps, "comm_not_overlapped_us")
    if exposed <= 0:
        return []
    total = _card_step_time(c, card)
    pct = share(exposed, total)
    if total <= 0 or exposed <= 0 or pct < c.th.comm_not_overlapped_pct:
        return []
    comm = _total(steps, "communication_us")
    hidden = f", {share(comm - exposed, comm):.1f}% of communication overlapped" if comm > 0 else ""
    return [
        c.finding(
            COMM_NOT_OVERLAPPED,
            card,
            title=(
                f"Communication not overlapped {exposed:,.0f} us = {pct:.1f}% of step time "
                f"({total:,.0f} us over {_steps_text(steps)}){hidden}"
            ),
            count=steps.height,
            time_us=exposed,
            share_pct=pct,
            evidence=view_rows(steps, "comm_not_overlapped_us", c.th.evidence_rows),
            threshold=f"not overlapped >= {c.th.comm_not_overlapped_pct:g}% of step time",
            view="steps",
        )
    ]


def _explained_wait(c: _Context, card: str, steps: pl.DataFrame) -> float:
    """Wait time the operator rules blame (EXPLAINED_CAUSES) in the card's tasks of its steps.

    A task belongs to a step by its Step Id; a capture without step boundaries (step null), or
    tasks without a Step Id, count whole."""
    tasks = c.diagnosis.tasks
    if "wait_cause" not in tasks.columns or tasks.height == 0:
        return 0.0
    mine = card_rows(tasks, card).filter(pl.col("wait_cause").is_in(list(EXPLAINED_CAUSES)))
    if mine.height == 0:
        return 0.0
    numbered = {s for s in steps["step"].to_list() if s is not None}
    if numbered and steps["step"].null_count() == 0 and "step_id" in mine.columns:
        ids = mine["step_id"].to_list()
        if any(i not in (None, "") for i in ids):
            keep = [i in (None, "") or step_number(i) in numbered for i in ids]
            mine = mine.filter(pl.Series(keep, dtype=pl.Boolean))
    return _total(mine, "wait_us")


def free_time(c: _Context, card: str) -> list[Finding]:
    """Device free inside the steps that no operator-level finding explains.

    Free time (neither compute nor communication ran) minus the long waits that
    `recompilation` and `host_op_wait` already blame inside the card's steps: what is left is
    the host being late for reasons the tasks cannot show (data loading, Python between steps,
    synchronisation). It does not fire on a card `idle_device` flags: that rule already says the
    device is idle for most of the span (host-bound), and free time is then the same time said
    twice; the two differ in scope (idle_device: the whole span, from the tasks; free_time: the
    steps' free time, less what is explained) and free_time is the finer one for a busy device.
    """
    if any(f.rule == IDLE_DEVICE for f in c.diagnosis.for_card(card)):
        return []
    steps = _of_card(c.views.steps, card)
    free = _total(steps, "free_us")
    if free <= 0:
        return []
    total = _card_step_time(c, card)
    if total <= 0 or free <= 0:
        return []
    explained = min(_explained_wait(c, card, steps), free)
    rest = free - explained
    pct = share(rest, total)
    if pct < c.th.free_pct:
        return []
    less = f" ({explained:,.0f} us of {free:,.0f} us free blamed on recompilation / host ops)" if explained else ""
    # On a CPU every task is a host operator: the time between them is not a device's.
    what = "No operator running" if c.kind == "CPU" else "Device free"
    return [
        c.finding(
            FREE_TIME,
            card,
            title=(f"{what} {rest:,.0f} us = {pct:.1f}% of step time, unexplained{less}, over {_steps_text(steps)}"),
            count=steps.height,
            time_us=rest,
            share_pct=pct,
            evidence=view_rows(steps, "free_us", c.th.evidence_rows),
            threshold=f"free, less explained waits, >= {c.th.free_pct:g}% of step time",
            view="steps",
        )
    ]


def _span(c: _Context, card: str) -> float:
    """The card's span: the sum of its step time, else first task start to last task end."""
    total = _card_step_time(c, card)
    if total > 0 or c.profile.time_problem is not None:
        return total
    tasks = card_rows(c.diagnosis.tasks, card)
    if tasks.height == 0:
        return 0.0
    got = tasks.select((pl.col("start_us") + pl.col("duration_us").fill_null(0.0)).max() - pl.col("start_us").min())
    return float(got.item() or 0.0)


def sync_heavy(c: _Context, card: str) -> list[Finding]:
    """Host time in synchronising APIs (SYNC_API) as a share of the card's span.

    An AscendCL call and the runtime call under it are both recorded (aclrtSynchronizeStream
    runs rtStreamSynchronize): the time is the larger of the two levels' totals, never their
    sum. Rows of the whole capture (card `host`, as msprof's api_statistic writes them) hold
    the host time of every card without rows of its own: each of them takes an even part."""
    host_api = c.views.host_api
    api = _of_card(host_api, card)
    if api.height == 0:
        return []
    api = api.filter(pl.col("api").str.contains(SYNC_API))
    if api.height == 0:
        return []
    per_level = api.group_by(pl.col("level").fill_null("")).agg(pl.col("total_us").sum())
    sync = max(float(t or 0.0) for t in per_level["total_us"].to_list())
    sharing = 1
    if (api["card"] == HOST).all():
        own = set(host_api["card"].unique().to_list())
        sharing = max(1, sum(1 for x in c.profile.cards if x not in own))
    sync /= sharing
    span = _span(c, card)
    pct = share(sync, span)
    if span <= 0 or sync <= 0 or pct < c.th.sync_pct:
        return []
    calls = int(api["count"].sum() or 0)
    return [
        c.finding(
            SYNC_HEAVY,
            card,
            title=(
                f"Host synchronisation {sync:,.0f} us = {pct:.1f}% of the span ({span:,.0f} us), {calls:,} call(s)"
                + (f" (the capture's host API, shared by {sharing} cards)" if sharing > 1 else "")
            ),
            count=calls,
            time_us=sync,
            share_pct=pct,
            evidence=view_rows(api, "total_us", c.th.evidence_rows),
            threshold=f"synchronising APIs >= {c.th.sync_pct:g}% of the span",
            view="host_api",
        )
    ]


SLOW_RANK_DIMENSIONS: tuple[tuple[str, str, bool], ...] = (
    ("compute_us", "compute", True),
    ("comm_not_overlapped_us", "communication not overlapped", False),
    ("free_us", "free", True),
)
"""msprof-analyze's three dimensions (Computing, Communication(Not Overlapped), Free) and whether
the slow rank is the one with the most (compute, free) or the least (communication: the rank
the others wait for in every collective waits least itself)."""


@dataclass(frozen=True)
class SlowRank:
    column: str  # of the steps view
    dimension: str
    most: bool  # slow by having the most of it (compute, free), else the least
    value_us: float  # the slow card's mean per step
    median_us: float  # the median over cards of the mean per step
    spread_pct: float  # (max - min) / mean over cards of the mean step time, %
    excess_us: float  # |value - median| x the card's steps


def slow_ranks(steps: pl.DataFrame, threshold_pct: float) -> dict[str, list[SlowRank]]:
    """msprof-analyze's slow-rank analysis (advisor SlowRankAnalyzer) over the cards' steps.

    Per card, the mean per step of compute, communication not overlapped and free; per
    dimension, (max - min) over cards divided by the mean over cards of the mean step time
    (compute + not overlapped + free, the sum SlowRankAnalyzer divides by) must exceed
    `threshold_pct`. msprof-analyze compares every (step, rank) pair; the mean per step of each
    card is compared here, so one odd step does not make a slow rank. Rows of card `host` are
    not a rank. Needs two cards with steps."""
    ranks = steps.filter(pl.col("card") != HOST)
    cols = [col for col, _, _ in SLOW_RANK_DIMENSIONS]
    per = (
        ranks.group_by("card").agg(pl.len().alias("n"), *(pl.col(c).mean() for c in cols)).drop_nulls(cols).sort("card")
    )
    out: dict[str, list[SlowRank]] = {}
    if per.height < 2:
        return out
    rows = list(per.iter_rows(named=True))
    mean_total = statistics.fmean(sum(float(r[c]) for c in cols) for r in rows)
    if mean_total <= 0:
        return out
    for col, name, most in SLOW_RANK_DIMENSIONS:
        values = [float(r[col]) for r in rows]
        spread = 100.0 * (max(values) - min(values)) / mean_total
        if spread <= threshold_pct:
            continue
        median = statistics.median(values)
        pick = max if most else min
        slow = pick(rows, key=lambda r: float(r[col]))
        value = float(slow[col])
        out.setdefault(slow["card"], []).append(
            SlowRank(col, name, most, value, median, round(spread, 3), abs(value - median) * int(slow["n"]))
        )
    return out


def slow_rank(c: _Context, cards: tuple[str, ...]) -> list[Finding]:
    """The slow ranks of `slow_ranks`, one finding per slow card.

    A card slow in several dimensions (late compute also means it waits least in the
    collectives) gets one finding whose time at stake is the largest excess, not their sum:
    the others are the same lost time seen from another side."""
    slow = slow_ranks(c.views.steps, c.th.slow_rank_pct)
    out = []
    for card in cards:
        dims = slow.get(card)
        if not dims:
            continue
        steps = card_rows(c.views.steps, card)
        what = "; ".join(
            f"{'most' if d.most else 'least'} {d.dimension}, {d.value_us:,.0f} us/step vs median "
            f"{d.median_us:,.0f} us (spread {d.spread_pct:.1f}% of step time)"
            for d in dims
        )
        if not all(d.most for d in dims):
            what += ": the other ranks wait for it in the collectives"
        worst = max(dims, key=lambda d: d.excess_us)
        out.append(
            c.finding(
                SLOW_RANK,
                card,
                title=f"Slow rank: {what}",
                count=steps.height,
                time_us=worst.excess_us,
                share_pct=share(worst.excess_us, _step_time(steps)),
                evidence=view_rows(steps, worst.column, c.th.evidence_rows, descending=worst.most),
                threshold=f"(max - min) over cards > {c.th.slow_rank_pct:g}% of the mean step time",
                view="steps",
            )
        )
    return out


def _measured_links(links: pl.DataFrame, min_mb: float) -> pl.DataFrame:
    """Links between ranks that moved enough data for their bandwidth to measure the link."""
    return links.filter(
        (pl.col("transport") != "LOCAL")
        & (pl.col("src") != pl.col("dst")).fill_null(True)
        & (pl.col("bandwidth_gbps") > 0)
        & (pl.col("time_us") > 0)
        & (pl.col("size_mb") >= min_mb)
    )


def _link_medians(links: pl.DataFrame, th: Thresholds) -> pl.DataFrame:
    """Per transport: the median bandwidth of the measured links of every card, and how many."""
    every = _measured_links(links, th.small_packet_mb)
    return every.group_by("transport").agg(pl.col("bandwidth_gbps").median().alias("_median"), pl.len().alias("_n"))


def slow_link(c: _Context, card: str) -> list[Finding]:
    """Links of the card whose bandwidth is below slow_link_pct of the median of the links of
    the same transport (every card's, so one card with few links is still compared).

    LOCAL copies are no link, and a link that moved less than small_packet_mb measures latency,
    not bandwidth (that is `small_packets`' business): both are left out, and a transport needs
    two links for a median. The time at stake is each slow link's time beyond what the median
    bandwidth would take for the same data."""
    links = _of_card(c.views.links, card)
    if links.height == 0:
        return []
    medians = per_frame(c.views.links, f"link_medians:{c.th.small_packet_mb!r}", lambda f: _link_medians(f, c.th))
    mine = _measured_links(links, c.th.small_packet_mb).join(medians, on="transport")
    slow = mine.filter(
        (pl.col("_n") >= 2) & (pl.col("bandwidth_gbps") < c.th.slow_link_pct / 100.0 * pl.col("_median"))
    )
    if slow.height == 0:
        return []
    slow = slow.with_columns(
        (pl.col("time_us") - pl.col("size_mb") / pl.col("_median") * 1000.0).clip(lower_bound=0.0).alias("_excess")
    )
    excess = _total(slow, "_excess")
    worst = slow.sort(["bandwidth_gbps", "group"], nulls_last=True).row(0, named=True)
    more = f" and {slow.height - 1} more" if slow.height > 1 else ""
    return [
        c.finding(
            SLOW_LINK,
            card,
            title=(
                f"Slow link: {worst['transport']} {worst['src']}->{worst['dst']} at {worst['bandwidth_gbps']:,.2f} GB/s = "
                f"{100.0 * worst['bandwidth_gbps'] / worst['_median']:.0f}% of the {worst['transport']} median "
                f"{worst['_median']:,.2f} GB/s{more}; {excess:,.0f} us beyond the median's time"
            ),
            count=slow.height,
            time_us=excess,
            share_pct=share(excess, _span(c, card)),
            evidence=view_rows(
                slow.drop("_median", "_n", "_excess"), "bandwidth_gbps", c.th.evidence_rows, descending=False
            ),
            threshold=f"bandwidth < {c.th.slow_link_pct:g}% of the transport's median link",
            view="links",
        )
    ]


# msprof-analyze's packet analysis (advisor PacketChecker, analyzer/communication/packet/
# packet_checker.py at Ascend/msprof-analyze 3f57f1af570ba7af4ddaff5feba4c2b2b34b6871, reading
# advisor/rules/en/packet.yaml: min_sdma_size 16 MB, min_rdma_size 1 MB, min_sdma_ratio and
# min_rdma_ratio 0.2): per transport, a call whose Transit Size(MB) on it is under the size is
# small (calls that moved nothing on it are not counted), and the transport is flagged when more
# than the ratio of its calls are small. Here each op of the communication view is judged by its
# mean size per call on each transport (sdma_mb, rdma_mb over count); a view that does not split
# the size by transport (hand-made, or a source without it) is judged by RDMA's 1 MB, the smaller.
_TRANSPORTS = (("SDMA", "sdma_mb"), ("RDMA", "rdma_mb"))


def _small_calls(comm: pl.DataFrame, th: Thresholds) -> list[tuple[str, float, pl.DataFrame, int, int]]:
    """(transport, its size threshold, its small ops, small calls, calls that moved data on it)."""
    split = pl.col("sdma_mb").is_not_null() | pl.col("rdma_mb").is_not_null()
    parts = [
        (name, th.small_sdma_mb if name == "SDMA" else th.small_packet_mb, comm.filter(split), col)
        for name, col in _TRANSPORTS
    ]
    parts.append(("collective", th.small_packet_mb, comm.filter(~split), "size_mb"))
    out = []
    for name, limit, rows, col in parts:
        moved = rows.filter((pl.col("count") > 0) & (pl.col(col) > 0).fill_null(False))
        small = moved.filter(pl.col(col) / pl.col("count") < limit)
        if small.height:
            out.append((name, limit, small, int(small["count"].sum() or 0), int(moved["count"].sum() or 0)))
    return out


def small_packets(c: _Context, card: str) -> list[Finding]:
    """Collectives moving little data per call, per transport as msprof-analyze's packet
    analysis judges them (SDMA under small_sdma_mb, RDMA under small_packet_mb, more than
    small_calls_pct of the transport's calls), when those calls also take at least
    small_packet_pct of the card's communication time (the time at stake: their elapse)."""
    comm = _of_card(c.views.communication, card)
    total = _total(comm, "total_us")
    if total <= 0:
        return []
    flagged = []
    for name, limit, small, n_small, n_moved in _small_calls(comm, c.th):
        calls_pct = 100.0 * n_small / n_moved if n_moved else 0.0
        if calls_pct > c.th.small_calls_pct and share(_total(small, "total_us"), total) >= c.th.small_packet_pct:
            flagged.append((name, limit, small, n_small, n_moved))
    if not flagged:
        return []
    small = pl.concat([f[2] for f in flagged], how="vertical").unique(
        subset=["card", "op_type", "op_name"], keep="first", maintain_order=True
    )
    t = _total(small, "total_us")
    pct = share(t, total)
    calls = int(small["count"].sum() or 0)
    mean_mb = _total(small, "size_mb") / calls if calls else 0.0
    how = "; ".join(
        f"{name} under {limit:g} MB: {n_small:,} of {n_moved:,} calls"
        if name != "collective"
        else f"under {limit:g} MB: {n_small:,} of {n_moved:,} calls"
        for name, limit, _, n_small, n_moved in flagged
    )
    return [
        c.finding(
            SMALL_PACKETS,
            card,
            title=(
                f"{calls:,} collective call(s) moving little data ({how}; mean {mean_mb * 1024:,.1f} KB) take "
                f"{t:,.0f} us = {pct:.1f}% of communication time"
            ),
            op_names=tuple(
                n for n in small.sort("total_us", descending=True)["op_name"].head(5).to_list() if n is not None
            ),
            count=calls,
            time_us=t,
            share_pct=pct,
            evidence=view_rows(small, "total_us", c.th.evidence_rows),
            threshold=(
                f"calls under {c.th.small_sdma_mb:g} MB (SDMA) / {c.th.small_packet_mb:g} MB (RDMA) each, more than "
                f"{c.th.small_calls_pct:g}% of the transport's calls and >= {c.th.small_packet_pct:g}% of "
                "communication time"
            ),
            view="communication",
        )
    ]


def memory_peak(c: _Context, card: str) -> list[Finding]:
    """Peak reserved memory near the device's capacity; never without a known capacity."""
    mem = _of_card(c.views.memory, card)
    if mem.height == 0:
        return []
    mem = mem.filter(
        pl.col("capacity_mb").is_not_null() & (pl.col("capacity_mb") > 0) & pl.col("peak_reserved_mb").is_not_null()
    )
    if mem.height == 0:
        return []
    mem = mem.with_columns((100.0 * pl.col("peak_reserved_mb") / pl.col("capacity_mb")).alias("_pct"))
    worst = mem.sort("_pct", descending=True).row(0, named=True)
    pct = float(worst["_pct"])
    if pct < c.th.memory_peak_pct:
        return []
    return [
        c.finding(
            MEMORY_PEAK,
            card,
            title=(
                f"Peak reserved {worst['peak_reserved_mb']:,.0f} MB = {pct:.1f}% of the device's "
                f"{worst['capacity_mb']:,.0f} MB"
            ),
            count=1,
            time_us=0.0,
            share_pct=round(pct, 3),
            evidence=view_rows(mem.drop("_pct"), "peak_reserved_mb", c.th.evidence_rows),
            threshold=f"peak reserved >= {c.th.memory_peak_pct:g}% of capacity",
            view="memory",
        )
    ]


PerCardRule = Callable[[_Context, str], list[Finding]]
AcrossCardsRule = Callable[[_Context, tuple[str, ...]], list[Finding]]

PER_CARD: dict[str, PerCardRule] = {
    COMM_NOT_OVERLAPPED: comm_not_overlapped,
    FREE_TIME: free_time,
    SYNC_HEAVY: sync_heavy,
    SLOW_LINK: slow_link,
    SMALL_PACKETS: small_packets,
    MEMORY_PEAK: memory_peak,
}
"""The training rules that judge one card at a time, by the name their findings carry, in the
order they run."""
ACROSS_CARDS: dict[str, AcrossCardsRule] = {SLOW_RANK: slow_rank}
"""The training rules that compare the cards, run after PER_CARD."""


def training_findings(
    profile: Profile, diagnosis: Diagnosis, views: TrainingViews, thresholds: Thresholds | None = None
) -> list[Finding]:
    """The training-level findings of the diagnosed cards, in display order (`order`)."""
    c = _Context(profile, diagnosis, views, thresholds or diagnosis.thresholds)
    out: list[Finding] = []
    for card in diagnosis.cards:
        for name, rule in PER_CARD.items():
            if runs_on(name, c.kind):
                out.extend(rule(c, card))
    for name, across in ACROSS_CARDS.items():
        if runs_on(name, c.kind):
            out.extend(across(c, diagnosis.cards))
    return order(out)
