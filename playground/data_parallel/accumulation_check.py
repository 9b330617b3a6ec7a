"""Gradient accumulation with ``no_sync``, run for real: the rank functions behind its section.

``accumulate_and_compare`` trains the shared model for a few optimizer steps, each made of k
micro-batches per rank, in five ways: ``BucketedDDP`` with and without ``no_sync`` on the ring
all-reduce (whose every byte the counter sees), the same two on the asynchronous built-in
all-reduce (whose calls it counts), and torch's ``DistributedDataParallel`` with its own
``no_sync``.  It counts each step's traffic with ``playground.comm`` and asserts that every design
ends with the parameters of single-process training on the whole batch, and with torch's.
``accumulation_bytes_per_step`` is the prediction the counts are held against.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
from torch.nn.parallel import DistributedDataParallel

from playground import comm
from playground.data_parallel.ddp import BucketedDDP
from playground.data_parallel.ring import ring_all_reduce, ring_bytes_sent
from playground.launch import device
from playground.model import ModelConfig, build_model, loss_fn, shard_batch, synthetic_batch

__all__ = ["accumulate_and_compare", "accumulation_bytes_per_step", "check_accumulation",
           "ACCUMULATION_DESIGNS"]

# design -> (all-reduce inside BucketedDDP, or "torch" for torch's DDP; micro-batches under no_sync)
_DESIGNS = {"no_sync": (ring_all_reduce, True), "every_backward": (ring_all_reduce, False),
            "no_sync_async": (None, True), "every_backward_async": (None, False),
            "torch_no_sync": ("torch", True)}
ACCUMULATION_DESIGNS = tuple(_DESIGNS)


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def check_accumulation(world_size: int, micro_batch_size: int, accumulation_steps: int,
                       steps: int = 1) -> int:
    """Refuse bad sizes in one ``ValueError``; return the global batch, N × micro-batch × k."""
    for name, value in (("world_size", world_size), ("micro_batch_size", micro_batch_size),
                        ("accumulation_steps", accumulation_steps), ("steps", steps)):
        _positive_int(name, value)
    return world_size * micro_batch_size * accumulation_steps


def accumulation_bytes_per_step(gradient_bytes: int, world_size: int, accumulation_steps: int,
                                no_sync: bool = True) -> float:
    """Bytes one rank sends per optimizer step on a ring: one all-reduce of all gradients,
    2(N-1)/N · S, under ``no_sync``; k of them without it."""
    reductions = 1 if no_sync else accumulation_steps
    return reductions * 2 * (world_size - 1) / world_size * gradient_bytes


def _micro_batches(cfg, micro_batch_size, k, step, rank, world_size):
    """Rank r's k micro-batches of step ``step``: its slice of the global batch, cut in k."""
    batch = synthetic_batch(cfg, world_size * micro_batch_size * k, step)
    local = shard_batch(batch, rank, world_size)
    return [tuple(t.to(device()) for t in shard_batch(local, j, k)) for j in range(k)]


def _accumulated_step(forward, no_sync, micro_batches, ddp=None) -> None:
    """One optimizer step's backward passes: every micro-batch but the last under ``no_sync``
    (forward too: torch's DDP decides in forward whether the backward will reduce)."""
    k = len(micro_batches)
    for j, (inputs, targets) in enumerate(micro_batches):
        with no_sync() if j < k - 1 else nullcontext():
            (loss_fn(forward(inputs), targets) / k).backward()  # mean over the k micro-batches
    if ddp is not None:
        ddp.finish()


