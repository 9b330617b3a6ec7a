"""Context parallelism: ring attention, forward and backward, from point-to-point sends.

Each of the n ranks of a group holds one contiguous block of the sequence: its queries, keys and
values, ``(B, H, s/n, D)`` each.  Attention needs every query to meet every key, so the key/value
blocks travel around the ring (rank r sends to r+1, receives from r-1) while each rank folds the
block it holds into an *online softmax* (a running max and a running sum per query row), the
trick that lets softmax be computed one key block at a time (Milakov & Gimelshein 2018, Liu et al.
2023).  Nothing of size s x s is ever materialised: the largest score tile is (s/n) x (s/n).

Causal masking with contiguous blocks: query block r needs key blocks 0..r; block r is the
diagonal (masked inside), blocks above it are skipped, but every block still travels the whole
ring, so each rank moves the same bytes and rank n-1 does the most arithmetic.

Backward: each rank keeps its q, out and the log-sum-exp of every row; the key/value blocks go
around the ring again, this time *with their gradient accumulators* dK, dV, each rank adding its
share; after n hops every accumulator is back home holding the full gradient.

The real runs (checks against full attention, the systems-map row, the demo) are in
``playground.systems_map.ring_attention_runs``.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist


__all__ = ["ring_attention", "attention_reference", "split_sequence", "predicted_bytes",
           "predicted_saved_bytes", "predicted_naive_saved_bytes", "predicted_blocks",
           "ring_schedule"]


# ----------------------------------------------------------------------------- references
def attention_reference(q, k, v, causal: bool = True, scale: float | None = None):
    """softmax(q kᵀ·scale [+ causal mask]) v on one process, the s x s way: the ground truth."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    if causal:
        s_q, s_k = scores.shape[-2:]
        future = torch.ones(s_q, s_k, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def split_sequence(x: torch.Tensor, rank: int, world_size: int, dim: int = 2) -> torch.Tensor:
    """Rank ``rank``'s contiguous block of ``x`` along the sequence dimension ``dim``."""
    if x.shape[dim] % world_size:
        raise ValueError(f"sequence length {x.shape[dim]} does not split evenly over "
                         f"{world_size} ranks; pad it to a multiple of {world_size}")
    # a copy, never a view: when the block happens to be contiguous already (batch = heads = 1)
    # ``.contiguous()`` would return a view that keeps the whole sequence's storage alive
    return x.chunk(world_size, dim=dim)[rank].clone(memory_format=torch.contiguous_format)


# ----------------------------------------------------------------------------- the ring
def _group_info(group):
    """(rank in group, group size, global rank of right neighbour, of left neighbour)."""
    if not dist.is_initialized():
        return 0, 1, 0, 0
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    right = dist.get_global_rank(group, (rank + 1) % n) if group is not None else (rank + 1) % n
    left = dist.get_global_rank(group, (rank - 1) % n) if group is not None else (rank - 1) % n
    return rank, n, right, left


def _start_shift(tensor, right, left, group):
    """Post 'send mine right, receive left's' at once; returns (incoming buffer, works)."""
    incoming = torch.empty_like(tensor)
    ops = [dist.P2POp(dist.isend, tensor, right, group), dist.P2POp(dist.irecv, incoming, left, group)]
    return incoming, dist.batch_isend_irecv(ops)


def _finish(works):
    for work in works:
        work.wait()


def _block_kind(q_block: int, k_block: int, causal: bool) -> str:
    if not causal or k_block < q_block:
        return "full"
    return "diagonal" if k_block == q_block else "skipped"


def _scores(q, k, scale, kind):
    s = (q @ k.transpose(-2, -1)) * scale
    if kind == "diagonal":  # same positions on both sides: the ordinary causal triangle
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    return s


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale, group, schedule):
        rank, n, right, left = _group_info(group)
        acc_dtype = torch.promote_types(q.dtype, torch.float32)  # accumulate in >= fp32
        qa = q.to(acc_dtype)
        rows = q.shape[:-1]
        running_max = torch.full(rows, float("-inf"), dtype=acc_dtype, device=q.device)
        running_sum = torch.zeros(rows, dtype=acc_dtype, device=q.device)
        acc = torch.zeros(*rows, v.shape[-1], dtype=acc_dtype, device=q.device)
        kv = torch.stack([k, v])  # one message per hop
        for step in range(n):
            source = (rank - step) % n  # whose key/value block this rank holds now
            if step < n - 1:  # start the next hop before computing: compute hides the transfer
                incoming, works = _start_shift(kv, right, left, group)
            kind = _block_kind(rank, source, causal)
            if schedule is not None:
                schedule.append({"step": step, "rank": rank, "q_block": rank,
                                 "k_block": source, "kind": kind})
            if kind != "skipped":
                s = _scores(qa, kv[0].to(acc_dtype), scale, kind)
                new_max = torch.maximum(running_max, s.amax(dim=-1))
                p = torch.exp(s - new_max.unsqueeze(-1))
                rescale = torch.exp(running_max - new_max)  # old terms were relative to old max
                running_sum = running_sum * rescale + p.sum(dim=-1)
                acc = acc * rescale.unsqueeze(-1) + p @ kv[1].to(acc_dtype)
                running_max = new_max
            if step < n - 1:
                _finish(works)
                kv = incoming
        out = acc / running_sum.unsqueeze(-1)
        lse = running_max + torch.log(running_sum)  # log Σ exp(scores) of every query row
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.scale, ctx.group = causal, scale, group
        return out.to(q.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        rank, n, right, left = _group_info(ctx.group)
        acc_dtype = lse.dtype
        qa, do = q.to(acc_dtype), grad_out.to(acc_dtype)
        delta = (do * out).sum(dim=-1, keepdim=True)  # rowsum(dO ∘ O), softmax backward term
        dq = torch.zeros_like(qa)
        kv = torch.stack([k, v])
        dkv = torch.zeros(kv.shape, dtype=acc_dtype, device=q.device)  # travels with its block
        for step in range(n):
            source = (rank - step) % n
            if step < n - 1:
                incoming_kv, kv_works = _start_shift(kv, right, left, ctx.group)
            kind = _block_kind(rank, source, ctx.causal)
            if kind != "skipped":
                ka, va = kv[0].to(acc_dtype), kv[1].to(acc_dtype)
                p = torch.exp(_scores(qa, ka, ctx.scale, kind) - lse.unsqueeze(-1))
                dkv[1] += p.transpose(-2, -1) @ do
                ds = p * (do @ va.transpose(-2, -1) - delta)
                dq += (ds @ ka) * ctx.scale
                dkv[0] += (ds.transpose(-2, -1) @ qa) * ctx.scale
            if n > 1:  # the accumulator moves on after every step, the last hop brings it home
                incoming_dkv, dkv_works = _start_shift(dkv, right, left, ctx.group)
                _finish(dkv_works)
                dkv = incoming_dkv
            if step < n - 1:
                _finish(kv_works)
                kv = incoming_kv
        return (dq.to(q.dtype), dkv[0].to(k.dtype), dkv[1].to(v.dtype), None, None, None, None)


def ring_attention(q, k, v, causal: bool = True, scale: float | None = None, group=None,
                   schedule: list | None = None):
    """Attention of this rank's query block against the whole (sharded) sequence.

    ``q, k, v``: this rank's contiguous sequence block, shape ``(B, H, s/n, D)``, block r on the
    rank r of ``group`` (all ranks when ``None``).  Without an initialised process group it is
    plain single-block attention.  Differentiable in q, k, v.  If ``schedule`` is a list, one
    dict per ring step is appended: which key block was met and whether it was computed.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise ValueError(f"{name} must be a 4-D tensor (batch, heads, seq_block, head_dim), "
                             f"got {getattr(t, 'shape', type(t).__name__)}")
        if not t.is_floating_point():
            raise ValueError(f"{name} must be floating point, got {t.dtype}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape != k.shape:
        raise ValueError(f"q must have the shape of k (same batch, heads, sequence block and "
                         f"head_dim), got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[2] == 0:
        raise ValueError("the sequence block is empty: every rank needs at least one position")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return _RingAttention.apply(q, k, v, bool(causal), scale, group, schedule)


# ----------------------------------------------------------------------------- formulas
def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def predicted_bytes(batch: int, heads: int, seq_len: int, head_dim: int, world_size: int,
                    dtype: torch.dtype = torch.float32) -> dict:
    """Bytes ONE rank sends per attention layer (it receives the same).

    Forward: the K and V block, b·a·(s/n)·d elements each, makes n-1 hops.
    Backward: K and V again (n-1 hops) and their accumulators dK, dV (n hops, the last one home),
    kept in fp32 or wider.  Causality changes the arithmetic, not the bytes.
    """
    if seq_len % world_size:
        raise ValueError(f"seq_len {seq_len} does not split evenly over {world_size} ranks")
    block = batch * heads * (seq_len // world_size) * head_dim  # elements of one K (or V) block
    e, e_acc = _itemsize(dtype), _itemsize(torch.promote_types(dtype, torch.float32))
    n = world_size
    forward = (n - 1) * 2 * block * e
    backward = (n - 1) * 2 * block * e + (n * 2 * block * e_acc if n > 1 else 0)
    return {"forward": forward, "backward": backward, "step": forward + backward}


def predicted_saved_bytes(batch, heads, seq_len, head_dim, world_size, dtype=torch.float32) -> int:
    """Bytes one rank keeps for backward: its q, k, v, out blocks plus one fp32 lse per row."""
    rows = batch * heads * (seq_len // world_size)
    e_acc = _itemsize(torch.promote_types(dtype, torch.float32))
    return 3 * rows * head_dim * _itemsize(dtype) + rows * head_dim * e_acc + rows * e_acc


def predicted_naive_saved_bytes(batch, heads, seq_len, head_dim, causal: bool = True,
                                dtype=torch.float32) -> int:
    """Bytes ``attention_reference`` keeps for backward on one process: the s x s probabilities
    of every head, q, k and v, and (causal) the boolean s x s mask of one byte per entry."""
    e = _itemsize(dtype)
    return (batch * heads * seq_len * seq_len * e + (seq_len * seq_len if causal else 0)
            + 3 * batch * heads * seq_len * head_dim * e)


def predicted_blocks(world_size: int, causal: bool = True) -> list[int]:
    """(s/n) x (s/n) score tiles each rank computes: r+1 when causal, n otherwise."""
    return [r + 1 if causal else world_size for r in range(world_size)]


def ring_schedule(world_size: int, causal: bool = True) -> list[dict]:
    """The schedule the ring follows, without running it (what a real run records)."""
    return [{"step": t, "rank": r, "q_block": r, "k_block": (r - t) % world_size,
             "kind": _block_kind(r, (r - t) % world_size, causal)}
            for r in range(world_size) for t in range(world_size)]
