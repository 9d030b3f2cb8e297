"""The advice of every rule, in one table: `ADVICE[topic][place]`, a place being a device kind
and a framework. A topic is a rule's name (analysis/rule_names.py), or one of the cases of
`dominant_op_type` (DOMINANT_WARNING, DOMINANT_ACLNN, DOMINANT_INFO, and CUSTOM_KERNEL, which
`long_task` gives an application's own kernel too).

`advice(topic, framework, kind)` picks the text:
- on an NPU, the framework's words (PADDLE, TORCH_NPU, MINDSPORE, ACL), else the NPU's (NPU);
  an msprof export that does not say which framework ran (`unknown`) gets the NPU's, which
  name the switches of Paddle and torch_npu both;
- on another device (a GPU, a CPU or a device npuscope does not know: analysis/device_kind.py),
  the device's words (GPU, CPU), else those of any device but an NPU (OTHER_DEVICE), else the
  NPU's, in Paddle's words on a Paddle capture (the only framework whose own traces come from
  such devices). Topics of NPU_ONLY have no words there: about what only an Ascend NPU has.
"""

from __future__ import annotations

from .rule_names import (
    ACLOP_SHARE,
    AI_CPU,
    COMM_NOT_OVERLAPPED,
    COMMUNICATION_WAIT,
    DATA_GAPS,
    DURATION_OUTLIER,
    DYNAMIC_SHAPE,
    EXPERT_IMBALANCE,
    FREE_TIME,
    HOST_OP_WAIT,
    IDLE_DEVICE,
    LONG_TASK,
    LOW_PARALLELISM,
    MEMORY_PEAK,
    PIPELINE_BUBBLE,
    RECOMPILATION,
    SLOW_LINK,
    SLOW_RANK,
    SMALL_PACKETS,
    STAGE_IMBALANCE,
    SYNC_HEAVY,
)

DOMINANT_WARNING = "dominant_warning"
"""dominant_op_type: a type other than matrix compute dominates."""
DOMINANT_ACLNN = "dominant_aclnn"
"""dominant_op_type on an NPU: the dominating type has no aclop task, so nothing compiles online."""
DOMINANT_INFO = "dominant_info"
"""dominant_op_type: matrix compute dominates."""
CUSTOM_KERNEL = "custom_kernel"
"""dominant_op_type and long_task: the type is an application's own kernel."""

ANY = "*"
Place = tuple[str, str]
"""(device kind: analysis/device_kind.py, framework: analysis/framework.py or ANY)."""
NPU: Place = ("NPU", ANY)
PADDLE: Place = ("NPU", "paddle")
TORCH_NPU: Place = ("NPU", "torch_npu")
MINDSPORE: Place = ("NPU", "mindspore")
ACL: Place = ("NPU", "acl")
"""A plain ACL application (`msprof --application`, an export holding its own kernel)."""
GPU: Place = ("GPU", ANY)
CPU: Place = ("CPU", ANY)
OTHER_DEVICE: Place = ("unknown", ANY)
"""Any device but an NPU, where GPU or CPU has no words of its own."""

NPU_ONLY = frozenset(
    {AI_CPU, RECOMPILATION, ACLOP_SHARE, DYNAMIC_SHAPE, CUSTOM_KERNEL, LOW_PARALLELISM, DOMINANT_ACLNN, SYNC_HEAVY}
)
"""Topics about what only an Ascend NPU has (AI_CPU tasks, online compilation of aclop
operators, OP State, Block Dim over AI cores, its own kernels, the AscendCL synchronising
APIs): no advice for them on another device."""


def advice(topic: str, framework: str, kind: str = "NPU") -> str:
    """The advice of `topic` for a capture of `framework` on a device of `kind` (see the module
    docstring); a KeyError for a topic of NPU_ONLY on another device."""
    texts = ADVICE[topic]
    if kind == "NPU":
        return texts.get(("NPU", framework), texts[NPU])
    if topic in NPU_ONLY:
        raise KeyError(topic)
    npu = PADDLE if framework == "paddle" else NPU
    for place in ((kind, ANY), OTHER_DEVICE, npu, NPU):
        if place in texts:
            return texts[place]
    raise KeyError(topic)


