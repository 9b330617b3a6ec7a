"""Module-level rank functions the launcher tests run (children import them by name)."""

import os
import time

import torch
import torch.distributed as dist


def rank_and_size(rank, world_size, offset=0):
    return (rank + offset, world_size, dist.get_world_size(), torch.get_num_threads())


def sum_of_ranks(rank, world_size):
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    print(f"sum is {t.item():g}")
    return t.item()


def chatty(rank, world_size):
    for i in range(3):
        print(f"line {i}")
    return rank


def raise_on(rank, world_size, bad_rank):
    if rank == bad_rank:
        raise ValueError(f"boom from rank {rank}")
    dist.barrier()  # the healthy ranks wait for the bad one, as in a real collective
    return rank


def hang_on(rank, world_size, bad_rank):
    if rank == bad_rank:
        time.sleep(3600)
    dist.barrier()
    return rank


def exit_on(rank, world_size, bad_rank, code=3):
    if rank == bad_rank:
        os._exit(code)
    dist.barrier()
    return rank


def abort_on(rank, world_size, bad_rank):
    """Die like a native crash: a reason on stderr, then SIGABRT (no Python exception)."""
    if rank == bad_rank:
        os.write(2, b"enforce fail: received 96 bytes, expected 64\n")
        os.abort()
    dist.barrier()
    return rank


def unpicklable_on(rank, world_size, bad_rank):
    return (lambda: rank) if rank == bad_rank else rank


def pid(rank, world_size):
    return os.getpid()


def sleep_then_pid(rank, world_size, seconds, pid_dir):
    """Leave our pid where the test can find it, then sleep (a long-running rank)."""
    with open(os.path.join(pid_dir, f"rank{rank}.pid"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(seconds)
    return os.getpid()


def exchange(rank, world_size, numel):
    """Rank 0 sends numel float32 to rank 1 twice (blocking and non-blocking); all then all-reduce."""
    from playground import comm
    t = torch.ones(numel)
    before = dist.send
    with comm.count() as moved:
        if rank == 0:
            dist.send(t, 1)
            dist.isend(t, 1).wait()
        elif rank == 1:
            dist.recv(t, 0)
            dist.irecv(t, 0).wait()
        ops = [dist.P2POp(dist.isend, t, (rank + 1) % world_size),
               dist.P2POp(dist.irecv, torch.empty_like(t), (rank - 1) % world_size)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        dist.all_reduce(t)
        out = torch.empty(numel * world_size)
        dist.all_gather_into_tensor(out, t)
    return moved.summary(), dist.send is before  # the counter is gone once the block ends


def nested_counts(rank, world_size):
    """An inner count() that saw nothing inside an outer one that then sees an all_reduce."""
    from playground import comm
    t = torch.ones(4)
    with comm.count() as outer:
        with comm.count() as inner:
            pass
        dist.all_reduce(t)
    return dict(outer.calls).get("all_reduce", 0), dict(inner.calls).get("all_reduce", 0)
