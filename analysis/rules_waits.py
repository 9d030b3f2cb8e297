"""The operator rules over long waits (their causes: analysis/waits.py): recompilation, a wait
for the host, a wait for communication."""

from __future__ import annotations

import polars as pl

from npuscope.parsers.columns import UNKNOWN

from .advice import advice
from .card_data import CardData, names_of, per_type, share
from .evidence import task_rows
from .findings import Finding
from .rule_names import COMMUNICATION_WAIT, HOST_OP_WAIT, RECOMPILATION
from .thresholds import Thresholds


def _wait_findings(d: CardData, th: Thresholds, cause: str, rule: str, title: str) -> list[Finding]:
    """One finding of `rule` per op type of the tasks whose wait has `cause`."""
    rows_all = d.rows(pl.col("wait_cause") == cause)
    if rule == RECOMPILATION and d.custom_types:
        # An application's own kernel is built ahead of time, never online: without a
        # timeline, "first call of an aclop shape" says nothing about it, so only a compile
        # API seen over the gap (another operator compiled meanwhile) is kept.
        rows_all = rows_all.filter(
            ~(pl.col("op_type").is_in(list(d.custom_types)) & (pl.col("wait_confidence") == "suspected"))
        )
    out = []
    for op_type, n, total in per_type(rows_all, "wait_us"):
        rows = rows_all.filter(pl.col("op_type") == op_type)
        suspected = (rows["wait_confidence"] == "suspected").any()
        extra = ""
        if rule == RECOMPILATION and d.compile_events:
            extra = f"; {d.compile_events} aclopCompileAndExecute calls on the host"
        shown = op_type if op_type != UNKNOWN and not op_type.isdigit() else ", ".join(names_of(rows, op_type, 2))
        text = title.format(n=n, op_type=shown, total=total)
        if rule == RECOMPILATION and op_type in d.custom_types:
            text = f"{n} long wait(s) before {shown} while the host compiled another operator ({total:,.0f} us)"
        out.append(
            Finding(
                rule=rule,
                severity="warning",
                title=text + extra,
                card=d.card,
                op_types=(op_type,),
                op_names=names_of(rows, op_type),
                count=n,
                time_us=total,
                share_pct=share(total, d.wait_us),
                advice=advice(rule, d.framework, d.kind),
                confidence="suspected" if suspected else "evidence",
                evidence=task_rows(rows, "wait_us", th.evidence_rows),
                threshold=f"Task Wait Time >= {th.long_wait_us:g} us",
            )
        )
    return out


def recompilation(d: CardData, th: Thresholds) -> list[Finding]:
    out = _wait_findings(
        d,
        th,
        "recompilation",
        RECOMPILATION,
        "{n} long wait(s) before {op_type} from recompilation ({total:,.0f} us)",
    )
    if not out and d.compile_events >= th.compile_events:
        out.append(
            Finding(
                rule=RECOMPILATION,
                severity="warning",
                title=f"{d.compile_events} aclopCompileAndExecute calls on the host",
                card=d.card,
                op_types=(),
                op_names=(),
                count=d.compile_events,
                time_us=0.0,
                share_pct=0.0,
                advice=advice(RECOMPILATION, d.framework, d.kind),
                threshold=f">= {th.compile_events} aclopCompileAndExecute events",
            )
        )
    return out


def host_op_wait(d: CardData, th: Thresholds) -> list[Finding]:
    return _wait_findings(
        d,
        th,
        "host_op",
        HOST_OP_WAIT,
        "{n} long wait(s) before {op_type} while the host ran something else ({total:,.0f} us)",
    )


def communication_wait(d: CardData, th: Thresholds) -> list[Finding]:
    """Long waits inside a collective of the card or before one: communication, never the host's."""
    rows = d.rows(pl.col("wait_cause") == "communication")
    if rows.height == 0:
        return []
    total = float(rows["wait_us"].sum() or 0.0)
    types = [t for t, _, _ in per_type(rows, "wait_us")]
    return [
        Finding(
            rule=COMMUNICATION_WAIT,
            severity="warning",
            title=(
                f"{rows.height} long wait(s) inside or before a collective: communication, not the "
                f"host ({total:,.0f} us)"
            ),
            card=d.card,
            op_types=tuple(types[:10]),
            op_names=tuple(rows["op_name"].unique(maintain_order=True).head(5).to_list()),
            count=rows.height,
            time_us=total,
            share_pct=share(total, d.wait_us),
            advice=advice(COMMUNICATION_WAIT, d.framework, d.kind),
            evidence=task_rows(rows, "wait_us", th.evidence_rows),
            threshold=(f"Task Wait Time >= {th.long_wait_us:g} us, before a collective or gap covered >= half by one"),
        )
    ]
