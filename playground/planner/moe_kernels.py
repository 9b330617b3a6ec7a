"""A MoE layer's kernels: how many it launches, the gaps they leave on the device, and the host's time.

Counted on one H200 (``python -m playground.bench moe``, ``playground.bench.moe.launch_fit``).  Each kernel
costs the device a gap, ``Efficiency.kernel_s`` launched eagerly and ``graph_kernel_s`` from a CUDA graph
(``costs.layer_forward`` adds what its GEMMs do not already carry), and the host ``host_kernel_s`` to
launch (``step_time`` waits for what of the launching outlasts the layer's device work).  Under FP8,
Transformer Engine casts the experts' operands one expert at a time, and biased experts get their output biases
expert by expert from Python, and Transformer Engine's grouped GEMM issues a cuBLASLt GEMM per expert from C++, each
read from the stacks' code (``fp8_expert_casts``, ``expert_bias_kernels``, ``expert_gemm_launches``).
``costs`` re-exports all of it.
"""

from __future__ import annotations

from playground.planner.architecture import Model
from playground.planner.layout import Efficiency, Layout

__all__ = ["MOE_LAYER_KERNELS", "MOE_EXPERT_KERNELS", "FP8_QUANTIZE_KERNELS", "EXPERT_BIAS_KERNELS", "EXPERT_BIAS_BYTES",
           "EXPERT_GEMMS", "expert_gemm_launches", "moe_layer_kernels", "fp8_expert_casts", "expert_bias_kernels",
           "moe_gap_time", "moe_host_time"]

# Kernels the host launches for one MoE layer (routing, permutation, experts, combine), forward and
# backward, as counted on one H200 (``playground.bench.moe.launch_fit``): 107-111 with each expert GEMM one
# grouped kernel, and 17 more for every local expert when each expert's GEMMs, its slice of the SwiGLU
# and their gradients are launched apart (after the host sync that reads how many rows each expert got)
MOE_LAYER_KERNELS = 108
MOE_EXPERT_KERNELS = 17


def moe_layer_kernels(model: Model, layout: Layout) -> float:
    """Kernels one MoE layer launches for one micro-batch, forward and backward (``MOE_LAYER_KERNELS``,
    plus ``MOE_EXPERT_KERNELS`` per local expert when each expert runs on its own)."""
    local = model.experts / layout.ep
    return MOE_LAYER_KERNELS + (MOE_EXPERT_KERNELS * local if layout.moe_launch == "per_expert" else 0)


# Kernels Transformer Engine launches to cast one expert's operand to FP8 when its GroupedLinear splits the
# experts' rows (``split_quantize``, which fuses the experts into one kernel under delayed scaling only, and casts
# them one by one otherwise; transformer_engine/pytorch/csrc/extensions/cast.cpp, multi_tensor_quantize_impl, read
# at d0067d0da): under tensor scaling zero the absolute maximum, find it, turn it into a scale, cast (quantizer.cpp,
# Float8CurrentScalingQuantizer::quantize_impl; recipe/current_scaling.cu); under block scaling one cast that finds
# its blocks' scales.  Under delayed scaling one kernel casts every expert at once.
FP8_QUANTIZE_KERNELS = {"tensor": 4, "block": 1, "delayed": 0}


def fp8_expert_casts(model: Model, layout: Layout) -> tuple[float, float]:
    """``(forward, backward)`` kernels that cast one MoE layer's expert operands to FP8 for one micro-batch under
    ``--dtype fp8``: forward each local expert's two inputs and, once a step with the weight cache, its two weights
    (``layout.fp8_weight_share``); backward the gradients of its two outputs.  Each cast is
    ``FP8_QUANTIZE_KERNELS`` kernels an expert, or one for all the experts under delayed scaling."""
    if layout.dtype != "fp8":
        return 0.0, 0.0
    per_expert = FP8_QUANTIZE_KERNELS[layout.fp8_scaling]
    per_cast = per_expert * model.experts / layout.ep if per_expert else 1
    return (2 + 2 * layout.fp8_weight_share) * per_cast, 2 * per_cast


# How today's stacks add biased experts' output biases (``Model.biased_experts``, as gpt-oss's experts carry
# them): expert by expert from Python, each expert's bias scaled by its rows' routing probabilities in fp32, then
# the experts' rows concatenated and cast back to bf16.  Megatron-Core's TEGroupedMLP._apply_bias, from the commit
# that gave experts biases (a329dd6, September 2025) until its graph-safe packed path (883533e, August 2026); NeMo
# AutoModel's grouped experts of 2025 alike.  Kernels, forward and backward: per local expert the product and the
# sum, then the product's two gradients (a product and a sum each) and the cast of the sum's input gradient; per
# layer the concatenation and the cast back, then the cast's gradient and the two splits' (rows and probabilities).
EXPERT_BIAS_KERNELS = {"per_expert": (2, 5), "per_layer": (2, 3)}
# HBM bytes per element of the experts' output on a rank (its routed copies x h), forward and backward: forward the
# scaled bias written in fp32 (4), the sum (2 + 4 read, 4 written), the concatenation (4 + 4), the cast (4 + 2): 28;
# backward the cast's gradient (2 + 4), each expert's input gradient cast to bf16 (4 + 2), the split's
# concatenation (2 + 2), the product's two gradients (each 4 read, 4 written, 4 summed): 40
EXPERT_BIAS_BYTES = 28 + 40


