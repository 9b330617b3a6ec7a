"""ZeRO-3's peak memory per rank, measured (a run: it launches ranks).

``ZeRO-3 holds (2 + 2 + K)Ψ/n bytes`` counts the model states *between* uses.  While a step runs,
a rank also holds, for a moment, what the steady state leaves out:

* in forward and backward: the full parameters of the unit being computed (q·Ψ_u bytes for a
  unit of Ψ_u elements), and with prefetching the next unit's too; in backward, that unit's
  gradient buffers (its per-parameter gradients and their flat copy, 2·q·Ψ_u), the gradient
  shards reduced so far (up to q·Ψ/n) and the activations saved for backward;
* in the update: the fp32 copy of the gradient shards Adam reads (4Ψ/n) and Adam's own
  temporaries.

``peak_ranks`` trains ``PrefetchZeroDP`` with and without prefetching and measures, on the last
step, the allocator's peak inside forward + backward and inside the update
(``playground.memory.PeakMemory``), on top of the model states counted at the step's start
(``storage_bytes``).  ``predicted_peak`` is the accounting above.
"""

from __future__ import annotations

import torch

from playground.launch import device, run
from playground.memory import PeakMemory
from playground.model import ModelConfig, build_model, loss_fn, shard_batch, synthetic_batch
from playground.zero.prefetch import PrefetchZeroDP
from playground.zero.reference import saved_activation_bytes
from playground.zero.zero_dp import COMPUTE_DTYPE

__all__ = ["PEAK_CFG", "launch_peak", "peak_ranks", "predicted_peak", "activations"]

PEAK_CFG = ModelConfig(d_model=256)  # blocks of 0.79 M elements: a gathered unit is visible


class _Measured(PrefetchZeroDP):
    """``PrefetchZeroDP`` whose update is measured apart from the forward and backward before it."""

    def _update(self, divisor: int) -> None:
        self.passes.__exit__(None, None, None)  # forward and backward are over
        with PeakMemory(self.model_device) as self.update_peak:
            super()._update(divisor)


def peak_ranks(rank: int, world_size: int, cfg: ModelConfig, micro_batch: int, steps: int,
               precision: str, seed: int) -> dict:
    """Rank function: per ``prefetch`` in (False, True), the last step's model states counted at
    its start (bytes), the allocator's peak rise in forward + backward and in the update above
    that start (bytes), and the trained parameters."""
    torch.set_num_threads(1)
    dev = device()
    out = {}
    for prefetch in (False, True):
        model = build_model(cfg, seed, device=dev)
        engine = _Measured(model, precision, prefetch=prefetch)
        engine.model_device = dev
        for step in range(steps):  # Adam creates its state in the first step: measure the last
            batch = shard_batch(synthetic_batch(cfg, micro_batch * world_size, step, seed),
                                rank, world_size)
            start = engine.state_bytes()["total"]
            engine.passes = PeakMemory(dev).__enter__()
            engine.step(tuple(t.to(dev) for t in batch), loss_fn)
        passes, update = engine.passes, engine.update_peak
        out[prefetch] = {"start_bytes": start, "passes_rise": passes.bytes,
                         "update_rise": passes.net_bytes + update.bytes,
                         "params": engine.parameters()}
    return out


def launch_peak(world_size: int = 2, cfg: ModelConfig | None = None, *, micro_batch: int = 1,
                steps: int = 2, precision: str = "mixed", seed: int = 0) -> list[dict]:
    """Run ``peak_ranks`` on ``world_size`` ranks (at least 2 steps); per-rank results."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 2:
        raise ValueError(f"steps must be an integer >= 2 (the first creates Adam's state), got {steps!r}")
    if isinstance(micro_batch, bool) or not isinstance(micro_batch, int) or micro_batch < 1:
        raise ValueError(f"micro_batch must be an integer >= 1, got {micro_batch!r}")
    if precision not in COMPUTE_DTYPE:
        raise ValueError(f"precision must be one of {sorted(COMPUTE_DTYPE)}, got {precision!r}")
    return run(peak_ranks, world_size, cfg or PEAK_CFG, micro_batch, steps, precision, seed,
               quiet=True)


def predicted_peak(numels, n: int, prefetch: bool, activation_bytes: int,
                   precision: str = "mixed") -> dict[str, int]:
    """Accounted rise above the step's starting model states, in bytes: forward + backward
    (gathered units, one unit's gradient buffers, every gradient shard, the activations) and
    the update (gradient shards plus their fp32 copy for Adam)."""
    q = torch.tensor([], dtype=COMPUTE_DTYPE[precision]).element_size()
    largest, shard = max(numels), sum(-(-m // n) for m in numels)
    terms = {"gathered": (2 if prefetch else 1) * q * largest,   # this unit (+ the next one)
             "grad_buffers": 2 * q * largest,                     # per-parameter grads + flat copy
             "grad_shards": q * shard,                            # what the step keeps, 2Ψ/n
             "activations": activation_bytes}
    terms["passes"] = sum(terms.values())
    terms["update"] = q * shard + 4 * shard                      # + the fp32 copy Adam reads
    return terms


def activations(cfg: ModelConfig, micro_batch: int, precision: str = "mixed") -> int:
    """Bytes autograd saves in one forward of a rank's micro-batch (counted, one process)."""
    return saved_activation_bytes(cfg, micro_batch, dtype=COMPUTE_DTYPE[precision])
