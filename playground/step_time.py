"""How long one training step takes for a parallel layout, and where the time goes.

``predict(model, cluster, layout)`` adds up, for the slowest pipeline stage of one GPU:

* **compute**: every GEMM of a transformer layer *after* tensor-parallel splitting, each timed on
  a roofline ``max(flops / (eta_gemm * peak * tiles), bytes / (eta_hbm * HBM))`` where ``tiles``
  is cuBLAS's tile quantization (256 x 128 output tiles, NVIDIA's Matrix Multiplication Background
  guide), plus the memory-bound element-wise kernels (LayerNorm, softmax, dropout, GeLU) at
  ``eta_hbm`` of HBM bandwidth, plus a fixed launch cost per kernel.  Backward costs twice the
  forward; full recomputation runs the forward once more.
* **bubble**: the 1F1B / interleaved schedule idles ``(p - 1) / v`` micro-batch slots out of
  ``m + (p - 1) / v`` (Narayanan et al. 2021, Sec. 2.2).
* **tensor-parallel** all-reduces (2 per layer forward, 2 backward, 2 more when recomputing) on the
  link TP rides: NVLink while TP fits in a node, the network once it does not.
* **pipeline point-to-point**: one activation per micro-batch and virtual stage each way.
* **data-parallel** gradient reduction (ZeRO 3 adds parameter all-gathers every micro-batch), of
  which at most the last micro-batch's backward can hide it when overlap is on.
* the **optimizer** step, memory-bound at ~30 bytes per parameter it owns.

The constants are in ``Efficiency`` with where each comes from; none is fitted to a row of the
validation table (``playground.published_layouts``).  Hardware numbers come from
``playground.hardware`` only.  ``python -m playground.step_time --help`` for the CLI, which lives
in ``playground/step_time_cli.py``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from playground import capacity_plan, hardware
from playground.capacity_plan import PlanError

__all__ = ["Model", "Cluster", "Layout", "Efficiency", "EFFICIENCY", "predict", "check_layout", "memory_per_gpu",
           "layer_gemms", "flops_per_step", "allreduce_time", "add_layout_arguments",
           "predict_from_args", "main"]


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
    if layout.recompute not in capacity_plan.RECOMPUTE:
        raise PlanError(f"recompute must be one of {', '.join(capacity_plan.RECOMPUTE)}, got {layout.recompute!r}")
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


def _gemm_time(count, M, N, K, gpu, eff: Efficiency) -> float:
    flops = 2 * count * M * N * K
    tm, tn = eff.tile
    tiles = (M / (tm * math.ceil(M / tm))) * (N / (tn * math.ceil(N / tn)))
    compute = flops / (eff.gemm * tiles * gpu.peak_bf16_flops)
    memory = count * BYTES * (M * K + K * N + M * N) / (eff.hbm * gpu.hbm_bytes_per_s)
    return max(compute, memory) + eff.kernel_s


def _layer_forward(model: Model, layout: Layout, gpu, eff: Efficiency) -> dict:
    """Seconds of one layer's forward for one micro-batch on one GPU: GEMMs and element-wise."""
    b, s, h, t, a = layout.micro_batch, model.seq_len, model.hidden, layout.tp, model.heads
    gemms = layer_gemms(model, b, t)
    if layout.flash_attention:  # one fused kernel: its matmuls at GEMM speed, no s^2 traffic
        attn = [g for g in gemms if g[0] in ("scores", "context")]
        flops = sum(2 * c * M * N * K for _, c, M, N, K in attn)
        gemm_t = sum(_gemm_time(*g[1:], gpu, eff) for g in gemms if g not in attn)
        gemm_t += flops / (eff.gemm * gpu.peak_bf16_flops) + eff.kernel_s
        scores_bytes = 4 * b * s * h / t * BYTES
    else:
        gemm_t = sum(_gemm_time(*g[1:], gpu, eff) for g in gemms)
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


def _tp_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    if layout.tp <= cluster.gpus_per_node:
        return "nvlink", cluster.nvlink_bytes_per_s
    return "network", cluster.network_bytes_per_s


