"""The communication terms of the step-time model: the collectives, and the link each kind of parallelism rides.

Ring all-reduce, all-gather and reduce-scatter (``allreduce_time``, ``allgather_time``), an all-to-all
whose NVLink and network shares move at once (``alltoall_time``), a collective overlapped with compute
and the SMs it takes (``overlapped``), an MoE layer's dispatch (``dispatch_time``: Megatron's copy per
token and expert, or DeepEP's once per node and GPU, fewer under group-limited routing), and the link
of each axis (``tensor_parallel_link`` ... ``pipeline_link``), rings across nodes crossing on every NIC
a group holds (``ring_network_bandwidth``); what context parallelism (``context_parallel_time``: ring,
all-gather or Ulysses) and FSDP (``fsdp_exposed_time``: prefetched gathers and reduce-scatters) add
to a layer.  ``playground.planner.costs`` re-exports them.
"""

from __future__ import annotations

import math

from playground.planner.architecture import Model
from playground.planner.layout import BYTES, EFFICIENCY, Cluster, Efficiency, Layout

__all__ = ["allreduce_time", "allgather_time", "alltoall_time", "overlapped", "pass_windows", "dispatch_time", "routing_map_gather_time", "ring_passes", "context_parallel_time", "mixer_cp_time", "fsdp_exposed_time", "ring_network_bandwidth", "ring_crossing", "tensor_parallel_link", "context_parallel_link", "data_parallel_link", "expert_data_parallel_link", "shard_link", "replica_link", "expert_parallel_link", "pipeline_link"]


