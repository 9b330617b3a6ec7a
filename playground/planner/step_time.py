"""How long one training step takes for a parallel layout, and where the time goes.

``predict(model, cluster, layout)`` adds up, for the slowest pipeline stage of one GPU:

* **compute**: every GEMM of a transformer layer *after* tensor-parallel splitting, each timed on
  a roofline ``max(flops / (eta_gemm * peak * tiles), bytes / (eta_hbm * HBM))`` where ``tiles``
  is cuBLAS's tile quantization (256 x 128 output tiles, NVIDIA's Matrix Multiplication Background
  guide), plus the memory-bound element-wise kernels (LayerNorm, softmax, dropout, GeLU) at
  ``eta_hbm`` of HBM bandwidth, plus a fixed launch cost per kernel; eager PyTorch
  (``kernels="eager"``) adds what its unfused RMSNorm, RoPE and SwiGLU move, and in a MoE layer what its
  routing, permutation and combine moved on an H200 (``costs.EAGER_MOE_ROW_BYTES``).  Backward runs each
  GEMM's input gradient and weight gradient (accumulated into the fp32 main gradient), the
  element-wise kernels twice and the attention core twice (a fused kernel 2.5 times: it recomputes
  the scores).  Full recomputation runs the forward once more, Megatron's selective the attention
  core (or the modules ``recompute_modules`` names, ``costs.module_recompute_time``; ``moe`` also
  its all-to-alls), torchtitan's per-op (``"op"``) every other matmul and the element-wise kernels.
* the fused **attention** kernel runs the causal half of the scores at its published rate
  (``attention_kernel``: FlashAttention-2, or on Hopper FlashAttention-3 or cuDNN's, which Transformer
  Engine runs); a sliding-window
  layer (``Model.sliding_window``, ``local_layers`` of them) only the band its window spans, and under
  CP only the passes its window reaches back to; a step averages the two kinds of layer.
* a **power limit** below the TDP (``Cluster.power_limit_w``) clocks the tensor cores down to
  ``(limit / TDP) ** eta_power`` of their rate (GEMMs and the attention kernel); and a Hopper held at
  its power limit through a run keeps less than short benchmarks measure (``kernel_rates.sustained_rate``):
  its bf16 GEMMs alone ``eta_sustained`` (0.884), FP8 ones all, and 0.795 of the clock while a
  collective runs beside them, for half the step (0.84 in bf16, 0.90 in FP8; on one GPU, with no
  collective, none of it); a Blackwell's bf16 work 0.853 (FlashAttention-4 held on a B200), its FP8 all.
* **bubble**: the 1F1B / interleaved schedule idles ``(p - 1) / v`` micro-batch slots out of
  ``m + (p - 1) / v`` (Narayanan et al. 2021, Sec. 2.2); ZB-H1 (``pp_schedule="zb-h1"``) runs each
  weight gradient W apart from its input gradient B and into the fill and drain, idling ``(p - 1)(F + B - W)``
  where 1F1B idles ``(p - 1)(F + B + W)`` (Qi et al. 2024, Table 1; ``weight_gradient_time``), at 1F1B's
  memory.
* **tensor-parallel** all-reduces (2 per layer forward, 2 backward, 2 more when recomputing) on the
  link TP rides: NVLink when the TP group's size divides the GPUs per node (so every group sits in
  one node), the network otherwise, one NIC per GPU (Narayanan et al.'s Fig. 13: TP collapses
  when it leaves the node).
  With ``tp_overlap="all"`` (Transformer Engine's userbuffers) they run chunk by chunk behind the
  layer's GEMMs, only what outlasts them and the SMs they hold exposed; with ``"forward"``
  (PyTorch's async TP, which its authors measured at up to 20% off the forward and 8% off the step
  of Llama 3 70B) only the forward passes' are.
* **pipeline point-to-point**: one activation per micro-batch and virtual stage each way, waited on
  (Megatron-LM of 2021-22; any 1F1B without interleaving); with ``p2p_overlap`` and v > 1 (Megatron-Core's
  ``overlap_p2p_comm``, on whenever it interleaves; torch.distributed.pipelining's runtime) each chunk's
  transfers run behind the next chunk's compute, only what outlasts it and the SMs they hold exposed.
* **context-parallel** ring attention: each layer passes its K/V block c - 1 times forward (and K/V
  with their gradients backward), each pass overlapped with one block of attention; only what
  outlasts the block is exposed.
* **expert-parallel** all-to-alls: dispatch and combine per MoE layer (forward, backward, and the
  recomputed forward), the NVLink and network shares of an EP group moving at once; the busiest
  rank's tokens (``moe_imbalance`` x the mean: dropless routing) set the pace of it and of the
  expert GEMMs.  With ``ep_overlap`` (Megatron-Core's ``--overlap-moe-expert-parallel-comm``, the
  Model Zoo's "1F1B A2A overlap"; DeepSeek-V3's DualPipe) the forward of one micro-batch runs beside
  the backward of another, so each layer's all-to-alls hide behind that pair's compute: of what it
  covers, the share ``ep_overlap_hidden`` (36.55%, as Nsight measured Megatron-Core's) is hidden; the
  rest, what outlasts it, and the SMs the dispatcher holds are exposed (warm-up and cool-down,
  unpaired, are not told apart).
* a MoE layer's **kernels** (``moe_launch``): forward and backward, 108 of them, 17 more per local expert
  when each expert's GEMMs are launched on their own from Python (all counted on one H200), or six cuBLASLt GEMMs
  per local expert issued from C++ when Transformer Engine runs each grouped GEMM expert by expert (their host time
  as it measured them, ``expert_gemm_host_s``).  Each costs the device a
  gap of ``kernel_s``, ``graph_kernel_s`` when a CUDA graph replays the layer (``costs.moe_gap_time``: beyond
  what its GEMMs are already charged), and the host ``host_kernel_s`` to launch (``costs.moe_host_time``); the dispatcher's host
  sync keeps the host from running further ahead than the layer, so the GPU waits for what of the
  launching outlasts the layer's device work.
* **data-parallel** gradient reduction (in bf16, or fp32 with ``grad_reduce="fp32"``) over DP x CP
  (routed experts over DP x CP / EP: their expert-DP group, whose members lie EP x ETP ranks apart, so
  that with EP filling a node each rides its own NIC), of which at most the last micro-batch's backward
  can hide it when overlap is on.  The distributed optimizer (ZeRO-1/2, Megatron's ``--use-distributed-optimizer``)
  reduce-scatters the gradients instead, and all-gathers the updated bf16 weights behind the next
  step's first forward (``--overlap-param-gather``, on with the overlap); the linear weights in FP8 where
  they are kept in FP8 under tensor scaling (``fp8_params``, Megatron's ``--fp8-param-gather``).  ZeRO-3 (FSDP) instead
  gathers each layer's parameters before its forward and its backward (every micro-batch: FSDP2's
  ``reshard_after_forward``) and reduce-scatters its gradients, each prefetched one layer ahead so
  that only what outlasts the layer's compute is exposed (the routed experts sharded over their
  expert-DP group, on its link); with HSDP they ride the shard group's
  link (NVLink when a node holds it) and the all-reduce across replicas is added.  Across nodes
  these rings cross on every NIC the group holds in a node, as NCCL runs one ring per NIC: FSDP
  over whole nodes at eight NICs' rate (until NVLink binds first), DP under TP = 8 at one
  (``comm_costs.ring_crossing``).  ``fsdp_gather="tensor"`` (early DeepSpeed ZeRO-3) gathers
  tensor by tensor and waits for each, and gathers a recomputed layer again for its recomputed forward.
* a transfer on another stream (DP, FSDP, the interleaved pipeline's) hides behind a pass's compute and
  the layer's own TP, CP and EP collectives, which ride other links (``comm_costs.pass_windows``).
* every collective moves at the share of its link's line rate NCCL reaches there
  (``Efficiency.link_rate``): 0.80 of NVLink's, 0.94 of the NICs' across nodes (NCCL's maintainers:
  46-48 GB/s per 400 Gb/s NIC).
* **pipeline stages**: the layers as ``layout.stage_layers`` places them; the slowest stage sets
  the pace of every micro-batch slot.
* the **logits** on the last stage: three GEMMs, then the fp32 cross-entropy streaming
  ``loss_bytes`` (36) per logit through HBM (10 on the bf16 logits, ``loss_fp32=False``; 52 in
  Megatron's unfused chain and 6 fused, ``loss_kernel``), the
  vocabulary split over TP.
* the **optimizer** step, memory-bound at ~30 bytes per parameter it owns.
* **FP8** (``dtype="fp8"``): GEMMs at ``eta_fp8`` of the FP8 peak of the hardware table, each
  operand scaled and cast first (``fp8_cast_bytes``: 6 B per element over HBM; a weight once per
  step where Transformer Engine caches its FP8 copy, ``fp8_weight_cache``); the attention core,
  the logits, element-wise kernels, communication and memory stay as in bf16.  MFU and HFU are
  always against the dense BF16 peak, so that an FP8 run's MFU compares with a bf16 run's.
* weights kept in **fp32** under bf16 autocast (``autocast_fp32``; FSDP's ``fp32_gather`` implies it)
  are cast to bf16 where each is used: 6 B per weight element each forward, twice that in backward
  (the gradient cast back to fp32, then to bf16 for the reduction); and the residual stream the fp32
  embedding starts stays fp32, its norms, casts and adds moving ``costs.FP32_STREAM_BYTES`` per
  element a pass instead of a bf16 stream's 14.

The constants are in ``Efficiency`` with where each comes from; none is fitted to a row of the
validation table (``playground.planner.published_layouts``).  Hardware numbers come from
``playground.hardware`` only.  Each cost term is a function of ``playground.planner.costs`` (with the
``Model``, ``Cluster`` and ``Layout`` dataclasses); this module assembles them.
``python -m playground.step_time --help`` for the command line (``playground/planner/step_time_cli.py``).
"""

