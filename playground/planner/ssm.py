"""The recurrent mixers hybrid models put in place of most of their attention layers: Mamba-2 and Gated DeltaNet.

A hybrid interleaves a few attention layers with mixers whose cost a token does not grow with the sequence:
Nemotron-H and Nemotron 3 (NVIDIA) with Mamba-2 mixers (``Mamba2``), Qwen3-Next and Qwen3.5 with Gated DeltaNet
ones (``GatedDeltaNet``).  Each class holds a mixer's shape as a ``config.json`` spells it and counts what the
planner needs of it, with one interface: its parameters (``params``), its GEMMs (``gemms``: the projections, then
its chunked scan's matrix products, ``SCAN_GEMMS``), the bytes its element-wise kernels move (``elementwise_bytes``)
and how many they are (``kernels``), and what it keeps for backward (``saved_bytes``).  Both scan chunk by chunk:
within a chunk of Q tokens the work is small matrix products, between chunks a state of a few thousand numbers a
head is passed on in fp32, written by one kernel and read by the next.

**Mamba-2** (Dao and Gu 2024; Megatron-Core's ``MambaMixer``; the Hugging Face ``NemotronHMamba2Mixer``), of H heads
of P channels (inner width d = H P), G groups sharing B and C of state size N, a convolution k wide:

* ``in_proj``, h -> 2 d + 2 G N + H: the gate z, the input x, B and C, and a step dt a head;
* a causal depthwise convolution over x, B and C (d + 2 G N channels), then SiLU;
* the scan (SSD): per chunk, C B^T a group (Q x Q x N), masked by each head's decay and applied to x (Q x P x Q);
  each chunk's state B^T x (N x P x Q); the output's share from the states passed in (Q x P x N);
* a gated RMSNorm over d (the output times SiLU(z)), and ``out_proj``, d -> h.

Parameters: h (2 d + 2 G N + H) + d h, (d + 2 G N)(k + 1) for the convolution and its bias, 3 H for dt's bias, A
and D, d for the gated norm.  What it keeps, on the memory-efficient path Megatron-Core takes by default
(``mamba_split_conv1d_scan_combined``, the convolution and states recomputed in backward): ``in_proj``'s output and
the scan's, bf16, and the norm's fp32 statistics a group.

**Gated DeltaNet** (Yang, Kautz and Hatamizadeh 2024; the Hugging Face ``Qwen3NextGatedDeltaNet``, flash-linear-
attention's chunked kernels), of n_k key heads of d_k and n_v value heads of d_v (K = n_k d_k, V = n_v d_v; queries
and keys shared by n_v / n_k value heads), a convolution k wide, chunks of Q = 64:

* ``in_proj``, h -> 2 K + 2 V + 2 n_v: queries, keys, values, the output gate z, and a write strength beta and a
  decay a head; a causal convolution over queries, keys and values (2 K + V channels), no bias;
* the scan (the delta rule, chunkwise): per chunk and value head, K K^T (Q x Q x d_k), its triangular inverse applied
  to the keys and values (Q x (d_k + d_v) x Q), Q K^T (Q x Q x d_k) and its mask applied to the corrected values
  (Q x d_v x Q); against the state passed in, the keys' and queries' reads (2 of Q x d_v x d_k) and its update
  (d_k x d_v x Q);
* a gated RMSNorm over each value head (a d_v weight), and ``out_proj``, V -> h.

Parameters: h (2 K + 2 V + 2 n_v) + V h, (2 K + V) k for the convolution, 2 n_v for the decay's bias and A, d_v
for the norm.  What it keeps: ``in_proj``'s outputs, the convolution's, the scan's output and the norm's.

Tensor parallelism splits the heads (and Mamba-2's groups), which must divide by TP, as Megatron-Core does; the
scans' products multiply activations, run in bf16 whatever the GEMMs' precision (Triton kernels).  Context
parallelism is Megatron-Core's head-parallel one (``MambaContextParallel``; Gated DeltaNet's headwise mode): the
mixer's inputs go all-to-all from sequence shards to head shards, each rank scans the whole sequence for its heads,
and the output comes back (``cp_widths``, ``cp_calls``).
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.planner.errors import PlanError

__all__ = ["Mamba2", "GatedDeltaNet", "SCAN_GEMMS"]

BYTES = 2   # bf16
# the chunked scans' matrix products (in each mixer's ``gemms``): activations on both sides
SCAN_GEMMS = ("scan_scores", "scan_mix", "scan_states", "scan_readout",
              "delta_kk", "delta_wu", "delta_qk", "delta_mix", "delta_reads", "delta_update")


def _whole(kind: str, mixer, keys) -> None:
    for key in keys:
        value = getattr(mixer, key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PlanError(f"{kind} {key} must be a whole number >= 1, got {value!r}")


def _scan_bytes(tokens: float, tp: int, conv: int, read: int, out: int, state: float) -> float:
    """HBM bytes of a chunked scan's kernels outside its products, one forward pass: the convolution reads and writes
    its ``conv`` channels; the scan reads them and ``read`` more (steps, gates), writes its ``out`` channels, and
    writes and reads back each chunk's fp32 state (``state`` numbers a token); the gated norm reads the output and
    its gate and writes the product the output projection reads."""
    return tokens / tp * (BYTES * 2 * conv + BYTES * (conv + read + out) + 2 * 4 * state + BYTES * 3 * out)


@dataclass(frozen=True)
class Mamba2:
    heads: int            # H, mamba_num_heads
    head_dim: int         # P, mamba_head_dim
    state: int            # N, ssm_state_size
    groups: int = 1       # G, n_groups: heads share B and C within a group
    conv: int = 4         # k, conv_kernel
    chunk: int = 128      # Q, chunk_size: the scan's block of tokens
    conv_bias: bool = True
    proj_bias: bool = False
    # forward kernels past the GEMMs: the convolution, the scan's five (dt's cumulative sum, the chunk states, their
    # passing, C B^T, the chunk outputs) and the gated norm
    kernels = 7
    cp_calls = 6          # all-to-alls a pass under CP: z, x, B, C and dt apart, the output back

    def __post_init__(self):
        _whole("Mamba-2", self, ("heads", "head_dim", "state", "groups", "conv", "chunk"))
        if self.heads % self.groups:
            raise PlanError(f"Mamba-2 groups ({self.groups}) must divide its heads ({self.heads})")

    @property
    def inner(self) -> int:
        """d = H P, the mixer's channels."""
        return self.heads * self.head_dim

    @property
    def conv_channels(self) -> int:
        """What the convolution runs over: x, B and C."""
        return self.inner + 2 * self.groups * self.state

    @property
    def in_width(self) -> int:
        """``in_proj``'s output: z, x, B, C and dt."""
        return self.inner + self.conv_channels + self.heads

    def params(self, hidden: int) -> int:
        """Weights (and biases, the gated norm) of one mixer, its input norm excluded."""
        d = self.inner
        projections = hidden * self.in_width + d * hidden + ((self.in_width + hidden) if self.proj_bias else 0)
        conv = self.conv_channels * (self.conv + (1 if self.conv_bias else 0))
        return projections + conv + 3 * self.heads + d

    def tensors(self) -> int:
        """Parameter tensors of one mixer (what a per-tensor ZeRO-3 gather launches once each): the two
        projections, the convolution's weight and bias, dt's bias, A, D and the norm's weight."""
        return 6 + (1 if self.conv_bias else 0) + (2 if self.proj_bias else 0)

    def check_tp(self, tp: int) -> None:
        if self.heads % tp or self.groups % tp:
            raise PlanError(f"TP={tp} does not divide the Mamba-2 mixers' {self.heads} heads and {self.groups} "
                            "groups (Megatron-Core splits both over TP)")

    def check_cp(self, tp: int, cp: int) -> None:
        """Megatron-Core's Mamba context parallelism (``MambaContextParallel``) gives each CP rank whole heads, and
        whole groups or a group's share of its heads."""
        local = self.groups // tp
        if (self.heads // tp) % cp or (local % cp and cp % local):
            raise PlanError(f"CP={cp} does not split the Mamba-2 mixers' {self.heads // tp} heads and {local} groups a "
                            f"TP rank (heads / TP must divide by CP, and groups / TP by CP or CP by them)")

    def cp_widths(self, tp: int, cp: int) -> tuple[float, float]:
        """Channels a token of one TP rank sends in Megatron-Core's Mamba context parallelism: before the convolution
        and scan, ``in_proj``'s output (z, x, B, C and dt: B and C repeated to one group a CP rank where the ranks
        outnumber the groups) all-to-all from sequence shards to head shards; after, the scan's output back."""
        groups = max(self.groups // tp, cp)
        return (2 * self.inner + self.heads) / tp + 2 * groups * self.state, self.inner / tp

    def gemms(self, hidden: int, tokens: float, sequences: float, tp: int, count: float = 1.0) -> list:
        """The forward GEMMs of one mixer on one GPU, (name, batch count, M, N, K), ``count`` of them (a layer's
        share of the mixers): the two projections over ``tokens`` tokens, and the scan's products over the chunks
        of ``sequences`` sequences of ``tokens / sequences`` tokens each (a last, partial chunk counted whole, as
        the kernels run it)."""
        self.check_tp(tp)
        H, G, P, N, Q = self.heads // tp, self.groups // tp, self.head_dim, self.state, self.chunk
        chunks = sequences * -(-(tokens / sequences) // Q)
        return [("ssm_in", count, tokens, self.in_width // tp, hidden),
                ("scan_scores", count * chunks * G, Q, Q, N), ("scan_mix", count * chunks * H, Q, P, Q),
                ("scan_states", count * chunks * H, N, P, Q), ("scan_readout", count * chunks * H, Q, P, N),
                ("ssm_out", count, tokens, hidden, self.inner // tp)]

    def elementwise_bytes(self, tokens: float, tp: int) -> float:
        """HBM bytes one mixer's kernels outside its GEMMs move in a forward pass (``_scan_bytes``): x, B and C
        through the convolution, dt beside them, the output d wide, each chunk's H P N state."""
        return _scan_bytes(tokens, tp, self.conv_channels, self.heads, self.inner,
                           self.heads * self.head_dim * self.state / self.chunk)

    def saved_bytes(self, tokens: float, tp: int) -> float:
        """Bytes one mixer keeps for backward past its input norm's output: ``in_proj``'s output (z, x, B, C, dt)
        and the scan's output, bf16, and the gated norm's fp32 inverse deviation a token and group."""
        return tokens / tp * (BYTES * (self.in_width + self.inner) + 4 * self.groups)

    def describe(self) -> str:
        return (f"Mamba-2 ({self.heads} heads of {self.head_dim}, state {self.state}, {self.groups} group"
                f"{'s' if self.groups > 1 else ''})")


@dataclass(frozen=True)
class GatedDeltaNet:
    key_heads: int        # n_k, linear_num_key_heads
    key_dim: int          # d_k, linear_key_head_dim
    value_heads: int      # n_v, linear_num_value_heads
    value_dim: int        # d_v, linear_value_head_dim
    conv: int = 4         # k, linear_conv_kernel_dim
    chunk: int = 64       # Q: flash-linear-attention's chunk of tokens
    # forward kernels past the GEMMs: the convolution, the queries' and keys' L2 norms, the decay and write strength,
    # the scan's six (the decay's cumulative sum, K K^T, its triangular inverse, the corrected keys and values, the
    # chunk states, the outputs) and the gated norm
    kernels = 11
    cp_calls = 2          # all-to-alls a pass under CP: the inputs at once, the output back

    def __post_init__(self):
        _whole("Gated DeltaNet", self, ("key_heads", "key_dim", "value_heads", "value_dim", "conv", "chunk"))
        if self.value_heads % self.key_heads:
            raise PlanError(f"Gated DeltaNet key heads ({self.key_heads}) must divide its value heads "
                            f"({self.value_heads})")

    @property
    def inner(self) -> int:
        """V = n_v d_v, the values' channels (the output's)."""
        return self.value_heads * self.value_dim

    @property
    def conv_channels(self) -> int:
        """What the convolution runs over: queries, keys and values."""
        return 2 * self.key_heads * self.key_dim + self.inner

    @property
    def in_width(self) -> int:
        """``in_proj``'s outputs: queries, keys, values, the gate z, beta and the decay."""
        return self.conv_channels + self.inner + 2 * self.value_heads

    def params(self, hidden: int) -> int:
        """Weights of one mixer, its input norm excluded."""
        return hidden * self.in_width + self.inner * hidden + self.conv_channels * self.conv \
            + 2 * self.value_heads + self.value_dim

    def tensors(self) -> int:
        """Parameter tensors of one mixer: its two input projections, the convolution, the decay's bias and A, the
        norm and the output projection."""
        return 7

    def check_cp(self, tp: int, cp: int) -> None:
        """Megatron-Core's headwise context parallelism for Gated DeltaNet gives each CP rank whole key and value
        heads."""
        if (self.key_heads // tp) % cp or (self.value_heads // tp) % cp:
            raise PlanError(f"CP={cp} does not split the Gated DeltaNet mixers' {self.key_heads // tp} key heads and "
                            f"{self.value_heads // tp} value heads a TP rank (each must divide by CP)")

    def cp_widths(self, tp: int, cp: int) -> tuple[float, float]:
        """Channels a token of one TP rank sends in Megatron-Core's headwise Gated DeltaNet context parallelism: all of
        ``in_proj``'s outputs (queries, keys, values, z, beta, the decay) in one all-to-all to head shards before the
        convolution, the gated norm's output back after."""
        return self.in_width / tp, self.inner / tp

    def check_tp(self, tp: int) -> None:
        if self.key_heads % tp or self.value_heads % tp:
            raise PlanError(f"TP={tp} does not divide the Gated DeltaNet mixers' {self.key_heads} key heads and "
                            f"{self.value_heads} value heads")

    def gemms(self, hidden: int, tokens: float, sequences: float, tp: int, count: float = 1.0) -> list:
        """The forward GEMMs of one mixer on one GPU, as ``Mamba2.gemms`` lists them: the projections, then the
        delta rule's products per chunk and value head."""
        self.check_tp(tp)
        n, dk, dv, Q = self.value_heads // tp, self.key_dim, self.value_dim, self.chunk
        per = count * sequences * -(-(tokens / sequences) // Q) * n     # chunks x value heads
        return [("ssm_in", count, tokens, self.in_width // tp, hidden),
                ("delta_kk", per, Q, Q, dk), ("delta_wu", per, Q, dk + dv, Q), ("delta_qk", per, Q, Q, dk),
                ("delta_mix", per, Q, dv, Q), ("delta_reads", 2 * per, Q, dv, dk), ("delta_update", per, dk, dv, Q),
                ("ssm_out", count, tokens, hidden, self.inner // tp)]

    def elementwise_bytes(self, tokens: float, tp: int) -> float:
        """HBM bytes one mixer's kernels outside its GEMMs move in a forward pass (``_scan_bytes``): queries, keys
        and values through the convolution, beta and the decay beside them, the output V wide, each chunk's
        d_k x d_v state a value head."""
        return _scan_bytes(tokens, tp, self.conv_channels, 2 * self.value_heads, self.inner,
                           self.value_heads * self.key_dim * self.value_dim / self.chunk)

    def saved_bytes(self, tokens: float, tp: int) -> float:
        """Bytes one mixer keeps for backward past its input norm's output: ``in_proj``'s outputs, the convolution's
        (the scan's queries, keys and values), the scan's output and the gated norm's, bf16."""
        return tokens / tp * BYTES * (self.in_width + self.conv_channels + 2 * self.inner)

    def describe(self) -> str:
        return (f"Gated DeltaNet ({self.key_heads} key heads of {self.key_dim}, {self.value_heads} value heads of "
                f"{self.value_dim})")
