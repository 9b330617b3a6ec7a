"""PyTorch's production 2-D runs on a ``DeviceMesh``.

* DP x TP: mesh ("dp", "tp"), DTensor tensor parallelism on the "tp" sub-mesh and FSDP2
  (``fully_shard``) over the "dp" sub-mesh.
* DP x PP: mesh ("dp", "pp"), ``torch.distributed.pipelining`` (``PipelineStage`` +
  ``ScheduleGPipe``) on the "pp" sub-mesh's group and FSDP2 over the "dp" sub-mesh.

``train_dp_tp_torch`` trains the course's model from the same initial weights, on the same
batches, with the same optimizer as ``compose.train_dp_tp``, and returns the per-step losses and
the *full* parameters (``DTensor.full_tensor()``) as a plain model, so ``compose`` can check its
own run against it with ``assert_close``, shard by shard; ``train_dp_pp_torch`` does the same
for ``compose.train_dp_pp``, returning this rank's pipeline stage.
"""

from __future__ import annotations

import logging
import warnings

import torch
import torch.distributed as dist

from playground.launch import device
from playground.model import ModelConfig, build_model, loss_fn, shard_batch, synthetic_batch

__all__ = ["train_dp_tp_torch", "train_dp_pp_torch", "tp_plan", "pytorch_report",
           "pytorch_pp_report"]


def tp_plan(n_layers: int) -> dict:
    """Megatron's split of every block, as ``parallelize_module`` takes it: q, k, v and fc1
    column-parallel, o and fc2 row-parallel (embedding, norms and head stay whole)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
    plan = {}
    for i in range(1, n_layers + 1):
        for name in ("attn.wq", "attn.wk", "attn.wv", "mlp.fc1"):
            plan[f"layers.{i}.{name}"] = ColwiseParallel()
        for name in ("attn.wo", "mlp.fc2"):
            plan[f"layers.{i}.{name}"] = RowwiseParallel()
    return plan


def train_dp_tp_torch(dp: int, tp: int, steps: int, batch: int, optimizer,
                      cfg: ModelConfig | None = None) -> dict:
    """Rank worker body (inside a launched job of dp·tp ranks): PyTorch's 2-D DP x TP training.

    ``optimizer(params)`` builds the optimizer (compose's SGD with momentum).  Returns the losses
    (averaged over the DP group, i.e. the full-batch loss), the gathered model, and the placements
    of one TP weight on the 2-D mesh (evidence that both axes shard it).
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import parallelize_module

    cfg, dev = cfg or ModelConfig(), device()
    mesh = init_device_mesh(dev.type, (dp, tp), mesh_dim_names=("dp", "tp"))
    model = build_model(cfg, seed=0, device=dev)
    parallelize_module(model, mesh["tp"], tp_plan(cfg.n_layers))
    # our layers return views (a reshape inside Linear); harmless: nothing edits them in place
    warnings.filterwarnings("ignore", message=".*returned a view tensor.*")
    for layer in model.layers:
        fully_shard(layer, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    # full_tensor() below gathers the 2-D shards in two all-gathers and torch logs that this is
    # "suboptimal": true, and nothing is reduced, so the gathered values are exact
    logging.getLogger("torch.distributed.tensor._redistribute").setLevel(logging.ERROR)
    opt = optimizer(model.parameters())
    dp_rank = mesh.get_local_rank("dp")
    losses = []
    for step in range(steps):
        inputs, targets = shard_batch(synthetic_batch(cfg, batch, step), dp_rank, dp)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs.to(dev)), targets.to(dev))
        loss.backward()  # FSDP2 reduce-scatters the gradients over "dp", averaged
        opt.step()
        losses.append(loss.detach().to(torch.float64))
    mean = torch.stack(losses)
    dist.all_reduce(mean, group=mesh["dp"].get_group())  # bookkeeping: the full-batch loss
    gathered = build_model(cfg, seed=0, device=dev)
    target = dict(gathered.named_parameters())
    with torch.no_grad():
        for name, p in model.named_parameters():  # FSDP2 and TP keep the parameter names
            target[name].copy_(p.full_tensor())
    fc1 = model.layers[1].mlp.fc1.weight
    return {"losses": (mean / dp).tolist(), "model": gathered,
            "mesh": tuple(mesh.mesh_dim_names), "mesh_shape": tuple(mesh.mesh.shape),
            "fc1_placements": [repr(pl) for pl in fc1.placements]}


