"""What one transformer layer costs one micro-batch on one GPU, forward, backward and recomputed, and the
communication it waits for.

``layer_costs`` prices a layer's passes from ``costs.layer_forward`` (its GEMMs, attention and element-wise
kernels): the backward's input and weight gradients, the recomputation its policy asks for, TP's all-reduces
(overlapped with the GEMMs beside them when the layout says so), CP's exchange, a MoE layer's dispatch and
combine all-to-alls (overlapped with another micro-batch's pass under ``ep_overlap``), the time the device
waits for the host to launch the MoE layer's kernels, and what of the offloaded activations' copies outlasts the
passes they hide behind (``offload_time``).  Sliding-window layers are averaged with the
whole-sequence ones in the model's proportion.  ``step_time.predict`` multiplies these per-layer costs by the
layers on each pipeline stage and the micro-batches of a step.
"""

from __future__ import annotations

from playground.planner.activations import layer_offloaded_bytes
from playground.planner.comm_costs import context_parallel_time, mixer_cp_time
from playground.planner.costs import (BYTES, Cluster, Efficiency, Layout, Model, allreduce_time, dispatch_time,
                                      gemm_time, layer_forward, layer_gemms, module_recompute_time, moe_host_time,
                                      overlapped, per_op_recomputed, routing_map_gather_time, tensor_parallel_link)
from playground.planner.errors import PlanError
from playground.planner.kernel_rates import FUSED_ATTENTION_BACKWARD

__all__ = ["layer_costs", "layer_elementwise", "layer_gemm_flops", "offload_time"]


def layer_costs(model: Model, cluster: Cluster, layout: Layout, eff: Efficiency, moe: bool) -> dict:
    """Seconds one layer costs one micro-batch on one GPU, forward + backward (+ recompute), by part:
    with sliding-window layers, the average over them and the whole-sequence ones (they interleave,
    so every stage holds them in about the model's proportion)."""
    local = model.local_layers / model.layers
    if not local:
        return _one_layer(model, cluster, layout, eff, moe, False)
    if local == 1:
        return _one_layer(model, cluster, layout, eff, moe, True)
    return _mix(_one_layer(model, cluster, layout, eff, moe, False),
                _one_layer(model, cluster, layout, eff, moe, True), local)


def _mix(whole: dict, windowed: dict, share: float) -> dict:
    return {k: _mix(v, windowed[k], share) if isinstance(v, dict) else (1 - share) * v + share * windowed[k]
            for k, v in whole.items()}


def layer_elementwise(fwd: dict) -> float:
    """A layer's element-wise seconds, forward and backward: its kernels thrice, the ring's merges."""
    return 3 * fwd["elementwise"] + fwd["ring_merge"] + fwd["ring_merge_backward"]


