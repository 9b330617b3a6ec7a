"""Does the batch split over the GPUs?  When it does not, which GPU count or batch would run better.

Data parallelism takes whole sequences: DP x micro-batch must divide the global batch.  Whatever
part of the GPU count the batch cannot take as DP must go to model parallelism (TP, PP, CP), even
where the model fits on fewer GPUs.  Give Llama 3 8B and its 512-sequence batch 1,920 H100s
(2^7 x 3 x 5) and the odd 15 has to become pipeline stages: the step spends 30% of its time in
the bubble, and the run takes longer than on 1,024 GPUs.

``better_runs`` asks the step-time model about the neighbours a practitioner would consider — the
powers of two just below and above the GPU count, the batch rounded to a multiple of a large power
of two, and the smallest batch as large that splits evenly over the replicas of the least model
parallelism that fits —
and keeps those that save at least ``GAIN`` of the GPU-hours; ``split_advice`` asks it for every
layout the plan's search picks.  ``check_batch_splits`` turns "no layout runs this batch" into an
error that names what does.
"""

from __future__ import annotations

import math

from playground.planner.architecture import Model
from playground.planner.errors import PlanError
from playground.planner.layout import Cluster, Efficiency, Layout
from playground.planner.layout_search import candidate_layouts, minimal_model_parallelism, no_layout_runs, search

__all__ = ["round_batch", "nearby_counts", "better_runs", "split_advice", "check_batch_splits", "GAIN", "ROUNDING",
           "MOST_BATCH_GROWTH"]

GAIN = 0.10              # an alternative is named when it saves at least this share of the GPU-hours
ROUNDING = 0.05          # a batch is rounded to a power-of-two multiple at most this far from it
MOST_BATCH_GROWTH = 4    # a batch that splits evenly is offered up to this many times the batch given


def round_batch(batch: int, within: float = ROUNDING) -> int:
    """The multiple of the largest power of two within ``within`` of ``batch`` (nearest, upwards on
    a tie): 1,953 sequences -> 2,048; a batch already such a multiple comes back unchanged."""
    best = batch
    for k in range(1, batch.bit_length() + 1):
        step = 2 ** k
        near = max(step, step * round(batch / step))
        if abs(near - batch) <= within * batch:
            best = near
    return best


def nearby_counts(gpus: int) -> list[int]:
    """The powers of two just below and above ``gpus`` (none when it is one)."""
    if gpus & (gpus - 1) == 0:
        return []
    below = 2 ** (gpus.bit_length() - 1)
    return [below, 2 * below]


def _factors(n: int) -> str:
    """``n`` as a product of primes: 1,920 -> 2^7 x 3 x 5."""
    out, p = [], 2
    while n > 1 and p * p <= n:
        k = 0
        while n % p == 0:
            n, k = n // p, k + 1
        out += [f"{p}^{k}" if k > 1 else str(p)] if k else []
        p += 1
    return " x ".join(out + ([str(n)] if n > 1 else [])) or "1"


def _factored(n: int) -> str:
    """`` = 2^7 x 3 x 5`` after a count of two or more primes (1,920), nothing after 8 or 7."""
    primes = _factors(n)
    return f" = {primes}" if " x " in primes else ""


def _runs(model: Model, gpus: int, batch: int, fixed: dict) -> bool:
    """Whether any layout of ``gpus`` GPUs can run ``batch`` sequences (memory not checked)."""
    return bool(candidate_layouts(model, gpus, batch, gpus, fixed))


