"""What the explorer shows for a finding: a filter of its tasks and a sort, worst first.

`drill_down` writes the filter in the explorer's query language (analysis/query.py) so that,
applied to the tasks of the finding's card, it selects exactly the tasks the finding counts,
with the rule's own predicate and the thresholds it ran with (a `--rules` file included):

| rule | filter | the selected tasks are |
|---|---|---|
| dominant_op_type | `type:T core:C` | its count; their durations sum to its time (op_statistic's Count and Total) |
| long_task | `type:T kind:compute dur>long_task_us` | its count and time |
| duration_outlier | `type:T core:C dur>=Nxavg` (N = outlier_max_over_avg) | its count; its time is their excess over the average |
| ai_cpu | `type:T core:AI_CPU dur>ai_cpu_us` | its count and time |
| low_parallelism | `core:K block>0 block<B` for each core task type K, B from the card's cores | its count and time |
| recompilation | `type:T cause:recompilation` (a type named like an own kernel: `... -kind:custom \\| ... -confidence:suspected`) | its count; their waits sum to its time |
| host_op_wait | `type:T cause:host_op` | its count; their waits sum to its time |
| communication_wait | `cause:communication` | its count; their waits sum to its time |
| aclop_share | `aclop` | its count and time |
| dynamic_shape | `state:dynamic` | its count (tasks with an OP State, all dynamic) |
| fusible_sequence | `fused:F` (F the fused operator) | the tasks of its occurrences (its count is occurrences); their durations sum to its time |
| idle_device | `` (every task), by wait | its count (every task); its time is the idle span, not a sum of tasks |

Findings that count something other than tasks get no filter (""): `data_gaps` (missing
data), `host_dispatch` (the framework's host operators: its evidence rows are code frames),
`recompilation` without op types (aclopCompileAndExecute events on the host), a
`fusible_sequence` of host operators (no device pattern named in its threshold). A
training-level finding (`Finding.view` set) drills into its own tab, whose pane sorts and
highlights its evidence rows: its filter is "" and its sort the op summary's default, as the
op tabs are left unfiltered.

The filters read the columns of TASK_COLUMNS: the explorer's task table must hold them.

No Textual, no Rich.
"""

from __future__ import annotations

import re

from .findings import Finding
from .fusion_patterns import PATTERNS
from .rule_names import (
    ACLOP_SHARE,
    AI_CPU,
    COMMUNICATION_WAIT,
    DATA_GAPS,
    DOMINANT_OP_TYPE,
    DURATION_OUTLIER,
    DYNAMIC_SHAPE,
    FUSIBLE_SEQUENCE,
    HOST_DISPATCH,
    HOST_OP_WAIT,
    IDLE_DEVICE,
    LONG_TASK,
    LOW_PARALLELISM,
    RECOMPILATION,
)
from .rules import CUSTOM_KERNEL_TYPES
from .thresholds import Thresholds

DURATION = ("duration_us", True)
WAIT = ("wait_us", True)
ROW_ORDER = ("row", False)
"""The op summary's default order: a drill-down that filters nothing keeps it."""

TASK_COLUMNS = (
    "card", "op_name", "op_type", "task_type", "start_ns", "duration_us", "wait_us", "wait_cause",
    "wait_confidence", "is_aclnn", "op_state", "block_num",
)  # fmt: skip
"""The task columns the drill-down filters read (query terms type:, core:, cause:,
confidence:, kind:, aclop, state:, block, fused:, dur, wait)."""

TASK_RULES = (
    IDLE_DEVICE, DOMINANT_OP_TYPE, LONG_TASK, DURATION_OUTLIER, AI_CPU, LOW_PARALLELISM,
    RECOMPILATION, HOST_OP_WAIT, COMMUNICATION_WAIT, ACLOP_SHARE, DYNAMIC_SHAPE, FUSIBLE_SEQUENCE,
)  # fmt: skip
"""Rules whose findings count tasks: their filter selects those tasks."""
NO_TASK_RULES = (DATA_GAPS, HOST_DISPATCH)
"""Rules whose findings count something else (missing data, host operators): no filter."""

MATRIX_CORE_TYPES = ("AI_CORE", "MIX_AIC")
VECTOR_CORE_TYPES = ("AI_VECTOR_CORE", "MIX_AIV")
_CORES_RE = re.compile(r"(\d+) AI cores(?:, (\d+) vector cores)?")