ADVICE: dict[str, dict[Place, str]] = {
    # The operator rules (analysis/rules.py).
    DOMINANT_WARNING: {
        NPU: (
            "A non-matrix op type dominating compute often means repeated recompilation: try turning off "
            "online compilation (Paddle: FLAGS_npu_jit_compile=false; torch_npu: "
            "torch_npu.npu.set_compile_mode(jit_compile=False)) and compare, and check why the model "
            "calls it so often."
        ),
        PADDLE: (
            "A non-matrix op type dominating compute often means repeated recompilation: try "
            "FLAGS_npu_jit_compile=false and compare, and check why the model calls it so often."
        ),
        TORCH_NPU: (
            "A non-matrix op type dominating compute often means repeated recompilation: try "
            "torch_npu.npu.set_compile_mode(jit_compile=False) and compare, and check why the model calls "
            "it so often."
        ),
        MINDSPORE: (
            "A non-matrix op type dominating compute often means repeated recompilation: keep input "
            "shapes fixed (or declare the dynamic ones with Cell.set_inputs) and check why the network "
            "calls it so often."
        ),
        ACL: (
            "A non-matrix op type dominating compute often means repeated recompilation: compile it once "
            "(aclopSetCompileFlag(ACL_OP_COMPILE_FUZZ) for changing shapes, or single-op models built "
            "offline with ATC) and check why the application calls it so often."
        ),
        OTHER_DEVICE: (
            "A non-matrix op type dominating compute: check why the model calls it so often (a Python "
            "loop over small tensors, an op per sample) and whether a fused or vectorised op does the "
            "same work."
        ),
        CPU: (
            "One op type dominates the host operators' time: check why the model calls it so often (a "
            "Python loop over small tensors, an op per sample) and whether a fused or vectorised op does "
            "the same work; a larger batch spreads the cost of each call."
        ),
    },
    DOMINANT_ACLNN: {
        NPU: (
            "A non-matrix op type dominating compute: its calls are aclnn operators, which do not compile "
            "online, so no compile switch changes it. Check why the model calls it so often (a loop over "
            "small tensors, an op per sample) and whether a fused operator does the same work; its shapes "
            "and dtypes are in the op report (`report --op`)."
        ),
    },
    DOMINANT_INFO: {
        NPU: (
            "Matrix compute dominating is expected in matrix-heavy models; look at its shapes and dtypes "
            "only if the share grows between runs."
        ),
        CPU: (
            "Matrix ops dominating is expected in matrix-heavy models; on the CPU their speed follows the "
            "batch size and the math library's threads (OMP_NUM_THREADS)."
        ),
    },
    LONG_TASK: {
        NPU: (
            "Check how the model calls this op and the adaptation layer; if the call is right, report it "
            "to the operator team with its shape and dtype (op report: `report --op`)."
        ),
        OTHER_DEVICE: (
            "Check how the model calls this op: its shapes and dtypes (op report: `report --op`); if the "
            "call is right, the op itself is the cost: a smaller or better-aligned shape, a "
            "lower-precision dtype or a fused op changes it."
        ),
        GPU: (
            "Check how the model calls this op: its shapes and dtypes (op report: `report --op`); if the "
            "call is right, the CUDA kernel itself is the cost: a better-aligned shape (multiples of 8 "
            "suit Tensor Cores), float16 / bfloat16 under paddle.amp, or a fused op changes it."
        ),
        CPU: (
            "Check how the model calls this host op: its shapes and dtypes (op report: `report --op`); if "
            "the call is right, the op itself is the cost: a smaller shape, fewer calls or a fused op "
            "changes it, and the math library's threads (OMP_NUM_THREADS) set how many cores it uses."
        ),
    },
    DURATION_OUTLIER: {
        NPU: (
            "A few calls are far slower than the rest: compare their shapes and dtypes with the typical "
            "call; a new shape or format (TransData around it) is the usual reason."
        ),
        OTHER_DEVICE: (
            "A few calls are far slower than the rest: compare their shapes and dtypes with the typical "
            "call; a first call at a new shape (memory allocation, kernel selection) is the usual reason: "
            "pad or bucket inputs to a few fixed shapes."
        ),
        GPU: (
            "A few calls are far slower than the rest: compare their shapes and dtypes with the typical "
            "call; a first call at a new shape (cuDNN algorithm selection, memory allocation) is the "
            "usual reason: pad or bucket inputs to a few fixed shapes."
        ),
        CPU: (
            "A few calls are far slower than the rest: compare their shapes and dtypes with the typical "
            "call; a first call at a new shape (memory allocation) or another process taking the cores at "
            "that moment is the usual reason."
        ),
    },
    AI_CPU: {
        NPU: (
            "AI_CPU runs on the NPU's general-purpose cores and is slow: usually a dtype AI_CORE does not "
            "support (float64 / int64 inputs: cast to float32 / int32) or an op with no AI_CORE kernel: "
            "replace it or move it out of the step."
        ),
    },
    RECOMPILATION: {
        NPU: (
            "Turn off online compilation, move to aclnn operators, pad or bucket dynamic shapes; Paddle: "
            "FLAGS_npu_jit_compile=false, torch_npu: torch_npu.npu.set_compile_mode(jit_compile=False)."
        ),
        PADDLE: (
            "Set FLAGS_npu_jit_compile=false, move to aclnn operators, and avoid dynamic shapes (pad or "
            "bucket inputs to a few fixed shapes)."
        ),
        TORCH_NPU: (
            "Call torch_npu.npu.set_compile_mode(jit_compile=False) before the model runs, move to aclnn "
            "operators, and avoid dynamic shapes (pad or bucket inputs to a few fixed shapes)."
        ),
        MINDSPORE: (
            "MindSpore recompiles when shapes or attributes change: keep input shapes fixed (pad or "
            "bucket inputs), declare truly dynamic inputs with Cell.set_inputs, and prefer aclnn "
            "operators."
        ),
        ACL: (
            "aclop operators compile on first use and on every new shape or attribute: build single-op "
            "models offline with ATC, set aclopSetCompileFlag(ACL_OP_COMPILE_FUZZ) for changing shapes, "
            "or call the aclnn operators."
        ),
    },
    HOST_OP_WAIT: {
        NPU: (
            "The device waited for the host: find the op just before it in the calling code (Paddle logs "
            "CPU fallbacks with GLOG_v=6; torch_npu's profiler shows the Python call with "
            "with_stack=True), move it to the device or out of the step, and avoid host synchronisation "
            "(.numpy(), .item(), .cpu(), print of tensors) in the step."
        ),
        PADDLE: (
            "The device waited for the host: find the op just before it in the calling code (Paddle logs "
            "CPU fallbacks with GLOG_v=6), move it to the device or out of the step, and avoid host "
            "synchronisation (.numpy(), .item(), print of tensors) in the step."
        ),
        TORCH_NPU: (
            "The device waited for the host: find the op just before it in the calling code (the "
            "torch_npu profiler shows the Python call with with_stack=True; ops without an NPU kernel "
            "fall back to the CPU), move it to the device or out of the step, and avoid host "
            "synchronisation (.item(), .cpu(), .numpy(), print of tensors) in the step."
        ),
        MINDSPORE: (
            "The device waited for the host: find the op just before it in the network, move it to the "
            "device or out of the step, and avoid host synchronisation (.asnumpy(), print of tensors) in "
            "the step."
        ),
        ACL: (
            "The device waited for the host: look at the host code between the two launches (host "
            "computation, aclrtSynchronizeStream / aclrtMemcpy in the loop) and move it out of the loop "
            "or onto another stream."
        ),
        OTHER_DEVICE: (
            "The device waited for the host: find the op just before it in the calling code, move host "
            "work out of the step, and avoid host synchronisation (.numpy(), .item(), print of tensors) "
            "in the step."
        ),
        GPU: (
            "The GPU waited for the host: find the op just before it in the calling code, move host work "
            "out of the step, and avoid host synchronisation (.numpy(), .item(), "
            "paddle.device.synchronize(), print of tensors) in the step."
        ),
    },
    IDLE_DEVICE: {
        NPU: (
            "The device is idle most of the span: the job is host-bound, and no operator change will "
            "speed it up. Look at what the host does between launches: dispatch (many small ops: fuse "
            "them, larger batches, graph mode), data loading (more loader workers, prefetch, pinned "
            "memory) and synchronisation (.item(), .numpy(), prints of tensors, explicit synchronize "
            "calls in the step). Capture a longer, stable part of the run if this span holds only "
            "start-up."
        ),
        GPU: (
            "The GPU is idle most of the span: the job is host-bound, and no kernel change will speed it "
            "up. Look at what the host does between launches: dispatch (many small ops: fuse them, larger "
            "batches, paddle.jit.to_static), data loading (more DataLoader workers, prefetch) and "
            "synchronisation (.item(), .numpy(), prints of tensors, paddle.device.synchronize() in the "
            "step). Capture a longer, stable part of the run if this span holds only start-up."
        ),
        CPU: (
            "Most of the span runs no operator: the time goes to Python, the framework's dispatch and "
            "data loading between operators. Look at the trace's Dataloader and Python events, give the "
            "DataLoader more workers, move per-step Python work (logging, metrics, .numpy() / .item() "
            "conversions) out of the step, and use larger batches so each op does more work."
        ),
    },
    COMMUNICATION_WAIT: {
        NPU: (
            "The device sat in a collective or waited to start one, not for the host: another rank is "
            "late or communication is not overlapped with compute. Find the late rank (`report --card "
            "all` on a multi-card capture, `report` on the folder of the ranks) and overlap communication "
            "with compute (gradient bucketing, asynchronous collectives)."
        ),
        GPU: (
            "The GPU sat in a collective (NCCL) or waited to start one, not for the host: another rank is "
            "late or communication is not overlapped with compute. Find the late rank (`report --card "
            "all` on a multi-card capture, `report` on the folder of the ranks) and overlap communication "
            "with compute (gradient bucketing, asynchronous collectives)."
        ),
        CPU: (
            "The step sat in a collective, not in an operator: another rank is late or communication is "
            "not overlapped with compute. Find the late rank (`report` on the folder of the ranks) and "
            "overlap communication with compute."
        ),
    },
    ACLOP_SHARE: {
        NPU: (
            "aclop operators are compiled on first use and recompile when attributes change; aclnn "
            "operators are usually faster: migrate the busiest aclop types first."
        ),
    },
    DYNAMIC_SHAPE: {
        NPU: (
            "Every op runs with OP State dynamic: fixed input shapes (padding, bucketing) let ops run "
            "static and avoid recompilation."
        ),
    },
    DATA_GAPS: {
        NPU: "Capture again with the missing data to confirm what is only suspected here.",
        CPU: (
            "If the model ran on a GPU or another device, profile it too "
            "(paddle.profiler.ProfilerTarget.GPU or CUSTOM_DEVICE) to see its kernels; a run on the CPU "
            "misses nothing here."
        ),
    },
    CUSTOM_KERNEL: {
        NPU: (
            "This is the application's own kernel (Ascend C, launched directly), not a CANN operator: no "
            "framework or online-compilation switch changes it, the kernel itself does. Use its bound "
            "type: memory-bound kernels need larger tiles, double buffering (queue depth 2, so MTE2 "
            "copies overlap compute) and contiguous 32-byte-aligned copies; a Block Dim below the core "
            "count leaves cores idle (launch kernel<<<blockDim, ...>>> with one block per core and split "
            "the tiling over them). `msprof op` on the kernel alone gives per-pipe detail."
        ),
    },
    LOW_PARALLELISM: {
        NPU: (
            "These kernels run on few of the card's cores while the rest idle: for a custom kernel, "
            "launch it with a Block Dim of (a multiple of) the core count and split the tiling over the "
            "blocks; for CANN operators, small shapes give few blocks: batch or fuse the small calls "
            "(larger batch, fewer larger ops)."
        ),
    },
    # The training rules (analysis/training_rules.py).
    COMM_NOT_OVERLAPPED: {
        NPU: (
            "Communication runs while no compute does: overlap the gradient all-reduce with the backward "
            "pass (bucketed, asynchronous collectives), tune the bucket size so the first bucket starts "
            "early, and look for collectives issued after the backward pass ends."
        ),
        TORCH_NPU: (
            "Communication runs while no compute does: let DDP overlap the gradient all-reduce with "
            "backward (bucket_cap_mb: smaller buckets start earlier, larger ones call less often), avoid "
            "find_unused_parameters=True, and in Megatron turn on --overlap-grad-reduce / "
            "--overlap-param-gather."
        ),
        PADDLE: (
            "Communication runs while no compute does: let DataParallel overlap the gradient all-reduce "
            "with backward (comm_buffer_size / last_comm_buffer_size set the bucket size), and in fleet "
            "turn on the overlap of the sharding / tensor-parallel communication."
        ),
        MINDSPORE: (
            "Communication runs while no compute does: enable gradient all-reduce fusion and overlap "
            "(set_auto_parallel_context(comm_fusion=...)), and check the parallel strategy for "
            "collectives that run after the backward pass."
        ),
    },
    FREE_TIME: {
        NPU: (
            "The device is free inside the steps with no operator to blame: the host is late. Look at "
            "data loading (more loader workers, prefetch, pinned memory), host-side work between steps, "
            "and host synchronisation (.item(), .numpy(), .cpu(), prints of tensors)."
        ),
        TORCH_NPU: (
            "The device is free inside the steps with no operator to blame: the host is late. Raise "
            "DataLoader num_workers and prefetch_factor with pin_memory=True, bind CPU cores, and remove "
            "host synchronisation (.item(), .cpu(), .numpy(), prints of tensors) from the step."
        ),
        PADDLE: (
            "The device is free inside the steps with no operator to blame: the host is late. Give "
            "paddle.io.DataLoader more num_workers (and use_shared_memory=True), and remove host "
            "synchronisation (.numpy(), .item(), prints of tensors) from the step."
        ),
        MINDSPORE: (
            "The device is free inside the steps with no operator to blame: the host is late. Raise the "
            "dataset's num_parallel_workers and prefetch (ds.config.set_prefetch_size), use data sinking "
            "(dataset_sink_mode=True), and remove .asnumpy() from the step."
        ),
        GPU: (
            "The GPU is free inside the steps with no operator to blame: the host is late. Give the "
            "DataLoader more num_workers (paddle.io.DataLoader: use_shared_memory=True), and remove host "
            "synchronisation (.numpy(), .item(), prints of tensors) from the step."
        ),
        CPU: (
            "No operator runs for this share of the steps: the time goes to Python, the framework's "
            "dispatch and data loading between operators. Give the DataLoader more num_workers, move "
            "per-step Python work (logging, metrics, .numpy() / .item() conversions) out of the step, and "
            "use larger batches so each op does more work."
        ),
    },
    SYNC_HEAVY: {
        NPU: (
            "The host blocks on the device: remove synchronisation from the step (.item(), .numpy(), "
            ".cpu(), prints of tensors, explicit synchronize calls), use asynchronous copies "
            "(aclrtMemcpyAsync, non_blocking=True) and read metrics every N steps."
        ),
        TORCH_NPU: (
            "The host blocks on the device: remove .item(), .cpu(), .numpy() and torch.npu.synchronize() "
            "from the step (log the loss every N steps), and copy with tensor.to('npu', "
            "non_blocking=True) from pinned memory."
        ),
        PADDLE: (
            "The host blocks on the device: remove .numpy(), .item() and paddle.device.synchronize() from "
            "the step (log the loss every N steps)."
        ),
        MINDSPORE: (
            "The host blocks on the device: remove .asnumpy() and prints of tensors from the step, and "
            "train with dataset_sink_mode=True so steps run without the host."
        ),
    },
    SLOW_RANK: {
        NPU: (
            "One rank is slower than the others and every collective waits for it: compare its compute "
            "(different shapes or data per rank, a hot or throttled card: npu-smi info), its host (data "
            "loading, CPU binding) and its free time with the other ranks."
        ),
        OTHER_DEVICE: (
            "One rank is slower than the others and every collective waits for it: compare its compute "
            "(different shapes or data per rank, a hot or throttled device), its host (data loading, CPU "
            "binding) and its free time with the other ranks."
        ),
        GPU: (
            "One rank is slower than the others and every collective waits for it: compare its compute "
            "(different shapes or data per rank, a hot or throttled GPU: nvidia-smi), its host (data "
            "loading, CPU binding) and its free time with the other ranks."
        ),
        CPU: (
            "One rank is slower than the others and every collective waits for it: compare its compute "
            "(different shapes or data per rank, fewer cores or a busy host), its data loading and its "
            "free time with the other ranks."
        ),
    },
    STAGE_IMBALANCE: {
        NPU: (
            "One pipeline stage computes more than the others and they wait for it each micro-batch: move "
            "layers from it to the lighter stages (Megatron / MindSpeed: --num-layer-list, or fewer layers "
            "on the stage holding the embedding or the loss), then profile again; this is a layer split, "
            "not a slow card."
        ),
        OTHER_DEVICE: (
            "One pipeline stage computes more than the others and they wait for it each micro-batch: move "
            "layers from it to the lighter stages, then profile again; this is a layer split, not a slow "
            "device."
        ),
    },
    PIPELINE_BUBBLE: {
        NPU: (
            "The stage idles waiting for its neighbour's activations or gradients: more micro-batches per "
            "step (a larger global batch or gradient accumulation), an interleaved schedule (Megatron / "
            "MindSpeed: --num-layers-per-virtual-pipeline-stage) or fewer pipeline stages shrink the bubble."
        ),
        OTHER_DEVICE: (
            "The stage idles waiting for its neighbour's activations or gradients: more micro-batches per "
            "step, an interleaved schedule or fewer pipeline stages shrink the bubble."
        ),
    },
    EXPERT_IMBALANCE: {
        NPU: (
            "Its experts receive more tokens than the others' and the all-to-all waits for it: raise the "
            "router's load-balancing loss (MindSpeed / Megatron: --moe-aux-loss-coeff), cap tokens per "
            "expert (--moe-expert-capacity-factor with token dropping) or spread hot experts over ranks."
        ),
        OTHER_DEVICE: (
            "Its experts receive more tokens than the others' and the all-to-all waits for it: raise the "
            "router's load-balancing loss, cap tokens per expert or spread hot experts over ranks."
        ),
    },
    SLOW_LINK: {
        NPU: (
            "A link moves data far slower than the others of its transport: check the topology and the "
            "link (npu-smi info, hccn_tool link status and speed for RDMA), the placement of the ranks, "
            "and HCCL_BUFFSIZE (default 200 MB) for large transfers."
        ),
        OTHER_DEVICE: (
            "A link moves data far slower than the others of its transport: check the topology and the "
            "link, the placement of the ranks, and the communication library's log."
        ),
        GPU: (
            "A link moves data far slower than the others of its transport: check the topology "
            "(nvidia-smi topo -m), the placement of the ranks, and the transport NCCL chose "
            "(NCCL_DEBUG=INFO)."
        ),
    },
    SMALL_PACKETS: {
        NPU: (
            "Many small collectives spend their time in latency, not bandwidth: fuse them (larger "
            "gradient buckets, fused all-reduce of small tensors) so each call moves more data."
        ),
        TORCH_NPU: (
            "Many small collectives spend their time in latency, not bandwidth: raise DDP's bucket_cap_mb "
            "so gradients go in fewer, larger all-reduces, and fuse small tensors before communicating "
            "them."
        ),
        PADDLE: (
            "Many small collectives spend their time in latency, not bandwidth: raise DataParallel's "
            "comm_buffer_size (MB) so gradients go in fewer, larger all-reduces (fleet: "
            "fuse_all_reduce_ops and fuse_grad_size_in_MB)."
        ),
        MINDSPORE: (
            "Many small collectives spend their time in latency, not bandwidth: fuse them "
            "(set_auto_parallel_context(comm_fusion={'allreduce': {'mode': 'size', 'config': 32}}) or "
            "all_reduce_fusion_config)."
        ),
    },
    MEMORY_PEAK: {
        NPU: (
            "Reserved memory is close to the device's capacity: recompute activations, use a smaller "
            "micro-batch, or shard optimizer states; fragmentation shows as reserved far above allocated."
        ),
        TORCH_NPU: (
            "Reserved memory is close to the device's capacity: recompute activations "
            "(torch.utils.checkpoint, Megatron --recompute-granularity), use a smaller micro-batch, or "
            "shard optimizer states (ZeRO / --use-distributed-optimizer); "
            "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True reduces fragmentation."
        ),
        PADDLE: (
            "Reserved memory is close to the device's capacity: recompute activations "
            "(paddle.distributed.fleet.utils.recompute, fleet's recompute strategy), use a smaller "
            "micro-batch, or shard optimizer states (sharding stage 1/2)."
        ),
        MINDSPORE: (
            "Reserved memory is close to the device's capacity: recompute activations (Cell.recompute()), "
            "use a smaller micro-batch, or shard optimizer states (optimizer parallel)."
        ),
    },
}
