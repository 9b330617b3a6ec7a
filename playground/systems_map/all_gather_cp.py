"""Context parallelism by all-gather (Llama 3's): every rank gathers all of K and V.

The sequence is cut into 2n chunks of c = s/(2n) positions; rank i of the n ranks holds chunks
i and 2n-1-i (one from the head, one from the tail), so that under a causal mask every rank has
the same work: chunk j needs the keys of chunks 0..j, j+1 tiles of c x c, and i+1 + 2n-i = 2n+1
tiles per rank whatever i is (Dubey et al. 2024, Sec. 3.3.2).

Forward: one all-gather of this rank's K and V (stacked) gives every rank the whole K and V; each
rank then computes the attention of its two query chunks against the key prefix each one needs.
Backward (autograd): the gradient of an all-gather is a reduce-scatter, so dK and dV are summed
over the ranks and each rank keeps the part of its own positions.  Unlike the ring, nothing
overlaps the gather: Llama 3 takes that price because with grouped-query attention K and V are
small beside Q, and because any mask (document masks) is easy when all keys are at hand.

The real runs (checks against full attention, bytes beside the formulas) are in
``playground.systems_map.cp_runs``.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

__all__ = ["all_gather_attention", "check_chunks", "chunks_of_rank", "load_balanced_split",
           "predicted_bytes", "predicted_tiles"]


def check_chunks(seq_len: int, world_size: int) -> None:
    """The sequence must cut into 2·CP equal chunks."""
    if seq_len % (2 * world_size):
        raise ValueError(f"all-gather CP cuts the sequence into 2·CP = {2 * world_size} chunks: "
                         f"seq_len {seq_len} is not a multiple of {2 * world_size}; pad it")


def chunks_of_rank(rank: int, world_size: int) -> tuple[int, int]:
    """The two chunks rank ``rank`` holds: one from the head, one from the tail."""
    return rank, 2 * world_size - 1 - rank


def load_balanced_split(x: torch.Tensor, rank: int, world_size: int, dim: int = 2) -> torch.Tensor:
    """Rank ``rank``'s chunks i and 2n-1-i of ``x`` along ``dim``, concatenated (a copy)."""
    check_chunks(x.shape[dim], world_size)
    chunks = x.chunk(2 * world_size, dim=dim)
    head, tail = chunks_of_rank(rank, world_size)
    return torch.cat([chunks[head], chunks[tail]], dim=dim)


class _GatherKV(torch.autograd.Function):
    """All-gather along a new leading rank axis; backward reduce-scatters the gradient."""

    @staticmethod
    def forward(ctx, kv, group):
        ctx.group = group
        n = dist.get_world_size(group)
        out = kv.new_empty((n * kv.shape[0],) + tuple(kv.shape[1:]))  # ranks stacked on dim 0
        dist.all_gather_single(out, kv.contiguous(), group=group)
        return out.view((n,) + tuple(kv.shape))

    @staticmethod
    def backward(ctx, grad):
        mine = grad.new_empty(grad.shape[1:])
        dist.reduce_scatter_single(mine, grad.reshape((-1,) + tuple(grad.shape[2:])).contiguous(),
                                   group=ctx.group)
        return mine, None


def _full_sequence(gathered: torch.Tensor, world_size: int) -> torch.Tensor:
    """(n, 2, B, H, 2c, D) as gathered, rank by rank -> (2, B, H, s, D) in sequence order."""
    halves = gathered.chunk(2, dim=-2)  # each (n, 2, B, H, c, D): every rank's head / tail chunk
    order = [halves[0][j] if j < world_size else halves[1][2 * world_size - 1 - j]
             for j in range(2 * world_size)]
    return torch.cat(order, dim=-2)


def _prefix_attention(q, k, v, chunk: int, first: int, scale: float):
    """Causal attention of the c queries of chunk ``chunk`` (global positions from ``first``)
    against the keys that precede them: the tiles 0..chunk, the last one masked inside."""
    end = first + q.shape[-2]
    s = (q @ k[..., :end, :].transpose(-2, -1)) * scale
    future = torch.ones(q.shape[-2], end, dtype=torch.bool, device=q.device).triu(first + 1)
    p = torch.softmax(s.masked_fill(future, float("-inf")), dim=-1)
    return p @ v[..., :end, :]


def all_gather_attention(q, k, v, scale: float | None = None, group=None, work: list | None = None):
    """Causal attention of this rank's two query chunks against the whole (gathered) sequence.

    ``q``: (B, H, 2c, D), this rank's chunks i and 2n-1-i (``load_balanced_split``); ``k, v``:
    (B, H_kv, 2c, D), the same positions, with H divisible by H_kv (grouped-query attention).
    Without a process group it is plain causal attention (n = 1, both chunks of one rank).
    If ``work`` is a list, the number of c x c score tiles computed is appended.
    """
    if q.dim() != 4 or k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[2:] != k.shape[2:]:
        raise ValueError(f"need q (B, H, 2c, D) and k, v (B, H_kv, 2c, D), got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"{q.shape[1]} query heads do not share {k.shape[1]} key/value heads evenly")
    if q.shape[2] % 2 or q.shape[2] == 0:
        raise ValueError(f"each rank holds two equal chunks: its block of {q.shape[2]} positions "
                         "must be even and non-empty (seq_len a multiple of 2·CP)")
    n = dist.get_world_size(group) if dist.is_initialized() else 1
    rank = dist.get_rank(group) if dist.is_initialized() else 0
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    acc = torch.promote_types(q.dtype, torch.float32)  # softmax in >= fp32
    kv = torch.stack([k, v])
    gathered = _GatherKV.apply(kv, group) if n > 1 else kv.unsqueeze(0)
    full_k, full_v = _full_sequence(gathered, n).to(acc).repeat_interleave(q.shape[1] // k.shape[1], dim=2)
    c = q.shape[2] // 2
    outs = []
    for q_chunk, j in zip(q.to(acc).chunk(2, dim=2), chunks_of_rank(rank, n)):
        outs.append(_prefix_attention(q_chunk, full_k, full_v, j, j * c, scale))
        if work is not None:
            work.append(j + 1)
    return torch.cat(outs, dim=2).to(q.dtype)


# ----------------------------------------------------------------------------- formulas
def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def predicted_bytes(batch: int, heads: int, seq_len: int, head_dim: int, world_size: int,
                    dtype: torch.dtype = torch.float32, kv_heads: int | None = None) -> dict:
    """Per rank per attention layer: payload handed to the collectives (what ``comm.count``
    records) and the wire bytes a rank sends with a ring (or direct) collective.

    Forward: all-gather of the local K, V, 2·b·a_kv·(s/n)·d·e in, (n-1) times that sent.
    Backward: reduce-scatter of the full dK, dV, 2·b·a_kv·s·d·e in, (n-1)/n of it sent.
    ``heads`` (the query heads) does not enter: only K and V move.
    """
    check_chunks(seq_len, world_size)
    n, kvh = world_size, heads if kv_heads is None else kv_heads
    local = 2 * batch * kvh * (seq_len // n) * head_dim * _itemsize(dtype)
    wire = (n - 1) * local
    return {"forward_payload": local, "backward_payload": n * local,
            "forward": wire, "backward": wire, "step": 2 * wire}


def predicted_tiles(world_size: int) -> list[int]:
    """Causal c x c tiles per rank with the head-and-tail layout: 2n+1 on every rank."""
    return [sum(j + 1 for j in chunks_of_rank(r, world_size)) for r in range(world_size)]
