"""The cost terms of the step-time model: what it is asked about, and what each piece of a step costs.

The model, the cluster and the layout (``Model``, ``Cluster``, ``Layout``), the model's only free
constants (``Efficiency``), the check that a layout can run at all (``check_layout``), and one
function per cost: a GEMM on a roofline with tile quantization (``gemm_time``), one layer's forward
(``layer_forward``), the FLOPs of a step (``flops_per_step``), a ring all-reduce
(``allreduce_time``), the link each kind of parallelism rides (``tensor_parallel_link``,
``data_parallel_link``, ``pipeline_link``) and the bytes a GPU holds (``memory_per_gpu``).
``playground.planner.step_time.predict`` adds them up into one step; its docstring says where each constant
and formula comes from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from playground import hardware

from playground.planner import memory as planner_memory
from playground.planner.errors import PlanError

__all__ = ["Model", "Cluster", "Layout", "Efficiency", "EFFICIENCY", "BYTES", "check_layout", "layer_gemms",
           "gemm_time", "layer_forward", "flops_per_step", "allreduce_time", "tensor_parallel_link",
           "data_parallel_link", "pipeline_link", "memory_per_gpu"]


@dataclass(frozen=True)
class Model:
    layers: int
    hidden: int
    heads: int
    vocab: int = 51200
    seq_len: int = 2048
    ffn: int | None = None          # MLP width; 4 * hidden when None
    kv_heads: int | None = None     # grouped-query attention; = heads when None
    gated_mlp: bool = False         # SwiGLU: three MLP matrices instead of two
    params: float | None = None     # total parameters; counted from the shape when None
    tied_embeddings: bool = True    # GPT: the logit layer reuses the input embedding
    position_embeddings: bool = True  # learned positions (GPT); False for rotary (Llama)

    @property
    def ffn_width(self) -> int:
        return self.ffn or 4 * self.hidden

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def param_count(self) -> float:
        if self.params:
            return self.params
        h, kv = self.hidden, (self.kv_heads or self.heads) * self.head_dim
        mlp = (3 if self.gated_mlp else 2) * h * self.ffn_width
        embed = (1 if self.tied_embeddings else 2) * self.vocab * h
        embed += self.seq_len * h if self.position_embeddings else 0
        # per layer: Narayanan et al.'s 12 h^2 + 13 h for a GPT (weights, biases, LayerNorms)
        return self.layers * (2 * h * h + 2 * h * kv + mlp + 13 * h) + embed


@dataclass(frozen=True)
class Cluster:
    gpu: hardware.GPU
    gpus_per_node: int
    nvlink_bytes_per_s: float       # one direction, per GPU
    network_bytes_per_s: float      # one direction, per GPU

    @classmethod
    def of(cls, gpu="A100-80GB", gpus_per_node=None, nvlink_bytes_per_s=None, network_bytes_per_s=None):
        """A cluster of ``gpu`` nodes; anything not given comes from the hardware table."""
        try:
            g = hardware.gpu(gpu)
        except hardware.UnknownGPUError as e:
            raise PlanError(str(e)) from None
        for name, value in (("gpus_per_node", gpus_per_node), ("nvlink_bytes_per_s", nvlink_bytes_per_s),
                            ("network_bytes_per_s", network_bytes_per_s)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value <= 0):
                raise PlanError(f"{name} must be a positive finite number, got {value!r}")
        return cls(g, gpus_per_node or g.gpus_per_node, nvlink_bytes_per_s or g.nvlink_bytes_per_s,
                   network_bytes_per_s or g.network_bytes_per_s)


@dataclass(frozen=True)
class Layout:
    tp: int
    pp: int
    dp: int
    micro_batch: int = 1
    global_batch: int = 512          # sequences per step
    vpp: int = 1                     # virtual stages (model chunks) per GPU
    zero_stage: int = 0
    recompute: str = "full"          # none | selective | full
    sequence_parallel: bool = False
    flash_attention: bool = False
    overlap_grad_reduce: bool = False  # Megatron-LM of 2021 reduced gradients after the flush
    scatter_gather: bool = True      # p2p sends 1/t of the activation per TP rank (Narayanan Sec. 4.1)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.dp * self.micro_batch)


@dataclass(frozen=True)
class Efficiency:
    """The model's only free constants: what fraction of a datasheet number real kernels reach."""
    gemm: float = 0.80        # large, tile-aligned fp16/bf16 GEMMs in cuBLAS on A100/H100
    hbm: float = 0.80         # streaming element-wise kernels, fraction of HBM bandwidth
    link: float = 0.80        # NCCL bus bandwidth, fraction of the link's datasheet rate
    kernel_s: float = 5e-6    # fixed launch + dispatch cost per kernel (PyTorch eager, CUDA)
    latency_s: float = 10e-6  # per ring step of a collective / per p2p message
    tile: tuple = (256, 128)  # cuBLAS's typical output tile (rows x columns)
    optimizer_bytes: float = 30  # HBM bytes per owned parameter in one Adam step
    sources: dict = field(default_factory=lambda: {
        "gemm": "assumed: large cuBLAS fp16/bf16 GEMMs reach roughly 70-90% of dense peak; NVIDIA's "
                "Matrix Multiplication Background guide explains the gap (tile and wave quantization); "
                "0.80 is the middle of that range, not fitted to any published row",
        "hbm": "assumed: streaming element-wise kernels reach roughly 80% of datasheet HBM bandwidth",
        "link": "assumed: NCCL all-reduce bus bandwidth (nccl-tests PERFORMANCE.md) reaches roughly 80% "
                "of the NVLink or InfiniBand line rate at large messages",
        "kernel_s": "assumed: a CUDA launch plus framework dispatch costs a few microseconds per kernel",
        "latency_s": "assumed: one ring step or point-to-point message costs ~10 microseconds of latency",
    }, compare=False)


