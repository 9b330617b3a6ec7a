"""Which layout would a careful engineer pick?  Enumerate, keep what fits, rank by predicted speed.

``search(model, cluster, gpus, global_batch, **fixed)`` tries every layout of ``gpus`` GPUs that
Megatron-Core or FSDP can run: TP dividing the heads and the KV heads and staying inside a node
(across nodes only when nothing inside fits), PP up to the layers (uneven stages placed by
``layout.stage_layers``), virtual stages, CP dividing the sequence into 2 CP chunks, EP dividing
the experts and DP x CP, ZeRO stage, recomputation and micro-batch size.  A knob given in
``fixed`` is held; the rest are varied.  Recomputation is tried in the order none, selective
and the first that fits is kept (each is slower than the one before, so a later one never
wins); when neither fits, the fastest of those that fit among per-op recomputation and full
recomputation of 1/4, 1/2, 3/4 or all of the blocks (``HEAVY_RECOMPUTE``); ZeRO stages 1-3 are all tried when there is data parallelism (ZeRO-0 only without it: with
the same traffic ZeRO-1 holds less), stage 2 only without a pipeline (no framework runs it beside one).  Every layout that fits is predicted by the same
``step_time.predict`` a single layout gets, so the ranking can never put a layout below one
predicted slower.  ``explain`` says why each beats the next.  A search of ``PARALLEL_FROM`` candidates or
more (a MoE's, where EP multiplies them) runs on every core the process may use (``hardware.on_every_core``).

``minimal_model_parallelism`` is the memory-only question of the capacity plan: the fewest GPUs of
model parallelism (TP x PP x CP) that fit; ``fit_advice`` names the smallest changes that make a
layout that does not fit, fit.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from playground import hardware
from playground.planner.errors import PlanError
from playground.planner.layout import EFFICIENCY, OFFLOAD_CHOICES, RECOMPUTE, RECOMPUTE_SHARES, Cluster, Efficiency, Layout, even_chunks
from playground.planner.layout_checks import check_layout
from playground.planner.architecture import Model
from playground.planner.memory import memory_per_gpu, usable_memory_bytes
from playground.planner.step_time import predict

__all__ = ["candidate_layouts", "search", "explain", "why_faster", "minimal_model_parallelism", "fit_advice",
           "gpus_that_fit", "LAYOUT_KNOBS"]

LAYOUT_KNOBS = ("tp", "pp", "vpp", "cp", "ep", "dp", "micro_batch", "zero_stage", "recompute", "shard_group")


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]  # sqrt(n) steps, not n
    return sorted(set(small + [n // d for d in small]))


def _fits(model, layout, gpu) -> bool:
    try:
        return memory_per_gpu(model, layout, gpu)["total"] <= usable_memory_bytes(gpu)
    except PlanError:
        return False


def candidate_layouts(model: Model, gpus: int, global_batch: int, max_tp: int, fixed: dict | None = None,
                      micro_batches=(1, 2, 4), vpps=(1, 2, 4), max_cp: int = 32) -> list[Layout]:
    """Every layout that can run (memory not yet checked), with the knobs in ``fixed`` held."""
    fixed = dict(fixed or {})
    pick = lambda k, options: [fixed[k]] if fixed.get(k) is not None else options  # noqa: E731
    out = []
    for tp in pick("tp", [t for t in _divisors(gpus) if t <= max_tp]):
        if model.heads % tp or (not model.is_mla and model.kv_head_count % tp):
            continue
        for cp in pick("cp", [c for c in _divisors(gpus // tp) if c <= max_cp and model.seq_len % (2 * c) == 0
                              or c == 1]):
            if gpus % (tp * cp):
                continue
            for pp in pick("pp", [p for p in _divisors(gpus // (tp * cp)) if p <= model.layers]):
                if gpus % (tp * cp * pp):
                    continue
                dp = gpus // (tp * cp * pp)
                if fixed.get("dp") not in (None, dp):
                    continue
                eps = [e for e in _divisors(model.experts) if (dp * cp) % e == 0] if model.is_moe else [1]
                for ep in pick("ep", eps):
                    for b in pick("micro_batch", list(micro_batches)):
                        if global_batch % (dp * b):
                            continue
                        m = global_batch // (dp * b)
                        for v in pick("vpp", list(vpps)):
                            if v > 1 and (pp <= 2 or m % pp):
                                continue
                            # ZeRO-2 beside a pipeline is nothing a framework runs (DeepSpeed refuses it,
                            # Megatron has no stage 2); FSDP (3) with PP is torchtitan's
                            stages = (0,) if dp * cp == 1 else (1, 3) if pp > 1 else (1, 2, 3)
                            for z in pick("zero_stage", list(stages)):
                                knobs = {k: fixed[k] for k in fixed if k not in LAYOUT_KNOBS}
                                if "recompute_share" in knobs:   # a share is of full recomputation
                                    knobs["recompute"] = "full"
                                lay = Layout.today(tp, pp, dp, micro_batch=b, global_batch=global_batch, vpp=v,
                                                   cp=cp, ep=ep, zero_stage=z, **knobs,
                                                   **({"shard_group": fixed["shard_group"]}
                                                      if fixed.get("shard_group") else {}))
                                try:
                                    check_layout(model, lay, gpus)
                                except PlanError:
                                    continue
                                if even_chunks(model, lay):
                                    out.append(lay)
    return out


# past selective recomputation, the policies that save more memory by running more of the forward again:
# torchtitan's per-op, and full recomputation of a quarter, half, three quarters or all of the blocks
HEAVY_RECOMPUTE = (("op", 1.0), *(("full", share) for share in RECOMPUTE_SHARES), ("full", 1.0))


def _fitting_recompute(model, cluster, layout, fixed_recompute, eff):
    """The cheapest recomputation that fits, as (layout, its prediction if one was made): none, else
    selective, else the fastest of ``HEAVY_RECOMPUTE`` that fits (per-op and a share of the blocks cost
    about alike, so the step-time model decides, and its prediction is kept for the ranking)."""
    if fixed_recompute:
        lay = replace(layout, recompute=fixed_recompute)
        return (lay, None) if _fits(model, lay, cluster.gpu) else None
    for rc in ("none", "selective"):
        lay = replace(layout, recompute=rc)
        if _fits(model, lay, cluster.gpu):
            return lay, None
    heavy = [lay for lay in (replace(layout, recompute=rc, recompute_share=share) for rc, share in HEAVY_RECOMPUTE)
             if _fits(model, lay, cluster.gpu)]
    if len(heavy) > 1:
        return max(((lay, predict(model, cluster, lay, eff)) for lay in heavy), key=lambda x: x[1]["tokens_per_s"])
    return (heavy[0], None) if heavy else None


PARALLEL_FROM = 1_000   # candidate layouts: below this a pool of processes costs more to start than it saves


def _evaluated(job: tuple):
    """(layout, its prediction) with the cheapest recomputation that fits, or None: one candidate of a
    search, a function of its own so that ``on_every_core`` can hand it to another process."""
    model, cluster, layout, recompute, eff = job
    found = _fitting_recompute(model, cluster, layout, recompute, eff)
    if found is None:
        return None
    lay, known = found
    return lay, known or predict(model, cluster, lay, eff)


def no_layout_runs(model: Model, gpus: int, global_batch: int) -> str:
    """Why no layout of ``gpus`` GPUs runs ``global_batch`` sequences: what each degree must divide."""
    return (f"no layout of {gpus:,} GPUs runs a global batch of {global_batch:,} sequences: DP x micro-batch must "
            f"divide the batch, TP the {model.heads} heads and {model.kv_head_count} KV heads, PP x VPP at most "
            f"the {model.layers} layers")


def _rank_key(r: dict) -> tuple:
    """Fastest first; among equally fast layouts the simplest: least ZeRO, then fewest GPUs of model
    parallelism, then the smallest micro-batch and fewest virtual stages."""
    lay = r["layout"]
    return (-round(r["tokens_per_s"], 6), lay["zero_stage"], lay["tp"] * lay["pp"] * lay["cp"] * lay["ep"],
            lay["cp"], lay["micro_batch"], lay["vpp"])


def search(model: Model, cluster: Cluster, gpus: int, global_batch: int, top: int = 5,
           eff: Efficiency = EFFICIENCY, avoid=None, **fixed) -> dict:
    """The layouts that fit, best first, as a JSON-ready dict (``ranked``: the ``top`` best), each
    predicted with the constants ``eff``.  With ``avoid`` (a test of a ``Layout``), also ``best_avoiding``: the
    fastest layout that fits and the test does not catch (None if every one is caught)."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise PlanError(f"gpus must be a whole number >= 1, got {gpus!r}")
    usable = usable_memory_bytes(cluster.gpu)
    recompute = fixed.pop("recompute", None) or ("full" if fixed.get("recompute_share") else None)
    for max_tp in (cluster.gpus_per_node, gpus):      # across nodes only when nothing inside fits
        layouts = candidate_layouts(model, gpus, global_batch, max_tp, fixed)
        jobs = [(model, cluster, x, recompute, eff) for x in layouts]
        # a MoE's thousands of candidates on every core (the same answers, in the same order)
        evaluated = hardware.on_every_core(_evaluated, jobs) if len(jobs) >= PARALLEL_FROM else map(_evaluated, jobs)
        fitting = [x for x in evaluated if x]
        if fitting or max_tp >= gpus:
            break
    if not layouts:
        raise PlanError(no_layout_runs(model, gpus, global_batch))
    results = sorted((prediction for _, prediction in fitting), key=_rank_key)
    distinct = [r for i, r in enumerate(results)   # equally fast variants: the simplest one stands for all
                if i == 0 or r["tokens_per_s"] < results[i - 1]["tokens_per_s"] * (1 - 1e-9)]
    ranked = [{"rank": i + 1, **{k: r[k] for k in ("layout", "step_time_s", "tokens_per_s", "tflops_per_gpu",
                                                   "model_tflops_per_gpu", "mfu", "hfu", "fractions",
                                                   "time_breakdown", "links", "memory", "placement_note")},
               "why": explain(r)} for i, r in enumerate(distinct[:top])]
    for a, b in zip(ranked, ranked[1:]):
        a["beats_next"] = why_faster(a, b)
    out = {"gpus": gpus, "gpu": cluster.gpu.name, "global_batch": global_batch, "usable_bytes": usable,
            "considered": len(layouts), "too_big": len(layouts) - len(fitting), "fit": len(fitting),
            "distinct_speeds": len(distinct),
            "tp_across_nodes": max_tp > cluster.gpus_per_node, "ranked": ranked, "best": results[0] if results else None,
            "slowest_that_fits": ({"layout": results[-1]["layout"], "tokens_per_s": results[-1]["tokens_per_s"],
                                   "why": explain(results[-1])} if results else None)}
    if avoid is not None:
        kept = next((r for r in results if not avoid(Layout(**r["layout"]))), None)
        out["best_avoiding"] = None if kept is None else {
            "layout": kept["layout"], "step_time_s": kept["step_time_s"], "tokens_per_s": kept["tokens_per_s"],
            "description": Layout(**kept["layout"]).describe()}
    return out


