"""ZeRO's single-process yardsticks: the training a sharded run must equal, and the activations.

``reference_parameters`` runs the recipe of ``playground.zero.zero_dp.ZeroDP`` in one process on the full
batch, computing its gradient as the sum of the N micro-batch gradients added in the order the
ring adds them (``ring_order_sum``), so that even bf16 rounding is the same; ``plain_parameters``
is ordinary fp32 full-batch training (``playground.model.train_step``), and
``differences_from_plain`` says where an fp32 run departs from it.  ``saved_activation_bytes``
measures what no ZeRO stage shards: the activations autograd keeps for backward.
The runs themselves are launched by ``playground.zero.runs``.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from playground.memory import SavedActivations
from playground.model import ModelConfig, build_model, loss_fn, shard_batch, synthetic_batch, train_step
from playground.data_parallel.shards import shard_bounds
from playground.zero.zero_dp import COMPUTE_DTYPE, flat_units

__all__ = ["reference_parameters", "plain_parameters", "differences_from_plain", "ring_order_sum",
           "grid_order_sum",
           "saved_activation_bytes", "flat_params"]


def flat_params(params) -> torch.Tensor:
    """One fp32 CPU vector of all the parameters, in order: what runs and references compare."""
    return torch.cat([p.detach().reshape(-1).float().cpu() for p in params])


def ring_order_sum(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Sum n flat tensors adding, for chunk c, rank c+1's part first, then c+2, ..., c last:
    the order ``playground.data_parallel.ring`` adds them in, so bf16 rounding comes out identical."""
    n = len(tensors)
    out = torch.empty_like(tensors[0])
    for c, (lo, hi) in enumerate(shard_bounds(tensors[0].numel(), n)):
        s = tensors[(c + 1) % n][lo:hi].clone()
        for k in range(2, n + 1):
            s = tensors[(c + k) % n][lo:hi] + s
        out[lo:hi] = s
    return out


@contextmanager
def _one_thread():
    """The ranks compute with one thread; so does the reference (kernels may split work
    differently with more threads and round differently)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def grid_order_sum(tensors: list[torch.Tensor], shards: int) -> torch.Tensor:
    """The sum HSDP (``playground.zero.hsdp``) computes from the ranks' flat gradients: each row
    of ``shards`` ranks reduce-scatters in ring order, then each shard is all-reduced over the
    rows (the replicas), again in ring order."""
    rows = [ring_order_sum(tensors[j:j + shards]) for j in range(0, len(tensors), shards)]
    out = torch.empty_like(rows[0])
    for lo, hi in shard_bounds(out.numel(), shards):
        out[lo:hi] = ring_order_sum([row[lo:hi] for row in rows])
    return out


def reference_parameters(cfg: ModelConfig, precision: str, n_micro: int, steps: int = 3,
                         batch_size: int = 8, lr: float = 1e-3, seed: int = 0, *,
                         accumulate: int = 1, shards: int | None = None):
    """Single-process training with the same recipe on the full batch; returns (fp32 parameter
    vector, losses).  The full-batch gradient is the mean of ``n_micro`` micro-batch gradients,
    flattened per layer and added in ring order (``ring_order_sum``).  With ``accumulate`` = k,
    each of the ``n_micro`` slices is cut again into k micro-batches, summed over the slices per
    micro-batch and the k sums added in turn (ZeroDP's gradient accumulation); with ``shards``,
    summed as HSDP sums (``grid_order_sum``)."""
    if precision not in COMPUTE_DTYPE:
        raise ValueError(f"precision must be one of {sorted(COMPUTE_DTYPE)}, got {precision!r}")
    if shards is not None and (n_micro % shards or shards < 1):
        raise ValueError(f"shards={shards!r} must divide n_micro={n_micro}")
    with _one_thread():
        model = build_model(cfg, seed)
        units = flat_units(model)
        masters = [torch.nn.Parameter(flat_params(u.parameters())) for u in units]
        model.to(COMPUTE_DTYPE[precision])
        optimizer = torch.optim.Adam(masters, lr=lr)
        losses = []
        for step in range(steps):
            batch = synthetic_batch(cfg, batch_size, step, seed)
            summed, micro_losses = [None] * len(units), []
            for m in range(accumulate):
                per_rank = []
                for r in range(n_micro):
                    inputs, targets = shard_batch(shard_batch(batch, r, n_micro), m, accumulate)
                    model.zero_grad(set_to_none=True)
                    loss = loss_fn(model(inputs), targets)
                    loss.backward()
                    micro_losses.append(loss.item())
                    per_rank.append([torch.cat([p.grad.reshape(-1) for p in u.parameters()])
                                     for u in units])
                for i in range(len(units)):
                    grads = [g[i] for g in per_rank]
                    s = grid_order_sum(grads, shards) if shards else ring_order_sum(grads)
                    summed[i] = s if summed[i] is None else summed[i].add_(s)
            for i, master in enumerate(masters):
                master.grad = summed[i].float().div_(n_micro * accumulate)
            optimizer.step()
            with torch.no_grad():
                for u, master in zip(units, masters):
                    torch.nn.utils.vector_to_parameters(master.to(COMPUTE_DTYPE[precision]),
                                                        u.parameters())
            losses.append(sum(micro_losses) / len(micro_losses))
    return torch.cat([m.detach() for m in masters]), losses


def plain_parameters(cfg: ModelConfig, steps: int = 3, batch_size: int = 8, lr: float = 1e-3,
                     seed: int = 0):
    """Ordinary fp32 full-batch training (one backward on the whole batch)."""
    with _one_thread():
        model = build_model(cfg, seed)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        losses = [train_step(model, optimizer, synthetic_batch(cfg, batch_size, step, seed))
                  for step in range(steps)]
    return flat_params(model.parameters()), losses


def differences_from_plain(params: torch.Tensor, plain: torch.Tensor, cfg: ModelConfig) -> dict:
    """Where an fp32 run's flat parameters differ from ``plain_parameters`` beyond assert_close's
    fp32 tolerance: how many, whether all are attention key biases (softmax ignores a shift
    shared by all keys, so their true gradient is 0 and Adam amplifies rounding noise), and the
    largest difference outside and inside those biases."""
    key = torch.cat([torch.full((p.numel(),), name.endswith("attn.wk.bias"))
                     for name, p in build_model(cfg).named_parameters()])
    off = ~torch.isclose(params, plain, rtol=1.3e-6, atol=1e-5)
    gap = (params - plain).abs()
    return {"differ": int(off.sum()), "only_key_biases": bool(key[off].all()),
            "key_biases": int(key.sum()), "max_other": gap[~key].max().item(),
            "max_key_bias": gap[key].max().item()}


def saved_activation_bytes(cfg: ModelConfig, micro_batch: int, seed: int = 0,
                           dtype: torch.dtype = torch.bfloat16) -> int:
    """Bytes autograd keeps for backward in one forward of ``micro_batch`` sequences (the model
    computing in ``dtype``; parameters excluded).  ZeRO shards none of it."""
    model = build_model(cfg, seed, dtype=dtype)
    inputs, targets = synthetic_batch(cfg, micro_batch, 0, seed)
    with _one_thread():
        with SavedActivations(exclude=model.parameters()) as saved:
            loss_fn(model(inputs), targets)
    return saved.bytes
