"""The diagnosis rules: each turns one card's frames into findings with a few polars
expressions (no Python loop over rows), so a 2M-row profile is diagnosed in well under the
time it takes to load."""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, get_args

import polars as pl

from npuscope.parsers import Profile
from npuscope.parsers.columns import COMMUNICATION_TASK_TYPES, UNKNOWN
from npuscope.parsers.device_info import DeviceInfo, profile_device_info
from npuscope.parsers.frames import is_communication

from .bound import BOUND_WORDS, MIXED, UNKNOWN_BOUND, op_type_bounds
from .device_kind import DeviceKind
from .findings import EVIDENCE_FIELDS, Finding
from .thresholds import Thresholds

MATRIX_TYPES = r"^(MatMul|BatchMatMul|Conv|FlashAttention)"
MATRIX_CORES = ("AI_CORE", "MIX_AIC")
HOST_MATRIX_TYPES = r"(?i)matmul|conv|gemm|bmm|linear|attention|attn"
"""Matrix op types by name where the capture has no AI core types (a GPU or CPU trace)."""
CORE_TASKS = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV")
"""Task types that run on the AI cores: the ones with a Block Dim and PMU ratios."""
# An Ascend C kernel the application launches itself (`kernel<<<blockDim, ...>>>`,
# aclrtLaunchKernel) is named after its C function (`matmul_custom`), and a custom operator
# built with msOpGen ends in `Custom` (`AddCustom`); every CANN operator type is a CamelCase
# name without underscores (`MatMulV3`, `FlashAttentionScore`).
CUSTOM_KERNEL_TYPES = r"^[a-z]|_|Custom$"

ADVICE = {
    "dominant_warning": (
        "A non-matrix op type dominating compute often means repeated recompilation: try "
        "turning off online compilation (Paddle: FLAGS_npu_jit_compile=false; torch_npu: "
        "torch_npu.npu.set_compile_mode(jit_compile=False)) and compare, and check why the "
        "model calls it so often."
    ),
    "dominant_aclnn": (
        "A non-matrix op type dominating compute: its calls are aclnn operators, which do not "
        "compile online, so no compile switch changes it. Check why the model calls it so "
        "often (a loop over small tensors, an op per sample) and whether a fused operator does "
        "the same work; its shapes and dtypes are in the op report (`report --op`)."
    ),
    "dominant_info": (
        "Matrix compute dominating is expected in matrix-heavy models; look at its shapes and "
        "dtypes only if the share grows between runs."
    ),
    "long_task": (
        "Check how the model calls this op and the adaptation layer; if the call is right, "
        "report it to the operator team with its shape and dtype (op report: `report --op`)."
    ),
    "duration_outlier": (
        "A few calls are far slower than the rest: compare their shapes and dtypes with the "
        "typical call; a new shape or format (TransData around it) is the usual reason."
    ),
    "ai_cpu": (
        "AI_CPU runs on the NPU's general-purpose cores and is slow: usually a dtype AI_CORE "
        "does not support (float64 / int64 inputs: cast to float32 / int32) or an op with no "
        "AI_CORE kernel: replace it or move it out of the step."
    ),
    "recompilation": (
        "Turn off online compilation, move to aclnn operators, pad or bucket dynamic shapes; "
        "Paddle: FLAGS_npu_jit_compile=false, torch_npu: "
        "torch_npu.npu.set_compile_mode(jit_compile=False)."
    ),
    "host_op_wait": (
        "The device waited for the host: find the op just before it in the calling code "
        "(Paddle logs CPU fallbacks with GLOG_v=6; torch_npu's profiler shows the Python call "
        "with with_stack=True), move it to the device or out of the step, and avoid host "
        "synchronisation (.numpy(), .item(), .cpu(), print of tensors) in the step."
    ),
    "idle_device": (
        "The device is idle most of the span: the job is host-bound, and no operator change "
        "will speed it up. Look at what the host does between launches: dispatch (many small "
        "ops: fuse them, larger batches, graph mode), data loading (more loader workers, "
        "prefetch, pinned memory) and synchronisation (.item(), .numpy(), prints of tensors, "
        "explicit synchronize calls in the step). Capture a longer, stable part of the run "
        "if this span holds only start-up."
    ),
    "communication_wait": (
        "The device sat in a collective or waited to start one, not for the host: another "
        "rank is late or communication is not overlapped with compute. Find the late rank "
        "(`report --card all` on a multi-card capture, `report` on the folder of the ranks) "
        "and overlap communication with compute (gradient bucketing, asynchronous collectives)."
    ),
    "aclop_share": (
        "aclop operators are compiled on first use and recompile when attributes change; "
        "aclnn operators are usually faster: migrate the busiest aclop types first."
    ),
    "dynamic_shape": (
        "Every op runs with OP State dynamic: fixed input shapes (padding, bucketing) let ops "
        "run static and avoid recompilation."
    ),
    "data_gaps": "Capture again with the missing data to confirm what is only suspected here.",
    "custom_kernel": (
        "This is the application's own kernel (Ascend C, launched directly), not a CANN "
        "operator: no framework or online-compilation switch changes it, the kernel itself "
        "does. Use its bound type: memory-bound kernels need larger tiles, double buffering "
        "(queue depth 2, so MTE2 copies overlap compute) and contiguous 32-byte-aligned "
        "copies; a Block Dim below the core count leaves cores idle (launch "
        "kernel<<<blockDim, ...>>> with one block per core and split the tiling over them). "
        "`msprof op` on the kernel alone gives per-pipe detail."
    ),
    "low_parallelism": (
        "These kernels run on few of the card's cores while the rest idle: for a custom "
        "kernel, launch it with a Block Dim of (a multiple of) the core count and split the "
        "tiling over the blocks; for CANN operators, small shapes give few blocks: batch or "
        "fuse the small calls (larger batch, fewer larger ops)."
    ),
}