def _dp_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    # ranks are laid out TP fastest, then DP, then PP (Megatron's order)
    if layout.tp * layout.dp <= cluster.gpus_per_node:
        return "nvlink", cluster.nvlink_bytes_per_s
    return "network", cluster.network_bytes_per_s


def _pp_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    if layout.tp * layout.dp * layout.pp <= cluster.gpus_per_node:
        return "nvlink", cluster.nvlink_bytes_per_s
    return "network", cluster.network_bytes_per_s


# ----------------------------------------------------------------------------- memory
def memory_per_gpu(model: Model, layout: Layout) -> dict:
    """Bytes per GPU with the capacity planner's formulas: ZeRO model states of the stage's share
    of parameters, and Korthikanti et al.'s activations per layer for the micro-batches a stage
    holds in flight (1F1B: min(p, m); the first stage is the fullest)."""
    p, t = layout.pp, layout.tp
    stage_layers = math.ceil(model.layers / p)
    states = capacity_plan.model_state_bytes(model.param_count * stage_layers / model.layers / t,
                                             layout.dp, layout.zero_stage)
    per_layer = capacity_plan.activation_bytes_per_layer(model.seq_len, layout.micro_batch, model.hidden,
                                                         model.heads, layout.recompute, t,
                                                         flash_attention=layout.flash_attention)
    in_flight = min(p, layout.micro_batches) * (1 + (p - 1) / (p * layout.vpp) if layout.vpp > 1 else 1)
    acts = stage_layers * in_flight * per_layer
    return {"model_states": states["total"], "activations": acts, "total": states["total"] + acts}


