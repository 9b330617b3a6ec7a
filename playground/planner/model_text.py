"""A model in words: its shape in one line (``model_line``, what ``Model.describe`` prints), and the notes a plan
prints of it (``position_note``, ``sparse_attention_note``).

Apart from ``architecture`` so that the data model stays a page; each reads the fields of any ``Model``.
"""

from __future__ import annotations

__all__ = ["model_line", "position_note", "sparse_attention_note"]


def model_line(model) -> str:
    """Layers (a hybrid's blocks of each kind), any window or sparse attention, the hidden size, the attention's
    heads, the MLP or the experts, the vocabulary, and whether the embeddings are tied."""
    q = f"q rank {model.q_lora_rank}" if model.q_lora_rank else "q not compressed"
    att = (f"{model.heads} MLA heads ({q}, kv rank {model.kv_lora_rank})" if model.is_mla
           else f"{model.heads} heads / {model.kv_head_count} KV heads of {model.head_size}")
    mlp = ("SwiGLU" if model.gated_mlp else "MLP") + f" {model.ffn_width}"
    if model.is_moe:
        mlp = (f"{model.experts} experts (top {model.top_k}) of {model.expert_width}"
               + (f" + shared {model.shared_width}" if model.shared_width else "")
               + (f", {model.dense_layers} dense first layer{'s' if model.dense_layers > 1 else ''} ({mlp})"
                  if model.dense_layers else ""))
    window = f", a {model.sliding_window:,}-token window in {model.local_layers} of them" if model.local_layers else ""
    if model.sparse_keys:
        window += f", sparse attention over {model.sparse_keys:,} keys (an indexer of {model.indexer_heads} heads)"
    layers, sep = f"{model.layers} layers", ", "
    if model.is_hybrid:   # its blocks of each kind
        attention = round(model.attention_share * model.layers)
        ffn = "MLP" if not model.is_moe else "MoE" if not model.dense_layers else "MLP or MoE"
        mixer = model.ssm.describe() if model.ssm else "recurrent"
        gated = "gated attention" if model.attention_gate else "attention"
        if attention + model.ssm_layers == model.layers:   # a mixer and an MLP or MoE in each layer (Qwen3-Next)
            layers = f"{model.layers} layers: {model.ssm_layers} {mixer} and {attention} {gated}, each with its {ffn}"
        else:   # blocks of each kind (Nemotron-H)
            layers = (f"{model.layers + attention + model.ssm_layers} blocks: {model.ssm_layers} {mixer}, {attention} "
                      f"{gated}, {model.layers} {ffn}")
        sep = "; "
    return (f"{layers}{window}{sep}hidden {model.hidden}, {att}, {mlp}, vocab {model.vocab}"
            + (", tied embeddings" if model.tied_embeddings else ""))


def position_note(model) -> str:
    """A warning when the sequence planned is longer than the config's positions reach, else ''."""
    if model.max_positions and model.seq_len > model.max_positions:
        return (f"the sequence of {model.seq_len:,} tokens is beyond this config's max_position_embeddings "
                f"({model.max_positions:,}): pass --seq-len with the length you will train at")
    return ""


def sparse_attention_note(model) -> str:
    """What a plan says of DeepSeek Sparse Attention, where the model has it: how it is counted (the indexer's
    weights as ``indexer_params`` counts them) and what is left out; else ''."""
    if not model.sparse_keys:
        return ""
    holding = model.indexer_layers or model.layers
    note = (f"DeepSeek Sparse Attention as its sparse stage trains: each query attends index_topk = "
            f"{model.sparse_keys:,} keys, picked by a lightning indexer ({model.indexer_heads} heads of "
            f"{model.indexer_dim}, {model.layers * model.indexer_params() / 1e6:,.1f} M parameters) whose scores "
            f"over every earlier key count as one GEMM, whole on each TP rank; not counted: the dense warm-up "
            f"before it (whole-sequence attention), the indexer's KL loss and its activations")
    if holding < model.layers:
        note += f"; {holding} of the {model.layers} layers hold an indexer, the rest reusing a selection"
    return note
