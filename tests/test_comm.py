"""The byte counter: exact counts for a known exchange, and nothing left patched afterwards."""

import pytest
import torch
import torch.distributed as dist

import launch_workers as w
from playground import comm
from playground.launch import run


def test_counts_a_known_exchange_exactly():
    numel, n = 1000, 3
    nbytes = numel * 4
    results = run(w.exchange, n, numel)
    for rank, (traffic, restored) in enumerate(results):
        assert restored, "dist.send must be the original function after the block"
        p2p_out = 2 * nbytes if rank == 0 else 0   # send + isend from rank 0
        p2p_in = 2 * nbytes if rank == 1 else 0    # recv + irecv on rank 1
        assert traffic["sent_bytes"] == p2p_out + nbytes      # + one ring hop
        assert traffic["received_bytes"] == p2p_in + nbytes
        calls = traffic["calls"]
        assert calls["all_reduce"] == 1 and calls["all_gather_into_tensor"] == 1
        assert calls["isend"] == (2 if rank == 0 else 1)
        assert calls["irecv"] == (2 if rank == 1 else 1)
        assert traffic["payload_bytes"] == {"all_gather_into_tensor": nbytes, "all_reduce": nbytes}


def test_ring_pass_moves_n_minus_one_tensors_per_rank():
    from playground.ring_pass import pass_around_ring, predicted_bytes
    for n in (1, 2, 5):
        values = run(pass_around_ring, n, 100, quiet=True)
        assert [v["sent_bytes"] for v in values] == [predicted_bytes(n, 100)] * n
        assert [sorted(v["seen"]) for v in values] == [list(range(n))] * n


def test_nested_blocks_both_count_and_restore():
    original = dist.all_reduce
    with comm.count() as outer:
        with comm.count() as inner:
            assert dist.all_reduce is not original
        assert dist.all_reduce is not original  # outer still active
    assert dist.all_reduce is original
    assert outer.summary()["calls"] == {} and inner.sent_bytes == 0


def test_tensor_bytes():
    assert comm.tensor_bytes(torch.zeros(3, 5, dtype=torch.bfloat16)) == 30
    assert comm.tensor_bytes([torch.zeros(2), torch.zeros(3, dtype=torch.float64)]) == 32
    assert comm.tensor_bytes(None) == 0


def test_nested_counters_with_equal_counts_each_close_their_own_block():
    # at the inner block's exit both counters hold equal counts; they are still two counters
    assert run(w.nested_counts, 2, quiet=True) == [(1, 0), (1, 0)]


def test_ring_pass_refuses_an_empty_tensor_before_any_message():
    import pytest

    from playground.ring_pass import pass_around_ring, predicted_bytes
    with pytest.raises(ValueError, match="numel"):  # it reads the sender from element 0
        pass_around_ring(0, 2, 0)
    for bad in (dict(world_size=0), dict(numel=-1), dict(dtype="float32")):
        with pytest.raises(ValueError, match=next(iter(bad))):
            predicted_bytes(**(dict(world_size=2, numel=4) | bad))
    assert predicted_bytes(3, 5, torch.float16) == 20


def test_a_ring_hop_is_timed_with_its_bytes():
    from playground.ring_pass import time_ring_hop
    values = run(time_ring_hop, 2, 1024, 2, quiet=True)
    assert [v["sent_bytes"] for v in values] == [4096, 4096]
    assert all(0 < v["seconds"] < 10 for v in values)
    with pytest.raises(ValueError, match="repeats"):
        time_ring_hop(0, 2, 1024, 0)
