"""Ring collectives from point-to-point messages: reduce-scatter, all-gather, all-reduce.

The n ranks of a group stand in a logical ring: position p sends to p+1 and receives from p-1
(mod n).  A tensor of S bytes is cut into n chunks (``shard_bounds``).  Reduce-scatter takes n-1
steps; in each, every rank sends one chunk to its right neighbour and adds the chunk arriving
from its left into its own copy.  After n-1 steps position p holds the full sum of chunk p.
All-gather then circulates the finished chunks for n-1 more steps.  Each rank therefore sends
(n-1)/n·S bytes per phase and 2(n-1)/n·S for the all-reduce, *whatever n is*: every link is busy
at once and no rank is a bottleneck.

Every message is a ``dist.isend``/``dist.irecv`` pair posted together through
``dist.batch_isend_irecv`` (so ``playground.comm`` counts them exactly, and no rank blocks in a
send that its neighbour cannot receive yet).  Sums accumulate in the tensor's own dtype, as
gloo and NCCL do.
"""

from __future__ import annotations

import threading

import torch
import torch.distributed as dist

from playground.data_parallel.shards import shard_bounds

__all__ = ["simple_ring_all_reduce", "ring_reduce_scatter", "ring_all_gather",
           "ring_all_reduce", "ring_bytes_sent"]


def ring_bytes_sent(numel: int, world_size: int, element_size: int, rank: int = 0,
                    phases: int = 2) -> int:
    """Exact bytes the rank at ring position ``rank`` sends in a ring reduce-scatter
    (``phases=1``) or all-reduce (``phases=2``).

    Reduce-scatter: position p sends every chunk except chunk p (where its sum ends).
    All-gather: position p sends every chunk except chunk p+1 (the last one it receives).
    When n divides ``numel`` this is (n-1)/n · S per phase, S = numel · element_size.
    """
    if isinstance(phases, bool) or phases not in (1, 2):
        raise ValueError(f"phases must be 1 (reduce-scatter) or 2 (all-reduce), got {phases!r}")
    if isinstance(element_size, bool) or not isinstance(element_size, int) or element_size < 1:
        raise ValueError(f"element_size must be a positive integer (bytes), got {element_size!r}")
    bounds = shard_bounds(numel, world_size)
    # a ring position outside [0, n) would index another rank's chunk (or wrap round silently)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be a ring position, 0 <= rank < {world_size}, got {rank!r}")
    sizes = [e - s for s, e in bounds]
    total = 0
    n = world_size
    if phases >= 1:  # reduce-scatter: position p never sends chunk p (it ends there)
        total += sum(sizes) - sizes[rank]
    if phases >= 2:  # all-gather: position p never sends chunk p+1 (the last one it receives)
        total += sum(sizes) - sizes[(rank + 1) % n]
    return total * element_size


# ----------------------------------------------------------------------------- simple first
@torch.no_grad()
def simple_ring_all_reduce(tensor: torch.Tensor) -> torch.Tensor:
    """In-place SUM over all ranks: n-1 reduce-scatter steps, then n-1 all-gather steps."""
    r, n = dist.get_rank(), dist.get_world_size()
    chunks = tensor.view(-1).tensor_split(n)        # n views; chunk c ends summed on rank c
    for reduce in (True, False):                    # reduce-scatter, then all-gather
        for i in range(n - 1):
            send = chunks[(r - i - reduce) % n]     # to the right: the chunk we just updated
            mine = chunks[(r - i - 1 - reduce) % n]  # from the left: the chunk that comes next
            incoming = torch.empty_like(mine)
            works = [dist.isend(send, (r + 1) % n), dist.irecv(incoming, (r - 1) % n)]
            for work in works:                      # both posted before either waits: no deadlock
                work.wait()
            mine.add_(incoming) if reduce else mine.copy_(incoming)
    return tensor