def train_dp_pp_torch(dp: int, pp: int, steps: int, batch: int, micro_batches: int, bounds,
                      optimizer, cfg: ModelConfig | None = None) -> dict:
    """Rank worker body (inside a launched job of dp·pp ranks): PyTorch's 2-D DP x PP training.

    Stage k holds layers ``bounds[k]:bounds[k+1]`` (the cut ``compose.train_dp_pp`` uses) as a
    ``PipelineStage`` on the "pp" sub-mesh's group, driven by ``ScheduleGPipe`` with
    ``micro_batches`` micro-batches (it scales gradients by 1/micro_batches, as ours divides the
    loss); FSDP2 shards the stage over the "dp" sub-mesh and averages its gradients there.
    Returns the losses (full-batch mean; every rank), this rank's stage gathered into a plain
    module, the mesh and the schedule's name.
    """
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    cfg, dev = cfg or ModelConfig(), device()
    mesh = init_device_mesh(dev.type, (dp, pp), mesh_dim_names=("dp", "pp"))
    k, dp_rank = mesh.get_local_rank("pp"), mesh.get_local_rank("dp")
    stage_module = nn.Sequential(*build_model(cfg, seed=0, device=dev).layers[bounds[k]:bounds[k + 1]])
    warnings.filterwarnings("ignore", message=".*returned a view tensor.*")
    fully_shard(stage_module, mesh=mesh["dp"])
    opt = optimizer(stage_module.parameters())
    stage = PipelineStage(stage_module, k, pp, dev, group=mesh["pp"].get_group())
    schedule = ScheduleGPipe(stage, n_microbatches=micro_batches, loss_fn=loss_fn)
    first, last = k == 0, k == pp - 1
    totals = []
    for step in range(steps):
        inputs, targets = shard_batch(synthetic_batch(cfg, batch, step), dp_rank, dp)
        inputs, targets = inputs.to(dev), targets.to(dev)
        opt.zero_grad(set_to_none=True)
        losses: list = []
        if first and last:
            schedule.step(inputs, target=targets, losses=losses)
        elif first:
            schedule.step(inputs)
        elif last:
            schedule.step(target=targets, losses=losses)
        else:
            schedule.step()
        opt.step()
        totals.append(torch.stack(losses).detach().mean().to(torch.float64) if last
                      else torch.zeros((), dtype=torch.float64, device=dev))
    mean = torch.stack(totals)
    dist.all_reduce(mean)  # bookkeeping: the last stages' losses, summed over the dp pipelines
    gathered = nn.Sequential(*build_model(cfg, seed=0, device=dev).layers[bounds[k]:bounds[k + 1]])
    target = dict(gathered.named_parameters())
    with torch.no_grad():
        for name, p in stage_module.named_parameters():  # FSDP2 keeps the parameter names
            target[name].copy_(p.full_tensor())
    return {"losses": (mean / dp).tolist(), "stage": gathered,
            "mesh": tuple(mesh.mesh_dim_names), "mesh_shape": tuple(mesh.mesh.shape),
            "schedule": type(schedule).__name__, "micro_batches": micro_batches,
            "dp_sharded": type(next(stage_module.parameters())).__name__}


def pytorch_report(theirs: list[dict]) -> tuple[str, bool]:
    """Two report lines from every rank's ``"pytorch"`` entry of ``compose.train_dp_tp`` (each rank
    asserted the equality; this restates it): the layout, then the verdict."""
    t = theirs[0]
    held = all(r["max_loss_diff"] < 1e-5 and r["max_param_diff"] < 1e-5 for r in theirs)
    return (f"   PyTorch: DeviceMesh {t['mesh']} of {'x'.join(map(str, t['mesh_shape']))}, DTensor TP "
            f"on tp, FSDP2 on dp\n   (fc1 weight: {', '.join(t['fc1_placements'])})\n"
            f"   ours == PyTorch, losses and all {t['params_checked']} parameter tensors\n"
            f"   (assert_close, largest difference < 1e-5), every rank: {held}"), held


def pytorch_pp_report(theirs: list[dict]) -> tuple[str, bool]:
    """The DP x PP counterpart of ``pytorch_report``: layout line, then verdict line."""
    t = theirs[0]
    held = all(r["max_loss_diff"] < 1e-5 and r["max_param_diff"] < 1e-5 for r in theirs)
    total = sum(r["params_checked"] for r in theirs) // t["dp"]  # each stage counted once
    return (f"   PyTorch: DeviceMesh {t['mesh']} of {'x'.join(map(str, t['mesh_shape']))}, "
            f"pipelining\n   {t['schedule']} ({t['micro_batches']} micro-batches) on pp, FSDP2 on dp\n"
            f"   ours == PyTorch, losses and all {total} parameter tensors\n"
            f"   (assert_close, largest difference < 1e-5), every rank: {held}"), held
