"""The cost terms of the step-time model: what each piece of a training step costs.

One function per cost: the forward GEMMs of a layer on one GPU (``layer_gemms``: dense or MoE,
standard or latent attention, after TP, CP and EP have split them), one layer's forward
(``layer_forward``), the FLOPs of a step (``flops_per_step``).  The rates a kernel runs at (a GEMM on a
roofline with tile quantization, ``gemm_time``; attention's; the sustained clock) are in ``kernel_rates``,
the collectives and the link each kind of parallelism rides in ``comm_costs``, a MoE layer's kernels in
``moe_kernels``: all re-exported here.
``playground.planner.step_time.predict`` adds them up into one step; its docstring says where each
constant and formula comes from.  ``Model`` (``architecture``), ``Cluster``, ``Layout`` and
``Efficiency`` (``layout``) and ``memory_per_gpu`` (``memory``) are re-exported for convenience.
"""

from __future__ import annotations

from playground.planner.architecture import Model
from playground.planner.gemms import (ACTIVATION_GEMMS, ATTENTION_CORE, block_matmuls, layer_gemms, module_recomputed,
                                      per_op_recomputed)
from playground.planner.layout import BYTES, EFFICIENCY, Cluster, Efficiency, Layout
from playground.planner.kernel_rates import (attention_efficiency, causal_executed, fa2_rate,  # noqa: F401
                                             fp8_backward_accumulation, gemm_time, peak_flops, sustained_rate)
from playground.planner.layout_checks import check_layout
from playground.planner.comm_costs import (_hit, _reached, allgather_time, allreduce_time, alltoall_time,  # noqa: F401
                                           context_parallel_link, data_parallel_link, dispatch_time,
                                           expert_data_parallel_link,
                                           expert_parallel_link, overlapped, pipeline_link, replica_link,
                                           ring_network_bandwidth, ring_passes, routing_map_gather_time, shard_link,
                                           tensor_parallel_link)
from playground.planner.memory import memory_per_gpu
from playground.planner.ssm import SCAN_GEMMS
from playground.planner.moe_kernels import (EXPERT_BIAS_BYTES, EXPERT_BIAS_KERNELS, EXPERT_GEMMS,  # noqa: F401
                                           FP8_QUANTIZE_KERNELS, MOE_EXPERT_KERNELS, MOE_LAYER_KERNELS,
                                           expert_bias_kernels, expert_gemm_launches, fp8_expert_casts, moe_gap_time,
                                           moe_host_time, moe_layer_kernels)

__all__ = ["Model", "Cluster", "Layout", "Efficiency", "EFFICIENCY", "BYTES", "FP32_STREAM_BYTES", "BF16_STREAM_BYTES",
           "EAGER_MOE_ROW_BYTES", "EAGER_MOE_ACT_BYTES", "MOE_LAYER_KERNELS", "MOE_EXPERT_KERNELS", "moe_host_time",
           "moe_layer_kernels", "moe_gap_time", "FP8_QUANTIZE_KERNELS", "fp8_expert_casts", "EXPERT_BIAS_KERNELS",
           "EXPERT_BIAS_BYTES", "expert_bias_kernels", "expert_bias_bytes", "EXPERT_GEMMS", "expert_gemm_launches",
           "ring_merge_bytes",
           "check_layout", "layer_gemms",
           "sustained_rate", "gemm_time", "fp8_backward_accumulation", "fa2_rate", "layer_forward", "flops_per_step", "allreduce_time", "allgather_time", "alltoall_time",
           "ring_network_bandwidth", "routing_map_gather_time", "tensor_parallel_link", "context_parallel_link", "data_parallel_link", "expert_data_parallel_link", "shard_link", "replica_link",
           "expert_parallel_link",
           "pipeline_link", "block_matmuls", "per_op_recomputed", "fp8_cast_bytes", "fp8_cast_bytes_per_element", "eager_extra_bytes", "overlapped", "attention_efficiency",
           "dispatch_time", "memory_per_gpu", "permutation_bytes", "activation_bytes", "peak_flops", "causal_executed", "module_recompute_time"]

