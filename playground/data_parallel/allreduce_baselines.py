"""The all-reduces that came before the ring, built from the same point-to-point messages.

* ``parameter_server_all_reduce``: every worker pushes its whole tensor to one server rank, which
  adds them and pushes the sum back.  The server moves (n-1)·S bytes each way: its link is the
  bottleneck, and it grows with the number of workers n.
* ``sharded_parameter_server_all_reduce``: k servers, each owning 1/k of the tensor
  (``shard_bounds``).  Each server now moves (n-1)·S/k bytes each way; with k = n every rank is a
  server for its own chunk and the traffic per rank equals the ring's, but every server still
  talks to n-1 peers at once (n-1 message latencies, an incast of n-1 flows).
* ``tree_all_reduce``: the classic reduce-to-a-root-then-broadcast, each along a binomial tree:
  only ⌈log2 n⌉ message latencies per phase, but each message carries the whole tensor, so the
  root moves ⌈log2 n⌉·S bytes each way.

All three have the contract of ``dist.all_reduce`` (in-place SUM, any world size, any numel,
``group`` support); ``sent_bytes`` gives the exact bytes each rank sends in each algorithm.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from playground.data_parallel.ring import _flat, group_members, ring_bytes_sent
from playground.data_parallel.shards import shard_bounds

__all__ = ["parameter_server_all_reduce", "sharded_parameter_server_all_reduce",
           "tree_all_reduce", "sent_bytes", "tree_children"]


def _check_position(value, n, name):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n:
        raise ValueError(f"{name} must be a rank of the group, 0 <= {name} < {n}, got {value!r}")


def _wait(ops):
    for work in (dist.batch_isend_irecv(ops) if ops else []):
        work.wait()


# ----------------------------------------------------------------------------- parameter server
@torch.no_grad()  # like dist.all_reduce, also on tensors that require grad
def parameter_server_all_reduce(tensor: torch.Tensor, server: int = 0, group=None) -> torch.Tensor:
    """In-place SUM through one server rank: push to the server, it reduces, it pushes back."""
    flat = _flat(tensor, "parameter_server_all_reduce")
    position, n, global_rank = group_members(group)
    _check_position(server, n, "server")
    if n == 1 or flat.numel() == 0:
        return tensor
    if position != server:
        _wait([dist.P2POp(dist.isend, flat, global_rank(server), group)])
        _wait([dist.P2POp(dist.irecv, flat, global_rank(server), group)])
        return tensor
    workers = [p for p in range(n) if p != server]
    inbox = [torch.empty_like(flat) for _ in workers]  # all n-1 pushes arrive at once
    _wait([dist.P2POp(dist.irecv, buf, global_rank(p), group) for buf, p in zip(inbox, workers)])
    for buf in inbox:
        flat.add_(buf)
    _wait([dist.P2POp(dist.isend, flat, global_rank(p), group) for p in workers])
    return tensor


@torch.no_grad()  # like dist.all_reduce, also on tensors that require grad
def sharded_parameter_server_all_reduce(tensor: torch.Tensor, servers: int | None = None,
                                        group=None) -> torch.Tensor:
    """In-place SUM with ``servers`` = k server ranks (0..k-1, default n), server s owning chunk s
    of ``shard_bounds(numel, k)``: everyone pushes chunk s to server s, which reduces it and
    pushes it back to everyone.
    """
    flat = _flat(tensor, "sharded_parameter_server_all_reduce")
    position, n, global_rank = group_members(group)
    servers = n if servers is None else servers
    if isinstance(servers, bool) or not isinstance(servers, int) or not 1 <= servers <= n:
        raise ValueError(f"servers must be an integer between 1 and the group size {n}, "
                         f"got {servers!r}")
    if n == 1 or flat.numel() == 0:
        return tensor
    bounds = shard_bounds(flat.numel(), servers)
    others = [p for p in range(n) if p != position]
    mine = bounds[position] if position < servers else None
    # phase 1, push: chunk s to server s; a server receives its chunk from every other rank
    ops = [dist.P2POp(dist.isend, flat[lo:hi], global_rank(s), group)
           for s, (lo, hi) in enumerate(bounds) if s != position and hi > lo]
    inbox = []
    if mine is not None and mine[1] > mine[0]:
        inbox = [torch.empty(mine[1] - mine[0], dtype=flat.dtype, device=flat.device)
                 for _ in others]
        ops += [dist.P2POp(dist.irecv, buf, global_rank(p), group) for buf, p in zip(inbox, others)]
    _wait(ops)
    for buf in inbox:
        flat[mine[0]:mine[1]].add_(buf)
    # phase 2, pull: server s sends its reduced chunk to every other rank
    ops = [dist.P2POp(dist.irecv, flat[lo:hi], global_rank(s), group)
           for s, (lo, hi) in enumerate(bounds) if s != position and hi > lo]
    if inbox:
        ops += [dist.P2POp(dist.isend, flat[mine[0]:mine[1]], global_rank(p), group)
                for p in others]
    _wait(ops)
    return tensor


# ----------------------------------------------------------------------------- binomial tree
def tree_children(v: int, n: int) -> list[int]:
    """Children of relative position v (root 0) in the binomial tree over n positions.

    v's parent is v minus its lowest set bit; its children are v + m for every power of two m
    below that bit (any power of two for the root) with v + m < n.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    _check_position(v, n, "v")
    low = v & -v if v else 1 << max(n - 1, 1).bit_length()
    children, m = [], low >> 1
    while m:
        if v + m < n:
            children.append(v + m)
        m >>= 1
    return children


