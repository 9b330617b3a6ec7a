"""Running ZeRO-3's refinements for real: prefetching, gradient accumulation, HSDP.

``zero3_ranks`` is the one rank function behind them (one launch costs seconds, so one launch
carries every requested part); ``launch_zero3`` checks the inputs and runs it.  Parts:

* ``"prefetch"``: ``PrefetchZeroDP`` without and with prefetching, per step the timeline of
  gathers and computes, the exposed gather time and the collective payloads;
* ``"accumulation"``: ``ZeroDP`` stages 2 and 3 with k accumulated micro-batches per step
  (bytes sent, all-gathers counted), and FSDP2 (``fully_shard``) under the same accumulation;
* ``"hsdp"``: ``HSDP`` on a replicas × shards grid (bytes inside the shard group and across
  replicas), and FSDP2 on a 2-D device mesh, which is PyTorch's HSDP.

The single-process reference they must equal is ``playground.zero.reference.reference_parameters``
(``accumulate=``, ``shards=``).
"""

from __future__ import annotations

import time
import warnings

import torch
import torch.distributed as dist

from playground.launch import LaunchError, device, run
from playground.model import ModelConfig, build_model, loss_fn, shard_batch, synthetic_batch
from playground.data_parallel.ring import ring_bytes_sent, shard_bounds
from playground.zero.hsdp import HSDP, check_grid
from playground.zero.prefetch import PrefetchZeroDP
from playground.zero.reference import flat_params
from playground.zero.zero_dp import COMPUTE_DTYPE, ZeroDP

__all__ = ["PARTS", "launch_zero3", "zero3_ranks", "predicted_accumulation_bytes",
           "predicted_hsdp_bytes", "prefetch_order", "hideable_wait_s", "exposed_ratio", "prefetch_demo",
           "timeline_rows", "PREFETCH_DEMO_CFG", "EMULATED_COMPUTE_S"]

PARTS = ("prefetch", "accumulation", "hsdp")


