"""How fast a kernel runs on a GPU: the rates the step-time model prices its work at.

The dense tensor-core peak by dtype (``peak_flops``) and the share of it a GPU holds through a run
(``sustained_rate``; the constants at those rates, ``at_run_rates``), a GEMM on the roofline of eq-gemm
with tile quantization (``gemm_time``), the FP8 backward's split accumulation on a Hopper
(``fp8_backward_accumulation``), a fused attention kernel's rate (``attention_efficiency``, ``fa2_rate``)
and the share of the scores a causal one executes (``causal_executed``).  Each constant they read is an ``Efficiency`` field, traced to its source in
``efficiency``.  ``costs`` prices a layer's pieces with them and re-exports them.
"""

from __future__ import annotations

import math
from dataclasses import replace

from playground.planner.efficiency import ATTENTION_HEAD_DIM_64
from playground.planner.errors import PlanError
from playground.planner.layout import BYTES, EFFICIENCY, Efficiency, Layout

__all__ = ["peak_flops", "sustained_rate", "at_run_rates", "gemm_time", "fp8_backward_accumulation", "fa2_rate",
           "attention_efficiency", "causal_executed", "FUSED_ATTENTION_BACKWARD"]

# a fused attention's backward in forwards: it recomputes the scores, five matmuls to the forward's two
# (flash-attention's own benchmarks count backward as 2.5 forwards)
FUSED_ATTENTION_BACKWARD = 2.5


def peak_flops(gpu, dtype: str = "bf16") -> float:
    """Dense tensor-core peak for ``dtype``; FP8 on a GPU without it is an error."""
    if dtype == "fp8":
        if not gpu.peak_fp8_flops:
            raise PlanError(f"the {gpu.name} has no FP8 tensor cores; use --dtype bf16")
        return gpu.peak_fp8_flops
    return gpu.peak_bf16_flops


def sustained_rate(gpu, eff: Efficiency, dtype: str = "bf16", scaling: str = "tensor") -> float:
    """Share of a short benchmark's tensor-core rate a GPU holds through a training run, at its power
    limit for hours.  A Hopper's GEMMs alone hold ``eff.hopper_sustained`` of it in bf16 (gpu-fryer's
    minute-long matmul) and all of it in FP8 (which draws less power); while a collective runs beside
    them the clock falls to ``eff.comm_clock`` of a short benchmark's (DeepGEMM's H800), for
    ``eff.comm_share`` of the step.  A Blackwell's bf16 work holds ``eff.blackwell_sustained``
    (FlashAttention-4 held back to back on a B200), its FP8 GEMMs ``eff.blackwell_fp8`` of ``fp8_gemm``'s
    rate, block-scaled (MXFP8, ``scaling="block"``) ``eff.blackwell_mxfp8`` (Transformer Engine's GEMM
    benchmark on a Blackwell), nothing measured beside a collective.  GPUs without a sustained measurement: 1."""
    arch = getattr(gpu, "architecture", "")
    if arch == "blackwell":
        if dtype != "fp8":
            return eff.blackwell_sustained
        return eff.blackwell_mxfp8 if scaling == "block" else eff.blackwell_fp8
    if arch != "hopper":
        return 1.0
    alone = 1.0 if dtype == "fp8" else eff.hopper_sustained
    return (1 - eff.comm_share) * alone + eff.comm_share * min(alone, eff.comm_clock)


_RUN_RATES: dict = {}   # (id of the constants, clock, held rates) -> (those constants, them at those rates)


def at_run_rates(eff: Efficiency, clock: float, held: float, held_fp8: float) -> Efficiency:
    """``eff`` with the tensor cores' rates (GEMMs and the attention kernels) at ``clock`` x the share a GPU
    holds through a run (``held``; ``held_fp8`` for FP8 GEMMs).  A range or a search asks for the same few
    thousands of times: each is made once (the constants' object itself kept, so its id names it)."""
    key = (id(eff), clock, held, held_fp8)
    hit = _RUN_RATES.get(key)
    if hit is None or hit[0] is not eff:
        if len(_RUN_RATES) > 256:
            _RUN_RATES.clear()
        hit = _RUN_RATES[key] = (eff, replace(eff, **{
            k: getattr(eff, k) * clock * (held_fp8 if k == "fp8_gemm" else held)
            for k in ("gemm", "fp8_gemm", "attention_fa1", "attention_fa2", "attention_fa2_hopper",
                      "attention_fa2_blackwell", "attention_fa3", "attention_cudnn")}))
    return hit[1]


