"""The operator rules over long waits (their causes: analysis/waits.py): recompilation, a wait
for the host, a wait for communication."""

from __future__ import annotations

import polars as pl

from npuscope.parsers.columns import UNKNOWN

from .advice import advice
from .card_data import share
from .card_groups import Cards, by_card, evidence_by, grouped, per_group
from .findings import Finding
from .rule_names import COMMUNICATION_WAIT, HOST_OP_WAIT, RECOMPILATION
from .thresholds import Thresholds


def _wait_findings(c: Cards, th: Thresholds, cause: str, rule: str, title: str) -> dict[str, list[Finding]]:
    """Per card, one finding of `rule` per op type of the tasks whose wait has `cause`."""
    rows_all = c.tasks.filter(pl.col("wait_cause") == cause)
    if rows_all.height == 0:
        return {}
    if rule == RECOMPILATION:
        # An application's own kernel is built ahead of time, never online: without a
        # timeline, "first call of an aclop shape" says nothing about it, so only a compile
        # API seen over the gap (another operator compiled meanwhile) is kept.
        rows_all = c.with_custom(rows_all)
        rows_all = rows_all.filter(~(pl.col("_custom") & (pl.col("wait_confidence") == "suspected")))
    suspected = (pl.col("wait_confidence") == "suspected").any().alias("_suspected")
    groups = by_card(per_group(rows_all, "wait_us", suspected))
    evidence = evidence_by(rows_all, ("card", "op_type"), "wait_us", th.evidence_rows)
    out: dict[str, list[Finding]] = {}
    for card in c.cards:
        custom_types = c.custom_types(card)
        events = c.compile_events.get(card, 0)
        for g in groups.get(card, ()):
            op_type, n, total = g["op_type"], int(g["_n"]), float(g["_t"] or 0.0)
            extra = ""
            if rule == RECOMPILATION and events:
                extra = f"; {events} aclopCompileAndExecute calls on the host"
            shown = op_type if op_type != UNKNOWN and not op_type.isdigit() else ", ".join(g["_names"][:2])
            text = title.format(n=n, op_type=shown, total=total)
            if rule == RECOMPILATION and op_type in custom_types:
                text = f"{n} long wait(s) before {shown} while the host compiled another operator ({total:,.0f} us)"
            out.setdefault(card, []).append(
                Finding(
                    rule=rule,
                    severity="warning",
                    title=text + extra,
                    card=card,
                    op_types=(op_type,),
                    op_names=tuple(g["_names"]),
                    count=n,
                    time_us=total,
                    share_pct=share(total, c.wait_us(card)),
                    advice=advice(rule, c.framework, c.kind),
                    confidence="suspected" if g["_suspected"] else "evidence",
                    evidence=evidence.get((card, op_type), ()),
                    threshold=f"Task Wait Time >= {th.long_wait_us:g} us",
                )
            )
    return out


def recompilation(c: Cards, th: Thresholds) -> list[Finding]:
    found = _wait_findings(
        c,
        th,
        "recompilation",
        RECOMPILATION,
        "{n} long wait(s) before {op_type} from recompilation ({total:,.0f} us)",
    )
    out = []
    for card in c.cards:
        events = c.compile_events.get(card, 0)
        mine = found.get(card, [])
        if not mine and events >= th.compile_events:
            mine = [
                Finding(
                    rule=RECOMPILATION,
                    severity="warning",
                    title=f"{events} aclopCompileAndExecute calls on the host",
                    card=card,
                    op_types=(),
                    op_names=(),
                    count=events,
                    time_us=0.0,
                    share_pct=0.0,
                    advice=advice(RECOMPILATION, c.framework, c.kind),
                    threshold=f">= {th.compile_events} aclopCompileAndExecute events",
                )
            ]
        out += mine
    return out


def host_op_wait(c: Cards, th: Thresholds) -> list[Finding]:
    found = _wait_findings(
        c,
        th,
        "host_op",
        HOST_OP_WAIT,
        "{n} long wait(s) before {op_type} while the host ran something else ({total:,.0f} us)",
    )
    return [f for card in c.cards for f in found.get(card, ())]


def communication_wait(c: Cards, th: Thresholds) -> list[Finding]:
    """Long waits inside a collective of the card or before one: communication, never the host's."""
    rows = c.tasks.filter(pl.col("wait_cause") == "communication")
    if rows.height == 0:
        return []
    totals = grouped(
        rows,
        ("card",),
        pl.len().alias("_n"),
        pl.col("wait_us").sum().alias("_t"),
        pl.col("op_name").unique(maintain_order=True).head(5).alias("_names"),
    )
    types = by_card(per_group(rows, "wait_us"))
    evidence = evidence_by(rows, ("card",), "wait_us", th.evidence_rows)
    out = []
    for card in c.cards:
        got = totals.get((card,))
        if got is None:
            continue
        n, total = int(got["_n"]), float(got["_t"] or 0.0)
        out.append(
            Finding(
                rule=COMMUNICATION_WAIT,
                severity="warning",
                title=(
                    f"{n} long wait(s) inside or before a collective: communication, not the host ({total:,.0f} us)"
                ),
                card=card,
                op_types=tuple(g["op_type"] for g in types.get(card, ())[:10]),
                op_names=tuple(got["_names"]),
                count=n,
                time_us=total,
                share_pct=share(total, c.wait_us(card)),
                advice=advice(COMMUNICATION_WAIT, c.framework, c.kind),
                evidence=evidence.get((card,), ()),
                threshold=(
                    f"Task Wait Time >= {th.long_wait_us:g} us, before a collective or gap covered >= half by one"
                ),
            )
        )
    return out
