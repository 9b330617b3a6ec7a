"""Activation bytes a layer keeps for backward: the count chapter 5 derives, term by term.

``activation_bytes_per_layer`` is Korthikanti et al.'s (2022) equation for a GPT layer (dropout, TP with or
without sequence parallelism, flash attention or not, each recomputation policy); ``layer_activation_bytes``
generalises it to any ``Model`` and ``Layout``: grouped-query and latent attention, gated MLPs, routed and
shared experts (each dispatched copy), context parallelism, Megatron-Core's selective modules, recomputing a
share of the blocks, and what FP8 keeps (Transformer Engine's FP8 copy of each linear layer's input,
``Layout.fp8_saved_inputs``; DeepSeek-V3's FP8 activations).  ``memory`` multiplies it by what each pipeline
stage holds in flight.
"""

from __future__ import annotations

import numbers
from dataclasses import replace

from playground.planner.architecture import Model
from playground.planner.errors import PlanError
from playground.planner.gemms import block_matmuls
from playground.planner.layout import BYTES, RECOMPUTE, Layout

__all__ = ["activation_bytes_per_layer", "layer_activation_bytes", "layer_offloaded_bytes"]


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
                     modules: tuple = (), fp8: str = "none", probs: str = "activation",
                     offload: tuple = ()) -> tuple[float, float]:
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
    weights' gradient.  ``offload``: Megatron-Core's offload modules (``Layout.offload_modules``), whose input
    waits in host memory instead (``attn_norm``, ``mlp_norm``: a norm's input; ``qkv_linear``: the attention norm's
    output; ``core_attn``: Q, K and V; ``attn_proj``: the attention output; ``expert_fc1``: each dispatched copy;
    ``moe_act``: the experts' gate and up products); what recomputation already drops is not counted twice."""
    h, a, k = model.hidden, model.heads, model.kv_head_count
    d, dv = model.head_size, model.value_head_size
    lin = 1 if fp8 != "none" else BYTES                 # bytes of one saved element a linear layer reads
    gate = 1 if fp8 == "all" else BYTES                 # ... and one the MLP's activation reads
    att = model.attention_share                         # a hybrid's share of attention mixers, beside its recurrent ones
    norms = 1 + att + model.ssm_share                   # two norms a layer (a hybrid: the FFN's and each mixer's)
    outputs = 0 if "layernorm" in modules else (norms - att * ("qkv_linear" in offload)) * h  # the norms' outputs,
    # unless recomputed or (the attention's) offloaded; their inputs, unless offloaded; the dropout masks
    inputs = BYTES * h * (norms - att * ("attn_norm" in offload) - ("mlp_norm" in offload))
    whole = inputs + lin * outputs + (norms * h if dropout else 0)
    if model.is_mla:  # the latents and their norms (down-projections are not split over TP)
        whole += lin * (2 * (model.q_lora_rank or 0) + 2 * model.kv_lora_rank + model.qk_rope_dim)
        k = a
    qkv = 0 if ("mla_up_proj" in modules and model.is_mla) or "core_attn" in offload else BYTES * (a * d + k * d + k * dv)
    attn_out = "attn_proj" not in offload
    split = qkv + attn_out * BYTES * a * dv             # Q, K, V and the attention output
    if fp8 == "inputs" and attn_out:
        split += a * dv                                 # the output projection's FP8 copy of its input
    split *= att
    if model.attention_gate:                            # the output gate's input and the gated output
        split += att * 2 * BYTES * a * dv
    if model.ssm_layers:                                # what a recurrent mixer keeps, past its norm's output
        split += model.ssm_share * model.ssm.saved_bytes(1, 1)
    mlp = lambda f: (gate * (2 if model.gated_mlp else 1) + lin) * f  # noqa: E731  (gate, up, product | in, act)
    if moe:
        if "moe" not in modules:
            whole += 4 * model.experts                  # the router's fp32 logits
            act = lin * model.expert_width if "moe_act" in modules else 0
            output = BYTES * h if probs == "combine" else 0   # each expert's output, kept for the weights
            copy = 0 if "expert_fc1" in offload else lin * h  # the dispatched copy, fc1's input
            if "moe_act" in offload:                    # the activation's input: gate and up
                act += gate * (2 if model.gated_mlp else 1) * model.expert_width
            # each dispatched copy, its MLP, and (where the combine weights them) its output
            split += imbalance * model.top_k * (copy + output + mlp(model.expert_width) - act)
        if model.shared_width and not {"moe", "shared_experts"} & set(modules):
            split += mlp(model.shared_width)            # the shared MLP
    elif "mlp" not in modules:
        split += mlp(model.ffn_width)
    return whole, split


def layer_offloaded_bytes(model: Model, layout: Layout, moe: bool = False) -> float:
    """Bytes of one layer's saved activations (an MoE layer when ``moe``), per micro-batch on one GPU, that
    ``Layout.offload_modules`` sends to host memory in forward and brings back for backward."""
    if not layout.offload_modules:
        return 0.0
    return layer_activation_bytes(model, replace(layout, offload_modules=()), moe) - layer_activation_bytes(model, layout, moe)


def layer_activation_bytes(model: Model, layout: Layout, moe: bool = False) -> float:
    """Bytes one layer (an MoE layer when ``moe``) keeps on the GPU for backward, per micro-batch on one GPU
    (what ``Layout.offload_modules`` sends to host memory not counted: ``layer_offloaded_bytes``)."""
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
        attention_out = tokens * model.heads * model.value_head_size / t * model.attention_share
        return BYTES * (model.hidden * tokens / (t if layout.sequence_parallel else 1) + kept + attention_out) \
            + 4 * model.heads * tokens / t * model.attention_share + stream
    modules = layout.selective_modules
    fp8 = "none" if layout.dtype != "fp8" else "all" if layout.fp8_activations else \
        "inputs" if layout.fp8_saved_inputs else "none"
    whole, split = _saved_per_token(model, moe, layout.dropout, layout.moe_imbalance, modules, fp8, layout.moe_probs,
                                    layout.offload_modules)
    saved = tokens * (whole / (t if layout.sequence_parallel else 1) + split / t)
    if layout.flash_attention:
        return saved + 4 * model.heads * tokens / t * model.attention_share   # log-sum-exp per row
    if "core_attn" in modules:
        return saved                                                       # scores recomputed
    local = model.local_layers / model.layers   # a sliding-window layer keeps only its window's scores
    keys = (1 - local) * model.seq_len + local * model.attended_keys(True)
    return saved + (5 if layout.dropout else 2) * model.heads * tokens * keys / t * model.attention_share
