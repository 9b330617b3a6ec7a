"""A Mamba-2 mixer, the state-space layer hybrid models put in place of most of their attention layers.

Nemotron-H and Nemotron 3 (NVIDIA), like other hybrids, interleave three kinds of block: Mamba-2 mixers, a few
attention layers, and MLPs or MoEs.  ``Mamba2`` holds a mixer's shape as a ``config.json`` spells it
(``mamba_num_heads`` H, ``mamba_head_dim`` P, ``ssm_state_size`` N, ``n_groups`` G, ``conv_kernel`` k,
``chunk_size`` Q) and counts what the planner needs of it: its parameters, its GEMMs, the chunked scan's
matrix products, the bytes its element-wise kernels move, and what it keeps for backward.

With inner width d = H P (the heads' channels), one mixer (Dao and Gu 2024, Mamba-2; Megatron-Core's
``MambaMixer``; the Hugging Face ``NemotronHMamba2Mixer``):

* ``in_proj``, h -> 2 d + 2 G N + H: the gate z, the input x, the group-shared B and C, and a step dt a head;
* a causal depthwise convolution of width k over x, B and C (``conv_channels`` = d + 2 G N), then SiLU;
* the scan (SSD): per chunk of Q tokens, C B^T a group (Q x Q x N), masked by each head's decay and applied
  to x (Q x P x Q); each chunk's state B^T x (N x P x Q); the output's share from the states passed in
  (Q x P x N): four batched matrix products, the ``scan_gemms``;
* a gated RMSNorm over d (the output times SiLU(z)), and ``out_proj``, d -> h.

Parameters: h (2 d + 2 G N + H) + d h for the projections, (d + 2 G N)(k + 1) for the convolution and its
bias, 3 H for dt's bias, A and D, and d for the gated norm.  Tensor parallelism splits the heads and groups
(G and H divisible by TP), as Megatron-Core does; the scan's products are activations times activations, run
in bf16 whatever the GEMMs' precision (Megatron-Core's Triton kernels).
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.planner.errors import PlanError

__all__ = ["Mamba2", "SCAN_GEMMS", "MAMBA_KERNELS"]

BYTES = 2   # bf16
# the chunked scan's four matrix products (in ``Mamba2.gemms``): activations on both sides
SCAN_GEMMS = ("scan_scores", "scan_mix", "scan_states", "scan_readout")
# a mixer's forward kernels past its GEMMs: the convolution, the scan's five (dt's cumulative sum, the chunk
# states, their passing, C B^T, the chunk outputs) and the gated norm
MAMBA_KERNELS = 7


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

    def __post_init__(self):
        for key in ("heads", "head_dim", "state", "groups", "conv", "chunk"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PlanError(f"Mamba-2 {key} must be a whole number >= 1, got {value!r}")
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

    def gemms(self, hidden: int, tokens: float, sequences: float, tp: int, count: float = 1.0) -> list:
        """The forward GEMMs of one mixer on one GPU, (name, batch count, M, N, K), ``count`` of them (a layer's
        share of the mixers): the two projections over ``tokens`` tokens, and the scan's products
        (``SCAN_GEMMS``) over the chunks of ``sequences`` sequences of ``tokens / sequences`` tokens each (a
        last, partial chunk counted whole, as the kernels run it)."""
        self.check_tp(tp)
        H, G, P, N, Q = self.heads // tp, self.groups // tp, self.head_dim, self.state, self.chunk
        chunks = sequences * -(-(tokens / sequences) // Q)
        return [("ssm_in", count, tokens, self.in_width // tp, hidden),
                ("scan_scores", count * chunks * G, Q, Q, N), ("scan_mix", count * chunks * H, Q, P, Q),
                ("scan_states", count * chunks * H, N, P, Q), ("scan_readout", count * chunks * H, Q, P, N),
                ("ssm_out", count, tokens, hidden, self.inner // tp)]

    def check_tp(self, tp: int) -> None:
        if self.heads % tp or self.groups % tp:
            raise PlanError(f"TP={tp} does not divide the Mamba-2 mixers' {self.heads} heads and {self.groups} "
                            "groups (Megatron-Core splits both over TP)")

    def elementwise_bytes(self, tokens: float, tp: int) -> float:
        """HBM bytes one mixer's kernels outside its GEMMs move in a forward pass: the convolution reads x, B
        and C and writes them activated; the scan reads them and dt, writes its output, and writes and reads
        back each chunk's fp32 state (H P N a chunk); the gated norm reads the output and z and writes the
        product ``out_proj`` reads."""
        c, d = self.conv_channels, self.inner
        states = 2 * 4 * self.heads * self.head_dim * self.state / self.chunk
        return tokens / tp * (BYTES * (2 * c) + BYTES * (c + self.heads + d) + states + BYTES * 3 * d)

    def saved_bytes(self, tokens: float, tp: int) -> float:
        """Bytes one mixer keeps for backward past its input norm's output, on the memory-efficient path Megatron-Core
        takes by default (``mamba_split_conv1d_scan_combined``: the convolution and the states recomputed in
        backward): ``in_proj``'s output (z, x, B, C, dt) and the scan's output, bf16, and the norm's fp32 inverse
        deviation a token and group."""
        return tokens / tp * (BYTES * (self.in_width + self.inner) + 4 * self.groups)

    def describe(self) -> str:
        return (f"Mamba-2 ({self.heads} heads of {self.head_dim}, state {self.state}, {self.groups} group"
                f"{'s' if self.groups > 1 else ''})")
