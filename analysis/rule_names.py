"""The name of every rule: what a finding writes in `Finding.rule`, what the registries
(`rules.OPERATOR_RULES`, `training_rules.PER_CARD` and `ACROSS_CARDS`) and the advice table
(`advice.ADVICE`) are keyed by, and what the rest of the code selects rules by."""

from __future__ import annotations

# The operator rules (analysis/rules.py): one card's tasks and op statistic.
IDLE_DEVICE = "idle_device"
DOMINANT_OP_TYPE = "dominant_op_type"
LONG_TASK = "long_task"
DURATION_OUTLIER = "duration_outlier"
AI_CPU = "ai_cpu"
LOW_PARALLELISM = "low_parallelism"
RECOMPILATION = "recompilation"
HOST_OP_WAIT = "host_op_wait"
COMMUNICATION_WAIT = "communication_wait"
ACLOP_SHARE = "aclop_share"
DYNAMIC_SHAPE = "dynamic_shape"
DATA_GAPS = "data_gaps"

# The training rules (analysis/training_rules.py): the steps, communication, links, host API
# and memory views.
COMM_NOT_OVERLAPPED = "comm_not_overlapped"
FREE_TIME = "free_time"
SYNC_HEAVY = "sync_heavy"
SLOW_RANK = "slow_rank"
SLOW_LINK = "slow_link"
SMALL_PACKETS = "small_packets"
MEMORY_PEAK = "memory_peak"

# The cluster's rules of the parallel layout (analysis/parallel_rules.py).
STAGE_IMBALANCE = "stage_imbalance"
PIPELINE_BUBBLE = "pipeline_bubble"
EXPERT_IMBALANCE = "expert_imbalance"

# Findings made beside the rules: op sequences one fused operator does (analysis/fusion.py)
# and the user's code behind the framework's host time (analysis/stacks.py).
FUSIBLE_SEQUENCE = "fusible_sequence"
HOST_DISPATCH = "host_dispatch"
