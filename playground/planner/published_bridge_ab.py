"""Megatron-Bridge's measured A/B of its expert-parallel overlap: Qwen3-30B-A3B on 16 H100s, on and off.

Megatron-Bridge's skills pages (``skills/nemo-mbridge-perf-moe-comm-overlap/SKILL.md``, the same table in
``nemo-mbridge-perf-expert-parallel-overlap``) report a controlled comparison of 2026-07-25 in which only
Megatron-Core's EP overlap (``overlap_moe_expert_parallel_comm``) changed.  Everything the model prices is
stated: Qwen3-30B-A3B pretraining on 16 H100s, BF16, sequence 4096, TP 1 PP 1 CP 1 EP 16, micro-batch 1,
global batch 1024, the tokens force-balanced over the experts, the flex dispatcher with HybridEP (``ep_dispatch=
"hybridep"``),
Transformer Engine's CUDA graphs over the router and the dispatch's preprocessing only (the dispatch and
the experts launched eagerly, a cuBLASLt GEMM per local expert: ``moe_launch="multi_stream"``), weight gradients
not delayed.  Steady step times:
24.7138 s with the overlap off, 20.9920 s with it on (the independent validation run; the search run
21.0725 s), and rank 0 peaked at 62.166 GiB allocated.  The memory model counts 56.5 GiB, keeping what
Megatron-Core keeps since v0.13 (no expert output: ``Layout.moe_probs``); HybridEP's buffers and the
CUDA graphs' pools, which it does not count, may make the rest (with each expert's output kept it
would count 62.5).

Nsight Systems on rank 0 read the mechanism: communication concurrent with GEMMs and attention rose
from 9 ms (0.11% of the communication time) to 3,959 ms (36.55%), and the GPU's busy time fell from
22.82 s to 21.22 s.  That share is the model's ``ep_overlap_hidden`` (``efficiency.py``), so these two
rows are visible, not held out.  Replayed before it was set (the overlap hiding all it covers):
1.22 off, 1.40 on; after, 1.22 and 1.14.  The same profile counted 463,348 kernels on rank 0, and the GPU
active 22.821 s of the step: 1.9 s idle between kernels, which the model charged a third of until every
kernel of a MoE layer paid its launch gap (``moe_kernels``; ``replay.kernel_gap_check``): 1.13 and 1.05; and
HybridEP's all-gather of the routing maps before each dispatch, read from its code (``comm_costs.routing_map_gather_time``):
1.10 and 1.04.

Left out: the same pages' A/B with the all-to-all dispatcher (41.25 s off, 31.31 s on: an SFT run whose
sequence length is not given), and the canonical recipe's 20.147 s (more settings changed than the
page names).
"""

from __future__ import annotations

from playground.planner.costs import Layout
from playground.planner.published_automodel import QWEN3_30B
from playground.planner.published_row import TE_ATTENTION, PublishedStackRun

__all__ = ["BRIDGE_EP_OVERLAP_AB", "NSIGHT_KERNELS", "NSIGHT_GPU_ACTIVE_S"]

_SOURCE = ("https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/067f987df03b8355b03192d88d70f1709fedf51a/skills/"
           "nemo-mbridge-perf-moe-comm-overlap/SKILL.md, 'HybridEP production-shape validation' (2026-07-25)")
_NOTE = ("BF16; HybridEP (the flex dispatcher): a token sent once to each node it reaches, as DeepEP does, after an "
         "all-gather of the routing maps; the "
         "tokens force-balanced, none dropped; CUDA graphs over the router and the dispatch's preprocessing "
         "only (not priced: the host waits on none of this layout's layers); recompute, the distributed optimizer "
         "and the gradient reduction not stated (none, Megatron's distributed optimizer and fp32 taken: with "
         "them the memory model counts 56.5 GiB, and rank 0 peaked at 62.166 GiB allocated; HybridEP's buffers "
         "and the graphs' pools are not counted)")
_UNSTATED = ("recompute", "distributed_optimizer", "overlap_grad_reduce", "grad_reduce")


def _ab(overlap: bool, step_time_s: float) -> PublishedStackRun:
    layout = Layout.today(1, 1, 16, ep=16, micro_batch=1, global_batch=1024, ep_dispatch="hybridep",
                          moe_launch="multi_stream", ep_overlap=overlap, attention_kernel=TE_ATTENTION)
    return PublishedStackRun(f"Qwen3-30B-A3B, 16 H100, EP 16, BF16, HybridEP, EP overlap {'on' if overlap else 'off'}",
                             "Megatron-Bridge EP-overlap A/B", _SOURCE, "H100", QWEN3_30B, layout,
                             _UNSTATED, step_time_s=step_time_s, note=_NOTE, cite="nvidia2025megatronbridge")


BRIDGE_EP_OVERLAP_AB = (_ab(False, 24.7138), _ab(True, 20.9920))
# Nsight Systems on rank 0 with the overlap off: the kernels it captured (the same with it on) and the union of
# the intervals the GPU was active, against the 24.7138 s step; the rest, 1.9 s, the device idled between kernels
NSIGHT_KERNELS = 463_348
NSIGHT_GPU_ACTIVE_S = 22.821
