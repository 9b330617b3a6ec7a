"""Memory per GPU: the planner's one memory model, used by the plan, the step-time model and the search.

For the fullest pipeline stage of a layout (every stage is checked; the fullest is reported):

* **Model states** (Rajbhandari et al. 2020; formulas kept once in ``playground.zero.accounting``):
  2-byte parameters, a 2-byte gradient buffer and 12 bytes of Adam state per parameter.  Dense
  weights are split over TP and PP and their ZeRO states sharded over DP x CP (Megatron-Core's
  distributed optimizer) or the HSDP shard group; routed-expert weights are split over EP x ETP and
  sharded over the DP x CP / EP ranks that replicate them.  ZeRO-3 (FSDP) also holds a working set:
  the gathered parameters of the current and the prefetched layer and one layer's unsharded gradient
  (a ZeRO-3 that gathers and frees tensor by tensor, ``fsdp_gather="tensor"``: three of its largest tensor).
* **Activations** per layer and micro-batch (``layer_activation_bytes``, in ``activations``): Korthikanti et al.'s
  (2022) count generalised to grouped-query and latent attention, gated MLPs and experts, with or
  without dropout, flash attention (no s^2 scores), sequence parallelism (everything split over
  TP) and context parallelism (the sequence split over CP); full recomputation keeps only each
  layer's input, plus one layer's activations while it is recomputed (in ``Layout.recompute_share``
  of the layers: the rest keep everything, counted as an average layer); Megatron-Core's selective
  modules (``Layout.recompute_modules``) keep none of what they recompute; under FP8 each linear layer
  keeps the FP8 copy of its input it cast (Transformer Engine; ``Layout.fp8_saved_inputs``).  The inputs
  ``Layout.offload_modules`` sends to host memory are not kept, but two layers' worth of them are on the GPU
  at a time: the copies leaving in forward and the ones brought back ahead of backward.
* **FP8 weights** (``fp8_weight_bytes``): under FP8 outside ZeRO-3 Transformer Engine keeps an FP8 copy of
  each linear weight, 1 byte an element, 2 where it also keeps the transpose (a Hopper's FP8 GEMMs take one
  layout; Blackwell's any: its ``is_non_tn_fp8_gemm_supported``) or, under block scaling, both directions
  with their scales.  With ``Layout.fp8_params`` (Megatron's ``--fp8-param-gather``) that copy *is* the
  weight and no bf16 one is kept; without it the copy sits beside the bf16 weight for the step
  (``fp8_weight_cache``).  Counted in the parameters' bytes.
* **In flight** (``in_flight_micro_batches``): 1F1B's stage i holds min(p - i, m) micro-batches; the
  interleaved schedule's stage i runs 2(p - 1 - i) + (v - 1)p chunk forwards before its first backward
  (Megatron-Core's ``get_pp_rank_microbatches``), so it holds one chunk more than that, each 1/v of a
  micro-batch's layers there: on stage 0 Korthikanti et al.'s p (1 + (p - 1) / (p v)) (Sec. 4.2.3), on
  the last stage about p (v - 1) / v, not one.
* **Logits**: the last stage's bf16 logits and the fp32 copy the loss works on, 6 s b V / (t c) bytes
  (4 when the loss runs on the bf16 logits, ``loss_fp32=False``: they and the log-softmax it saves).
* **Allowance** (``FRAMEWORK_BYTES``, ``FRAGMENTATION``): what no formula counts — the CUDA context,
  cuBLAS workspaces and NCCL buffers (2 GiB), and the caching allocator's fragmentation (5% of the
  memory).  Usable memory is the capacity the framework sees (``hardware.GPU.memory_bytes``) less it.
  A plan past the usable memory but inside the GPU's is *tight*: it fits (published runs counted this
  close ran: the count's own error is of the allowance's size), with little headroom; the layout
  search keeps the allowance, so it never picks a tight layout.

Left out, and said so: the pipeline's send/receive buffers, the optimizer step's temporaries, and
the imbalance of tokens over experts (every expert is charged the average).
"""

from __future__ import annotations

import functools

from dataclasses import replace

from playground import hardware
from playground.planner.activations import activation_bytes_per_layer, layer_activation_bytes, layer_offloaded_bytes
from playground.planner.architecture import Model
from playground.planner.errors import PlanError
from playground.planner.gemms import block_matmuls
from playground.planner.layout import BYTES, RECOMPUTE, Layout, stage_layers
from playground.planner.layout_checks import check_layout
from playground.zero import accounting as zero_accounting

