"""Running ZeRO for real: the rank function, its launcher, the production equivalents, bytes sent.

``train_ranks`` is the one rank function the chapter, tests, figures and benchmark launch: it
trains the shared model with every requested variant in one launch (each launch of ranks costs
seconds) and returns, per variant, the losses, the bytes this rank sent per step, the model
states it held, the time per step and (on rank 0) the final parameters.

Variants: ``("zero", stage, precision)`` is ``playground.zero.zero_dp.ZeroDP``; ``("zero_optim",)`` is
``torch.distributed.optim.ZeroRedundancyOptimizer`` under DDP (fp32: it has no mixed precision);
``("fsdp2", precision)`` is ``fully_shard`` on every layer and the root (ZeRO stage 3);
``("fsdp2_no_reshard", precision)`` is the same with ``reshard_after_forward=False``, the gathered
parameters kept from forward to backward (ZeRO stage 2); ``("ddp",)`` is plain
``DistributedDataParallel`` with Adam (fp32), the speed baseline.

The single-process references they are checked against are in ``playground.zero.reference``.
"""

from __future__ import annotations

import statistics
import time
import warnings

import torch
import torch.distributed as dist

from playground.launch import LaunchError, device, run
from playground.memory import model_state_bytes
from playground.model import ModelConfig, build_model, loss_fn, shard_batch, synthetic_batch
from playground.data_parallel.ring import SEGMENT_BYTES, ring_bytes_sent
from playground.data_parallel.shards import shard_bounds
from playground.zero.zero_dp import COMPUTE_DTYPE, ZeroDP, flat_units
from playground.zero.reference import flat_params

__all__ = ["launch", "train_ranks", "unit_numels", "predicted_sent_bytes", "predicted_messages",
           "check_variants", "state_report", "traffic_report", "step_ms", "timing_report"]


def _known(v) -> bool:
    if not isinstance(v, tuple):  # a bare string would otherwise split into letters
        return False
    precision = v[-1] if len(v) > 1 and isinstance(v[-1], str) else None  # hashable, or None
    return (len(v) == 3 and v[0] == "zero" and type(v[1]) is int and v[1] in (0, 1, 2, 3)
            and precision in COMPUTE_DTYPE) or \
        (len(v) == 2 and v[0] in ("fsdp2", "fsdp2_no_reshard") and precision in COMPUTE_DTYPE) or \
        v in (("zero_optim",), ("ddp",))


def check_variants(variants) -> list[tuple]:
    """Refuse a malformed variant list before any process starts."""
    if isinstance(variants, (str, bytes)) or not hasattr(variants, "__iter__"):
        raise ValueError(f"variants must be a list of variant tuples, got {variants!r}")
    variants = [tuple(v) if isinstance(v, list) else v for v in variants]
    for v in variants:
        if not _known(v):
            raise ValueError(f"unknown variant {v!r}: use ('zero', stage 0-3, 'mixed'|'fp32'), "
                             "('fsdp2' or 'fsdp2_no_reshard', 'mixed'|'fp32'), ('zero_optim',) or ('ddp',)")
    if len(set(variants)) != len(variants):
        raise ValueError("each variant may appear once (use repeats= to time several runs)")
    return variants