def explain(result: dict) -> str:
    """One line: what dominates the step besides useful compute, and on which links."""
    fr = result["fractions"]
    lay = result["layout"]
    over = sorted(((v, k) for k, v in fr.items() if k != "compute" and v > 0), reverse=True)[:2]
    parts = ", ".join(f"{k} {100 * v:.0f}%" for v, k in over) or "nothing else"
    where = f"TP on {result['links']['tp']}" if lay["tp"] > 1 else "no TP"
    uneven = f"; {result['placement_note']}" if "placement_note" in result and lay["pp"] > 1 else ""
    return f"compute {100 * fr['compute']:.0f}% of the step; then {parts}; {where}{uneven}"


def _knob(layout: dict, key: str):
    """A ranked layout's knob as ``explain`` names it: recomputation with the share of blocks it covers."""
    if key == "recompute" and layout["recompute"] == "full" and layout["recompute_share"] < 1:
        return f"full ({layout['recompute_share']:.0%} of blocks)"
    return layout[key]


def why_faster(a: dict, b: dict) -> str:
    """Why ranked layout ``a`` beats ``b``: the time terms that differ most, in seconds per step."""
    ta, tb = a["time_breakdown"], b["time_breakdown"]
    diffs = sorted(((tb[k] - ta[k], k) for k in ta), reverse=True)
    gain = 100 * (a["tokens_per_s"] / b["tokens_per_s"] - 1)
    saved = [f"{k} {d:.3g} s less" for d, k in diffs[:2] if d > 0]
    knobs = [f"{k.upper() if len(k) <= 3 else k} {_knob(b['layout'], k)} -> {_knob(a['layout'], k)}"
             for k in LAYOUT_KNOBS if _knob(a["layout"], k) != _knob(b["layout"], k)]
    return f"{gain:.1f}% faster ({', '.join(knobs)}): " + ("; ".join(saved) or "equal terms, ranked by ZeRO stage")


