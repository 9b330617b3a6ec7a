"""Tensor parallelism (Megatron-LM) and sequence parallelism, built from the shared model's Block.

A column-parallel linear keeps 1/t of the *output* features (rows of ``weight``); a row-parallel
linear keeps 1/t of the *input* features (columns of ``weight``).  Put a column-parallel layer
before a row-parallel one and the activation between them never needs to be whole: the MLP
splits its 4h hidden units, attention splits its heads.  One all-reduce closes each pair in
forward (g) and one opens it in backward (f): 2 + 2 per transformer layer.

With ``sequence_parallel=True`` the block's input, its layer norms and residual adds hold only
1/t of the sequence; each all-reduce becomes a reduce-scatter (leaving a region) and an
all-gather (entering one).  The column-parallel layer keeps only its *sharded* input for
backward and gathers it again there (as Korthikanti et al. 2022 describe), so every saved
activation of the layer is divided by t.

Every module here is built from a ``playground.model.Block`` (or its parts) and copies its
weights, so it can be checked against the single-process block with ``assert_close``.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from playground.model import MLP, Attention, Block
from playground.systems_map.tp_comm import (all_gather_along, copy_to_tp, gather_from_sp, group_rank,
                                group_size, reduce_from_tp, reduce_scatter_along,
                                reduce_scatter_to_sp)

__all__ = ["ColumnParallelLinear", "RowParallelLinear", "TPAttention", "TPMLP", "TPBlock",
           "column_shard", "row_shard", "check_tp_divisible", "dtensor_block", "dtensor_local_grads"]


def column_shard(tensors, rank: int, t: int) -> torch.Tensor:
    """This rank's rows of each tensor (dim 0), concatenated: the fused q|k|v layout."""
    return torch.cat([x.chunk(t, dim=0)[rank] for x in tensors], dim=0)


def row_shard(tensor: torch.Tensor, rank: int, t: int) -> torch.Tensor:
    """This rank's columns (dim 1) of a weight."""
    return tensor.chunk(t, dim=1)[rank]


def check_tp_divisible(n_heads: int, d_model: int, d_ff: int, t: int) -> None:
    """Raise one clear error when a block cannot be split over ``t`` ranks."""
    if isinstance(t, bool) or not isinstance(t, int) or t < 1:
        raise ValueError(f"tensor-parallel size must be a positive integer, got {t!r}")
    for what, n in (("n_heads", n_heads), ("d_model", d_model), ("d_ff", d_ff)):
        if n % t:
            raise ValueError(f"{what}={n} does not split evenly over tensor-parallel size {t}")


class _GatherThenLinear(torch.autograd.Function):
    """y = linear(all_gather(x_shard)), saving only ``x_shard``: backward gathers it again."""

    @staticmethod
    def forward(ctx, x_shard, weight, bias, dim, group):
        ctx.dim, ctx.group, ctx.has_bias = dim, group, bias is not None
        ctx.save_for_backward(x_shard, weight)
        return F.linear(all_gather_along(x_shard, dim, group), weight, bias)

    @staticmethod
    def backward(ctx, grad_out):
        x_shard, weight = ctx.saved_tensors
        x_full = all_gather_along(x_shard, ctx.dim, ctx.group)  # the price of not saving it
        grad_x = reduce_scatter_along(grad_out @ weight, ctx.dim, ctx.group)
        g2 = grad_out.reshape(-1, grad_out.shape[-1])
        grad_w = g2.t() @ x_full.reshape(-1, x_full.shape[-1])
        grad_b = g2.sum(0) if ctx.has_bias else None
        return grad_x, grad_w, grad_b, None, None


