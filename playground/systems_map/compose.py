"""Two parallelisms at once, on one rank grid, matching single-process training.

* ``DP(2)-TP(2)``: every block is tensor-parallel inside a TP pair; the two pairs see different
  halves of the batch and average their gradients with one all-reduce over the DP group.
* ``DP(2)-PP(2)``: the layer chain is cut into two stages that pass activations forward and
  gradients backward (GPipe order: all micro-batches forward, then all backward); the two
  pipelines see different halves of the batch and average gradients over the DP group.

``report`` sets the counted calls and bytes beside their formulas for the chapter, and
``key_bias_report`` (``playground.systems_map.key_bias``) measures why the runs use SGD rather than Adam.

Each run trains ``steps`` SGD steps and asserts, every step, that its loss equals the
single-process loss, and at the end that every parameter shard equals the matching slice of the
single-process model (``assert_close``).  Both are also checked, losses and every parameter,
against PyTorch's production 2-D runs (``compose_torch``: DeviceMesh with DTensor TP or
``torch.distributed.pipelining``'s GPipe, and FSDP2 over "dp").  Traffic is counted per axis with
``playground.comm``.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch import nn

from playground import comm
from playground.systems_map.compose_torch import (pytorch_pp_report, pytorch_report, train_dp_pp_torch,
                                      train_dp_tp_torch)
from playground.systems_map.grid import RankGrid
from playground.systems_map.key_bias import key_bias_gradients, key_bias_report  # re-exported
from playground.launch import device
from playground.launch_cli import cli
from playground.model import (ModelConfig, build_model, loss_fn, shard_batch, synthetic_batch,
                              train_step)
from playground.systems_map.tensor_parallel import TPBlock

__all__ = ["reference_run", "train_dp_tp", "train_dp_pp", "stage_bounds", "compose_runs",
           "check_world_size", "report", "key_bias_gradients", "key_bias_report"]

LR = 0.1


def _optimizer(params):
    # SGD with momentum, not Adam: the key bias's true gradient is exactly 0 (softmax ignores a
    # shift shared by all keys), so what backward computes is rounding noise, |g| ~ 1e-9, which
    # differs between equal computations.  Adam's first step lr·g/(|g| + eps), eps = 1e-8, makes
    # that a few to tens of percent of lr, of random sign (SGD: lr·1e-9), and equal math stops
    # looking equal.  ``key_bias_report`` measures it.
    return torch.optim.SGD(params, lr=LR, momentum=0.9)


def reference_run(cfg: ModelConfig, steps: int, batch: int, dev=None):
    """Single-process training on the full batch: the model and the loss of every step."""
    model = build_model(cfg, seed=0, device=dev or "cpu")
    opt = _optimizer(model.parameters())
    losses = [train_step(model, opt, tuple(t.to(dev or "cpu") for t in synthetic_batch(cfg, batch, s)))
              for s in range(steps)]
    return model, losses


def _average_gradients(params, group, n: int) -> None:
    """DP: one flat all-reduce of every gradient over ``group``, divided by its size."""
    if n == 1:
        return
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(flat, group=group)
    flat /= n
    for p, g in zip(params, flat.split([p.numel() for p in params])):
        p.grad.copy_(g.view_as(p))


def _mean_over(value: float, group, n: int) -> float:
    t = torch.tensor([value], dtype=torch.float64, device=device())
    dist.all_reduce(t, group=group)  # outside any count: bookkeeping, not training traffic
    return t.item() / n


def _check_run(steps, batch: int, dp: int, micro_batches: int = 1) -> None:
    """One clear error for a run that cannot be laid out, before any rank communicates."""
    for name, value in (("steps", steps), ("batch", batch), ("micro_batches", micro_batches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if batch % dp:
        raise ValueError(f"batch of {batch} examples does not split evenly over dp={dp} ranks")
    if batch // dp % micro_batches:
        raise ValueError(f"{batch // dp} examples per DP rank do not split into "
                         f"{micro_batches} micro-batches")


def train_dp_tp(rank: int, world_size: int, dp: int, tp: int, steps: int = 3, batch: int = 8,
                cfg: ModelConfig | None = None, pytorch: bool = True) -> dict:
    """Rank worker for a DP x TP grid: returns the losses and the traffic of each axis.  With
    ``pytorch`` it also trains PyTorch's 2-D DeviceMesh run (``compose_torch``) and checks ours
    against it (under ``"pytorch"``: its losses, mesh, a TP weight's placements, largest
    differences)."""
    cfg, dev = cfg or ModelConfig(), device()
    grid = RankGrid(dp=dp, tp=tp)
    _check_run(steps, batch, dp)
    groups = grid.groups(rank)
    ref, ref_losses = reference_run(cfg, steps, batch, dev)
    model = build_model(cfg, seed=0, device=dev)
    for i in range(1, cfg.n_layers + 1):
        model.layers[i] = TPBlock(model.layers[i], groups.group("tp"))
    params = list(model.parameters())
    opt = _optimizer(params)
    losses = []
    with comm.count() as moved:
        for step in range(steps):
            inputs, targets = shard_batch(synthetic_batch(cfg, batch, step), groups.index("dp"), dp)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(inputs.to(dev)), targets.to(dev))
            loss.backward()
            with comm.count() as dp_traffic:
                _average_gradients(params, groups.group("dp"), dp)
            opt.step()
            losses.append(loss.item())
    losses = [_mean_over(v, groups.group("dp"), dp) for v in losses]
    out = {"label": grid.describe(rank), "dp": dp, "tp": tp, "steps": steps, "batch": batch,
           "losses": losses, "reference_losses": ref_losses,
           "all": moved.summary(), "dp_per_step": dp_traffic.summary(),
           "local_param_bytes": sum(p.numel() * p.element_size() for p in params)}
    if pytorch:  # PyTorch's own 2-D DP x TP, same weights, batches and optimizer: checked first
        theirs = train_dp_tp_torch(dp, tp, steps, batch, _optimizer, cfg)
        diffs = _check(model.layers, losses, theirs.pop("model").layers, theirs["losses"],
                       "DPxTP, PyTorch 2-D")
        out["pytorch"] = {**theirs, **diffs}
    _check(model.layers, losses, ref.layers, ref_losses, "DPxTP, single process")
    return out


def _close(a, b, what: str, rtol=1e-4, atol=1e-5) -> float:
    """assert_close (fp32 tolerances) naming ``what``; returns the largest difference."""
    torch.testing.assert_close(a, b, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")
    return (a - b).abs().max().item()


def _check(layers, losses, want_layers, want_losses, against: str) -> dict:
    """assert_close of the losses and of every parameter of ``layers`` (TP blocks: this rank's
    shard of the matching layer of ``want_layers``); returns the largest differences and how many
    tensors."""
    loss_diff = _close(torch.tensor(losses), torch.tensor(want_losses), f"vs {against}, losses",
                       rtol=1e-5, atol=1e-6)
    param_diffs = []
    for i, layer in enumerate(layers):
        mine = dict(layer.named_parameters())
        if isinstance(layer, TPBlock):
            theirs = layer.expected_local(want_layers[i])
        else:
            theirs = {n: q.detach() for n, q in want_layers[i].named_parameters()}
        param_diffs += [_close(p.detach(), theirs[n], f"vs {against}, layer {i}, {n}")
                        for n, p in mine.items()]
    return {"max_loss_diff": loss_diff, "max_param_diff": max(param_diffs),
            "params_checked": len(param_diffs)}


def stage_bounds(n_layers: int, stages: int) -> list[int]:
    """Cut points of a chain of ``n_layers`` layers into ``stages`` near-equal consecutive slices."""
    if not 1 <= stages <= n_layers:
        raise ValueError(f"cannot cut {n_layers} layers into {stages} pipeline stages")
    return [round(k * n_layers / stages) for k in range(stages + 1)]


def train_dp_pp(rank: int, world_size: int, dp: int, pp: int, steps: int = 3, batch: int = 8,
                micro_batches: int = 2, cfg: ModelConfig | None = None, pytorch: bool = True) -> dict:
    """Rank worker for a DP x PP grid (GPipe schedule inside each pipeline).  With ``pytorch`` it
    also trains PyTorch's 2-D DP x PP run (``compose_torch``) and checks this rank's stage and
    the losses against it (under ``"pytorch"``)."""
    cfg, dev = cfg or ModelConfig(), device()
    grid = RankGrid(dp=dp, pp=pp)
    _check_run(steps, batch, dp, micro_batches)
    stage_bounds(cfg.n_layers + 2, pp)  # embedding + blocks + head: refuse too many stages now
    groups = grid.groups(rank)
    k, line = groups.index("pp"), groups.ranks("pp")
    ref, ref_losses = reference_run(cfg, steps, batch, dev)
    model = build_model(cfg, seed=0, device=dev)
    bounds = stage_bounds(len(model.layers), pp)
    stage = nn.Sequential(*copy.deepcopy(model.layers[bounds[k]:bounds[k + 1]]))
    ref_stage = ref.layers[bounds[k]:bounds[k + 1]]
    params = list(stage.parameters())
    opt = _optimizer(params)
    mb = batch // dp // micro_batches
    shape = (mb, cfg.seq_len, cfg.d_model)
    losses = []
    with comm.count() as moved:
        for step in range(steps):
            inputs, targets = shard_batch(synthetic_batch(cfg, batch, step), groups.index("dp"), dp)
            opt.zero_grad(set_to_none=True)
            kept, total = [], 0.0
            # isend/irecv + wait rather than send/recv: torch's send calls isend inside, and the
            # byte counter would see the same bytes twice
            for m in range(micro_batches):  # forward every micro-batch
                sl = slice(m * mb, (m + 1) * mb)
                if k == 0:
                    x = inputs[sl].to(dev)
                else:
                    x = torch.empty(shape, device=dev)
                    dist.irecv(x, line[k - 1]).wait()
                    x.requires_grad_()
                y = stage(x)
                if k < pp - 1:
                    dist.isend(y.detach().contiguous(), line[k + 1]).wait()
                else:
                    y = loss_fn(y, targets[sl].to(dev)) / micro_batches
                    total += y.item()
                kept.append((x, y))
            for x, y in reversed(kept):  # then every micro-batch backward
                if k == pp - 1:
                    y.backward()
                else:
                    grad = torch.empty(shape, device=dev)
                    dist.irecv(grad, line[k + 1]).wait()
                    y.backward(grad)
                if k > 0:
                    dist.isend(x.grad.contiguous(), line[k - 1]).wait()
            with comm.count() as dp_traffic:
                _average_gradients(params, groups.group("dp"), dp)
            opt.step()
            losses.append(total)
    last = torch.tensor(losses if k == pp - 1 else [0.0] * steps, dtype=torch.float64, device=dev)
    dist.all_reduce(last)  # every rank learns the pipelines' mean loss (bookkeeping)
    losses = (last / dp).float().cpu().tolist()
    out = {"label": grid.describe(rank), "stage_layers": (bounds[k], bounds[k + 1]),
           "dp": dp, "pp": pp, "steps": steps, "batch": batch, "micro_batches": micro_batches,
           "losses": losses, "reference_losses": ref_losses, "all": moved.summary(),
           "dp_per_step": dp_traffic.summary(),
           "local_param_bytes": sum(p.numel() * p.element_size() for p in params)}
    if pytorch:  # PyTorch's pipelining + FSDP2 on a 2-D mesh, same weights, batches, optimizer
        theirs = train_dp_pp_torch(dp, pp, steps, batch, micro_batches, bounds, _optimizer, cfg)
        diffs = _check(stage, losses, theirs.pop("stage"), theirs["losses"], "DPxPP, PyTorch 2-D")
        out["pytorch"] = {**theirs, **diffs, "dp": dp}
    _check(stage, losses, ref_stage, ref_losses, "DPxPP, single process")
    return out


def check_world_size(world_size: int) -> None:
    """compose_runs' 2 x 2 grids need exactly 4 ranks (``cli`` refuses others up front)."""
    if world_size != 4:
        raise ValueError(f"compose_runs lays out a 2 x 2 grid: it needs 4 ranks, got {world_size}")