def check_batch_splits(model: Model, gpus: int, global_batch: int, fixed: dict) -> None:
    """Raise a ``PlanError`` that names the GPU counts and batches that run, when no layout of
    ``gpus`` GPUs can take ``global_batch`` sequences."""
    if _runs(model, gpus, global_batch, fixed):
        return
    counts = [n for n in nearby_counts(gpus) if _runs(model, n, global_batch, fixed)]
    # the batches below and above that leave the least model parallelism forced (gpus / gcd), nearest first
    forced = lambda b: (gpus // math.gcd(gpus, b), abs(b - global_batch))  # noqa: E731
    below = min((b for b in range(max(global_batch // 2, 1), global_batch) if _runs(model, gpus, b, fixed)),
                key=forced, default=None)
    above = min((b for b in range(global_batch + 1, 2 * global_batch + 1) if _runs(model, gpus, b, fixed)),
                key=forced, default=None)
    batches = [f"{b:,}" for b in (below, above) if b]
    what = "; ".join(filter(None, (
        f"{global_batch:,} sequences run on {' or '.join(f'{n:,}' for n in counts)} GPUs" if counts else "",
        f"{gpus:,} GPUs run a batch of {' or '.join(batches)} sequences" if batches else "")))
    raise PlanError(no_layout_runs(model, gpus, global_batch) + (f"; {what}" if what else ""))


def _alternatives(gpus: int, global_batch: int, least_model_parallel: int | None) -> list[tuple[int, int, str]]:
    """(GPUs, batch, why) of each neighbour worth predicting."""
    out = [(n, global_batch, "same batch") for n in nearby_counts(gpus)]
    rounded = round_batch(global_batch)
    if rounded != global_batch:
        out.append((gpus, rounded, f"the batch rounded to a multiple of {rounded & -rounded:,}"))
    if least_model_parallel and gpus % least_model_parallel == 0:
        replicas = gpus // least_model_parallel   # the data parallelism the least model parallelism leaves
        even = -(-global_batch // replicas) * replicas
        if even not in (global_batch, rounded) and even <= MOST_BATCH_GROWTH * global_batch:
            out.append((gpus, even, f"split evenly over DP {replicas:,}, the least model parallelism that fits"))
    return out


def better_runs(model: Model, cluster: Cluster, gpus: int, global_batch: int, tokens: float, gpu_hours: float,
                least_model_parallel: int | None, eff: Efficiency, fixed: dict) -> list[dict]:
    """The neighbours of this run (``_alternatives``) whose fastest layout, found by ``search`` with
    the same fixed knobs and constants, trains the same ``tokens`` in at least ``GAIN`` fewer GPU-hours
    than ``gpu_hours``; fastest in GPU-hours first."""
    out = []
    for n, batch, why in _alternatives(gpus, global_batch, least_model_parallel):
        try:
            best = search(model, cluster, n, batch, top=1, eff=eff, **dict(fixed))["best"]
        except PlanError:
            continue
        if best is None:
            continue
        steps = math.ceil(tokens / (batch * model.seq_len))
        seconds = steps * best["step_time_s"]
        hours = seconds * n / 3600
        if hours > (1 - GAIN) * gpu_hours:
            continue
        out.append({"gpus": n, "global_batch": batch, "global_batch_tokens": batch * model.seq_len, "why": why,
                    "layout": Layout(**best["layout"]).describe(), "mfu": best["mfu"],
                    "step_time_s": best["step_time_s"], "days": seconds / 86400, "gpu_hours": hours,
                    "gpu_hours_change": hours / gpu_hours - 1})
    return sorted(out, key=lambda r: r["gpu_hours"])


def split_advice(model: Model, cluster: Cluster, layout: Layout, global_batch: int, tokens: float, gpu_hours: float,
                 eff: Efficiency, fixed: dict, cost: str = "the GPU-hours") -> tuple[list[dict], str | None]:
    """For a layout the search found: the ``better_runs`` of its GPU count and batch, and a note that
    introduces them, saying why the search could not do better where it knows (more model parallelism
    than the least that fits); ``cost`` names what they save (a training's GPU-hours, or per token)."""
    gpus, taken = layout.gpus, layout.tp * layout.pp * layout.cp
    try:
        least = minimal_model_parallelism(model, cluster.gpu, gpus, global_batch, **fixed)
        needed = least["layout"].tp * least["layout"].pp * least["layout"].cp if least["fits"] else None
    except PlanError:
        needed = None
    runs = better_runs(model, cluster, gpus, global_batch, tokens, gpu_hours, needed, eff, fixed)
    if not runs:
        return [], None
    if needed and taken > needed:
        why = (f"the {global_batch:,}-sequence batch does not split well over {gpus:,}{_factored(gpus)} GPUs: the "
               f"fastest layout holds TP x PP x CP = {taken} where {needed} fits")
    else:
        why = (f"the layout above is the fastest the search found for {gpus:,}{_factored(gpus)} GPUs and "
               f"{global_batch:,} sequences")
    other_batch = any(r["global_batch"] != global_batch for r in runs)
    return runs, (f"{why}. Each of these, searched the same way, saves {GAIN:.0%} or more of {cost}"
                  + (" (another batch changes the optimization: keep it under the model's critical batch size)"
                     if other_batch else "") + ":")
