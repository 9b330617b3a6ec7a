"""Pipeline parallelism from scratch: the shared model cut into K stages, one per rank.

Stage k holds ``model.layers[bounds[k]:bounds[k+1]]`` (``schedules.stage_bounds``); with
the interleaved schedule the chain is cut into K·V pieces and rank k holds pieces k, k+K, ...
A training step runs the stage's action list (naive, GPipe, 1F1B, interleaved, zero-bubble) for real:
forwards receive the previous stage's activation, backwards receive the next stage's
activation-gradient (``stage_link``; zero-bubble: B sends it on, W comes later, ``split_backward``),
gradients of the M micro-batches accumulate, and one optimizer step ends it.
The result is the same step as single-process training on the whole batch (checked in the tests).

Every action is timestamped on its rank and, optionally, padded to an emulated device time
(``device_clock``): the arithmetic is real, then the rank sleeps until the action has lasted what a
device would take.  ``device_time_s="auto"`` emulates on the CPU and not on GPUs.

Run it: ``python -m playground.pipeline_parallel.engine --nproc 4`` (GPipe, 4 stages, 8 micro-batches).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn

from playground import comm
from playground.launch import device, run
from playground.launch_cli import cli
from playground.model import ModelConfig, build_model, synthetic_batch
from playground.pipeline_parallel.stage_link import StageLink, boundary_shapes
from playground.pipeline_parallel.device_clock import DEFAULT_DEVICE_TIME_S
from playground.pipeline_parallel.schedules import (action_chunk, check_schedule_args, measured_bubble,
                                                    schedule_actions, stage_bounds)
from playground.pipeline_parallel.stage_work import StageWork
from playground.pipeline_parallel.torch_schedules import (TORCH_ONLY, make_groups, run_torch_schedule,
                                                          torch_pieces)

__all__ = ["PipeSpec", "DEFAULT_DEVICE_TIME_S", "pipeline_worker", "run_pipeline", "run_actions", "stage_of"]

@dataclass(frozen=True)
class PipeSpec:
    """One training step to run: which schedule, how many stages and micro-batches, and what to record."""

    schedule: str = "gpipe"
    stages: int = 4                       # K
    micro_batches: int = 8                # M
    chunks: int = 1                       # V, model chunks per rank (interleaved schedule only)
    batch_size: int = 8                   # B, examples in the mini-batch
    recompute: bool = False               # keep only each stage's input; re-run forward in backward
    device_time_s: tuple | str | None = "auto"
    engine: str = "playground"            # or "torch": torch.distributed.pipelining, same model
    cfg: ModelConfig = field(default_factory=ModelConfig)
    seed: int = 0
    step: int = 0                         # which synthetic batch
    lr: float = 0.1                       # SGD learning rate
    count_flops: bool = False
    keep_state: bool = False              # return gradients and parameters after the step
    dtype: torch.dtype = torch.float32

    def __post_init__(self):
        if self.schedule in TORCH_ONLY:
            if self.engine != "torch" or self.chunks != 2 or self.stages < 2:
                raise ValueError(f"{self.schedule!r} is PyTorch's ScheduleZBVZeroBubble: it needs "
                                 f"engine='torch', chunks=2 and stages >= 2, got engine="
                                 f"{self.engine!r}, chunks={self.chunks}, stages={self.stages}")
        else:
            check_schedule_args(self.schedule, self.stages, self.micro_batches, self.chunks)
        stage_bounds(self.cfg.n_layers, self.stages * self.chunks)
        if self.batch_size < 1 or self.batch_size % self.micro_batches:
            raise ValueError(f"batch_size={self.batch_size} does not split into "
                             f"micro_batches={self.micro_batches} equal micro-batches")
        if self.engine not in ("playground", "torch"):
            raise ValueError(f"engine must be 'playground' or 'torch', got {self.engine!r}")
        if self.engine == "torch" and (self.recompute or self.schedule == "naive"):
            raise ValueError("engine='torch' runs torch.distributed.pipelining's ScheduleGPipe, "
                             "Schedule1F1B, ScheduleInterleaved1F1B or a zero-bubble schedule, "
                             "without recomputation")
        if self.schedule == "zb" and self.recompute:
            raise ValueError("the zero-bubble schedule keeps each micro-batch's graph from B to W; "
                             "it does not combine with recompute=True here")
        if self.engine == "torch" and self.schedule == "1f1b" and self.micro_batches < self.stages:
            raise ValueError(f"torch's Schedule1F1B needs micro_batches >= stages, got "
                             f"M={self.micro_batches} < K={self.stages} (this package's 1f1b has "
                             "no such limit)")
        dt = self.device_time_s
        if not (dt is None or dt == "auto" or (isinstance(dt, tuple) and len(dt) == 2
                                                 and all(0 <= v < 1e6 for v in dt))):
            raise ValueError(f"device_time_s must be None, 'auto' or finite (forward_s, backward_s) "
                             f">= 0, got {dt!r}")


def stage_of(model: nn.Module, bounds: list[int], k: int) -> nn.Sequential:
    """Stage k: the consecutive slice of ``model.layers`` (parameters shared, not copied)."""
    return nn.Sequential(*model.layers[bounds[k]:bounds[k + 1]])


def _stage_state(model, bounds, pieces, what: str) -> dict:
    """{global parameter name: tensor} of the given pieces' parameters ('grad' or 'param')."""
    out = {}
    for name, p in model.named_parameters():
        if any(bounds[c] <= int(name.split(".")[1]) < bounds[c + 1] for c in pieces):
            t = p.grad if what == "grad" else p
            out[name] = None if t is None else t.detach().clone().cpu()
    return out