def _run_design(design, cfg, micro_batch_size, k, steps, bucket_bytes, lr, rank, world_size):
    reducer, use_no_sync = _DESIGNS[design]
    model = build_model(cfg, seed=0, device=device())
    ddp = None
    if reducer == "torch":
        forward = DistributedDataParallel(model, bucket_cap_mb=bucket_bytes / 2 ** 20)
        no_sync = forward.no_sync
    else:
        ddp = BucketedDDP(model, bucket_bytes=bucket_bytes, all_reduce=reducer)
        forward, no_sync = model, ddp.no_sync
    if not use_no_sync:
        no_sync = nullcontext
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    sent, calls, payload, reductions = [], [], [], []
    for step in range(steps):
        micro = _micro_batches(cfg, micro_batch_size, k, step, rank, world_size)
        with comm.count() as moved:
            opt.zero_grad(set_to_none=True)
            if ddp is not None:
                ddp.start_step()
            _accumulated_step(forward, no_sync, micro, ddp)
            opt.step()
        sent.append(moved.sent_bytes)
        calls.append(moved.calls.get("all_reduce", 0))
        payload.append(moved.payload_bytes.get("all_reduce", 0))
        if ddp is not None:  # whole-gradient reductions: bucket launches / buckets
            launches = sum(kind == "launch" for kind, _, _ in ddp.events)
            reductions.append(launches // len(ddp.buckets))  # finish() checked every bucket filled
    return model, {"sent_bytes_per_step": sent, "all_reduce_calls_per_step": calls,
                   "all_reduce_payload_per_step": payload,
                   "reductions_per_step": reductions or None,
                   "buckets": [b.flat.numel() for b in ddp.buckets] if ddp else None}


def accumulate_and_compare(rank: int, world_size: int, cfg: ModelConfig, accumulation_steps: int = 4,
                           micro_batch_size: int = 2, steps: int = 2, bucket_bytes: int = 16 * 1024,
                           lr: float = 0.1) -> dict:
    """``steps`` optimizer steps of k = ``accumulation_steps`` micro-batches per rank, each of
    ``micro_batch_size`` examples, in every design of ``ACCUMULATION_DESIGNS``.

    Asserts (``assert_close``) that each ends with the parameters of single-process training on
    the whole global batch of N × micro-batch × k examples, and with torch DDP's ``no_sync``.
    Returns per design the counted traffic of each step and the largest parameter differences,
    plus the gradient bytes S and this rank's exact ring bytes for one reduction of all buckets.
    """
    global_batch = check_accumulation(world_size, micro_batch_size, accumulation_steps, steps)
    reference = build_model(cfg, seed=0, device=device())
    ref_opt = torch.optim.SGD(reference.parameters(), lr=lr, momentum=0.9)
    for step in range(steps):  # the large-batch step: one backward over the whole batch
        inputs, targets = (t.to(device()) for t in synthetic_batch(cfg, global_batch, step))
        ref_opt.zero_grad(set_to_none=True)
        loss_fn(reference(inputs), targets).backward()
        ref_opt.step()
    expected = dict(reference.named_parameters())
    out, finals = {}, {}
    for design in ACCUMULATION_DESIGNS:
        model, out[design] = _run_design(design, cfg, micro_batch_size, accumulation_steps, steps,
                                         bucket_bytes, lr, rank, world_size)
        got = finals[design] = dict(model.named_parameters())
        for name, p in expected.items():
            torch.testing.assert_close(got[name], p, msg=lambda m, n=name: f"{design} {n}: {m}")
        out[design]["max_abs_diff"] = max((got[n] - p).abs().max().item() for n, p in expected.items())
    for design in ACCUMULATION_DESIGNS[:-1]:  # and equal to PyTorch's DDP with its no_sync
        for name, p in finals["torch_no_sync"].items():
            torch.testing.assert_close(finals[design][name], p,
                                       msg=lambda m, n=name, d=design: f"{d} vs torch no_sync {n}: {m}")
        out[design]["max_abs_diff_torch"] = max((finals[design][n] - p).abs().max().item()
                                                for n, p in finals["torch_no_sync"].items())
    gradient_bytes = sum(p.numel() * p.element_size() for p in reference.parameters())
    out["gradient_bytes"] = gradient_bytes
    out["global_batch"] = global_batch
    out["ring_bytes_per_reduction"] = sum(ring_bytes_sent(n, world_size, 4, rank)
                                          for n in out["no_sync"]["buckets"])
    return out


def _report(values) -> None:
    first, n = values[0], len(values)
    print(f"global batch {first['global_batch']}; gradient bytes S = {first['gradient_bytes']}")
    for design in ACCUMULATION_DESIGNS:
        r = first[design]
        print(f"{design:21s} equals the large-batch step (max |diff| {r['max_abs_diff']:.1e}); "
              f"rank 0 sent per step {r['sent_bytes_per_step']} B, reductions {r['reductions_per_step']}")
    print(f"predicted per rank with no_sync: 2(N-1)/N S = "
          f"{accumulation_bytes_per_step(first['gradient_bytes'], n, 1):.0f} B")


def demo(rank: int, world_size: int) -> dict:
    """Two optimizer steps of 4 micro-batches per rank, with and without no_sync."""
    return accumulate_and_compare(rank, world_size, ModelConfig(), 4, 2, 2)


if __name__ == "__main__":
    from playground.launch_cli import cli
    cli(demo, default_world_size=4, report=_report)