# HBM bytes per element of a layer's residual stream (T x h) under bf16 autocast over fp32 weights
# (``Layout.fp32_stream``), forward and backward together, charged a third per pass as every
# element-wise kernel is: the embedding's output is fp32, so the stream stays fp32.  Forward, each of
# the two norms reads and writes fp32 (8) and its output is cast to bf16 for the GEMM that follows
# (4 + 2), each residual add reads the fp32 stream and the bf16 branch and writes fp32 (10): 48.
# Backward, each add's gradient is cast to bf16 for its branch (6) and the GEMM's bf16 input
# gradient back to fp32 (6), each norm's backward reads dy and x and writes dx (12), and the stream's
# two gradients are summed (12): 72.  120 in all, charged as 40 a pass.  A bf16 stream's two norms
# (4 each) and two residual adds (3 each) are charged 14 a pass.
FP32_STREAM_BYTES = 40
BF16_STREAM_BYTES = 14
# HBM bytes an eager PyTorch MoE layer's kernels outside its GEMMs move, forward and backward together:
# per element of the k dispatched copies (routing, permutation, the combine's scatter-add and the gates'
# product, and their gradients) and per element of the routed activation (SwiGLU and its gradient).
# Measured: ``bench moe`` on an H200 (results/moe-nvidia-h200.json, five published MoE shapes), the
# grouped path's device time outside its matrix products fitted over the shapes
# (``playground.bench.moe.eager_bytes``: 80.0 and 83.3) and read at ``Efficiency.hbm`` of the datasheet's
# bandwidth; a fused stack moves 12 and 18 (``permutation_bytes``, ``activation_bytes``; 24 and 18 under
# Megatron-Core's all-to-all dispatcher with several experts a rank, which permutes twice).
EAGER_MOE_ROW_BYTES = 80
EAGER_MOE_ACT_BYTES = 83


def ring_merge_bytes(model: Model, layout: Layout, local: bool = False) -> tuple[float, float, int]:
    """``(forward_bytes, backward_bytes, steps)``: the HBM bytes ring attention's merges move in one
    layer for one micro-batch (eq-ring-merge), and the ring's steps, each one merge kernel forward and
    two backward.  Each of the ring's
    steps yields a partial result that is added into a running one: forward, the step's output
    (rescaled by its log-sum-exp) into the output; backward, the step's dQ into dQ and its dK, dV into
    the gradients passed on.  Each add reads the partial and reads and writes the sum: three passes of
    2 bytes an element (Transformer Engine's ``AttnFuncWithCP``, v1.5-v2.2, accumulates in bf16).
    With causal load balancing each step after the first covers three quarters of this rank's rows on
    average (half its queries, or all of them against half a block).  A floor: PyTorch's ring merges in
    fp32, and both copy the half-blocks they slice, which is not counted."""
    c, t = layout.cp, layout.tp
    if c == 1 or layout.cp_method != "ring":
        return 0.0, 0.0, 0
    T = layout.micro_batch * model.seq_len / c
    passes = ring_passes(model, layout, local)
    rows = 1 + 0.75 * passes          # in whole steps' worth of this rank's rows
    out = model.heads * model.value_head_size / t
    grads = (model.heads * model.head_size + model.materialized_kv_heads * (model.head_size + model.value_head_size)) / t
    per_element = 3 * BYTES
    return rows * per_element * T * out, rows * per_element * T * grads, passes + 1


