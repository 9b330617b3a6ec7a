"""The real run of expert data parallelism (``playground.systems_map.expert_dp``).

``expert_dp_step`` (a rank worker): a projection then a MoE layer, EP over the grid's ``ep`` lines,
each rank on its own tokens; one backward, then ``reduce_moe_grads`` with the byte counter around
each reduction.  Every gradient this rank holds is checked (``assert_close``) against one process
that ran every rank's tokens, and the ranks of each group and the payload each reduction handed in
come back.  ``expert_dp_report`` sets them beside the formula: the dense weights' ``4 Psi_dense``
bytes over all n ranks, each rank's ``4 Psi_expert E / EP`` over its expert-DP group, and on the
wire a ring's ``2 (m - 1) / m`` of each (m the group's size).  ``layout_spans`` counts, for published
MoE layouts, the nodes one group of each expert axis touches.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.testing import assert_close

from playground import comm
from playground.systems_map.expert_dp import expert_grid, reduce_moe_grads
from playground.systems_map.expert_parallel import ExpertParallelMoE, expert_placement
from playground.systems_map.moe import MoE
from playground.systems_map.tp_comm import ring_wire_bytes

__all__ = ["expert_dp_step", "expert_dp_report", "predicted_payloads", "layout_spans", "MOE_LAYOUTS"]

CFG = dict(d_model=16, d_ff=32, n_experts=4, top_k=2, tokens=16)


def _build(seed: int, d_model: int, d_ff: int, n_experts: int, top_k: int):
    torch.manual_seed(seed)
    return nn.Linear(d_model, d_model), MoE(d_model, d_ff, n_experts, top_k)   # dropless: no token is lost


def expert_dp_step(rank: int, world_size: int, ep: int = 2, seed: int = 0, cfg: dict = CFG) -> dict:
    grid = expert_grid(world_size, ep)
    groups = grid.groups(rank)
    d, T = cfg["d_model"], cfg["tokens"]
    proj, moe = _build(seed, d, cfg["d_ff"], cfg["n_experts"], cfg["top_k"])
    x_all = torch.randn(world_size * T, d, generator=torch.Generator().manual_seed(seed + 1))
    # one process, every rank's tokens, each rank's loss a mean over its own
    ref_proj, ref_moe = copy.deepcopy(proj), copy.deepcopy(moe)
    sum(ref_moe(ref_proj(x)).pow(2).mean() for x in x_all.split(T)).div(world_size).backward()
    # this rank: its tokens, its EP group's experts
    layer = ExpertParallelMoE(moe, group=groups.group("ep"))
    layer(proj(x_all[rank * T:(rank + 1) * T])).pow(2).mean().backward()
    dense, experts = [*proj.parameters(), layer.router.weight], list(layer.experts.parameters())
    with comm.count() as dense_moved:
        reduce_moe_grads(dense, [], groups.group("edp"), world_size)
    with comm.count() as expert_moved:
        reduce_moe_grads([], experts, groups.group("edp"), world_size)
    owned = expert_placement(cfg["n_experts"], ep, groups.index("ep"))
    pairs = list(zip(dense, [*ref_proj.parameters(), ref_moe.router.weight])) + [
        pair for local, e in enumerate(owned)
        for pair in zip(layer.experts[local].parameters(), ref_moe.experts[e].parameters())]
    for mine, ref in pairs:
        assert_close(mine.grad, ref.grad, rtol=1e-5, atol=1e-6)
    return {"rank": rank, "label": str(groups), "ep_ranks": groups.ranks("ep"), "edp_ranks": groups.ranks("edp"),
            "experts": list(owned), "tensors_checked": len(pairs),
            "largest_difference": max(float((mine.grad - ref.grad).abs().max()) for mine, ref in pairs),
            "dense_payload": sum(dense_moved.summary()["payload_bytes"].values()),
            "expert_payload": sum(expert_moved.summary()["payload_bytes"].values())}


def predicted_payloads(ep: int, cfg: dict = CFG) -> tuple[int, int]:
    """Bytes (fp32) one rank hands in: the dense weights, h^2 + h (the projection) + E h (the router), and
    its E / EP experts, each 2 h d_ff + d_ff + h (the course's MLP, with biases)."""
    h, f, E = cfg["d_model"], cfg["d_ff"], cfg["n_experts"]
    return 4 * (h * h + h + E * h), 4 * (E // ep) * (2 * h * f + f + h)


def expert_dp_report(ranks: list[dict], ep: int, cfg: dict = CFG) -> tuple[str, bool]:
    """Each rank's groups and counted payloads beside the formula (``predicted_payloads``)."""
    n = len(ranks)
    lines, ok = [], True
    want_dense, want_expert = predicted_payloads(ep, cfg)
    for r in ranks:
        ok &= r["dense_payload"] == want_dense and r["expert_payload"] == want_expert
        lines.append(f"rank {r['rank']}: experts {r['experts']}, EP group {r['ep_ranks']}, expert-DP group "
                     f"{r['edp_ranks']}\n        dense {r['dense_payload']:,} B over {n} (predicted "
                     f"{want_dense:,}); experts {r['expert_payload']:,} B over {len(r['edp_ranks'])} "
                     f"(predicted {want_expert:,})")
    r0 = ranks[0]
    m = len(r0["edp_ranks"])
    lines.append(f"on the wire, a ring: dense {ring_wire_bytes('all_reduce', r0['dense_payload'], n):,.0f} B a rank "
                 f"over {n} ranks, experts {ring_wire_bytes('all_reduce', r0['expert_payload'], m):,.0f} B over {m}")
    worst = max(r["largest_difference"] for r in ranks)   # rounding: its digits depend on the machine's BLAS
    lines.append(f"every gradient equal to one process's (assert_close, {sum(r['tensors_checked'] for r in ranks)} "
                 f"tensors): largest difference {'<' if worst < 1e-8 else '>='} 1e-8")
    return "\n".join(lines), ok


# published MoE layouts on 8-GPU nodes, one pipeline stage's ranks each (GPUs, EP; expert TP 1): Megatron-Bridge's
# gpt-oss 120B on DGX-B200s (25.11), the Model Zoo's Qwen3-235B-A22B under Megatron-FSDP, DeepSeek-V3 on H800s
MOE_LAYOUTS = (("gpt-oss 120B, 64 GPUs: EP 8 DP 64", 64, 8),
               ("Qwen3-235B, 256 GPUs: TP 2 EP 8 FSDP 128", 256, 8),
               ("DeepSeek-V3, 2,048 GPUs: PP 16 EP 64", 128, 64))


def layout_spans(gpus_per_node: int = 8) -> str:
    """For each published MoE layout's pipeline stage: nodes one EP group and one expert-DP group span,
    and how many GPUs of a node an expert-DP group holds (the NICs its ring crosses on)."""
    lines = [f"{'layout (one pipeline stage)':40s} {'EP spans':>8s} {'expert DP':>9s} {'spans':>5s} {'a node holds':>12s}"]
    for name, gpus, ep in MOE_LAYOUTS:
        grid = expert_grid(gpus, ep)
        edp = grid.all_groups("edp")[0]
        per_node = max(sum(1 for r in edp if r // gpus_per_node == node) for node in {r // gpus_per_node for r in edp})
        lines.append(f"{name:40s} {grid.nodes_spanned('ep', gpus_per_node):>8d} {len(edp):>9d} "
                     f"{grid.nodes_spanned('edp', gpus_per_node):>5d} {per_node:>12d}")
    return "\n".join(lines)
