"""HSDP (hybrid sharded data parallelism): ZeRO-3 inside a group, plain replication across groups.

The N ranks stand on a 2-D grid of ``replicas`` rows and ``shards`` columns, rank
``r = row·shards + column`` (the layout of ``init_device_mesh(..., (replicas, shards))``):

* each row is a *shard group*: its ``shards`` ranks hold one copy of the model states between
  them, as ZeRO-3 does: parameters all-gathered for each unit's forward and backward, gradients
  reduce-scattered, over the row only;
* each column is a *replica group*: the ``replicas`` ranks holding the same shard.  After the
  row's reduce-scatter, each rank all-reduces its gradient shard over its column, so that every
  shard ends up summed over all N ranks (and Adam's update is the full-batch one).

Put a row on the fast links (one node's NVLink) and only the shard all-reduce crosses the slow
ones: Ψ/shards elements per rank instead of every ZeRO-3 gather and reduce-scatter
(hybrid sharding in Zhao et al., 2023).  Memory per rank is ZeRO-3's with N_d = shards.

``HSDP`` is ``ZeroDP`` stage 3 on the row's group with that one extra reduction, counted apart
(``inter_sent_bytes``) so the two kinds of link can be set beside their formulas.
"""

from __future__ import annotations

import torch.distributed as dist

from playground import comm
from playground.data_parallel.ring import ring_all_reduce
from playground.zero.zero_dp import ZeroDP

__all__ = ["HSDP", "check_grid", "grid_groups"]


def check_grid(world_size: int, shards: int) -> int:
    """The number of replicas of a ``world_size`` = replicas × ``shards`` grid; ValueError if
    ``shards`` does not divide ``world_size``."""
    for name, value in (("world_size", world_size), ("shards", shards)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if world_size % shards:
        raise ValueError(f"shards={shards} does not divide world_size={world_size}: HSDP needs "
                         "a full grid of replicas x shards ranks")
    return world_size // shards


def grid_groups(shards: int):
    """(this rank's shard group = its row, its replica group = its column).  Every rank must
    create every group, in the same order, so all rows and columns are made here."""
    world = dist.get_world_size()
    replicas = check_grid(world, shards)
    rows = [dist.new_group([row * shards + c for c in range(shards)]) for row in range(replicas)]
    columns = [dist.new_group([row * shards + c for row in range(replicas)]) for c in range(shards)]
    rank = dist.get_rank()
    return rows[rank // shards], columns[rank % shards]


class HSDP(ZeroDP):
    """ZeRO stage 3 over this rank's row of ``shards`` ranks, gradient shards all-reduced over
    its column of replicas (see module doc).  ``step`` and ``accumulate_step`` report, besides
    ``sent_bytes`` (both kinds of link), ``inter_sent_bytes``: what went over the column."""

    def __init__(self, model, shards: int, precision: str = "mixed", *, lr: float = 1e-3,
                 betas=(0.9, 0.999), eps: float = 1e-8):
        if not dist.is_initialized():
            raise RuntimeError("HSDP needs an initialized process group "
                               "(run it under playground.launch.run or torchrun)")
        self.replicas = check_grid(dist.get_world_size(), shards)  # before any group is made
        row, column = grid_groups(shards)
        super().__init__(model, 3, precision, lr=lr, betas=betas, eps=eps, group=row)
        self.replica_group = column
        self.grad_divisor = self.n * self.replicas  # the gradient is summed over all N ranks
        self.inter_sent_bytes = 0

    def _reduce(self, u, flat):
        shard = super()._reduce(u, flat)             # over the row: the fast links
        with comm.count() as across:                 # nested in step's count: seen by both
            ring_all_reduce(shard, self.replica_group)  # over the column: Ψ/shards elements
        self.inter_sent_bytes += across.sent_bytes
        return shard

    def accumulate_step(self, micro_batches, loss_fn) -> dict:
        before = self.inter_sent_bytes
        out = super().accumulate_step(micro_batches, loss_fn)
        out["inter_sent_bytes"] = self.inter_sent_bytes - before
        return out