Framework = Literal["paddle", "torch_npu", "mindspore", "acl", "unknown"]
FRAMEWORKS: tuple[Framework, ...] = get_args(Framework)

FRAMEWORK_ADVICE: dict[str, dict[str, str]] = {
    "paddle": {
        "dominant_warning": (
            "A non-matrix op type dominating compute often means repeated recompilation: try "
            "FLAGS_npu_jit_compile=false and compare, and check why the model calls it so often."
        ),
        "recompilation": (
            "Set FLAGS_npu_jit_compile=false, move to aclnn operators, and avoid dynamic shapes "
            "(pad or bucket inputs to a few fixed shapes)."
        ),
        "host_op_wait": (
            "The device waited for the host: find the op just before it in the calling code "
            "(Paddle logs CPU fallbacks with GLOG_v=6), move it to the device or out of the step, "
            "and avoid host synchronisation (.numpy(), .item(), print of tensors) in the step."
        ),
    },
    "torch_npu": {
        "dominant_warning": (
            "A non-matrix op type dominating compute often means repeated recompilation: try "
            "torch_npu.npu.set_compile_mode(jit_compile=False) and compare, and check why the "
            "model calls it so often."
        ),
        "recompilation": (
            "Call torch_npu.npu.set_compile_mode(jit_compile=False) before the model runs, move "
            "to aclnn operators, and avoid dynamic shapes (pad or bucket inputs to a few fixed "
            "shapes)."
        ),
        "host_op_wait": (
            "The device waited for the host: find the op just before it in the calling code "
            "(the torch_npu profiler shows the Python call with with_stack=True; ops without an "
            "NPU kernel fall back to the CPU), move it to the device or out of the step, and "
            "avoid host synchronisation (.item(), .cpu(), .numpy(), print of tensors) in the step."
        ),
    },
    "mindspore": {
        "dominant_warning": (
            "A non-matrix op type dominating compute often means repeated recompilation: keep "
            "input shapes fixed (or declare the dynamic ones with Cell.set_inputs) and check why "
            "the network calls it so often."
        ),
        "recompilation": (
            "MindSpore recompiles when shapes or attributes change: keep input shapes fixed "
            "(pad or bucket inputs), declare truly dynamic inputs with Cell.set_inputs, and "
            "prefer aclnn operators."
        ),
        "host_op_wait": (
            "The device waited for the host: find the op just before it in the network, move "
            "it to the device or out of the step, and avoid host synchronisation (.asnumpy(), "
            "print of tensors) in the step."
        ),
    },
    "acl": {
        "dominant_warning": (
            "A non-matrix op type dominating compute often means repeated recompilation: "
            "compile it once (aclopSetCompileFlag(ACL_OP_COMPILE_FUZZ) for changing shapes, or "
            "single-op models built offline with ATC) and check why the application calls it "
            "so often."
        ),
        "recompilation": (
            "aclop operators compile on first use and on every new shape or attribute: build "
            "single-op models offline with ATC, set aclopSetCompileFlag(ACL_OP_COMPILE_FUZZ) "
            "for changing shapes, or call the aclnn operators."
        ),
        "host_op_wait": (
            "The device waited for the host: look at the host code between the two launches "
            "(host computation, aclrtSynchronizeStream / aclrtMemcpy in the loop) and move it "
            "out of the loop or onto another stream."
        ),
    },
}
"""Advice that depends on the capture's framework; rules absent here use ADVICE. `unknown`
(an msprof export that does not say which framework ran) keeps ADVICE, which names the switches
of Paddle and torch_npu both."""


_GENERIC_ADVICE = {
    "dominant_warning": (
        "A non-matrix op type dominating compute: check why the model calls it so often (a "
        "Python loop over small tensors, an op per sample) and whether a fused or vectorised op "
        "does the same work."
    ),
    "dominant_info": ADVICE["dominant_info"],
    "long_task": (
        "Check how the model calls this op: its shapes and dtypes (op report: `report --op`); if "
        "the call is right, the op itself is the cost: a smaller or better-aligned shape, a "
        "lower-precision dtype or a fused op changes it."
    ),
    "duration_outlier": (
        "A few calls are far slower than the rest: compare their shapes and dtypes with the "
        "typical call; a first call at a new shape (memory allocation, kernel selection) is the "
        "usual reason: pad or bucket inputs to a few fixed shapes."
    ),
    "host_op_wait": (
        "The device waited for the host: find the op just before it in the calling code, move "
        "host work out of the step, and avoid host synchronisation (.numpy(), .item(), print of "
        "tensors) in the step."
    ),
    "idle_device": ADVICE["idle_device"],
    "communication_wait": ADVICE["communication_wait"],
    "data_gaps": ADVICE["data_gaps"],
}
"""Advice for a device whose kind the capture does not tell: nothing of one device's stack."""