def layer_forward(model: Model, layout: Layout, gpu, eff: Efficiency, moe: bool = False, local: bool = False) -> dict:
    """Seconds of one layer's forward for one micro-batch on one GPU: GEMMs (FP8 when the layout
    says so; the attention core stays bf16), the attention core alone, and the element-wise kernels.
    ``local``: a sliding-window layer, its attention over the window only."""
    b, s, h, t, a = layout.micro_batch, model.seq_len, model.hidden, layout.tp, model.heads
    T = b * s / layout.cp
    keys = model.attended_keys(local)
    gemms = layer_gemms(model, b, t, layout.cp, layout.ep, moe, layout.expert_tp_degree, local)
    core = [g for g in gemms if g[0] in ATTENTION_CORE]
    # the busiest EP rank sets the pace of the routed experts: moe_imbalance x the mean's tokens
    pace = lambda name: layout.moe_imbalance if name.startswith("experts") else 1  # noqa: E731
    kind = lambda name: "bf16" if name in SCAN_GEMMS else layout.dtype  # noqa: E731  (a recurrent scan stays bf16)
    rest = sum(gemm_time(*g[1:], gpu, eff, kind(g[0])) * pace(g[0]) for g in gemms if g[0] not in ATTENTION_CORE)
    # backward of each: the input gradient (M x N by N x K), and the weight gradient (K x M by M x N)
    # accumulated into its fp32 main gradient, micro-batch after micro-batch (an activation's written once)
    rest_backward = sum((gemm_time(c, M, K, N, gpu, eff, kind(name))
                         + gemm_time(c, K, N, M, gpu, eff, kind(name),
                                     out_bytes=BYTES if name in ACTIVATION_GEMMS else 8)) * pace(name)
                        for name, c, M, N, K in gemms if name not in ATTENTION_CORE) \
        * fp8_backward_accumulation(gpu, layout, eff)
    cast = fp8_cast_bytes(model, layout, moe) / 3 if layout.dtype == "fp8" else 0.0  # a third per pass
    if layout.fp32_stream:   # autocast casts each fp32 weight to bf16 where it is used: read 4 B, write 2
        cast += 6 * sum(c * K * N for name, c, M, N, K in gemms if name not in ATTENTION_CORE + ACTIVATION_GEMMS)
    if layout.flash_attention:  # one fused kernel: the causal half it executes, at its kernel's rate; no s^2 traffic
        executed = causal_executed(s, keys)  # 128 x 128 blocks: the diagonal ones run whole
        attn_t = executed * sum(2 * c * M * N * K for _, c, M, N, K in core) \
            / (attention_efficiency(gpu, layout, eff, model.head_size) * gpu.peak_bf16_flops) + eff.kernel_s
        scores_bytes = 4 * T * h / t * BYTES * model.attention_share
    else:
        attn_t = sum(gemm_time(*g[1:], gpu, eff) for g in core)
        # softmax read+write (4), dropout read+write+mask (5) per score
        scores_bytes = (9 if layout.dropout else 4) * a * T * keys / t * model.attention_share
    # the residual stream's norms and adds (bf16, or fp32 under autocast over fp32 weights), 8 more with
    # bias-dropout-add's masks (7 T h an add, not 3): two blocks a layer, or a hybrid's FFN and its mixers
    blocks = (1 + model.attention_share + model.ssm_share) / 2
    replicated = ((FP32_STREAM_BYTES if layout.fp32_stream else BF16_STREAM_BYTES) + (8 if layout.dropout else 0)) \
        * T * h * blocks
    # a hybrid's share of the recurrent mixers' convolution, scan and gated norm; Qwen3-Next's gate on the
    # attention's output (read it and the output, write the product)
    mixer_bytes = model.ssm_share * model.ssm.elementwise_bytes(T, t) if model.ssm_layers else 0.0
    if model.attention_gate:
        mixer_bytes += 3 * BYTES * T * a * model.value_head_size / t * model.attention_share
    if layout.sequence_parallel:
        replicated /= t
    if moe:
        width = model.top_k * model.expert_width + model.shared_width
        replicated += permutation_bytes(model, T, t, layout)
        replicated += expert_bias_bytes(model, gemms)
    else:
        width = model.ffn_width
    mlp_act = activation_bytes(model, T, width, t)
    if layout.kernels == "eager":
        replicated += eager_extra_bytes(model, T, layout.tp if layout.sequence_parallel else 1, layout.fp32_stream)
        mlp_act += 4 * T * width / t if model.gated_mlp else 0            # silu, then the product apart
        if moe:   # routing, permutation and combine, and the routed activation, as measured (a third a pass)
            replicated += EAGER_MOE_ROW_BYTES / 3 * model.top_k * T * h / t - permutation_bytes(model, T, t, layout)
            routed = T * model.top_k * model.expert_width / t
            mlp_act += (EAGER_MOE_ACT_BYTES / 3 - (10 if model.gated_mlp else 4)) * routed
        replicated += 20 * T * model.heads * model.head_size * (1 + model.kv_head_count / model.heads) / t \
            * model.attention_share if not model.position_embeddings else 0   # RoPE on Q and K
    elementwise = (replicated + mlp_act + scores_bytes + mixer_bytes + cast) / (eff.hbm * gpu.hbm_bytes_per_s) \
        + (8 + (model.ssm.kernels * model.ssm_share if model.ssm_layers else 0)) * eff.kernel_s
    if moe:   # the MoE block's kernels' gaps on the device beyond its GEMMs' charged above (a third a pass)
        elementwise += moe_gap_time(model, layout, gemms, eff) / 3
    merge_fwd, merge_bwd, steps = ring_merge_bytes(model, layout, local)
    return {"gemm": rest + attn_t, "attention": attn_t, "elementwise": elementwise, "gemm_backward": rest_backward,
            "ring_merge": merge_fwd / (eff.hbm * gpu.hbm_bytes_per_s) + steps * eff.kernel_s,
            "ring_merge_backward": merge_bwd / (eff.hbm * gpu.hbm_bytes_per_s) + 2 * steps * eff.kernel_s}