def allreduce_time(size_bytes: float, n: int, bytes_per_s: float, eff: Efficiency = EFFICIENCY,
                   link: str = "nvlink") -> float:
    """Ring all-reduce: 2(n-1) steps of latency, 2(n-1)/n of the bytes over the slowest link, at the
    share of its rate NCCL reaches there (``Efficiency.link_rate``: NVLink's, or across nodes the NICs')."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * eff.latency_s + 2 * (n - 1) / n * size_bytes / (eff.link_rate(link) * bytes_per_s)


def allgather_time(size_bytes: float, n: int, bytes_per_s: float, eff: Efficiency = EFFICIENCY,
                   link: str = "nvlink") -> float:
    """Ring all-gather (or reduce-scatter) of ``size_bytes`` in all: half an all-reduce."""
    return allreduce_time(size_bytes, n, bytes_per_s, eff, link) / 2


def alltoall_time(nvlink_bytes: float, network_bytes: float, n: int, cluster: Cluster,
                  eff: Efficiency = EFFICIENCY) -> float:
    """All-to-all over n ranks in which each GPU sends ``nvlink_bytes`` to ranks in its node and
    ``network_bytes`` to ranks beyond it: the two shares move at once, the slower sets the time."""
    if n <= 1:
        return 0.0
    nvlink = nvlink_bytes / (eff.link * cluster.nvlink_bytes_per_s)
    network = network_bytes / (eff.network * cluster.network_bytes_per_s)
    return (n - 1) * eff.latency_s + max(nvlink, network)


def overlapped(comm_s: float, compute_s: float, gpu, eff: Efficiency = EFFICIENCY, hides: float = 1.0) -> float:
    """Seconds a collective overlapped with compute adds to the step: what outlasts the compute, plus
    the compute's slowdown while both run, for NCCL's kernels hold ``eff.comm_sms`` of the GPU's SMs
    (compute on the rest runs at (S - c) / S of its rate).  A GPU without an SM count: no slowdown.
    ``hides``: the share of the covered time the overlap really takes off (1: all of it)."""
    hidden = min(comm_s, compute_s) * hides
    share = eff.comm_sms / (gpu.sms - eff.comm_sms) if gpu.sms and gpu.sms > eff.comm_sms else 0.0
    return comm_s - hidden + hidden * share


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
    under group-limited routing: ``_reached``); HybridEP (``"hybridep"``) routes the same way.  Both
    links move at once (``alltoall_time``)."""
    n, k, E = layout.ep, model.top_k, model.experts
    _, inside = expert_parallel_link(layout, cluster)
    if layout.ep_dispatch in ("deepep", "hybridep"):
        nodes = max(1, n // inside)
        over_network = _reached(model, nodes) * (nodes - 1) / nodes
        over_nvlink = _reached(model, n) * (n - 1) / n
    else:
        over_network, over_nvlink = k * (n - inside) / n, k * (inside - 1) / n
    per_copy = tokens * model.hidden * element_bytes * layout.moe_imbalance
    return alltoall_time(per_copy * over_nvlink, per_copy * over_network, n, cluster, eff)


def routing_map_gather_time(model: Model, layout: Layout, cluster: Cluster, tokens: float,
                            eff: Efficiency = EFFICIENCY) -> float:
    """HybridEP's metadata step before each dispatch (``ep_dispatch="hybridep"``): every rank's routing map, a
    bool per token and expert, all-gathered over the EP group with NCCL, then scanned once on each rank (DeepEP's
    hybrid-ep branch, ``HybridEPBuffer::metadata_preprocessing``: ``Executor::allgather_routing_map`` calls
    ``all_gather_into_tensor`` unless its custom NVLink gather is enabled, which Megatron-Core does not).  None
    for the other dispatchers."""
    if layout.ep_dispatch != "hybridep" or layout.ep <= 1:
        return 0.0
    etp, n = layout.expert_tp_degree, layout.ep
    link, bw = _ring_link(etp * n, etp, layout, cluster, eff)
    gathered = n * tokens * model.experts
    return allgather_time(gathered, n, bw, eff, link) + gathered / (eff.hbm * cluster.gpu.hbm_bytes_per_s) \
        + eff.kernel_s


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


def ring_crossing(nvlink_bytes_per_s: float, network_bytes_per_s: float, per_node: int = 1,
                  eff: Efficiency = EFFICIENCY) -> tuple[str, float]:
    """The link that binds a ring collective across nodes, and its line rate: the ``per_node`` NICs
    at the share NCCL reaches of them (``eff.network``), or NVLink at its own (``eff.link``), whichever
    moves less.  An H100 node's eight 400 Gb/s NICs (0.94 x 400 GB/s) outrun its NVLink (0.80 x 450):
    a ring over whole nodes runs at NVLink's pace."""
    nics = max(1, per_node) * network_bytes_per_s
    if nics * eff.network >= nvlink_bytes_per_s * eff.link:
        return "nvlink", nvlink_bytes_per_s
    return "network", nics


def _ring_link(span: int, stride: int, layout: Layout, cluster: Cluster,
               eff: Efficiency = EFFICIENCY) -> tuple[str, float]:
    """The link of a ring collective (all-reduce, all-gather, reduce-scatter) over a group whose
    members lie ``stride`` ranks apart in blocks of ``span``.  Across nodes, the k members a node
    holds share the crossing over their k NICs (NCCL runs one ring per NIC): the bus bandwidth is
    k NICs' worth, unless NVLink binds first (``ring_crossing``).  nccl-tests: a DGX-1's 4 x 100 Gb/s
    NICs give an all-reduce bus bandwidth of 48 GB/s (NVIDIA/nccl-tests#29), 3 nodes of 8 A100s with
    4 x 200 Gb/s 85-96 GB/s of the 100 GB/s per node (#119); one GPU per node (TP = 8 under DP) rides
    its own NIC only.  Which link binds is decided at ``eff``'s rates (those the prediction runs at)."""
    name, bw = _link(span, layout, cluster)
    if name == "nvlink":
        return name, bw
    per_node = 1 if stride >= cluster.gpus_per_node else min(span // stride, cluster.gpus_per_node // stride)
    return ring_crossing(cluster.nvlink_bytes_per_s, bw, per_node, eff)


def tensor_parallel_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    """TP's all-reduces: small messages on the critical path, latency-bound across nodes.  Charged
    one NIC per GPU there, not the ring over every NIC: Narayanan et al. measured throughput
    collapsing when TP leaves the node (their Fig. 13), which the NICs' aggregate would not predict."""
    return _link(layout.tp, layout, cluster)


def context_parallel_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    """Ring attention passes blocks neighbour to neighbour: the slowest hop, one GPU's NIC."""
    return _link(layout.tp * layout.cp, layout, cluster)


def data_parallel_link(layout: Layout, cluster: Cluster, eff: Efficiency = EFFICIENCY) -> tuple[str, float]:
    """The gradient all-reduce over DP x CP: members t ranks apart."""
    return _ring_link(layout.tp * layout.cp * layout.dp, layout.tp, layout, cluster, eff)


def expert_data_parallel_link(layout: Layout, cluster: Cluster, eff: Efficiency = EFFICIENCY) -> tuple[str, float]:
    """The expert gradients' reduction over expert DP (the ranks holding the same experts).  Expert ranks
    are ordered ETP fastest, then EP, then expert DP (Megatron-Core's ``parallel_state.py``: order
    ``tp-cp-ep-dp-pp``, CP 1 for experts; torchtitan's expert mesh ``pp, dp_replicate, efsdp, ep`` puts EP
    innermost too), so its members lie ETP x EP ranks apart: when EP fills a node, one per node, each
    group on its own NIC, not a whole node's."""
    return _ring_link(layout.tp * layout.cp * layout.dp, layout.expert_tp_degree * layout.ep, layout, cluster, eff)


def shard_link(layout: Layout, cluster: Cluster, eff: Efficiency = EFFICIENCY) -> tuple[str, float]:
    """The link ZeRO-3's gathers and reduce-scatters ride: the whole DP x CP group's, or with HSDP
    its shard group's (t x g consecutive ranks: NVLink when a node holds them)."""
    if layout.shard_group:
        return _ring_link(layout.tp * layout.shard_group, layout.tp, layout, cluster, eff)
    return data_parallel_link(layout, cluster, eff)


def replica_link(layout: Layout, cluster: Cluster, eff: Efficiency = EFFICIENCY) -> tuple[str, float]:
    """HSDP's all-reduce across replicas: members a shard group (t x g ranks) apart."""
    stride = layout.tp * (layout.shard_group or layout.dp * layout.cp)
    return _ring_link(layout.tp * layout.cp * layout.dp, stride, layout, cluster, eff)


def expert_parallel_link(layout: Layout, cluster: Cluster) -> tuple[str, int]:
    """The link name and how many of an EP group's ranks share a node.  Megatron-Core orders expert
    ranks ETP fastest, then EP, then expert DP, so an EP group's ranks lie ETP apart."""
    inside = max(1, min(layout.ep, cluster.gpus_per_node // layout.expert_tp_degree))
    return ("nvlink" if inside >= layout.ep else "network"), inside


def pipeline_link(layout: Layout, cluster: Cluster) -> tuple[str, float]:
    return _link(layout.gpus, layout, cluster)


def ring_passes(model: Model, layout: Layout, local: bool = False) -> int:
    """Blocks a CP ring passes on beyond its own: c - 1, or for a sliding-window layer only as many as
    its window reaches back."""
    c = layout.cp
    return c - 1 if not local else min(c - 1, -(-model.attended_keys(True) // (model.seq_len // c)))


def context_parallel_time(model: Model, cluster: Cluster, layout: Layout, eff: Efficiency, attention: float,
                          T: float, rc: float, local: bool) -> float:
    """Seconds CP's communication adds to one layer and micro-batch (forward, recomputed forward and
    backward).  Ring: c - 1 passes of this rank's K/V block, each behind one block of attention, and
    K/V with their gradients backward (a sliding-window layer passes only the blocks its window
    reaches).  All-gather (Llama 3, Sec. 3.3.2): the whole sequence's K/V gathered before attention
    and its gradients reduce-scattered after, exposed.  Ulysses: Q, K and V all-to-all from sequence
    to head shards and the output back, the same four backward, exposed."""
    c, t, gpu = layout.cp, layout.tp, cluster.gpu
    link, bw = context_parallel_link(layout, cluster)
    rate = eff.link_rate(link) * bw
    kv = model.materialized_kv_heads
    block = T * kv * (model.head_size + model.value_head_size) * BYTES / t   # this rank's K and V
    if layout.cp_method == "allgather":
        gather = allgather_time(block * c, c, bw, eff, link)
        return (2 + rc) * gather
    if layout.cp_method == "ulysses":
        q_out = T * model.heads * (model.head_size + model.value_head_size) * BYTES / t
        moved = (c - 1) / c * (block + q_out) / rate
        return (2 + rc) * (4 * (c - 1) * eff.latency_s + moved)
    one = eff.latency_s + block / rate
    passes = ring_passes(model, layout, local)
    step = attention / (passes + 1)
    return passes * ((1 + rc) * overlapped(one, step, gpu, eff) + overlapped(2 * one, 2 * step, gpu, eff))


def mixer_cp_time(model: Model, cluster: Cluster, layout: Layout, eff: Efficiency, T: float, rc: float) -> float:
    """Seconds Megatron-Core's head-parallel context parallelism adds to one recurrent mixer and micro-batch: its
    inputs all-to-all to head shards and its output back (``cp_widths``; Mamba-2's five inputs apart, Gated
    DeltaNet's at once: ``cp_calls``), forward, recomputed forward and their gradients backward, exposed (the scan waits
    for them), as Ulysses' are."""
    c = layout.cp
    link, bw = context_parallel_link(layout, cluster)
    sent, back = model.ssm.cp_widths(layout.tp, c)
    moved = (c - 1) / c * T * (sent + back) * BYTES / (eff.link_rate(link) * bw)
    return (2 + rc) * (model.ssm.cp_calls * (c - 1) * eff.latency_s + moved)


def pass_windows(cost: dict) -> tuple[float, float]:
    """Seconds of one layer's forward and of its backward (recompute included) that another stream's
    transfer can hide behind: their compute, and the layer's own TP, CP and EP collectives, which run
    on other links (each pass taking a share of them in proportion to its compute)."""
    forward, backward = cost["forward"], cost["backward"] + cost["recompute"]
    comm = cost.get("tp", 0.0) + cost.get("cp", 0.0) + cost.get("ep", 0.0)
    if not comm or not forward + backward:
        return forward, backward
    return forward + comm * forward / (forward + backward), backward + comm * backward / (forward + backward)


def fsdp_exposed_time(cost: dict, unit_bytes: float, n: int, bw: float, gpu, eff: Efficiency, layout: Layout,
                      tensors: int = 1, link: str = "nvlink", experts: tuple | None = None) -> float:
    """FSDP per layer and micro-batch: the gather before forward, and the gather + reduce-scatter in
    backward, each prefetched behind the neighbouring layer's compute.  FSDP2 with
    ``reshard_after_forward=False`` gathers once per step and keeps the weights (the forward gather
    amortized over the micro-batches, none in backward); float8 all-gathers move 1 byte a weight, fp32
    ones (``fp32_gather``: weights kept in fp32, autocast casting them where used) 4, an
    fp32 reduce-scatter (``grad_reduce="fp32"``) 4 bytes a gradient.

    ``fsdp_gather="tensor"`` is early DeepSpeed ZeRO-3 (its ``_allgather_param``): each of the layer's
    ``tensors`` parameter tensors is its own all-gather, a ring's n - 1 latency steps each, issued
    after a ``torch.cuda.synchronize()`` and so not hidden.  Its gathers hang on each module's forward
    pre-hook and are freed by its post-hook, and a recomputed forward fires those hooks again (DeepSpeed
    issue #4784), so a recomputed layer is gathered three times: forward, recomputed forward, backward.
    The reduce-scatter hides behind backward only with ``overlap_grad_reduce`` (DeepSpeed's
    ``overlap_comm``, off by default then).

    ``experts``: ``(bytes, n, bw, link)`` of the layer's routed experts when they are sharded apart from
    the rest, over the expert-DP group (FSDP with expert parallelism): gathered and reduce-scattered
    there, after the rest, on the same stream."""
    groups = [(unit_bytes, n, bw, link)] + ([experts] if experts else [])
    weight = 0.5 if layout.fp8_gather else 2 if layout.fp32_gather else 1
    gather = sum(allgather_time(b * weight, g, w, eff, name) for b, g, w, name in groups)
    scatter = sum(allgather_time(b * layout.grad_bytes / BYTES, g, w, eff, name) for b, g, w, name in groups)
    forward, backward = pass_windows(cost)
    if layout.fsdp_gather == "tensor":
        gather += (tensors - 1) * (n - 1) * eff.latency_s if n > 1 else 0.0
        gathers = 2 + layout.full_recompute_share  # forward, the recomputed forward, backward
        return gathers * gather + (overlapped(scatter, backward, gpu, eff) if layout.overlap_grad_reduce else scatter)
    if not layout.reshard_after_forward:
        return overlapped(gather, forward, gpu, eff) / layout.micro_batches + overlapped(scatter, backward, gpu, eff)
    return overlapped(gather, forward, gpu, eff) + overlapped(gather + scatter, backward, gpu, eff)