__all__ = ["FRAMEWORK_BYTES", "FRAGMENTATION", "RECOMPUTE", "model_state_bytes", "activation_bytes_per_layer",
           "layer_activation_bytes", "usable_memory_bytes", "memory_per_gpu", "describe_memory", "fit_verdict",
           "tight_note", "stage_params", "in_flight_micro_batches", "fp8_weight_bytes"]

FRAMEWORK_BYTES = 2 * 2 ** 30   # CUDA context, cuBLAS workspaces, NCCL buffers
FRAGMENTATION = 0.05            # share of memory the caching allocator cannot hand out
LOGIT_BYTES = 6                 # bf16 logits kept + the fp32 copy the loss computes on
BF16_LOGIT_BYTES = 4            # a loss on the bf16 logits: the logits and the log-softmax it saves, bf16 both


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


def _gib(x: float) -> float:
    return x / 2 ** 30


def usable_memory_bytes(gpu) -> float:
    """The bytes a plan may fill: the memory the framework sees less ``FRAMEWORK_BYTES`` and
    ``FRAGMENTATION`` of it.  ``gpu``: a ``hardware`` entry or its name."""
    try:
        spec = hardware.gpu(gpu)
    except hardware.UnknownGPUError as e:
        raise PlanError(str(e)) from None
    return spec.memory_bytes * (1 - FRAGMENTATION) - FRAMEWORK_BYTES


@functools.lru_cache(maxsize=512)
def _layer_params(model: Model) -> tuple[float, float, float, float]:
    """(a dense layer's, a MoE layer's without its routed experts, one routed expert's parameters, a published
    total over the counted one): what ``stage_params`` multiplies, counted once a model (a step's range asks
    for them tens of thousands of times)."""
    return (model.dense_layer_params(), model.moe_layer_params(0) if model.is_moe else 0,
            model.mlp_params(model.expert_width), model.param_count / model.counted_params())


def stage_params(model: Model, layout: Layout, stage: int, layers: int, first_layer: int,
                 embeddings: bool = True) -> tuple[float, float]:
    """(dense, routed-expert) parameters one GPU of ``stage`` holds (``embeddings=False``: its layers' only,
    without the embedding, final norm and output layer)."""
    t, p = layout.tp, layout.pp
    dense_here = max(0, min(first_layer + layers, model.layers - model.moe_layers) - first_layer)
    moe_here = layers - dense_here
    dense_layer, moe_rest, expert, scale = _layer_params(model)
    dense = dense_here * dense_layer + moe_here * moe_rest
    h, V = model.hidden, model.vocab
    if stage == 0 and embeddings:
        dense += V * h + (model.seq_len * h if model.position_embeddings else 0)
    if stage == p - 1 and embeddings:
        dense += h + (V * h if (not model.tied_embeddings or p > 1) else 0)  # final norm, output layer
    experts = moe_here * model.experts * expert / (layout.ep * layout.expert_tp_degree)
    return dense / t * scale, experts * scale                               # scale: a published total, if given


def in_flight_micro_batches(p: int, v: int, m: int, stage: int, ep_overlap: bool = False) -> float:
    """Micro-batches of activations pipeline stage ``stage`` holds at its fullest, of ``p`` stages with ``v``
    chunks each and ``m`` micro-batches a step.  1F1B: min(p - i, m).  Interleaved: a warm-up of
    2(p - 1 - i) + (v - 1)p chunk forwards (one more with ``ep_overlap``, Megatron-Core's
    ``overlap_moe_expert_parallel_comm``), then one forward before each backward, so one chunk more is held,
    at most all m v; a chunk is 1/v of the micro-batch's layers on the stage."""
    if v == 1:
        return min(p - stage, m)
    warmup = 2 * (p - 1 - stage) + (v - 1) * p + (1 if ep_overlap else 0)
    return min(m * v, warmup + 1) / v


def fp8_weight_bytes(layout: Layout, gpu=None) -> float:
    """Bytes an element of the FP8 copy Transformer Engine keeps of a linear weight: 1 on a Blackwell under
    tensor scaling (its FP8 GEMMs take either layout), 2 elsewhere (the cast and its transpose; a GPU not
    named is counted so), and under block scaling both directions with a scale per 32 elements each."""
    if layout.fp8_scaling == "block":
        return 2 + 2 / 32
    return 1.0 if getattr(gpu, "architecture", "") == "blackwell" else 2.0