DEVICE_ADVICE: dict[str, dict[str, str]] = {
    "GPU": {
        **_GENERIC_ADVICE,
        "long_task": (
            "Check how the model calls this op: its shapes and dtypes (op report: `report --op`); "
            "if the call is right, the CUDA kernel itself is the cost: a better-aligned shape "
            "(multiples of 8 suit Tensor Cores), float16 / bfloat16 under paddle.amp, or a fused "
            "op changes it."
        ),
        "duration_outlier": (
            "A few calls are far slower than the rest: compare their shapes and dtypes with the "
            "typical call; a first call at a new shape (cuDNN algorithm selection, memory "
            "allocation) is the usual reason: pad or bucket inputs to a few fixed shapes."
        ),
        "host_op_wait": (
            "The GPU waited for the host: find the op just before it in the calling code, move "
            "host work out of the step, and avoid host synchronisation (.numpy(), .item(), "
            "paddle.device.synchronize(), print of tensors) in the step."
        ),
        "idle_device": (
            "The GPU is idle most of the span: the job is host-bound, and no kernel change will "
            "speed it up. Look at what the host does between launches: dispatch (many small ops: "
            "fuse them, larger batches, paddle.jit.to_static), data loading (more DataLoader "
            "workers, prefetch) and synchronisation (.item(), .numpy(), prints of tensors, "
            "paddle.device.synchronize() in the step). Capture a longer, stable part of the run "
            "if this span holds only start-up."
        ),
        "communication_wait": (
            "The GPU sat in a collective (NCCL) or waited to start one, not for the host: another "
            "rank is late or communication is not overlapped with compute. Find the late rank "
            "(`report --card all` on a multi-card capture, `report` on the folder of the ranks) "
            "and overlap communication with compute (gradient bucketing, asynchronous collectives)."
        ),
    },
    "CPU": {
        **_GENERIC_ADVICE,
        "dominant_warning": (
            "One op type dominates the host operators' time: check why the model calls it so "
            "often (a Python loop over small tensors, an op per sample) and whether a fused or "
            "vectorised op does the same work; a larger batch spreads the cost of each call."
        ),
        "dominant_info": (
            "Matrix ops dominating is expected in matrix-heavy models; on the CPU their speed "
            "follows the batch size and the math library's threads (OMP_NUM_THREADS)."
        ),
        "long_task": (
            "Check how the model calls this host op: its shapes and dtypes (op report: "
            "`report --op`); if the call is right, the op itself is the cost: a smaller shape, "
            "fewer calls or a fused op changes it, and the math library's threads "
            "(OMP_NUM_THREADS) set how many cores it uses."
        ),
        "duration_outlier": (
            "A few calls are far slower than the rest: compare their shapes and dtypes with the "
            "typical call; a first call at a new shape (memory allocation) or another process "
            "taking the cores at that moment is the usual reason."
        ),
        "idle_device": (
            "Most of the span runs no operator: the time goes to Python, the framework's "
            "dispatch and data loading between operators. Look at the trace's Dataloader and "
            "Python events, give the DataLoader more workers, move per-step Python work "
            "(logging, metrics, .numpy() / .item() conversions) out of the step, and use larger "
            "batches so each op does more work."
        ),
        "communication_wait": (
            "The step sat in a collective, not in an operator: another rank is late or "
            "communication is not overlapped with compute. Find the late rank (`report` on the "
            "folder of the ranks) and overlap communication with compute."
        ),
        "data_gaps": (
            "If the model ran on a GPU or another device, profile it too "
            "(paddle.profiler.ProfilerTarget.GPU or CUSTOM_DEVICE) to see its kernels; a run on "
            "the CPU misses nothing here."
        ),
    },
    "unknown": _GENERIC_ADVICE,
}
"""Advice on a capture of a GPU, a CPU or an unknown device (analysis/device_kind.py), for every
rule that runs there (`rules_for`); ADVICE and FRAMEWORK_ADVICE are the NPU's. Only Paddle's own
traces come from such devices, so the texts name Paddle's APIs where one is meant."""

NPU_ONLY_RULES = ("ai_cpu", "low_parallelism", "recompilation", "aclop_share", "dynamic_shape")
"""Rules about what only an Ascend NPU has: AI_CPU tasks, Block Dim over AI cores, online
compilation of aclop operators, aclop vs aclnn, OP State."""
HOST_SKIPPED_RULES = ("host_op_wait",)
"""Rules that make no sense when every task runs on the host."""


SMALL_SAMPLE_TASKS = 100
"""Below this many operator tasks on a card, a share of compute says little about the run: the
findings say the capture is a small sample (a stable step of a real training runs thousands)."""

MSPROF_LAYOUTS = ("era_a", "era_b", "file")
"""Layouts of a plain msprof export: anything run under `msprof --application` writes them."""


def custom_kernel() -> pl.Expr:
    """Tasks of an application's own kernel (CUSTOM_KERNEL_TYPES on a core task)."""
    return (
        pl.col("task_type").is_in(CORE_TASKS).fill_null(False)
        & (pl.col("op_type") != UNKNOWN).fill_null(False)
        & pl.col("op_type").str.contains(CUSTOM_KERNEL_TYPES).fill_null(False)
    )


