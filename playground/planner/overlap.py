"""When communication hides: the threshold, per axis, above which a collective fits under compute.

A collective hides when it can run while the GPU computes something that does not wait for it, and
takes no longer than that computation.  For each axis the two sides scale with the same model size,
so the size cancels and the threshold is a property of the hardware alone, a compute-to-bandwidth
ratio ``F / W`` (FLOPs per byte), times a few small factors:

- **DP** (``data_parallel_tokens``): the ring all-reduce of a step's gradients, ``2 (n-1)/n q Psi``
  bytes, against the backward's ``4 Psi`` FLOPs per token: it hides once a GPU processes
  ``(n-1)/n * q F / (2 W)`` tokens per optimizer step (all its micro-batches together).
- **FSDP / ZeRO-3** (``fsdp_tokens``): one unit's all-gather of ``(n-1)/n q Psi_u`` bytes against the
  forward's ``2 Psi_u`` FLOPs per token, and in backward a gather plus a reduce-scatter against
  ``4 Psi_u``: the same ``(n-1)/n * q F / (2 W)``, but per *micro-batch*, since the parameters are
  gathered again for every micro-batch (unless they stay gathered: ``reshard_after_forward=False``).
- **TP** (``tensor_parallel_hidden``): two all-reduces of ``b s h q`` bytes per layer forward against
  ``24 b s h^2 / t`` FLOPs: the tokens cancel and the bound is on the hidden size,
  ``h >= (t-1) q F / (6 W)``; below it TP's communication outlasts the GEMMs it could overlap.

Across nodes, ``W`` is one NIC's rate when the group holds one GPU of each node (DP under TP = 8);
a group that holds ``per_node`` GPUs of every node (FSDP over whole nodes) shares the crossing over
that many NICs, until NVLink binds first (``comm_costs.ring_crossing``, as the step-time model does).

Both sides are charged at the step-time model's efficiencies (``Efficiency.gemm`` of the peak, held
at ``kernel_rates.sustained_rate`` of it through a run; ``Efficiency.link_rate`` of the link: NVLink's
``link``, the NICs' ``network``), so the thresholds
agree with ``step_time.predict``.  A threshold
is a break-even point, not a guarantee: the collective also needs the compute to be *available*
(DDP's last bucket has no backward left to hide behind; Megatron's TP all-reduces wait on the GEMM
before them and hide only with TP-communication overlap).
"""

from __future__ import annotations

from playground import hardware
from playground.planner.comm_costs import ring_crossing
from playground.planner.costs import peak_flops, ring_network_bandwidth, sustained_rate
from playground.planner.layout import EFFICIENCY, Efficiency

__all__ = ["link_bandwidth", "data_parallel_tokens", "fsdp_tokens", "tensor_parallel_hidden",
           "hiding_thresholds"]

LINKS = ("nvlink", "network")


def _check_link(link: str) -> None:
    if link not in LINKS:
        raise ValueError(f"link must be one of {', '.join(LINKS)}, got {link!r}")


def link_bandwidth(gpu, link: str, per_node: int = 1) -> float:
    """One direction of ``link`` ("nvlink" inside a node, "network" across nodes) per GPU, bytes/s;
    across nodes, the ring bandwidth of a group holding ``per_node`` GPUs of each node."""
    _check_link(link)
    gpu = hardware.gpu(gpu)
    if link == "nvlink":
        return gpu.nvlink_bytes_per_s
    return ring_network_bandwidth(gpu.nvlink_bytes_per_s, gpu.network_bytes_per_s, per_node)


def _flops_per_byte(gpu, link: str, eff: Efficiency, dtype: str, per_node: int = 1) -> float:
    gpu = hardware.gpu(gpu)
    compute = eff.gemm * sustained_rate(gpu, eff, dtype) * peak_flops(gpu, dtype)
    _check_link(link)
    binds, bw = ("nvlink", gpu.nvlink_bytes_per_s) if link == "nvlink" else \
        ring_crossing(gpu.nvlink_bytes_per_s, gpu.network_bytes_per_s, per_node, eff)
    return compute / (eff.link_rate(binds) * bw)


def data_parallel_tokens(gpu, link: str = "network", n: int | None = None, grad_bytes: int = 2,
                         eff: Efficiency = EFFICIENCY, dtype: str = "bf16", per_node: int = 1) -> float:
    """Tokens per GPU per optimizer step above which the gradient all-reduce fits under backward.

    ``grad_bytes`` is q for the reduced gradients (2 for bf16, 4 when they are reduced in fp32);
    ``n`` the data-parallel ranks (None: the large-n limit, (n-1)/n -> 1); ``per_node`` the
    group's GPUs in each node (1: one NIC each)."""
    ring = 1.0 if n is None else (n - 1) / n
    return ring * grad_bytes * _flops_per_byte(gpu, link, eff, dtype, per_node) / 2


def fsdp_tokens(gpu, link: str = "network", n: int | None = None, param_bytes: int = 2,
                eff: Efficiency = EFFICIENCY, dtype: str = "bf16", per_node: int = 1) -> float:
    """Tokens per GPU per *micro-batch* above which each unit's all-gather (forward) and
    all-gather + reduce-scatter (backward) fit under that unit's compute."""
    ring = 1.0 if n is None else (n - 1) / n
    return ring * param_bytes * _flops_per_byte(gpu, link, eff, dtype, per_node) / 2


def tensor_parallel_hidden(gpu, tp: int, link: str = "nvlink", activation_bytes: int = 2,
                           eff: Efficiency = EFFICIENCY, dtype: str = "bf16") -> float:
    """Hidden size above which a layer's TP all-reduces take no longer than its GEMMs."""
    if tp < 2:
        raise ValueError(f"tensor parallelism needs tp >= 2, got {tp}")
    return (tp - 1) * activation_bytes * _flops_per_byte(gpu, link, eff, dtype) / 6


def hiding_thresholds(gpus=("A100", "H100", "H200"), tp: int = 8, eff: Efficiency = EFFICIENCY) -> list[dict]:
    """One row per GPU: each axis's threshold on the link it usually rides (and TP across nodes);
    ``fsdp_tokens_nodes`` is FSDP over whole nodes, every GPU of a node in the group."""
    rows = []
    for name in gpus:
        gpu = hardware.gpu(name)
        rows.append({
            "gpu": gpu.name,
            "peak_tflops": peak_flops(gpu) / 1e12,
            "nvlink_gb_s": gpu.nvlink_bytes_per_s / 1e9,
            "network_gb_s": gpu.network_bytes_per_s / 1e9,
            "dp_tokens_network": data_parallel_tokens(gpu, "network", eff=eff),
            "fsdp_tokens_network": fsdp_tokens(gpu, "network", eff=eff),
            "fsdp_tokens_nodes": fsdp_tokens(gpu, "network", eff=eff, per_node=gpu.gpus_per_node),
            "fsdp_tokens_nvlink": fsdp_tokens(gpu, "nvlink", eff=eff),
            "tp_hidden_nvlink": tensor_parallel_hidden(gpu, tp, "nvlink", eff=eff),
            "tp_hidden_network": tensor_parallel_hidden(gpu, tp, "network", eff=eff),
        })
    return rows