def minimal_model_parallelism(model: Model, gpu, gpus: int | None, global_batch: int, **fixed) -> dict:
    """The layout with the fewest GPUs of model parallelism (TP x PP x CP; TP inside a node first,
    then PP, then CP) that fits, its memory, and whether it fits (the one that comes closest when
    none does)."""
    spec = hardware.gpu(gpu)
    usable = usable_memory_bytes(spec)
    last = None
    tps = [t for t in (1, 2, 4, 8, 16, 32, 64) if model.heads % t == 0 and (model.is_mla or model.kv_head_count % t == 0)]
    l = model.layers
    pps = sorted({p for p in range(1, l + 1) if l % p == 0 or (l + 2) % p == 0 or p & (p - 1) == 0})
    combos = sorted(((t, p, c) for t in tps for p in pps for c in (1, 2, 4, 8, 16, 32)
                     if (gpus is None or gpus % (t * p * c) == 0) and model.seq_len % (2 * c if c > 1 else 1) == 0),
                    key=lambda x: (x[0] * x[1] * x[2], x[0] > spec.gpus_per_node, x[2], x[1]))
    for t, p, c in combos:
        dp = gpus // (t * p * c) if gpus else 1
        knobs = {k: v for k, v in fixed.items() if v is not None}
        knobs.setdefault("zero_stage", 1 if dp * c > 1 else 0)
        batch = max(global_batch - global_batch % dp, dp) if global_batch % dp else global_batch
        lay = Layout.today(t, p, dp, global_batch=batch, cp=c, **knobs)
        try:
            mem = memory_per_gpu(model, lay, spec)
        except PlanError:
            continue
        row = {"layout": lay, "memory": mem, "fits": mem["total"] <= usable}
        if row["fits"]:
            return row
        if last is None or mem["total"] < last["memory"]["total"]:
            last = row   # when nothing fits: the layout that comes closest
    if last is None:
        raise PlanError(f"no TP x PP x CP divides the {gpus} GPUs for this model")
    return last


