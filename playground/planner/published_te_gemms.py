"""Transformer Engine's own GEMM benchmark: a check of the GEMM rates and of the FP8 casts' bytes.

Transformer Engine's tutorial on profiling GEMMs (``benchmarks/gemm/benchmark_gemm.py``) times the twelve GEMMs
of one transformer layer (hidden 4,096, MLP 16,384, 15,872 tokens: forward, input gradient, weight gradient of
the QKV, output, up and down projections), each 100 times, on a B300 (a Blackwell, with a B200's dense peaks) and
an H200 NVL (a Hopper capped at 600 W), in two modes: *pre-quantized*, the inputs cast to FP8 once before the
timed loop, so only the GEMM kernels run; and *autocast*, as training runs them, each call casting its input and
its weight first.  Per layer, in ms:

* ``TE_LAYER_MS[gpu][precision] = (pre-quantized, autocast)``; delayed scaling has no pre-quantized reading (the
  tool always runs it under autocast).

Two checks of the step-time model follow, neither fitted to these numbers except the Blackwell FP8 rates they
set (``Efficiency.blackwell_fp8``, ``blackwell_mxfp8``):

* ``te_gemm_rates``: the fraction of the dense peak the pre-quantized GEMMs reached, against what the model
  holds a GEMM of these tile-aligned shapes to (``gemm`` or ``fp8_gemm``, times what a GPU keeps of it through
  a run: ``kernel_rates.sustained_rate``).
* ``te_cast_times``: autocast minus pre-quantized, the casts' time, against ``costs.fp8_cast_bytes``'s bytes per
  element (6 under tensor scaling, 4 under delayed or block scaling) for what the tool casts: every call's input
  and weight, at ``Efficiency.hbm`` of the part's HBM bandwidth.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from playground.planner.costs import fp8_cast_bytes_per_element, sustained_rate
from playground.planner.efficiency import EFFICIENCY, Efficiency

__all__ = ["TE_SOURCE", "TE_TOKENS", "TE_LAYER_MS", "TE_PARTS", "te_gemm_shapes", "te_gemm_rates", "te_cast_times"]

TE_SOURCE = ("https://github.com/NVIDIA/TransformerEngine/blob/d0067d0da6cb01811b8072a7d304f0e00344ce2b/docs/"
             "examples/gemm_profiling/gemm_profiling.rst (per-layer GEMM times, autocast and --pre-quantize)")
TE_TOKENS, TE_HIDDEN, TE_MLP = 31 * 512, 4096, 16384

# (pre-quantized, autocast) ms for the layer's twelve GEMMs; None where the tool gives no reading
TE_LAYER_MS = {
    "B300": {"bf16": (13.102, 12.758), "tensor": (6.812, 9.147), "delayed": (None, 7.802), "block": (7.161, 8.984)},
    "H200 NVL": {"bf16": (31.968, 32.014), "tensor": (16.785, 20.285), "delayed": (None, 18.978)},
}
# each part's dense bf16 peak, FP8 peak and HBM bandwidth (datasheets: HGX B300, 36 and 72 PFLOPS with sparsity
# over 8 GPUs, 8 TB/s; H200 NVL, 1,671 and 3,341 TFLOPS with sparsity, 4.8 TB/s) and its architecture
TE_PARTS = {"B300": (2250e12, 4500e12, 8.0e12, "blackwell"), "H200 NVL": (835.5e12, 1670.5e12, 4.8e12, "hopper")}


def te_gemm_shapes(tokens: int = TE_TOKENS, hidden: int = TE_HIDDEN, mlp: int = TE_MLP) -> list[tuple[int, int, int]]:
    """The tool's twelve (M, K, N) GEMMs of a layer: forward, input gradient (K and N swapped) and weight gradient."""
    forward = [(tokens, hidden, 3 * hidden), (tokens, hidden, hidden), (tokens, hidden, mlp), (tokens, mlp, hidden)]
    return forward + [(M, N, K) for M, K, N in forward] + [(K, M, N) for M, K, N in forward]


def _held(arch: str, precision: str, eff: Efficiency) -> float:
    """What the model holds a tile-aligned GEMM to, as a fraction of the dense peak of its precision: a short
    benchmark's rate times what the GPU keeps of it alone (no collective beside it)."""
    part, alone = SimpleNamespace(architecture=arch), replace(eff, comm_share=0.0)
    if precision == "bf16":
        return eff.gemm * sustained_rate(part, alone)
    return eff.fp8_gemm * sustained_rate(part, alone, "fp8", precision)


def te_gemm_rates(eff: Efficiency = EFFICIENCY) -> list[dict]:
    """For each part and precision the tool ran pre-quantized: the fraction of the dense peak measured and the
    model's, and which of them set a constant (``sets``) rather than check one."""
    flops = sum(2 * M * K * N for M, K, N in te_gemm_shapes())
    rows = []
    for part, readings in TE_LAYER_MS.items():
        bf16_peak, fp8_peak, _, arch = TE_PARTS[part]
        for precision, (pre, _) in readings.items():
            if pre is None:
                continue
            peak = bf16_peak if precision == "bf16" else fp8_peak
            rows.append({"part": part, "precision": precision, "measured": flops / (pre * 1e-3) / peak,
                         "model": _held(arch, precision, eff),
                         "sets": arch == "blackwell" and precision != "bf16"})
    return rows


def te_cast_times(eff: Efficiency = EFFICIENCY) -> list[dict]:
    """For each part and FP8 scaling: the casts' time measured (autocast less pre-quantized; delayed scaling less
    tensor scaling's pre-quantized, the same kernel) and the model's, every call casting its input and weight."""
    elements = sum(M * K + K * N for M, K, N in te_gemm_shapes())
    rows = []
    for part, readings in TE_LAYER_MS.items():
        hbm = TE_PARTS[part][2]
        for scaling in ("tensor", "delayed", "block"):
            if scaling not in readings:
                continue
            pre, auto = readings[scaling]
            pre = pre if pre is not None else readings["tensor"][0]
            rows.append({"part": part, "scaling": scaling, "measured_ms": auto - pre,
                         "model_ms": fp8_cast_bytes_per_element(scaling) * elements / (eff.hbm * hbm) * 1e3})
    return rows
