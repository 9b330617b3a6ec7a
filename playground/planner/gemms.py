"""The GEMMs of one transformer layer on one GPU, after tensor, context and expert parallelism split them.

``layer_gemms`` lists them as (name, batch count, M, N, K), the shapes every cost of the step-time
model (``costs``) and the memory model's per-op checkpointing count start from; ``block_matmuls``
splits the fused ones the way a Llama block calls them, ``per_op_recomputed`` picks the ones
torchtitan's per-op selective checkpointing recomputes, and ``module_recomputed`` those Megatron-Core's
``--recompute-modules`` run again.
"""

from __future__ import annotations

import functools

from playground.planner.architecture import Model
from playground.planner.ssm import SCAN_GEMMS

__all__ = ["ATTENTION_CORE", "ACTIVATION_GEMMS", "layer_gemms", "block_matmuls", "per_op_recomputed",
           "module_recomputed"]

ATTENTION_CORE = ("scores", "context")
# GEMMs outside the attention core whose right-hand operand is an activation, not a weight: nothing to gather,
# cast once a step or accumulate into a main gradient (sparse attention's indexer scores its keys; a recurrent
# mixer's chunked scan, which also stays in bf16)
ACTIVATION_GEMMS = ("indexer_scores",) + SCAN_GEMMS


def layer_gemms(model: Model, micro_batch: int, tp: int, cp: int = 1, ep: int = 1,
                moe: bool = False, etp: int | None = None, local: bool = False) -> list[tuple[str, float, float, int, int]]:
    """The forward GEMMs of one layer on one GPU: (name, batch count, M, N, K).

    Attention scores are counted over the whole sequence (causal masking not subtracted, as
    Megatron's FLOP count does), over the window of a sliding-window layer (``local``), or over the keys
    sparse attention selects (``Model.sparse_keys``), its indexer's scores then counted as a GEMM over the
    earlier keys, as its kernel computes them, the heads summed into one logit a key.  A hybrid's layer holds its
    share of the attention and of the recurrent mixers (``Model.attention_share``, ``ssm_share``; ``ssm.Mamba2.gemms``:
    the projections, then the chunked scan's products).  An MoE layer's E / EP local experts each see the T k EP / E
    tokens routed to them on average (T = b s / CP tokens per GPU, k experts per token), each
    expert split over ``etp`` ranks (expert tensor parallelism; default: TP's degree)."""
    # a range or a search prices the same few shapes thousands of times: each is listed once (a copy each call)
    return list(_layer_gemms(model, micro_batch, tp, cp, ep, moe, etp, local))


