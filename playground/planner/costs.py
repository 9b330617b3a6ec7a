"""The cost terms of the step-time model: what each piece of a training step costs.

One function per cost: the forward GEMMs of a layer on one GPU (``layer_gemms``: dense or MoE,
standard or latent attention, after TP, CP and EP have split them), a GEMM on a roofline with tile
quantization (``gemm_time``), one layer's forward (``layer_forward``), the FLOPs of a step
(``flops_per_step``), the collectives (``allreduce_time``, ``allgather_time``, ``alltoall_time``)
and the link each kind of parallelism rides (``tensor_parallel_link`` ... ``expert_parallel_link``).
``playground.planner.step_time.predict`` adds them up into one step; its docstring says where each
constant and formula comes from.  ``Model`` (``architecture``), ``Cluster``, ``Layout`` and
``Efficiency`` (``layout``) and ``memory_per_gpu`` (``memory``) are re-exported for convenience.
"""

from __future__ import annotations

import math

from playground.planner.architecture import Model
from playground.planner.errors import PlanError
from playground.planner.gemms import ATTENTION_CORE, block_matmuls, layer_gemms, per_op_recomputed
from playground.planner.layout import BYTES, EFFICIENCY, Cluster, Efficiency, Layout, check_layout
from playground.planner.memory import memory_per_gpu

__all__ = ["Model", "Cluster", "Layout", "Efficiency", "EFFICIENCY", "BYTES", "check_layout", "layer_gemms",
           "gemm_time", "layer_forward", "flops_per_step", "allreduce_time", "allgather_time", "alltoall_time",
           "ring_network_bandwidth", "tensor_parallel_link", "context_parallel_link", "data_parallel_link", "shard_link", "replica_link",
           "expert_parallel_link",
           "pipeline_link", "block_matmuls", "per_op_recomputed", "fp8_cast_bytes", "eager_extra_bytes", "overlapped", "attention_efficiency",
           "dispatch_time", "memory_per_gpu", "peak_flops", "causal_executed"]

def peak_flops(gpu, dtype: str = "bf16") -> float:
    """Dense tensor-core peak for ``dtype``; FP8 on a GPU without it is an error."""
    if dtype == "fp8":
        if not gpu.peak_fp8_flops:
            raise PlanError(f"the {gpu.name} has no FP8 tensor cores; use --dtype bf16")
        return gpu.peak_fp8_flops
    return gpu.peak_bf16_flops


def gemm_time(count, M, N, K, gpu, eff: Efficiency, dtype: str = "bf16", out_bytes: float = BYTES) -> float:
    """``count`` GEMMs of (M x K) by (K x N) on the roofline of eq-gemm; ``out_bytes`` per output
    element moved (8 when it is accumulated into an fp32 gradient: read and written)."""
    flops = 2 * count * M * N * K
    tm, tn = eff.tile
    tiles = (M / (tm * math.ceil(M / tm))) * (N / (tn * math.ceil(N / tn)))
    compute = flops / ((eff.fp8_gemm if dtype == "fp8" else eff.gemm) * tiles * peak_flops(gpu, dtype))
    memory = count * (BYTES * (M * K + K * N) + out_bytes * M * N) / (eff.hbm * gpu.hbm_bytes_per_s)
    return max(compute, memory) + eff.kernel_s


def attention_efficiency(gpu, layout: Layout, eff: Efficiency = EFFICIENCY) -> float:
    """Fraction of the dense peak a fused attention kernel reaches on the FLOPs it executes:
    FlashAttention-3 / cuDNN (``attention_kernel="fa3"``) on Hopper and later, FlashAttention-2 on
    Hopper at its lower rate, FlashAttention-2 elsewhere (the fastest kernel before Hopper), or the
    first FlashAttention and its Triton port (``"fa1"``, 2022-23's)."""
    arch = getattr(gpu, "architecture", "")
    if layout.attention_kernel == "fa1":   # FlashAttention-1 class; on Hopper slowed as FA2 is there
        return eff.attention_fa1 * (eff.attention_fa2_hopper / eff.attention_fa2 if arch == "hopper" else 1)
    if arch in ("hopper", "blackwell"):
        rate = eff.attention_fa3 if layout.attention_kernel == "fa3" else \
            (eff.attention_fa2_hopper if arch == "hopper" else eff.attention_fa2)
    else:
        rate = eff.attention_fa2
    return rate


