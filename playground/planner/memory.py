"""Memory per GPU for the planner: model states, activations, and the smallest layout that fits.

* Model states: the ZeRO formulas (Rajbhandari et al. 2020), kept once in ``playground.zero.accounting``.
* Activations: Korthikanti et al.'s (2022) bytes per layer, for each recompute setting, with and
  without sequence parallelism.
* Forced parallelism: the smallest TP x PP (TP inside one node) whose model states plus activations
  fit in the GPU's usable memory, HBM less ``MEMORY_RESERVE``.

``playground.planner.capacity`` (the capacity plan) and ``playground.planner.costs`` (the step-time model)
both read memory from here.
"""

from __future__ import annotations

import math
import numbers

from playground import hardware
from playground.planner.errors import PlanError
from playground.zero import accounting as zero_accounting

__all__ = ["MEMORY_RESERVE", "RECOMPUTE", "model_state_bytes", "activation_bytes_per_layer",
           "usable_memory_bytes", "per_gpu_memory", "forced_parallelism"]

# Share of HBM a plan leaves free for what the formulas do not count: the CUDA context and cuBLAS
# workspace, NCCL buffers, allocator fragmentation, and the last stage's logits and loss.
MEMORY_RESERVE = 0.10
RECOMPUTE = ("none", "selective", "full")


def model_state_bytes(params: float, dp: int = 1, zero_stage: int = 0,
                      optimizer_bytes_per_param: float = 12, param_bytes: float = 2,
                      grad_bytes: float = 2) -> dict:
    """Bytes per GPU of parameters, gradients and optimizer state (Rajbhandari et al. 2020).

    Mixed-precision Adam keeps 2-byte parameters and gradients and K = 12 bytes of optimizer
    state (fp32 master weights, momentum, variance).  ZeRO stage 1 shards the optimizer state
    over the ``dp`` data-parallel ranks, stage 2 also the gradients, stage 3 also the parameters.
    The formulas live in one place, ``playground.zero.accounting.predicted`` (the ZeRO chapter's);
    this wrapper gives them the planner's argument names and errors.
    """
    recipe = zero_accounting.Recipe("planner", param_bytes, grad_bytes, optimizer_bytes_per_param)
    if isinstance(dp, float) and dp == int(dp):
        dp = int(dp)
    try:
        return zero_accounting.predicted(params, dp, zero_stage, recipe)
    except ValueError as e:
        raise PlanError(f"zero_stage/dp: {e}") from None


