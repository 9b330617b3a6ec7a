"""A Hugging Face ``config.json`` read into a ``Model``, offline, with one-line errors.

This module decides what each ``model_type`` is; the typed look-ups and the readers of the keys only
some families carry (MoE layouts, MLA, sliding windows, non-attention mixers) are in ``hf_keys``.
Which keys are read, by ``model_type``:

* Llama-style (llama, mistral, qwen2, qwen3; an unknown type that has the Llama keys):
  ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads`` (default:
  the heads), ``head_dim`` (default hidden / heads), ``intermediate_size``, ``vocab_size``,
  ``tie_word_embeddings`` (default false), ``hidden_act`` (silu/swiglu: a gated MLP; gelu: not).
  Llama's ``attention_bias`` / ``mlp_bias`` set the biases (``attention_out_bias``, Seed-OSS's, the output
  projection's apart); ``Model`` keeps the output projection's with the MLP's, so where only one of the two
  is set it is left out and ``read_note`` says so (h a layer); Qwen2 always has Q/K/V biases (and no
  others); Qwen3 has a per-head RMSNorm on queries and keys.
* mixtral, granitemoe, minimax_m2, phimoe: ``num_local_experts`` and ``num_experts_per_tok``; each expert is
  ``intermediate_size`` wide (MiniMax-M2 adds Q/K norms, ``use_qk_norm``, and a per-expert routing bias,
  ``use_routing_bias``).  olmoe (and dense olmo2, olmo3): the same with ``num_experts``, and Q/K norms
  (OLMo's span the whole projection, not one head: a few thousand weights a layer more than ``Model``'s
  per-head norms count).
* qwen2_moe / qwen3_moe: ``num_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``,
  ``shared_expert_intermediate_size`` (qwen2_moe, with its sigmoid gate; qwen3_moe has no shared
  expert), and ``decoder_sparse_step`` / ``mlp_only_layers``, which make some layers dense.  ``Model``
  only knows "the first k layers are dense", so the dense layers are counted into ``dense_layers``
  wherever they sit: the parameter count is the same, only their position is lost.
* deepseek_v2 / deepseek_v3 / deepseek_v32 / glm_moe_dsa / kimi_k2 (DeepSeek-V3's architecture; GLM-5's too):
  ``n_routed_experts``, ``n_shared_experts``, ``moe_intermediate_size``,
  ``first_k_dense_replace``, ``moe_layer_freq`` (must be 1), and MLA's ``q_lora_rank`` (null: queries
  not compressed), ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``.
  ``topk_method: noaux_tc`` (V3) means a per-expert routing bias; ``n_group`` / ``topk_group``
  limit the groups of experts a token is routed to (V3: 4 of 8, one group a node).  The multi-token-prediction module
  (``num_nextn_predict_layers``) is not part of ``Model`` and is not counted.  DeepSeek-V3.2's and GLM-5's sparse
  attention (``index_n_heads``, ``index_head_dim``, ``index_topk``): each query attends ``index_topk`` keys, its
  lightning indexer counted (``Model.sparse_keys``), and ``read_note`` says what is not.
* gemma / gemma2 / gemma3_text: the Llama keys, but the MLP is always gated (GeGLU: ``hidden_act`` or
  ``hidden_activation`` names its GELU), the embedding tied unless ``tie_word_embeddings`` says false,
  and Gemma 2 and 3 put a norm after attention and after the MLP too (``sandwich_norm``); Gemma 3 adds
  Q/K norms; Gemma 2 and 3 alternate sliding-window and global layers.
* gpt_oss: every layer an MoE of ``num_local_experts`` experts of width ``intermediate_size``,
  ``num_experts_per_tok`` (or ``experts_per_token``) per token; ``attention_bias`` puts biases on Q, K,
  V, the output projection and the experts; the router has a bias; ``layer_types`` says which layers
  attend over the 128-token window.  Its attention sinks (a scalar per head) are left out.
* llama4_text: ``num_local_experts`` routed experts of width ``intermediate_size`` and one shared
  expert of the same width in the layers ``moe_layers`` lists (default: every
  ``interleave_moe_layer_step``-th), dense layers of width ``intermediate_size_mlp`` between them;
  its Q/K L2 norms have no weights.
* glm4_moe: DeepSeek's MoE keys (``n_routed_experts``, ``n_shared_experts``, ``moe_intermediate_size``,
  ``first_k_dense_replace``) on grouped-query attention, with ``attention_bias`` on Q, K and V only,
  ``use_qk_norm``, and a per-expert routing bias; the MTP layers are not counted.  dots1 (rednote's
  dots.llm1): the same keys, with Qwen3's per-head Q/K norms always.
* ernie4_5_moe (Baidu's ERNIE 4.5 MoE): the Llama keys for attention and the dense layers, ``use_bias``
  (default false) for every linear layer, and its own expert keys (``hf_keys.ernie_moe``:
  ``moe_num_experts``, ``moe_k``, ``moe_num_shared_experts``, the MoE layers' range); the MTP layer
  (``num_nextn_predict_layers``) is not counted.
* bailing_moe (Ant Group's Ling, v1 and 2.0; ``hf_keys.bailing_moe``): ``num_experts``, ``num_experts_per_tok``,
  ``moe_intermediate_size``, ``num_shared_experts`` (each ``moe_shared_expert_intermediate_size`` wide where set),
  ``first_k_dense_replace`` dense layers of ``intermediate_size``, ``use_qk_norm``, a routing bias
  (``moe_router_enable_expert_bias``) and grouped routing; ``use_qkv_bias`` puts biases on Q, K and V, ``use_bias``
  on them and the other non-expert linear layers (those left out, and said); the MTP layers are not counted.
* hunyuan_v1_dense / hunyuan_v1_moe (Tencent's Hunyuan; ``hf_keys.hunyuan``): the Llama keys, ``use_qk_norm``, and
  for the MoE ``num_experts``, ``moe_topk``, ``moe_intermediate_size`` and ``num_shared_expert`` (each a number or a
  list of one a layer, the same for every layer) in every layer; cross-layer attention (``use_cla``) refused.
* nemotron: the Llama keys with a squared-ReLU MLP (``relu2``, not gated) and LayerNorm; gpt_neox: the
  Llama keys with LayerNorm and biases throughout (``attention_bias``, default true); starcoder2: the
  same, its biases set by ``use_bias`` (default true), its GELU MLP not gated, and every layer attending
  over ``sliding_window`` when the config sets one.
* phimoe (Phi-3.5-MoE): Mixtral's keys, with LayerNorm; ``attention_bias`` puts biases on Q, K and V
  (counted) and on the output projection (h a layer, not counted), ``lm_head_bias`` one on the logits
  (not counted either: together 0.0004% of Phi-3.5-MoE).
* gpt2, mpt, falcon, bloom, dbrx, which spell their shape otherwise (``n_layer``, ``d_model``,
  ``multi_query``, ``ffn_config`` ...): ``playground.planner.hf_families`` reads them.
* A config whose ``model_type`` the planner does not know but which carries expert keys
  (``num_local_experts``, ``num_experts``, ``n_routed_experts``, ``moe_num_experts``,
  ``moe_intermediate_size``) is refused: read as a dense Llama it would be counted without its experts.
* nemotron_h (Nemotron-H, Nemotron 3: Mamba-2 mixers, a few attention layers, MLPs or MoEs):
  ``playground.planner.hf_hybrid`` reads it.  qwen3_next, qwen3_5_text, qwen3_5_moe_text (Qwen3-Next, Qwen3.5's
  language model): the Llama keys, Qwen3's Q/K norms, Qwen2-MoE's expert keys (a gated shared expert), and
  ``hf_hybrid.gated_delta_net``'s: Gated DeltaNet mixers in all but the full-attention layers, whose output is gated.
  granitemoehybrid (Granite 4.0): the Llama keys and ``hf_hybrid.granite_hybrid``'s (Mamba-2 mixers, a shared MLP).
* Any other config whose layers are not all attention is refused, naming the keys that say so: Mamba and other
  state-space layers (``mamba_*``, ``ssm_*``, ``attn_layer_period``: Jamba, Falcon-H1), linear attention
  (``linear_num_key_heads``, ``attn_type_list``: MiniMax-01's lightning attention), convolutions (LFM2), or
  ``layer_types`` naming them.
* An unknown ``model_type`` with the Llama keys is read as Llama, and ``Model.read_note`` says so (the
  planner prints it): the count is only as right as the Llama reading of that family.
* A multimodal wrapper's ``text_config`` is read in place of the outer dict, and ``read_note`` says that a
  ``vision_config``'s or ``audio_config``'s encoder is not counted.  Qwen2-VL's, Qwen2.5-VL's and Qwen3-VL's language
  models (``qwen2_vl``, ``qwen2_5_vl_text``, ``qwen3_vl_text``, ``qwen3_vl_moe_text`` ...) are read as Qwen2, Qwen3
  and Qwen3-MoE, GLM-4.5V's (``glm4v_moe_text``) as GLM-4.5's.
* Sliding-window attention: ``sliding_window`` and which layers use it, from ``layer_types`` or the
  family's rule (``hf_keys.sliding_window``); those layers' attention is counted over the window.

``max_position_embeddings`` is NOT the training sequence length: it is how far the position scheme
reaches at inference, usually after a long-context stage (Llama 3.1: 131,072 for an 8,192 pre-training
length; DeepSeek-V3: 163,840 for 4,096).  So ``seq_len`` is an argument; not given, it is 8,192 (Llama
3's pre-training length), or the config's reach when that is shorter (Llama 2, Falcon, Phi-3: a model
never trained past its positions), and ``Model.seq_len_from`` says so.  Only for learned positions
(gpt2) does the table size matter to the count, and there ``seq_len`` is set to ``n_positions``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from playground.planner.architecture import DEFAULT_SEQ_LEN, Model
from playground.planner.errors import PlanError
from playground.planner.hf_families import FAMILY_READERS
from playground.planner.hf_hub import from_hub_cache
from playground.planner.hf_hybrid import HYBRID_READERS, gated_delta_net, granite_hybrid
from playground.planner.hf_keys import (Keys, bailing_moe, deepseek, ernie_moe, hunyuan, llama4, mlp_is_gated, qwen_moe,
                                        refuse_other_mixers, require_gelu, routing_groups, sliding_window,
                                        sparse_attention)

__all__ = ["read_hf_config", "model_from_hf_dict"]

LLAMA_STYLE = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "granitemoe", "olmoe",
               "olmo2", "olmo3", "nemotron", "gpt_neox", "starcoder2", "minimax_m2", "phimoe", "hunyuan_v1_dense")
LAYERNORM = ("nemotron", "gpt_neox", "starcoder2", "phimoe")   # weight and bias (Nemotron's LayerNorm1P)
GEMMA = ("gemma", "gemma2", "gemma3_text")
# Qwen3-Next's and Qwen3.5's hybrids: Gated DeltaNet mixers beside gated attention, Qwen-MoE's experts (hf_hybrid)
DELTA = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
GRANITE_HYBRID = ("granitemoehybrid",)   # Granite 4.0: Mamba-2 mixers beside attention, experts beside a shared MLP
OTHER_MOE = ("gpt_oss", "llama4_text", "glm4_moe", "dots1", "ernie4_5_moe", "bailing_moe", "hunyuan_v1_moe")
# Kimi K2, DeepSeek-V3.2 and GLM-5 are DeepSeek-V3's architecture (the last two with sparse attention on top)
DEEPSEEK = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "glm_moe_dsa", "kimi_k2")
# the language models of vision-language families, which spell their keys as the text family does
TEXT_OF = {"qwen2_vl": "qwen2", "qwen2_vl_text": "qwen2", "qwen2_5_vl": "qwen2", "qwen2_5_vl_text": "qwen2",
           "qwen3_vl_text": "qwen3", "qwen3_vl_moe_text": "qwen3_moe", "glm4v_moe_text": "glm4_moe"}
OTHER_TOWERS = ("vision_config", "audio_config")   # a multimodal config's encoders, which Model does not hold
KNOWN = LLAMA_STYLE + GEMMA + OTHER_MOE + DEEPSEEK + DELTA + GRANITE_HYBRID
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "moe_intermediate_size")
LLAMA_KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")



def read_hf_config(path, seq_len: int | None = None) -> Model:
    """Read ``path`` (a config.json, a folder holding one, or a Hugging Face repo id found in the local
    hub cache) into a ``Model`` trained at ``seq_len`` (default: 8,192, or the config's
    max_position_embeddings when shorter)."""
    path, repo_id = Path(path), None
    if not path.exists():
        path, repo_id = from_hub_cache(str(path)), str(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise PlanError(f"folder {path} has no config.json")
        path = path / "config.json"
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise PlanError(f"{path} is not a text file (not UTF-8), so not a config.json") from None
    except json.JSONDecodeError as err:
        raise PlanError(f"{path} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})") from None
    if not isinstance(cfg, dict):
        raise PlanError(f"{path} holds a JSON {type(cfg).__name__}, not an object")
    fallback = repo_id or (path.parent.name if path.name == "config.json" else path.stem)  # a folder, a renamed file
    return model_from_hf_dict(cfg, seq_len, name=_name_in(cfg) or fallback, source=str(path))


def model_from_hf_dict(cfg: dict, seq_len: int | None = None, name: str = "", *, source: str = "config.json") -> Model:
    """The ``Model`` a parsed config.json describes; ``source`` names it in error messages.  ``seq_len``
    not given: 8,192 tokens, or the config's max_position_embeddings when shorter."""
    model = _model_from_hf_dict(cfg, seq_len or DEFAULT_SEQ_LEN, name, source)
    towers = [key for key in OTHER_TOWERS if isinstance(cfg.get(key), dict)]
    if towers:   # what a vision-language model's language model leaves out
        what = " and ".join(key.split("_")[0] for key in towers) + (" encoders are" if len(towers) > 1 else " encoder is")
        model = replace(model, read_note="; ".join(filter(None, (model.read_note, (
            f"the language model only: its {what} not counted ({', '.join(towers)}), in parameters, memory or "
            "FLOPs")))))
    if seq_len is None and model.max_positions and model.max_positions < model.seq_len:
        return replace(model, seq_len=model.max_positions, seq_len_from=(
            f"sequence length not given: the config's max_position_embeddings, {model.max_positions:,} "
            f"tokens, taken (pass --seq-len to plan another)"))
    return model


