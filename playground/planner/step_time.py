"""How long one training step takes for a parallel layout, and where the time goes.

``predict(model, cluster, layout)`` adds up, for the slowest pipeline stage of one GPU:

* **compute**: every GEMM of a transformer layer *after* tensor-parallel splitting, each timed on
  a roofline ``max(flops / (eta_gemm * peak * tiles), bytes / (eta_hbm * HBM))`` where ``tiles``
  is cuBLAS's tile quantization (256 x 128 output tiles, NVIDIA's Matrix Multiplication Background
  guide), plus the memory-bound element-wise kernels (LayerNorm, softmax, dropout, GeLU) at
  ``eta_hbm`` of HBM bandwidth, plus a fixed launch cost per kernel.  Backward costs twice the
  forward; full recomputation runs the forward once more.
* **bubble**: the 1F1B / interleaved schedule idles ``(p - 1) / v`` micro-batch slots out of
  ``m + (p - 1) / v`` (Narayanan et al. 2021, Sec. 2.2).
* **tensor-parallel** all-reduces (2 per layer forward, 2 backward, 2 more when recomputing) on the
  link TP rides: NVLink when the TP group's size divides the GPUs per node (so every group sits in
  one node), the network otherwise.
* **pipeline point-to-point**: one activation per micro-batch and virtual stage each way.
* **data-parallel** gradient reduction (ZeRO 3 adds parameter all-gathers every micro-batch), of
  which at most the last micro-batch's backward can hide it when overlap is on.
* the **optimizer** step, memory-bound at ~30 bytes per parameter it owns.

The constants are in ``Efficiency`` with where each comes from; none is fitted to a row of the
validation table (``playground.planner.published_layouts``).  Hardware numbers come from
``playground.hardware`` only.  Each cost term is a function of ``playground.planner.costs`` (with the
``Model``, ``Cluster`` and ``Layout`` dataclasses); this module assembles them.
``python -m playground.step_time --help`` for the command line (``playground/planner/step_time_cli.py``).
"""

from __future__ import annotations

import math
from dataclasses import asdict

from playground.planner.memory import usable_memory_bytes

from playground.planner.costs import (BYTES, EFFICIENCY, Cluster, Efficiency, Layout, Model, allreduce_time,
                                      check_layout, data_parallel_link, flops_per_step, gemm_time,
                                      layer_forward, layer_gemms, memory_per_gpu, pipeline_link,
                                      tensor_parallel_link)

__all__ = ["predict"]


