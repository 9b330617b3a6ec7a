"""Memory per GPU: the planner's one memory model, used by the plan, the step-time model and the search.

For the fullest pipeline stage of a layout (every stage is checked; the fullest is reported):

* **Model states** (Rajbhandari et al. 2020; formulas kept once in ``playground.zero.accounting``):
  2-byte parameters, a 2-byte gradient buffer and 12 bytes of Adam state per parameter.  Dense
  weights are split over TP and PP and their ZeRO states sharded over DP x CP (Megatron-Core's
  distributed optimizer) or the HSDP shard group; routed-expert weights are split over EP x ETP and
  sharded over the DP x CP / EP ranks that replicate them.  ZeRO-3 (FSDP) also holds a working set:
  the gathered parameters of the current and the prefetched layer and one layer's unsharded gradient
  (a ZeRO-3 that gathers and frees tensor by tensor, ``fsdp_gather="tensor"``: three of its largest tensor).
* **Activations** per layer and micro-batch (``layer_activation_bytes``): Korthikanti et al.'s
  (2022) count generalised to grouped-query and latent attention, gated MLPs and experts, with or
  without dropout, flash attention (no s^2 scores), sequence parallelism (everything split over
  TP) and context parallelism (the sequence split over CP); full recomputation keeps only each
  layer's input, plus one layer's activations while it is recomputed (in ``Layout.recompute_share``
  of the layers: the rest keep everything, counted as an average layer); Megatron-Core's selective
  modules (``Layout.recompute_modules``) keep none of what they recompute; under FP8 each linear layer
  keeps the FP8 copy of its input it cast (Transformer Engine; ``Layout.fp8_saved_inputs``).
* **In flight**: 1F1B's stage i holds min(p - i, m) micro-batches; the interleaved schedule adds
  (p - 1) / (p v) of that (Korthikanti et al. Sec. 4.2.3).
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

import numbers
from dataclasses import replace

from playground import hardware
from playground.planner.architecture import Model
from playground.planner.errors import PlanError
from playground.planner.gemms import block_matmuls
from playground.planner.layout import BYTES, RECOMPUTE, Layout, stage_layers
from playground.planner.layout_checks import check_layout
from playground.zero import accounting as zero_accounting

__all__ = ["FRAMEWORK_BYTES", "FRAGMENTATION", "RECOMPUTE", "model_state_bytes", "activation_bytes_per_layer",
           "layer_activation_bytes", "usable_memory_bytes", "memory_per_gpu", "describe_memory", "fit_verdict",
           "tight_note", "stage_params"]

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


def activation_bytes_per_layer(seq_len: int, micro_batch: int, hidden: int, heads: int,
                               recompute: str = "none", tp: int = 1, dropout: bool = True,
                               flash_attention: bool = False, sequence_parallel: bool = True) -> float:
    """Activation bytes one GPT layer keeps for backward (Korthikanti et al. 2022), the chapter's equation.

    16-bit activations, 1-byte dropout masks, tensor parallelism of degree ``tp``.  With sequence
    parallelism every saved tensor is split over the t ranks: s b h (34 + 5 a s / h) / t with no
    recomputation, 34 s b h / t with selective recomputation (the a s^2 b attention scores are
    recomputed), 2 s b h / t with full recomputation (only the layer's input is kept).  Without
    sequence parallelism the LayerNorm and dropout regions stay replicated on every TP rank:
    s b h (10 + 24 / t + 5 a s / (h t)), s b h (10 + 24 / t) selective, and the full layer input
    2 s b h with full recomputation.  Without dropout the two s b h masks (replicated without SP)
    go (34 -> 32, 10 -> 8) and the scores cost 2 a s^2 b instead of 5; a fused (flash) attention
    kernel keeps no scores at all, only a 4-byte log-sum-exp per row (4 a s b).
    ``layer_activation_bytes`` is the same count for any ``Model``.
    """
    if recompute not in RECOMPUTE or recompute == "op":
        raise PlanError(f"recompute must be one of none, selective, full here, got {recompute!r} (per-op "
                        "checkpointing is counted by layer_activation_bytes)")
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


def _saved_per_token(model: Model, moe: bool, dropout: bool, imbalance: float = 1.0,
                     modules: tuple = (), fp8: str = "none", probs: str = "activation") -> tuple[float, float]:
    """Bytes one token leaves saved in one layer: (kept whole on every TP rank without sequence
    parallelism, split over TP).  A GPT layer with dropout gives (10 h, 24 h), Korthikanti's.
    ``modules``: Megatron-Core's selective recompute modules, whose outputs (``layernorm``: the
    norms'; ``mla_up_proj``: Q, K and V; ``moe_act``: the experts' activation) or insides (``mlp``,
    ``moe``, ``shared_experts``: everything past their input) are not kept.  ``fp8``: what is kept in
    FP8, 1 byte an element.  ``"all"``: what the linear layers and the MLP's activation read (DeepSeek-V3:
    the norms' outputs, MLA's latents, the dispatched copies, the MLP's inputs and products); Q, K, V,
    the attention output, the residual stream and the router's logits stay as they were.  ``"inputs"``:
    each linear layer's own input, the FP8 copy Transformer Engine's Linear casts and keeps for the
    weight gradient (the norms' outputs, MLA's latents, the dispatched copies, the MLP's products, and a
    copy of the attention output beside the bf16 one the attention kernel keeps), while the activation's
    input (gate and up) stays bf16.
    ``"none"``: everything at its bf16 width (bf16 GEMMs, or torchao's Float8Linear, which keeps the
    bf16 input and casts it again in backward).  ``probs``: where the router's weights scale a
    routed copy (``Layout.moe_probs``): inside the experts' activation, which keeps nothing more
    (Megatron-Core since v0.13, ``experts.py``'s ``activation_func_with_probs``; its combine unpermutes
    without them), or on each expert's output at the combine, which keeps that output (h wide) for the
    weights' gradient."""
    h, a, k = model.hidden, model.heads, model.kv_head_count
    d, dv = model.head_size, model.value_head_size
    lin = 1 if fp8 != "none" else BYTES                 # bytes of one saved element a linear layer reads
    gate = 1 if fp8 == "all" else BYTES                 # ... and one the MLP's activation reads
    outputs = 0 if "layernorm" in modules else 2 * h    # both norms' outputs, unless recomputed
    whole = BYTES * 2 * h + lin * outputs + (2 * h if dropout else 0)   # their inputs; the two dropout masks
    if model.is_mla:  # the latents and their norms (down-projections are not split over TP)
        whole += lin * (2 * (model.q_lora_rank or 0) + 2 * model.kv_lora_rank + model.qk_rope_dim)
        k = a
    qkv = 0 if "mla_up_proj" in modules and model.is_mla else BYTES * (a * d + k * d + k * dv)
    split = qkv + BYTES * a * dv                        # Q, K, V and the attention output
    if fp8 == "inputs":
        split += a * dv                                 # the output projection's FP8 copy of its input
    mlp = lambda f: (gate * (2 if model.gated_mlp else 1) + lin) * f  # noqa: E731  (gate, up, product | in, act)
    if moe:
        if "moe" not in modules:
            whole += 4 * model.experts                  # the router's fp32 logits
            act = lin * model.expert_width if "moe_act" in modules else 0
            output = BYTES * h if probs == "combine" else 0   # each expert's output, kept for the weights
            # each dispatched copy, its MLP, and (where the combine weights them) its output
            split += imbalance * model.top_k * (lin * h + output + mlp(model.expert_width) - act)
        if model.shared_width and not {"moe", "shared_experts"} & set(modules):
            split += mlp(model.shared_width)            # the shared MLP
    elif "mlp" not in modules:
        split += mlp(model.ffn_width)
    return whole, split


