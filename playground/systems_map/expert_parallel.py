"""Expert parallelism: the experts of a mixture-of-experts layer spread over the ranks of a group.

With E experts on n ranks, rank r owns experts r·E/n … (r+1)·E/n − 1; the router is replicated.
Every rank routes its own T tokens (same rule and capacity as ``playground.systems_map.moe``), then:

1. exchange how many rows each rank will send to each expert (a tiny all-to-all of E counts),
2. **dispatch**: one ``all_to_all_single`` with uneven split sizes moves each kept (token,
   choice) row to the rank that owns its expert,
3. each rank runs its local experts on the rows it received,
4. **combine**: the reverse all-to-all brings the outputs home, where they are mixed with the gates.

Backward is the same two all-to-alls run in reverse (``_AllToAll`` below).  The capacity is per
rank, as in GShard: an expert accepts at most C = ceil(cf · T·k / E) rows *from each rank*.

The real runs (checks against the single-process MoE, drop sweeps, the systems-map row, the demo)
are in ``playground.systems_map.expert_parallel_runs``.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch import nn

from playground.systems_map.moe import MoE, expert_capacity, route, within_capacity

__all__ = ["ExpertParallelMoE", "expert_placement", "all_to_all", "predicted_bytes"]


def _group_info(group):
    if not dist.is_initialized():
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def expert_placement(n_experts: int, world_size: int, rank: int) -> range:
    """The experts rank ``rank`` owns: a contiguous E/n of them."""
    if n_experts % world_size:
        raise ValueError(f"{n_experts} experts do not split evenly over {world_size} ranks; "
                         f"use a multiple of {world_size} experts")
    local = n_experts // world_size
    return range(rank * local, (rank + 1) * local)


class _AllToAll(torch.autograd.Function):
    """Rows out by ``send_splits``, rows in by ``recv_splits``; backward swaps the two."""

    @staticmethod
    def forward(ctx, x, send_splits, recv_splits, group):
        ctx.splits, ctx.group = (send_splits, recv_splits), group
        out = x.new_empty((sum(recv_splits),) + tuple(x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), recv_splits, send_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        send_splits, recv_splits = ctx.splits
        grad_in = grad.new_empty((sum(send_splits),) + tuple(grad.shape[1:]))
        dist.all_to_all_single(grad_in, grad.contiguous(), send_splits, recv_splits, group=ctx.group)
        return grad_in, None, None, None


def all_to_all(x: torch.Tensor, send_splits: list[int], recv_splits: list[int], group=None):
    """Differentiable all-to-all of the rows of ``x``: ``send_splits[j]`` rows go to rank j."""
    if not dist.is_initialized():
        return x
    return _AllToAll.apply(x, list(send_splits), list(recv_splits), group)


class ExpertParallelMoE(nn.Module):
    """This rank's part of ``moe``: the replicated router and the experts this rank owns."""

    def __init__(self, moe: MoE, group=None):
        super().__init__()
        rank, n = _group_info(group)
        n_experts = len(moe.experts)
        owned = expert_placement(n_experts, n, rank)
        self.group, self.rank, self.world_size = group, rank, n
        self.n_experts, self.local = n_experts, len(owned)
        self.top_k, self.capacity_factor, self.normalize = moe.top_k, moe.capacity_factor, moe.normalize
        self.router = copy.deepcopy(moe.router)
        self.experts = nn.ModuleList(copy.deepcopy(moe.experts[e]) for e in owned)
        self.last_stats: dict = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.router.in_features:
            raise ValueError(f"expects last dimension {self.router.in_features}, got {x.shape[-1]}")
        xf = x.reshape(-1, x.shape[-1])
        n, local, group = self.world_size, self.local, self.group
        idx, gates, _ = route(xf, self.router.weight, self.top_k, self.normalize)
        capacity = expert_capacity(xf.shape[0], self.n_experts, self.top_k, self.capacity_factor)
        kept = within_capacity(idx, self.n_experts, capacity)
        token, choice = kept.nonzero(as_tuple=True)
        expert = idx[token, choice]
        order = torch.argsort(expert, stable=True)  # rows grouped by expert, hence by owner rank
        token, choice, expert = token[order], choice[order], expert[order]
        per_expert = torch.bincount(expert, minlength=self.n_experts)
        send_splits = per_expert.view(n, local).sum(dim=1).tolist()
        # 1. counts: row [source rank, local expert] of what this rank is about to receive
        incoming = torch.empty_like(per_expert)
        if n > 1:
            dist.all_to_all_single(incoming, per_expert, group=group)
        else:
            incoming = per_expert
        incoming = incoming.view(n, local)
        recv_splits = incoming.sum(dim=1).tolist()
        # 2. dispatch
        rows = all_to_all(xf[token], send_splits, recv_splits, group)
        # 3. local experts; received rows come source by source, expert by expert within a source
        owner = torch.arange(local, device=x.device).repeat(n).repeat_interleave(incoming.reshape(-1))
        out = torch.zeros_like(rows)
        for e, expert_mlp in enumerate(self.experts):
            # run every expert, even on zero rows: its (empty) output keeps ``out`` in the
            # autograd graph, so this rank joins both backward all-to-alls like its peers
            # (a rank that skipped them would leave the others waiting forever)
            mine = (owner == e).nonzero(as_tuple=True)[0]
            out = out.index_add(0, mine, expert_mlp(rows[mine]))
        # 4. combine
        back = all_to_all(out, recv_splits, send_splits, group)
        y = torch.zeros_like(xf).index_add(0, token, gates[token, choice].unsqueeze(-1) * back)
        self.last_stats = {
            "capacity": capacity, "tokens": xf.shape[0],
            "assigned": torch.bincount(idx.reshape(-1), minlength=self.n_experts).tolist(),
            "kept": per_expert.tolist(), "dropped": int((~kept).sum()),
            "send_rows": send_splits, "recv_rows": recv_splits,
            "received_per_expert": incoming.sum(dim=0).tolist()}
        return y.view(x.shape)

    def reduce_replicated_grads(self) -> None:
        """Sum the router's gradient over the group: it is replicated, its tokens are not."""
        if self.world_size > 1 and self.router.weight.grad is not None:
            dist.all_reduce(self.router.weight.grad, group=self.group)


# ----------------------------------------------------------------------------- formulas
def predicted_bytes(tokens: int, d_model: int, top_k: int, n_experts: int,
                    dtype: torch.dtype = torch.float32, dropped: int = 0,
                    received: int | None = None) -> dict:
    """All-to-all payload one rank hands in per MoE layer (``comm.count`` convention).

    Forward: E int64 counts; dispatch hands in the A_out = T·k − dropped kept rows (h elements
    each); combine hands back the A_in rows this rank's experts received (``received``; A_out
    when routing is balanced).  Backward: the same two row all-to-alls, reversed.  The slice a
    rank addresses to itself never leaves it: with balanced routing (n−1)/n crosses the network.
    """
    row = d_model * torch.empty((), dtype=dtype).element_size()
    rows_out = tokens * top_k - dropped
    rows_in = rows_out if received is None else received
    both = (rows_out + rows_in) * row
    return {"dispatch": rows_out * row, "combine": rows_in * row,
            "forward": n_experts * 8 + both, "backward": both, "step": n_experts * 8 + 2 * both}
