"""The keys of a Hugging Face ``config.json`` that ``hf_config`` reads beyond Llama's, with one-line errors.

* ``Keys``: typed look-ups in one config dict (``keys.int``, ``keys.bool``, ``keys.get``); every
  failure names the key, what it is needed for, and the file.  ``hf_families``' readers take it too.
* ``refuse_other_mixers``: a config whose layers are not all attention (Mamba and other state-space
  layers, linear attention, convolutions) is refused, naming the keys that say so, rather than
  counted as a pure transformer.
* The keys only some families carry, each read into ``Model`` fields: ``qwen_moe`` (Qwen2/3-MoE's
  experts, shared expert and dense layers), ``deepseek`` (MLA and DeepSeek's MoE), ``llama4``
  (interleaved MoE layers), ``ernie_moe`` (ERNIE 4.5's expert keys and MoE layer range), ``hunyuan`` (Hunyuan's
  per-layer expert lists, and its cross-layer attention refused),
  ``routing_groups`` (group-limited routing), ``sparse_attention`` (DeepSeek-V3.2's and GLM-5's sparse
  attention), ``mlp_is_gated`` (the MLP's activation), ``require_gelu``
  (Gemma's GeGLU) and ``sliding_window`` (which layers attend over a window only).

Which family has which keys, and what each means, is in ``hf_config``'s docstring.
"""

from __future__ import annotations

from playground.planner.errors import PlanError

__all__ = ["Keys", "refuse_other_mixers", "qwen_moe", "deepseek", "sparse_attention", "llama4", "ernie_moe",
           "bailing_moe", "hunyuan", "routing_groups", "mlp_is_gated", "require_gelu", "sliding_window"]

GATED_ACTS = ("silu", "swiglu", "swish")
PLAIN_ACTS = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "quick_gelu", "relu", "relu2",
              "xielu")   # xIELU: Apertus's learned activation, on an MLP without a gate
# keys that say some layers mix tokens without attention: Mamba and other state-space layers (Jamba,
# Falcon-H1, Zamba; Nemotron-H's and Granite 4.0's are read first, by hf_hybrid), linear attention (MiniMax-01; Qwen3-Next's
# Gated DeltaNet is read by hf_hybrid),
# short convolutions (LFM2)
MIXER_PREFIXES = ("mamba_", "ssm_", "linear_num_", "linear_key_", "linear_value_", "linear_conv_")
MIXER_KEYS = ("hybrid_override_pattern", "attn_layer_period", "attn_type_list", "full_attention_interval",
              "layers_block_type", "conv_L_cache")
MIXER_WORDS = ("mamba", "linear", "conv", "ssm", "recurrent", "rwkv")
# what a missing key was needed for, so the error says why it matters
PURPOSE = {"num_hidden_layers": "the layer count", "hidden_size": "the hidden size",
           "num_attention_heads": "the attention heads", "intermediate_size": "the MLP width",
           "vocab_size": "the vocabulary", "n_layer": "the layer count", "n_embd": "the hidden size",
           "n_head": "the attention heads", "n_positions": "the position table",
           "n_layers": "the layer count", "d_model": "the hidden size", "n_heads": "the attention heads",
           "max_seq_len": "the position table", "n_embed": "the hidden size",
           "moe_num_experts": "the expert count", "moe_top_k": "the experts per token", "moe_topk": "the experts per token",
           "index_n_heads": "sparse attention's indexer heads", "index_head_dim": "sparse attention's indexer head size",
           "index_topk": "the keys sparse attention selects",
           "ffn_hidden_size": "the expert width", "moe_k": "the experts per token",
           "num_local_experts": "the expert count", "num_experts": "the expert count",
           "n_routed_experts": "the expert count", "num_experts_per_tok": "the experts per token",
           "moe_intermediate_size": "the expert width", "kv_lora_rank": "MLA's key/value rank",
           "qk_rope_head_dim": "MLA's rotary head size", "qk_nope_head_dim": "MLA's head size",
           "v_head_dim": "MLA's value head size",
           "mamba_num_heads": "the Mamba-2 mixers' heads", "mamba_head_dim": "the Mamba-2 heads' size",
           "ssm_state_size": "the Mamba-2 state size", "mamba_n_heads": "the Mamba-2 mixers' heads",
           "mamba_d_head": "the Mamba-2 heads' size",
           "linear_num_key_heads": "Gated DeltaNet's key heads", "linear_key_head_dim": "Gated DeltaNet's key size",
           "linear_num_value_heads": "Gated DeltaNet's value heads",
           "linear_value_head_dim": "Gated DeltaNet's value size"}