from __future__ import annotations

from dataclasses import fields, replace

from playground.planner.comm_costs import fsdp_exposed_time, pass_windows
from playground.planner.costs import (BYTES, EFFICIENCY, Cluster, Efficiency, Layout, Model, allgather_time,
                                      allreduce_time, check_layout, context_parallel_link, data_parallel_link,
                                      expert_data_parallel_link, expert_parallel_link, flops_per_step,
                                      fp8_backward_accumulation, gemm_time, overlapped, pipeline_link, replica_link,
                                      shard_link, sustained_rate, tensor_parallel_link)
from playground.planner.efficiency import LOSS_KERNEL_BYTES
from playground.planner.kernel_rates import at_run_rates
from playground.planner.layer_costs import layer_costs, layer_elementwise, layer_gemm_flops
from playground.planner.layout import placement_note, stage_layers
from playground.planner.memory import memory_per_gpu, stage_params

__all__ = ["predict", "power_clock", "weight_gradient_time"]

# HBM bytes per logit of a cross-entropy on the bf16 logits (``loss_fp32=False``), accounted as
# ``Efficiency.loss_bytes`` is for the fp32 one: log-softmax reads its input twice and writes once
# (6), its backward reads the saved output and writes the gradient (4)
BF16_LOSS_BYTES = 10