def aclop_tasks(own_kernel: pl.Expr | None = None) -> pl.Expr:
    """Classic acl operator tasks, as the aclop_share finding and the "aclop vs aclnn" card
    count them: not aclnn, not communication, not CPU, not an application's own kernel
    (`own_kernel`: custom_kernel() or an equivalent expression)."""
    return _operator_tasks(own_kernel) & ~pl.col("is_aclnn").fill_null(False)


def aclnn_tasks(own_kernel: pl.Expr | None = None) -> pl.Expr:
    """aclnn operator tasks (op name aclnn*), counted beside `aclop_tasks`."""
    return _operator_tasks(own_kernel) & pl.col("is_aclnn").fill_null(False)


def _operator_tasks(own_kernel: pl.Expr | None) -> pl.Expr:
    own = custom_kernel() if own_kernel is None else own_kernel
    return ~pl.col("task_type").is_in([*COMMUNICATION_TASK_TYPES, "CPU"]).fill_null(False) & ~own


def framework_of(layout: str, profile: Profile | None = None) -> Framework:
    """The framework a capture tells. By its layout: torch_npu (`*_ascend_pt`), MindSpore
    (`*_ascend_ms`) and Paddle's own traces. A plain msprof export (`profile` given) tells by
    what it holds: with an application's own kernel (`custom_kernel`: frameworks launch CANN
    operators) it is a plain ACL application; otherwise it could be Paddle, torch_npu or an
    ACL application calling CANN operators (nothing in the export tells them apart; the
    folder name `ascend_profiling/` is Paddle's default but any run may use it), so unknown."""
    known: dict[str, Framework] = {"torch_npu": "torch_npu", "mindspore": "mindspore", "paddle": "paddle"}
    if layout in known or profile is None or layout not in MSPROF_LAYOUTS:
        return known.get(layout, "unknown")
    return "acl" if has_custom_kernel(profile.tasks) else "unknown"


_custom_memo: list[tuple[weakref.ref[pl.DataFrame], bool]] = []


def has_custom_kernel(tasks: pl.DataFrame) -> bool:
    """Whether `tasks` hold an application's own kernel; the last answer is kept (by a weak
    reference: the frame is not kept alive), as the diagnosis asks once per card."""
    if _custom_memo and _custom_memo[0][0]() is tasks:
        return _custom_memo[0][1]
    types = tasks.filter(pl.col("task_type").is_in(CORE_TASKS).fill_null(False))["op_type"].unique()
    types = types.filter(types != UNKNOWN)
    found = bool(types.str.contains(CUSTOM_KERNEL_TYPES).fill_null(False).any())
    _custom_memo[:] = [(weakref.ref(tasks), found)]
    return found


def advice(key: str, framework: str, kind: str = "NPU") -> str:
    """The advice text `key` of ADVICE, in the words of `framework` where they differ; on
    another device `kind` than an NPU, DEVICE_ADVICE's (a KeyError for an NPU-only rule)."""
    if kind != "NPU":
        return DEVICE_ADVICE[kind][key]
    return FRAMEWORK_ADVICE.get(framework, {}).get(key, ADVICE[key])


def rules_for(kind: str) -> tuple[Callable[[CardData, Thresholds], list[Finding]], ...]:
    """The rules of RULES that apply to a capture of device `kind`."""
    if kind == "NPU":
        return RULES
    skipped = NPU_ONLY_RULES + (HOST_SKIPPED_RULES if kind == "CPU" else ())
    return tuple(r for r in RULES if r.__name__ not in skipped)


@dataclass(frozen=True)
class CardData:
    """One card's frames, as the rules see them."""

    card: str
    tasks: pl.DataFrame  # canonical tasks + wait_cause, wait_confidence, start_us
    stat: pl.DataFrame
    has_timeline: bool
    compile_events: int
    statistic_derived: bool
    pmu: bool
    time_problem: str | None = None  # start times unusable: no spans, no wait causes
    framework: str = "unknown"  # one of FRAMEWORKS: picks the advice's wording
    profile: Profile | None = None  # the capture: core counts and PMU ratios of the card
    kind: DeviceKind = "NPU"  # the capture's device (analysis/device_kind.py): picks rules and words

    @cached_property
    def device(self) -> DeviceInfo | None:
        """The card's core counts, when the capture tells them."""
        if self.profile is None:
            return None
        return profile_device_info(self.profile).get(self.card)

    @cached_property
    def _bounds(self) -> dict[float, dict[str, str]]:
        return {}

    def bounds(self, th: Thresholds) -> dict[str, str]:
        """op type -> bound type (analysis/bound.py) on this card; empty without PMU ratios."""
        if th.bound_min_pct not in self._bounds:
            out: dict[str, str] = {}
            if self.profile is not None and self.profile.pmu_columns:
                tasks = self.profile.tasks
                if self.profile.cards != (self.card,):
                    tasks = tasks.filter(pl.col("card") == self.card)
                frame = op_type_bounds(tasks, th.bound_min_pct, ("op_type",))
                out = {r[0]: r[1] for r in frame.select("op_type", "bound").iter_rows() if r[0] is not None}
            self._bounds[th.bound_min_pct] = out
        return self._bounds[th.bound_min_pct]

    @cached_property
    def custom_types(self) -> frozenset[str]:
        """Op types of the application's own kernels on this card (Ascend C kernels: NPU only)."""
        if self.kind != "NPU" or not has_custom_kernel(self.profile.tasks if self.profile is not None else self.tasks):
            return frozenset()
        return frozenset(self.tasks.filter(custom_kernel())["op_type"].unique().to_list())

    @cached_property
    def compute(self) -> pl.DataFrame:
        """Operator tasks: collectives are judged by communication analysis, not these rules."""
        return self.tasks.filter(~is_communication())

    @cached_property
    def compute_us(self) -> float:
        return float(self.compute["duration_us"].sum() or 0.0)

    @property
    def wait_us(self) -> float:
        return float(self.tasks["wait_us"].sum() or 0.0)