def layer_activation_bytes(model: Model, layout: Layout, moe: bool = False) -> float:
    """Bytes one layer (an MoE layer when ``moe``) keeps for backward, per micro-batch on one GPU."""
    t, c = layout.tp, layout.cp
    tokens = model.seq_len * layout.micro_batch / c
    # autocast over fp32 weights keeps the residual stream in fp32: a checkpointed layer's input takes 4
    # bytes an element, 2 more than a bf16 stream's (what a norm keeps for backward depends on the norm:
    # fp32 for PyTorch's LayerNorm under autocast, bf16 for MPT's low-precision one; bf16 taken)
    stream = (4 - BYTES) * model.hidden * tokens / (t if layout.sequence_parallel else 1) if layout.fp32_stream else 0.0
    if layout.recompute == "full":   # a recomputed block keeps its input; the others (an average layer) all
        kept = BYTES * model.hidden * tokens / (t if layout.sequence_parallel else 1) + stream
        share = layout.recompute_share
        return kept if share == 1 else \
            share * kept + (1 - share) * layer_activation_bytes(model, replace(layout, recompute="none", recompute_share=1.0), moe)
    if layout.recompute == "op":  # the layer input, every other matmul's output, the attention output
        kept = sum(c * M * N for _, c, M, N, _k in
                   block_matmuls(model, layout.micro_batch, t, c, layout.ep, moe, layout.expert_tp_degree)[::2])
        attention_out = tokens * model.heads * model.value_head_size / t
        return BYTES * (model.hidden * tokens / (t if layout.sequence_parallel else 1) + kept + attention_out) \
            + 4 * model.heads * tokens / t + stream
    modules = layout.selective_modules
    fp8 = "none" if layout.dtype != "fp8" else "all" if layout.fp8_activations else \
        "inputs" if layout.fp8_saved_inputs else "none"
    whole, split = _saved_per_token(model, moe, layout.dropout, layout.moe_imbalance, modules, fp8, layout.moe_probs)
    saved = tokens * (whole / (t if layout.sequence_parallel else 1) + split / t)
    if layout.flash_attention:
        return saved + 4 * model.heads * tokens / t                        # log-sum-exp per row
    if "core_attn" in modules:
        return saved                                                       # scores recomputed
    local = model.local_layers / model.layers   # a sliding-window layer keeps only its window's scores
    keys = (1 - local) * model.seq_len + local * model.attended_keys(True)
    return saved + (5 if layout.dropout else 2) * model.heads * tokens * keys / t


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


