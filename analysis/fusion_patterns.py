"""The fusible operator sequences `fusible_sequence` looks for: data only, read by fusion.py.

Every pattern is an entry of msprof-analyze's advisor rule file
`profiler/advisor/rules/timeline_fusion_ops.yaml` (Ascend mstt / msprof-analyze, the
`aten` rules of its TimelineFusionOpsAnalyzer), written exactly as that file writes it: aten
operator names joined by `-`, `(a|b)` for either, `{m,n}` for a repeat count. msprof-analyze
matches them on the framework's aten events of the host timeline; npuscope matches them on
the device tasks of each card, through ATEN_DEVICE_TYPES: the CANN operator types the torch_npu
kernel of each aten operator launches. A view (chunk, reshape) launches nothing on the device:
the patterns that need one only match where it was materialised (Split, StridedSlice).

The yaml's `Optimizer` rules (`AdamW.step` -> torch_npu.optim.NpuFusedAdamW) match the
framework's `Optimizer.step#<Name>.step` event, not device tasks: FUSED_OPTIMIZERS, matched on
the timeline's framework events or the db's PYTORCH_API. Left out: the single-operator
replacements (gelu -> fast_gelu, linear, mish), which are not sequences, and
`(permute|transpose)-(contiguous)-(reshape|view)`, whose views leave no device task to match.
"""

from __future__ import annotations

from dataclasses import dataclass

YAML = "msprof-analyze advisor rules/timeline_fusion_ops.yaml"


@dataclass(frozen=True)
class FusionPattern:
    key: str
    aten: str  # the yaml's pattern, verbatim
    fused_op: str  # the CANN operator that does the whole sequence
    torch_npu: str  # the torch_npu API that calls it
    paddle: str  # the Paddle API of the same fusion, "" when none is documented
    cann: str  # the first CANN version of the yaml entry (its `cann_version`)
    source: str


PATTERNS: tuple[FusionPattern, ...] = (
    FusionPattern(
        "fusion_attention",
        "matmul-(add){0,1}-(mul){0,1}-(masked_fill_|add){0,1}-softmax-(dropout){0,1}-matmul",
        "FlashAttentionScore",
        "torch_npu.npu_fusion_attention",
        "",
        "7.0.RC1",
        f"{YAML}, unique_id 1 (CANN 7.0.RC1)",
    ),
    FusionPattern(
        "rotary_mul",
        "(chunk|slice)-neg-cat-(mul){0,2}-add",
        "RotaryMul",
        "torch_npu.npu_rotary_mul",
        "paddle.incubate.nn.functional.fused_rotary_position_embedding",
        "7.0.RC1",
        f"{YAML}, unique_id 1 (CANN 7.0.RC1); Paddle API docs",
    ),
    FusionPattern(
        "rms_norm",
        "(pow){0,1}-(mean){0,1}-(add){0,1}-rsqrt-mul-(type_as){0,1}",
        "RmsNorm",
        "torch_npu.npu_rms_norm",
        "paddle.incubate.nn.functional.fused_rms_norm",
        "7.0.0",
        f"{YAML}, unique_id 2 (CANN 7.0.0); Paddle API docs",
    ),
    FusionPattern(
        "swiglu",
        "(slice|chunk)-silu-mul|(slice|chunk)-mul-silu|(slice|chunk)-sigmoid-mul-mul"
        "|(slice|chunk)-mul-sigmoid-mul|(slice|chunk)-mul-mul-sigmoid",
        "SwiGlu",
        "torch_npu.npu_swiglu",
        "paddle.incubate.nn.functional.swiglu",
        "7.0.0",
        f"{YAML}, unique_id 2 (CANN 7.0.0); Paddle API docs",
    ),
    FusionPattern(
        "geglu",
        "(slice|chunk)-gelu-mul|(slice|chunk)-mul-gelu",
        "GeGlu",
        "torch_npu.npu_geglu",
        "",
        "8.0.RC1",
        f"{YAML}, unique_id 3 (CANN 8.0.RC1)",
    ),
    FusionPattern(
        "scaled_masked_softmax",
        "softmax-(mul){0,1}-(masked_fill_|add)",
        "ScaledMaskedSoftmax",
        "torch_npu.npu_scaled_masked_softmax",
        "",
        "6.3.RC2",
        f"{YAML}, unique_id 0 (CANN 6.3.RC2)",
    ),
    FusionPattern(
        "silu",
        "mul-sigmoid|sigmoid-mul",
        "Swish",
        "torch_npu.npu_silu",
        "",
        "6.3.RC2",
        f"{YAML}, unique_id 0 (CANN 6.3.RC2)",
    ),
    FusionPattern(
        "clip_grad_norm",
        "add-reciprocal-mul",
        "the fused optimizer's gradient clipping",
        "clip_grad_norm_fused_ of a torch_npu.optim.NpuFused* optimizer",
        "",
        "6.3.RC2",
        f"{YAML}, unique_id 0 (CANN 6.3.RC2)",
    ),
)
"""Most specific first: where two patterns match at the same task, the earlier one is taken
(a SwiGlu's sigmoid-mul is not also counted as a SiLU)."""

ATEN_DEVICE_TYPES: dict[str, tuple[str, ...]] = {
    "matmul": ("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "MatMul", "MatMulV2", "MatMulV3"),
    "add": ("Add", "Adds", "AddV2"),
    "mul": ("Mul", "Muls"),
    "masked_fill_": ("MaskedFill",),
    "softmax": ("SoftmaxV2",),
    "dropout": ("DropOutDoMask", "DropOutDoMaskV3", "DropOutDoMaskV3D"),
    "chunk": ("Split", "SplitD", "SplitV", "SplitVD"),
    "slice": ("Slice", "SliceD", "StridedSlice", "StridedSliceD", "StridedSliceV2"),
    "neg": ("Neg",),
    "cat": ("Concat", "ConcatD", "ConcatV2", "ConcatV2D"),
    "pow": ("Pow",),
    "mean": ("ReduceMean", "ReduceMeanD"),
    "rsqrt": ("Rsqrt",),
    "type_as": ("Cast",),
    "silu": ("Swish", "Silu"),
    "sigmoid": ("Sigmoid",),
    "gelu": ("Gelu",),
    "reciprocal": ("Reciprocal",),
}
"""The device operator types (OP Type / Type of op_summary and kernel_details) an aten
operator of the patterns runs as on torch_npu; compared without regard to case (`GeLU`)."""

FUSED_OPTIMIZERS: dict[str, str] = {
    "AdamW": "torch_npu.optim.NpuFusedAdamW",
    "SGD": "torch_npu.optim.NpuFusedSGD",
    "Adadelta": "torch_npu.optim.NpuFusedAdadelta",
    "Lamb": "torch_npu.optim.NpuFusedLamb",
    "AdamP": "torch_npu.optim.NpuFusedAdamP",
    "BertAdam": "torch_npu.optim.NpuFusedBertAdam",
    "RMSprop": "torch_npu.optim.NpuFusedRMSprop",
    "RMSpropTF": "torch_npu.optim.NpuFusedRMSpropTF",
    "Adam": "torch_npu.optim.NpuFusedAdam",
}
"""The optimizer whose `<Name>.step` the yaml names -> the fused torch_npu optimizer to use."""
OPTIMIZER_SOURCE = f"{YAML}, unique_id 0 (CANN 6.3.RC2), Optimizer rules"
