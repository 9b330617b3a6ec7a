"""The checkpoint runs: save on 4 ranks, load on 2 (resharded), and compare with no interruption.

``launch_reshard`` does it in two launches.  The first, on ``save_ranks``, trains ``steps`` steps
without stopping, saving a checkpoint (and an asynchronous copy) before step ``save_at``; in the
same launch a fresh model loads that checkpoint and trains the remaining steps again on the same
ranks.  The second, on ``load_ranks``, loads it resharded and trains the remaining steps.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import get_state_dict

from playground.launch import device, run
from playground.model import ModelConfig, loss_fn, shard_batch, synthetic_batch
from playground.failures.checkpoint import (CHECKPOINT_CFG, bytes_written, load, predicted_bytes, save,
                                            sharded_model)

__all__ = ["train_step", "full_state", "save_and_resume_ranks", "resume_ranks", "launch_reshard"]


def train_step(model, optimizer, cfg, step: int, rank: int, world_size: int, batch_size: int) -> float:
    """One FSDP2 step on this rank's slice of the global batch; returns the global mean loss."""
    inputs, targets = (t.to(device()) for t in shard_batch(synthetic_batch(cfg, batch_size, step), rank,
                                                           world_size))
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(inputs), targets)
    loss.backward()
    optimizer.step()
    total = loss.detach().clone()
    dist.all_reduce(total)           # the mean over ranks of equal slices: the global batch's loss
    return total.item() / world_size


def full_state(model, optimizer) -> dict:
    """Every parameter and optimizer tensor, gathered whole (collective: every rank calls it)."""
    model_state, optim_state = get_state_dict(model, optimizer)
    whole = lambda t: t.full_tensor() if hasattr(t, "full_tensor") else t  # noqa: E731
    out = {f"model.{k}": whole(v) for k, v in model_state.items()}
    for name, entry in optim_state["state"].items():
        out.update({f"optim.{name}.{k}": whole(v) for k, v in entry.items()})
    return {k: v.detach().cpu().clone() for k, v in out.items()}


def save_and_resume_ranks(rank, world_size, workdir, cfg, steps, save_at, batch_size):
    """Train ``steps`` steps, checkpointing before ``save_at``; then resume from it on these ranks."""
    model, optimizer = sharded_model(cfg)
    losses, out = [], {}
    for step in range(steps):
        if step == save_at:
            out["state"] = full_state(model, optimizer)
            out["save_s"], _ = save(model, optimizer, Path(workdir) / "ckpt")
            out["async_blocked_s"], future = save(model, optimizer, Path(workdir) / "ckpt_async",
                                                  asynchronous=True)
            future.result()                     # the writes end here, off the training path
        losses.append(train_step(model, optimizer, cfg, step, rank, world_size, batch_size))
    fresh, fresh_optimizer = sharded_model(cfg, seed=1)   # other weights: the load must replace them
    out["load_s"] = load(fresh, fresh_optimizer, Path(workdir) / "ckpt")
    out["resumed"] = [train_step(fresh, fresh_optimizer, cfg, s, rank, world_size, batch_size)
                      for s in range(save_at, steps)]
    async_model, async_optimizer = sharded_model(cfg, seed=1)
    load(async_model, async_optimizer, Path(workdir) / "ckpt_async")
    async_state = full_state(async_model, async_optimizer)
    out["async_equal"] = all(torch.equal(async_state[k], v) for k, v in out["state"].items())
    out["losses"] = losses
    if rank:
        del out["state"]
    return out


def resume_ranks(rank, world_size, workdir, cfg, steps, save_at, batch_size):
    """Load the checkpoint on this (different) number of ranks and train the remaining steps."""
    model, optimizer = sharded_model(cfg, seed=1)
    load_s = load(model, optimizer, Path(workdir) / "ckpt")
    state = full_state(model, optimizer)
    losses = [train_step(model, optimizer, cfg, s, rank, world_size, batch_size) for s in range(save_at, steps)]
    return {"load_s": load_s, "losses": losses, "state": state if rank == 0 else None}


def launch_reshard(workdir, cfg: ModelConfig = CHECKPOINT_CFG, *, save_ranks: int = 4, load_ranks: int = 2,
                   steps: int = 6, save_at: int = 3, batch_size: int = 8, timeout_s: float = 240.0) -> dict:
    """Both launches; returns losses, states, bytes written per rank and their prediction."""
    for name, value in (("save_ranks", save_ranks), ("load_ranks", load_ranks), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if batch_size % save_ranks or batch_size % load_ranks:
        raise ValueError(f"batch_size={batch_size} must split evenly over {save_ranks} and {load_ranks} ranks")
    if not (isinstance(save_at, int) and isinstance(steps, int) and 0 < save_at < steps):
        raise ValueError(f"need integers 0 < save_at < steps, got save_at={save_at!r}, steps={steps!r}")
    if not Path(workdir).is_dir():
        raise ValueError(f"workdir {workdir!s} is not a directory")
    saved = run(save_and_resume_ranks, save_ranks, str(workdir), cfg, steps, save_at, batch_size,
                timeout_s=timeout_s, quiet=True)
    written = bytes_written(Path(workdir) / "ckpt")
    loaded = run(resume_ranks, load_ranks, str(workdir), cfg, steps, save_at, batch_size,
                 timeout_s=timeout_s, quiet=True)
    return {"uninterrupted": saved[0]["losses"], "resumed_same": saved[0]["resumed"],
            "resumed_resharded": loaded[0]["losses"], "saved_state": saved[0]["state"],
            "loaded_state": loaded[0]["state"], "async_equal": [s["async_equal"] for s in saved],
            "bytes_written": written,
            "predicted_bytes": {r: predicted_bytes(cfg, r, save_ranks) for r in range(save_ranks)},
            "save_s": max(s["save_s"] for s in saved), "async_blocked_s": max(s["async_blocked_s"] for s in saved),
            "load_s_same": max(s["load_s"] for s in saved), "load_s_resharded": max(s["load_s"] for s in loaded),
            "save_at": save_at, "steps": steps}