def stage_params(model: Model, layout: Layout, stage: int, layers: int, first_layer: int) -> tuple[float, float]:
    """(dense, routed-expert) parameters one GPU of ``stage`` holds."""
    t, p = layout.tp, layout.pp
    dense_here = max(0, min(first_layer + layers, model.layers - model.moe_layers) - first_layer)
    moe_here = layers - dense_here
    moe_rest = model.moe_layer_params(0) if model.is_moe else 0
    dense = dense_here * model.dense_layer_params() + moe_here * moe_rest
    h, V = model.hidden, model.vocab
    if stage == 0:
        dense += V * h + (model.seq_len * h if model.position_embeddings else 0)
    if stage == p - 1:
        dense += h + (V * h if (not model.tied_embeddings or p > 1) else 0)  # final norm, output layer
    experts = moe_here * model.experts * model.mlp_params(model.expert_width) / (layout.ep * layout.expert_tp_degree)
    scale = model.param_count / model.counted_params()                       # a published total, if given
    return dense / t * scale, experts * scale


def largest_weight(model: Model, layout: Layout) -> float:
    """Elements of the largest weight matrix one GPU holds of a layer after TP (and EP) split it: what a
    ZeRO-3 that gathers tensor by tensor (``fsdp_gather="tensor"``) holds unsharded at a time."""
    return max(N * K for moe in ((False, True) if model.is_moe else (False,))
               for _, _, _, N, K in block_matmuls(model, layout.micro_batch, layout.tp, layout.cp, layout.ep, moe,
                                                  layout.expert_tp_degree))