def number(value: float) -> str:
    """A threshold as the query language reads it back to the same float (`1000`, `12.5`)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def value(text: str) -> str:
    """A term's value, quoted when it would otherwise split or negate (spaces, a leading -)."""
    if text and not any(c.isspace() for c in text) and not text.startswith("-") and text != "|":
        return text
    return f'"{text}"'


def drill_down(finding: Finding, thresholds: Thresholds) -> tuple[str, tuple[str, bool]]:
    """The filter (query language) that selects on the finding's card exactly the tasks the
    finding counts, and the sort (column, descending) that puts the worst first; see the
    module docstring for each rule. A training-level finding (`finding.view` set) returns
    ("", ("row", False)): its drill-down is its view's tab, not the tasks."""
    if finding.view:
        return "", ROW_ORDER
    rule, th = finding.rule, thresholds
    of_type = f"type:{value(finding.op_types[0])}" if finding.op_types else ""
    if rule == DOMINANT_OP_TYPE and finding.op_types:
        core = _core_type(finding)
        return _join(of_type, f"core:{value(core)}" if core else ""), DURATION
    if rule == LONG_TASK:
        return _join(of_type, "kind:compute", f"dur>{number(th.long_task_us)}"), DURATION
    if rule == DURATION_OUTLIER:
        core = _core_type(finding)
        return _join(
            of_type, f"core:{value(core)}" if core else "", f"dur>={number(th.outlier_max_over_avg)}xavg"
        ), DURATION
    if rule == AI_CPU:
        return _join(of_type, "core:AI_CPU", f"dur>{number(th.ai_cpu_us)}"), DURATION
    if rule == LOW_PARALLELISM:
        return _low_parallelism(finding, th), DURATION
    if rule == RECOMPILATION:
        if not finding.op_types:  # host API events, no task
            return "", WAIT
        plain = _join(of_type, "cause:recompilation")
        if re.search(CUSTOM_KERNEL_TYPES, finding.op_types[0]) is None:  # never an own kernel
            return plain, WAIT
        # an own kernel's wait counts only when a compile API was seen over the gap
        return f"{plain} -kind:custom | {plain} -confidence:suspected", WAIT
    if rule == HOST_OP_WAIT:
        return _join(of_type, "cause:host_op"), WAIT
    if rule == COMMUNICATION_WAIT:
        return "cause:communication", WAIT
    if rule == ACLOP_SHARE:
        return "aclop", DURATION
    if rule == DYNAMIC_SHAPE:
        return "state:dynamic", ROW_ORDER
    if rule == FUSIBLE_SEQUENCE:
        fused = _fused_op(finding)
        return (f"fused:{fused}" if fused else ""), ROW_ORDER
    if rule == IDLE_DEVICE:
        return "", WAIT
    if rule in NO_TASK_RULES:
        return "", ROW_ORDER
    return of_type, DURATION  # a rule this module does not know yet: its op type


def _join(*terms: str) -> str:
    return " ".join(t for t in terms if t)


def _core_type(finding: Finding) -> str | None:
    """The core type of a dominant_op_type / duration_outlier finding: its title says it
    (`T (C) takes ...`) or its evidence rows carry it."""
    m = re.match(r".* \(([A-Z_]+)\) takes ", finding.title)
    if m:
        return m.group(1)
    types = {e.get("task_type") for e in finding.evidence if e.get("op_type") == finding.op_types[0]}
    return types.pop() if len(types) == 1 else None


def _low_parallelism(finding: Finding, th: Thresholds) -> str:
    """Core tasks whose Block Dim is under low_block_pct of the cores of their kind; the core
    counts are the ones the finding's threshold names (DeviceInfo.describe)."""
    m = _CORES_RE.search(finding.threshold)
    if m is None:
        return ""
    aic = int(m.group(1))
    aiv = int(m.group(2)) if m.group(2) else aic
    alternatives = []
    for kinds, cores in ((MATRIX_CORE_TYPES, aic), (VECTOR_CORE_TYPES, aiv)):
        below = number(cores * th.low_block_pct / 100.0)
        alternatives += [f"core:{k} block>0 block<{below}" for k in kinds]
    return " | ".join(alternatives)


def _fused_op(finding: Finding) -> str | None:
    """The fused operator of a fusible_sequence finding, from the pattern its threshold names."""
    aten = finding.threshold.partition(" occurrence(s) of ")[2]
    for p in PATTERNS:
        if p.aten == aten:
            return p.fused_op
    return next((p.fused_op for p in PATTERNS if f" {p.fused_op} does " in finding.title), None)