def activation_bytes_per_layer(seq_len: int, micro_batch: int, hidden: int, heads: int,
                               recompute: str = "none", tp: int = 1, dropout: bool = True,
                               flash_attention: bool = False, sequence_parallel: bool = True) -> float:
    """Activation bytes one transformer layer keeps for backward (Korthikanti et al. 2022).

    16-bit activations, 1-byte dropout masks, tensor parallelism of degree ``tp``.  With sequence
    parallelism every saved tensor is split over the t ranks: s b h (34 + 5 a s / h) / t with no
    recomputation, 34 s b h / t with selective recomputation (the a s^2 b attention scores are
    recomputed), 2 s b h / t with full recomputation (only the layer's input is kept).  Without
    sequence parallelism the LayerNorm and dropout regions stay replicated on every TP rank:
    s b h (10 + 24 / t + 5 a s / (h t)), s b h (10 + 24 / t) selective, and the full layer input
    2 s b h with full recomputation.  Without dropout the two s b h masks (replicated without SP)
    go (34 -> 32, 10 -> 8) and the scores cost 2 a s^2 b instead of 5; a fused (flash) attention
    kernel keeps no scores at all, only a 4-byte log-sum-exp per row (4 a s b).
    """
    if recompute not in RECOMPUTE:
        raise PlanError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    for name, value in (("seq_len", seq_len), ("micro_batch", micro_batch), ("hidden", hidden),
                        ("heads", heads), ("tp", tp)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise PlanError(f"{name} must be a whole number >= 1, got {value!r}")
    s, b, h, a, t = seq_len, micro_batch, hidden, heads, tp
    if recompute == "full":
        return 2 * s * b * h / (t if sequence_parallel else 1)
    if sequence_parallel:
        per_token = (34 if dropout else 32) * s * b * h / t
    else:  # Korthikanti et al. Eq. 2: 10 s b h replicated (LayerNorms, their outputs, dropout masks)
        per_token = (10 if dropout else 8) * s * b * h + 24 * s * b * h / t
    if recompute == "selective":
        return per_token
    scores = 4 * a * s * b if flash_attention else (5 if dropout else 2) * a * s * s * b
    return per_token + scores / t


def usable_memory_bytes(gpu) -> float:
    """The bytes of HBM a plan may fill: the capacity less ``MEMORY_RESERVE`` of it.  ``gpu``: a
    ``hardware`` entry or its name."""
    try:
        spec = hardware.gpu(gpu)
    except hardware.UnknownGPUError as e:
        raise PlanError(str(e)) from None
    return spec.hbm_bytes * (1 - MEMORY_RESERVE)


def per_gpu_memory(params, arch, tp, pp, dp, zero_stage, recompute, micro_batch, opt_bytes) -> dict:
    stage_layers = math.ceil(arch["layers"] / pp)  # the first (fullest) pipeline stage
    states = model_state_bytes(params * stage_layers / arch["layers"] / tp, dp, zero_stage, opt_bytes)
    # 1F1B: the first stage holds pp micro-batches in flight for each of its layers
    acts = stage_layers * pp * activation_bytes_per_layer(arch["seq_len"], micro_batch, arch["hidden"],
                                                          arch["heads"], recompute, tp)
    return {"model_states": states["total"], "model_state_parts": states, "activations": acts,
            "total": states["total"] + acts}


def forced_parallelism(params: float, arch: dict, gpu, gpus: int | None = None,
                       zero_stage: int = 0, recompute: str = "none", micro_batch: int = 1,
                       optimizer_bytes_per_param: float = 12) -> dict:
    """The smallest TP x PP whose per-GPU memory fits, TP within a node; ties go to less PP.

    TP must divide the heads and stay within ``gpu.gpus_per_node``; PP is at most the layers
    (the first stage takes ceil(l / PP) of them); with ``gpus`` given, TP x PP must divide it and
    DP = gpus / (TP x PP).  "Fits" means model states plus activations within the usable memory,
    ``usable_memory_bytes`` (HBM less ``MEMORY_RESERVE``).
    ``fits`` is False (and the most sharded layout tried is reported) when nothing fits.
    """
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, numbers.Integral)
                             or gpus < 1):
        raise PlanError(f"gpus must be a whole number >= 1 (or None), got {gpus!r}")
    spec = hardware.gpu(gpu)
    tps = [t for t in (2 ** k for k in range(8)) if t <= spec.gpus_per_node and arch["heads"] % t == 0]
    pps = range(1, arch["layers"] + 1)
    layouts = sorted(((t, p) for t in tps for p in pps if not gpus or gpus % (t * p) == 0),
                     key=lambda tp_pp: (tp_pp[0] * tp_pp[1], tp_pp[1]))
    last = None
    for t, p in layouts:
        dp = gpus // (t * p) if gpus else 1
        mem = per_gpu_memory(params, arch, t, p, dp, zero_stage, recompute, micro_batch,
                              optimizer_bytes_per_param)
        last = {"dp": dp, "tp": t, "pp": p, "zero_stage": zero_stage, "fits": False, "memory": mem}
        if mem["total"] <= usable_memory_bytes(spec):
            last["fits"] = True
            return last
    if last is None:  # no layout divides the GPU count
        mem = per_gpu_memory(params, arch, 1, 1, gpus or 1, zero_stage, recompute, micro_batch,
                              optimizer_bytes_per_param)
        last = {"dp": gpus or 1, "tp": 1, "pp": 1, "zero_stage": zero_stage, "fits": False, "memory": mem}
    return last
