"""Rule thresholds: defaults from the domain notes, overridable from a TOML file.

```toml
[thresholds]
dominant_ratio_pct = 40.0
long_task_us = 1000.0
```
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from npuscope.parsers import ProfileError
from npuscope.parsers.rules_file import RULES_FILE_BYTES as RULES_FILE_BYTES
from npuscope.parsers.rules_file import read_rules_file


@dataclass(frozen=True)
class Thresholds:
    dominant_ratio_pct: float = 40.0
    """op_statistic Ratio(%) at or above which a type dominates its card."""
    long_task_us: float = 1000.0
    """Task Duration above which a task deserves a look."""
    outlier_min_calls: int = 5
    """Calls an op type needs before Max/Avg is meaningful."""
    outlier_max_over_avg: float = 10.0
    """Max >= this x Avg flags a duration outlier."""
    ai_cpu_us: float = 20.0
    """AI_CPU tasks longer than this are flagged (MindStudio Insight and msprof-analyze)."""
    long_wait_us: float = 500.0
    """Task Wait Time at or above which a wait gets a cause."""
    compile_cover: float = 0.5
    """Share of a device gap a compile API must cover to call it recompilation."""
    compile_events: int = 20
    """aclopCompileAndExecute host events at which recompilation is a problem."""
    idle_busy_pct: float = 30.0
    """Busy share (%) of a card's span below which its device is idle (host-bound job)."""
    comm_not_overlapped_pct: float = 15.0
    """Communication not hidden behind compute, % of the card's step time, at or above which it is flagged."""
    free_pct: float = 15.0
    """Device free within steps and not explained by a wait the operator rules blame (recompilation, host_op), % of step time."""
    sync_pct: float = 10.0
    """Host synchronisation APIs (aclrtSynchronize*, synchronous aclrtMemcpy), % of the card's span (sum of step time)."""
    slow_rank_pct: float = 5.0
    """(max - min) over cards of the mean per-step compute, communication not overlapped or free, % of the mean step time (msprof-analyze SlowRankAnalyzer RATIO_THRESHOLD 0.05)."""
    stage_imbalance_pct: float = 20.0
    """The heaviest pipeline stage's mean compute per step above the lightest stage's by more than this % is a stage imbalance (layers to move between stages)."""
    pipeline_bubble_pct: float = 20.0
    """A pipeline stage's wait in receives (step_trace Bubble, else P2P receive tasks) that no heavier stage explains, % of its step, above which it is a bubble."""
    expert_imbalance_pct: float = 20.0
    """An expert rank's MoE compute per step (GroupedMatmul, Moe* ops) above the median of its expert group's other ranks by more than this % is an expert imbalance."""
    slow_link_pct: float = 50.0
    """A link whose bandwidth is below this % of the median of the links of its transport is slow (links of at least small_packet_mb)."""
    small_packet_mb: float = 1.0
    """Mean data a collective call moves over RDMA (or, where the size is not split by transport, in all) below which it is small (msprof-analyze packet.yaml min_rdma_size 1 MB)."""
    small_sdma_mb: float = 16.0
    """Mean data a collective call moves over SDMA (on the node: HCCS, PCIE, SIO) below which it is small (msprof-analyze packet.yaml min_sdma_size 16 MB)."""
    small_calls_pct: float = 20.0
    """Share (%) of a transport's calls (those that moved data on it) that must be small, more than this, for small_packets (msprof-analyze packet.yaml min_sdma_ratio / min_rdma_ratio 0.2)."""
    small_packet_pct: float = 20.0
    """Share (%) of the card's communication time the small calls must also take, at or above which they are flagged (the time at stake; msprof-analyze counts calls only)."""
    memory_peak_pct: float = 90.0
    """Peak reserved memory, % of the device's capacity, at or above which it is flagged (needs the capacity)."""
    fusible_min_count: int = 1
    """Occurrences of a sequence one fused CANN operator does (fusion_patterns.py) at which it is listed, per card (msprof-analyze TimelineFusionOpsAnalyzer lists every match)."""
    host_dispatch_pct: float = 10.0
    """Host time of the framework's operators (Host Self Duration of operator_details.csv; synchronising ops left to sync_heavy), % of the card's span, at or above which the code that called them is named (as sync_pct)."""
    bound_min_pct: float = 20.0
    """Busiest PMU pipe of an op type (duration-weighted *_ratio), % of its cycles, below which no pipe bounds it: "mixed" (msprof-analyze OperatorBoundChecker: "no bound")."""
    low_block_pct: float = 50.0
    """Block Dim below this % of the card's cores of the task's kind (cube cores for AI_CORE / MIX_AIC, vector cores for AI_VECTOR_CORE / MIX_AIV) is low parallelism."""
    low_parallel_pct: float = 10.0
    """Share (%) of the card's compute in low-parallelism tasks at or above which they are flagged (needs the core counts)."""
    evidence_rows: int = 5
    """Worst rows kept as evidence per finding."""

    @classmethod
    def from_file(cls, path: str | Path | None) -> Thresholds:
        """The thresholds of a `--rules FILE` option: the defaults when it is not given."""
        return cls.load(path) if path else cls()

    @classmethod
    def load(cls, path: str | Path) -> Thresholds:
        """The thresholds of a rules file: a regular TOML file of at most RULES_FILE_BYTES whose
        `[thresholds]` table (or top level) sets known keys to finite numbers in range
        (`bounds`); anything else is one ProfileError naming the file and the key."""
        path = Path(path)
        data = read_rules_file(path)
        table = data.get("thresholds", data)
        if not isinstance(table, dict):
            raise ProfileError(f"{path}: thresholds must be a table of name = number, got {_shown(table)}")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(table) - set(known))
        if unknown:
            raise ProfileError(f"{path}: unknown threshold(s) {', '.join(unknown)}; known: {', '.join(known)}")
        values: dict[str, Any] = {}
        for name, value in table.items():
            whole = known[name].type in (int, "int")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ProfileError(f"{path}: {name} must be a number, got {_shown(value)}")
            low, high = bounds(name)
            if not math.isfinite(value) or not low <= value <= high:
                raise ProfileError(f"{path}: {name} = {_shown(value)} is out of range; use {low:g} to {high:g}")
            if whole and value != int(value):
                raise ProfileError(f"{path}: {name} must be a whole number, got {_shown(value)}")
            values[name] = int(value) if whole else float(value)
        return replace(cls(), **values)


