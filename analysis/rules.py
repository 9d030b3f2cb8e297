"""The operator rules by name: the registry `diagnose` runs on every card, and which rules run
on which device.

A rule is a function of every diagnosed card's frames (`Cards`, analysis/card_groups.py) and
the thresholds (analysis/thresholds.py) returning, card after card in the order of
`Cards.cards`, findings whose `rule` is its name; it groups by card rather than looping over
cards, so its cost follows the rows, not the cards. To add one:
its name in analysis/rule_names.py, the function in the module of its kind (rules_ops.py: op
types; rules_waits.py: long waits; rules_capture.py: the capture as a whole), its entry in
OPERATOR_RULES (and NPU_ONLY_RULES / HOST_SKIPPED_RULES if it does not run everywhere), its
advice in analysis/advice.py, its thresholds in thresholds.py and its drill-down in
drilldown.py. The training-level rules have their registry in training_rules.py.
"""

from __future__ import annotations

from collections.abc import Callable

from .card_groups import Cards
from .findings import Finding
from .framework import Framework, framework_of
from .rule_names import (
    ACLOP_SHARE,
    AI_CPU,
    COMMUNICATION_WAIT,
    DATA_GAPS,
    DOMINANT_OP_TYPE,
    DURATION_OUTLIER,
    DYNAMIC_SHAPE,
    HOST_OP_WAIT,
    IDLE_DEVICE,
    LONG_TASK,
    LOW_PARALLELISM,
    RECOMPILATION,
)
from .rules_capture import data_gaps, dynamic_shape, idle_device
from .rules_ops import aclop_share, ai_cpu, dominant_op_type, duration_outlier, long_task, low_parallelism
from .rules_waits import communication_wait, host_op_wait, recompilation
from .task_kinds import CORE_TASKS, CUSTOM_KERNEL_TYPES, aclnn_tasks, aclop_tasks, custom_kernel
from .thresholds import Thresholds

__all__ = [  # besides the registry, what other modules take from here
    "CORE_TASKS",
    "CUSTOM_KERNEL_TYPES",
    "HOST_SKIPPED_RULES",
    "NPU_ONLY_RULES",
    "OPERATOR_RULES",
    "RULES",
    "Cards",
    "Framework",
    "Rule",
    "aclnn_tasks",
    "aclop_tasks",
    "custom_kernel",
    "framework_of",
    "rules_for",
]

Rule = Callable[[Cards, Thresholds], list[Finding]]

OPERATOR_RULES: dict[str, Rule] = {
    IDLE_DEVICE: idle_device,
    DOMINANT_OP_TYPE: dominant_op_type,
    LONG_TASK: long_task,
    DURATION_OUTLIER: duration_outlier,
    AI_CPU: ai_cpu,
    LOW_PARALLELISM: low_parallelism,
    RECOMPILATION: recompilation,
    HOST_OP_WAIT: host_op_wait,
    COMMUNICATION_WAIT: communication_wait,
    ACLOP_SHARE: aclop_share,
    DYNAMIC_SHAPE: dynamic_shape,
    DATA_GAPS: data_gaps,
}
"""Every operator rule by the name its findings carry, in the order they run."""

RULES: tuple[Rule, ...] = tuple(OPERATOR_RULES.values())
"""The functions of OPERATOR_RULES, in the order they run."""

NPU_ONLY_RULES = (AI_CPU, LOW_PARALLELISM, RECOMPILATION, ACLOP_SHARE, DYNAMIC_SHAPE)
"""Rules about what only an Ascend NPU has: AI_CPU tasks, Block Dim over AI cores, online
compilation of aclop operators, aclop vs aclnn, OP State."""
HOST_SKIPPED_RULES = (HOST_OP_WAIT,)
"""Rules that make no sense when every task runs on the host."""


def rules_for(kind: str) -> tuple[Rule, ...]:
    """The rules of OPERATOR_RULES that apply to a capture of device `kind`."""
    if kind == "NPU":
        return RULES
    skipped = NPU_ONLY_RULES + (HOST_SKIPPED_RULES if kind == "CPU" else ())
    return tuple(rule for name, rule in OPERATOR_RULES.items() if name not in skipped)
