"""config.json readers for the families that do not spell their shape with Llama's keys.

``hf_config.model_from_hf_dict`` sends a config here by its ``model_type``; each reader takes the
typed look-up ``hf_keys.Keys`` (``keys.int``, ``keys.bool``, ``keys.get``, ``keys.source``) and returns a
``Model``.  What each reads:

* gpt2: ``n_layer``, ``n_embd``, ``n_head``, ``n_inner`` (null: 4 h), ``n_positions``, ``vocab_size``;
  tied embeddings, learned positions, biases and LayerNorm.
* mpt (MosaicML's MPT, llm-foundry's models): ``n_layers``, ``d_model``, ``n_heads``,
  ``expansion_ratio`` (the MLP is that many times ``d_model``, GELU), ``vocab_size``, ``no_bias``,
  ``learned_pos_emb`` and ``attn_config.alibi`` (a learned position table only without ALiBi),
  ``max_seq_len`` (the table's size; ALiBi has no reach to warn about); tied embeddings and LayerNorm.
* falcon: ``num_hidden_layers`` / ``n_layer``, ``hidden_size``, ``num_attention_heads`` / ``n_head``,
  multi-query attention (``multi_query``: one K/V head) or, with ``new_decoder_architecture``,
  ``num_kv_heads``; a GELU MLP of ``ffn_hidden_size`` (default 4 h); ``bias``; rotary positions unless
  ``alibi``; tied embeddings unless ``tie_word_embeddings`` says false; LayerNorm.  Its parallel
  attention and MLP share their input norm: one LayerNorm a layer fewer than ``Model`` counts.
* bloom (BigScience's BLOOM): ``n_layer``, ``hidden_size`` (or the older ``n_embed``), ``n_head``,
  ``vocab_size``; a GELU MLP 4 h wide, biases on every linear layer, LayerNorm, ALiBi (no position
  weights), tied embeddings.  The LayerNorm after its embedding (2 h weights) is not counted.
* dbrx (Databricks' DBRX): ``n_layers``, ``d_model``, ``n_heads``, ``vocab_size``, ``max_seq_len``;
  ``attn_config.kv_n_heads``; ``ffn_config``'s ``moe_num_experts``, ``moe_top_k`` and
  ``ffn_hidden_size`` (each expert's width, a gated MLP: ``ffn_act_fn`` silu); every layer an MoE, no
  biases, untied unless ``tie_word_embeddings``.  Its LayerNorms have no bias: counted with one, h
  weights a norm more than it has.

Where a learned position table sets the parameter count, its size is the sequence length (as for
gpt2); elsewhere the sequence length is the caller's.
"""

from __future__ import annotations

from playground.planner.architecture import Model
from playground.planner.errors import PlanError
from playground.planner.hf_keys import Keys

__all__ = ["FAMILY_READERS"]


def gpt2(keys, name: str, seq_len: int) -> Model:
    """GPT-2: learned positions, so the position table (``n_positions``) is the sequence length."""
    return Model(keys.int("n_layer"), keys.int("n_embd"), keys.int("n_head"), keys.int("vocab_size"),
                 seq_len=keys.int("n_positions"), ffn=keys.int("n_inner", None),
                 tied_embeddings=keys.bool("tie_word_embeddings", True), name=name)


def mpt(keys, name: str, seq_len: int) -> Model:
    """MPT: GPT's block (LayerNorm, a GELU MLP) with ALiBi or a learned position table."""
    hidden = keys.int("d_model")
    ratio = keys.get("expansion_ratio", 4)
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or ratio <= 0 or (ratio * hidden) % 1:
        raise PlanError(f"{keys.source}: 'expansion_ratio' must be a positive number giving a whole MLP width, "
                        f"got {ratio!r}")
    attn = keys.get("attn_config", {})
    if not isinstance(attn, dict):
        raise PlanError(f"{keys.source}: 'attn_config' must be an object, got {attn!r}")
    alibi = attn.get("alibi", False)
    learned = keys.bool("learned_pos_emb", True) and not alibi
    bias = not keys.bool("no_bias", False)
    return Model(keys.int("n_layers"), hidden, keys.int("n_heads"), keys.int("vocab_size"),
                 seq_len=keys.int("max_seq_len") if learned else seq_len, ffn=int(ratio * hidden),
                 position_embeddings=learned, qkv_bias=bias, proj_bias=bias, tied_embeddings=True,
                 max_positions=keys.int("max_seq_len") if learned else None, name=name)


