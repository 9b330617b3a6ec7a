"""The communication of tensor and sequence parallelism, as autograd functions.

Megatron-LM's tensor parallelism needs only two operators, each the *conjugate* of the other
(Shoeybi et al. 2019, their f and g):

* ``copy_to_tp``     (f): identity in forward,  all-reduce of the gradient in backward;
* ``reduce_from_tp`` (g): all-reduce in forward, identity for the gradient in backward.

Sequence parallelism (Korthikanti et al. 2022) splits each all-reduce into its two halves, so the
regions between the tensor-parallel matmuls can hold only 1/t of the sequence:

* ``gather_from_sp``        (g-bar): all-gather along the sequence forward, reduce-scatter backward;
* ``reduce_scatter_to_sp``  (g-bar conjugate): reduce-scatter forward, all-gather backward.

Every collective is called as ``dist.<fn>`` so ``playground.comm.count`` sees it.  ``dim`` is the
sequence dimension and must divide by the group size; the pieces are contiguous, rank order.
"""

from __future__ import annotations

import numbers
import warnings

import torch
import torch.distributed as dist

__all__ = ["copy_to_tp", "reduce_from_tp", "gather_from_sp", "reduce_scatter_to_sp",
           "all_gather_along", "reduce_scatter_along", "group_size", "group_rank", "ring_wire_bytes"]


def group_size(group) -> int:
    """Ranks in ``group``; 1 outside a distributed job, so a layer also runs in one process."""
    if group is None and not dist.is_initialized():
        return 1
    return dist.get_world_size(group)


def group_rank(group) -> int:
    if group is None and not dist.is_initialized():
        return 0
    return dist.get_rank(group)


def ring_wire_bytes(op: str, payload_bytes: int, n: int) -> float:
    """Bytes one rank sends on the wire when a ring implements ``op`` on ``n`` ranks.

    ``payload_bytes`` is what ``playground.comm`` records: the input a rank hands in (the full
    tensor for all-reduce and reduce-scatter, the shard for all-gather).  Ring factors follow the
    nccl-tests convention: all-reduce 2(n-1)/n, reduce-scatter (n-1)/n, all-gather (n-1).
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"ring size n must be a positive integer, got {n!r}")
    factors = {"all_reduce": 2 * (n - 1) / n, "reduce_scatter_tensor": (n - 1) / n,
               "all_gather_into_tensor": float(n - 1)}
    if op not in factors:
        raise ValueError(f"no ring formula for {op!r}; known: {sorted(factors)}")
    return payload_bytes * factors[op]


def _check_split(x: torch.Tensor, dim: int, parts: int) -> None:
    if x.shape[dim] % parts:
        raise ValueError(f"dimension {dim} of size {x.shape[dim]} does not split evenly over "
                         f"{parts} ranks of the group")


def all_gather_along(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    """Concatenate every rank's ``x`` along ``dim`` in rank order (one ``all_gather_into_tensor``)."""
    t = group_size(group)
    if t == 1:
        return x
    moved = x.movedim(dim, 0).contiguous()
    out = torch.empty((t * moved.shape[0], *moved.shape[1:]), dtype=x.dtype, device=x.device)
    with warnings.catch_warnings():  # torch 2.13 renames it all_gather_single; same collective
        warnings.simplefilter("ignore", FutureWarning)
        dist.all_gather_into_tensor(out, moved, group=group)
    return out.movedim(0, dim)


def reduce_scatter_along(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    """Sum ``x`` over the group and keep this rank's 1/t slice of ``dim`` (one ``reduce_scatter_tensor``)."""
    t = group_size(group)
    if t == 1:
        return x
    _check_split(x, dim, t)
    moved = x.movedim(dim, 0).contiguous()
    out = torch.empty((moved.shape[0] // t, *moved.shape[1:]), dtype=x.dtype, device=x.device)
    with warnings.catch_warnings():  # torch 2.13 renames it reduce_scatter_single
        warnings.simplefilter("ignore", FutureWarning)
        dist.reduce_scatter_tensor(out, moved, op=dist.ReduceOp.SUM, group=group)
    return out.movedim(0, dim)


class _CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)  # same storage: f moves nothing in forward

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        if group_size(ctx.group) > 1:
            dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        out = x.contiguous().clone()
        if group_size(group) > 1:
            dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _GatherFromSP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.dim, ctx.group = dim, group
        return all_gather_along(x, dim, group)

    @staticmethod
    def backward(ctx, grad):
        return reduce_scatter_along(grad, ctx.dim, ctx.group), None, None


class _ReduceScatterToSP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, group):
        ctx.dim, ctx.group = dim, group
        return reduce_scatter_along(x, dim, group)

    @staticmethod
    def backward(ctx, grad):
        return all_gather_along(grad, ctx.dim, ctx.group), None, None


def copy_to_tp(x: torch.Tensor, group=None) -> torch.Tensor:
    """f: identity forward, all-reduce of the gradient backward (entry of a column-parallel region)."""
    return _CopyToTP.apply(x, group)


def reduce_from_tp(x: torch.Tensor, group=None) -> torch.Tensor:
    """g: all-reduce forward, identity backward (exit of a row-parallel region)."""
    return _ReduceFromTP.apply(x, group)


def gather_from_sp(x: torch.Tensor, dim: int = 1, group=None) -> torch.Tensor:
    """All-gather the sequence shards forward; reduce-scatter the gradient backward."""
    return _GatherFromSP.apply(x, dim, group)


def reduce_scatter_to_sp(x: torch.Tensor, dim: int = 1, group=None) -> torch.Tensor:
    """Reduce-scatter partial sums into sequence shards forward; all-gather the gradient backward."""
    return _ReduceScatterToSP.apply(x, dim, group)