def memory_per_gpu(model: Model, layout: Layout, gpu=None) -> dict:
    """Bytes per GPU of the fullest pipeline stage, by part (see the module docstring).

    Keys: ``model_states`` (and ``model_state_parts``), ``zero3_buffers``, ``activations``,
    ``logits``, ``total``, ``stage`` (which stage is fullest), ``stage_layers``; with ``gpu``
    also ``capacity``, ``usable``, ``fits`` (the total inside the GPU's memory) and ``tight`` (it
    fits, but past the usable memory: into the allowance)."""
    check_layout(model, layout)
    stages, p, m, v = stage_layers(model, layout), layout.pp, layout.micro_batches, layout.vpp
    act_dense = layer_activation_bytes(model, layout, moe=False)
    act_moe = layer_activation_bytes(model, layout, moe=True) if model.is_moe else act_dense
    full_layer = max(act_dense, act_moe)
    if layout.recompute == "full":   # the layer being recomputed holds all of its activations at once
        full_layer = max(layer_activation_bytes(model, replace(layout, recompute="none", recompute_share=1.0), moe)
                         for moe in ((False, True) if model.is_moe else (False,)))
    best, first_layer = None, 0
    for i, layers in enumerate(stages):
        dense, experts = stage_params(model, layout, i, layers, first_layer)
        dense_layers_here = max(0, min(first_layer + layers, model.layers - model.moe_layers) - first_layer)
        first_layer += layers
        d_states = model_state_bytes(dense, layout.sharding_degree, layout.zero_stage)
        e_states = model_state_bytes(experts, layout.expert_sharding_degree, layout.zero_stage) if experts else \
            {k: 0.0 for k in d_states}
        states = {k: d_states[k] + e_states[k] for k in d_states}
        buffers = 0.0
        if layout.zero_stage == 3:      # gathered current + prefetched layer, one unsharded layer gradient
            weight = 4 if layout.fp32_gather else BYTES   # fp32 weights (FSDP1 unmixed) have fp32 gradients too
            buffers = 3 * weight * (dense + experts) / max(layers, 1)
            if layout.fsdp_gather == "tensor":   # gathered and freed tensor by tensor: the largest tensor, thrice
                buffers = min(buffers, 3 * weight * largest_weight(model, layout))
            if not layout.reshard_after_forward:  # every layer of the stage stays gathered
                buffers += weight * (dense + experts) * (1 - 2 / max(layers, 1))
        in_flight = min(p - i, m) * ((1 + (p - 1) / (p * v)) if v > 1 else 1)
        per_layer = [act_dense] * dense_layers_here + [act_moe] * (layers - dense_layers_here)
        acts = in_flight * sum(per_layer) if layers else 0.0
        if layout.recompute == "full" and layers:
            acts += full_layer
        per_logit = LOGIT_BYTES if layout.loss_fp32 else BF16_LOGIT_BYTES
        logits = per_logit * model.seq_len * layout.micro_batch * model.vocab / (layout.tp * layout.cp) \
            if i == p - 1 else 0.0
        total = states["total"] + buffers + acts + logits
        row = {"model_states": states["total"], "model_state_parts": states, "zero3_buffers": buffers,
               "activations": acts, "logits": logits, "total": total, "stage": i, "stage_layers": layers,
               "in_flight_micro_batches": in_flight}
        if best is None or total > best["total"]:
            best = row
    if gpu is not None:
        spec = hardware.gpu(gpu)
        usable = usable_memory_bytes(spec)
        best.update(capacity=spec.memory_bytes, usable=usable, fits=best["total"] <= spec.memory_bytes,
                    tight=usable < best["total"] <= spec.memory_bytes)
    return best


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
