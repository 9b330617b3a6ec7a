"""The opening demo: every rank's tensor travels once around a ring of ranks.

Rank r sends to r+1 and receives from r-1 (mod n).  After n-1 hops every rank has seen every
other rank's tensor, and each rank has sent and received exactly (n-1)·S bytes for a tensor of
S bytes, whatever n is.  Run it: ``python -m playground.ring_pass --nproc 4`` or under torchrun.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from playground import comm
from playground.launch import device
from playground.launch_cli import cli

__all__ = ["pass_around_ring", "predicted_bytes", "time_ring_hop", "trivial"]


def trivial(rank: int, world_size: int) -> int:
    """The cheapest rank function: timing it times the launch itself (chapter 0, ``bench launch``)."""
    return rank


def _check_numel(numel, least: int = 0) -> None:
    # pass_around_ring reads the sender's rank from element 0: it needs at least one element
    if isinstance(numel, bool) or not isinstance(numel, int) or numel < least:
        raise ValueError(f"numel must be an integer >= {least}, got {numel!r}")


def predicted_bytes(world_size: int, numel: int, dtype: torch.dtype = torch.float32) -> int:
    """Bytes each rank sends (and receives) when every tensor goes once around the ring."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an integer >= 1, got {world_size!r}")
    _check_numel(numel)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype must be a torch.dtype, got {dtype!r}")
    return (world_size - 1) * numel * torch.tensor([], dtype=dtype).element_size()


def pass_around_ring(rank: int, world_size: int, numel: int = 1024) -> dict:
    """Pass tensors around the ring n-1 times; return what this rank saw and moved."""
    _check_numel(numel, least=1)  # every rank refuses alike, before any message is posted
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    current = torch.full((numel,), float(rank), device=device())
    incoming = torch.empty_like(current)
    seen = [rank]
    with comm.count() as moved:
        for _ in range(world_size - 1):
            # post the receive and the send together: blocking send-then-recv on every rank
            # at once can deadlock once messages outgrow the transport's buffers
            ops = [dist.P2POp(dist.isend, current, right), dist.P2POp(dist.irecv, incoming, left)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
            current, incoming = incoming, current
            seen.append(int(current[0].item()))
    print(f"saw tensors from ranks {seen}; sent {moved.sent_bytes} B, "
          f"received {moved.received_bytes} B")
    return {"seen": seen, **moved.summary()}


def time_ring_hop(rank: int, world_size: int, numel: int = 1 << 22, repeats: int = 5) -> dict:
    """Time one hop of the ring with a large float32 tensor: every rank sends ``numel`` elements
    to its right neighbour while receiving as many from its left.  Returns the bytes sent and
    the best of ``repeats`` times (after one warm-up hop): the link's own speed, not the load."""
    _check_numel(numel, least=1)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    outgoing = torch.ones(numel, device=device())
    incoming = torch.empty_like(outgoing)
    times = []
    for i in range(repeats + 1):
        dist.barrier()  # start together: a hop cannot finish before the slowest rank posts
        start = time.perf_counter()
        ops = [dist.P2POp(dist.isend, outgoing, right), dist.P2POp(dist.irecv, incoming, left)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        if i:  # the first hop sets the connection up
            times.append(time.perf_counter() - start)
    return {"sent_bytes": outgoing.numel() * outgoing.element_size(), "seconds": min(times)}


def _report(values) -> None:
    n = len(values)
    numel = 1024
    print(f"{n} ranks, one float32 tensor of {numel} elements each: "
          f"predicted {predicted_bytes(n, numel)} B sent per rank, "
          f"measured {sorted({v['sent_bytes'] for v in values})}")


if __name__ == "__main__":
    cli(pass_around_ring, default_world_size=4, report=_report)