# ----------------------------------------------------------------------------- the prediction
def predict(model: Model, cluster: Cluster, layout: Layout, eff: Efficiency = EFFICIENCY,
            gpus: int | None = None) -> dict:
    """Step time, throughput and memory of ``layout``; see the module docstring for the terms."""
    check_layout(model, layout, gpus)
    gpu, p, v, t, m = cluster.gpu, layout.pp, layout.vpp, layout.tp, layout.micro_batches
    b, s, h = layout.micro_batch, model.seq_len, model.hidden
    stage_layers = math.ceil(model.layers / p)

    fwd = layer_forward(model, layout, gpu, eff)
    layer_f = fwd["gemm"] + fwd["elementwise"]
    # TP: 2 all-reduces of the b s h activation per layer forward (4 with SP's gather/scatter pairs,
    # the same bytes), 2 in backward, 2 more when the forward is recomputed
    tp_link, tp_bw = tensor_parallel_link(layout, cluster)
    tp_one = allreduce_time(b * s * h * BYTES, t, tp_bw, eff)
    rc = {"none": 0.0, "selective": 0.0, "full": 1.0}[layout.recompute]
    attn_core = sum(gemm_time(*g[1:], gpu, eff) for g in layer_gemms(model, b, t) if g[0] in ("scores", "context"))
    recompute_t = rc * layer_f + (attn_core if layout.recompute == "selective" else 0.0)
    compute_mb = stage_layers * (3 * layer_f + recompute_t)
    tp_mb = stage_layers * tp_one * (2 + 2 + 2 * rc)
    # the logit layer (last stage) and its vocab-parallel GEMM: forward + 2x backward
    logits_t = 3 * gemm_time(1, b * s, math.ceil(model.vocab / t), h, gpu, eff)
    compute_mb += logits_t  # the last stage carries it, and the slowest stage sets the pace
    # pipeline p2p: each micro-batch crosses each of a GPU's v chunk boundaries forward and back
    pp_link, pp_bw = pipeline_link(layout, cluster)
    p2p_bytes = b * s * h * BYTES / (t if layout.scatter_gather else 1)
    p2p_mb = 0.0 if p == 1 else 2 * v * (eff.latency_s + p2p_bytes / (eff.link * pp_bw))
    per_mb = compute_mb + tp_mb + p2p_mb
    slots = m + (p - 1) / v
    pipeline_t = slots * per_mb
    bubble_t = (p - 1) / v * per_mb

    # data parallelism: gradients of the parameters this GPU holds
    params_gpu = model.param_count / (t * p)
    dp_link, dp_bw = data_parallel_link(layout, cluster)
    grads = params_gpu * BYTES
    dp_t = allreduce_time(grads, layout.dp, dp_bw, eff)  # ZeRO 1/2: reduce-scatter + all-gather, same bytes
    zero3_t = 0.0
    if layout.zero_stage == 3 and layout.dp > 1:  # gather parameters for forward, backward (and recompute)
        gathers = 2 + rc
        zero3_t = m * gathers * allreduce_time(grads, layout.dp, dp_bw, eff) / 2
    backward_last = stage_layers * (2 * layer_f + recompute_t)
    hidden_dp = min(dp_t, backward_last) if layout.overlap_grad_reduce else 0.0
    dp_exposed = dp_t - hidden_dp
    owned = params_gpu / (layout.dp if layout.zero_stage >= 1 else 1)
    optimizer_t = owned * eff.optimizer_bytes / (eff.hbm * gpu.hbm_bytes_per_s)

    step = pipeline_t + dp_exposed + zero3_t + optimizer_t
    hw_flops = flops_per_step(model, layout)
    model_flops = flops_per_step(model, layout, "none")
    n = layout.gpus
    compute_parts = {"gemm": m * stage_layers * 3 * fwd["gemm"],
                     "elementwise": m * stage_layers * 3 * fwd["elementwise"], "logits": m * logits_t}
    useful = m * stage_layers * 3 * layer_f  # compute that is neither bubble nor recompute
    breakdown = {
        "compute": m * (compute_mb - stage_layers * recompute_t),
        "recompute": m * stage_layers * recompute_t,
        "tp_comm": m * tp_mb,
        "pp_p2p": m * p2p_mb,
        "bubble": bubble_t,
        "dp_comm_exposed": dp_exposed,
        "zero3_gathers": zero3_t,
        "optimizer": optimizer_t,
    }
    mem = memory_per_gpu(model, layout)
    return {
        "step_time_s": step,
        "tokens_per_s": layout.global_batch * s / step,
        "tflops_per_gpu": hw_flops / step / n / 1e12,
        "model_tflops_per_gpu": model_flops / step / n / 1e12,
        "mfu": model_flops / step / n / gpu.peak_bf16_flops,
        "hfu": hw_flops / step / n / gpu.peak_bf16_flops,
        "time_breakdown": breakdown,
        "fractions": {k: v_ / step for k, v_ in breakdown.items()},
        "compute_parts": compute_parts,  # the "compute" entry split: layer GEMMs, element-wise, logits
        "bubble_fraction": (p - 1) / (v * m) if p > 1 else 0.0,
        "gemm_efficiency": sum(2 * c * M * N * K for _, c, M, N, K in layer_gemms(model, b, t))
        / (fwd["gemm"] * gpu.peak_bf16_flops),
        "links": {"tp": tp_link, "dp": dp_link, "pp": pp_link},
        "dp_comm_s": dp_t, "dp_comm_hidden_s": hidden_dp, "useful_compute_s": useful,
        "memory": {**mem, "capacity": gpu.hbm_bytes, "usable": usable_memory_bytes(gpu),
                   "fits": mem["total"] <= usable_memory_bytes(gpu)},
        "layout": asdict(layout), "gpus": n, "gpu": gpu.name, "micro_batches": m,
        "stage_layers": stage_layers, "layers": model.layers,
        "params": model.param_count, "flops_per_step": hw_flops, "model_flops_per_step": model_flops,
        "assumptions": {k: getattr(eff, k) for k in ("gemm", "hbm", "link", "kernel_s", "latency_s")},
    }