def run_actions(actions, stage: StageWork, links: list[StageLink]) -> None:
    """Execute one rank's schedule: each action receives, computes, and sends.

    ``links[v]`` talks to the neighbours of the rank's chunk v; ``stage`` does the compute
    (and, out of sight, the timing and counting the chapter measures)."""
    for action in actions:
        op, i, v = action[0], action[1], action_chunk(action)
        link = links[v]
        if op == "F":    # forward: input from the previous stage (or tokens), output to the next
            x = stage.inputs[i] if stage.is_first(v) else link.recv_activation()
            y = stage.forward(x, action)
            if not stage.is_last(v):
                link.send_activation(y)
        elif op == "B":  # backward: the output's gradient in, the input's gradient back
            g = None if stage.is_last(v) else link.recv_grad()
            gx = stage.backward(g, action)
            if not stage.is_first(v):
                link.send_grad(gx)
        else:            # "W" (zero bubble): micro-batch i's weight gradients, deferred
            stage.weight(action)


def _run_schedule(spec: PipeSpec, k: int, model, bounds, batch, dev) -> dict:
    """Rank k's part of one step with this package's own schedule: set up, run, report.

    The rank holds V pieces of the chain (V = 1 but for the interleaved schedule): piece
    c = v·K + k receives from the rank of piece c-1 and sends to the rank of piece c+1."""
    K, M, V = spec.stages, spec.micro_batches, spec.chunks
    pieces = [v * K + k for v in range(V)]
    first, last = 0, K * V - 1                      # the pieces that read tokens / compute the loss
    chunk = [stage_of(model, bounds, c) for c in pieces]
    inputs = [t.clone() for t in batch[0].chunk(M)]
    targets = [t.clone() for t in batch[1].chunk(M)]
    key = (spec.cfg, spec.dtype, tuple(bounds), tuple(inputs[0].shape))
    if key not in _SHAPES:  # inferred once per process: the first meta run costs ~1 s
        _SHAPES[key] = boundary_shapes(model.layers, bounds, inputs[0]) + [(None, None)]
    shapes = _SHAPES[key]
    links = [StageLink(prev=None if c == first else (c - 1) % K,
                       next=None if c == last else (c + 1) % K,
                       in_shape=shapes[c][0], in_dtype=shapes[c][1],
                       out_shape=shapes[c + 1][0], out_dtype=shapes[c + 1][1], device=dev)
             for c in pieces]
    stage = StageWork(spec, chunk, pieces, first, last, inputs, targets, dev)
    with comm.count() as moved:
        dist.barrier()
        stage.clock.start()
        run_actions(schedule_actions(spec.schedule, K, M, k, V), stage, links)
        for link in links:
            link.drain()
    torch.optim.SGD(stage.params, lr=spec.lr).step()  # grads were None before, as in train_step
    return stage.result(moved.summary())