@functools.lru_cache(maxsize=4096)
def _layer_gemms(model: Model, micro_batch: int, tp: int, cp: int, ep: int, moe: bool, etp: int | None,
                 local: bool) -> tuple[tuple[str, float, float, int, int], ...]:
    b, s, h, t = micro_batch, model.seq_len, model.hidden, tp
    T = b * s / cp
    a, d, dv, kv = model.heads, model.head_size, model.value_head_size, model.kv_head_count
    gated = 2 if model.gated_mlp else 1
    if model.is_mla:
        q = [("q_down", 1, T, model.q_lora_rank, h), ("q_up", 1, T, a * d // t, model.q_lora_rank)] \
            if model.q_lora_rank else [("q", 1, T, a * d // t, h)]
        attention = q + [("kv_down", 1, T, model.kv_lora_rank + model.qk_rope_dim, h),
                         ("kv_up", 1, T, a * (d - model.qk_rope_dim + dv) // t, model.kv_lora_rank)]
    else:
        # Qwen3-Next's query projection also yields a gate for each head's output
        attention = [("qkv", 1, T, ((2 if model.attention_gate else 1) * a * d + 2 * kv * d) // t, h)]
    if model.sparse_keys:
        # the lightning indexer, whole on every TP rank: its projections, then its scores over the earlier keys
        # (half the sequence on average), summed over its heads; counted at the share of the layers holding one
        H, di, n = model.indexer_heads, model.indexer_dim, model.indexer_share
        attention += [("indexer_q", n, T, H * di, model.q_lora_rank or h), ("indexer_k", n, T, di, h),
                      ("indexer_w", n, T, H, h), ("indexer_scores", b * n, s / cp, s / 2, H * di)]
    keys = model.attended_keys(local)
    attention += [("scores", b * a // t, s / cp, keys, d), ("context", b * a // t, s / cp, dv, keys),
                  ("proj", 1, T, h, a * dv // t)]
    if model.attention_share != 1:   # a hybrid: a layer's share of the attention mixers, and of the recurrent ones
        attention = [(name, c * model.attention_share, M, N, K) for name, c, M, N, K in attention]
    if model.ssm_layers:
        attention += model.ssm.gemms(h, T, b, t, model.ssm_share)
    if not moe:
        return tuple(attention + [("mlp_in", 1, T, gated * model.ffn_width // t, h),
                                  ("mlp_out", 1, T, h, model.ffn_width // t)])
    # experts split over ETP ranks (Megatron's expert tensor parallelism; TP's degree unless set):
    # with ETP < TP each rank routes its own T / t tokens to whole-width experts
    e, f, et = model.experts, model.expert_width, etp or t
    per_expert = T * model.top_k * ep / e * et / t
    mlp = [("router", 1, T, e, h), ("experts_in", e // ep, per_expert, gated * f // et, h),
           ("experts_out", e // ep, per_expert, h, f // et)]
    if model.shared_width:
        mlp += [("shared_in", 1, T, gated * model.shared_width // t, h),
                ("shared_out", 1, T, h, model.shared_width // t)]
    return tuple(attention + mlp)


def block_matmuls(model: Model, micro_batch: int, tp: int, cp: int = 1, ep: int = 1,
                  moe: bool = False, etp: int | None = None) -> list[tuple[str, float, float, int, int]]:
    """``layer_gemms`` without the attention core (nor ``ACTIVATION_GEMMS``), one entry per matmul as a Llama block calls them:
    Q, K and V apart, the gate and up projections apart (the order per-op checkpointing counts)."""
    out = []
    for name, c, M, N, K in layer_gemms(model, micro_batch, tp, cp, ep, moe, etp):
        if name in ATTENTION_CORE + ACTIVATION_GEMMS:
            continue
        if name == "qkv":
            d, kv = model.head_size, model.kv_head_count
            out += [("q", c, M, (2 if model.attention_gate else 1) * model.heads * d // tp, K), ("k", c, M, kv * d // tp, K), ("v", c, M, kv * d // tp, K)]
        elif name in ("mlp_in", "experts_in", "shared_in") and model.gated_mlp:
            out += [(name + "_gate", c, M, N // 2, K), (name + "_up", c, M, N // 2, K)]
        else:
            out.append((name, c, M, N, K))
    return out


def per_op_recomputed(model: Model, micro_batch: int, tp: int, cp: int = 1, ep: int = 1,
                      moe: bool = False, etp: int | None = None) -> list[tuple[str, float, float, int, int]]:
    """The matmuls torchtitan's per-op selective checkpointing (``selective_ac_option = "op"``)
    recomputes: it keeps the output of every other matmul of a block (the 1st, 3rd, ...) and of the
    attention kernel, and recomputes the rest, with every element-wise op."""
    return block_matmuls(model, micro_batch, tp, cp, ep, moe, etp)[1::2]


# the GEMMs each of Megatron-Core's recompute modules runs again (core_attn: the attention core,
# which ``costs`` times as one fused kernel; layernorm and moe_act: element-wise only)
_MODULE_GEMMS = {"mla_up_proj": ("q_up", "kv_up"), "mlp": ("mlp_in", "mlp_out"),
                 "moe": ("router", "experts_in", "experts_out", "shared_in", "shared_out"),
                 "shared_experts": ("shared_in", "shared_out")}


def module_recomputed(model: Model, modules, micro_batch: int, tp: int, cp: int = 1, ep: int = 1,
                      moe: bool = False, etp: int | None = None, local: bool = False) -> list:
    """The GEMMs (outside the attention core) that Megatron-Core's selective recomputation of
    ``modules`` (``--recompute-modules``) runs a second time in one layer's backward."""
    names = {n for m in modules for n in _MODULE_GEMMS.get(m, ())}
    return [g for g in layer_gemms(model, micro_batch, tp, cp, ep, moe, etp, local) if g[0] in names]
