"""Dropless and capacity-factor expert parallelism run for real on two "nodes": equality, bytes
per link, drops and load imbalance.

``check_dropless`` is the rank function the chapter and tests launch: it runs
``playground.systems_map.dropless.NodeAwareEP`` forward and backward on this rank's tokens and
asserts (``assert_close``) that outputs and the input, router and expert gradients equal the
single-process ``MoE``: without capacity limits for dropless dispatch (the whole batch at once),
with the same per-rank drop rule for capacity-factor dispatch.  It returns the routing and the
bytes each rank sent on its intra-node and inter-node links.  ``link_report`` sets those beside
the formulas, ``balance_report`` measures drops and load imbalance from the same routing.
``python -m playground.systems_map.dropless_runs --nproc 4`` runs the default case on 2 x 2.
"""

from __future__ import annotations

import torch

from playground.launch import device
from playground.launch_cli import cli
from playground.systems_map.dropless import NodeAwareEP, check_nodes, predicted_link_bytes
from playground.systems_map.expert_parallel import expert_placement
from playground.systems_map.expert_parallel_runs import _case_moe, _case_tokens, assert_layer_matches
from playground.systems_map.moe import expert_capacity

__all__ = ["check_dropless", "check_cases", "link_report", "balance_report", "report",
           "DEFAULT_CASES"]

DEFAULT_CASES = [dict(tokens=32, d_model=8, d_ff=16, n_experts=8, top_k=2, capacity_factor=cf,
                      dtype="float64", seed=0) for cf in (None, 1.0)]


def check_cases(cases, world_size: int, ranks_per_node: int) -> None:
    """Every size problem, as one ValueError, before any rank communicates."""
    check_nodes(world_size, ranks_per_node)
    for case in cases:
        expert_placement(case["n_experts"], world_size, 0)
        expert_capacity(case["tokens"], case["n_experts"], case["top_k"], case.get("capacity_factor"))


def check_dropless(rank: int, world_size: int, cases=None, ranks_per_node: int = 2) -> list[dict]:
    """Per case (``capacity_factor`` None: dropless; a number: capacity-factor dispatch), this
    rank's outputs and gradients vs the single-process MoE; returns routing and link bytes."""
    cases = cases or DEFAULT_CASES
    check_cases(cases, world_size, ranks_per_node)
    dev, results = device(), []
    for case in cases:
        moe = _case_moe(case).to(dev)
        dtype = moe.router.weight.dtype
        x, w = (t.to(dev) for t in _case_tokens(case, world_size, dtype))
        dropless = case.get("capacity_factor") is None
        layer = NodeAwareEP(moe, ranks_per_node, dropless=dropless)
        x_ref = x.clone().requires_grad_()
        if dropless:  # no limit: the MoE on the whole batch at once
            y_ref, ref_dropped = moe(x_ref), [0] * world_size
        else:  # the drop rule is per rank (GShard's groups): the MoE on each rank's tokens
            parts, ref_dropped = [], []
            for chunk in x_ref.chunk(world_size):
                parts.append(moe(chunk))
                ref_dropped.append(moe.last_stats["dropped"])
            y_ref = torch.cat(parts)
        (y_ref * w).sum().backward()
        mine = x.chunk(world_size)[rank].clone().requires_grad_()
        y = layer(mine)
        (y * w.chunk(world_size)[rank]).sum().backward()
        layer.reduce_replicated_grads()
        assert_layer_matches(layer, moe, y, y_ref, mine, x_ref, rank, world_size, dtype)
        assert layer.last_stats["dropped"] == ref_dropped[rank], "drops differ from the reference"
        results.append({**case, **layer.last_stats})
    return results


# ----------------------------------------------------------------------------- reports
def link_report(ranks: list[dict], ranks_per_node: int) -> tuple[str, bool]:
    """One case of ``check_dropless``, rank by rank: bytes sent on intra-node and inter-node
    links, forward and backward, beside ``predicted_link_bytes``.  Returns (table, all equal)."""
    n, case = len(ranks), ranks[0]
    dropless = case.get("capacity_factor") is None
    lines = [f"{'dropless' if dropless else 'capacity factor ' + str(case['capacity_factor'])}, "
             f"{n // ranks_per_node} nodes x {ranks_per_node} ranks",
             "bytes sent; away: share of rows (slots) to the other node",
             "rank | intra fwd | formula | inter fwd | formula | intra bwd | inter bwd | away"]
    match = True
    for rank, got in enumerate(ranks):
        pred = predicted_link_bytes(rank, n, ranks_per_node, got["send_rows"], got["recv_rows"],
                                    case["d_model"], case["n_experts"], dropless,
                                    getattr(torch, case["dtype"]))
        match &= got["links"] == pred
        node = rank // ranks_per_node
        away = sum(r for p, r in enumerate(got["send_rows"]) if p // ranks_per_node != node)
        links = got["links"]
        lines.append(f"{rank:>4} | {links['forward']['intra']:>9} | {pred['forward']['intra']:>7} | "
                     f"{links['forward']['inter']:>9} | {pred['forward']['inter']:>7} | "
                     f"{links['backward']['intra']:>9} | {links['backward']['inter']:>9} | "
                     f"{away / sum(got['send_rows']):.2f}")
    lines.append(f"counted == formula on every link of every rank: {match}; uniform routing")
    lines.append(f"would send {(n - ranks_per_node) / n:.2f} of the rows to the other node")
    return "\n".join(lines), match


def balance_report(dropless: list[dict], capped: list[dict]) -> tuple[str, bool]:
    """Drops and load imbalance from the real routing: tokens per expert summed over the ranks
    (max / mean), rows each rank's experts computed, dropless beside capacity factor.
    Returns (lines, consistent: the dropless experts computed exactly the assigned rows)."""
    per_expert = [sum(col) for col in zip(*(r["assigned"] for r in dropless))]
    n, e = len(dropless), len(per_expert)
    computed = [c for r in dropless for c in r["received_per_expert"]]  # rank by rank = expert order
    mean = sum(per_expert) / e
    ok = computed == per_expert and sum(r["dropped"] for r in dropless) == 0
    assigned = sum(per_expert)
    capped_rows = [r["rows_computed"] for r in capped]
    real_capped = assigned - sum(r["dropped"] for r in capped)
    lines = [f"assignments per expert (all ranks): {per_expert}",
             f"load imbalance max/mean = {max(per_expert)}/{mean:g} = {max(per_expert) / mean:.2f}",
             f"dropless: 0 dropped; rows computed per rank {[r['rows_computed'] for r in dropless]}"
             f" (max/mean {max(r['rows_computed'] for r in dropless) * n / assigned:.2f})",
             f"capacity factor {capped[0]['capacity_factor']} (cap = {capped[0]['capacity']} per "
             f"rank and expert): {assigned - real_capped} of {assigned} assignments",
             f"dropped ({100 * (assigned - real_capped) / assigned:.1f}%); rows computed per rank "
             f"{capped_rows}, of which",
             f"real {real_capped} of {sum(capped_rows)} "
             f"({100 * real_capped / sum(capped_rows):.0f}%), the rest padding",
             f"dropless experts computed exactly the rows routed to them: {ok}"]
    return "\n".join(lines), ok


def report(values) -> None:
    for c in range(len(DEFAULT_CASES)):
        print(link_report([v[c] for v in values], 2)[0])
    print(balance_report([v[0] for v in values], [v[1] for v in values])[0])


if __name__ == "__main__":
    cli(check_dropless, default_world_size=4, report=report,
        check=lambda n: check_cases(DEFAULT_CASES, n, 2))
