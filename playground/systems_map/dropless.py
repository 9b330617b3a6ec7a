"""Dropless expert parallelism beside capacity-factor dispatch, over two levels of links.

Two ways to feed E experts spread over n ranks (``expert_placement``), the ranks grouped into
"nodes" of ``ranks_per_node`` (rank r on node r // ranks_per_node):

* **capacity factor** (GShard, Switch): every (source rank, expert) pair gets a buffer of exactly
  C = ceil(cf·T·k/E) rows.  Assignments past C are dropped, empty slots are padded with zeros.
  Every message has a static shape, known before routing: no counts to exchange, and the
  experts compute on n·C rows each, padding included.
* **dropless** (MegaBlocks, Gale et al. 2023): every assignment is kept; messages are as long as
  the routing makes them, so the ranks first exchange their per-expert counts, and each expert
  computes on exactly the rows it was sent (MegaBlocks makes that one block-sparse product).

Rows move by point-to-point sends, peers on the same node first, then peers on the other nodes,
each phase inside its own ``comm.count``: the bytes each rank put on its intra-node and on its
inter-node links are measured exactly, which a built-in all-to-all does not expose.  The slice a
rank addresses to itself is a local copy.  Backward sends the gradients back the same way.

The real runs (checks against the single-process MoE, bytes per link, load imbalance) are in
``playground.systems_map.dropless_runs``.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch import nn

from playground import comm
from playground.systems_map.expert_parallel import expert_placement
from playground.systems_map.moe import MoE, expert_capacity, queue_position, route

__all__ = ["NodeAwareEP", "check_nodes", "exchange", "predicted_link_bytes"]

LEVELS = ("intra", "inter")


def check_nodes(world_size: int, ranks_per_node: int) -> int:
    """Number of nodes; refuses a node size that does not divide the group."""
    if isinstance(ranks_per_node, bool) or not isinstance(ranks_per_node, int) or ranks_per_node < 1:
        raise ValueError(f"ranks_per_node must be a positive integer, got {ranks_per_node!r}")
    if world_size % ranks_per_node:
        raise ValueError(f"{world_size} ranks do not form nodes of {ranks_per_node}")
    return world_size // ranks_per_node


def _rank_and_size() -> tuple[int, int]:
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def _empty_links() -> dict:
    return {d: dict.fromkeys(LEVELS, 0) for d in ("forward", "backward")}


def _exchange_rows(x, send_splits, recv_splits, ranks_per_node, links, direction):
    """Rows of ``x`` to each rank by ``send_splits``; rows in by ``recv_splits``."""
    rank, n = _rank_and_size()
    out = x.new_empty((sum(recv_splits),) + tuple(x.shape[1:]))
    outgoing, incoming = x.split(send_splits), out.split(recv_splits)
    incoming[rank].copy_(outgoing[rank])  # its own slice: no link involved
    for level in LEVELS:
        same_node = level == "intra"
        peers = [p for p in range(n)
                 if p != rank and (p // ranks_per_node == rank // ranks_per_node) == same_node]
        ops = [dist.P2POp(dist.isend, outgoing[p].contiguous(), p) for p in peers if send_splits[p]]
        ops += [dist.P2POp(dist.irecv, incoming[p], p) for p in peers if recv_splits[p]]
        with comm.count() as moved:
            for work in dist.batch_isend_irecv(ops) if ops else []:
                work.wait()
        links[direction][level] += moved.sent_bytes
    return out


class _Exchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, send_splits, recv_splits, ranks_per_node, links):
        ctx.args = (send_splits, recv_splits, ranks_per_node, links)
        return _exchange_rows(x, send_splits, recv_splits, ranks_per_node, links, "forward")

    @staticmethod
    def backward(ctx, grad):  # the gradient of every row goes back where the row came from
        send_splits, recv_splits, ranks_per_node, links = ctx.args
        back = _exchange_rows(grad, recv_splits, send_splits, ranks_per_node, links, "backward")
        return back, None, None, None, None


def exchange(x, send_splits, recv_splits, ranks_per_node: int, links: dict):
    """Differentiable all-to-all of rows, node by node; adds the bytes this rank sent to
    ``links[direction][level]`` (direction: forward/backward, level: intra/inter)."""
    return _Exchange.apply(x, list(send_splits), list(recv_splits), ranks_per_node, links)


class NodeAwareEP(nn.Module):
    """This rank's part of ``moe`` (router replicated, E/n experts), dropless or with the
    capacity factor of ``moe``; ``last_stats`` keeps the routing and the bytes per link."""

    def __init__(self, moe: MoE, ranks_per_node: int, dropless: bool = True):
        super().__init__()
        rank, n = _rank_and_size()
        check_nodes(n, ranks_per_node)
        owned = expert_placement(len(moe.experts), n, rank)
        if not dropless and moe.capacity_factor is None:
            raise ValueError("capacity-factor dispatch needs moe.capacity_factor (a number)")
        self.rank, self.world_size, self.ranks_per_node = rank, n, ranks_per_node
        self.n_experts, self.local, self.dropless = len(moe.experts), len(owned), dropless
        self.top_k, self.capacity_factor, self.normalize = moe.top_k, moe.capacity_factor, moe.normalize
        self.router = copy.deepcopy(moe.router)
        self.experts = nn.ModuleList(copy.deepcopy(moe.experts[e]) for e in owned)
        self.last_stats: dict = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.reshape(-1, x.shape[-1])
        n, local, rpn, links = self.world_size, self.local, self.ranks_per_node, _empty_links()
        idx, gates, _ = route(xf, self.router.weight, self.top_k, self.normalize)
        place = queue_position(idx, self.n_experts)
        if self.dropless:
            kept = torch.ones_like(idx, dtype=torch.bool)
            token, choice = kept.nonzero(as_tuple=True)
            order = torch.argsort(idx[token, choice], stable=True)  # grouped by expert = by owner
            token, choice = token[order], choice[order]
            per_expert = torch.bincount(idx[token, choice], minlength=self.n_experts)
            counts = exchange(per_expert, [local] * n, [local] * n, rpn, links).view(n, local)
            send, recv = per_expert.view(n, local).sum(1).tolist(), counts.sum(1).tolist()
            rows = exchange(xf[token], send, recv, rpn, links)
            owner = torch.arange(local, device=x.device).repeat(n).repeat_interleave(counts.reshape(-1))
        else:
            capacity = expert_capacity(xf.shape[0], self.n_experts, self.top_k, self.capacity_factor)
            kept = place < capacity
            token, choice = kept.nonzero(as_tuple=True)
            slot = idx[token, choice] * capacity + place[token, choice]  # (expert, place) flat
            buffer = xf.new_zeros(self.n_experts * capacity, xf.shape[-1]).index_copy(0, slot, xf[token])
            send = recv = [local * capacity] * n  # static: known before routing
            rows = exchange(buffer, send, recv, rpn, links)
            owner = torch.arange(local, device=x.device).repeat_interleave(capacity).repeat(n)
            counts = None
        out = torch.zeros_like(rows)
        for e, expert_mlp in enumerate(self.experts):  # every expert runs, even on no rows:
            mine = (owner == e).nonzero(as_tuple=True)[0]  # this rank still joins the backward
            out = out.index_add(0, mine, expert_mlp(rows[mine]))
        back = exchange(out, recv, send, rpn, links)
        if not self.dropless:
            back = back[slot]
        y = torch.zeros_like(xf).index_add(0, token, gates[token, choice].unsqueeze(-1) * back)
        self.last_stats = {
            "tokens": xf.shape[0], "dropped": int((~kept).sum()), "send_rows": send,
            "recv_rows": recv, "rows_computed": rows.shape[0], "links": links,
            "assigned": torch.bincount(idx.reshape(-1), minlength=self.n_experts).tolist(),
            "received_per_expert": (counts.sum(0).tolist() if counts is not None else None),
            "capacity": None if self.dropless else capacity}
        return y.view(x.shape)

    def reduce_replicated_grads(self) -> None:
        """Sum the router's gradient over the ranks: it is replicated, its tokens are not."""
        if self.world_size > 1 and self.router.weight.grad is not None:
            dist.all_reduce(self.router.weight.grad)


# ----------------------------------------------------------------------------- formulas
def predicted_link_bytes(rank: int, world_size: int, ranks_per_node: int, send_rows: list,
                         recv_rows: list, d_model: int, n_experts: int, dropless: bool,
                         dtype: torch.dtype = torch.float32) -> dict:
    """Bytes ``rank`` sends on its intra-node and inter-node links per MoE layer.

    To each peer p: forward, the rows it dispatches to p (send_rows[p]) and the outputs of the
    rows p dispatched to it (recv_rows[p]), h·e bytes each, plus (dropless only) its E/n int64
    counts; backward, the same rows the other way, without counts.  Capacity factor: every
    send_rows[p] = recv_rows[p] = (E/n)·C, whatever the routing.
    """
    check_nodes(world_size, ranks_per_node)
    row, local = d_model * torch.empty((), dtype=dtype).element_size(), n_experts // world_size
    out = _empty_links()
    for p in range(world_size):
        if p == rank:
            continue
        level = "intra" if p // ranks_per_node == rank // ranks_per_node else "inter"
        rows = (send_rows[p] + recv_rows[p]) * row
        out["forward"][level] += rows + (8 * local if dropless else 0)
        out["backward"][level] += rows
    return out
