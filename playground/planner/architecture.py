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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from playground.planner.errors import PlanError

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
        if self.max_positions and self.seq_len > self.max_positions:
            return (f"the sequence of {self.seq_len:,} tokens is beyond this config's max_position_embeddings "
                    f"({self.max_positions:,}): pass --seq-len with the length you will train at")
        return ""

    def sparse_attention_note(self) -> str:
        """What a plan says of DeepSeek Sparse Attention, where the model has it: how it is counted (the indexer's
        weights as ``indexer_params`` counts them) and what is left out; else ''."""
        if not self.sparse_keys:
            return ""
        holding = self.indexer_layers or self.layers
        note = (f"DeepSeek Sparse Attention as its sparse stage trains: each query attends index_topk = "
                f"{self.sparse_keys:,} keys, picked by a lightning indexer ({self.indexer_heads} heads of "
                f"{self.indexer_dim}, {self.layers * self.indexer_params() / 1e6:,.1f} M parameters) whose scores "
                f"over every earlier key count as one GEMM, whole on each TP rank; not counted: the dense warm-up "
                f"before it (whole-sequence attention), the indexer's KL loss and its activations")
        if holding < self.layers:
            note += f"; {holding} of the {self.layers} layers hold an indexer, the rest reusing a selection"
        return note

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

    def _layer_norms(self) -> int:
        """Norm weights of one layer: before attention and the MLP, and after each with sandwich norms."""
        return (4 if self.sandwich_norm else 2) * self._norm()

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
        weights = h * a * d + 2 * h * k * d + a * d * h
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
        return self.attention_params() + self.mlp_params() + self._layer_norms()

    def moe_layer_params(self, experts: int | None = None) -> int:
        """One MoE layer with ``experts`` of its routed experts (all of them when None)."""
        e = self.experts if experts is None else experts
        return self.attention_params() + e * self.mlp_params(self.expert_width) + self.shared_params() \
            + self.router_params() + self._layer_norms()

    def dense_layer_tensors(self) -> int:
        """Parameter tensors of one dense layer as Megatron holds them: fused QKV, the output
        projection, the MLP's input (gate and up fused) and output matrices, their biases, and the
        norms' weights (and biases).  What a per-tensor ZeRO-3 gather launches once each."""
        biases = (1 if self.qkv_bias else 0) + (3 if self.proj_bias else 0)
        norms = 2 * (2 if self.norm == "layernorm" else 1) + (2 if self.qk_norm else 0)
        return 4 + biases + norms

    def expert_params(self) -> int:
        """Routed-expert weights of the whole model (what expert parallelism shards)."""
        return self.moe_layers * self.experts * self.mlp_params(self.expert_width)

    def embedding_params(self) -> int:
        return (1 if self.tied_embeddings else 2) * self.vocab * self.hidden \
            + (self.seq_len * self.hidden if self.position_embeddings else 0)

    def counted_params(self, active: bool = False) -> int:
        dense_layers = self.layers - self.moe_layers
        moe = self.moe_layer_params(self.top_k if active else None) if self.is_moe else 0
        return dense_layers * self.dense_layer_params() + self.moe_layers * moe \
            + self.embedding_params() + self._norm()

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
        """One line: the shape as a practitioner reads it."""
        q = f"q rank {self.q_lora_rank}" if self.q_lora_rank else "q not compressed"
        att = (f"{self.heads} MLA heads ({q}, kv rank {self.kv_lora_rank})" if self.is_mla
               else f"{self.heads} heads / {self.kv_head_count} KV heads of {self.head_size}")
        mlp = ("SwiGLU" if self.gated_mlp else "MLP") + f" {self.ffn_width}"
        if self.is_moe:
            mlp = (f"{self.experts} experts (top {self.top_k}) of {self.expert_width}"
                   + (f" + shared {self.shared_width}" if self.shared_width else "")
                   + (f", {self.dense_layers} dense first layer{'s' if self.dense_layers > 1 else ''} ({mlp})"
                      if self.dense_layers else ""))
        window = f", a {self.sliding_window:,}-token window in {self.local_layers} of them" if self.local_layers else ""
        if self.sparse_keys:
            window += f", sparse attention over {self.sparse_keys:,} keys (an indexer of {self.indexer_heads} heads)"
        return (f"{self.layers} layers{window}, hidden {self.hidden}, {att}, {mlp}, vocab {self.vocab}"
                + (", tied embeddings" if self.tied_embeddings else ""))
