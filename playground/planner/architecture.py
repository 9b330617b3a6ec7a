"""What a transformer is, for the planner: its shape, and its parameters counted exactly from it.

``Model`` describes a decoder-only transformer as a Hugging Face ``config.json`` does: dense
(GPT-3, Llama, Mistral, Qwen) or a mixture of experts (Mixtral, Qwen-MoE, DeepSeek-V3 with shared
experts, dense first layers and multi-head latent attention, MLA).  Its defaults describe a GPT of
Narayanan et al. (2021) (learned positions, biases, LayerNorm, a 4h MLP, tied embeddings), so that
the step-time model's validation rows read as their papers wrote them; ``presets`` and
``hf_config`` fill in everything for today's models.

Parameter count (``param_count``; ``active_param_count`` for what one token passes through):

    N = l_dense (A + M(f) + n) + l_moe (A + E M(f_e) + M(f_s) + R + n) + V h (1 or 2) + s h + n_f

* A, attention: Q h a d, K and V h k d each, output a d h (a heads, k key/value heads, d the head
  size); with MLA, the low-rank paths instead (``attention_params``); plus biases and Q/K norms.
* M(f), an MLP of width f: 3 h f gated (SwiGLU), 2 h f otherwise, plus biases.
* E routed experts of width f_e, shared experts of total width f_s, the router R = E h (+ E with a
  routing bias, + h with a shared-expert gate); n the layer's norms (2 h RMSNorm, 4 h LayerNorm; twice
  that with Gemma 2's sandwich norms, after attention and the MLP as well as before).
* V h for the input embedding and again for an untied output layer; s h for learned positions;
  n_f the final norm.  The active count takes k of the E experts (``top_k``).

Sliding-window attention (``sliding_window``, in ``local_layers`` of the layers) changes no parameter:
only what a local layer's attention computes (``attended_keys``: the window, not the sequence).  DeepSeek Sparse
Attention (``sparse_keys``: DeepSeek-V3.2, GLM-5) adds its lightning indexer's weights to A
(``indexer_params``), and each query attends the ``sparse_keys`` keys the indexer picks.

A hybrid mixes recurrent mixers (``ssm``: Nemotron-H's and Nemotron 3's ``ssm.Mamba2``, Qwen3-Next's and Qwen3.5's
``ssm.GatedDeltaNet``) with a few attention layers (Qwen3-Next's with a gate on their output, ``attention_gate``, h a d
more weights): ``layers`` then counts its MLP or MoE blocks, and ``ssm_layers`` recurrent mixers and ``attention_layers``
attention mixers spread among them, each mixer with its input norm.  The step-time and memory models price an
average layer (``attention_share``, ``ssm_share`` of a mixer each), as they do sliding-window layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from playground.planner.errors import PlanError
from playground.planner.model_text import model_line, position_note, sparse_attention_note
from playground.planner.ssm import GatedDeltaNet, Mamba2

__all__ = ["Model", "DEFAULT_SEQ_LEN"]

DEFAULT_SEQ_LEN = 8192  # Llama 3's pre-training context: a plan's sequence when nothing else says one


@dataclass(frozen=True)
class Model:
    layers: int
    hidden: int
    heads: int
    vocab: int = 51200
    seq_len: int = 2048
    ffn: int | None = None          # dense MLP width; 4 * hidden when None
    kv_heads: int | None = None     # grouped-query attention; = heads when None
    gated_mlp: bool = False         # SwiGLU: three MLP matrices instead of two
    params: float | None = None     # total parameters as published; counted from the shape when None
    tied_embeddings: bool = True    # GPT: the logit layer reuses the input embedding
    position_embeddings: bool = True  # learned positions (GPT); False for rotary (Llama)
    head_dim: int | None = None     # per-head size; hidden / heads when None (Qwen3 sets its own)
    qkv_bias: bool = True           # biases on Q, K, V (GPT, Qwen2); Llama has none
    proj_bias: bool = True          # biases on the output projection and the MLP (GPT), a MoE's experts too (gpt-oss)
    norm: str = "layernorm"         # "layernorm" (weight + bias) or "rmsnorm" (weight only)
    qk_norm: bool = False           # RMSNorm on each head's queries and keys (Qwen3)
    sandwich_norm: bool = False     # a norm after attention and after the MLP too: 4 a layer (Gemma 2, 3)
    experts: int = 0                # routed experts per MoE layer; 0 = dense model
    top_k: int = 0                  # experts each token is routed to
    moe_ffn: int | None = None      # width of one routed expert's MLP
    shared_experts: int = 0         # experts every token passes through (DeepSeek, Qwen-MoE)
    shared_ffn: int | None = None   # total width of the shared experts; shared_experts * moe_ffn when None
    shared_expert_gate: bool = False  # Qwen-MoE: a sigmoid gate (h -> 1) on the shared expert
    router_bias: bool = False       # DeepSeek-V3: a per-expert bias used for load balancing
    dense_layers: int = 0           # of an MoE model, the first layers with a dense MLP (DeepSeek-V3: 3)
    expert_groups: int = 1          # group-limited routing: the experts in this many equal groups ...
    groups_per_token: int = 1       # ... of which a token's experts come from at most this many (DeepSeek-V3: 8, 4)
    q_lora_rank: int | None = None  # MLA: rank of the query compression (None: queries not compressed)
    kv_lora_rank: int | None = None  # MLA: rank of the key/value compression; None = not MLA
    qk_rope_dim: int = 0            # MLA: rotary part of each query/key head
    v_head_dim: int | None = None   # MLA: per-head size of values; head_size when None
    sliding_window: int | None = None  # keys a query of a local-attention layer sees (Mistral, Gemma 2/3, gpt-oss)
    local_layers: int = 0           # how many of the layers attend only over that window; the rest, whole
    sparse_keys: int | None = None  # DeepSeek Sparse Attention: keys each query's attention takes (index_topk) ...
    indexer_heads: int = 0          # ... picked by a lightning indexer of this many heads ...
    indexer_dim: int = 0            # ... of this size (DeepSeek-V3.2, GLM-5: 64 or 32 of 128) ...
    indexer_layers: int | None = None  # ... in this many layers, the rest reusing a selection (None: every layer)
    ssm: Mamba2 | GatedDeltaNet | None = None  # a hybrid's recurrent mixer (Nemotron-H's, Qwen3-Next's) ...
    ssm_layers: int = 0             # ... of which it has this many, beside ...
    attention_layers: int | None = None  # ... this many attention mixers (None: one in each of the layers)
    attention_gate: bool = False    # a sigmoid gate on each head's output, from the query projection (Qwen3-Next)
    max_positions: int | None = field(default=None, compare=False)  # a config's max_position_embeddings
    seq_len_from: str = field(default="", compare=False)  # why seq_len is what it is, when nobody gave it
    read_note: str = field(default="", compare=False)  # how a config.json of an unnamed family was read
    name: str = field(default="", compare=False)

    def __post_init__(self):
        for key in ("layers", "hidden", "heads", "vocab", "seq_len"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PlanError(f"model {key} must be a whole number >= 1, got {value!r}")
        if self.norm not in ("layernorm", "rmsnorm"):
            raise PlanError(f"norm must be 'layernorm' or 'rmsnorm', got {self.norm!r}")
        if self.experts:
            if not 1 <= self.top_k <= self.experts:
                raise PlanError(f"an MoE model needs 1 <= top_k <= experts, got top_k={self.top_k} "
                                f"with {self.experts} experts")
            if not 0 <= self.dense_layers < self.layers:
                raise PlanError(f"dense_layers must be in [0, {self.layers}), got {self.dense_layers}")
            if self.experts % self.expert_groups or not 1 <= self.groups_per_token <= self.expert_groups:
                raise PlanError(f"group-limited routing needs expert groups dividing the {self.experts} experts "
                                f"and 1 <= groups per token <= groups, got {self.groups_per_token} of "
                                f"{self.expert_groups}")
        if self.sparse_keys is not None and not (self.sparse_keys >= 1 and self.indexer_heads >= 1 and self.indexer_dim >= 1):
            raise PlanError(f"sparse attention needs >= 1 selected keys and an indexer of >= 1 heads of >= 1, got "
                            f"{self.sparse_keys!r} keys, {self.indexer_heads!r} heads of {self.indexer_dim!r}")
        if self.indexer_layers is not None and not 1 <= self.indexer_layers <= self.layers:
            raise PlanError(f"indexer_layers must be in [1, {self.layers}], got {self.indexer_layers!r}")
        if self.ssm_layers and self.ssm is None or self.ssm_layers < 0:
            raise PlanError(f"a hybrid needs its recurrent mixer's shape and >= 0 of them, got {self.ssm_layers!r} "
                            f"mixers of {self.ssm!r}")
        if self.attention_layers is not None and self.attention_layers < 0:
            raise PlanError(f"attention_layers must be >= 0, got {self.attention_layers!r}")
        if not 0 <= self.local_layers <= self.layers:
            raise PlanError(f"local_layers must be in [0, {self.layers}], got {self.local_layers}")
        if self.local_layers and (isinstance(self.sliding_window, bool) or not isinstance(self.sliding_window, int)
                                  or self.sliding_window < 1):
            raise PlanError(f"sliding-window layers need a window of >= 1 tokens, got {self.sliding_window!r}")

    # ------------------------------------------------------------------ shape
    @property
    def ffn_width(self) -> int:
        return self.ffn or 4 * self.hidden

    @property
    def head_size(self) -> int:
        """Per-head size of queries and keys (with MLA: the non-rotary part plus the rotary part)."""
        return self.head_dim or self.hidden // self.heads

    @property
    def kv_head_count(self) -> int:
        return self.kv_heads or self.heads

    @property
    def materialized_kv_heads(self) -> int:
        """K/V heads attention holds in memory: the grouped ones, or under MLA one per query head (its
        latent is expanded before the attention core)."""
        return self.heads if self.is_mla else self.kv_head_count

    @property
    def value_head_size(self) -> int:
        return self.v_head_dim or self.head_size

    def attended_keys(self, local: bool = False) -> int:
        """Keys one query's attention spans: the whole sequence, a local layer's window, or the keys sparse
        attention selects (``sparse_keys``)."""
        if local and self.local_layers:
            return min(self.seq_len, self.sliding_window)
        return min(self.seq_len, self.sparse_keys) if self.sparse_keys else self.seq_len

    def position_note(self) -> str:
        """A warning when the sequence planned is longer than the config's positions reach, else ''."""
        return position_note(self)

    def sparse_attention_note(self) -> str:
        """What a plan says of DeepSeek Sparse Attention, where the model has it, else '' (``model_text``)."""
        return sparse_attention_note(self)

    @property
    def is_hybrid(self) -> bool:
        """Recurrent mixers beside attention, or attention counted apart from the layers."""
        return bool(self.ssm_layers) or self.attention_layers is not None

    @property
    def attention_share(self) -> float:
        """Attention mixers a layer (1, but in a hybrid)."""
        return 1.0 if self.attention_layers is None else self.attention_layers / self.layers

    @property
    def ssm_share(self) -> float:
        """Recurrent mixers a layer (0, but in a hybrid)."""
        return self.ssm_layers / self.layers

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def biased_experts(self) -> bool:
        """A MoE whose experts carry biases (the MLP biases of ``proj_bias``, as gpt-oss's do)."""
        return self.is_moe and self.proj_bias

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def expert_width(self) -> int:
        return self.moe_ffn or self.ffn_width

    @property
    def shared_width(self) -> int:
        return self.shared_ffn if self.shared_ffn is not None else self.shared_experts * self.expert_width

    # ------------------------------------------------------------------ parameters, per part
    def _norm(self) -> int:
        return (2 if self.norm == "layernorm" else 1) * self.hidden

    def _layer_norms(self) -> float:
        """Norm weights of one layer: before attention (each mixer, in a hybrid) and the MLP, and after each with
        sandwich norms."""
        norms = 1 + self.attention_share + self.ssm_share if self.is_hybrid else 2   # 2 stays a whole number
        return (2 if self.sandwich_norm else 1) * norms * self._norm()

    def mixer_params(self) -> float:
        """One layer's mixers: its attention block, or in a hybrid its share of the attention and recurrent ones."""
        if not self.is_hybrid:   # a whole number, as every other model's count
            return self.attention_params()
        ssm = self.ssm_share * self.ssm.params(self.hidden) if self.ssm_layers else 0
        return self.attention_share * self.attention_params() + ssm

    def attention_params(self) -> int:
        """Weights (and biases, norms) of one attention block, its input norm excluded."""
        h, a, d, k = self.hidden, self.heads, self.head_size, self.kv_head_count
        if self.is_mla:  # DeepSeek-V2/V3: Q and KV through low-rank latents, each with an RMSNorm
            q = (h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * a * d) if self.q_lora_rank \
                else h * a * d
            nope = d - self.qk_rope_dim
            kv = h * (self.kv_lora_rank + self.qk_rope_dim) + self.kv_lora_rank \
                + self.kv_lora_rank * a * (nope + self.value_head_size)
            return q + kv + a * self.value_head_size * h + (h if self.proj_bias else 0) + self.indexer_params()
        weights = (2 if self.attention_gate else 1) * h * a * d + 2 * h * k * d + a * d * h   # a gate: h a d more
        bias = (a * d + 2 * k * d if self.qkv_bias else 0) + (h if self.proj_bias else 0)
        return weights + bias + (2 * d if self.qk_norm else 0) + self.indexer_params()

    def indexer_params(self) -> float:
        """Sparse attention's lightning indexer, a layer (DeepSeek's reference ``Indexer``): its queries from the
        query's compression (or the hidden state), one key with its LayerNorm, and a weight per head; averaged
        over the layers where only ``indexer_layers`` of them hold one (``indexer_share``)."""
        if not self.sparse_keys:
            return 0
        H, d, h = self.indexer_heads, self.indexer_dim, self.hidden
        one = (self.q_lora_rank or h) * H * d + h * (d + H) + 2 * d
        return one if self.indexer_layers is None else one * self.indexer_share

    @property
    def indexer_share(self) -> float:
        """The share of the layers that hold a sparse-attention indexer and compute its selection."""
        return 1.0 if self.indexer_layers is None else self.indexer_layers / self.layers

    def mlp_params(self, width: int | None = None) -> int:
        f, h = self.ffn_width if width is None else width, self.hidden
        if self.gated_mlp:
            return 3 * h * f + ((2 * f + h) if self.proj_bias else 0)
        return 2 * h * f + ((f + h) if self.proj_bias else 0)

    def router_params(self) -> int:
        return self.experts * self.hidden + (self.experts if self.router_bias else 0) \
            + (self.hidden if self.shared_expert_gate else 0)

    def shared_params(self) -> int:
        return self.mlp_params(self.shared_width) if self.shared_width else 0

    def dense_layer_params(self) -> int:
        return self.mixer_params() + self.mlp_params() + self._layer_norms()

    def moe_layer_params(self, experts: int | None = None) -> int:
        """One MoE layer with ``experts`` of its routed experts (all of them when None)."""
        e = self.experts if experts is None else experts
        return self.mixer_params() + e * self.mlp_params(self.expert_width) + self.shared_params() \
            + self.router_params() + self._layer_norms()

    def dense_layer_tensors(self) -> int:
        """Parameter tensors of one dense layer as Megatron holds them: fused QKV, the output
        projection, the MLP's input (gate and up fused) and output matrices, their biases, and the
        norms' weights (and biases).  What a per-tensor ZeRO-3 gather launches once each."""
        biases = (1 if self.qkv_bias else 0) + (3 if self.proj_bias else 0)
        norms = 2 * (2 if self.norm == "layernorm" else 1) + (2 if self.qk_norm else 0)
        return 4 + biases + norms + (round(self.ssm_share * (self.ssm.tensors() + 1)) if self.ssm_layers else 0)

    def expert_params(self) -> int:
        """Routed-expert weights of the whole model (what expert parallelism shards)."""
        return self.moe_layers * self.experts * self.mlp_params(self.expert_width)

    def embedding_params(self) -> int:
        return (1 if self.tied_embeddings else 2) * self.vocab * self.hidden \
            + (self.seq_len * self.hidden if self.position_embeddings else 0)

    def counted_params(self, active: bool = False) -> int:
        dense_layers = self.layers - self.moe_layers
        moe = self.moe_layer_params(self.top_k if active else None) if self.is_moe else 0
        return round(dense_layers * self.dense_layer_params() + self.moe_layers * moe
                     + self.embedding_params() + self._norm())   # a hybrid's shares sum to whole mixers

    @property
    def param_count(self) -> float:
        """Total parameters: ``params`` when given (a published figure), else counted from the shape."""
        return self.params or self.counted_params()

    @property
    def active_param_count(self) -> float:
        """Parameters one token passes through (the embedding and output layer included)."""
        if not self.is_moe:
            return self.param_count
        return self.counted_params(active=True) * (self.param_count / self.counted_params())

    def describe(self) -> str:
        """One line: the shape as a practitioner reads it (``model_text``)."""
        return model_line(self)
