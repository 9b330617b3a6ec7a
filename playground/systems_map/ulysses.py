"""Context parallelism by all-to-all (DeepSpeed-Ulysses): trade the sequence shard for a head shard.

Each of the n ranks holds a contiguous block of s/n positions of q, k, v, all H heads.  One
all-to-all re-cuts them: afterwards each rank holds *all* s positions of H/n heads.  Attention is
independent per head, so each rank computes ordinary full-sequence causal attention on its heads,
and a second all-to-all brings the output back to the sequence layout (Jacobs et al. 2023).
Backward is the same all-to-alls in reverse.  The price: the number of heads (and of key/value
heads, with grouped-query attention) must be divisible by n, so CP is capped by the head count.

The real runs (checks against full attention, bytes beside the formulas) are in
``playground.systems_map.cp_runs``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from playground.systems_map.ring_attention import attention_reference

__all__ = ["ulysses_attention", "check_heads", "seq_to_heads", "heads_to_seq", "predicted_bytes"]


def check_heads(heads: int, kv_heads: int, world_size: int) -> None:
    """Ulysses gives each rank H/n query heads and H_kv/n key/value heads: both must divide."""
    for name, count in (("query heads", heads), ("key/value heads", kv_heads)):
        if count % world_size:
            raise ValueError(f"Ulysses shards the heads over CP = {world_size} ranks: {count} "
                             f"{name} are not divisible by {world_size}; use a CP degree that "
                             f"divides {count}")


def _all_to_all(x, scatter_dim: int, gather_dim: int, group):
    """Cut ``x`` into n pieces along ``scatter_dim``, piece j to rank j; concatenate the pieces
    received, in rank order, along ``gather_dim``."""
    n = dist.get_world_size(group)
    send = torch.stack(x.chunk(n, dim=scatter_dim)).contiguous()  # (n, ...): row j goes to rank j
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return torch.cat(recv.unbind(0), dim=gather_dim)


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scatter_dim, gather_dim, group):
        ctx.dims, ctx.group = (scatter_dim, gather_dim), group
        return _all_to_all(x, scatter_dim, gather_dim, group)

    @staticmethod
    def backward(ctx, grad):  # the inverse re-cut: gather where forward scattered
        scatter_dim, gather_dim = ctx.dims
        return _all_to_all(grad, gather_dim, scatter_dim, ctx.group), None, None, None


def seq_to_heads(x, head_dim: int = 1, group=None):
    """(…, H, s/n, D) sequence-sharded -> (…, H/n, s, D) head-sharded (differentiable)."""
    return _AllToAll.apply(x, head_dim, head_dim + 1, group)


def heads_to_seq(x, head_dim: int = 1, group=None):
    """(…, H/n, s, D) head-sharded -> (…, H, s/n, D) sequence-sharded (differentiable)."""
    return _AllToAll.apply(x, head_dim + 1, head_dim, group)


def ulysses_attention(q, k, v, scale: float | None = None, group=None):
    """Causal attention of this rank's contiguous sequence block, computed head-sharded.

    ``q``: (B, H, s/n, D); ``k, v``: (B, H_kv, s/n, D), H divisible by H_kv (grouped-query
    attention).  Both head counts must be divisible by n: checked before anything is sent.
    Without a process group it is plain causal attention.
    """
    if q.dim() != 4 or k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[2:] != k.shape[2:]:
        raise ValueError(f"need q (B, H, s/n, D) and k, v (B, H_kv, s/n, D), got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"{q.shape[1]} query heads do not share {k.shape[1]} key/value heads evenly")
    n = dist.get_world_size(group) if dist.is_initialized() else 1
    check_heads(q.shape[1], k.shape[1], n)
    acc = torch.promote_types(q.dtype, torch.float32)
    if n > 1:
        q, kv = seq_to_heads(q, 1, group), seq_to_heads(torch.stack([k, v]), 2, group)
    else:
        kv = torch.stack([k, v])
    groups = q.shape[1] // kv.shape[2]  # query heads per key/value head, same on every rank
    full_k, full_v = kv.to(acc).repeat_interleave(groups, dim=2)
    out = attention_reference(q.to(acc), full_k, full_v, causal=True, scale=scale).to(q.dtype)
    return heads_to_seq(out, 1, group) if n > 1 else out


# ----------------------------------------------------------------------------- formulas
def predicted_bytes(batch: int, heads: int, seq_len: int, head_dim: int, world_size: int,
                    dtype: torch.dtype = torch.float32, kv_heads: int | None = None) -> dict:
    """Per rank per attention layer: all-to-all payload (what ``comm.count`` records) and wire.

    Forward: q (b·a·(s/n)·d), k and v (2·b·a_kv·(s/n)·d) go in, and the output (b·a·(s/n)·d)
    comes back: 4 tensors' worth when a_kv = a.  Backward: dO goes in, dq, dk, dv come back, the
    same bytes.  Each all-to-all keeps 1/n of its input at home, so (n-1)/n of it is sent.
    """
    kvh = heads if kv_heads is None else kv_heads
    check_heads(heads, kvh, world_size)
    if seq_len % world_size:
        raise ValueError(f"seq_len {seq_len} does not split evenly over {world_size} ranks")
    n, e = world_size, torch.empty((), dtype=dtype).element_size()
    payload = (2 * heads + 2 * kvh) * batch * (seq_len // n) * head_dim * e
    wire = payload * (n - 1) // n
    return {"forward_payload": payload, "backward_payload": payload,
            "forward": wire, "backward": wire, "step": 2 * wire}