def causal_executed(seq_len: int, keys: int, block: int = 128) -> float:
    """Share of the s x keys scores a causal fused kernel executes: each query sees at most
    ``keys`` earlier tokens (on average keys (1 - keys / 2s)), and the ``block`` x ``block`` tiles
    on the band's edge run whole.  The whole sequence (keys = s): a half, plus the diagonal."""
    return min(1.0, 1 - keys / (2 * seq_len) + block / 2 / keys)


def layer_forward(model: Model, layout: Layout, gpu, eff: Efficiency, moe: bool = False, local: bool = False) -> dict:
    """Seconds of one layer's forward for one micro-batch on one GPU: GEMMs (FP8 when the layout
    says so; the attention core stays bf16), the attention core alone, and the element-wise kernels.
    ``local``: a sliding-window layer, its attention over the window only."""
    b, s, h, t, a = layout.micro_batch, model.seq_len, model.hidden, layout.tp, model.heads
    T = b * s / layout.cp
    keys = model.attended_keys(local)
    gemms = layer_gemms(model, b, t, layout.cp, layout.ep, moe, layout.expert_tp_degree, local)
    core = [g for g in gemms if g[0] in ATTENTION_CORE]
    # the busiest EP rank sets the pace of the routed experts: moe_imbalance x the mean's tokens
    pace = lambda name: layout.moe_imbalance if name.startswith("experts") else 1  # noqa: E731
    rest = sum(gemm_time(*g[1:], gpu, eff, layout.dtype) * pace(g[0]) for g in gemms if g[0] not in ATTENTION_CORE)
    # backward of each: the input gradient (M x N by N x K), and the weight gradient (K x M by M x N)
    # accumulated into its fp32 main gradient, micro-batch after micro-batch
    rest_backward = sum((gemm_time(c, M, K, N, gpu, eff, layout.dtype)
                         + gemm_time(c, K, N, M, gpu, eff, layout.dtype, out_bytes=8)) * pace(name)
                        for name, c, M, N, K in gemms if name not in ATTENTION_CORE)
    cast = fp8_cast_bytes(model, layout, moe) / 3 if layout.dtype == "fp8" else 0.0  # a third per pass
    if layout.flash_attention:  # one fused kernel: the causal half it executes, at its kernel's rate; no s^2 traffic
        executed = causal_executed(s, keys)  # 128 x 128 blocks: the diagonal ones run whole
        attn_t = executed * sum(2 * c * M * N * K for _, c, M, N, K in core) \
            / (attention_efficiency(gpu, layout, eff) * gpu.peak_bf16_flops) + eff.kernel_s
        scores_bytes = 4 * T * h / t * BYTES
    else:
        attn_t = sum(gemm_time(*g[1:], gpu, eff) for g in core)
        # softmax read+write (4), dropout read+write+mask (5) per score
        scores_bytes = (9 if layout.dropout else 4) * a * T * keys / t
    # 2 norms (4 T h each) and 2 residual adds (3 T h each; 7 with bias-dropout-add)
    replicated = (22 if layout.dropout else 14) * T * h
    if layout.sequence_parallel:
        replicated /= t
    if moe:
        width = model.top_k * model.expert_width + model.shared_width
        replicated += 4 * model.top_k * T * h / t          # permute and unpermute the dispatched copies
    else:
        width = model.ffn_width
    mlp_act = 2 * 2 * T * width / t * (1.5 if model.gated_mlp else 1)  # GeLU / SwiGLU read + write
    if layout.kernels == "eager":
        replicated += eager_extra_bytes(model, T, layout.tp if layout.sequence_parallel else 1)
        mlp_act += 4 * T * width / t if model.gated_mlp else 0            # silu, then the product apart
        replicated += 20 * T * model.heads * model.head_size * (1 + model.kv_head_count / model.heads) / t \
            if not model.position_embeddings else 0                       # RoPE on Q and K
    elementwise = (replicated + mlp_act + scores_bytes + cast) / (eff.hbm * gpu.hbm_bytes_per_s) + 8 * eff.kernel_s
    return {"gemm": rest + attn_t, "attention": attn_t, "elementwise": elementwise, "gemm_backward": rest_backward}