def permutation_bytes(model: Model, tokens: float, tp: int, layout: Layout | None = None) -> float:
    """HBM bytes one MoE layer's permutations and unpermutations move per pass: the k dispatched
    copies of each of ``tokens`` tokens, h wide and split over ``tp`` ranks, 4 B per element each
    (written, then read back).  Once, but twice under Megatron-Core's all-to-all dispatcher
    (``layout.ep_dispatch == "alltoall"``) with experts spread over ranks and more than one on each:
    it permutes by expert before the all-to-all, then sorts what arrives from each rank by local
    expert (``sort_chunks_by_idxs``, "Permutation 2" in its token_dispatcher.py since August 2024),
    and undoes both around the combine.  DeepEP delivers a rank's tokens in one buffer, permuted once."""
    sorts = 2 if layout is not None and layout.ep > 1 and layout.ep_dispatch == "alltoall" \
        and model.experts // layout.ep > 1 else 1
    return 4 * sorts * model.top_k * tokens * model.hidden / tp


def expert_bias_bytes(model: Model, gemms) -> float:
    """HBM bytes a pass of one MoE layer moves adding its experts' output biases expert by expert, a third of
    ``EXPERT_BIAS_BYTES`` per element of the experts' output (``gemms``' ``experts_out``); none without biases."""
    if not model.biased_experts:
        return 0.0
    return EXPERT_BIAS_BYTES / 3 * sum(c * M * N for name, c, M, N, K in gemms if name == "experts_out")


def activation_bytes(model: Model, tokens: float, width: float, tp: int) -> float:
    """HBM bytes an MLP's activation (GeLU, or SwiGLU's gate and product) reads and writes for
    ``tokens`` tokens through ``width`` columns split over ``tp`` ranks."""
    return 2 * 2 * tokens * width / tp * (1.5 if model.gated_mlp else 1)


