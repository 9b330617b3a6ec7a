"""Which layout would a careful engineer pick?  Enumerate, keep what fits, rank by predicted speed.

``search(model, cluster, gpus, ...)`` tries every TP x PP x DP = ``gpus`` that Megatron-LM can run:
TP dividing the heads, d b dividing the global batch B, PP x VPP dividing the layers (every model
chunk the same number of layers), and for the interleaved schedule (VPP > 1) PP > 2 and PP dividing
the m = B / (d b) micro-batches (Megatron-LM's own checks), for each micro-batch size in
``micro_batches`` and each number of virtual stages in ``vpps``; drops the layouts whose memory
does not fit in the GPU's usable memory (``costs.memory_per_gpu``,
``planner.memory.usable_memory_bytes``); ranks the rest by predicted tokens per second with
``step_time.predict``; and says why the best few win (their largest overheads) and why the
common mistakes lose (``explain``).  ``step_time.predict`` itself also accepts uneven stages
(DeepSpeed's pipeline engine, which BLOOM used, runs them); the search does not propose them.
"""

from __future__ import annotations

from playground.planner.errors import PlanError
from playground.planner.memory import usable_memory_bytes
from playground.planner.costs import Cluster, Layout, Model, memory_per_gpu
from playground.planner.step_time import predict

__all__ = ["candidate_layouts", "search", "explain", "report"]


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]  # sqrt(n) steps, not n
    return sorted(set(small + [n // d for d in small]))


def candidate_layouts(model: Model, gpus: int, global_batch: int, micro_batches=(1, 2, 4, 8),
                      vpps=(1, 2, 4), **common) -> list[Layout]:
    """Every layout Megatron-LM can run (memory not yet checked): t divides the heads (and divides,
    or is a multiple of, the key/value heads), d b divides the batch, p v divides the layers, and
    with v > 1, p > 2 and p divides the micro-batches."""
    out = []
    kv = model.kv_heads or model.heads
    for tp in _divisors(gpus):
        if model.heads % tp or (kv % tp and tp % kv):
            continue
        for pp in _divisors(gpus // tp):
            if model.layers % pp:
                continue
            dp = gpus // (tp * pp)
            for b in micro_batches:
                if global_batch % (dp * b):
                    continue
                m = global_batch // (dp * b)
                for v in vpps:
                    if model.layers % (pp * v) or (v > 1 and (pp <= 2 or m % pp)):
                        continue
                    out.append(Layout(tp, pp, dp, b, global_batch, v, **common))
    return out


def explain(result: dict) -> str:
    """One line: what dominates the step besides useful compute, and on which links."""
    fr = result["fractions"]
    lay = result["layout"]
    over = sorted(((v, k) for k, v in fr.items() if k != "compute"), reverse=True)[:2]
    parts = ", ".join(f"{k} {100 * v:.0f}%" for v, k in over)
    where = f"TP on {result['links']['tp']}" if lay["tp"] > 1 else "no TP"
    uneven = ""
    if result["stage_layers"] * lay["pp"] != result["layers"]:
        uneven = (f"; uneven stages: the slowest holds {result['stage_layers']} layers, "
                  f"the average {result['layers'] / lay['pp']:.2f}")
    return f"compute {100 * fr['compute']:.0f}% of the step; then {parts}; {where}{uneven}"


def search(model: Model, cluster: Cluster, gpus: int, global_batch: int, top: int = 5,
           micro_batches=(1, 2, 4, 8), vpps=(1, 2, 4), **common) -> dict:
    """The layouts that fit, best first, as a JSON-ready dict (``ranked``: the ``top`` best)."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise PlanError(f"gpus must be a whole number >= 1, got {gpus!r}")
    if gpus > min(model.heads * model.layers * global_batch, 10 ** 12):  # TP x PP x DP at most
        raise PlanError(f"no layout of {gpus} GPUs divides a global batch of {global_batch} sequences "
                        f"with TP dividing the {model.heads} heads and PP dividing the {model.layers} layers")
    layouts = candidate_layouts(model, gpus, global_batch, micro_batches, vpps, **common)
    if not layouts:
        raise PlanError(f"no layout of {gpus} GPUs divides a global batch of {global_batch} sequences "
                        f"with TP dividing the {model.heads} heads and PP dividing the {model.layers} layers")
    fits, too_big = [], 0
    for lay in layouts:
        if memory_per_gpu(model, lay)["total"] > usable_memory_bytes(cluster.gpu):
            too_big += 1
            continue
        fits.append(predict(model, cluster, lay))
    fits.sort(key=lambda r: -r["tokens_per_s"])
    ranked = [{"rank": i + 1, **{k: r[k] for k in ("layout", "step_time_s", "tokens_per_s", "tflops_per_gpu",
                                                   "mfu", "fractions", "links", "memory")},
               "why": explain(r)} for i, r in enumerate(fits[:top])]
    return {"gpus": gpus, "gpu": cluster.gpu.name, "global_batch": global_batch,
            "usable_bytes": usable_memory_bytes(cluster.gpu),
            "considered": len(layouts), "too_big": too_big, "fit": len(fits), "ranked": ranked,
            "slowest_that_fits": ({"layout": fits[-1]["layout"], "tokens_per_s": fits[-1]["tokens_per_s"],
                                   "why": explain(fits[-1])} if fits else None)}


def report(s: dict) -> str:
    lines = [f"{s['considered']} layouts of {s['gpus']} x {s['gpu']} for a batch of {s['global_batch']} "
             f"sequences; {s['too_big']} do not fit in memory, {s['fit']} do"]
    for r in s["ranked"]:
        lay = r["layout"]
        lines.append(f"#{r['rank']} TP={lay['tp']} PP={lay['pp']} DP={lay['dp']} VPP={lay['vpp']} "
                     f"b={lay['micro_batch']}: {r['tokens_per_s']:,.0f} tokens/s, MFU {r['mfu']:.2f}, "
                     f"{r['memory']['total'] / 1e9:.0f} GB  -- {r['why']}")
    if s["slowest_that_fits"]:
        lay, w = s["slowest_that_fits"]["layout"], s["slowest_that_fits"]
        lines.append(f"slowest that fits: TP={lay['tp']} PP={lay['pp']} DP={lay['dp']} b={lay['micro_batch']}: "
                     f"{w['tokens_per_s']:,.0f} tokens/s -- {w['why']}")
    return "\n".join(lines)