def _model_from_hf_dict(cfg: dict, seq_len: int, name: str, source: str) -> Model:
    name = name or _name_in(cfg)
    if isinstance(cfg.get("text_config"), dict):  # multimodal wrapper: the language model is inside
        cfg, source = cfg["text_config"], f"{source} (text_config)"
    keys = Keys(cfg, source)
    kind = TEXT_OF.get(cfg.get("model_type"), cfg.get("model_type"))
    if kind in HYBRID_READERS:   # Mamba-2 mixers beside attention (Nemotron-H), which Model holds
        return HYBRID_READERS[kind](keys, name, seq_len)
    if kind not in DELTA + GRANITE_HYBRID:
        refuse_other_mixers(cfg, kind, source)
    if kind in FAMILY_READERS:
        return FAMILY_READERS[kind](keys, name, seq_len)
    if kind not in KNOWN and not all(k in cfg for k in LLAMA_KEYS):
        what = f"model_type {kind!r} is not one the planner reads" if kind else "there is no model_type"
        raise PlanError(f"{source}: {what}, and it lacks the Llama keys "
                        f"({', '.join(k for k in LLAMA_KEYS if k not in cfg)})")
    experts_named = [k for k in EXPERT_KEYS if cfg.get(k)]
    if kind not in KNOWN and experts_named:
        what = f"model_type {kind!r}" if kind else "a config without model_type"
        raise PlanError(f"{source}: {what} has expert keys ({', '.join(experts_named)}) the planner does not read "
                        "for this family; give the shape by flags (--layers --hidden --heads --experts --top-k "
                        "--moe-ffn ...) instead of counting it as a dense model")
    layers, hidden, heads = keys.int("num_hidden_layers"), keys.int("hidden_size"), keys.int("num_attention_heads")
    read_note = "" if kind in KNOWN else (
        f"model_type {kind!r} is not one the planner knows by name: read as a Llama-style decoder from its Llama "
        "keys; check the parameter count against the model card" if kind else
        "the config has no model_type: read as a Llama-style decoder from its Llama keys; check the parameter "
        "count against the model card")
    head_dim = keys.int("head_dim", None)
    shape = dict(layers=layers, hidden=hidden, heads=heads, vocab=keys.int("vocab_size"), seq_len=seq_len,
                 ffn=keys.int("intermediate_size"), kv_heads=keys.int("num_key_value_heads", heads),
                 head_dim=None if head_dim == hidden // heads else head_dim,  # one spelling per shape
                 gated_mlp=kind in GEMMA or mlp_is_gated(keys),
                 tied_embeddings=keys.bool("tie_word_embeddings", kind in GEMMA),  # Gemma ties by default
                 position_embeddings=False, norm="rmsnorm", name=name,
                 max_positions=keys.int("max_position_embeddings", None), read_note=read_note)
    if kind in GEMMA:   # GeGLU whatever the activation's name; Gemma 2 and 3 norm after each block too
        require_gelu(keys)
        shape.update(sandwich_norm=kind != "gemma")
    if kind in ("qwen2", "qwen2_moe"):  # Qwen2 puts biases on Q, K and V, and nowhere else
        shape.update(qkv_bias=True, proj_bias=False)
    elif kind == "gpt_oss":  # biases on Q, K, V, the output projection and the experts alike
        bias = keys.bool("attention_bias", True)
        shape.update(qkv_bias=bias, proj_bias=bias)
    elif kind in ("glm4_moe", "dots1", "phimoe"):  # Q, K, V biases (PhiMoE's output projection's, h a layer, not
        # counted)
        shape.update(qkv_bias=keys.bool("attention_bias", False), proj_bias=False)
    elif kind == "bailing_moe":  # use_bias: Q/K/V, the output projection and the dense and shared MLPs, not the
        # routed experts, which Model cannot keep apart: those others' are left out and said; use_qkv_bias: Q/K/V only
        use_bias = keys.bool("use_bias", False)
        shape.update(qkv_bias=use_bias or keys.bool("use_qkv_bias", False), proj_bias=False)
        if use_bias:
            shape["read_note"] = ("use_bias: the output projection's and the dense and shared MLPs' biases are not "
                                  "counted (the routed experts have none): well under 0.1% of the parameters")
    elif kind in ("gpt_neox", "starcoder2", "ernie4_5_moe"):  # biases on every linear layer, or on none
        bias = keys.bool("attention_bias" if kind == "gpt_neox" else "use_bias", kind != "ernie4_5_moe")
        shape.update(qkv_bias=bias, proj_bias=bias)
    else:
        attention_bias, mlp_bias = keys.bool("attention_bias", False), keys.bool("mlp_bias", False)
        # Llama's attention_bias covers the output projection too; Seed-OSS names that one apart
        out_bias = attention_bias and keys.bool("attention_out_bias", True) and kind not in DEEPSEEK
        shape.update(qkv_bias=attention_bias, proj_bias=out_bias and mlp_bias)
        if out_bias != mlp_bias:   # Model keeps the output projection's and the MLP's biases together
            left = "the output projection's biases (h a layer)" if out_bias else "the MLP's biases (f + h a layer)"
            shape["read_note"] = "; ".join(filter(None, (read_note, f"{left} are not counted: well under 0.1% "
                                                                    "of the parameters")))
    if kind in LAYERNORM:
        shape["norm"] = "layernorm"
    shape["qk_norm"] = kind in ("qwen3", "qwen3_moe", "gemma3_text", "olmoe", "olmo2", "olmo3", "dots1") + DELTA or \
        (kind in ("glm4_moe", "minimax_m2", "bailing_moe", "hunyuan_v1_dense", "hunyuan_v1_moe")
         and keys.bool("use_qk_norm", False))
    if kind in ("mixtral", "granitemoe", "olmoe", "minimax_m2", "phimoe"):
        shape.update(experts=keys.int("num_experts" if kind == "olmoe" else "num_local_experts"),
                     top_k=keys.int("num_experts_per_tok"), moe_ffn=shape["ffn"],
                     router_bias=kind == "minimax_m2" and keys.bool("use_routing_bias", False))
    elif kind in ("qwen2_moe", "qwen3_moe"):
        shape.update(qwen_moe(keys, kind, layers))
    elif kind in DELTA and keys.get("num_experts") is not None:   # Qwen2-MoE's gated shared expert
        shape.update(qwen_moe(keys, "qwen2_moe", layers))
    elif kind in DEEPSEEK:
        shape.update(deepseek(keys, kind, layers))
    elif kind == "gpt_oss":
        top_k = keys.int("num_experts_per_tok", None) or keys.int("experts_per_token")
        shape.update(experts=keys.int("num_local_experts"), top_k=top_k, moe_ffn=shape["ffn"], router_bias=True)
    elif kind == "llama4_text":
        shape.update(llama4(keys, layers, shape["ffn"]))
    elif kind == "ernie4_5_moe":
        shape.update(ernie_moe(keys, layers))
    elif kind == "bailing_moe":
        shape.update(bailing_moe(keys, layers))
    elif kind in ("hunyuan_v1_dense", "hunyuan_v1_moe"):
        shape.update(hunyuan(keys, kind, layers, shape["ffn"]))
    elif kind in ("glm4_moe", "dots1"):
        shape.update(experts=keys.int("n_routed_experts"), top_k=keys.int("num_experts_per_tok"),
                     moe_ffn=keys.int("moe_intermediate_size"), shared_experts=keys.int("n_shared_experts", 0, least=0),
                     dense_layers=min(keys.int("first_k_dense_replace", 0, least=0), layers), router_bias=True,
                     **routing_groups(keys))
    if kind in DELTA + GRANITE_HYBRID:   # its layer_types name its mixers, not windows
        hybrid = (gated_delta_net if kind in DELTA else granite_hybrid)(keys, layers)
        shape.update(hybrid, read_note="; ".join(filter(None, (shape.get("read_note"), hybrid["read_note"]))))
    else:
        shape.update(sliding_window(keys, kind, layers))
    if shape.get("experts") and shape.get("dense_layers", 0) >= layers:  # every layer dense: not an MoE
        shape.update(experts=0, top_k=0, dense_layers=0, shared_experts=0, shared_ffn=None,
                     shared_expert_gate=False, router_bias=False, moe_ffn=None)
    if kind in DEEPSEEK and keys.get("index_topk") is not None:   # DeepSeek Sparse Attention
        shape.update(sparse_attention(keys, layers))
        model = Model(**shape)
        return replace(model, read_note="; ".join(filter(None, (model.read_note, model.sparse_attention_note()))))
    return Model(**shape)


def _name_in(cfg: dict) -> str:
    inner = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    name = cfg.get("_name_or_path") or inner.get("_name_or_path") or ""
    return name if isinstance(name, str) else ""
