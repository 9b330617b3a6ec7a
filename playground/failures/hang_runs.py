"""Hangs: ranks that disagree about the next collective, and three ways to find out which.

``mismatched_collective`` has one rank (the culprit) call ``broadcast`` where its peers call
``all_reduce``.  On a group with a short timeout, gloo only reports, after the timeout, that a
receive never completed; with ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` (here set for the group with
``dist.set_debug_level``) every collective is first checked against the other ranks'
fingerprint (op, shapes, dtypes), and the error names both sides at once.  On the default group,
whose timeout outlasts the launcher's, the job just hangs: the launcher's ``LaunchTimeoutError``
says where each rank waits, and ``odd_one_out`` picks the rank that is not where the others are.
"""

from __future__ import annotations

import datetime
from collections import Counter

import torch
import torch.distributed as dist

from playground.launch import LaunchTimeoutError, device, run

__all__ = ["mismatched_collective", "launch_mismatch", "launch_hang", "odd_one_out"]


def _disagree(rank, culprit, group):
    t = torch.ones(4, device=device())
    if rank == culprit:
        dist.broadcast(t, 0, group=group)      # the bug: this rank took another branch
    else:
        dist.all_reduce(t, group=group)


def mismatched_collective(rank, world_size, culprit, detail, timeout_s):
    """One rank broadcasts while the others all-reduce; returns the error this rank saw."""
    if detail:
        dist.set_debug_level(dist.DebugLevel.DETAIL)   # what TORCH_DISTRIBUTED_DEBUG=DETAIL sets
    group = dist.new_group(list(range(world_size)), timeout=datetime.timedelta(seconds=timeout_s))
    try:
        _disagree(rank, culprit, group)
    except RuntimeError as exc:
        return str(exc)
    return None


def hang_on_default_group(rank, world_size, culprit):
    """The same disagreement on the default group: no rank times out before the launcher does."""
    _disagree(rank, culprit, None)


def launch_mismatch(detail: bool, world_size: int = 2, culprit: int = 1, timeout_s: float = 2.0) -> list:
    """The error text each rank reports, with or without the fingerprint check."""
    if not (isinstance(culprit, int) and 0 < culprit < world_size):
        raise ValueError(f"culprit must be a rank in [1, {world_size}) (rank 0 is the broadcast's source)")
    return run(mismatched_collective, world_size, culprit, bool(detail), timeout_s, timeout_s=60, quiet=True)


def launch_hang(world_size: int = 3, culprit: int = 1, timeout_s: float = 3.0) -> LaunchTimeoutError:
    """Run the hang under the launcher; return the ``LaunchTimeoutError`` it raises."""
    if not (isinstance(culprit, int) and 0 < culprit < world_size):
        raise ValueError(f"culprit must be a rank in [1, {world_size}) (rank 0 is the broadcast's source)")
    try:
        run(hang_on_default_group, world_size, culprit, timeout_s=timeout_s, quiet=True)
    except LaunchTimeoutError as exc:
        return exc
    raise AssertionError("the mismatched collectives completed: expected a hang")


def odd_one_out(where: dict) -> list[int]:
    """Ranks whose waiting place (op and call site) no other rank shares."""
    counts = Counter(where.values())
    return sorted(rank for rank, place in where.items() if counts[place] == 1 and len(where) > 2)