def bounds(name: str) -> tuple[float, float]:
    """The values a threshold may take: shares from 0 (above 100 a share rule never fires, a
    way to turn it off), times and sizes non-negative and below absurd (1e12 us is 11 days,
    1e9 MB an exabyte), counts from 1."""
    if name == "compile_cover":
        return 0.0, 1.0
    if name == "outlier_max_over_avg":
        return 1.0, 1e9
    if name == "evidence_rows":
        return 1.0, 1000.0
    if name.endswith("_pct"):
        return 0.0, 10_000.0
    if name.endswith("_us"):
        return 0.0, 1e12
    if name.endswith("_mb"):
        return 0.0, 1e9
    return 1.0, 1e9  # counts: calls, events, occurrences


def _shown(value: object) -> str:
    """A value of a rules file, short enough for a one-line error."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def documented_defaults() -> list[tuple[str, object, str]]:
    """(name, default, meaning) for the README and `report --help`."""
    import ast
    import inspect

    src = inspect.getsource(Thresholds)
    tree = ast.parse(src)
    docs: dict[str, str] = {}
    cls = tree.body[0]
    assert isinstance(cls, ast.ClassDef)
    body = cls.body
    for i, node in enumerate(body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and i + 1 < len(body):
            nxt = body[i + 1]
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                docs[node.target.id] = str(nxt.value.value)
    return [(f.name, f.default, docs.get(f.name, "")) for f in fields(Thresholds)]
