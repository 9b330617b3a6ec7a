"""Expert data parallelism: which ranks reduce a mixture-of-experts layer's gradients.

Under expert parallelism a rank holds E/EP of the experts and all of the dense weights (attention,
norms, the router).  The dense weights are replicated on every rank, so their gradients are summed
over all of them.  An expert's weights are replicated only on the ranks that hold the *same* experts,
its **expert-DP group**, and its gradient is summed there alone: through the dispatch's all-to-all,
its gradient on each rank already holds what the tokens of the whole EP group contributed.

Where those ranks sit is set by the order of the axes.  Expert ranks are numbered with EP fastest
(Megatron-Core's ``tp-cp-ep-dp-pp``, expert tensor parallelism first and CP 1 for experts; torchtitan's
expert mesh ``pp, dp_replicate, efsdp, ep``), so on the grid ``RankGrid(edp=n // ep, ep=ep)`` an EP
group is a run of consecutive ranks and an expert-DP group strides EP ranks apart: with EP filling a
node, one rank in each node, each of them alone on its node's network port.

The run that checks this against one process, and counts the bytes, is
``playground.systems_map.expert_dp_runs``.
"""

from __future__ import annotations

import torch.distributed as dist

from playground.systems_map.grid import RankGrid

__all__ = ["expert_grid", "reduce_moe_grads"]


def expert_grid(world_size: int, ep: int) -> RankGrid:
    """The expert view of ``world_size`` ranks: expert DP outermost, EP fastest."""
    if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1 or world_size % ep:
        raise ValueError(f"EP must be a positive integer dividing the {world_size} ranks, got {ep!r}")
    return RankGrid(edp=world_size // ep, ep=ep)


def reduce_moe_grads(dense, experts, expert_dp_group, world_size: int) -> None:
    """Sum each gradient over the ranks that hold its weight, then divide by the ranks
    whose tokens the loss averages: ``dense`` over every rank, ``experts`` over
    ``expert_dp_group`` alone."""
    for params, group in ((dense, None), (experts, expert_dp_group)):
        for p in params:
            dist.all_reduce(p.grad, group=group)
            p.grad /= world_size