# ----------------------------------------------------------------------------- helpers
def _flat(tensor, name: str) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} expects a torch.Tensor, got {type(tensor).__name__}")
    if not tensor.is_contiguous():
        raise ValueError(f"{name} works in place on a contiguous tensor; got a non-contiguous one "
                         f"of shape {tuple(tensor.shape)} (call .contiguous() and keep that copy)")
    if not dist.is_initialized():
        raise RuntimeError(f"{name} needs an initialized process group "
                           "(run it under playground.launch.run or torchrun)")
    return tensor.view(-1)


def group_members(group):
    """(this rank's position in ``group``, the group's size, position -> global rank)."""
    n = dist.get_world_size(group)
    position = dist.get_rank(group)
    if position < 0:
        raise ValueError("this rank is not a member of the group it was asked to reduce over")

    def global_rank(p):
        return p if group is None else dist.get_global_rank(group, p)
    return position, n, global_rank


def _ring(group):
    """(position, n, global rank on the right, global rank on the left) in ``group``'s ring."""
    position, n, global_rank = group_members(group)
    return position, n, global_rank((position + 1) % n), global_rank((position - 1) % n)


SEGMENT_BYTES = 2 ** 20  # big chunks travel as ~1 MiB segments so adding overlaps receiving


def _segments(lo: int, hi: int, count: int) -> list[tuple[int, int]]:
    return [(lo + a, lo + b) for a, b in shard_bounds(hi - lo, count)]


_BUFFERS = threading.local()  # per thread: (dtype, device) -> receive buffer, kept between calls


def _receive_buffer(numel: int, like: torch.Tensor) -> torch.Tensor:
    """A scratch buffer of ``numel`` elements, reused across calls: a fresh 32 MB tensor costs
    thousands of page faults on first touch, a measurable share of a 64 MB all-reduce on CPU.
    A collective runs start to finish in its calling thread, so one buffer per thread, dtype and
    device is never used twice at once."""
    cache = _BUFFERS.__dict__.setdefault("by_kind", {})
    key = (like.dtype, like.device)
    buffer = cache.get(key)
    if buffer is None or buffer.numel() < numel:
        buffer = cache[key] = torch.empty(numel, dtype=like.dtype, device=like.device)
    return buffer[:numel]


