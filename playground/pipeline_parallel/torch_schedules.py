"""The production equivalent: the same stages driven by ``torch.distributed.pipelining``.

``playground.pipeline_parallel.engine`` builds every schedule from send/recv; this module hands the very same
slices of the very same model to PyTorch's ``ScheduleGPipe``, ``Schedule1F1B`` and
``ScheduleInterleaved1F1B``, so the chapter can show both give the single-process step.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from playground.model import loss_fn

__all__ = ["make_groups", "run_torch_schedule"]

_GROUPS: dict = {}


def make_groups(stage_counts, world_size: int) -> None:
    """Process groups of ranks 0..K-1 for every K below the world size.

    Every rank must call this with the same ``stage_counts``: groups are created collectively,
    in the same order everywhere."""
    for K in sorted(set(stage_counts)):
        if K < world_size and K not in _GROUPS:
            _GROUPS[K] = dist.new_group(list(range(K)))


def _group(stages: int):
    """Process group of ranks 0..K-1 (None = the whole world when it has exactly K ranks)."""
    return None if stages == dist.get_world_size() else _GROUPS[stages]


def run_torch_schedule(spec, k: int, chunk_modules, batch, dev) -> dict:
    """Rank k's part of one step: ``chunk_modules[v]`` is piece v·K + k of the chain."""
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                              ScheduleInterleaved1F1B)
    K, V = spec.stages, spec.chunks
    stages = [PipelineStage(module, v * K + k, K * V, dev, group=_group(K))
              for v, module in enumerate(chunk_modules)]
    if spec.schedule == "interleaved":
        schedule = ScheduleInterleaved1F1B(stages, n_microbatches=spec.micro_batches, loss_fn=loss_fn)
    else:
        cls = ScheduleGPipe if spec.schedule == "gpipe" else Schedule1F1B
        schedule = cls(stages[0], n_microbatches=spec.micro_batches, loss_fn=loss_fn)
    losses: list = []
    dist.barrier()
    first, last = k == 0, k == K - 1      # rank 0 holds piece 0, rank K-1 the last piece
    if first and last:
        schedule.step(batch[0], target=batch[1], losses=losses)
    elif first:
        schedule.step(batch[0])
    elif last:
        schedule.step(target=batch[1], losses=losses)
    else:
        schedule.step()
    params = [p for module in chunk_modules for p in module.parameters()]
    torch.optim.SGD(params, lr=spec.lr).step()
    return {"loss": torch.stack(losses).mean().item() if losses else None}