def evidence(rows: pl.DataFrame, by: str, n: int) -> tuple[dict[str, Any], ...]:
    cols = [c for c in (*EVIDENCE_FIELDS, "wait_cause", "row") if c in rows.columns]
    top = rows.select(cols).top_k(n, by=by).sort([by, "row"], descending=[True, False])
    return tuple(top.iter_rows(named=True))


def _share(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 3) if whole > 0 else 0.0


def _per_type(rows: pl.DataFrame, value: str) -> list[tuple[str, int, float]]:
    grouped = (
        rows.group_by("op_type")
        .agg(pl.len().alias("n"), pl.col(value).sum().alias("t"))
        .sort(["t", "op_type"], descending=[True, False])
    )
    return [(r[0], int(r[1]), float(r[2])) for r in grouped.iter_rows()]


def _names(rows: pl.DataFrame, op_type: str, limit: int = 5) -> tuple[str, ...]:
    names = rows.filter(pl.col("op_type") == op_type)["op_name"].drop_nulls().unique(maintain_order=True)
    return tuple(names.head(limit).to_list())


def dominant_op_type(d: CardData, th: Thresholds) -> list[Finding]:
    out = []
    # An unknown type (torch_npu Level0) is every op at once: its share says nothing.
    big = d.stat.filter((pl.col("ratio_pct") >= th.dominant_ratio_pct) & (pl.col("op_type") != UNKNOWN))
    for row in big.iter_rows(named=True):
        if d.kind == "NPU":
            matrix = bool(re.match(MATRIX_TYPES, row["op_type"] or "")) and row["core_type"] in MATRIX_CORES
        else:  # framework op names (Paddle: matmul, conv2d, Global_MatmulGradNode): no core types
            matrix = bool(re.search(HOST_MATRIX_TYPES, row["op_type"] or ""))
        custom = row["op_type"] in d.custom_types
        of_type = d.tasks.filter(pl.col("op_type") == row["op_type"])
        title = f"{row['op_type']} ({row['core_type']}) takes {row['ratio_pct']:.1f}% of compute"
        if custom:  # the application's own kernel: what bounds it is the lead, not recompilation
            bound = d.bounds(th).get(row["op_type"], UNKNOWN_BOUND)
            title += f"; custom kernel, {BOUND_WORDS[bound]}" if bound != UNKNOWN_BOUND else "; custom kernel"
        key = "custom_kernel" if custom else "dominant_info" if matrix else "dominant_warning"
        if key == "dominant_warning" and d.kind == "NPU" and of_type.filter(aclop_tasks()).height == 0:
            key = "dominant_aclnn"  # online compilation needs aclop tasks of the type: none here
        if d.compute.height < SMALL_SAMPLE_TASKS:
            title += f" ({d.compute.height} task(s): a small sample)"
        out.append(
            Finding(
                rule="dominant_op_type",
                severity="info" if matrix and not custom else "warning",
                title=title,
                card=d.card,
                op_types=(row["op_type"],),
                op_names=_names(of_type, row["op_type"]),
                count=int(row["count"]),
                time_us=float(row["total_us"]),
                share_pct=float(row["ratio_pct"]),
                advice=advice(key, d.framework, d.kind),
                evidence=evidence(of_type, "duration_us", th.evidence_rows),
                threshold=f"Ratio(%) >= {th.dominant_ratio_pct:g}",
            )
        )
    return out


def _duration_findings(
    d: CardData,
    th: Thresholds,
    rows_all: pl.DataFrame,
    rule: str,
    title: Callable[[str, int, pl.DataFrame], str],
    threshold: str,
) -> list[Finding]:
    """One finding per op type of `rows_all`, with the time at stake in task durations."""
    out = []
    for op_type, n, total in _per_type(rows_all, "duration_us"):
        rows = rows_all.filter(pl.col("op_type") == op_type)
        out.append(
            Finding(
                rule=rule,
                severity="warning",
                title=title(op_type, n, rows),
                card=d.card,
                op_types=(op_type,),
                op_names=_names(rows, op_type),
                count=n,
                time_us=total,
                share_pct=_share(total, d.compute_us),
                advice=ADVICE["custom_kernel"]
                if rule == "long_task" and op_type in d.custom_types
                else advice(rule, "", d.kind),
                evidence=evidence(rows, "duration_us", th.evidence_rows),
                threshold=threshold,
            )
        )
    return out