def gemm_time(count, M, N, K, gpu, eff: Efficiency, dtype: str = "bf16", out_bytes: float = BYTES) -> float:
    """``count`` GEMMs of (M x K) by (K x N) on the roofline of eq-gemm; ``out_bytes`` per output
    element moved (8 when it is accumulated into an fp32 gradient: read and written)."""
    flops = 2 * count * M * N * K
    tm, tn = eff.tile
    tiles = (M / (tm * math.ceil(M / tm))) * (N / (tn * math.ceil(N / tn)))
    compute = flops / ((eff.fp8_gemm if dtype == "fp8" else eff.gemm) * tiles * peak_flops(gpu, dtype))
    memory = count * (BYTES * (M * K + K * N) + out_bytes * M * N) / (eff.hbm * gpu.hbm_bytes_per_s)
    return max(compute, memory) + eff.kernel_s


def fp8_backward_accumulation(gpu, layout: Layout, eff: Efficiency) -> float:
    """How much longer the backward's GEMMs take than the forward's rate gives them: on a Hopper, FP8 under
    tensor or delayed scaling runs its input- and weight-gradient GEMMs with split accumulation (partial sums
    promoted to fp32 as they go), as Transformer Engine and torchao do, ``eff.fp8_split_accumulation``; 1 in
    bf16, under block scaling (whose kernels promote forward too, in the rate ``fp8_gemm`` measured) and on
    other GPUs (a Blackwell accumulates at full precision at full rate)."""
    if layout.dtype != "fp8" or layout.fp8_scaling == "block" or getattr(gpu, "architecture", "") != "hopper":
        return 1.0
    return eff.fp8_split_accumulation


def fa2_rate(arch: str, eff: Efficiency = EFFICIENCY) -> float:
    """FlashAttention-2's share of the dense peak on an architecture: its own (Ampere's) rate, lower on Hopper
    (no wgmma or TMA) and lower still on Blackwell (no tcgen05: the old warp-level MMAs only)."""
    return {"hopper": eff.attention_fa2_hopper, "blackwell": eff.attention_fa2_blackwell}.get(arch, eff.attention_fa2)


def attention_efficiency(gpu, layout: Layout, eff: Efficiency = EFFICIENCY, head_dim: int = 128) -> float:
    """Fraction of the dense peak a fused attention kernel reaches on the FLOPs it executes:
    FlashAttention-3 (``attention_kernel="fa3"``) or cuDNN's (``"cudnn"``) on Hopper and later, FlashAttention-2 on
    Hopper and Blackwell at their lower rates (``fa2_rate``), FlashAttention-2 elsewhere (the fastest kernel before
    Hopper), or the first FlashAttention and its Triton port (``"fa1"``, 2022-23's, slowed on a newer GPU as
    FlashAttention-2 is there).  On Hopper and later a head
    narrower than 128 runs slower: at 64, ``ATTENTION_HEAD_DIM_64`` of the rate, in between on a line
    (measured on H100s only, so Ampere's rate is left as read).  Where the GPU's softmax exponential runs
    faster (Blackwell Ultra, ``gpu.exp_rate`` 2), the fused kernels of Hopper and later gain
    ``eff.attention_fast_exp``, as cuDNN's did on a GB300 over a GB200; FlashAttention-2's warp-level MMAs
    are the bound there, not the exponential."""
    arch = getattr(gpu, "architecture", "")
    if layout.attention_kernel == "fa1":   # FlashAttention-1 class; on Hopper and Blackwell slowed as FA2 is there
        return eff.attention_fa1 * fa2_rate(arch, eff) / eff.attention_fa2
    if arch not in ("hopper", "blackwell"):
        return eff.attention_fa2
    kernel = layout.attention_kernel if layout.attention_kernel in ("fa3", "cudnn") else "fa2"
    rate = {"fa3": eff.attention_fa3, "cudnn": eff.attention_cudnn}.get(kernel, fa2_rate(arch, eff))
    if kernel != "fa2" and getattr(gpu, "exp_rate", 1.0) > 1:
        rate *= eff.attention_fast_exp
    narrow = min(1.0, max(0.0, (128 - head_dim) / 64))     # 0 at 128 and wider, 1 at 64 and narrower
    return rate * (1 - narrow * (1 - ATTENTION_HEAD_DIM_64[kernel]))


def causal_executed(seq_len: int, keys: int, block: int = 128) -> float:
    """Share of the s x keys scores a causal fused kernel executes: each query sees at most
    ``keys`` earlier tokens (on average keys (1 - keys / 2s)), and the ``block`` x ``block`` tiles
    on the band's edge run whole.  The whole sequence (keys = s): a half, plus the diagonal."""
    return min(1.0, 1 - keys / (2 * seq_len) + block / 2 / keys)