def compose_runs(rank: int, world_size: int, steps: int = 3, batch: int = 8) -> dict:
    """Both 2-D layouts in one launch on 4 ranks (dp=2 with tp=2, then dp=2 with pp=2)."""
    check_world_size(world_size)
    return {"dp_tp": train_dp_tp(rank, world_size, 2, 2, steps, batch),
            "dp_pp": train_dp_pp(rank, world_size, 2, 2, steps, batch)}


def report(values: list[dict], cfg: ModelConfig | None = None) -> tuple[str, bool]:
    """The two layouts of ``compose_runs`` (one dict per rank) beside their predictions: losses
    against one process, the calls each rank made, DP x TP's all-reduces per step (4 per layer
    for TP, 1 for DP) and DP x PP's bytes per rank per step ((b/dp)·s·h·e).  Returns (text,
    every comparison holds)."""
    cfg = cfg or ModelConfig()
    L, s, h, e = cfg.n_layers, cfg.seq_len, cfg.d_model, 4  # fp32 activations
    lines, ok = [], True
    for key in ("dp_tp", "dp_pp"):
        r0 = values[0][key]
        same = all(v[key]["losses"] == r0["losses"] for v in values)
        equal = all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(r0["losses"], r0["reference_losses"]))
        ok &= same and equal
        lines.append(f"{key}: losses {[round(x, 4) for x in r0['losses']]}, single-process "
                     f"{[round(x, 4) for x in r0['reference_losses']]}")
        lines.append(f"   equal (to 1e-5 relative): {equal}; identical on all ranks: {same}")
        lines += [f"   {v[key]['label']:28s} calls {v[key]['all']['calls']}" for v in values]
        if all("pytorch" in v[key] for v in values):
            text, held = (pytorch_report if key == "dp_tp" else pytorch_pp_report)(
                [v[key]["pytorch"] for v in values])
            lines.append(text)
            ok &= held
    tp = values[0]["dp_tp"]
    counted = sorted({v["dp_tp"]["all"]["calls"]["all_reduce"] // tp["steps"] for v in values})
    ok &= counted == [4 * L + 1]
    lines.append(f"DPxTP all-reduces per step: {4 * L} (TP, 4 per layer) + 1 (DP) = {4 * L + 1}; "
                 f"counted {counted}")
    pp = values[0]["dp_pp"]
    predicted = pp["batch"] // pp["dp"] * s * h * e
    counted = sorted({v["dp_pp"]["all"]["sent_bytes"] // pp["steps"] for v in values})
    ok &= counted == [predicted]
    lines.append(f"DPxPP bytes sent per rank per step: (b/d)·s·h·q = {predicted:,} B; "
                 f"counted {counted}")
    return "\n".join(lines), ok


def _report(values) -> None:
    print(report(values)[0])


if __name__ == "__main__":
    cli(compose_runs, default_world_size=4, report=_report, check=check_world_size)