def _fp8_weight_extra(layout: Layout, gpu=None) -> float:
    """Bytes a linear weight element holds beyond its bf16 parameter's 2 under FP8: the FP8 weight in place
    of the bf16 one (``Layout.fp8_primary_weights``), or the FP8 copy beside it (``fp8_weight_cache``); none
    where each micro-batch casts afresh, nor under ZeRO-3, which gathers the weights for each use."""
    if not layout.keeps_fp8_weights:
        return 0.0
    return fp8_weight_bytes(layout, gpu) - (BYTES if layout.fp8_primary_weights else 0)


def largest_weight(model: Model, layout: Layout) -> float:
    """Elements of the largest weight matrix one GPU holds of a layer after TP (and EP) split it: what a
    ZeRO-3 that gathers tensor by tensor (``fsdp_gather="tensor"``) holds unsharded at a time."""
    return max(N * K for moe in ((False, True) if model.is_moe else (False,))
               for _, _, _, N, K in block_matmuls(model, layout.micro_batch, layout.tp, layout.cp, layout.ep, moe,
                                                  layout.expert_tp_degree))


@functools.lru_cache(maxsize=4096)
def _memory_per_gpu(model: Model, layout: Layout, gpu=None) -> dict:
    """Bytes per GPU of the fullest pipeline stage, by part (see the module docstring).

    Keys: ``model_states`` (and ``model_state_parts``), ``zero3_buffers``, ``activations``,
    ``logits``, ``total``, ``stage`` (which stage is fullest), ``stage_layers``, and where the layout offloads
    activations ``offloaded`` (the bytes that stage keeps in host memory, not counted in ``total``); with ``gpu``
    also ``capacity``, ``usable``, ``fits`` (the total inside the GPU's memory) and ``tight`` (it
    fits, but past the usable memory: into the allowance)."""
    check_layout(model, layout)
    spec = hardware.gpu(gpu) if gpu is not None else None
    stages, p, m, v = stage_layers(model, layout), layout.pp, layout.micro_batches, layout.vpp
    fp8_extra = _fp8_weight_extra(layout, spec)
    act_dense = layer_activation_bytes(model, layout, moe=False)
    act_moe = layer_activation_bytes(model, layout, moe=True) if model.is_moe else act_dense
    full_layer = max(act_dense, act_moe)
    # offloaded inputs wait in host memory; on the GPU, a layer's worth being copied out in forward and one
    # brought back ahead of its backward
    off_dense = layer_offloaded_bytes(model, layout, moe=False)
    off_moe = layer_offloaded_bytes(model, layout, moe=True) if model.is_moe else off_dense
    staging = 2 * max(off_dense, off_moe)
    if layout.recompute == "full":   # the layer being recomputed holds all of its activations at once
        full_layer = max(layer_activation_bytes(model, replace(layout, recompute="none", recompute_share=1.0), moe)
                         for moe in ((False, True) if model.is_moe else (False,)))
    best, first_layer, held = None, 0, {}
    for i, layers in enumerate(stages):
        dense_layers_here = max(0, min(first_layer + layers, model.layers - model.moe_layers) - first_layer)
        # a stage's states and buffers follow from its layers of each kind and whether it holds the embedding or
        # the output layer: the stages between that match are counted once
        kind = (dense_layers_here, layers, i == 0, i == p - 1)
        if kind not in held:
            held[kind] = _stage_states(model, layout, i, layers, first_layer, fp8_extra)
        states, buffers = held[kind]
        first_layer += layers
        in_flight = in_flight_micro_batches(p, v, m, i, layout.ep_overlap and p > 1)
        per_layer = [act_dense] * dense_layers_here + [act_moe] * (layers - dense_layers_here)
        acts = in_flight * sum(per_layer) if layers else 0.0
        if layout.recompute == "full" and layers:
            acts += full_layer
        if staging and layers:
            acts += staging
        per_logit = LOGIT_BYTES if layout.loss_fp32 else BF16_LOGIT_BYTES
        logits = per_logit * model.seq_len * layout.micro_batch * model.vocab / (layout.tp * layout.cp) \
            if i == p - 1 else 0.0
        total = states["total"] + buffers + acts + logits
        row = {"model_states": states["total"], "model_state_parts": states, "zero3_buffers": buffers,
               "activations": acts, "logits": logits, "total": total, "stage": i, "stage_layers": layers,
               "in_flight_micro_batches": in_flight}
        if staging:   # what waits in host memory, per GPU (a key only where a layout offloads)
            row["offloaded"] = in_flight * (dense_layers_here * off_dense + (layers - dense_layers_here) * off_moe)
        if best is None or total > best["total"]:
            best = row
    if spec is not None:
        usable = usable_memory_bytes(spec)
        best.update(capacity=spec.memory_bytes, usable=usable, fits=best["total"] <= spec.memory_bytes,
                    tight=usable < best["total"] <= spec.memory_bytes)
    return best


