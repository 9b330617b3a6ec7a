"""config.json readers for hybrid models, whose blocks are Mamba-2 mixers, attention, MLPs and MoEs.

``hf_config.model_from_hf_dict`` sends a config here by its ``model_type`` (``HYBRID_READERS``) before it
refuses other mixers; each reader takes the typed look-up ``hf_keys.Keys`` and returns a ``Model`` whose
``layers`` are the MLP and MoE blocks, with the Mamba-2 mixers (``Model.ssm``, ``ssm_layers``) and the
attention ones (``attention_layers``) counted beside them.  What each reads:

* nemotron_h (NVIDIA's Nemotron-H and Nemotron 3): the blocks in order, ``hybrid_override_pattern`` (one
  character a block: ``M`` Mamba-2, ``*`` attention, ``-`` MLP, ``E`` MoE) or ``layers_block_type`` (the same
  as words); ``hidden_size``, ``vocab_size``, ``tie_word_embeddings`` (default false); attention's
  ``num_attention_heads``, ``num_key_value_heads``, ``head_dim`` and ``attention_bias``, with no position
  weights nor rotary embedding; the MLP's ``intermediate_size``, squared ReLU (``mlp_hidden_act``, not gated) and
  ``mlp_bias``; the mixers' ``mamba_num_heads``, ``mamba_head_dim``, ``ssm_state_size``, ``n_groups`` (or
  ``mamba_n_groups``), ``conv_kernel``, ``chunk_size``, ``use_conv_bias`` and ``use_bias`` (the projections');
  the MoE's ``n_routed_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``, a shared expert of
  ``moe_shared_expert_intermediate_size`` (times ``n_shared_experts``, default 1), a per-expert routing bias and
  ``n_group`` / ``topk_group``.  Where a model has both MLP and MoE blocks the MLPs are counted as dense layers.
  The multi-token-prediction blocks are not counted (``read_note`` says so); a latent MoE (``moe_latent_size``:
  Nemotron 3 Super's experts in a smaller space) is refused rather than counted at the full width.

``gated_delta_net`` reads what Qwen3-Next's and Qwen3.5's configs (``qwen3_next``, ``qwen3_5_text``,
``qwen3_5_moe_text``) add to the Llama and Qwen-MoE keys ``hf_config`` reads: which layers are Gated DeltaNet
(``layer_types``' ``linear_attention``, or all but every ``full_attention_interval``-th, default 4), the mixer's
``linear_num_key_heads``, ``linear_key_head_dim``, ``linear_num_value_heads``, ``linear_value_head_dim`` and
``linear_conv_kernel_dim``, and the gate on the attention layers' output (``attn_output_gate``, default true: Qwen3-Next
always gates).  Its multi-token-prediction layers (``mtp_num_hidden_layers``) are not counted, and said.

``granite_hybrid`` reads IBM's Granite 4.0 hybrids (``granitemoehybrid``): each layer a Mamba-2 mixer or attention
(``layer_types``, default all Mamba-2) and an MoE of ``num_local_experts`` gated experts of ``intermediate_size``
beside a gated shared MLP of ``shared_intermediate_size`` (no experts: that MLP alone); the mixers' ``mamba_n_heads``,
``mamba_d_head`` (``auto``: ``mamba_expand`` h over the heads), ``mamba_d_state``, ``mamba_n_groups``, ``mamba_d_conv``,
``mamba_chunk_size``, ``mamba_conv_bias`` and ``mamba_proj_bias``, each at ``GraniteMoeHybridConfig``'s default
where the config leaves it out.
"""

from __future__ import annotations

from playground.planner.architecture import Model
from playground.planner.errors import PlanError
from playground.planner.hf_keys import Keys, PLAIN_ACTS, routing_groups
from playground.planner.ssm import GatedDeltaNet, Mamba2

__all__ = ["HYBRID_READERS", "gated_delta_net", "granite_hybrid"]

