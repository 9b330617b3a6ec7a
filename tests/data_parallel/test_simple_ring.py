"""The 15-line ring all-reduce of chapter 1: equal to dist.all_reduce, 2(n-1)/n·S bytes per rank."""

import pytest
import torch
import torch.distributed as dist

from playground import comm
from playground.data_parallel import ring_bytes_sent, simple_ring_all_reduce
from playground.launch import run

SIZES = (4, 7, 12, 1001, 4096)   # odd and uneven sizes (n does not divide them) and even ones


def simple_ring_cases(rank, world_size):
    """Every size: the simple ring against dist.all_reduce; bytes sent counted by comm."""
    report = {}
    for numel in SIZES:
        x = torch.randn(numel, generator=torch.Generator().manual_seed(1000 * numel + rank),
                        dtype=torch.float64)
        ours, builtin = x.clone(), x.clone()
        with comm.count() as moved:
            out = simple_ring_all_reduce(ours)
        dist.all_reduce(builtin)
        assert out is ours
        torch.testing.assert_close(ours, builtin, msg=f"numel={numel} n={world_size}")
        report[numel] = (moved.sent_bytes, moved.received_bytes)
    return report


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_equal_to_dist_all_reduce_and_bytes_counted(world_size):
    reports = run(simple_ring_cases, world_size, timeout_s=120, quiet=True)
    for numel in SIZES:
        S = numel * 8                                   # float64
        sent = [reports[r][numel][0] for r in range(world_size)]
        received = [reports[r][numel][1] for r in range(world_size)]
        # same chunks and steps as the segmented ring: the same exact bytes, rank by rank
        assert sent == [ring_bytes_sent(numel, world_size, 8, r) for r in range(world_size)]
        assert received == [sent[(r - 1) % world_size] for r in range(world_size)]
        assert sum(sent) == 2 * (world_size - 1) * S   # in total exactly 2(n-1)·S
        if numel % world_size == 0:                     # and per rank exactly 2(n-1)/n·S
            assert sent == [2 * (world_size - 1) * S // world_size] * world_size


def test_needs_a_process_group():
    with pytest.raises((RuntimeError, ValueError)):
        simple_ring_all_reduce(torch.ones(4))
