"""A MoE layer's kernels: how many it launches, which of them the GEMM pricing leaves out, and the host's time.

Counted on one H200 (``python -m playground.bench moe``, ``playground.bench.moe.launch_fit``): each kernel
costs the device a gap of ``Efficiency.kernel_s`` (``costs.layer_forward`` adds those its GEMMs do not
already carry) and the host ``Efficiency.host_kernel_s`` to launch (``step_time`` waits for what of the
launching outlasts the layer's device work).  ``costs`` re-exports all of it.
"""

from __future__ import annotations

from playground.planner.architecture import Model
from playground.planner.layout import Efficiency, Layout

__all__ = ["MOE_LAYER_KERNELS", "MOE_EXPERT_KERNELS", "moe_layer_kernels", "moe_uncounted_kernels", "moe_host_time"]

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


def moe_uncounted_kernels(model: Model, layout: Layout, gemms) -> float:
    """The MoE block's kernels, forward and backward, that ``layer_forward`` does not already price a
    launch for: ``moe_layer_kernels`` less its GEMMs (the router's and the experts', one kernel a pass
    forward and two backward).  A CUDA graph replays them about a microsecond apart (1.1 us at the median
    on the H200), which is not priced: none for ``moe_launch="graphed"``."""
    if layout.moe_launch == "graphed":
        return 0.0
    priced = 3 * sum(1 for name, *_ in gemms if name == "router" or name.startswith(("experts", "shared")))
    return max(0.0, moe_layer_kernels(model, layout) - priced)


def moe_host_time(model: Model, layout: Layout, eff: Efficiency) -> float:
    """Seconds the host spends launching one MoE layer's kernels for one micro-batch, forward and backward
    (and the forward again when recomputed): ``MOE_LAYER_KERNELS``, plus ``MOE_EXPERT_KERNELS`` per local
    expert when they run one by one (``moe_launch="per_expert"``), each ``eff.host_kernel_s``; none when
    the layer replays from a CUDA graph.  The attention block's own launches are not counted."""
    if layout.moe_launch == "graphed":
        return 0.0
    kernels = moe_layer_kernels(model, layout)
    again = 1.0 if "moe" in layout.selective_modules else layout.full_recompute_share
    return kernels * (1 + again / 3) * eff.host_kernel_s   # the forward is about a third of them
