"""DDP from scratch: both designs end every step with the parameters of single-process full-batch
training and of torch's DistributedDataParallel; buckets follow backward; the timeline is real."""

import pytest
import torch

from playground.data_parallel import BucketedDDP, allreduce_gradients, plan_buckets
from playground.data_parallel import DESIGNS, time_steps, train_and_compare
from playground.launch import run
from playground.model import ModelConfig, build_model

CFG = ModelConfig()


def unused_parameter(rank, world_size):
    """A parameter that gets no gradient leaves its bucket unfilled: one clear error."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
    ddp = BucketedDDP(model, bucket_bytes=1)
    ddp.start_step()
    model[0](torch.ones(2, 4)).sum().backward()  # model[1] is never used
    try:
        ddp.finish()
    except RuntimeError as exc:
        return str(exc)
    return "no error"


class Transposed(torch.nn.Module):
    """A weight stored transposed: its gradient is non-contiguous, like the weight."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(12.0).view(3, 4).t())
        self.scale = torch.nn.Parameter(torch.tensor(0.5))  # 0-dim

    def forward(self, x):
        return (x @ self.w).sum() * self.scale


def transposed_weights(rank, world_size):
    """Both designs average non-contiguous gradients (torch DDP does) instead of failing."""
    grads = []
    for design in ("per_gradient", "bucketed"):
        model = Transposed()
        ddp = BucketedDDP(model, bucket_bytes=1) if design == "bucketed" else None
        if ddp:
            ddp.start_step()
        model(torch.full((2, 4), float(rank + 1))).backward()
        ddp.finish() if ddp else allreduce_gradients(model)
        grads.append([model.w.grad, model.scale.grad])
    return grads


def test_three_designs_equal_single_process_training_on_3_ranks():
    values = run(train_and_compare, 3, CFG, 3, 6, 8 * 1024)
    for rank_result in values:
        assert set(rank_result) == set(DESIGNS)
        losses = rank_result["per_gradient"]["losses"]
        for design in DESIGNS:  # same slices, same weights: the same losses on every design
            assert rank_result[design]["losses"] == pytest.approx(losses, rel=1e-5)
        buckets = rank_result["bucketed"]["buckets"]
        assert buckets > 1
        assert rank_result["bucketed"]["all_reduces_per_step"] == buckets
        assert rank_result["per_gradient"]["all_reduces_per_step"] == \
            len(list(build_model(CFG).parameters()))


def test_timeline_shows_buckets_launched_during_backward():
    cfg = ModelConfig(d_model=32, n_layers=2)
    values = run(time_steps, 2, cfg, 4, 4 * 1024, 1)
    for v in values:
        events = v["events"]
        kinds = [k for k, _, _ in events]
        backward_end = next(t for k, _, t in events if k == "backward_end")
        launches = {i: t for k, i, t in events if k == "launch"}
        done = {i: t for k, i, t in events if k == "done"}
        assert sorted(launches) == sorted(done) == list(range(len(v["bucket_bytes"])))
        assert all(launches[i] <= done[i] for i in launches)
        assert min(launches.values()) < backward_end  # communication starts inside backward
        # backward runs last layer first, so buckets (packed in reverse definition order)
        # launch in index order: bucket 0 holds the output layer's gradients
        assert sorted(launches, key=launches.get) == sorted(launches)
        assert kinds[-1] == "finished"
        assert sum(v["bucket_bytes"]) == 4 * v["param_count"]
        assert set(v["median_s"]) == set(DESIGNS)


def test_plan_buckets_follows_order_and_size():
    params = [torch.zeros(n) for n in (10, 10, 30, 5, 5)]
    plan = plan_buckets(params, bucket_bytes=80)
    assert [[p.numel() for p in b] for b in plan] == [[10, 10], [30], [5, 5]]
    assert [[p.numel() for p in b] for b in plan_buckets(params, 10 ** 9)] == [[10, 10, 30, 5, 5]]
    mixed = [torch.zeros(2), torch.zeros(2, dtype=torch.float64)]
    assert len(plan_buckets(mixed, 10 ** 9)) == 2  # one flat buffer per dtype
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="bucket_bytes"):
            plan_buckets(params, bad)


def test_bad_models_and_unused_parameters_are_named():
    with pytest.raises(ValueError, match="trainable parameter"):
        BucketedDDP(torch.nn.ReLU())
    message = run(unused_parameter, 2)[0]
    assert "never filled" in message and "unused" in message


def test_non_contiguous_gradients_are_averaged_by_both_designs():
    world_size = 3
    expected = []  # the mean over ranks of each rank's own gradient
    for rank in range(world_size):
        model = Transposed()
        model(torch.full((2, 4), float(rank + 1))).backward()
        expected.append([model.w.grad / world_size, model.scale.grad / world_size])
    expected = [sum(g[i] for g in expected) for i in range(2)]
    for per_rank in run(transposed_weights, world_size):
        for grads in per_rank:  # per_gradient, bucketed
            assert not grads[0].is_contiguous()
            for got, want in zip(grads, expected):
                torch.testing.assert_close(got, want)


def test_bad_run_arguments_are_named_before_any_communication():
    from playground.data_parallel import overlap_summary
    with pytest.raises(ValueError, match="steps"):
        train_and_compare(0, 1, CFG, 0)  # zero steps: nothing to compare
    with pytest.raises(ValueError, match="batch_size"):
        train_and_compare(0, 3, CFG, 1, 0)
    with pytest.raises(ValueError, match="backward_start"):
        overlap_summary([("launch", 0, 0.1), ("done", 0, 0.2), ("backward_end", -1, 0.3),
                         ("finished", -1, 0.4)])