class ColumnParallelLinear(nn.Module):
    """Rows ``rank`` of t of one or more ``nn.Linear`` (fused, e.g. q|k|v); output stays sharded.

    Input: replicated (TP) or a sequence shard (SP).  Output: this rank's slice of the features
    of each source layer, a tuple when several layers are fused.
    """

    def __init__(self, linears, group=None, sequence_parallel: bool = False, seq_dim: int = 1,
                 recompute_gather: bool = True):
        super().__init__()
        linears = [linears] if isinstance(linears, nn.Linear) else list(linears)
        self.group, self.t, rank = group, group_size(group), group_rank(group)
        for lin in linears:
            if lin.out_features % self.t:
                raise ValueError(f"out_features={lin.out_features} does not split evenly over "
                                 f"tensor-parallel size {self.t}")
        self.splits = [lin.out_features // self.t for lin in linears]
        self.weight = nn.Parameter(column_shard([l.weight.detach() for l in linears], rank, self.t).clone())
        has_bias = all(l.bias is not None for l in linears)
        if not has_bias and any(l.bias is not None for l in linears):  # would drop some silently
            raise ValueError("fused column-parallel layers must all have a bias or all have none")
        self.bias = (nn.Parameter(column_shard([l.bias.detach() for l in linears], rank, self.t).clone())
                     if has_bias else None)
        self.sequence_parallel, self.seq_dim = sequence_parallel, seq_dim
        self.recompute_gather = recompute_gather

    def forward(self, x):
        if not self.sequence_parallel:
            y = F.linear(copy_to_tp(x, self.group), self.weight, self.bias)
        elif self.recompute_gather:
            y = _GatherThenLinear.apply(x, self.weight, self.bias, self.seq_dim, self.group)
        else:
            y = F.linear(gather_from_sp(x, self.seq_dim, self.group), self.weight, self.bias)
        return y.split(self.splits, dim=-1) if len(self.splits) > 1 else y


class RowParallelLinear(nn.Module):
    """Columns ``rank`` of t of an ``nn.Linear``: partial sums, reduced (TP) or reduce-scattered (SP)."""

    def __init__(self, linear: nn.Linear, group=None, sequence_parallel: bool = False,
                 seq_dim: int = 1):
        super().__init__()
        self.group, self.t, rank = group, group_size(group), group_rank(group)
        if linear.in_features % self.t:
            raise ValueError(f"in_features={linear.in_features} does not split evenly over "
                             f"tensor-parallel size {self.t}")
        self.weight = nn.Parameter(row_shard(linear.weight.detach(), rank, self.t).clone())
        # the bias is added once, after the reduction: every rank holds all of it
        self.bias = nn.Parameter(linear.bias.detach().clone()) if linear.bias is not None else None
        self.sequence_parallel, self.seq_dim = sequence_parallel, seq_dim

    def forward(self, x):
        partial = F.linear(x, self.weight)
        if self.sequence_parallel:
            y = reduce_scatter_to_sp(partial, self.seq_dim, self.group)
        else:
            y = reduce_from_tp(partial, self.group)
        return y + self.bias if self.bias is not None else y


class TPAttention(nn.Module):
    """Causal attention with this rank's n_heads/t heads: fused column-parallel q|k|v, row-parallel o."""

    def __init__(self, attn: Attention, group=None, sequence_parallel: bool = False,
                 seq_dim: int = 1, recompute_gather: bool = True):
        super().__init__()
        t = group_size(group)
        if attn.n_heads % t:
            raise ValueError(f"n_heads={attn.n_heads} does not split evenly over "
                             f"tensor-parallel size {t}")
        self.head_dim = attn.wq.in_features // attn.n_heads
        self.qkv = ColumnParallelLinear([attn.wq, attn.wk, attn.wv], group, sequence_parallel,
                                        seq_dim, recompute_gather)
        self.o = RowParallelLinear(attn.wo, group, sequence_parallel, seq_dim)

    def forward(self, x):
        q, k, v = self.qkv(x)
        B, S = q.shape[0], q.shape[1]
        q, k, v = (z.view(B, S, -1, self.head_dim).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(B, S, -1))


class TPMLP(nn.Module):
    """fc1 column-parallel (d_ff/t hidden units per rank), GELU, fc2 row-parallel."""

    def __init__(self, mlp: MLP, group=None, sequence_parallel: bool = False, seq_dim: int = 1,
                 recompute_gather: bool = True):
        super().__init__()
        self.fc1 = ColumnParallelLinear(mlp.fc1, group, sequence_parallel, seq_dim, recompute_gather)
        self.fc2 = RowParallelLinear(mlp.fc2, group, sequence_parallel, seq_dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class TPBlock(nn.Module):
    """``playground.model.Block`` split over the ranks of ``group`` (same forward, same math).

    TP: input and output replicated on every rank of the group.  SP: input and output are this
    rank's contiguous 1/t of the sequence (dimension ``seq_dim``).
    """

    def __init__(self, block: Block, group=None, sequence_parallel: bool = False,
                 seq_dim: int = 1, recompute_gather: bool = True):
        super().__init__()
        t = group_size(group)
        check_tp_divisible(block.attn.n_heads, block.ln1.normalized_shape[0],
                           block.mlp.fc1.out_features, t)
        self.group, self.t, self.rank = group, t, group_rank(group)
        self.sequence_parallel, self.seq_dim = sequence_parallel, seq_dim
        self.ln1, self.ln2 = copy.deepcopy(block.ln1), copy.deepcopy(block.ln2)
        self.attn = TPAttention(block.attn, group, sequence_parallel, seq_dim, recompute_gather)
        self.mlp = TPMLP(block.mlp, group, sequence_parallel, seq_dim, recompute_gather)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))

    def replicated_parameters(self) -> list[nn.Parameter]:
        """Parameters every rank of the group holds whole (norms, row-parallel biases)."""
        return [*self.ln1.parameters(), *self.ln2.parameters(), self.attn.o.bias, self.mlp.fc2.bias]

    def finish_gradients(self) -> None:
        """SP only: each rank saw 1/t of the tokens, so sum replicated gradients over the group.

        (Under plain TP those gradients are already whole on every rank: nothing to do.)
        """
        if not self.sequence_parallel or self.t == 1:
            return
        params = [p for p in self.replicated_parameters() if p.grad is not None]
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        flat = reduce_from_tp(flat, self.group)  # one all-reduce, its own line in the count
        for p, g in zip(params, flat.split([p.numel() for p in params])):
            p.grad.copy_(g.view_as(p))

    def expected_local(self, block: Block, grads: bool = False) -> dict[str, torch.Tensor]:
        """The slices of ``block``'s weights (or gradients) this rank should hold, by name."""
        get = (lambda p: p.grad) if grads else (lambda p: p.detach())
        r, t, a, m = self.rank, self.t, block.attn, block.mlp
        out = {f"ln1.{n}": get(p) for n, p in block.ln1.named_parameters()}
        out.update({f"ln2.{n}": get(p) for n, p in block.ln2.named_parameters()})
        out["attn.qkv.weight"] = column_shard([get(a.wq.weight), get(a.wk.weight), get(a.wv.weight)], r, t)
        out["attn.qkv.bias"] = column_shard([get(a.wq.bias), get(a.wk.bias), get(a.wv.bias)], r, t)
        out["attn.o.weight"], out["attn.o.bias"] = row_shard(get(a.wo.weight), r, t), get(a.wo.bias)
        out["mlp.fc1.weight"] = column_shard([get(m.fc1.weight)], r, t)
        out["mlp.fc1.bias"] = column_shard([get(m.fc1.bias)], r, t)
        out["mlp.fc2.weight"], out["mlp.fc2.bias"] = row_shard(get(m.fc2.weight), r, t), get(m.fc2.bias)
        return out


