"""Data-parallel training runs, checked and timed: the rank functions behind the DDP section.

``train_and_compare`` trains the shared model for a few steps four ways — single process on the
full batch (the reference), ``allreduce_gradients``, ``BucketedDDP`` and torch's
``DistributedDataParallel`` — and asserts that every data-parallel run ends with the reference's
parameters.  ``time_steps`` times training steps of the three data-parallel designs, interleaved,
and returns one step's real event timeline of ``BucketedDDP``.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from playground import comm
from playground.data_parallel.ddp import BucketedDDP, allreduce_gradients
from playground.launch import device
from playground.model import ModelConfig, build_model, loss_fn, shard_batch, synthetic_batch
from playground.data_parallel.ring import ring_all_reduce

__all__ = ["train_and_compare", "time_steps", "overlap_summary", "DESIGNS", "DDP_CONFIG"]

DESIGNS = ("per_gradient", "bucketed", "torch_ddp")
# the model whose DDP steps the chapter times (and its overlap figure draws): 4 layers, d = 128
DDP_CONFIG = ModelConfig(vocab=256, d_model=128, n_heads=4, n_layers=4, seq_len=32)


class _Trainer:
    """One data-parallel design: a model replica, its optimizer and its gradient averaging."""

    def __init__(self, design: str, cfg: ModelConfig, bucket_bytes: int, lr: float,
                 all_reduce=None):
        model = build_model(cfg, seed=0, device=device())
        self.design, self.ddp, self.all_reduce = design, None, all_reduce or ring_all_reduce
        self.all_reduce_calls = 0  # the per-gradient design's all-reduces in the last step
        if design == "bucketed":
            self.ddp = BucketedDDP(model, bucket_bytes=bucket_bytes)
        elif design == "torch_ddp":
            model = DistributedDataParallel(model, bucket_cap_mb=bucket_bytes / 2 ** 20)
        elif design != "per_gradient":
            raise ValueError(f"unknown design {design!r}; expected one of {DESIGNS}")
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def step(self, batch) -> float:
        inputs, targets = batch
        self.opt.zero_grad(set_to_none=True)
        if self.ddp:
            self.ddp.start_step()
        loss = loss_fn(self.model(inputs), targets)
        if self.ddp:
            self.ddp.mark("backward_start")
        loss.backward()
        if self.design == "per_gradient":
            self.all_reduce_calls = 0
            allreduce_gradients(self.model, self._counted_all_reduce)
        elif self.ddp:
            self.ddp.finish()
        self.opt.step()
        return loss.item()

    def _counted_all_reduce(self, tensor, group=None):
        self.all_reduce_calls += 1
        return self.all_reduce(tensor, group=group)

    def parameters(self):
        module = self.model.module if self.design == "torch_ddp" else self.model
        return dict(module.named_parameters())


def _builtin(tensor, group=None):
    return dist.all_reduce(tensor, group=group)


def _local_batch(cfg, batch_size, step, rank, world_size):
    batch = synthetic_batch(cfg, batch_size, step)
    return tuple(t.to(device()) for t in shard_batch(batch, rank, world_size))


def train_and_compare(rank: int, world_size: int, cfg: ModelConfig, steps: int = 3,
                      batch_size: int = 8, bucket_bytes: int = 16 * 1024, lr: float = 0.1) -> dict:
    """k steps four ways; asserts each data-parallel run equals the single-process reference,
    and our two designs equal torch's DistributedDataParallel.

    Returns per design: the largest parameter difference from the reference, the losses of
    rank 0's slices, and the number of all-reduces one step launched.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1 \
            or batch_size % world_size:
        raise ValueError(f"batch_size={batch_size!r} must be a positive multiple of the "
                         f"{world_size} ranks")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")  # the last step is read
    reference = build_model(cfg, seed=0, device=device())
    ref_opt = torch.optim.SGD(reference.parameters(), lr=lr, momentum=0.9)
    for step in range(steps):
        inputs, targets = (t.to(device()) for t in synthetic_batch(cfg, batch_size, step))
        ref_opt.zero_grad(set_to_none=True)
        loss_fn(reference(inputs), targets).backward()
        ref_opt.step()
    expected = dict(reference.named_parameters())
    out, finals = {}, {}
    for design in DESIGNS:
        trainer = _Trainer(design, cfg, bucket_bytes, lr)
        losses = []
        for step in range(steps):
            with comm.count() as moved:
                losses.append(trainer.step(_local_batch(cfg, batch_size, step, rank, world_size)))
        got = finals[design] = trainer.parameters()
        for name, p in expected.items():
            torch.testing.assert_close(got[name], p, msg=lambda m, n=name: f"{design} {n}: {m}")
        calls = moved.calls
        out[design] = {
            "max_abs_diff": max((got[n] - p).abs().max().item() for n, p in expected.items()),
            "losses": losses,
            # the last step's all-reduce calls: the per-gradient design's ring all-reduces show
            # up in the counter only as point-to-point messages, so its trainer counts its calls;
            # torch DDP calls its all-reduces from C++, out of the counter's sight: None
            "all_reduces_per_step": {"per_gradient": trainer.all_reduce_calls,
                                     "bucketed": calls.get("all_reduce", 0)}.get(design),
            "buckets": len(trainer.ddp.buckets) if trainer.ddp else None,
        }
    for design in ("per_gradient", "bucketed"):  # and equal to PyTorch's production DDP
        for name, p in finals["torch_ddp"].items():
            torch.testing.assert_close(finals[design][name], p,
                                       msg=lambda m, n=name, d=design: f"{d} vs torch DDP {n}: {m}")
    return out