def long_task(d: CardData, th: Thresholds) -> list[Finding]:
    return _duration_findings(
        d,
        th,
        d.compute.filter(pl.col("duration_us") > th.long_task_us),
        "long_task",
        lambda op_type, n, rows: f"{n:,} {_kind(op_type)} longer than {th.long_task_us:g} us",
        f"Task Duration > {th.long_task_us:g} us",
    )


def _kind(op_type: str) -> str:
    """`MatMulV3 task(s)`, or `task(s) of unknown type` where the capture has no types."""
    return "task(s) of unknown type" if op_type == UNKNOWN else f"{op_type} task(s)"


def duration_outlier(d: CardData, th: Thresholds) -> list[Finding]:
    flagged = d.stat.filter(
        (pl.col("op_type") != UNKNOWN)
        & (pl.col("count") >= th.outlier_min_calls)
        & (pl.col("max_us") >= th.outlier_max_over_avg * pl.col("avg_us"))
        & (pl.col("avg_us") > 0)
    )
    out = []
    for row in flagged.iter_rows(named=True):
        rows = d.tasks.filter(
            (pl.col("op_type") == row["op_type"])
            & (pl.col("task_type") == row["core_type"])
            & (pl.col("duration_us") >= th.outlier_max_over_avg * row["avg_us"])
        )
        excess = float((rows["duration_us"] - row["avg_us"]).sum() or 0.0)
        out.append(
            Finding(
                rule="duration_outlier",
                severity="warning",
                title=(
                    f"{row['op_type']}: max {row['max_us']:,.1f} us is {row['max_us'] / row['avg_us']:.0f}x its average"
                ),
                card=d.card,
                op_types=(row["op_type"],),
                op_names=_names(rows, row["op_type"]),
                count=max(rows.height, 1),
                time_us=excess,
                share_pct=_share(excess, d.compute_us),
                advice=advice("duration_outlier", "", d.kind),
                evidence=evidence(rows, "duration_us", th.evidence_rows),
                threshold=(f"Count >= {th.outlier_min_calls} and Max >= {th.outlier_max_over_avg:g} x Avg"),
            )
        )
    return out


def ai_cpu(d: CardData, th: Thresholds) -> list[Finding]:
    def title(op_type: str, n: int, rows: pl.DataFrame) -> str:
        dtypes = rows["input_dtypes"].drop_nulls().unique().sort().head(3).to_list()
        inputs = f" (inputs {', '.join(dtypes)})" if dtypes else ""
        return f"{op_type} runs on AI_CPU: {n} task(s) over {th.ai_cpu_us:g} us{inputs}"

    slow = d.tasks.filter((pl.col("task_type") == "AI_CPU") & (pl.col("duration_us") > th.ai_cpu_us))
    return _duration_findings(d, th, slow, "ai_cpu", title, f"AI_CPU Task Duration > {th.ai_cpu_us:g} us")


def _wait_findings(d: CardData, th: Thresholds, cause: str, rule: str, title: str) -> list[Finding]:
    rows_all = d.tasks.filter(pl.col("wait_cause") == cause)
    if rule == "recompilation" and d.custom_types:
        # An application's own kernel is built ahead of time, never online: without a
        # timeline, "first call of an aclop shape" says nothing about it, so only a compile
        # API seen over the gap (another operator compiled meanwhile) is kept.
        rows_all = rows_all.filter(
            ~(pl.col("op_type").is_in(list(d.custom_types)) & (pl.col("wait_confidence") == "suspected"))
        )
    out = []
    for op_type, n, total in _per_type(rows_all, "wait_us"):
        rows = rows_all.filter(pl.col("op_type") == op_type)
        suspected = (rows["wait_confidence"] == "suspected").any()
        extra = ""
        if rule == "recompilation" and d.compile_events:
            extra = f"; {d.compile_events} aclopCompileAndExecute calls on the host"
        shown = op_type if op_type != UNKNOWN and not op_type.isdigit() else ", ".join(_names(rows, op_type, 2))
        text = title.format(n=n, op_type=shown, total=total)
        if rule == "recompilation" and op_type in d.custom_types:
            text = f"{n} long wait(s) before {shown} while the host compiled another operator ({total:,.0f} us)"
        out.append(
            Finding(
                rule=rule,
                severity="warning",
                title=text + extra,
                card=d.card,
                op_types=(op_type,),
                op_names=_names(rows, op_type),
                count=n,
                time_us=total,
                share_pct=_share(total, d.wait_us),
                advice=advice(rule, d.framework, d.kind),
                confidence="suspected" if suspected else "evidence",
                evidence=evidence(rows, "wait_us", th.evidence_rows),
                threshold=f"Task Wait Time >= {th.long_wait_us:g} us",
            )
        )
    return out


def recompilation(d: CardData, th: Thresholds) -> list[Finding]:
    out = _wait_findings(
        d,
        th,
        "recompilation",
        "recompilation",
        "{n} long wait(s) before {op_type} from recompilation ({total:,.0f} us)",
    )
    if not out and d.compile_events >= th.compile_events:
        out.append(
            Finding(
                rule="recompilation",
                severity="warning",
                title=f"{d.compile_events} aclopCompileAndExecute calls on the host",
                card=d.card,
                op_types=(),
                op_names=(),
                count=d.compile_events,
                time_us=0.0,
                share_pct=0.0,
                advice=advice("recompilation", d.framework),
                threshold=f">= {th.compile_events} aclopCompileAndExecute events",
            )
        )
    return out