# ----------------------------------------------------------------------------- PyTorch's own TP
def dtensor_block(block: Block, mesh, sequence_parallel: bool = False) -> Block:
    """A copy of ``block`` split by PyTorch's DTensor tensor parallelism on a 1-D ``mesh``.

    With ``sequence_parallel`` the norms run on sequence shards (``SequenceParallel``), the
    column-parallel layers gather their input from ``Shard(1)`` and the row-parallel layers
    reduce-scatter their output back to ``Shard(1)``: the block then takes and returns a DTensor
    sharded along the sequence.
    """
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)
    if not sequence_parallel:
        col, row, plan = ColwiseParallel, RowwiseParallel, {}
    else:
        def col():
            return ColwiseParallel(input_layouts=Shard(1))

        def row():
            return RowwiseParallel(output_layouts=Shard(1), use_local_output=False)
        plan = {"ln1": SequenceParallel(), "ln2": SequenceParallel()}
    plan.update({"attn.wq": col(), "attn.wk": col(), "attn.wv": col(), "attn.wo": row(),
                 "mlp.fc1": col(), "mlp.fc2": row()})
    return parallelize_module(copy.deepcopy(block), mesh, plan)


def dtensor_local_grads(dblock: Block) -> dict[str, torch.Tensor]:
    """The DTensor block's local gradient shards, named and laid out like ``TPBlock``'s."""
    def local(p):
        g = p.grad
        if not hasattr(g, "to_local"):
            return g
        # a replicated weight under SP has a Partial gradient: sum it, as finish_gradients does
        return g.full_tensor() if any(pl.is_partial() for pl in g.placements) else g.to_local()
    a, m = dblock.attn, dblock.mlp
    out = {f"ln1.{n}": local(p) for n, p in dblock.ln1.named_parameters()}
    out.update({f"ln2.{n}": local(p) for n, p in dblock.ln2.named_parameters()})
    out["attn.qkv.weight"] = torch.cat([local(a.wq.weight), local(a.wk.weight), local(a.wv.weight)])
    out["attn.qkv.bias"] = torch.cat([local(a.wq.bias), local(a.wk.bias), local(a.wv.bias)])
    out["attn.o.weight"], out["attn.o.bias"] = local(a.wo.weight), local(a.wo.bias)
    out["mlp.fc1.weight"], out["mlp.fc1.bias"] = local(m.fc1.weight), local(m.fc1.bias)
    out["mlp.fc2.weight"], out["mlp.fc2.bias"] = local(m.fc2.weight), local(m.fc2.bias)
    return out