def _stage_states(model: Model, layout: Layout, stage: int, layers: int, first_layer: int,
                  fp8_extra: float) -> tuple[dict, float]:
    """(model states by part, ZeRO-3 buffers): the bytes of one GPU of ``stage`` that do not depend on the
    micro-batches in flight."""
    dense, experts = stage_params(model, layout, stage, layers, first_layer)
    k = layout.optimizer_bytes_per_param
    d_states = model_state_bytes(dense, layout.sharding_degree, layout.zero_stage, k)
    e_states = model_state_bytes(experts, layout.expert_sharding_degree, layout.zero_stage, k) if experts else \
        {k: 0.0 for k in d_states}
    states = {k: d_states[k] + e_states[k] for k in d_states}
    if fp8_extra:   # the linear weights' FP8 copies (counted with the parameters)
        extra = fp8_extra * sum(stage_params(model, layout, stage, layers, first_layer, embeddings=False))
        states["parameters"] += extra
        states["total"] += extra
    buffers = 0.0
    if layout.zero_stage == 3:      # gathered current + prefetched layer, one unsharded layer gradient
        weight = 4 if layout.fp32_gather else BYTES   # fp32 weights (FSDP1 unmixed) have fp32 gradients too
        buffers = 3 * weight * (dense + experts) / max(layers, 1)
        if layout.fsdp_gather == "tensor":   # gathered and freed tensor by tensor: the largest tensor, thrice
            buffers = min(buffers, 3 * weight * largest_weight(model, layout))
        if not layout.reshard_after_forward:  # every layer of the stage stays gathered
            buffers += weight * (dense + experts) * (1 - 2 / max(layers, 1))
    return states, buffers


def memory_per_gpu(model: Model, layout: Layout, gpu=None) -> dict:
    """``_memory_per_gpu``'s count, each caller its own copy: a step's range asks it thrice a layout (once to
    see whether the layout fits, once for each end of the constants' spread), and the count depends only on the
    model, the layout and the GPU, all frozen."""
    try:
        counted = _memory_per_gpu(model, layout, gpu)
    except TypeError:   # a field unhashable (bad input, which check_layout names in one line): counted afresh
        counted = _memory_per_gpu.__wrapped__(model, layout, gpu)
    return {**counted, "model_state_parts": dict(counted["model_state_parts"])}


def fit_verdict(mem: dict) -> str:
    """``fits``, ``fits only tightly`` or ``does NOT fit``, for a ``memory_per_gpu`` result with a GPU."""
    return "does NOT fit" if not mem["fits"] else "fits only tightly" if mem["tight"] else "fits"


def tight_note(mem: dict) -> str:
    """The line a tight plan gets: what it leaves of the allowance, and what that means."""
    left = mem["capacity"] - mem["total"]
    return (f"fits only tightly: {_gib(mem['total']):.1f} GiB counted leaves {_gib(left):.1f} GiB of the GPU's "
            f"{_gib(mem['capacity']):.1f} for the CUDA context, NCCL's buffers and the allocator's fragmentation, "
            f"less than the {_gib(FRAMEWORK_BYTES + FRAGMENTATION * mem['capacity']):.1f} GiB (2 GiB and 5%) the "
            f"planner keeps; published runs counted this close ran, with little headroom (PyTorch's "
            f"expandable_segments allocator helps)")


def describe_memory(mem: dict) -> str:
    """``62.1 GiB = states 13.4 + activations 45.2 + logits 3.1 ... of 73.4 GiB usable``."""
    parts = [("states", mem["model_states"]), ("ZeRO-3 buffers", mem["zero3_buffers"]),
             ("activations", mem["activations"]), ("logits", mem["logits"])]
    text = " + ".join(f"{name} {_gib(x):.1f}" for name, x in parts if x) or "0"
    out = f"{_gib(mem['total']):.1f} GiB = {text}"
    if "usable" in mem:
        out += f" of {_gib(mem['usable']):.1f} GiB usable ({_gib(mem['capacity']):.1f} GiB on the GPU)"
    return out + (f", stage {mem['stage']}" if mem.get("stage") else "")