def host_op_wait(d: CardData, th: Thresholds) -> list[Finding]:
    return _wait_findings(
        d,
        th,
        "host_op",
        "host_op_wait",
        "{n} long wait(s) before {op_type} while the host ran something else ({total:,.0f} us)",
    )


def communication_wait(d: CardData, th: Thresholds) -> list[Finding]:
    """Long waits inside a collective of the card or before one: communication, never the host's."""
    rows = d.tasks.filter(pl.col("wait_cause") == "communication")
    if rows.height == 0:
        return []
    total = float(rows["wait_us"].sum() or 0.0)
    types = [t for t, _, _ in _per_type(rows, "wait_us")]
    return [
        Finding(
            rule="communication_wait",
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
            share_pct=_share(total, d.wait_us),
            advice=advice("communication_wait", "", d.kind),
            evidence=evidence(rows, "wait_us", th.evidence_rows),
            threshold=(f"Task Wait Time >= {th.long_wait_us:g} us, before a collective or gap covered >= half by one"),
        )
    ]


def idle_device(d: CardData, th: Thresholds) -> list[Finding]:
    """A device busy for a small share of its span: host-bound, the first thing to fix."""
    if d.time_problem is not None or d.tasks.height == 0:
        return []
    iv = d.tasks.select(
        pl.col("start_us").alias("s"),
        (pl.col("start_us") + pl.col("duration_us").fill_null(0.0)).alias("e"),
    ).sort("s")
    span = float(iv.select(pl.col("e").max() - pl.col("s").min()).item() or 0.0)
    if span <= 0:
        return []
    # Union of the intervals: a new segment starts where a task starts after every earlier end.
    segments = (
        iv.with_columns((pl.col("s") > pl.col("e").cum_max().shift(1)).fill_null(True).cum_sum().alias("seg"))
        .group_by("seg")
        .agg(pl.col("s").min(), pl.col("e").max())
    )
    busy = float((segments["e"] - segments["s"]).sum())
    busy_pct = 100.0 * busy / span
    if busy_pct >= th.idle_busy_pct:
        return []
    title = f"Device idle {100.0 - busy_pct:.1f}% of the span: tasks busy {busy:,.0f} us of {span:,.0f} us (host-bound)"
    if d.kind == "CPU":  # every task is a host operator: no device to be idle
        title = (
            f"No operator running {100.0 - busy_pct:.1f}% of the span: operators busy {busy:,.0f} us "
            f"of {span:,.0f} us (Python / framework time between them)"
        )
    return [
        Finding(
            rule="idle_device",
            severity="warning",
            title=title,
            card=d.card,
            op_types=(),
            op_names=(),
            count=d.tasks.height,
            time_us=span - busy,
            share_pct=round(100.0 - busy_pct, 3),
            advice=advice("idle_device", "", d.kind),
            threshold=f"busy share of the span < {th.idle_busy_pct:g}%",
        )
    ]


def aclop_share(d: CardData, th: Thresholds) -> list[Finding]:
    # An application's own kernels are neither aclop nor aclnn: left out of both counts.
    compute = d.tasks.filter(_operator_tasks(None))
    if compute.height == 0:  # host-only traces (Paddle on CPU), custom kernels only: no aclop / aclnn
        return []
    aclop = compute.filter(aclop_tasks())
    if aclop.height == 0:  # every operator is aclnn: nothing compiles online, nothing to migrate
        return []
    aclop_t = float(aclop["duration_us"].sum() or 0.0)
    aclnn_n = compute.height - aclop.height
    types = [t for t, _, _ in _per_type(aclop, "duration_us")]
    return [
        Finding(
            rule="aclop_share",
            severity="info",
            title=(
                f"aclop: {aclop.height:,} call(s), {_share(aclop_t, d.compute_us):.1f}% of compute; "
                f"aclnn: {aclnn_n:,} call(s)"
            ),
            card=d.card,
            op_types=tuple(types[:10]),
            op_names=(),
            count=aclop.height,
            time_us=aclop_t,
            share_pct=_share(aclop_t, d.compute_us),
            advice=ADVICE["aclop_share"],
            evidence=evidence(aclop, "duration_us", th.evidence_rows),
            threshold="informational",
        )
    ]