def fp8_cast_bytes(model: Model, layout: Layout, moe: bool = False) -> float:
    """HBM bytes one layer's FP8 casts move per micro-batch, forward and backward together.

    Every operand of an FP8 GEMM is scaled and cast from bf16: its absolute maximum read (2 B per
    element, the current/tensor-wise scaling of Megatron-Bridge's FP8-CS and torchtitan's float8),
    read again and written in FP8 (2 + 1 B), and written once more transposed for the backward
    GEMM that needs the other major order (1 B): 6 B per element.  Forward casts each input
    activation (M x K) and each weight (K x N, every micro-batch); backward each output gradient
    (M x N).  The attention core and the logits stay in bf16 and cast nothing."""
    per_element = 2 + 2 + 1 + 1
    return per_element * sum(c * (M * K + K * N + M * N)
                             for name, c, M, N, K in layer_gemms(model, layout.micro_batch, layout.tp, layout.cp,
                                                                 layout.ep, moe, layout.expert_tp_degree)
                             if name not in ATTENTION_CORE)


def eager_extra_bytes(model: Model, tokens: float, split: int = 1) -> float:
    """HBM bytes an eager (uncompiled, unfused) block's two RMSNorms move beyond a fused kernel's.

    PyTorch's composite RMSNorm runs as separate kernels, each reading and writing the whole
    activation: upcast to fp32 (2 + 4 B per element), square (4 + 4), mean (4), scale (4 + 4),
    weight (4 + 4), downcast (4 + 2): 40 B against a fused kernel's 4.  LayerNorm has one native
    kernel and costs nothing extra.  (``layer_forward`` adds the other eager extras: SwiGLU's silu
    and product apart, +4 B per MLP element, and RoPE on Q and K, 20 B per element: upcast, complex
    multiply, downcast.)"""
    if model.norm != "rmsnorm":
        return 0.0
    return 2 * (40 - 4) * tokens * model.hidden / split


def _layer_flops(model: Model, moe: bool) -> tuple[float, float]:
    """(forward FLOPs of one layer for one sequence, of which the attention core), averaged over
    the sliding-window layers and the others."""
    local = model.local_layers / model.layers
    out = [0.0, 0.0]
    for is_local, share in ((False, 1 - local), (True, local)):
        if share:
            gemms = layer_gemms(model, 1, 1, moe=moe, local=is_local)
            out[0] += share * sum(2 * c * M * N * K for _, c, M, N, K in gemms)
            out[1] += share * sum(2 * c * M * N * K for n, c, M, N, K in gemms if n in ATTENTION_CORE)
    return out[0], out[1]


def flops_per_step(model: Model, layout: Layout, recompute: str | None = None) -> float:
    """FLOPs of one step summed over GPUs, counted from ``layer_gemms`` (for a GPT with a 4h MLP
    this is Megatron's Eq. 3).  ``recompute`` defaults to the layout's (hardware FLOPs); pass
    "none" for model FLOPs."""
    recompute = layout.recompute if recompute is None else recompute
    passes = {"none": 3, "selective": 3, "op": 3, "full": 4}[recompute]
    total = 0.0
    for moe, count in ((False, model.layers - model.moe_layers), (True, model.moe_layers)):
        if count:
            fwd, core = _layer_flops(model, moe)
            again = core if recompute == "selective" else \
                sum(2 * c * M * N * K for _, c, M, N, K in per_op_recomputed(model, 1, 1, moe=moe)) \
                if recompute == "op" else 0
            total += count * (passes * fwd + again)
    logits = 2 * model.seq_len * model.hidden * model.vocab * 3
    return layout.global_batch * (total + logits)