@torch.no_grad()  # like dist.all_reduce, also on tensors that require grad
def tree_all_reduce(tensor: torch.Tensor, root: int = 0, group=None) -> torch.Tensor:
    """In-place SUM: reduce to ``root`` up a binomial tree, then broadcast back down it."""
    flat = _flat(tensor, "tree_all_reduce")
    position, n, global_rank = group_members(group)
    _check_position(root, n, "root")
    if n == 1 or flat.numel() == 0:
        return tensor
    v = (position - root) % n

    def peer(u):
        return global_rank((u + root) % n)
    children = tree_children(v, n)
    parent = v - (v & -v) if v else None
    buffer = torch.empty_like(flat) if children else None
    for child in reversed(children):  # nearest child first: its subtree is the smallest
        _wait([dist.P2POp(dist.irecv, buffer, peer(child), group)])
        flat.add_(buffer)
    if parent is not None:
        _wait([dist.P2POp(dist.isend, flat, peer(parent), group)])
        _wait([dist.P2POp(dist.irecv, flat, peer(parent), group)])
    _wait([dist.P2POp(dist.isend, flat, peer(child), group) for child in children])
    return tensor


# ----------------------------------------------------------------------------- exact byte counts
def sent_bytes(algorithm: str, numel: int, world_size: int, element_size: int, rank: int,
               **options) -> int:
    """Exact bytes rank ``rank`` sends in one all-reduce of ``numel`` elements.

    ``algorithm`` is ``ring``, ``parameter_server`` (option ``server``), ``sharded_ps``
    (option ``servers``) or ``tree`` (option ``root``).
    """
    n, S = world_size, numel * element_size
    # check everything before the early return, so a typo is never answered with "0 bytes"
    allowed = {"ring": (), "parameter_server": ("server",), "sharded_ps": ("servers",),
               "tree": ("root",)}
    if algorithm not in allowed:
        raise ValueError(f"unknown algorithm {algorithm!r}; "
                         "expected ring, parameter_server, sharded_ps or tree")
    unknown = sorted(set(options) - set(allowed[algorithm]))
    if unknown:
        raise ValueError(f"{algorithm} takes no option {unknown[0]!r} "
                         f"(its options: {list(allowed[algorithm]) or 'none'})")
    ring_bytes_sent(numel, n, element_size, rank)  # validates numel, n, element_size and rank
    server, root = options.get("server", 0), options.get("root", 0)
    k = n if options.get("servers") is None else options["servers"]  # None: every rank serves
    if algorithm == "parameter_server":
        _check_position(server, n, "server")
    if algorithm == "tree":
        _check_position(root, n, "root")
    if algorithm == "sharded_ps" and (isinstance(k, bool) or not isinstance(k, int)
                                      or not 1 <= k <= n):
        raise ValueError(f"servers must be an integer between 1 and the group size {n}, got {k!r}")
    if n == 1 or numel == 0:
        return 0
    if algorithm == "ring":
        return ring_bytes_sent(numel, n, element_size, rank)
    if algorithm == "parameter_server":
        return (n - 1) * S if rank == server else S
    if algorithm == "sharded_ps":
        sizes = [(hi - lo) * element_size for lo, hi in shard_bounds(numel, k)]
        pushed = sum(size for s, size in enumerate(sizes) if s != rank)
        return pushed + ((n - 1) * sizes[rank] if rank < k else 0)
    v = (rank - root) % n  # tree
    return S * ((1 if v else 0) + len(tree_children(v, n)))