def falcon(keys, name: str, seq_len: int) -> Model:
    """Falcon: multi-query (7B) or grouped-query (40B, 180B) attention beside a GELU MLP."""
    layers = keys.int("num_hidden_layers", None) or keys.int("n_layer")
    hidden = keys.int("hidden_size")
    heads = keys.int("num_attention_heads", None) or keys.int("n_head")
    if keys.bool("new_decoder_architecture", False):
        kv_heads = keys.int("num_kv_heads", heads)
    else:
        kv_heads = 1 if keys.bool("multi_query", True) else heads
    if keys.bool("alibi", False):
        raise PlanError(f"{keys.source}: Falcon with ALiBi is not read (its attention biases are not counted); "
                        "give the shape by flags")
    bias = keys.bool("bias", False)
    return Model(layers, hidden, heads, keys.int("vocab_size"), seq_len=seq_len,
                 ffn=keys.int("ffn_hidden_size", None), kv_heads=kv_heads, position_embeddings=False,
                 qkv_bias=bias, proj_bias=bias, tied_embeddings=keys.bool("tie_word_embeddings", True),
                 max_positions=keys.int("max_position_embeddings", None), name=name)


def bloom(keys, name: str, seq_len: int) -> Model:
    """BLOOM: GPT's block (biases, LayerNorm, a 4 h GELU MLP) with ALiBi, so no position weights."""
    hidden = keys.int("hidden_size", None) or keys.int("n_embed")
    return Model(keys.int("n_layer"), hidden, keys.int("n_head"), keys.int("vocab_size"), seq_len=seq_len,
                 position_embeddings=False, tied_embeddings=keys.bool("tie_word_embeddings", True), name=name)


def dbrx(keys, name: str, seq_len: int) -> Model:
    """DBRX: every layer an MoE of gated experts, grouped-query attention, no biases."""
    attn, ffn = _section(keys, "attn_config"), _section(keys, "ffn_config")
    act = ffn.get("ffn_act_fn", {"name": "silu"})
    if not isinstance(act, dict) or act.get("name", "silu") != "silu":
        raise PlanError(f"{keys.source}: ffn_config.ffn_act_fn {act!r} is not silu, DBRX's gated MLP")
    heads, width = keys.int("n_heads"), ffn.int("ffn_hidden_size")
    return Model(keys.int("n_layers"), keys.int("d_model"), heads, keys.int("vocab_size"), seq_len=seq_len,
                 ffn=width, kv_heads=attn.int("kv_n_heads", heads), gated_mlp=True, position_embeddings=False,
                 qkv_bias=False, proj_bias=False, tied_embeddings=keys.bool("tie_word_embeddings", False),
                 experts=ffn.int("moe_num_experts"), top_k=ffn.int("moe_top_k"), moe_ffn=width,
                 max_positions=keys.int("max_seq_len", None), name=name)


def _section(keys, section: str):
    """A nested block of the config (DBRX's ``attn_config``, ``ffn_config``), read with the same checks."""
    inner = keys.get(section, {})
    if not isinstance(inner, dict):
        raise PlanError(f"{keys.source}: {section!r} must be an object, got {inner!r}")
    return Keys(inner, f"{keys.source} ({section})")


FAMILY_READERS = {"gpt2": gpt2, "mpt": mpt, "falcon": falcon, "bloom": bloom, "dbrx": dbrx}