def module_recompute_time(model: Model, layout: Layout, gpu, eff: Efficiency, moe: bool = False,
                          local: bool = False, fwd: dict | None = None) -> float:
    """Seconds Megatron-Core's selective recomputation (``layout.selective_modules``) adds to one
    layer's backward for one micro-batch: ``core_attn`` the attention core (the fused kernel's
    forward), ``mla_up_proj``, ``mlp``, ``moe`` and ``shared_experts`` their GEMMs again (the routed
    experts' at the busiest rank's pace), and the element-wise kernels each module runs: both norms'
    8 T h bytes (``layernorm``), the MLP activation's read and write (``moe_act``, ``mlp``, ``moe``,
    ``shared_experts``), the permutation's 4 k T h, the experts' biases and the forward's third of the kernels'
    gaps (``moe``, ``expert_bias_bytes``, ``moe_gap_time``).  The dispatch all-to-alls ``moe`` runs
    again are the step-time model's; the sequence-parallel all-gather inside a recomputed MLP is left out."""
    modules = layout.selective_modules
    if not modules:
        return 0.0
    b, t, h = layout.micro_batch, layout.tp, model.hidden
    T = b * model.seq_len / layout.cp
    fwd = fwd or layer_forward(model, layout, gpu, eff, moe, local)
    seconds = sum(gemm_time(*g[1:], gpu, eff, layout.dtype) * (layout.moe_imbalance if g[0].startswith("experts") else 1)
                  for g in module_recomputed(model, modules, b, t, layout.cp, layout.ep, moe, layout.expert_tp_degree, local))
    if "core_attn" in modules:   # the fused kernel again, and the ring's merges with it
        seconds += fwd["ring_merge"]
        seconds += fwd["attention"] if layout.flash_attention else \
            sum(gemm_time(*g[1:], gpu, eff) for g in layer_gemms(model, b, t, layout.cp, layout.ep, moe, local=local)
                if g[0] in ATTENTION_CORE)
    act = lambda width: activation_bytes(model, T, width, t)  # noqa: E731
    norms = 1 + model.attention_share + model.ssm_share    # 2 norms, or a hybrid's FFN's and its mixers'
    moved = {"layernorm": 4 * norms * T * h / (t if layout.sequence_parallel else 1)}   # 4 T h each
    if moe:
        routed = act(model.top_k * model.expert_width) * layout.moe_imbalance
        shared = act(model.shared_width) if model.shared_width else 0.0
        gemms = layer_gemms(model, b, t, layout.cp, layout.ep, moe, layout.expert_tp_degree, local)
        moved.update(moe_act=routed, moe=routed + shared + permutation_bytes(model, T, t, layout)
                     + expert_bias_bytes(model, gemms), shared_experts=shared)
    else:
        moved["mlp"] = act(model.ffn_width)
    if moe and "moe" in modules:   # the whole layer again holds the shared experts' and routed activation,
        modules = [m for m in modules if m not in ("moe_act", "shared_experts")]   # and its kernels' gaps again
        seconds += moe_gap_time(model, layout, gemms, eff) / 3
    kernels = [m for m in modules if moved.get(m)]
    return seconds + sum(moved[m] for m in kernels) / (eff.hbm * gpu.hbm_bytes_per_s) + len(kernels) * eff.kernel_s


def fp8_cast_bytes_per_element(scaling: str) -> int:
    """HBM bytes one element's FP8 cast moves (``fp8_cast_bytes``): its absolute maximum read under tensor scaling
    (2), then read and written in FP8 (2 + 1) and written again transposed (1)."""
    return (2 if scaling == "tensor" else 0) + 2 + 1 + 1


def fp8_cast_bytes(model: Model, layout: Layout, moe: bool = False) -> float:
    """HBM bytes one layer's FP8 casts move per micro-batch, forward and backward together.

    Every operand of an FP8 GEMM is scaled and cast from bf16: its absolute maximum read (2 B per
    element, under tensor scaling: Megatron-Bridge's FP8-CS, torchtitan's float8), read again and
    written in FP8 (2 + 1 B), and written once more transposed for the backward GEMM that needs the
    other major order (1 B): 6 B per element.  Delayed and block scaling (``layout.fp8_scaling``) find
    their scales inside the cast and skip the first read: 4 B.  Forward casts each input
    activation (M x K) and each weight (K x N); backward each output gradient (M x N).  A weight is
    cast once per step when ``layout.fp8_weight_cache`` holds and ZeRO-3 does not re-gather it
    (Transformer Engine keeps the FP8 copy from the step's first micro-batch: its share of each
    micro-batch is 1/m), else every micro-batch.  The attention core and the logits stay in bf16
    and cast nothing."""
    per_element = fp8_cast_bytes_per_element(layout.fp8_scaling)
    share = layout.fp8_weight_share   # an activation on the right (ACTIVATION_GEMMS) is cast every micro-batch
    return per_element * sum(c * (M * K + (1 if name in ACTIVATION_GEMMS else share) * K * N + M * N)
                             for name, c, M, N, K in layer_gemms(model, layout.micro_batch, layout.tp, layout.cp,
                                                                 layout.ep, moe, layout.expert_tp_degree)
                             if name not in ATTENTION_CORE + SCAN_GEMMS)


