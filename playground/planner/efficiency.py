"""The step-time model's only free constants (``Efficiency``), each with its source and spread.

What fraction of a datasheet number real kernels reach: GEMMs of the dense peak, element-wise kernels
of HBM bandwidth, NCCL of NVLink's and of the NICs' line rates, FP8 GEMMs of the FP8 peak, a Hopper's (and a
Blackwell's) bf16 tensor cores held at their power limit for hours of their rate in a short benchmark, and the clock they keep
while a collective runs beside them, a power-capped GPU's
tensor cores of their uncapped rate; the SMs an overlapped collective takes from compute; plus a
launch cost per kernel, a latency per message, cuBLAS's output tile, the bytes an Adam step streams
and those the cross-entropy moves per logit.  ``sources`` says where each value comes from (a cited
measurement, an accounting, or "assumed": the table in ``efficiency_sources``), ``spread`` its (low, high) over those sources, the range
``step_range`` reports; ``Efficiency.from_results`` takes measured values from a ``python -m
playground.bench gemm`` results file instead.  ``playground.planner.layout`` re-exports them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from playground.planner.efficiency_sources import SOURCES as _SOURCES
from playground.planner.errors import PlanError

__all__ = ["Efficiency", "EFFICIENCY", "MEASURED", "ATTENTION_HEAD_DIM_64"]

# HBM bytes per logit of the two cross-entropies a layout can name (``Layout.loss_kernel``), the ends of
# ``loss_bytes``' spread.  Megatron's vocab-parallel chain unfused, in place in fp32 (its default:
# --cross-entropy-loss-fusion off): the upcast (2 + 4), max (4), subtract (4 + 4), exp (4 + 4), sum
# (4), divide (4 + 4, the softmax it saves), the backward's multiply (4 + 4) and the cast back to
# bf16 (4 + 2): 52.  One fused kernel reads the bf16 logits forward and backward and writes the
# gradient: 6.
LOSS_KERNEL_BYTES = {"megatron": 52, "fused": 6}
# A fused attention kernel's rate at head dim 64 over its rate at 128, on Hopper: the FlashAttention-3
# paper's H100 SXM5 figures, causal forward at 4K tokens (Shah et al. 2024, https://arxiv.org/abs/2407.08608,
# Sec. 4.1): FlashAttention-2 284 against 319 TFLOPS, FlashAttention-3 420 against 579, cuDNN 363 against
# 518 (at 1K-16K the ratios run 0.88-0.89, 0.63-0.77 and 0.69-0.72).  A 64-wide tile does half the
# multiply-adds a loaded K/V block feeds; at 128 and 256 the rates are alike.  The attention_* constants
# are read at head dim 128.
ATTENTION_HEAD_DIM_64 = {"fa2": 0.89, "fa3": 0.73, "cudnn": 0.70}

# (low, high) of each constant over its sources (``efficiency_sources``): the range the step-time model reports
_SPREAD = {
    "gemm": (0.727, 0.869),       # H100 at a non-best square shape ... A100 MAMF
    "fp8_gemm": (0.68, 0.78),     # DeepGEMM at release ... DeepGEMM tuned
    "fp8_split_accumulation": (1.10, 1.20),  # torchao's user's 1.1x ... 1.2x from fast accumulation
    "hopper_sustained": (0.8428, 1.0),  # the H200 measured here ... no loss
    "blackwell_sustained": (0.853, 1.0),  # flashinfer's FA4 fully throttled ... no loss
    "blackwell_fp8": (0.871, 0.940),  # TE's B300 benchmark, its dgrad ... fprop GEMMs
    "blackwell_mxfp8": (0.845, 0.858),  # the same, its wgrad ... fprop
    "comm_clock": (0.795, 0.795),  # DeepGEMM's one reading
    "comm_share": (0.0, 1.0),      # nothing beside the GEMMs ... a collective beside every one
    "power_exponent": (0.68, 1.05),  # the Scale Atlas's 10 ... 15 % lost at 600 W
    "comm_sms": (6, 20),          # NVLink SHARP ... DeepSeek-V3's all-to-all
    "tp_overlap_hidden": (0.0, 1.0),  # TE's TP overlap in NVIDIA's recipes ... torchtitan's async TP
    "ep_overlap_hidden": (0.3655, 1.0),  # Megatron-Core's EP overlap under Nsight ... DualPipe as reported
    "attention_fa2": (0.50, 0.73),   # the FA2 abstract's range on A100
    "attention_fa1": (0.25, 0.40),   # the FA2 abstract's range for FlashAttention-1
    "attention_fa2_hopper": (0.26, 0.33),  # FA2 on H100 at 1K ... 16K tokens (FA3 paper's figures)
    "attention_fa2_blackwell": (0.14, 0.161),  # FA2 on B200 at 1K ... 8K tokens (tritonbench's)
    "attention_fa3": (0.43, 0.58),   # FA3 at 1K ... 16K tokens (the same figures)
    "attention_cudnn": (0.41, 0.53),  # cuDNN at 1K ... 16K tokens (the same figures)
    "attention_fast_exp": (1.092, 1.213),  # cuDNN's causal bf16 attention on a GB300 over a GB200, least ... most
    "hbm": (0.75, 0.84),          # the A100 memory copy ... the H100 Nsight study's coalesced load
    "link": (0.69, 0.82),         # A100 all_reduce_perf busbw ... H100 NCCL effective NVLink
    "network": (0.92, 0.96),      # NDR's 46 ... 48 GB/s per 400 Gb/s NIC
    "kernel_s": (3.0e-6, 6.8e-6),  # raw cuLaunchKernel ... Inductor's per-kernel launch
    "host_kernel_s": (24.8e-6, 39.5e-6),  # the fastest and slowest path and shape measured on the H200
    "graph_kernel_s": (1.02e-6, 1.63e-6),  # the H200's graphed layers, least and most
    "expert_gemm_host_s": (10e-6, 19.5e-6),  # a cuBLASLt launch, heuristic unmemoized (RAFT) ... TE's steepest pair
    "latency_s": (3e-6, 25e-6),   # nccl-tests' NVLink send/recv ... NCCL's model of a whole small all-reduce
    "tile": ((128, 128), (256, 128)),
    "optimizer_bytes": (28, 34),
    "loss_bytes": (LOSS_KERNEL_BYTES["fused"], LOSS_KERNEL_BYTES["megatron"]),  # fused ... Megatron's chain
}
MEASURED = ("gemm", "fp8_gemm", "fp8_split_accumulation", "hopper_sustained", "blackwell_sustained", "hbm", "link", "kernel_s", "latency_s",
            "optimizer_bytes")  # what a results file may set


@dataclass(frozen=True)
class Efficiency:
    """The model's only free constants: what fraction of a datasheet number real kernels reach.

    ``sources`` says where each value comes from (a cited measurement with its URL, an accounting,
    or "assumed"); ``spread`` gives (low, high) over those sources, for the range a prediction
    reports.  ``from_results`` takes measured values from a benchmark results file instead."""
    gemm: float = 0.80        # large, tile-aligned fp16/bf16 GEMMs in cuBLAS on A100/H100
    fp8_gemm: float = 0.70    # FP8 GEMMs, fraction of the dense FP8 peak (H100/H800)
    fp8_split_accumulation: float = 1.15  # a Hopper FP8 GEMM's time with split accumulation over fast
    hopper_sustained: float = 0.884  # a Hopper's bf16 tensor cores held at the power cap, over a short benchmark's rate
    blackwell_sustained: float = 0.853  # a Blackwell's bf16 tensor cores held back to back, over a short run's rate
    blackwell_fp8: float = 0.894  # a Blackwell's FP8 GEMMs (per-tensor scales) in a run, over fp8_gemm's rate
    blackwell_mxfp8: float = 0.850  # the same for its MXFP8 (block-scaled) GEMMs
    comm_clock: float = 0.795  # a Hopper's clock while a collective runs beside its kernels, over a short benchmark's
    comm_share: float = 0.5    # share of a step's tensor-core time with a collective beside it
    power_exponent: float = 0.87  # tensor-core throughput ~ (power cap / TDP)^x when capped below TDP
    comm_sms: int = 16        # SMs an overlapped NCCL collective takes from the compute beside it
    tp_overlap_hidden: float = 1.0  # share of an overlapped TP collective's covered time the overlap hides
    ep_overlap_hidden: float = 0.3655  # the same for an overlapped EP all-to-all (Megatron-Core's, measured)
    attention_fa2: float = 0.55         # fused attention, fraction of dense peak on the FLOPs it executes
    attention_fa1: float = 0.325        # FlashAttention-1 and its Triton port (2022-23)
    attention_fa2_hopper: float = 0.32  # FlashAttention-2 on Hopper (no wgmma/TMA)
    attention_fa2_blackwell: float = 0.157  # FlashAttention-2 on Blackwell (no tcgen05)
    attention_fa3: float = 0.56         # FlashAttention-3 on Hopper and later
    attention_cudnn: float = 0.51       # cuDNN's fused attention (Transformer Engine's, SDPA's cuDNN backend)
    attention_fast_exp: float = 1.125   # a fused attention's rate where the exponential runs twice as fast (Blackwell Ultra)
    hbm: float = 0.80         # streaming element-wise kernels, fraction of HBM bandwidth
    link: float = 0.80        # NCCL bus bandwidth over NVLink, fraction of its datasheet rate
    network: float = 0.94     # NCCL bus bandwidth across nodes, fraction of the NICs' line rate
    kernel_s: float = 5e-6    # fixed launch + dispatch cost per kernel (PyTorch eager, CUDA)
    host_kernel_s: float = 32e-6  # host time to issue one kernel of an eager MoE layer (Python, dispatcher, launch)
    graph_kernel_s: float = 1.1e-6  # the device's gap a kernel of a MoE layer replayed from a CUDA graph
    expert_gemm_host_s: float = 18.6e-6  # host time per expert GEMM Transformer Engine launches from C++ (multi-stream)
    latency_s: float = 10e-6  # per ring step of a collective / per p2p message
    tile: tuple = (256, 128)  # cuBLAS's typical output tile (rows x columns)
    optimizer_bytes: float = 30  # HBM bytes per owned parameter in one Adam step
    loss_bytes: float = 36    # HBM bytes per logit of the fp32 cross-entropy, forward and backward
    sources: dict = field(default_factory=lambda: dict(_SOURCES), compare=False)
    spread: dict = field(default_factory=lambda: dict(_SPREAD), compare=False)

    @classmethod
    def from_results(cls, path, base: "Efficiency | None" = None) -> "Efficiency":
        """``base`` (the defaults) with every constant a results file measured: its ``efficiency``
        block (``python -m playground.bench gemm --out FILE`` writes ``gemm``, the best shape's
        fraction of the dense peak, with ``--hold`` on a Hopper ``hopper_sustained``, with ``--fp8`` ``fp8_gemm``
        and on a Hopper ``fp8_split_accumulation``) and
        ``efficiency_spread``.  ``sources`` names the file, the
        device and the date; ``measured_from`` lists what came from it.  PlanError when the file
        cannot be read or measured nothing (a CPU run without ``--peak-tflops``)."""
        base = base or cls()
        try:
            result = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise PlanError(f"cannot read the results file {path}: {e}") from None
        found = result.get("efficiency") if isinstance(result, dict) else None
        if not isinstance(found, dict):
            raise PlanError(f"{path} is not a benchmark results file with an 'efficiency' block")
        unknown = sorted(set(found) - set(MEASURED))
        if unknown:
            raise PlanError(f"{path} sets {unknown[0]!r}, which is not an efficiency constant "
                            f"({', '.join(MEASURED)})")
        values = {k: v for k, v in found.items() if v is not None}
        if not values:
            raise PlanError(f"{path} measured no efficiency constant (no datasheet peak: a CPU run "
                            f"without --peak-tflops)")
        for name, v in values.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise PlanError(f"{path}: {name} must be a positive number, got {v!r}")
        prov = result.get("provenance", {})
        where = (f"measured: {path} ({result.get('benchmark', 'benchmark')} on {prov.get('device', '?')}, "
                 f"torch {prov.get('torch', '?')}, {str(prov.get('date', '?'))[:10]}")
        sources, spread = dict(base.sources), dict(base.spread)
        for name, v in values.items():
            sources[name] = where + (f"; {result['note']})" if result.get("note") else ")")
            lo, hi = (result.get("efficiency_spread") or {}).get(name) or (v, v)
            spread[name] = (min(lo, v), max(hi, v))
        sources["measured_from"] = {"path": str(path), "constants": sorted(values)}
        return replace(base, **values, sources=sources, spread=spread)

    def link_rate(self, link: str) -> float:
        """The fraction of ``link``'s datasheet rate NCCL reaches: ``network`` across nodes, else ``link``."""
        return self.network if link == "network" else self.link

    @property
    def measured(self) -> list[str]:
        """The constants that came from a results file (empty for the defaults)."""
        return list(self.sources.get("measured_from", {}).get("constants", []))


EFFICIENCY = Efficiency()