# ----------------------------------------------------------------------------- the prediction
def predict(model: Model, cluster: Cluster, layout: Layout, eff: Efficiency = EFFICIENCY,
            gpus: int | None = None) -> dict:
    """Step time, throughput and memory of ``layout``; see the module docstring for the terms."""
    check_layout(model, layout, gpus)
    gpu, p, v, t, m = cluster.gpu, layout.pp, layout.vpp, layout.tp, layout.micro_batches
    b, s, h = layout.micro_batch, model.seq_len, model.hidden
    stage_layers = math.ceil(model.layers / p)

    fwd = _layer_forward(model, layout, gpu, eff)
    layer_f = fwd["gemm"] + fwd["elementwise"]
    # TP: 2 all-reduces of the b s h activation per layer forward (4 with SP's gather/scatter pairs,
    # the same bytes), 2 in backward, 2 more when the forward is recomputed
    tp_link, tp_bw = _tp_link(layout, cluster)
    tp_one = allreduce_time(b * s * h * BYTES, t, tp_bw, eff)
    rc = {"none": 0.0, "selective": 0.0, "full": 1.0}[layout.recompute]
    attn_core = sum(_gemm_time(*g[1:], gpu, eff) for g in layer_gemms(model, b, t) if g[0] in ("scores", "context"))
    recompute_t = rc * layer_f + (attn_core if layout.recompute == "selective" else 0.0)
    compute_mb = stage_layers * (3 * layer_f + recompute_t)
    tp_mb = stage_layers * tp_one * (2 + 2 + 2 * rc)
    # the logit layer (last stage) and its vocab-parallel GEMM: forward + 2x backward
    logits_t = 3 * _gemm_time(1, b * s, math.ceil(model.vocab / t), h, gpu, eff)
    compute_mb += logits_t  # the last stage carries it, and the slowest stage sets the pace
    # pipeline p2p: each micro-batch crosses each of a GPU's v chunk boundaries forward and back
    pp_link, pp_bw = _pp_link(layout, cluster)
    p2p_bytes = b * s * h * BYTES / (t if layout.scatter_gather else 1)
    p2p_mb = 0.0 if p == 1 else 2 * v * (eff.latency_s + p2p_bytes / (eff.link * pp_bw))
    per_mb = compute_mb + tp_mb + p2p_mb
    slots = m + (p - 1) / v
    pipeline_t = slots * per_mb
    bubble_t = (p - 1) / v * per_mb

    # data parallelism: gradients of the parameters this GPU holds
    params_gpu = model.param_count / (t * p)
    dp_link, dp_bw = _dp_link(layout, cluster)
    grads = params_gpu * BYTES
    dp_t = allreduce_time(grads, layout.dp, dp_bw, eff)  # ZeRO 1/2: reduce-scatter + all-gather, same bytes
    zero3_t = 0.0
    if layout.zero_stage == 3 and layout.dp > 1:  # gather parameters for forward, backward (and recompute)
        gathers = 2 + rc
        zero3_t = m * gathers * allreduce_time(grads, layout.dp, dp_bw, eff) / 2
    backward_last = stage_layers * (2 * layer_f + recompute_t)
    hidden_dp = min(dp_t, backward_last) if layout.overlap_grad_reduce else 0.0
    dp_exposed = dp_t - hidden_dp
    owned = params_gpu / (layout.dp if layout.zero_stage >= 1 else 1)
    optimizer_t = owned * eff.optimizer_bytes / (eff.hbm * gpu.hbm_bytes_per_s)

    step = pipeline_t + dp_exposed + zero3_t + optimizer_t
    hw_flops = flops_per_step(model, layout)
    model_flops = flops_per_step(model, layout, "none")
    n = layout.gpus
    compute_parts = {"gemm": m * stage_layers * 3 * fwd["gemm"],
                     "elementwise": m * stage_layers * 3 * fwd["elementwise"], "logits": m * logits_t}
    useful = m * stage_layers * 3 * layer_f  # compute that is neither bubble nor recompute
    breakdown = {
        "compute": m * (compute_mb - stage_layers * recompute_t),
        "recompute": m * stage_layers * recompute_t,
        "tp_comm": m * tp_mb,
        "pp_p2p": m * p2p_mb,
        "bubble": bubble_t,
        "dp_comm_exposed": dp_exposed,
        "zero3_gathers": zero3_t,
        "optimizer": optimizer_t,
    }
    mem = memory_per_gpu(model, layout)
    return {
        "step_time_s": step,
        "tokens_per_s": layout.global_batch * s / step,
        "tflops_per_gpu": hw_flops / step / n / 1e12,
        "model_tflops_per_gpu": model_flops / step / n / 1e12,
        "mfu": model_flops / step / n / gpu.peak_bf16_flops,
        "hfu": hw_flops / step / n / gpu.peak_bf16_flops,
        "time_breakdown": breakdown,
        "fractions": {k: v_ / step for k, v_ in breakdown.items()},
        "compute_parts": compute_parts,  # the "compute" entry split: layer GEMMs, element-wise, logits
        "bubble_fraction": (p - 1) / (v * m) if p > 1 else 0.0,
        "gemm_efficiency": sum(2 * c * M * N * K for _, c, M, N, K in layer_gemms(model, b, t))
        / (fwd["gemm"] * gpu.peak_bf16_flops),
        "links": {"tp": tp_link, "dp": dp_link, "pp": pp_link},
        "dp_comm_s": dp_t, "dp_comm_hidden_s": hidden_dp, "useful_compute_s": useful,
        "memory": {**mem, "capacity": gpu.hbm_bytes, "fits": mem["total"] <= gpu.hbm_bytes},
        "layout": asdict(layout), "gpus": n, "gpu": gpu.name, "micro_batches": m,
        "stage_layers": stage_layers, "layers": model.layers,
        "params": model.param_count, "flops_per_step": hw_flops, "model_flops_per_step": model_flops,
        "assumptions": {k: getattr(eff, k) for k in ("gemm", "hbm", "link", "kernel_s", "latency_s")},
    }


# ----------------------------------------------------------------------------- CLI (playground/step_time_cli.py)
def add_layout_arguments(parser):
    """Add ``--tp --pp --dp --vpp --micro-batch-size --search`` (and friends) to a planner parser."""
    from playground.step_time_cli import add_layout_arguments as add
    return add(parser)


def predict_from_args(opts) -> dict:
    """The prediction, or with ``--search`` the ranked layouts, for parsed planner + layout flags."""
    from playground.step_time_cli import predict_from_args as run
    return run(opts)


def main(argv=None) -> int:
    from playground.step_time_cli import main as cli_main
    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