def power_clock(cluster: Cluster, eff: Efficiency = EFFICIENCY) -> float:
    """Tensor-core throughput of a power-capped GPU as a fraction of its uncapped rate:
    ``(limit / TDP) ** eff.power_exponent`` below the datasheet TDP, else 1."""
    limit, tdp = cluster.power_limit_w, cluster.gpu.tdp_w
    if not limit or not tdp or limit >= tdp:
        return 1.0
    return (limit / tdp) ** eff.power_exponent


def weight_gradient_time(counts: dict, costs: dict) -> float:
    """Seconds of a stage's weight-gradient GEMMs for one micro-batch, the W that a zero-bubble schedule runs
    apart from the input gradient B: half of each layer's backward GEMMs (the two carry the same FLOPs; the
    attention core has no weight and is all B)."""
    return sum(n * costs[moe]["parts"]["gemm_backward"] / 2 for moe, n in counts.items() if n)


# ----------------------------------------------------------------------------- the prediction
def predict(model: Model, cluster: Cluster, layout: Layout, eff: Efficiency = EFFICIENCY,
            gpus: int | None = None) -> dict:
    """Step time, throughput and memory of ``layout``; see the module docstring for the terms."""
    check_layout(model, layout, gpus)
    stated = eff
    alone = eff if layout.gpus > 1 else replace(eff, comm_share=0.0)   # one GPU: no collective beside anything
    clock, held = power_clock(cluster, eff), sustained_rate(cluster.gpu, alone)
    held_fp8 = sustained_rate(cluster.gpu, alone, "fp8", layout.fp8_scaling)
    if clock < 1 or held < 1 or held_fp8 < 1:   # a power cap below the TDP slows the tensor cores (GEMMs and
        # the attention kernel); hours at the power limit hold a Hopper's below their short-benchmark rate
        eff = at_run_rates(eff, clock, held, held_fp8)
    gpu, p, v, t, m = cluster.gpu, layout.pp, layout.vpp, layout.tp, layout.micro_batches
    s, h = model.seq_len, model.hidden
    stages = stage_layers(model, layout)
    kinds = [False, True] if model.is_moe else [False]
    costs = {moe: layer_costs(model, cluster, layout, eff, moe) for moe in kinds}
    dense_total = model.layers - model.moe_layers
    dp_link, dp_bw = data_parallel_link(layout, cluster, eff)
    edp_link, edp_bw = expert_data_parallel_link(layout, cluster, eff)
    shard_n = layout.sharding_degree if layout.zero_stage == 3 else 1
    expert_shard = layout.expert_sharding_degree if shard_n > 1 else 1
    shard_name, shard_bw = shard_link(layout, cluster, eff)

    # each stage: its layers (the dense ones first), the logits on the last, one micro-batch
    tokens, vocab = layout.micro_batch * s / layout.cp, -(-model.vocab // t)
    loss_bytes = LOSS_KERNEL_BYTES.get(layout.loss_kernel, eff.loss_bytes if layout.loss_fp32 else BF16_LOSS_BYTES)
    logits_t = 3 * gemm_time(1, tokens, vocab, h, gpu, eff) \
        + tokens * vocab * loss_bytes / (eff.hbm * gpu.hbm_bytes_per_s)   # bf16 GEMMs, then the loss
    rows, first, priced = [], 0, {}
    for i, n_layers in enumerate(stages):
        n_dense = max(0, min(first + n_layers, dense_total) - first)
        # a stage is priced by its layers of each kind and whether it holds the embedding or the logits:
        # the stages between that match are priced once (a pipeline of 16 has about three kinds of stage)
        kind = (n_dense, n_layers - n_dense, i == 0, i == p - 1)
        if kind in priced:
            rows.append(priced[kind])
            first += n_layers
            continue
        counts = {False: n_dense, True: n_layers - n_dense}
        dense_p, expert_p = stage_params(model, layout, i, n_layers, first)
        first += n_layers
        row = {k: sum(counts[moe] * costs[moe][k] for moe in kinds)
               for k in ("compute", "recompute", "tp", "cp", "ep", "host", "offload")}
        row["zero3"] = 0.0
        if shard_n > 1 and n_layers:   # the routed experts sharded over expert DP, on its link
            experts = (expert_p / n_layers * BYTES, expert_shard, edp_bw, edp_link) if expert_p else None
            row["zero3"] = sum(counts[moe] * fsdp_exposed_time(costs[moe], dense_p / n_layers * BYTES, shard_n, shard_bw,
                                                            gpu, eff, layout, model.dense_layer_tensors(), shard_name,
                                                            experts) for moe in kinds)
        row["logits"] = logits_t if i == p - 1 else 0.0
        row.update(layers=n_layers, counts=counts, dense_params=dense_p, expert_params=expert_p,
                   layer_params=stage_params(model, layout, i, n_layers, first - n_layers, embeddings=False)[0],
                   # what a transfer on another stream hides behind: the passes with the layers' collectives
                   windows=[sum(counts[moe] * pass_windows(costs[moe])[i] for moe in kinds) for i in (0, 1)])
        row["total"] = sum(row[k] for k in ("compute", "recompute", "tp", "cp", "ep", "host", "offload", "zero3",
                                            "logits"))
        rows.append(row)
        priced[kind] = row
    slow = max(rows, key=lambda r: r["total"])

    # pipeline p2p: each micro-batch crosses each of a GPU's v chunk boundaries forward and back
    pp_link, pp_bw = pipeline_link(layout, cluster)
    p2p_bytes = layout.micro_batch * s / layout.cp * h * BYTES / (t if layout.scatter_gather else 1)
    p2p_mb = 0.0 if p == 1 else 2 * v * (eff.latency_s + p2p_bytes / (eff.link_rate(pp_link) * pp_bw))
    if p > 1 and v > 1 and layout.p2p_overlap:   # each chunk's transfers behind the next chunk's compute:
        # the forward crossings behind forward chunks, the backward ones behind backward chunks
        p2p_mb = overlapped(p2p_mb / 2, slow["windows"][0], gpu, eff) + overlapped(p2p_mb / 2, slow["windows"][1], gpu, eff)
    per_mb = slow["total"] + p2p_mb
    bubble_t = (p - 1) / v * per_mb
    if p > 1 and layout.pp_schedule == "zb-h1":   # each weight gradient deferred into the bubble: (p - 1)(F + B - W)
        bubble_t = (p - 1) * max(0.0, per_mb - 2 * weight_gradient_time(slow["counts"], costs))
    pipeline_t = m * per_mb + bubble_t

    # data parallelism: gradients of what each GPU holds (dense over DP x CP, experts over DP x CP / EP)
    expert_dp = layout.expert_dp
    hsdp = False                 # sharded inside a group, replicated across the groups
    if layout.zero_stage == 3:   # reduce-scattered layer by layer above; HSDP adds the replica all-reduce
        replicas = layout.dp * layout.cp // shard_n
        replica_name, replica_bw = replica_link(layout, cluster, eff)
        hsdp = replicas > 1
        dp_t = allreduce_time(slow["dense_params"] * layout.grad_bytes / shard_n, replicas,
                              replica_bw, eff, replica_name) \
            if replicas > 1 else 0.0
        expert_replicas = expert_dp // expert_shard   # HSDP: each expert shard's copies in the other replicas
        if expert_replicas > 1:
            dp_t += allreduce_time(slow["expert_params"] * layout.grad_bytes / expert_shard, expert_replicas,
                                   replica_bw, eff, replica_name)
        gather_t = 0.0
    elif layout.zero_stage in (1, 2):  # distributed optimizer: reduce-scatter the gradients, each rank
        # updates its shard, all-gather the updated weights (behind the next step's first forward): bf16, or
        # the linear weights in FP8 where they are kept so (fp8_params; block scaling gathers bf16 and casts after)
        dp_t = allgather_time(slow["dense_params"] * layout.grad_bytes, layout.dp * layout.cp, dp_bw, eff, dp_link) \
            + allgather_time(slow["expert_params"] * layout.grad_bytes, expert_dp, edp_bw, eff, edp_link)
        wire = 1 if layout.fp8_primary_weights and layout.fp8_scaling != "block" else BYTES
        dense_wire = (slow["dense_params"] - slow["layer_params"]) * BYTES + slow["layer_params"] * wire
        gather_t = allgather_time(dense_wire, layout.dp * layout.cp, dp_bw, eff, dp_link) \
            + allgather_time(slow["expert_params"] * wire, expert_dp, edp_bw, eff, edp_link)
    else:
        dp_t = allreduce_time(slow["dense_params"] * layout.grad_bytes, layout.dp * layout.cp, dp_bw, eff, dp_link) \
            + allreduce_time(slow["expert_params"] * layout.grad_bytes, expert_dp, edp_bw, eff, edp_link)
        gather_t = 0.0
    if layout.overlap_grad_reduce:   # the last micro-batch's backward hides the reduction, the first forward the gather
        forward_w, backward_w = slow["windows"]
        hidden_dp = min(dp_t, backward_w) + min(gather_t, forward_w)
        dp_exposed = overlapped(dp_t, backward_w, gpu, eff) + overlapped(gather_t, forward_w, gpu, eff)
    else:
        hidden_dp, dp_exposed = 0.0, dp_t + gather_t
    dp_t += gather_t
    sharded = layout.zero_stage >= 1
    owned = slow["dense_params"] / (layout.sharding_degree if sharded else 1) \
        + slow["expert_params"] / (expert_dp if sharded else 1)
    # bf16 moments: each read and written back at 2 bytes, not 4 (what the state sheds, twice over)
    step_bytes = eff.optimizer_bytes - 2 * (12 - layout.optimizer_bytes_per_param)
    optimizer_t = owned * step_bytes / (eff.hbm * gpu.hbm_bytes_per_s)

    step = pipeline_t + dp_exposed + optimizer_t
    hw_flops = flops_per_step(model, layout)
    model_flops = flops_per_step(model, layout, "none")
    n = layout.gpus
    breakdown = {
        "compute": m * (slow["compute"] + slow["logits"]),
        "recompute": m * slow["recompute"],
        "tp_comm": m * slow["tp"],
        "cp_comm_exposed": m * slow["cp"],
        "ep_all_to_all": m * slow["ep"],
        "pp_p2p": m * p2p_mb,
        "bubble": bubble_t,
        "dp_comm_exposed": dp_exposed,
        "zero3_gathers": m * slow["zero3"],
        "optimizer": optimizer_t,
        "moe_host_wait": m * slow["host"],
        # the offloaded activations' copies, where they outlast their passes (a key only where a layout offloads)
        **({"activation_offload": m * slow["offload"]} if layout.offload_modules else {}),
    }
    mem = memory_per_gpu(model, layout, gpu)
    counts_slow = slow["counts"]
    # the slow stage's layers of each kind (dense, MoE), each split into tensor-core and element-wise time
    elementwise_s = sum(counts_slow[moe] * layer_elementwise(costs[moe]["parts"]) for moe in kinds)
    tensor_core_s = sum(counts_slow[moe] * costs[moe]["compute"] for moe in kinds) - elementwise_s
    gemm_s = sum(counts_slow[moe] * costs[moe]["parts"]["gemm"] for moe in kinds)
    gemm_flops = sum(counts_slow[moe] * layer_gemm_flops(model, layout, moe) for moe in kinds)
    return {
        "step_time_s": step,
        "tokens_per_s": layout.global_batch * s / step,
        "tflops_per_gpu": hw_flops / step / n / 1e12,
        "model_tflops_per_gpu": model_flops / step / n / 1e12,
        "mfu": model_flops / step / n / gpu.peak_bf16_flops,
        "hfu": hw_flops / step / n / gpu.peak_bf16_flops,
        "time_breakdown": breakdown,
        "fractions": {k: v_ / step for k, v_ in breakdown.items()},
        "compute_parts": {"gemm": m * tensor_core_s, "elementwise": m * elementwise_s, "logits": m * slow["logits"]},
        "bubble_fraction": bubble_t / (m * per_mb) if p > 1 else 0.0,
        "gemm_efficiency": gemm_flops / (gemm_s * gpu.peak_bf16_flops) if gemm_s else 0.0,
        "links": {"tp": tensor_parallel_link(layout, cluster)[0], "dp": dp_link, "pp": pp_link,
                  "cp": context_parallel_link(layout, cluster)[0], "ep": expert_parallel_link(layout, cluster)[0],
                  **({"expert_dp": edp_link} if model.is_moe else {}),
                  **({"shard": shard_name, "replica": replica_name} if hsdp else {})},
        # the rings' line rates: DP's (every NIC its group holds in a node), a MoE's experts' (EP x ETP apart),
        # HSDP's shard group's and its replicas' (one GPU of each shard group: a NIC's share each)
        "ring_bytes_per_s": {"dp": dp_bw, **({"expert_dp": edp_bw} if model.is_moe else {}),
                             **({"shard": shard_bw, "replica": replica_bw} if hsdp else {})},
        "dp_comm_s": dp_t, "dp_comm_hidden_s": hidden_dp,
        "useful_compute_s": m * slow["compute"],
        # a MoE layer's pass, one micro-batch: the device's work against the host's launching (what "host" waits on)
        **({"moe_layer_pass": {"device_s": costs[True]["device"], "launch_s": costs[True]["launch"]}}
           if model.is_moe else {}),
        "memory": mem,
        "layout": {f.name: getattr(layout, f.name) for f in fields(layout)},   # immutable fields: no deep copy
        "gpus": n, "gpu": gpu.name, "micro_batches": m,
        "stage_layers": slow["layers"], "placement": list(stages), "placement_note": placement_note(model, layout),
        "layers": model.layers,
        "params": model.param_count, "flops_per_step": hw_flops, "model_flops_per_step": model_flops,
        "assumptions": {k: getattr(stated, k) for k in ("gemm", "fp8_gemm", "fp8_split_accumulation", "hopper_sustained", "blackwell_sustained",
                                                          "blackwell_fp8", "blackwell_mxfp8", "comm_clock",
                                                          "comm_share", "power_exponent",
                                                          "hbm", "link", "network", "kernel_s", "host_kernel_s",
                                                          "graph_kernel_s", "expert_gemm_host_s", "latency_s",
                                                          "attention_fast_exp")},
        "power_clock": clock, "sustained_rate": held, "sustained_rate_fp8": held_fp8,
        "fp8_backward_accumulation": fp8_backward_accumulation(gpu, layout, stated), "power_limit_w": cluster.power_limit_w, "tdp_w": gpu.tdp_w,
    }