def low_parallelism(d: CardData, th: Thresholds) -> list[Finding]:
    """Core tasks whose Block Dim uses a small part of the card's cores, taking a real share
    of compute: one finding per card. Needs the core counts (parsers/device_info.py); AI_CORE
    and MIX_AIC blocks count cube cores, AI_VECTOR_CORE and MIX_AIV vector cores (cube cores
    when the chip has no separate ones), as msprof-analyze's BlockDimChecker does."""
    dev = d.device
    if dev is None or not dev.ai_core_num or "block_num" not in d.tasks.columns:
        return []
    aic, aiv = dev.ai_core_num, dev.aiv_num or dev.ai_core_num
    cores = pl.when(pl.col("task_type").is_in(MATRIX_CORES)).then(pl.lit(aic)).otherwise(pl.lit(aiv))
    low = d.tasks.filter(
        pl.col("task_type").is_in(CORE_TASKS).fill_null(False)
        & (pl.col("block_num") > 0).fill_null(False)
        & (pl.col("block_num") * 100.0 < cores * th.low_block_pct)
    )
    total = float(low["duration_us"].sum() or 0.0)
    share = _share(total, d.compute_us)
    if low.height == 0 or share < th.low_parallel_pct:
        return []
    types = [t for t, _, _ in _per_type(low, "duration_us")]
    lo, hi = low.select(pl.col("block_num").min().alias("lo"), pl.col("block_num").max().alias("hi")).row(0)
    dims = f"Block Dim {lo}" if lo == hi else f"Block Dim {lo}-{hi}"
    bounds = d.bounds(th)
    top = types[0]
    bound = bounds.get(top, UNKNOWN_BOUND)
    lead = f"; {top} is {BOUND_WORDS[bound].split(' (')[0]}" if bound not in (UNKNOWN_BOUND, MIXED) else ""
    return [
        Finding(
            rule="low_parallelism",
            severity="warning",
            title=(
                f"{low.height:,} task(s) use few of the card's cores ({dims} on {dev.describe()}): "
                f"{share:.1f}% of compute{lead}"
            ),
            card=d.card,
            op_types=tuple(types[:10]),
            op_names=tuple(
                low.sort("duration_us", descending=True)["op_name"].unique(maintain_order=True).head(5).to_list()
            ),
            count=low.height,
            time_us=total,
            share_pct=share,
            advice=ADVICE["low_parallelism"],
            evidence=evidence(low, "duration_us", th.evidence_rows),
            threshold=(
                f"Block Dim < {th.low_block_pct:g}% of the cores of its kind on >= {th.low_parallel_pct:g}% "
                f"of compute; {dev.describe()}"
            ),
        )
    ]


def dynamic_shape(d: CardData, th: Thresholds) -> list[Finding]:
    states = d.tasks["op_state"].drop_nulls()
    if states.len() == 0 or not (states == "dynamic").all():
        return []
    return [
        Finding(
            rule="dynamic_shape",
            severity="info",
            title=f"All {states.len():,} tasks with an OP State run dynamic",
            card=d.card,
            op_types=(),
            op_names=(),
            count=states.len(),
            time_us=0.0,
            share_pct=100.0,
            advice=ADVICE["dynamic_shape"],
            threshold="every OP State = dynamic",
        )
    ]


def data_gaps(d: CardData, th: Thresholds) -> list[Finding]:
    gaps = []
    if d.time_problem is not None:
        gaps.append(d.time_problem)
    if d.kind != "NPU":
        return _device_gaps(d, gaps)
    if d.tasks.height and not (d.compute["op_type"] != UNKNOWN).any() and d.compute.height:
        gaps.append("no op types (torch_npu Level0): findings by op type cannot be made")
    if not d.has_timeline:
        gaps.append("no timeline: wait causes are only suspected, host-side ops cannot be shown")
    if d.tasks.height and d.tasks["op_state"].null_count() == d.tasks.height:
        gaps.append("no OP State values (CANN < 8.0.RC1 or a host trace): dynamic shapes cannot be seen")
    if not d.pmu:
        gaps.append("no PMU columns: core utilisation is unknown")
    # A derived op_statistic is no gap: it is what msprof computes from the same tasks (a note
    # of the report says it was derived).
    if 0 < d.compute.height < SMALL_SAMPLE_TASKS:
        gaps.append(
            f"only {d.compute.height} operator task(s): a small sample, shares of compute may not "
            "hold for the whole run"
        )
    return _gaps_finding(d, gaps, ADVICE["data_gaps"])


DEVICE_GAPS = {
    "CPU": "host events only: no device activity in the trace (if the run used a device, it was not profiled)",
    "unknown": "device events of a kind npuscope does not know: findings speak of the device in general terms",
}
"""What a GPU, CPU or unknown device's capture cannot show, besides damaged times: the NPU's
gaps (OP State, PMU columns, op_statistic files) are no gap where such data never exists."""


def _device_gaps(d: CardData, gaps: list[str]) -> list[Finding]:
    """data_gaps on a GPU, CPU or unknown device's capture."""
    if not d.has_timeline:
        gaps.append("no timeline: wait causes are only suspected, host-side ops cannot be shown")
    if d.kind in DEVICE_GAPS:
        gaps.append(DEVICE_GAPS[d.kind])
    return _gaps_finding(d, gaps, advice("data_gaps", "", d.kind))


def _gaps_finding(d: CardData, gaps: list[str], text: str) -> list[Finding]:
    """The data_gaps finding naming `gaps` (none without gaps), with advice `text`."""
    if not gaps:
        return []
    return [
        Finding(
            rule="data_gaps",
            severity="info",
            title="What this capture cannot show: " + "; ".join(gaps),
            card=d.card,
            op_types=(),
            op_names=(),
            count=len(gaps),
            time_us=0.0,
            share_pct=0.0,
            advice=text,
            confidence="evidence",
            threshold="informational",
        )
    ]


RULES = (
    idle_device,
    dominant_op_type,
    long_task,
    duration_outlier,
    ai_cpu,
    low_parallelism,
    recompilation,
    host_op_wait,
    communication_wait,
    aclop_share,
    dynamic_shape,
    data_gaps,
)