def launch(world_size: int, variants, cfg: ModelConfig | None = None, *, steps: int = 3,
           batch_size: int = 8, lr: float = 1e-3, seed: int = 0, repeats: int = 1,
           timeout_s: float = 300.0) -> list[dict]:
    """Check the inputs, then run ``train_ranks`` on ``world_size`` ranks; per-rank results."""
    variants = check_variants(variants)
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise LaunchError(f"world_size must be an integer >= 1, got {world_size!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1 \
            or batch_size % world_size:
        raise ValueError(f"batch_size={batch_size!r} must be a positive multiple of "
                         f"world_size={world_size} (every rank gets an equal micro-batch)")
    for name, value in (("steps", steps), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if cfg is not None and not isinstance(cfg, ModelConfig):
        raise ValueError(f"cfg must be a playground.model.ModelConfig, got {type(cfg).__name__}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
        raise ValueError(f"lr must be a number > 0, got {lr!r}")
    return run(train_ranks, world_size, variants, cfg or ModelConfig(), steps, batch_size, lr,
               seed, repeats, timeout_s=timeout_s, quiet=True)


def predicted_sent_bytes(numels, n: int, stage: int, precision: str, rank: int = 0) -> int:
    """Bytes rank ``rank`` sends in one ZeroDP step: one ring reduce-scatter (RS) and one ring
    all-gather (AG) of every unit (stage 0 as an all-reduce), plus a second AG in stage 3."""
    if type(stage) is not int or stage not in (0, 1, 2, 3):
        raise ValueError(f"stage must be one of (0, 1, 2, 3), got {stage!r}")
    if not isinstance(precision, str) or precision not in COMPUTE_DTYPE:
        raise ValueError(f"precision must be one of {sorted(COMPUTE_DTYPE)}, got {precision!r}")
    es = torch.tensor([], dtype=COMPUTE_DTYPE[precision]).element_size()
    rs = sum(ring_bytes_sent(k, n, es, rank, phases=1) for k in numels)
    ag = sum(ring_bytes_sent(k, n, es, rank, phases=2) for k in numels) - rs
    return rs + (2 if stage == 3 else 1) * ag


def predicted_messages(numels, n: int, stage: int, precision: str, rank: int = 0) -> int:
    """Messages rank ``rank`` sends in one ZeroDP step: n-1 ring steps per reduce-scatter and per
    all-gather of every unit (one message per step, or one per ~1 MiB segment of big chunks)."""
    predicted_sent_bytes(numels, n, stage, precision, rank)  # the same checks of the input
    es = torch.tensor([], dtype=COMPUTE_DTYPE[precision]).element_size()
    total = 0
    for numel in numels:
        sizes = [hi - lo for lo, hi in shard_bounds(numel, n)]
        count = max(1, -(-sizes[0] * es // SEGMENT_BYTES))  # segments per chunk (ring._ring_pass)
        for first, times in ((1, 1), (0, 2 if stage == 3 else 1)):  # reduce-scatter, all-gather
            total += times * sum(min(count, sizes[(rank - step - first) % n])
                                 for step in range(n - 1))
    return total


def unit_numels(cfg: ModelConfig) -> list[int]:
    """Elements of each unit (entry of ``model.layers``): what ZeroDP flattens and shards."""
    model = build_model(cfg, 0)
    return [sum(p.numel() for p in layer.parameters()) for layer in flat_units(model)]


# ----------------------------------------------------------------------------- the ranks
def _batches(cfg, rank, n, steps, batch_size, seed):
    dev = device()
    for step in range(steps):
        yield tuple(t.to(dev) for t in shard_batch(synthetic_batch(cfg, batch_size, step, seed),
                                                   rank, n))


def _run_zero(cfg, rank, n, stage, precision, steps, batch_size, lr, seed):
    model = build_model(cfg, seed, device=device())
    engine = ZeroDP(model, stage, precision, lr=lr)
    losses, sent, messages, times = [], [], [], []
    for batch in _batches(cfg, rank, n, steps, batch_size, seed):
        start = time.perf_counter()
        out = engine.step(batch, loss_fn)
        times.append(time.perf_counter() - start)
        losses.append(out["loss"])
        sent.append(out["sent_bytes"])
        messages.append(out["messages"])
    params = engine.parameters()
    return {"losses": losses, "sent_bytes": sent, "messages": messages, "times": times,
            "state_bytes": engine.last_state_bytes, "params": params}


def _run_torch(cfg, rank, n, kind, precision, steps, batch_size, lr, seed):
    """The production equivalents: ZeroRedundancyOptimizer, FSDP2 (resharding after forward, or
    not: ``fsdp2_no_reshard``), DDP."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = build_model(cfg, seed, device=device())
    if kind in ("fsdp2", "fsdp2_no_reshard"):
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        # our layers return views (a reshape inside Linear); harmless: nothing edits them in place
        warnings.filterwarnings("ignore", message=".*returned a view tensor.*")
        policy = MixedPrecisionPolicy(param_dtype=COMPUTE_DTYPE[precision],
                                      reduce_dtype=COMPUTE_DTYPE[precision])
        reshard = kind == "fsdp2"  # False: keep the gathered parameters for backward (stage 2)
        for layer in model.layers:
            fully_shard(layer, mp_policy=policy, reshard_after_forward=reshard)
        fully_shard(model, mp_policy=policy, reshard_after_forward=reshard)
        wrapped, optimizer = model, torch.optim.Adam(model.parameters(), lr=lr)
    elif kind == "zero_optim":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        wrapped = DDP(model)
        optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam,
                                            lr=lr)
    else:
        wrapped, optimizer = DDP(model), torch.optim.Adam(model.parameters(), lr=lr)
    losses, times = [], []
    for inputs, targets in _batches(cfg, rank, n, steps, batch_size, seed):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=False)
        loss = loss_fn(wrapped(inputs), targets)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    held = model_state_bytes(model.parameters(), optimizer.optim if kind == "zero_optim"
                             else optimizer)
    if kind in ("fsdp2", "fsdp2_no_reshard"):
        params = [p.full_tensor() for p in model.parameters()]
    else:
        params = list(model.parameters())
    return {"losses": losses, "times": times, "state_bytes": held,
            "params": flat_params(params)}


def train_ranks(rank: int, world_size: int, variants, cfg: ModelConfig | None = None,
                steps: int = 3, batch_size: int = 8, lr: float = 1e-3, seed: int = 0,
                repeats: int = 1) -> dict:
    """Rank function: train every variant in ``variants`` (see module doc) ``repeats`` times,
    interleaved; returns {variant: result}.  Parameters are returned by rank 0 only."""
    cfg = cfg or ModelConfig()
    results: dict = {}
    for _ in range(repeats):
        for variant in variants:
            kind = variant[0]
            if kind == "zero":
                out = _run_zero(cfg, rank, world_size, variant[1], variant[2], steps,
                                batch_size, lr, seed)
            elif kind in ("fsdp2", "fsdp2_no_reshard", "zero_optim", "ddp"):
                precision = variant[1] if kind.startswith("fsdp2") else "fp32"
                out = _run_torch(cfg, rank, world_size, kind, precision, steps, batch_size,
                                 lr, seed)
            else:
                raise ValueError(f"unknown variant {variant!r}")
            dist.barrier()
            if rank:
                out["params"] = None
            if variant in results:  # a repeat: keep every timing, the rest is identical
                results[variant]["times"] += out["times"]
            else:
                results[variant] = out
    return results


# ----------------------------------------------------------------------------- reports
def state_report(runs: list[dict], cfg: ModelConfig, precision: str = "mixed") -> tuple[str, bool]:
    """Model states rank 0 held in each ZeroDP stage of ``runs`` beside the formulas
    (``accounting.predicted``), and whether every rank held exactly ``exact_bytes``.
    Returns (lines, every rank exact)."""
    from playground.zero.accounting import exact_bytes, predicted
    n, psi, numels = len(runs), cfg.param_count(), unit_numels(cfg)
    lines, ok = ["bytes per rank: parameters + gradients + optimizer = total"], True
    for stage in range(4):
        held = [r[("zero", stage, precision)]["state_bytes"] for r in runs]
        exact = all(h == exact_bytes(numels, n, stage, rank, precision) for rank, h in enumerate(held))
        ok &= exact
        m, f = held[0], predicted(psi, n, stage, precision)
        lines.append(f"stage {stage}: counted {m['parameters']:>7,} + {m['gradients']:>7,} + "
                     f"{m['optimizer']:>7,} = {m['total']:>7,} B")
        lines.append(f"       accounted {f['parameters']:>7,.0f} + {f['gradients']:>7,.0f} + "
                     f"{f['optimizer']:>7,.0f} = {f['total']:>7,.0f} B; all {n} ranks exact: {exact}")
    return "\n".join(lines), ok


def traffic_report(runs: list[dict], cfg: ModelConfig, precision: str = "mixed") -> str:
    """Rank 0's bytes and messages per step of each ZeroDP stage in ``runs`` (per-rank results
    of ``launch``), in units of Psi elements, beside ``predicted_sent_bytes`` and
    ``predicted_messages``; then stage 3 over stage 0."""
    n, psi, numels = len(runs), cfg.param_count(), unit_numels(cfg)
    es = torch.tensor([], dtype=COMPUTE_DTYPE[precision]).element_size()
    sent = {}
    lines = []
    for stage in range(4):
        got = runs[0][("zero", stage, precision)]
        sent[stage], messages = got["sent_bytes"][0], got["messages"][0]
        volume = sent[stage] / es / psi * n / (n - 1)  # elements per step / Psi, ring factor off
        lines.append(f"stage {stage}: sent {sent[stage]:>7,} B per step = {volume:.2f} Psi elements"
                     f" x (n-1)/n x {es} B")
        lines.append(f"         predicted {predicted_sent_bytes(numels, n, stage, precision):>7,} B;"
                     f" {messages} messages (predicted "
                     f"{predicted_messages(numels, n, stage, precision)}), "
                     f"{sent[stage] / messages:,.0f} B each on average")
    lines.append(f"stage 3 / stage 0 = {sent[3] / sent[0]:.2f} (3 Psi / 2 Psi predicts 1.5)")
    return "\n".join(lines)


def step_ms(runs: list[dict], variant) -> float:
    """Median over the steps of ``variant`` (all repeats) of the slowest rank's time, in ms."""
    return 1e3 * statistics.median(max(ts) for ts in zip(*(r[variant]["times"] for r in runs)))


def timing_report(runs: list[dict], precision: str = "mixed") -> tuple[str, dict]:
    """Step time of each ZeroDP stage and its ratio to the fastest of stages 0-2; returns
    (lines, {stage: ms})."""
    t = {s: step_ms(runs, ("zero", s, precision)) for s in range(4)}
    fastest = min(t[0], t[1], t[2])
    return "\n".join(f"stage {s}: {t[s]:6.1f} ms per step ({t[s] / fastest:.2f} x the fastest of "
                     "stages 0-2)" for s in range(4)), t


def demo(rank: int, world_size: int) -> dict:
    """``python -m playground.zero.runs --nproc N``: the four stages, mixed precision, 3 steps."""
    variants = [("zero", s, "mixed") for s in range(4)]
    out = train_ranks(rank, world_size, variants, batch_size=2 * world_size)
    return {v[1]: {"held": r["state_bytes"]["total"], "sent": r["sent_bytes"][0]}
            for v, r in out.items()}


def _report(values) -> None:
    from playground.zero.accounting import predicted
    n, cfg = len(values), ModelConfig()
    psi = cfg.param_count()
    for stage in range(4):
        held, sent = values[0][stage]["held"], values[0][stage]["sent"]
        print(f"stage {stage}: rank 0 holds {held:,} B of model state (formula "
              f"{predicted(psi, n, stage)['total']:,.0f} B), sent {sent:,} B per step "
              f"(predicted {predicted_sent_bytes(unit_numels(cfg), n, stage, 'mixed'):,} B)")


if __name__ == "__main__":
    from playground.launch_cli import cli
    cli(demo, default_world_size=4, report=_report)