def _one_layer(model: Model, cluster: Cluster, layout: Layout, eff: Efficiency, moe: bool,
                     local: bool) -> dict:
    gpu, t, c = cluster.gpu, layout.tp, layout.cp
    T = layout.micro_batch * model.seq_len / c
    fwd = layer_forward(model, layout, gpu, eff, moe, local)
    f = fwd["gemm"] + fwd["elementwise"] + fwd["ring_merge"]
    rc = layout.full_recompute_share          # full recomputation: in that share of the blocks (an average layer)
    if layout.recompute == "selective":   # Megatron's: the attention core again, or the modules given
        recompute = module_recompute_time(model, layout, gpu, eff, moe, local, fwd)
    elif layout.recompute == "op":        # torchtitan's per-op: every other matmul and the element-wise ops
        recompute = fwd["elementwise"] + sum(gemm_time(*g[1:], gpu, eff, layout.dtype) for g in
                                             per_op_recomputed(model, layout.micro_batch, t, c, layout.ep, moe,
                                                               layout.expert_tp_degree))
    else:
        recompute = rc * f
    # TP: 2 all-reduces of the T h activation per forward (SP's gather/scatter pairs move the same
    # bytes), 2 in backward, 2 more when the forward is recomputed
    tp_link, tp_bw = tensor_parallel_link(layout, cluster)
    one_ar = allreduce_time(T * model.hidden * BYTES, t, tp_bw, eff, tp_link) \
        * (1 + model.attention_share + model.ssm_share) / 2   # a hybrid: one a mixer and one the FFN's
    tp = one_ar * (4 + 2 * rc)
    gemms = fwd["gemm"] - fwd["attention"]
    if t > 1 and layout.tp_overlap == "all":       # each collective in chunks behind the GEMM beside it
        tp = overlapped(tp, (3 + rc) * gemms, gpu, eff, eff.tp_overlap_hidden)
    elif t > 1 and layout.tp_overlap == "forward":  # the forward passes' only; backward's stay exposed
        tp = overlapped(one_ar * (2 + 2 * rc), (1 + rc) * gemms, gpu, eff, eff.tp_overlap_hidden) + 2 * one_ar
    cp, att = 0.0, model.attention_share   # a hybrid: its share of attention layers, and of its mixers' exchanges
    if c > 1 and att:
        cp = att * context_parallel_time(model, cluster, layout, eff, fwd["attention"] / att, T, rc, local)
    if c > 1 and model.ssm_layers:
        cp += model.ssm_share * mixer_cp_time(model, cluster, layout, eff, T, rc)
    ep = 0.0
    if moe and layout.ep > 1:  # dispatch + combine, forward, backward and recompute
        tokens = T / (t if layout.sequence_parallel else 1)
        one = dispatch_time(model, layout, cluster, tokens, eff)
        # DeepEP dispatches in FP8 when the GEMMs are (the forward's and recomputed forward's dispatch);
        # HybridEP in bf16 (Megatron-Core asserts it: "HybridEP dispatcher does not support fp8 dispatch now"),
        # after all-gathering the routing maps, which combine and backward reuse
        fp8 = layout.ep_dispatch == "deepep" and layout.dtype == "fp8"
        first = dispatch_time(model, layout, cluster, tokens, eff, element_bytes=1) if fp8 else one
        first += routing_map_gather_time(model, layout, cluster, tokens, eff)
        again = 1.0 if "moe" in layout.selective_modules else rc   # the recomputed forward dispatches again
        ep = (1 + again) * (first + one) + 2 * one
    # backward: each GEMM's input and weight gradients, the element-wise kernels twice, and the
    # attention core twice -- a fused kernel's FUSED_ATTENTION_BACKWARD times, for it recomputes the scores
    backward = fwd["gemm_backward"] + 2 * fwd["elementwise"] + fwd["ring_merge_backward"] \
        + (FUSED_ATTENTION_BACKWARD if layout.flash_attention else 2.0) * fwd["attention"]
    if ep and layout.ep_overlap:   # paired with another micro-batch's pass: its compute hides them
        ep = overlapped(ep, f + backward + recompute, gpu, eff, eff.ep_overlap_hidden)
    # the host launches a MoE layer's kernels while the GPU runs earlier ones; the dispatcher's host sync
    # lets it run no further ahead than the layer, so the GPU waits for whatever of the launching outlasts
    # the layer's device time
    device = f + backward + recompute + tp + cp + ep
    launch = moe_host_time(model, layout, eff) if moe else 0.0
    return {"forward": f, "backward": backward, "compute": f + backward, "recompute": recompute, "tp": tp,
            "cp": cp, "ep": ep, "host": max(0.0, launch - device), "device": device, "launch": launch,
            "offload": offload_time(model, cluster, layout, eff, moe, f, backward + recompute), "parts": fwd}


def offload_time(model: Model, cluster: Cluster, layout: Layout, eff: Efficiency, moe: bool, forward: float,
                 backward: float) -> float:
    """Seconds a layer waits on its offloaded activations (``Layout.offload_modules``): they go to host memory
    during its forward and come back during its backward, each way on the GPU's host link (PCIe or NVLink-C2C, at
    the ``link`` share of its datasheet rate) on a copy engine, so only what outlasts that pass is exposed."""
    off = layer_offloaded_bytes(model, layout, moe)
    if not off:
        return 0.0
    rate = cluster.gpu.host_link_bytes_per_s
    if not rate:
        raise PlanError(f"the hardware table gives {cluster.gpu.name} no link to host memory, so offloading "
                        "activations cannot be priced there")
    one_way = off / (eff.link * rate)
    return max(0.0, one_way - forward) + max(0.0, one_way - backward)


def layer_gemm_flops(model: Model, layout: Layout, moe: bool) -> float:
    """FLOPs of one layer's forward GEMMs on one GPU (``layer_gemms``), averaged over its whole-sequence
    and sliding-window layers as ``layer_costs`` averages their time."""
    def flops(local):
        return sum(2 * c * M * N * K for _, c, M, N, K in layer_gemms(
            model, layout.micro_batch, layout.tp, layout.cp, layout.ep, moe, layout.expert_tp_degree, local))
    share = model.local_layers / model.layers
    return (1 - share) * flops(False) + share * flops(True) if share else flops(False)