# ----------------------------------------------------------------------------- communication
def allreduce_time(size_bytes: float, n: int, bytes_per_s: float, eff: Efficiency = EFFICIENCY) -> float:
    """Ring all-reduce: 2(n-1) steps of latency, 2(n-1)/n of the bytes over the slowest link."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * eff.latency_s + 2 * (n - 1) / n * size_bytes / (eff.link * bytes_per_s)


def allgather_time(size_bytes: float, n: int, bytes_per_s: float, eff: Efficiency = EFFICIENCY) -> float:
    """Ring all-gather (or reduce-scatter) of ``size_bytes`` in all: half an all-reduce."""
    return allreduce_time(size_bytes, n, bytes_per_s, eff) / 2


def alltoall_time(nvlink_bytes: float, network_bytes: float, n: int, cluster: Cluster,
                  eff: Efficiency = EFFICIENCY) -> float:
    """All-to-all over n ranks in which each GPU sends ``nvlink_bytes`` to ranks in its node and
    ``network_bytes`` to ranks beyond it: the two shares move at once, the slower sets the time."""
    if n <= 1:
        return 0.0
    nvlink = nvlink_bytes / (eff.link * cluster.nvlink_bytes_per_s)
    network = network_bytes / (eff.link * cluster.network_bytes_per_s)
    return (n - 1) * eff.latency_s + max(nvlink, network)


def overlapped(comm_s: float, compute_s: float, gpu, eff: Efficiency = EFFICIENCY) -> float:
    """Seconds a collective overlapped with compute adds to the step: what outlasts the compute, plus
    the compute's slowdown while both run, for NCCL's kernels hold ``eff.comm_sms`` of the GPU's SMs
    (compute on the rest runs at (S - c) / S of its rate).  A GPU without an SM count: no slowdown."""
    hidden = min(comm_s, compute_s)
    share = eff.comm_sms / (gpu.sms - eff.comm_sms) if gpu.sms and gpu.sms > eff.comm_sms else 0.0
    return max(0.0, comm_s - compute_s) + hidden * share


def _hit(groups: int, experts: int, k: int) -> float:
    """Expected number of the ``groups`` equal groups of experts a token's k distinct experts fall in."""
    per = experts / groups
    miss = math.comb(experts - round(per), k) / math.comb(experts, k) if experts - per >= k else 0.0
    return groups * (1 - miss)


