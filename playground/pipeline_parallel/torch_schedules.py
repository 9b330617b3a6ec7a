"""The production equivalent: the same stages driven by ``torch.distributed.pipelining``.

``playground.pipeline_parallel.engine`` builds every schedule from send/recv; this module hands the very same
slices of the very same model to PyTorch's ``ScheduleGPipe``, ``Schedule1F1B``,
``ScheduleInterleaved1F1B`` and its zero-bubble schedules: ``ScheduleInterleavedZeroBubble`` with
one stage per rank (ZB-H1, our "zb") and ``ScheduleZBVZeroBubble`` (ZB-V, "zbv": two pieces per
rank placed in a V, rank k holding pieces k and 2K-1-k), so the chapter can show all give the
single-process step.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from playground.model import loss_fn

__all__ = ["make_groups", "run_torch_schedule", "TORCH_ONLY", "torch_pieces"]

TORCH_ONLY = ("zbv",)  # schedules only PyTorch's engine runs here

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


def torch_pieces(schedule: str, stages: int, chunks: int, k: int) -> list[int]:
    """The pieces of the chain rank k holds: k, k+K, ... (loop placement), or k and 2K-1-k for
    ZB-V (V placement: the chain goes down the ranks and back up)."""
    if schedule == "zbv":
        return [k, 2 * stages - 1 - k]
    return [v * stages + k for v in range(chunks)]


def run_torch_schedule(spec, k: int, chunk_modules, batch, dev) -> dict:
    """Rank k's part of one step: ``chunk_modules[v]`` is piece ``torch_pieces(...)[v]``."""
    from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                              ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble,
                                              ScheduleZBVZeroBubble)
    K, V = spec.stages, spec.chunks
    pieces = torch_pieces(spec.schedule, K, V, k)
    stages = [PipelineStage(module, c, K * V, dev, group=_group(K))
              for c, module in zip(pieces, chunk_modules)]
    multi = {"interleaved": ScheduleInterleaved1F1B, "zb": ScheduleInterleavedZeroBubble,
             "zbv": ScheduleZBVZeroBubble}
    if spec.schedule in multi:
        schedule = multi[spec.schedule](stages, n_microbatches=spec.micro_batches, loss_fn=loss_fn)
    else:
        cls = ScheduleGPipe if spec.schedule == "gpipe" else Schedule1F1B
        schedule = cls(stages[0], n_microbatches=spec.micro_batches, loss_fn=loss_fn)
    losses: list = []
    dist.barrier()
    first, last = 0 in pieces, K * V - 1 in pieces   # zbv: rank 0 holds both
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