def fit_advice(model: Model, layout: Layout, gpu, gpus: int) -> list[dict]:
    """The smallest single changes that make ``layout`` fit, each with the memory it reaches."""
    usable = usable_memory_bytes(gpu)
    tries = []
    for rc in RECOMPUTE[RECOMPUTE.index(layout.recompute) + 1:]:
        # whole-block and per-op recomputation keep none of what offloading would move: it goes with them
        gone = layout.offload_modules and rc in ("op", "full")
        tries.append((f"--recompute {rc}" + (" --offload-modules none" if gone else ""),
                      replace(layout, recompute=rc, offload_modules=() if gone else layout.offload_modules)))
    for share in RECOMPUTE_SHARES:   # the fewest blocks recomputed whole that fit
        if share > layout.full_recompute_share:
            tries.append((f"--recompute-share {Fraction(share)}", replace(layout, recompute="full", recompute_share=share)))
    for z in range(layout.zero_stage + 1, 4):
        if layout.dp * layout.cp > 1:
            tries.append((f"--zero-stage {z}", replace(layout, zero_stage=z, shard_group=None)))
    for knob in ("pp", "cp", "tp"):
        value = getattr(layout, knob)
        for factor in (2, 4, 8):
            if layout.dp % factor == 0:
                new = replace(layout, **{knob: value * factor, "dp": layout.dp // factor,
                                         "first_stage_layers": None, "last_stage_layers": None})
                if layout.global_batch % (new.dp * new.micro_batch) == 0:
                    tries.append((f"--{knob} {value * factor} (DP {new.dp})", new))
    if layout.keeps_fp8_weights and not layout.fp8_params:
        tries.append(("--fp8-params", replace(layout, fp8_params=True)))   # the FP8 copy becomes the weight
    if layout.optimizer_moments == "fp32":   # Adam's moments at 2 bytes each, the master weight kept
        tries.append(("--optimizer-moments bf16", replace(layout, optimizer_moments="bf16")))
    if not layout.offload_modules and hardware.gpu(gpu).host_link_bytes_per_s:   # saved inputs to host memory
        for modules in OFFLOAD_CHOICES[1:]:
            tries.append((f"--offload-modules {','.join(modules)}", replace(layout, offload_modules=modules)))
    if layout.micro_batch > 1:
        tries.append(("--micro-batch-size 1", replace(layout, micro_batch=1)))
    for factor in (2, 4, 8):
        more = replace(layout, dp=layout.dp * factor)
        if layout.zero_stage >= 1 and more.global_batch % (more.dp * more.micro_batch) == 0:
            tries.append((f"--gpus {gpus * factor} (DP {more.dp})", more))
    out, seen = [], set()
    for change, lay in tries:
        key = change.split()[0]
        if key in seen:
            continue
        try:
            check_layout(model, lay)
            mem = memory_per_gpu(model, lay, gpu)
        except PlanError:
            continue
        if mem["total"] <= usable:
            seen.add(key)
            out.append({"change": change, "memory_bytes": mem["total"], "layout": lay})
    return sorted(out, key=lambda x: x["memory_bytes"], reverse=True)


def gpus_that_fit(model: Model, gpu, gpus: int, global_batch: int, most: int = 2 ** 20) -> dict | None:
    """The fewest GPUs (``gpus`` doubled until it does) on which some layout fits, sharding
    everything (ZeRO-3, full recomputation), with that layout and its memory; None if even ``most`` do not."""
    n = gpus
    while n < most:
        n *= 2
        batch = max(global_batch, n)
        try:
            found = minimal_model_parallelism(model, gpu, n, batch - batch % n if batch % n else batch,
                                              zero_stage=3, recompute="full")
        except PlanError:
            continue
        if found["fits"]:
            return {"gpus": n, **found}
    return None