BLOCKS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def _blocks(keys: Keys) -> list[str]:
    """The blocks in order, as words, from either spelling."""
    words = keys.get("layers_block_type")
    if words is not None:
        if not isinstance(words, list) or any(w not in BLOCKS.values() for w in words):
            raise PlanError(f"{keys.source}: 'layers_block_type' must list blocks among "
                            f"{', '.join(BLOCKS.values())}, got {words!r}")
        return words
    pattern = keys.get("hybrid_override_pattern")
    if pattern is None:
        raise PlanError(f"{keys.source} lacks 'hybrid_override_pattern' (or 'layers_block_type'): the order of its "
                        "Mamba-2, attention, MLP and MoE blocks")
    if not isinstance(pattern, str) or not pattern or set(pattern) - set(BLOCKS):
        raise PlanError(f"{keys.source}: 'hybrid_override_pattern' must be a string of the block letters "
                        f"{''.join(BLOCKS)} (Mamba-2, attention, MLP, MoE), got {pattern!r}")
    return [BLOCKS[c] for c in pattern]


def nemotron_h(keys: Keys, name: str, seq_len: int) -> Model:
    blocks = _blocks(keys)
    count = {kind: blocks.count(kind) for kind in BLOCKS.values()}
    layers = count["mlp"] + count["moe"]
    if not layers:
        raise PlanError(f"{keys.source}: no MLP or MoE block in its {len(blocks)} blocks: the planner prices a "
                        "layer by its MLP or MoE, so a model of mixers alone is not modelled")
    if keys.get("moe_latent_size") is not None:
        raise PlanError(f"{keys.source}: a latent MoE ('moe_latent_size': the experts run in a smaller space than the "
                        "hidden size, Nemotron 3 Super's) is not modelled; counted at the hidden size its experts "
                        "would be overcounted")
    act = keys.get("mlp_hidden_act", "relu2")
    if act not in PLAIN_ACTS:
        raise PlanError(f"{keys.source}: 'mlp_hidden_act' {act!r} is not an ungated activation the planner knows "
                        f"({', '.join(PLAIN_ACTS)})")
    hidden, heads = keys.int("hidden_size"), keys.int("num_attention_heads")
    head_dim = keys.int("head_dim", None)
    mixer = Mamba2(heads=keys.int("mamba_num_heads"), head_dim=keys.int("mamba_head_dim"),
                   state=keys.int("ssm_state_size"), groups=keys.int("n_groups", None) or keys.int("mamba_n_groups", 1),
                   conv=keys.int("conv_kernel", 4), chunk=keys.int("chunk_size", 128),
                   conv_bias=keys.bool("use_conv_bias", True), proj_bias=keys.bool("use_bias", False))
    shape = dict(layers=layers, hidden=hidden, heads=heads, vocab=keys.int("vocab_size"), seq_len=seq_len,
                 ffn=keys.int("intermediate_size", None) if count["mlp"] else None,
                 kv_heads=keys.int("num_key_value_heads", heads),
                 head_dim=None if head_dim in (None, hidden // heads) else head_dim, gated_mlp=False,
                 tied_embeddings=keys.bool("tie_word_embeddings", False), position_embeddings=False,
                 qkv_bias=keys.bool("attention_bias", False), proj_bias=keys.bool("mlp_bias", False), norm="rmsnorm",
                 ssm=mixer, ssm_layers=count["mamba"], attention_layers=count["attention"], name=name,
                 max_positions=keys.int("max_position_embeddings", None))
    if count["moe"]:
        shared = keys.int("moe_shared_expert_intermediate_size", 0, least=0) * keys.int("n_shared_experts", 1, least=0)
        shape.update(experts=keys.int("n_routed_experts"), top_k=keys.int("num_experts_per_tok"),
                     moe_ffn=keys.int("moe_intermediate_size"), shared_experts=1 if shared else 0,
                     shared_ffn=shared or None, dense_layers=count["mlp"], router_bias=True, **routing_groups(keys))
        if count["mlp"]:
            shape["ffn"] = keys.int("intermediate_size")
    ffn = " and ".join(f"{count[k]} {k.upper() if k == 'mlp' else 'MoE'}" for k in ("mlp", "moe") if count[k])
    notes = [f"a hybrid: {count['mamba']} Mamba-2 mixers and {count['attention']} attention layers among its {ffn} "
             "blocks, priced as an average layer (each of the model's layers, its MLP or MoE, with its share of both)"]
    if keys.get("num_nextn_predict_layers") or keys.get("mtp_hybrid_override_pattern"):
        notes.append("its multi-token-prediction blocks are not counted")
    return Model(**shape, read_note="; ".join(notes))


HYBRID_READERS = {"nemotron_h": nemotron_h}


def gated_delta_net(keys: Keys, layers: int) -> dict:
    """The ``Model`` fields of a Qwen3-Next-style hybrid: its Gated DeltaNet mixers, in each layer but the full-attention
    ones, and the gate on those layers' output; and its note."""
    types = keys.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or set(types) - {"linear_attention", "full_attention"}:
            raise PlanError(f"{keys.source}: 'layer_types' must list 'linear_attention' or 'full_attention' for each "
                            f"of the {layers} layers, got {types!r}")
        full = types.count("full_attention")
    else:
        full = layers // keys.int("full_attention_interval", 4)
    mixer = GatedDeltaNet(key_heads=keys.int("linear_num_key_heads"), key_dim=keys.int("linear_key_head_dim"),
                          value_heads=keys.int("linear_num_value_heads"), value_dim=keys.int("linear_value_head_dim"),
                          conv=keys.int("linear_conv_kernel_dim", 4))
    note = (f"a hybrid: {layers - full} Gated DeltaNet mixers and {full} gated attention layers, each with its MLP or "
            "MoE, priced as an average layer")
    if keys.get("mtp_num_hidden_layers") or keys.get("num_nextn_predict_layers"):
        note += "; its multi-token-prediction layers are not counted"
    return dict(ssm=mixer, ssm_layers=layers - full, attention_layers=full,
                attention_gate=keys.bool("attn_output_gate", True), read_note=note)


def granite_hybrid(keys: Keys, layers: int) -> dict:
    """The ``Model`` fields of a Granite 4.0 hybrid: its Mamba-2 mixers and attention layers, and its experts beside
    the shared MLP every layer holds (or that MLP alone, as the dense layer); and its note."""
    types = keys.get("layer_types") or keys.get("layers_block_type") or ["mamba"] * layers
    if not isinstance(types, list) or len(types) != layers or set(types) - {"mamba", "attention"}:
        raise PlanError(f"{keys.source}: 'layer_types' must list 'mamba' or 'attention' for each of the {layers} "
                        f"layers, got {types!r}")
    heads, hidden = keys.int("mamba_n_heads", 128), keys.int("hidden_size")
    head_dim = keys.get("mamba_d_head", "auto")
    head_dim = keys.int("mamba_expand", 2) * hidden // heads if head_dim == "auto" else keys.int("mamba_d_head")
    mixer = Mamba2(heads=heads, head_dim=head_dim, state=keys.int("mamba_d_state", 256),
                   groups=keys.int("mamba_n_groups", 1), conv=keys.int("mamba_d_conv", 4),
                   chunk=keys.int("mamba_chunk_size", 256), conv_bias=keys.bool("mamba_conv_bias", True),
                   proj_bias=keys.bool("mamba_proj_bias", False))
    shared, experts = keys.int("shared_intermediate_size", 1024), keys.int("num_local_experts", 8, least=0)
    ffn = dict(experts=experts, top_k=keys.int("num_experts_per_tok", 2), moe_ffn=keys.int("intermediate_size", 11008),
               shared_experts=1, shared_ffn=shared) if experts else dict(ffn=shared)
    mamba = types.count("mamba")
    return dict(ssm=mixer, ssm_layers=mamba, attention_layers=layers - mamba, **ffn,
                read_note=f"a hybrid: {mamba} Mamba-2 mixers and {layers - mamba} attention layers, each with its "
                          f"{'MoE and shared MLP' if experts else 'MLP'}, priced as an average layer")