_SHAPES: dict = {}


def pipeline_worker(rank: int, world_size: int, specs: list[PipeSpec]) -> list[dict | None]:
    """Run every spec in order on this rank; ranks >= K of a spec only join its start barrier."""
    make_groups([s.stages for s in specs if s.engine == "torch"], world_size)
    dev = device()
    results: list[dict | None] = []
    for spec in specs:
        if spec.stages > world_size:
            raise ValueError(f"{spec.stages} stages need {spec.stages} ranks, got {world_size}")
        if rank >= spec.stages:  # not a stage of this pipeline: only join its start barrier
            dist.barrier()
            results.append(None)
            continue
        model = build_model(spec.cfg, spec.seed, dtype=spec.dtype, device=dev)
        batch = tuple(t.to(dev) for t in synthetic_batch(spec.cfg, spec.batch_size, spec.step, spec.seed))
        bounds = stage_bounds(spec.cfg.n_layers, spec.stages * spec.chunks)
        pieces = torch_pieces(spec.schedule, spec.stages, spec.chunks, rank)
        if spec.engine == "torch":
            out = run_torch_schedule(spec, rank, [stage_of(model, bounds, c) for c in pieces],
                                     batch, dev)
        else:
            out = _run_schedule(spec, rank, model, bounds, batch, dev)
        if spec.keep_state:
            out["grads"] = _stage_state(model, bounds, pieces, "grad")
            out["params"] = _stage_state(model, bounds, pieces, "param")
        results.append(out)
    return results


def run_pipeline(specs: list[PipeSpec], world_size: int | None = None, timeout_s: float = 300.0) -> list[dict]:
    """Launch once, run every spec, return one merged record per spec (stage order)."""
    specs = list(specs)
    if not specs or not all(isinstance(s, PipeSpec) for s in specs):
        raise ValueError("specs must be a non-empty list of PipeSpec")
    world_size = world_size or max(s.stages for s in specs)
    for s in specs:
        if s.stages > world_size:
            raise ValueError(f"{s.stages} stages need {s.stages} ranks, got world_size={world_size}")
    per_rank = run(pipeline_worker, world_size, specs, timeout_s=timeout_s, quiet=True)
    merged = []
    for i, spec in enumerate(specs):
        stages = [per_rank[r][i] for r in range(spec.stages)]
        record = {"spec": spec, "stages": stages, "loss": stages[-1]["loss"]}
        if spec.engine == "playground":
            record.update(measured_bubble([s["events"] for s in stages]))
        if spec.keep_state:
            record["grads"] = {n: g for s in stages for n, g in s["grads"].items()}
            record["params"] = {n: p for s in stages for n, p in s["params"].items()}
        merged.append(record)
    return merged


def _demo(rank: int, world_size: int) -> dict | None:
    """GPipe over all ranks, 8 micro-batches, emulated device time on the CPU."""
    spec = PipeSpec("gpipe", stages=world_size, micro_batches=8,
                    cfg=ModelConfig(n_layers=max(4, world_size)))
    return pipeline_worker(rank, world_size, [spec])[0]


def _report(values) -> None:
    from playground.pipeline_parallel.schedules import predicted_bubble
    K = len(values)
    measured = measured_bubble([v["events"] for v in values])["bubble"]
    print(f"GPipe, K={K} stages, M=8 micro-batches: bubble measured {measured:.3f}, "
          f"predicted (K-1)/(M+K-1) = {predicted_bubble(K, 8):.3f}")


if __name__ == "__main__":
    cli(_demo, default_world_size=4, report=_report)
