"""A straggler: one slow rank, and what it does to every rank of a synchronous data-parallel step.

Each step computes (a small matmul standing in for forward and backward), then all-reduces the
"gradients".  The slow rank's extra time is *emulated* with ``time.sleep(delay_s)`` before its
all-reduce -- a thermally throttled GPU, a noisy neighbour, a slow host -- because on a laptop's
shared cores real slowness would not be one rank's alone.  The all-reduce cannot finish before the
last rank joins it, so every rank's step takes at least the straggler's delay.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from playground.launch import device, run

__all__ = ["straggler_steps", "launch_straggler"]


def _step(grad, work, slow: bool, delay_s: float) -> float:
    start = time.perf_counter()
    torch.mm(work, work)                       # the step's own compute, the same on every rank
    if slow:
        time.sleep(delay_s)                    # EMULATED slowness of this one rank
    dist.all_reduce(grad)                      # synchronous data parallelism: wait for every rank
    return time.perf_counter() - start


def straggler_steps(rank, world_size, slow_rank, delay_s, steps):
    """Median step time of this rank without a straggler, then with ``slow_rank`` late by ``delay_s``."""
    dev = device()
    grad, work = torch.ones(1 << 16, device=dev), torch.ones(128, 128, device=dev)
    out = {}
    for name, slow in (("balanced", False), ("straggler", rank == slow_rank)):
        dist.barrier()
        out[name] = statistics.median(_step(grad, work, slow, delay_s) for _ in range(steps))
    return out


def launch_straggler(world_size: int = 4, slow_rank: int = 2, delay_s: float = 0.2, steps: int = 5,
                     timeout_s: float = 120.0) -> list[dict]:
    """Per-rank median step times (seconds), balanced and with one straggler."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 2:
        raise ValueError(f"a straggler needs peers: world_size must be an integer >= 2, got {world_size!r}")
    if not (isinstance(slow_rank, int) and 0 <= slow_rank < world_size):
        raise ValueError(f"slow_rank must be a rank in [0, {world_size}), got {slow_rank!r}")
    if not delay_s > 0 or not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"need delay_s > 0 and steps >= 1, got {delay_s!r}, {steps!r}")
    return run(straggler_steps, world_size, slow_rank, delay_s, steps, timeout_s=timeout_s, quiet=True)
