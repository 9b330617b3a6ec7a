"""Gradient accumulation with ``no_sync``: micro-batches inside it only accumulate locally, so an
optimizer step of k micro-batches sends one all-reduce of the gradients instead of k (counted
byte for byte), and the accumulated step equals the large-batch step and torch DDP's no_sync."""

import pytest
import torch

from playground import comm
from playground.data_parallel import (ACCUMULATION_DESIGNS, BucketedDDP, accumulate_and_compare,
                                      accumulation_bytes_per_step, ring_all_reduce, ring_bytes_sent)
from playground.launch import run
from playground.model import ModelConfig

CFG = ModelConfig(d_model=16, n_layers=2)
N, K, STEPS = 3, 3, 2  # 3 ranks: chunks of uneven size, so exact counts differ from rank to rank


@pytest.fixture(scope="module")
def accumulated():
    """One launch: 2 optimizer steps of k = 3 micro-batches of 2 examples on 3 ranks, 5 designs
    (the run asserts each equals the large-batch step and torch's no_sync, or raises)."""
    return run(accumulate_and_compare, N, CFG, K, 2, STEPS, 2 * 1024)


def test_no_sync_sends_one_reduction_per_step_instead_of_k(accumulated):
    for rank, r in enumerate(accumulated):
        buckets = r["no_sync"]["buckets"]
        assert len(buckets) > 1
        one = sum(ring_bytes_sent(n, N, 4, rank) for n in buckets)  # exact, uneven chunks
        assert r["ring_bytes_per_reduction"] == one
        assert r["no_sync"]["sent_bytes_per_step"] == [one] * STEPS
        assert r["every_backward"]["sent_bytes_per_step"] == [K * one] * STEPS
        assert r["no_sync"]["reductions_per_step"] == [1] * STEPS
        assert r["every_backward"]["reductions_per_step"] == [K] * STEPS
        # the asynchronous built-in all-reduce: one call per bucket, its payload the gradients
        S = r["gradient_bytes"]
        assert r["no_sync_async"]["all_reduce_calls_per_step"] == [len(buckets)] * STEPS
        assert r["every_backward_async"]["all_reduce_calls_per_step"] == [K * len(buckets)] * STEPS
        assert r["no_sync_async"]["all_reduce_payload_per_step"] == [S] * STEPS
        assert r["every_backward_async"]["all_reduce_payload_per_step"] == [K * S] * STEPS
    # summed over the ranks, each reduction sends exactly 2(N-1) S: the mean rank sends the formula
    S = accumulated[0]["gradient_bytes"]
    for design, no_sync in (("no_sync", True), ("every_backward", False)):
        total = sum(r[design]["sent_bytes_per_step"][0] for r in accumulated)
        assert total == N * accumulation_bytes_per_step(S, N, K, no_sync)


def test_no_sync_accumulated_step_equals_large_batch_step_and_torch_no_sync(accumulated):
    for r in accumulated:  # assert_close already ran inside the ranks; here the sizes of the gaps
        assert r["global_batch"] == N * 2 * K
        for design in ACCUMULATION_DESIGNS:
            assert r[design]["max_abs_diff"] < 1e-5
        for design in ACCUMULATION_DESIGNS[:-1]:
            assert r[design]["max_abs_diff_torch"] < 1e-5


def no_sync_rank(rank, world_size):
    """Backward inside no_sync communicates nothing; finish() inside it is refused."""
    model = torch.nn.Linear(4, 2)
    ddp = BucketedDDP(model, bucket_bytes=1, all_reduce=ring_all_reduce)
    ddp.start_step()
    with comm.count() as quiet:
        with ddp.no_sync():
            model(torch.ones(3, 4) * (rank + 1)).sum().backward()
            local = model.weight.grad.clone()
            try:
                ddp.finish()
                refused = "no error"
            except RuntimeError as exc:
                refused = str(exc)
    with comm.count() as loud:
        model(torch.ones(3, 4) * (rank + 1)).sum().backward()
        ddp.finish()
    return {"quiet": quiet.summary(), "loud_sent": loud.sent_bytes, "refused": refused,
            "local": local, "averaged": model.weight.grad}


def test_no_sync_backward_communicates_nothing_and_finish_inside_it_is_refused():
    values = run(no_sync_rank, 2)
    for v in values:
        assert v["quiet"] == {"sent_bytes": 0, "received_bytes": 0, "calls": {}, "payload_bytes": {}}
        assert v["loud_sent"] == ring_bytes_sent(8, 2, 4) + ring_bytes_sent(2, 2, 4)  # weight, bias
        assert "no_sync" in v["refused"]
    # both backward passes accumulated: the average of 2 x (each rank's gradient)
    expected = (2 * values[0]["local"] + 2 * values[1]["local"]) / 2
    for v in values:
        torch.testing.assert_close(v["averaged"], expected)


def test_no_sync_bad_sizes_are_refused_before_any_communication():
    for kwargs, name in (({"accumulation_steps": 0}, "accumulation_steps"),
                         ({"micro_batch_size": -1}, "micro_batch_size"),
                         ({"steps": 0}, "steps"), ({"accumulation_steps": 1.5}, "accumulation_steps")):
        with pytest.raises(ValueError, match=name):
            accumulate_and_compare(0, 2, CFG, **kwargs)  # no process group: it must fail first