@torch.no_grad()  # like dist.all_reduce, also on tensors that require grad
def _ring_pass(flat: torch.Tensor, group, reduce: bool) -> None:
    """n-1 ring steps over ``flat``'s chunks: reduce-scatter (``reduce``) or all-gather.

    Step s sends chunk ``send(s)`` right and receives chunk ``recv(s)`` from the left, and
    ``recv(s) == send(s+1)``: what arrives (and, in reduce-scatter, is added) is what goes on
    next.  Each chunk is cut into segments, and a segment is forwarded as soon as it has arrived
    and been added, so the addition of one segment overlaps the transfer of the next instead of
    every step waiting for its whole chunk (the pipelining gloo and NCCL do too).
    """
    position, n, right, left = _ring(group)
    if n == 1 or flat.numel() == 0:
        return
    bounds = shard_bounds(flat.numel(), n)
    first = 1 if reduce else 0  # reduce-scatter: position p finishes chunk p, so it starts at p-1

    def send_chunk(step):
        return (position - step - first) % n

    largest = bounds[0][1] - bounds[0][0]
    count = max(1, -(-largest * flat.element_size() // SEGMENT_BYTES))
    stride = -(-largest // count)  # segment j of the receive buffer lives at [j*stride, ...)
    buffer = _receive_buffer(count * stride, flat) if reduce else None
    sends, recvs = [], [None] * count

    def post(step, j):
        s_lo, s_hi = _segments(*bounds[send_chunk(step)], count)[j]
        r_lo, r_hi = _segments(*bounds[send_chunk(step + 1)], count)[j]
        target = buffer[j * stride:j * stride + r_hi - r_lo] if reduce else flat[r_lo:r_hi]
        ops = []  # both neighbours compute the same sizes, so they agree which parts are empty
        if s_hi > s_lo:
            ops.append(dist.P2POp(dist.isend, flat[s_lo:s_hi], right, group, tag=j))
        if r_hi > r_lo:
            ops.append(dist.P2POp(dist.irecv, target, left, group, tag=j))
        works = dist.batch_isend_irecv(ops) if ops else []
        if s_hi > s_lo:
            sends.append(works[0])
        recvs[j] = (works[-1] if r_hi > r_lo else None, r_lo, r_hi, target)

    for j in range(count):
        post(0, j)
    for step in range(n - 1):
        for j in range(count):
            work, r_lo, r_hi, target = recvs[j]
            if work is not None:
                work.wait()
                if reduce:
                    flat[r_lo:r_hi].add_(target)
            if step + 1 < n - 1:
                post(step + 1, j)
    for work in sends:  # the next phase overwrites chunks this one sent
        work.wait()


# ----------------------------------------------------------------------------- collectives
def _reduce_scatter_flat(flat: torch.Tensor, group) -> torch.Tensor:
    _ring_pass(flat, group, reduce=True)
    position, n, _, _ = _ring(group)
    lo, hi = shard_bounds(flat.numel(), n)[position]
    return flat[lo:hi]


def _all_gather_flat(flat: torch.Tensor, group) -> torch.Tensor:
    _ring_pass(flat, group, reduce=False)
    return flat


def ring_reduce_scatter(tensor: torch.Tensor, group=None) -> torch.Tensor:
    """In place: afterwards chunk ``shard_bounds(numel, n)[r]`` of rank r holds that chunk's SUM
    over all ranks of ``group``; returns that chunk as a view.  The other chunks hold partial
    sums (scratch).  Each rank sends (n-1)/n·S bytes for S bytes of tensor.
    """
    return _reduce_scatter_flat(_flat(tensor, "ring_reduce_scatter"), group)


def ring_all_gather(tensor: torch.Tensor, group=None) -> torch.Tensor:
    """In place: on entry chunk r of rank r is valid, on exit every chunk is valid everywhere.

    Returns ``tensor``.  Each rank sends (n-1)/n·S bytes.
    """
    _all_gather_flat(_flat(tensor, "ring_all_gather"), group)
    return tensor


def ring_all_reduce(tensor: torch.Tensor, group=None) -> torch.Tensor:
    """In-place SUM over ``group`` (the contract of ``dist.all_reduce``): reduce-scatter, then
    all-gather.  Any world size, any number of elements (also 0, also fewer than ranks), any
    dtype with addition.  Each rank sends 2(n-1)/n·S bytes.  Returns ``tensor``.
    """
    flat = _flat(tensor, "ring_all_reduce")
    _reduce_scatter_flat(flat, group)
    _all_gather_flat(flat, group)
    return tensor


# ----------------------------------------------------------------------------- demo
def _checked(all_reduce, rank: int, world_size: int, numel: int) -> dict:
    """Run ``all_reduce`` on an uneven float32 tensor; assert_close against ``dist.all_reduce``;
    the bytes this rank sent, counted and by the exact formula."""
    from playground import comm
    from playground.launch import device

    x = torch.randn(numel, generator=torch.Generator().manual_seed(rank)).to(device())
    expected = x.clone()
    dist.all_reduce(expected)
    with comm.count() as moved:
        all_reduce(x)
    torch.testing.assert_close(x, expected)
    return {"sent_bytes": moved.sent_bytes, "exact": ring_bytes_sent(numel, world_size, 4, rank)}


def demo(rank: int, world_size: int, numel: int = 1_000_003) -> dict:
    """Ring all-reduce of an uneven float32 tensor, checked against dist.all_reduce."""
    out = _checked(ring_all_reduce, rank, world_size, numel)
    print(f"equal to dist.all_reduce; sent {out['sent_bytes']} B (exact formula {out['exact']} B, "
          f"2(n-1)/n*S = {2 * (world_size - 1) * numel * 4 / world_size:.0f} B)")
    return out


def check_simple_ring(rank: int, world_size: int, numel: int = 1001) -> dict:
    """``simple_ring_all_reduce`` against ``dist.all_reduce`` (assert_close); bytes counted."""
    return _checked(simple_ring_all_reduce, rank, world_size, numel)


if __name__ == "__main__":
    from playground.launch_cli import cli
    cli(demo, default_world_size=4)