EFFICIENCY = Efficiency()
BYTES = 2  # fp16 / bf16 activations, parameters and gradients


# ----------------------------------------------------------------------------- checks
def check_layout(model: Model, layout: Layout, gpus: int | None = None) -> None:
    """One clear ``PlanError`` for a layout that cannot run (before any arithmetic)."""
    for name in ("tp", "pp", "dp", "vpp", "micro_batch", "global_batch"):
        v = getattr(layout, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise PlanError(f"{name} must be a whole number >= 1, got {v!r}")
    for name in ("layers", "hidden", "heads", "vocab", "seq_len"):
        v = getattr(model, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise PlanError(f"model {name} must be a whole number >= 1, got {v!r}")
    if model.hidden % model.heads:
        raise PlanError(f"hidden size {model.hidden} is not divisible by {model.heads} heads")
    if model.heads % layout.tp:
        raise PlanError(f"TP={layout.tp} does not divide the {model.heads} attention heads")
    if (model.kv_heads or model.heads) % layout.tp and layout.tp % (model.kv_heads or model.heads):
        raise PlanError(f"TP={layout.tp} and the {model.kv_heads} key/value heads do not divide each other")
    if layout.pp > model.layers:
        raise PlanError(f"PP={layout.pp} is more than the {model.layers} layers")
    if layout.pp * layout.vpp > model.layers:
        raise PlanError(f"PP x VPP = {layout.pp * layout.vpp} chunks is more than the {model.layers} layers")
    if layout.vpp > 1 and layout.pp == 1:
        raise PlanError("virtual stages (VPP > 1) need pipeline parallelism (PP > 1)")
    if gpus is not None and layout.gpus != gpus:
        raise PlanError(f"TP x PP x DP = {layout.tp} x {layout.pp} x {layout.dp} = {layout.gpus} "
                        f"is not the {gpus} GPUs")
    if layout.global_batch % (layout.dp * layout.micro_batch):
        raise PlanError(f"global batch {layout.global_batch} is not a multiple of DP x micro-batch = "
                        f"{layout.dp} x {layout.micro_batch}")
    if layout.vpp > 1 and layout.micro_batches % layout.pp:
        raise PlanError(f"the interleaved schedule needs the {layout.micro_batches} micro-batches "
                        f"to be a multiple of PP={layout.pp}")
    if layout.recompute not in planner_memory.RECOMPUTE:
        raise PlanError(f"recompute must be one of {', '.join(planner_memory.RECOMPUTE)}, got {layout.recompute!r}")
    if layout.zero_stage not in (0, 1, 2, 3):
        raise PlanError(f"zero stage must be 0, 1, 2 or 3, got {layout.zero_stage!r}")


# ----------------------------------------------------------------------------- compute
def layer_gemms(model: Model, micro_batch: int, tp: int) -> list[tuple[str, int, int, int, int]]:
    """The forward GEMMs of one layer on one TP rank: (name, batch count, M, N, K)."""
    b, s, h, t = micro_batch, model.seq_len, model.hidden, tp
    d, kv = model.head_dim, model.kv_heads or model.heads
    kv_per_rank = max(kv // t, 1)
    mlp_in = (2 if model.gated_mlp else 1) * model.ffn_width // t
    return [
        ("qkv", 1, b * s, (h // t) + 2 * kv_per_rank * d, h),
        ("scores", b * model.heads // t, s, s, d),
        ("context", b * model.heads // t, s, d, s),
        ("proj", 1, b * s, h, h // t),
        ("mlp_in", 1, b * s, mlp_in, h),
        ("mlp_out", 1, b * s, h, model.ffn_width // t),
    ]


def gemm_time(count, M, N, K, gpu, eff: Efficiency) -> float:
    flops = 2 * count * M * N * K
    tm, tn = eff.tile
    tiles = (M / (tm * math.ceil(M / tm))) * (N / (tn * math.ceil(N / tn)))
    compute = flops / (eff.gemm * tiles * gpu.peak_bf16_flops)
    memory = count * BYTES * (M * K + K * N + M * N) / (eff.hbm * gpu.hbm_bytes_per_s)
    return max(compute, memory) + eff.kernel_s


def layer_forward(model: Model, layout: Layout, gpu, eff: Efficiency) -> dict:
    """Seconds of one layer's forward for one micro-batch on one GPU: GEMMs and element-wise."""
    b, s, h, t, a = layout.micro_batch, model.seq_len, model.hidden, layout.tp, model.heads
    gemms = layer_gemms(model, b, t)
    if layout.flash_attention:  # one fused kernel: its matmuls at GEMM speed, no s^2 traffic
        attn = [g for g in gemms if g[0] in ("scores", "context")]
        flops = sum(2 * c * M * N * K for _, c, M, N, K in attn)
        gemm_t = sum(gemm_time(*g[1:], gpu, eff) for g in gemms if g not in attn)
        gemm_t += flops / (eff.gemm * gpu.peak_bf16_flops) + eff.kernel_s
        scores_bytes = 4 * b * s * h / t * BYTES
    else:
        gemm_t = sum(gemm_time(*g[1:], gpu, eff) for g in gemms)
        scores_bytes = 9 * a * s * s * b / t  # softmax read+write (4), dropout read+write+mask (5)
    replicated = 22 * s * b * h  # 2 LayerNorms (4 sbh each), 2 bias-dropout-adds (7 sbh each)
    if layout.sequence_parallel:
        replicated /= t
    mlp_act = 2 * 2 * s * b * model.ffn_width / t * (1.5 if model.gated_mlp else 1)  # GeLU/SwiGLU
    elementwise = (replicated + mlp_act + scores_bytes) / (eff.hbm * gpu.hbm_bytes_per_s) + 8 * eff.kernel_s
    return {"gemm": gemm_t, "elementwise": elementwise}


def flops_per_step(model: Model, layout: Layout, recompute: str | None = None) -> float:
    """FLOPs of one step summed over GPUs, counted from ``layer_gemms`` (equals Megatron's Eq. 3
    for a GPT with a 4h MLP).  ``recompute`` defaults to the layout's (hardware FLOPs); pass
    "none" for model FLOPs."""
    recompute = layout.recompute if recompute is None else recompute
    per_layer_fwd = sum(2 * c * M * N * K for _, c, M, N, K in layer_gemms(model, 1, 1))
    attn_fwd = sum(2 * c * M * N * K for n, c, M, N, K in layer_gemms(model, 1, 1) if n in ("scores", "context"))
    passes = {"none": 3, "selective": 3, "full": 4}[recompute]
    extra = attn_fwd if recompute == "selective" else 0
    logits = 2 * model.seq_len * model.hidden * model.vocab * 3
    return layout.global_batch * (model.layers * (passes * per_layer_fwd + extra) + logits)


# ----------------------------------------------------------------------------- communication
def allreduce_time(size_bytes: float, n: int, bytes_per_s: float, eff: Efficiency = EFFICIENCY) -> float:
    """Ring all-reduce: 2(n-1) steps of latency, 2(n-1)/n of the bytes over the slowest link."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * eff.latency_s + 2 * (n - 1) / n * size_bytes / (eff.link * bytes_per_s)


# Ranks are numbered TP fastest, then DP, then PP (Megatron's order), so every group of one kind
# spans a block of consecutive ranks: ``span`` of them (TP: t; DP: t d; PP: t d p).  All those
# blocks stay inside nodes only when the span divides the GPUs per node (t = 3 on 8-GPU nodes puts
# ranks 6-8 in one group, across two nodes) or the whole job fits in one node.
def _link(span: int, layout: Layout, cluster: Cluster) -> tuple[str, float]:
    if layout.gpus <= cluster.gpus_per_node or cluster.gpus_per_node % span == 0:
        return "nvlink", cluster.nvlink_bytes_per_s
    return "network", cluster.network_bytes_per_s


def tensor_parallel_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    return _link(layout.tp, layout, cluster)


def data_parallel_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    return _link(layout.tp * layout.dp, layout, cluster)


def pipeline_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    return _link(layout.tp * layout.dp * layout.pp, layout, cluster)


# ----------------------------------------------------------------------------- memory
def memory_per_gpu(model: Model, layout: Layout) -> dict:
    """Bytes per GPU with the capacity planner's formulas: ZeRO model states of the stage's share
    of parameters, and Korthikanti et al.'s activations per layer (with or without sequence
    parallelism, as the layout says) for the micro-batches a stage holds in flight (1F1B:
    min(p, m); the first stage is the fullest).  ``usable`` is the HBM a layout may fill
    (``planner_memory.usable_memory_bytes``); the caller compares ``total`` with it."""
    check_layout(model, layout)
    p, t = layout.pp, layout.tp
    stage_layers = math.ceil(model.layers / p)
    states = planner_memory.model_state_bytes(model.param_count * stage_layers / model.layers / t,
                                             layout.dp, layout.zero_stage)
    per_layer = planner_memory.activation_bytes_per_layer(model.seq_len, layout.micro_batch, model.hidden,
                                                         model.heads, layout.recompute, t,
                                                         flash_attention=layout.flash_attention,
                                                         sequence_parallel=layout.sequence_parallel)
    in_flight = min(p, layout.micro_batches) * (1 + (p - 1) / (p * layout.vpp) if layout.vpp > 1 else 1)
    acts = stage_layers * in_flight * per_layer
    return {"model_states": states["total"], "activations": acts, "total": states["total"] + acts}

