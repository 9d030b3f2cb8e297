"""What the diagnosis engine hands to the report and the explorer: immutable findings."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, cast, get_args

from .actions import Action, actions_in
from .evidence import EVIDENCE_FIELDS as EVIDENCE_FIELDS  # the task fields of an evidence row
from .evidence import EvidenceRow
from .rule_names import IDLE_DEVICE

Severity = Literal["critical", "warning", "info"]
Confidence = Literal["evidence", "suspected"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
CONFIDENCES: tuple[Confidence, ...] = get_args(Confidence)
SEVERITY_MARK: dict[Severity, str] = {"critical": "CRIT", "warning": "WARN", "info": "INFO"}
"""How reports, the comparison and the explorer's cards write a severity in four letters."""

Evidence = EvidenceRow
"""An evidence row: a task's fields or a training view's row (analysis/evidence.py)."""

VIEWS = ("", "steps", "communication", "links", "host_api", "memory")
"""Where a finding drills down to: "" the tasks, else the training view of that name."""


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    title: str
    card: str
    op_types: tuple[str, ...]
    op_names: tuple[str, ...]
    count: int
    time_us: float
    share_pct: float
    advice: str
    confidence: Confidence = "evidence"
    evidence: tuple[Evidence, ...] = field(default=())
    threshold: str = ""
    view: str = ""
    """The explorer tab of the drill-down (one of VIEWS); "" for an operator-level finding,
    whose evidence rows are tasks. Otherwise the evidence rows are rows of that view (its
    columns: analysis/evidence.py)."""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r}")
        if self.confidence not in CONFIDENCES:
            raise ValueError(f"confidence {self.confidence!r}")
        if self.view not in VIEWS:
            raise ValueError(f"view {self.view!r}")

    @property
    def actions(self) -> tuple[Action, ...]:
        """The switches its advice names (analysis/actions.py): what an experiment can try."""
        return actions_in(self.advice)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        """The inverse of `to_dict` (cached findings are stored as JSON)."""
        data = {k: v for k, v in data.items() if k != "actions"}  # derived from the advice
        return cls(
            **{
                **data,
                "op_types": tuple(data["op_types"]),
                "op_names": tuple(data["op_names"]),
                "evidence": tuple(cast(EvidenceRow, e) for e in data["evidence"]),
            }
        )

    def to_dict(self) -> dict[str, Any]:
        # Shallow: every field but the three below is a scalar (asdict's deep copy costs more
        # than the rest of a report's card section).
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["op_types"] = list(self.op_types)
        d["op_names"] = list(self.op_names)
        d["evidence"] = [dict(e) for e in self.evidence]
        d["actions"] = [a.to_dict() for a in self.actions]
        return d


FIRST_RULES = (IDLE_DEVICE,)
"""Rules that lead whatever their time at stake: an idle device makes every other finding moot."""


def order(findings: list[Finding]) -> list[Finding]:
    """Rules of FIRST_RULES first, then by time at stake, then severity, then rule, for a
    stable display."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(
        findings,
        key=lambda f: (f.rule not in FIRST_RULES, -f.time_us, rank[f.severity], f.rule, f.op_types),
    )
