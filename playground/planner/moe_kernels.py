"""A MoE layer's kernels: how many it launches, the gaps they leave on the device, and the host's time.

Counted on one H200 (``python -m playground.bench moe``, ``playground.bench.moe.launch_fit``).  Each kernel
costs the device a gap, ``Efficiency.kernel_s`` launched eagerly and ``graph_kernel_s`` from a CUDA graph
(``costs.layer_forward`` adds what its GEMMs do not already carry), and the host ``host_kernel_s`` to
launch (``step_time`` waits for what of the launching outlasts the layer's device work).  Under FP8,
Transformer Engine casts the experts' operands one expert at a time, read from its code (``fp8_expert_casts``).
``costs`` re-exports all of it.
"""

from __future__ import annotations

from playground.planner.architecture import Model
from playground.planner.layout import Efficiency, Layout

__all__ = ["MOE_LAYER_KERNELS", "MOE_EXPERT_KERNELS", "FP8_QUANTIZE_KERNELS", "moe_layer_kernels", "fp8_expert_casts",
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


def moe_gap_time(model: Model, layout: Layout, gemms, eff: Efficiency) -> float:
    """Seconds of gaps one MoE layer's kernels leave on the device for one micro-batch, forward and backward,
    beyond those ``layer_forward`` already charges its GEMMs (the router's and the experts', ``kernel_s``
    once forward and twice backward): each of ``moe_layer_kernels`` at ``eff.kernel_s`` launched eagerly, at
    ``eff.graph_kernel_s`` when a CUDA graph replays the layer (``moe_launch="graphed"``), and so each of the
    experts' FP8 casts (``fp8_expert_casts``)."""
    gap = eff.graph_kernel_s if layout.moe_launch == "graphed" else eff.kernel_s
    priced = 3 * sum(1 for name, *_ in gemms if name == "router" or name.startswith(("experts", "shared")))
    return max(0.0, moe_layer_kernels(model, layout) * gap - priced * eff.kernel_s) \
        + sum(fp8_expert_casts(model, layout)) * gap


def moe_host_time(model: Model, layout: Layout, eff: Efficiency) -> float:
    """Seconds the host spends launching one MoE layer's kernels for one micro-batch, forward and backward
    (and the forward again when recomputed): ``MOE_LAYER_KERNELS``, plus ``MOE_EXPERT_KERNELS`` per local
    expert when they run one by one (``moe_launch="per_expert"``), each ``eff.host_kernel_s``; none when
    the layer replays from a CUDA graph.  The experts' FP8 casts (``fp8_expert_casts``) are launched from
    Transformer Engine's C++ loop, each at ``eff.kernel_s`` (whose spread starts at a raw launch's cost).  The
    attention block's own launches are not counted."""
    if layout.moe_launch == "graphed":
        return 0.0
    kernels = moe_layer_kernels(model, layout)
    again = 1.0 if "moe" in layout.selective_modules else layout.full_recompute_share
    cast_forward, cast_backward = fp8_expert_casts(model, layout)
    return kernels * (1 + again / 3) * eff.host_kernel_s \
        + (cast_forward * (1 + again) + cast_backward) * eff.kernel_s   # the forward is about a third of the layer's
