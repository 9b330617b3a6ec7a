"""FLOPs of training: per token from the parameter count, or per iteration from the architecture.

Both the capacity plan (``playground.planner.capacity``) and the step-time model's published-run checks
count FLOPs here, so the two can never disagree on what a step costs.
"""

from __future__ import annotations

__all__ = ["flops_per_token", "megatron_flops_per_iteration", "megatron_core_flops_per_token",
           "megatron_moe_flops_per_token"]


def flops_per_token(active_params: float, recompute: str = "none", recompute_share: float = 1.0) -> float:
    """6 N (2 forward + 4 backward per parameter); 8 N when full recomputation re-runs the forward,
    (6 + 2 r) N when it re-runs it in a share r of the blocks.

    Selective recomputation re-runs only the attention core, a few percent more; without the
    architecture it is counted as 6 N (``megatron_flops_per_iteration`` counts it exactly).
    """
    return (6 + 2 * (recompute_share if recompute == "full" else 0)) * active_params


def megatron_flops_per_iteration(batch: float, seq_len: int, layers: int, hidden: int, vocab: int,
                                 recompute: str = "full", recompute_share: float = 1.0) -> float:
    """FLOPs of one iteration of a GPT with ``batch`` sequences (Narayanan et al. 2021, Eq. 3).

    Per layer the forward does 24 B s h^2 (projections, 4h MLP) + 4 B s^2 h (scores and
    scores x V); the logit layer 2 B s h V; backward is twice the forward.  Full recomputation
    runs the layers' forward once more: 96 B s l h^2 (1 + s/6h + V/16lh).  Without it:
    72 B s l h^2 (1 + s/6h + V/12lh).  Full recomputation of a share r of the blocks adds r of the
    layers' forward, 24 r B s l h^2 (1 + s/6h).  Selective recomputation (Korthikanti et al. 2022)
    re-runs only the attention core: + 4 B s^2 h per layer.
    """
    B, s, l, h, V = batch, seq_len, layers, hidden, vocab
    if recompute == "full" and recompute_share == 1:
        return 96 * B * s * l * h ** 2 * (1 + s / (6 * h) + V / (16 * l * h))
    base = 72 * B * s * l * h ** 2 * (1 + s / (6 * h) + V / (12 * l * h))
    if recompute == "full":
        return base + recompute_share * 24 * B * s * l * h ** 2 * (1 + s / (6 * h))
    return base + (4 * B * s ** 2 * h * l if recompute == "selective" else 0)


def megatron_core_flops_per_token(model) -> float:
    """FLOPs per token as Megatron-Core (and NeMo, which prints it) counts a dense GQA / SwiGLU model's
    training step, no recomputation: 12 l h^2 [(1 + g/a + s/h) (a d / h) + f/h (x 1.5 gated) + V / 2lh]
    (``num_floating_point_operations`` in Megatron-LM's ``megatron/training/training.py``; causal
    attention counted whole).  Turns a source's TFLOP/s per GPU back into the tokens/s it measured."""
    l, h, s = model.layers, model.hidden, model.seq_len
    query_share = model.heads * model.head_size / h
    attention = (1 + model.kv_head_count / model.heads + s / h) * query_share
    mlp = model.ffn_width / h * (1.5 if model.gated_mlp else 1)
    return 12 * l * h * h * (attention + mlp + model.vocab / (2 * l * h))


def megatron_moe_flops_per_token(model, mtp_layers: int = 0) -> float:
    """FLOPs per token as Megatron-Core v0.16 and later counts a training step, no recomputation (its
    ``num_floating_point_operations``, ``transformer_flops``): every GEMM three times (forward, wgrad, dgrad) at
    2 FLOPs a multiply-add; a token's routed experts (top k) and shared experts; MLA through its low-rank paths;
    causal attention counted half, 6 a d s a layer (s for each earlier key, over 2, for QK^T and PV); the
    multi-token-prediction layers as more layers of the last kind (an MoE for DeepSeek-V3), with their
    projection, norms and output head.  The vocabulary taken as the config's (Megatron pads it to a multiple
    of 128 TP; DeepSeek-V3's and Qwen3's already are).  Turns a Megatron-LM source's TFLOP/s back into tokens/s."""
    h, a, s, gated = model.hidden, model.heads, model.seq_len, 3 if model.gated_mlp else 2
    moe_layers = model.moe_layers + (mtp_layers if model.is_moe else 0)
    dense_layers = model.layers + mtp_layers - moe_layers
    mlp = h * gated * (model.ffn_width * dense_layers
                       + (model.expert_width * model.top_k + model.shared_width) * moe_layers)
    if model.is_mla:
        nope, rope, v = model.head_size - model.qk_rope_dim, model.qk_rope_dim, model.value_head_size
        q = model.q_lora_rank * (h + a * (nope + rope) + 1) if model.q_lora_rank else h * a * (nope + rope)
        linear = q + model.kv_lora_rank * (h + a * (nope + v) + 1) + h * rope + a * v * h
        core = a * (nope + rope) / 2 + a * v / 2
    else:
        query, kv = a * model.head_size, model.kv_head_count * model.head_size
        linear, core = h * (query + 2 * kv) + query * h, query
    attention = (model.layers + mtp_layers) * (linear + s * core)
    mtp = mtp_layers * (3 * h + 2 * h * h)
    return 6 * (mlp + attention + mtp + h * model.vocab * (mtp_layers + 1))