def _reached(model: Model, parts: int) -> float:
    """Expected number of the EP group's ``parts`` equal parts (its nodes, or its GPUs) a token's
    experts fall in.  Group-limited routing (DeepSeek-V2/V3's ``n_group`` / ``topk_group``) draws a
    token's experts from ``groups_per_token`` of ``expert_groups`` groups; when the groups lie whole
    on the parts (V3: one group a node), the token reaches only the parts of its groups."""
    E, k, g, chosen = model.experts, model.top_k, model.expert_groups, model.groups_per_token
    if chosen < g and parts % g == 0:
        return _hit(chosen * (parts // g), E * chosen // g, k)
    return _hit(parts, E, k)


def dispatch_time(model: Model, layout: Layout, cluster: Cluster, tokens: float, eff: Efficiency = EFFICIENCY,
                  element_bytes: float = BYTES) -> float:
    """One dispatch (or combine) of ``tokens`` tokens to their k experts over the EP group.

    Megatron-Core's all-to-all dispatcher (``ep_dispatch="alltoall"``) sends a copy per (token,
    expert) pair.  DeepEP (``"deepep"``, DeepSeek-V3 Sec. 3.2.2) sends a token once to each node
    that holds one of its experts, over the network, and forwards it over NVLink to each GPU there
    that does: the network carries the remote nodes a token hits, NVLink the GPUs it hits (fewer
    under group-limited routing: ``_reached``).  Both links move at once (``alltoall_time``)."""
    n, k, E = layout.ep, model.top_k, model.experts
    _, inside = expert_parallel_link(layout, cluster)
    if layout.ep_dispatch == "deepep":
        nodes = max(1, n // inside)
        over_network = _reached(model, nodes) * (nodes - 1) / nodes
        over_nvlink = _reached(model, n) * (n - 1) / n
    else:
        over_network, over_nvlink = k * (n - inside) / n, k * (inside - 1) / n
    per_copy = tokens * model.hidden * element_bytes * layout.moe_imbalance
    return alltoall_time(per_copy * over_nvlink, per_copy * over_network, n, cluster, eff)


# Ranks are numbered TP fastest, then CP, then DP, then PP (Megatron-Core's order), so every group of
# one kind spans a block of consecutive ranks: ``span`` of them (TP: t; CP: t c; DP: t c d;
# PP: all).  All those blocks stay inside nodes only when the span divides the GPUs per node
# (t = 3 on 8-GPU nodes puts ranks 6-8 in one group, across two nodes) or the job fits in one node.
def _link(span: int, layout: Layout, cluster: Cluster) -> tuple[str, float]:
    if layout.gpus <= cluster.gpus_per_node or cluster.gpus_per_node % span == 0:
        return "nvlink", cluster.nvlink_bytes_per_s
    return "network", cluster.network_bytes_per_s


def ring_network_bandwidth(nvlink_bytes_per_s: float, network_bytes_per_s: float, per_node: int = 1) -> float:
    """Bus bandwidth of a ring collective across nodes whose groups hold ``per_node`` GPUs of each
    node: their NICs share the crossing (NCCL runs a ring per NIC), up to NVLink's rate."""
    return min(nvlink_bytes_per_s, max(1, per_node) * network_bytes_per_s)


def _ring_link(span: int, stride: int, layout: Layout, cluster: Cluster) -> tuple[str, float]:
    """The link of a ring collective (all-reduce, all-gather, reduce-scatter) over a group whose
    members lie ``stride`` ranks apart in blocks of ``span``.  Across nodes, the k members a node
    holds share the crossing over their k NICs (NCCL runs one ring per NIC): the bus bandwidth is
    k NICs' worth, at most NVLink's.  nccl-tests: a DGX-1's 4 x 100 Gb/s NICs give an all-reduce
    bus bandwidth of 48 GB/s (NVIDIA/nccl-tests#29), 3 nodes of 8 A100s with 4 x 200 Gb/s 85-96 GB/s
    of the 100 GB/s per node (#119); one GPU per node (TP = 8 under DP) rides its own NIC only."""
    name, bw = _link(span, layout, cluster)
    if name == "nvlink":
        return name, bw
    per_node = 1 if stride >= cluster.gpus_per_node else min(span // stride, cluster.gpus_per_node // stride)
    return name, ring_network_bandwidth(cluster.nvlink_bytes_per_s, bw, per_node)


def tensor_parallel_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    """TP's all-reduces: small messages on the critical path, latency-bound across nodes.  Charged
    one NIC per GPU there, not the ring over every NIC: Narayanan et al. measured throughput
    collapsing when TP leaves the node (their Fig. 13), which the NICs' aggregate would not predict."""
    return _link(layout.tp, layout, cluster)


def context_parallel_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    """Ring attention passes blocks neighbour to neighbour: the slowest hop, one GPU's NIC."""
    return _link(layout.tp * layout.cp, layout, cluster)


def data_parallel_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    """The gradient all-reduce over DP x CP: members t ranks apart."""
    return _ring_link(layout.tp * layout.cp * layout.dp, layout.tp, layout, cluster)


def shard_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    """The link ZeRO-3's gathers and reduce-scatters ride: the whole DP x CP group's, or with HSDP
    its shard group's (t x g consecutive ranks: NVLink when a node holds them)."""
    if layout.shard_group:
        return _ring_link(layout.tp * layout.shard_group, layout.tp, layout, cluster)
    return data_parallel_link(layout, cluster)


def replica_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    """HSDP's all-reduce across replicas: members a shard group (t x g ranks) apart."""
    stride = layout.tp * (layout.shard_group or layout.dp * layout.cp)
    return _ring_link(layout.tp * layout.cp * layout.dp, stride, layout, cluster)


def expert_parallel_link(layout: Layout, cluster: Cluster) -> tuple[str, int]:
    """The link name and how many of an EP group's ranks share a node.  Megatron-Core orders expert
    ranks ETP fastest, then EP, then expert DP, so an EP group's ranks lie ETP apart."""
    inside = max(1, min(layout.ep, cluster.gpus_per_node // layout.expert_tp_degree))
    return ("nvlink" if inside >= layout.ep else "network"), inside


def pipeline_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    return _link(layout.gpus, layout, cluster)