def launch_zero3(world_size: int, parts, cfg: ModelConfig | None = None, *, steps: int = 2,
                 batch_size: int = 8, accumulate: int = 2, shards: int = 2,
                 precision: str = "mixed", emulated_compute_s: float = 0.0, lr: float = 1e-3,
                 seed: int = 0, timeout_s: float = 300.0) -> list[dict]:
    """Check every input, then run ``zero3_ranks`` on ``world_size`` ranks; per-rank results."""
    if isinstance(parts, str) or not parts or any(p not in PARTS for p in parts):
        raise ValueError(f"parts must be a non-empty list drawn from {PARTS}, got {parts!r}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise LaunchError(f"world_size must be an integer >= 1, got {world_size!r}")
    for name, value in (("steps", steps), ("accumulate", accumulate)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1 \
            or batch_size % (world_size * accumulate):
        raise ValueError(f"batch_size={batch_size!r} must be a positive multiple of world_size x "
                         f"accumulate = {world_size} x {accumulate} (equal micro-batches)")
    if "hsdp" in parts:
        check_grid(world_size, shards)
    if not isinstance(precision, str) or precision not in COMPUTE_DTYPE:
        raise ValueError(f"precision must be one of {sorted(COMPUTE_DTYPE)}, got {precision!r}")
    if isinstance(emulated_compute_s, bool) or not isinstance(emulated_compute_s, (int, float)) \
            or not 0 <= emulated_compute_s <= 10:
        raise ValueError(f"emulated_compute_s must be seconds in [0, 10], got {emulated_compute_s!r}")
    if cfg is not None and not isinstance(cfg, ModelConfig):
        raise ValueError(f"cfg must be a playground.model.ModelConfig, got {type(cfg).__name__}")
    return run(zero3_ranks, world_size, tuple(parts), cfg or ModelConfig(), steps, batch_size,
               accumulate, shards, precision, float(emulated_compute_s), lr, seed,
               timeout_s=timeout_s, quiet=True)


# ----------------------------------------------------------------------------- formulas
def _sizes(precision: str) -> int:
    return torch.tensor([], dtype=COMPUTE_DTYPE[precision]).element_size()


def predicted_accumulation_bytes(numels, n: int, stage: int, micro_batches: int,
                                 precision: str = "mixed", rank: int = 0) -> int:
    """Exact bytes rank ``rank`` sends per step of ZeroDP with k = ``micro_batches``: each
    micro-batch reduce-scatters; stage 3 also gathers twice per micro-batch, k(2 AG + RS);
    stages 1-2 gather once after the update, k RS + AG."""
    es = _sizes(precision)
    rs = sum(ring_bytes_sent(m, n, es, rank, phases=1) for m in numels)
    ag = sum(ring_bytes_sent(m, n, es, rank, phases=2) for m in numels) - rs
    return micro_batches * (2 * ag + rs) if stage == 3 else micro_batches * rs + ag


def predicted_hsdp_bytes(numels, shards: int, replicas: int, precision: str = "mixed",
                         rank: int = 0) -> dict[str, int]:
    """Exact bytes HSDP rank ``rank`` sends per step: inside its row (2 AG + RS of every unit
    over ``shards`` ranks) and across its column (ring all-reduce of its shard of every unit
    over ``replicas`` ranks)."""
    es, column, row = _sizes(precision), rank % shards, rank // shards
    intra = sum(2 * ring_bytes_sent(m, shards, es, column, phases=2)
                - ring_bytes_sent(m, shards, es, column, phases=1) for m in numels)
    inter = 0
    for m in numels:
        lo, hi = shard_bounds(m, shards)[column]
        inter += ring_bytes_sent(hi - lo, replicas, es, row, phases=2)
    return {"intra": intra, "inter": inter}


# ----------------------------------------------------------------------------- the ranks
def _micro_batches(cfg, rank, n, steps, batch_size, k, seed):
    dev = device()
    for step in range(steps):
        mine = shard_batch(synthetic_batch(cfg, batch_size, step, seed), rank, n)
        yield [tuple(t.to(dev) for t in shard_batch(mine, m, k)) for m in range(k)]


def _train(engine, cfg, rank, n, steps, batch_size, k, seed, keep_timeline=False):
    out = {"losses": [], "sent_bytes": [], "all_gathers": [], "collective_bytes": []}
    for micro in _micro_batches(cfg, rank, n, steps, batch_size, k, seed):
        if keep_timeline:
            engine.timeline.clear()
            dist.barrier()  # the ranks start each step together
            out["t0"] = time.perf_counter()
        got = engine.accumulate_step(micro, loss_fn)
        for key in ("sent_bytes", "all_gathers", "collective_bytes"):
            out[key].append(got[key])
        out["losses"].append(got["loss"])
        out["inter_sent_bytes"] = out.get("inter_sent_bytes", []) + [got.get("inter_sent_bytes")]
    if keep_timeline:  # the last step's
        out["timeline"], out["exposed_s"] = list(engine.timeline), engine.exposed_gather_s()
        out["step_s"] = max(e["end"] for e in engine.timeline) - out["t0"]
    out["params"] = engine.parameters()
    return out


def _fsdp2(cfg, rank, n, steps, batch_size, k, precision, lr, seed, mesh=None):
    """FSDP2 on every layer and the root (on ``mesh``: HSDP when it is 2-D), k micro-batches
    per step with the loss scaled by 1/k, Adam."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    warnings.filterwarnings("ignore", message=".*returned a view tensor.*")
    model = build_model(cfg, seed, device=device())
    policy = MixedPrecisionPolicy(param_dtype=COMPUTE_DTYPE[precision],
                                  reduce_dtype=COMPUTE_DTYPE[precision])
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for micro in _micro_batches(cfg, rank, n, steps, batch_size, k, seed):
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for inputs, targets in micro:
            loss = loss_fn(model(inputs), targets)
            (loss / k).backward()
            total += loss.item()
        optimizer.step()
        losses.append(total / k)
    return {"losses": losses, "params": flat_params(p.full_tensor() for p in model.parameters())}


def zero3_ranks(rank: int, world_size: int, parts, cfg: ModelConfig, steps: int,
                batch_size: int, accumulate: int, shards: int, precision: str,
                emulated_compute_s: float, lr: float, seed: int) -> dict:
    """Rank function: every requested part (see module doc); returns {variant: result}, the
    parameters on rank 0 only."""
    n, results = world_size, {}
    common = (cfg, rank, n, steps, batch_size)
    if "prefetch" in parts:
        for prefetch in (False, True):
            engine = PrefetchZeroDP(build_model(cfg, seed, device=device()), precision,
                                    prefetch=prefetch, emulated_compute_s=emulated_compute_s,
                                    lr=lr)
            results["prefetch", prefetch] = _train(engine, *common, 1, seed, keep_timeline=True)
    if "accumulation" in parts:
        for stage in (2, 3):
            engine = ZeroDP(build_model(cfg, seed, device=device()), stage, precision, lr=lr)
            results["accumulation", stage] = _train(engine, *common, accumulate, seed)
        results["accumulation", "fsdp2"] = _fsdp2(*common, accumulate, precision, lr, seed)
    if "hsdp" in parts:
        engine = HSDP(build_model(cfg, seed, device=device()), shards, precision, lr=lr)
        results["hsdp", "ours"] = _train(engine, *common, 1, seed)
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh(device().type, (n // shards, shards),
                                mesh_dim_names=("replicate", "shard"))
        results["hsdp", "fsdp2"] = _fsdp2(*common, 1, precision, lr, seed, mesh=mesh)
    dist.barrier()
    if rank:
        for result in results.values():
            result["params"] = None
    return results


# ----------------------------------------------------------------------------- the prefetch demo
# big enough units (1.6 MB of bf16 per block) that a gather takes milliseconds on gloo; every
# unit's compute stretched to 30 ms of *emulated* device time (long enough that a gather
# under load, tens of ms on two shared cores, still fits under it) (see playground.zero.prefetch)
PREFETCH_DEMO_CFG = ModelConfig(d_model=256)
EMULATED_COMPUTE_S = 0.030


def prefetch_demo(world_size: int = 2, steps: int = 2) -> list[dict]:
    """The chapter's and the figure's prefetch run: ``PREFETCH_DEMO_CFG``, compute padded to
    ``EMULATED_COMPUTE_S`` per unit (emulated), without and with prefetching."""
    return launch_zero3(world_size, ["prefetch"], PREFETCH_DEMO_CFG, steps=steps,
                        batch_size=2 * world_size, emulated_compute_s=EMULATED_COMPUTE_S)


def timeline_rows(result: dict) -> list[tuple]:
    """One rank's last-step timeline as (phase, unit, kind, start ms, end ms) from the step's
    start, in time order: what the chapter prints and the figure draws."""
    t0 = result["t0"]
    rows = [(e["phase"], e["unit"], e["kind"], 1e3 * (e["start"] - t0), 1e3 * (e["end"] - t0))
            for e in result["timeline"]]
    return sorted(rows, key=lambda row: row[3])


# ----------------------------------------------------------------------------- reading a timeline
def prefetch_order(timeline) -> dict:
    """From one rank's timeline: for every unit that has a successor in its phase (i+1 in
    forward, i-1 in backward), whether the successor's gather was issued before this unit's
    compute ended.  Returns {"forward": [bool per unit], "backward": [...]}."""
    events = {(e["phase"], e["kind"], e["unit"]): e for e in timeline}
    units = sorted({e["unit"] for e in timeline})
    out = {}
    for phase, ahead in (("forward", 1), ("backward", -1)):
        order = units if ahead > 0 else units[::-1]
        out[phase] = [events[phase, "gather", j]["start"] < events[phase, "compute", i]["end"]
                      for i, j in zip(order, order[1:]) if (phase, "gather", j) in events]
    return out


def hideable_wait_s(result: dict) -> float:
    """Seconds the compute waited on the gathers prefetching can hide: every gather but the first of
    its pass (forward's first unit, backward's last), which nothing runs before, so both schedules
    wait for it (chapter 3's eq-zero-prefetch, its first term; small units, so that wait is mostly latency)."""
    gathers = [e for e in result["timeline"] if e["kind"] == "gather"]
    units = [e["unit"] for e in gathers]
    first = {"forward": min(units), "backward": max(units)}
    return sum(e["waited"] for e in gathers if e["unit"] != first[e["phase"]])


def exposed_ratio(runs: list[dict]) -> float:
    """Slowest rank's wait on the gathers prefetching can hide (``hideable_wait_s``), with prefetching
    over without (0: all of them hidden)."""
    without = max(hideable_wait_s(r["prefetch", False]) for r in runs)
    return max(hideable_wait_s(r["prefetch", True]) for r in runs) / without if without > 0 else 0.0


def demo(rank: int, world_size: int) -> dict:
    """``python -m playground.zero.zero3_runs --nproc 4``: accumulation and HSDP bytes."""
    out = zero3_ranks(rank, world_size, ("accumulation", "hsdp"), ModelConfig(), 1, 8, 2, 2,
                      "mixed", 0.0, 1e-3, 0)
    return {"accumulation": out["accumulation", 3]["sent_bytes"][0],
            "gathers": out["accumulation", 3]["all_gathers"][0],
            "hsdp_total": out["hsdp", "ours"]["sent_bytes"][0],
            "hsdp_inter": out["hsdp", "ours"]["inter_sent_bytes"][0]}


def _report(values) -> None:
    numels = [sum(p.numel() for p in unit.parameters()) for unit in build_model(ModelConfig()).layers]
    n = len(values)
    v = values[0]
    print(f"ZeRO-3, 2 micro-batches: sent {v['accumulation']:,} B in {v['gathers']} all-gathers "
          f"(predicted {predicted_accumulation_bytes(numels, n, 3, 2):,} B)")
    p = predicted_hsdp_bytes(numels, 2, n // 2)
    print(f"HSDP {n // 2} x 2: {v['hsdp_total'] - v['hsdp_inter']:,} B inside the shard group "
          f"(predicted {p['intra']:,}), {v['hsdp_inter']:,} B across replicas (predicted {p['inter']:,})")


if __name__ == "__main__":
    from playground.launch_cli import cli
    cli(demo, default_world_size=4, report=_report)