def time_steps(rank: int, world_size: int, cfg: ModelConfig, batch_size: int = 16,
               bucket_bytes: int = 256 * 1024, rounds: int = 5) -> dict:
    """Median step time of each design (interleaved rounds, after one warm-up step each), the
    event timeline of ``BucketedDDP``'s median step on this rank, and per round the share of its
    communication that ran during backward."""
    # all three average with the same built-in all-reduce, so only bucketing and overlap differ
    trainers = {d: _Trainer(d, cfg, bucket_bytes, lr=0.01, all_reduce=_builtin) for d in DESIGNS}
    batch = _local_batch(cfg, batch_size, 0, rank, world_size)
    for t in trainers.values():
        t.step(batch)
    samples = {d: [] for d in DESIGNS}
    ddp, timelines = trainers["bucketed"].ddp, []
    for r in range(rounds):
        for k in range(len(DESIGNS)):
            design = DESIGNS[(k + r) % len(DESIGNS)]
            dist.barrier()
            start = time.perf_counter()
            trainers[design].step(batch)
            samples[design].append(time.perf_counter() - start)
            if design == "bucketed":
                timelines.append(list(ddp.events))
    times = torch.tensor([samples[d] for d in DESIGNS], dtype=torch.float64)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    # the timeline to show: this rank's step of median duration, not a lucky or unlucky one
    order = sorted(range(rounds), key=lambda i: samples["bucketed"][i])
    return {"median_s": {d: statistics.median(times[i].tolist()) for i, d in enumerate(DESIGNS)},
            "events": timelines[order[rounds // 2]],
            "hidden_fractions": [overlap_summary(t)["hidden_fraction"] for t in timelines],
            "bucket_bytes": [b.flat.numel() * b.flat.element_size() for b in ddp.buckets],
            "param_count": sum(p.numel() for p in trainers["bucketed"].model.parameters())}


def overlap_summary(events: list) -> dict:
    """From one step's ``BucketedDDP.events``: how much all-reduce time ran inside backward.

    Returns milliseconds of backward, of communication (union of the buckets' launch-to-done
    intervals), of communication hidden under backward, and of the exposed tail after it.
    """
    at = {kind: t for kind, _, t in events if kind in ("backward_start", "backward_end", "finished")}
    missing = [k for k in ("backward_start", "backward_end", "finished") if k not in at]
    if missing:  # backward_start is the caller's: ddp.mark("backward_start") before backward
        raise ValueError(f"events lack {missing}: pass one step's BucketedDDP.events, "
                         "with ddp.mark('backward_start') called before loss.backward()")
    launch = {i: t for kind, i, t in events if kind == "launch"}
    done = {i: t for kind, i, t in events if kind == "done"}
    intervals, busy, hidden = sorted((launch[i], done[i]) for i in launch), 0.0, 0.0
    cursor = float("-inf")
    for lo, hi in intervals:  # union of intervals, so concurrent buckets count once
        lo = max(lo, cursor)
        if hi > lo:
            busy += hi - lo
            hidden += max(0.0, min(hi, at["backward_end"]) - lo)
            cursor = hi
    return {"backward_ms": 1e3 * (at["backward_end"] - at["backward_start"]),
            "communication_ms": 1e3 * busy, "hidden_ms": 1e3 * hidden,
            "hidden_fraction": hidden / busy if busy else 0.0,
            "exposed_ms": 1e3 * (at["finished"] - at["backward_end"]),
            "buckets": len(launch)}


def _report(values) -> None:
    for design, r in values[0].items():
        print(f"{design:13s} equals single-process training; max |diff| {r['max_abs_diff']:.1e}; "
              f"all-reduces per step: {r['all_reduces_per_step']}")


def demo(rank: int, world_size: int) -> dict:
    """Three steps of each data-parallel design, checked against single-process training."""
    return train_and_compare(rank, world_size, ModelConfig(), 3, 4 * world_size)


if __name__ == "__main__":
    from playground.launch_cli import cli
    cli(demo, default_world_size=2, report=_report)