class Keys:
    """Typed look-ups in one config dict; every failure names the key and the file."""

    _MISSING = object()

    def __init__(self, cfg: dict, source: str):
        self.cfg, self.source = cfg, source

    def get(self, key, default=None):
        value = self.cfg.get(key)
        return default if value is None else value  # JSON null means "not set"

    def int(self, key, default=_MISSING, least: int = 1):
        value = self.cfg.get(key)
        if value is None:
            if default is self._MISSING:
                raise PlanError(f"{self.source} lacks {key!r} (needed for {PURPOSE.get(key, key)})")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise PlanError(f"{self.source}: {key!r} must be a whole number >= {least}, got {value!r}")
        return value

    def bool(self, key, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise PlanError(f"{self.source}: {key!r} must be true or false, got {value!r}")
        return value


def refuse_other_mixers(cfg: dict, kind, source: str) -> None:
    """A model whose layers are not all attention (a hybrid of Mamba, linear attention or convolutions)
    would be counted as a pure transformer: refuse it, naming the keys that say so."""
    found = [k for k in cfg if k.startswith(MIXER_PREFIXES) or k in MIXER_KEYS]
    types = cfg.get("layer_types")
    if isinstance(types, list):
        found += sorted({f"layer_types {t!r}" for t in types if isinstance(t, str)
                         and any(word in t.lower() for word in MIXER_WORDS)})
    if found:
        what = f"model_type {kind!r}" if kind else "this config"
        raise PlanError(f"{source}: {what} has layers that are not attention ({', '.join(found[:4])}"
                        f"{', ...' if len(found) > 4 else ''}: state-space, linear-attention or convolution "
                        "mixers), which the planner does not model: it counts transformer layers only")


def qwen_moe(keys: Keys, kind: str, layers: int) -> dict:
    """Qwen2/3-MoE: the layers ``decoder_sparse_step`` and ``mlp_only_layers`` leave dense are counted
    into ``dense_layers`` wherever they sit (``Model`` knows only "the first k")."""
    step, dense_only = keys.int("decoder_sparse_step", 1), keys.get("mlp_only_layers", []) or []
    if not isinstance(dense_only, list) or not all(isinstance(i, int) for i in dense_only):
        raise PlanError(f"{keys.source}: 'mlp_only_layers' must be a list of layer numbers, got {dense_only!r}")
    moe = sum(1 for i in range(layers) if i not in dense_only and (i + 1) % step == 0)
    shared = keys.int("shared_expert_intermediate_size", 0, least=0) if kind == "qwen2_moe" else 0
    return dict(experts=keys.int("num_experts"), top_k=keys.int("num_experts_per_tok"),
                moe_ffn=keys.int("moe_intermediate_size"), dense_layers=layers - moe,
                shared_experts=1 if shared else 0, shared_ffn=shared or None, shared_expert_gate=bool(shared))


def deepseek(keys: Keys, kind: str, layers: int) -> dict:
    """DeepSeek-V2/V3 (and Kimi K2): MLA always, and the MoE when ``n_routed_experts`` is set."""
    nope, rope = keys.int("qk_nope_head_dim"), keys.int("qk_rope_head_dim")
    mla = dict(q_lora_rank=keys.int("q_lora_rank", None), kv_lora_rank=keys.int("kv_lora_rank"),
               qk_rope_dim=rope, head_dim=nope + rope, v_head_dim=keys.int("v_head_dim"))
    experts = keys.int("n_routed_experts", 0, least=0)
    if not experts:
        return mla
    if keys.int("moe_layer_freq", 1) != 1:
        raise PlanError(f"{keys.source}: moe_layer_freq {keys.get('moe_layer_freq')} is not supported "
                        "(the planner counts every layer after first_k_dense_replace as MoE)")
    return dict(mla, experts=experts, top_k=keys.int("num_experts_per_tok"), moe_ffn=keys.int("moe_intermediate_size"),
                **routing_groups(keys),
                shared_experts=keys.int("n_shared_experts", 0, least=0),
                dense_layers=min(keys.int("first_k_dense_replace", 0, least=0), layers),
                router_bias=kind != "deepseek_v2" and keys.get("topk_method") == "noaux_tc")


def sparse_attention(keys: Keys, layers: int) -> dict:
    """DeepSeek Sparse Attention (DeepSeek-V3.2's, GLM-5's) as ``Model`` fields: each query attends ``index_topk``
    keys (``sparse_keys``), picked by a lightning indexer of ``index_n_heads`` heads of ``index_head_dim``, in every
    layer or (``indexer_layers``) only in some, the others reusing a selection (GLM-5.2's): those ``indexer_types``
    marks "full", or else those Megatron-Core's rule for ``index_topk_freq`` and ``index_skip_topk_offset`` computes
    (``is_dsa_skip_topk_layer``: layer l, from 1, selects when max(l - max(offset, 1), 0) is a multiple of the
    frequency)."""
    types, freq = keys.get("indexer_types"), keys.int("index_topk_freq", 1)
    offset = max(keys.int("index_skip_topk_offset", 0, least=0), 1)
    holding = sum(1 for t in types if t == "full") if isinstance(types, list) else \
        sum(1 for layer in range(1, layers + 1) if max(layer - offset, 0) % freq == 0)
    return dict(sparse_keys=keys.int("index_topk"), indexer_heads=keys.int("index_n_heads"),
                indexer_dim=keys.int("index_head_dim"), indexer_layers=holding if holding < layers else None)


def llama4(keys: Keys, layers: int, expert_width: int) -> dict:
    """Llama 4: routed experts and one shared expert, both ``intermediate_size`` wide, in the layers
    ``moe_layers`` lists (HF's default: every ``interleave_moe_layer_step``-th, counting from the step's
    last); the dense layers between them ``intermediate_size_mlp`` wide."""
    step = keys.int("interleave_moe_layer_step", 1)
    moe = keys.get("moe_layers", list(range(step - 1, layers, step)))
    if not isinstance(moe, list) or not all(isinstance(i, int) and 0 <= i < layers for i in moe):
        raise PlanError(f"{keys.source}: 'moe_layers' must be a list of layer numbers below {layers}, got {moe!r}")
    dense = layers - len(set(moe))
    return dict(experts=keys.int("num_local_experts"), top_k=keys.int("num_experts_per_tok"), moe_ffn=expert_width,
                shared_experts=1, dense_layers=dense,
                ffn=keys.int("intermediate_size_mlp") if dense else expert_width)


def ernie_moe(keys: Keys, layers: int) -> dict:
    """ERNIE 4.5: ``moe_num_experts`` experts of ``moe_intermediate_size``, ``moe_k`` a token, and
    ``moe_num_shared_experts`` of the same width beside them, in the layers from ``moe_layer_start_index``
    to ``moe_layer_end_index`` (-1: the last) every ``moe_layer_interval``-th; an aux-free router
    (``moe_use_aux_free``) keeps a per-expert bias.  The dense layers are counted into ``dense_layers``."""
    start, interval = keys.int("moe_layer_start_index", 0, least=0), keys.int("moe_layer_interval", 1)
    end = keys.get("moe_layer_end_index", -1)
    if isinstance(end, bool) or not isinstance(end, int) or end < -1:
        raise PlanError(f"{keys.source}: 'moe_layer_end_index' must be a layer number or -1, got {end!r}")
    end = layers - 1 if end == -1 else end
    moe = sum(1 for i in range(layers) if start <= i <= end and (i + 1) % interval == 0)
    return dict(experts=keys.int("moe_num_experts"), top_k=keys.int("moe_k"), moe_ffn=keys.int("moe_intermediate_size"),
                shared_experts=keys.int("moe_num_shared_experts", 0, least=0), dense_layers=layers - moe,
                router_bias=keys.bool("moe_use_aux_free", False))


def bailing_moe(keys: Keys, layers: int) -> dict:
    """Ant Group's Ling (``bailing_moe``, v1 and 2.0): ``num_experts`` routed experts of ``moe_intermediate_size``,
    ``num_experts_per_tok`` a token, and ``num_shared_experts`` beside them, each ``moe_shared_expert_intermediate_size``
    wide where the config says (else as wide as a routed one); the first ``first_k_dense_replace`` layers dense, of
    ``intermediate_size``; a per-expert routing bias with ``moe_router_enable_expert_bias`` (2.0's sigmoid router),
    and 2.0's group-limited routing (``n_group``, ``topk_group``)."""
    shared = keys.int("num_shared_experts", 0, least=0)
    width = keys.int("moe_shared_expert_intermediate_size", None)
    return dict(experts=keys.int("num_experts"), top_k=keys.int("num_experts_per_tok"),
                moe_ffn=keys.int("moe_intermediate_size"), shared_experts=shared,
                shared_ffn=shared * width if shared and width else None,
                dense_layers=min(keys.int("first_k_dense_replace", 0, least=0), layers),
                router_bias=keys.bool("moe_router_enable_expert_bias", False), **routing_groups(keys))


def hunyuan(keys: Keys, kind: str, layers: int, width: int) -> dict:
    """Tencent's Hunyuan (``hunyuan_v1_dense``, ``hunyuan_v1_moe``: Hunyuan-A13B).  The MoE: every layer ``num_experts``
    routed experts of ``moe_intermediate_size`` (default ``width``, the MLP's), ``moe_topk`` a token, beside a shared
    MLP of ``num_shared_expert`` x ``width`` (Tencent's modeling code; none without ``use_mixed_mlp_moe``); each key
    one number or a list of one a layer, the same for every layer, as ``Model`` holds one MoE shape.  Cross-layer
    attention (``use_cla``: a layer reusing another's keys and values) is refused: counted whole, it would overstate
    the attention's weights and K/V."""
    if keys.bool("use_cla", False):
        raise PlanError(f"{keys.source}: use_cla shares keys and values across layers (cross-layer attention), which "
                        "the planner does not model: it counts every layer's own")
    if kind != "hunyuan_v1_moe":
        return {}

    def per_layer(key, default=None, least=1):
        value = keys.get(key, default)
        if isinstance(value, list):
            if len(value) != layers or len(set(map(str, value))) != 1:
                raise PlanError(f"{keys.source}: {key!r} differs between layers (or lists {len(value)} for "
                                f"{layers} layers); the planner holds one MoE shape for every layer")
            value = value[0]
        return Keys({key: value}, keys.source).int(key, least=least)

    shared = per_layer("num_shared_expert", 1, least=0) if keys.bool("use_mixed_mlp_moe", True) else 0
    return dict(experts=per_layer("num_experts"), top_k=per_layer("moe_topk"),
                moe_ffn=per_layer("moe_intermediate_size", width), shared_experts=shared,
                shared_ffn=shared * width or None)


def routing_groups(keys: Keys) -> dict:
    """Group-limited routing: ``n_group`` groups of experts, a token's from ``topk_group`` of them
    (DeepSeek-V3: 8 and 4, a group a node; V2: 8 and 3; 1 and 1: no limit)."""
    groups, chosen = keys.int("n_group", 1), keys.int("topk_group", 1)
    return dict(expert_groups=groups, groups_per_token=chosen) if chosen < groups else {}


def mlp_is_gated(keys: Keys) -> bool:
    """Whether ``hidden_act`` names a gated MLP (SwiGLU); an activation the planner does not know is refused."""
    act = keys.get("hidden_act", "silu")
    if act in GATED_ACTS:
        return True
    if act in PLAIN_ACTS:
        return False
    raise PlanError(f"{keys.source}: hidden_act {act!r} is not one the planner knows ({', '.join(GATED_ACTS + PLAIN_ACTS)})")


def require_gelu(keys: Keys) -> None:
    """Gemma's MLP is a GeGLU: its activation must be a GELU (the gate makes it gated)."""
    for key in ("hidden_activation", "hidden_act"):
        act = keys.get(key)
        if act is not None and not str(act).startswith("gelu"):
            raise PlanError(f"{keys.source}: {key} {act!r} is not a GELU, as Gemma's gated MLP has")


def sliding_window(keys: Keys, kind: str, layers: int) -> dict:
    """Which layers attend over a window only: ``layer_types`` when it lists them (gpt-oss, newer
    configs), else the family's rule: Gemma 2 every other layer, Gemma 3 all but every
    ``sliding_window_pattern``-th, Qwen2/3 (with ``use_sliding_window``) from ``max_window_layers`` on,
    Mistral, Mixtral and StarCoder2 every layer.  No ``sliding_window``: none."""
    types = keys.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise PlanError(f"{keys.source}: 'layer_types' must list one type for each of the {layers} layers")
        local = sum(1 for x in types if x == "sliding_attention")
    elif keys.get("sliding_window") is None:
        local = 0
    elif kind == "gemma2":
        local = (layers + 1) // 2                      # layers 0, 2, 4, ...
    elif kind == "gemma3_text":
        local = layers - layers // keys.int("sliding_window_pattern", 6)
    elif kind in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
        local = max(0, layers - keys.int("max_window_layers", layers, least=0)) \
            if keys.bool("use_sliding_window", False) else 0
    elif kind in ("mistral", "mixtral", "starcoder2"):
        local = layers
    else:
        local = 0
    return dict(sliding_window=keys.int("sliding_window"), local_layers=local) if local else {}