def eager_extra_bytes(model: Model, tokens: float, split: int = 1, fp32_stream: bool = False) -> float:
    """HBM bytes an eager (uncompiled, unfused) block's two RMSNorms move beyond a fused kernel's.

    PyTorch's composite RMSNorm runs as separate kernels, each reading and writing the whole
    activation: upcast to fp32 (2 + 4 B per element), square (4 + 4), mean (4), scale (4 + 4),
    weight (4 + 4), downcast (4 + 2): 40 B against a fused kernel's 4.  On an fp32 stream
    (``fp32_stream``) there is no upcast, and its read, the norm's write and the downcast are the
    stream's own (``FP32_STREAM_BYTES``: 8 + 6 per norm): 34 against 14.  LayerNorm has one native
    kernel and costs nothing extra.  (``layer_forward`` adds the other eager extras: SwiGLU's silu
    and product apart, +4 B per MLP element, and RoPE on Q and K, 20 B per element: upcast, complex
    multiply, downcast.)"""
    if model.norm != "rmsnorm":
        return 0.0
    return 2 * ((34 - (8 + 6)) if fp32_stream else (40 - 4)) * tokens * model.hidden / split


def _layer_flops(model: Model, moe: bool) -> tuple[float, float]:
    """(forward FLOPs of one layer for one sequence, of which the attention core), averaged over
    the sliding-window layers and the others."""
    local = model.local_layers / model.layers
    out = [0.0, 0.0]
    for is_local, share in ((False, 1 - local), (True, local)):
        if share:
            gemms = layer_gemms(model, 1, 1, moe=moe, local=is_local)
            out[0] += share * sum(2 * c * M * N * K for _, c, M, N, K in gemms)
            out[1] += share * sum(2 * c * M * N * K for n, c, M, N, K in gemms if n in ATTENTION_CORE)
    return out[0], out[1]


def flops_per_step(model: Model, layout: Layout, recompute: str | None = None) -> float:
    """FLOPs of one step summed over GPUs, counted from ``layer_gemms`` (for a GPT with a 4h MLP
    this is Megatron's Eq. 3).  ``recompute`` defaults to the layout's (hardware FLOPs); pass
    "none" for model FLOPs.  Full recomputation runs the forward again in ``layout.recompute_share``
    of the blocks."""
    recompute = layout.recompute if recompute is None else recompute
    passes = 3 + (layout.recompute_share if recompute == "full" else 0)
    total = 0.0
    for moe, count in ((False, model.layers - model.moe_layers), (True, model.moe_layers)):
        if count:
            fwd, core = _layer_flops(model, moe)
            if recompute == "selective":   # Megatron-Core's modules: the attention core by default
                modules = layout.selective_modules if layout.recompute == "selective" else ("core_attn",)
                again = (core if "core_attn" in modules else 0) + \
                    sum(2 * c * M * N * K for _, c, M, N, K in module_recomputed(model, modules, 1, 1, moe=moe))
            else:
                again = sum(2 * c * M * N * K for _, c, M, N, K in per_op_recomputed(model, 1, 1, moe=moe)) \
                    if recompute == "op" else 0
            total += count * (passes * fwd + again)
    logits = 2 * model.seq_len * model.hidden * model.vocab * 3
    return layout.global_batch * (total + logits)