def expert_bias_kernels(model: Model, layout: Layout) -> tuple[float, float]:
    """``(forward, backward)`` kernels that add one MoE layer's expert output biases for one micro-batch, expert by
    expert (``EXPERT_BIAS_KERNELS``); none for experts without biases."""
    if not model.biased_experts:
        return 0.0, 0.0
    local = model.experts / layout.ep
    (forward, backward), (fixed_forward, fixed_backward) = EXPERT_BIAS_KERNELS["per_expert"], EXPERT_BIAS_KERNELS["per_layer"]
    return forward * local + fixed_forward, backward * local + fixed_backward


# The expert GEMMs Transformer Engine's GroupedLinear issues per local expert when each grouped GEMM is a cuBLASLt GEMM
# an expert (``moe_launch="multi_stream"``: multi_stream_cublas_gemm, its default through every release read):
# forward the two matrices, backward each one's input and weight gradients
EXPERT_GEMMS = {"forward": 2, "backward": 4}


def expert_gemm_launches(model: Model, layout: Layout) -> tuple[float, float]:
    """``(forward, backward)`` cuBLASLt GEMMs one MoE layer's experts issue one by one for one micro-batch under
    ``moe_launch="multi_stream"`` (``EXPERT_GEMMS`` a local expert); none otherwise."""
    if layout.moe_launch != "multi_stream":
        return 0.0, 0.0
    local = model.experts / layout.ep
    return EXPERT_GEMMS["forward"] * local, EXPERT_GEMMS["backward"] * local


def moe_gap_time(model: Model, layout: Layout, gemms, eff: Efficiency) -> float:
    """Seconds of gaps one MoE layer's kernels leave on the device for one micro-batch, forward and backward,
    beyond those ``layer_forward`` already charges its GEMMs (the router's and the experts', ``kernel_s``
    once forward and twice backward): each of ``moe_layer_kernels`` at ``eff.kernel_s`` launched eagerly, at
    ``eff.graph_kernel_s`` when a CUDA graph replays the layer (``moe_launch="graphed"``), and so each of the
    experts' FP8 casts (``fp8_expert_casts``) and bias kernels (``expert_bias_kernels``)."""
    gap = eff.graph_kernel_s if layout.moe_launch == "graphed" else eff.kernel_s
    priced = 3 * sum(1 for name, *_ in gemms if name == "router" or name.startswith(("experts", "shared")))
    return max(0.0, moe_layer_kernels(model, layout) * gap - priced * eff.kernel_s) \
        + (sum(fp8_expert_casts(model, layout)) + sum(expert_bias_kernels(model, layout))) * gap


def moe_host_time(model: Model, layout: Layout, eff: Efficiency) -> float:
    """Seconds the host spends launching one MoE layer's kernels for one micro-batch, forward and backward
    (and the forward again when recomputed): ``MOE_LAYER_KERNELS``, plus ``MOE_EXPERT_KERNELS`` per local
    expert when they run one by one (``moe_launch="per_expert"``), each ``eff.host_kernel_s``; none when
    the layer replays from a CUDA graph.  The experts' bias kernels (``expert_bias_kernels``) are Python's too, at
    ``eff.host_kernel_s``; their FP8 casts (``fp8_expert_casts``) are launched from Transformer Engine's C++ loop,
    each at ``eff.kernel_s`` (whose spread starts at a raw launch's cost).  Under ``moe_launch="multi_stream"`` each
    grouped GEMM is issued as a cuBLASLt GEMM per local expert from that C++ loop (``expert_gemm_launches``), each
    ``eff.expert_gemm_host_s`` as Transformer Engine measured it: the device does not wait on their gaps, which four
    streams overlap, but the host does.  The attention block's own launches are not counted."""
    if layout.moe_launch == "graphed":
        return 0.0
    kernels = moe_layer_kernels(model, layout)
    again = 1.0 if "moe" in layout.selective_modules else layout.full_recompute_share
    cast_forward, cast_backward = fp8_expert_casts(model, layout)
    bias_forward, bias_backward = expert_bias_kernels(model, layout)
    gemm_forward, gemm_backward = expert_gemm_launches(model, layout)
    return (kernels * (1 + again / 3) + bias_forward * (1 + again) + bias_backward) * eff.host_kernel_s \
        + (cast_forward * (1 + again) + cast_backward) * eff.kernel_s \
        + (gemm_forward * (1 + again) + gemm_backward) * eff.expert_gemm_host_s   # the forward: a third of the layer's
