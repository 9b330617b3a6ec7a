"""The capacity plan: tokens -> steps -> FLOPs -> GPU-hours -> days, from one layout's prediction.

``plan(...)`` turns a training run into what it costs on a given GPU, as one JSON-ready dict;
``python -m playground.capacity_plan`` prints it (the command line is ``playground.planner.cli``).
One rule keeps the report consistent: **every figure comes from one source of speed.**

* With ``gpus`` and no ``mfu`` / ``achieved_tflops``: a layout — the one given, or the fastest
  ``layout_search.search`` finds — is predicted by ``step_time.predict``; steps x its step time
  give the days and GPU-hours, its FLOP count the FLOPs, MFU and HFU, its memory the fit.
* With ``mfu`` or ``achieved_tflops`` given (or no ``gpus``): that speed sets the time; FLOPs are
  counted from the architecture (6 N D when only a parameter count is known); the layout given, or
  else the least model parallelism that fits (``minimal_model_parallelism``), sets the memory.

The model is a ``Model`` (a preset, a ``config.json``, flags), or one inferred from ``params``
(``infer_architecture``); ``capacity_inputs`` resolves it and checks the numbers given.  The
compute-optimal size and the predicted loss come from ``scaling_laws``.  Not exact — accurate
enough to catch a 10x fantasy plan, and to pick a layout.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace

from playground import hardware
from playground.planner.architecture import Model
from playground.planner.batch_split import check_batch_splits, split_advice
from playground.planner.capacity_inputs import (DEFAULT_VOCAB, infer_architecture, positive_number,
                                                resolve_plan_model)
from playground.planner.costs import flops_per_step, peak_flops
from playground.planner.errors import PlanError
from playground.planner.flops import flops_per_token
from playground.planner.goodput import plan_goodput
from playground.planner.layout import EFFICIENCY, Cluster, Efficiency, Layout
from playground.planner.layout_checks import check_layout, check_offload_modules, check_recompute_modules
from playground.planner.layout_search import fit_advice, gpus_that_fit, minimal_model_parallelism, search
from playground.planner.memory import memory_per_gpu, tight_note
from playground.planner.mfu_ceiling import LARGE_RUN_GPUS, mfu_ceiling
from playground.planner.scaling_laws import TOKENS_PER_PARAM, chinchilla_loss, chinchilla_optimal
from playground.planner.step_range import MANY_LOCAL_EXPERTS, MOE_MANY, many_local_experts, predict_range

# infer_architecture and DEFAULT_VOCAB live in capacity_inputs; re-exported so imports from here keep working
__all__ = ["plan", "infer_architecture", "DEFAULT_MFU", "DEFAULT_GLOBAL_BATCH", "DEFAULT_VOCAB", "MAX_LAYERS",
           "DEGREES"]

DEFAULT_MFU = 0.40          # used only when no layout is predicted and no --mfu / --achieved-tflops; said so
DEFAULT_GLOBAL_BATCH = 2 ** 22  # tokens per step when none is given (4Mi)
MAX_LAYERS = 10_000  # 100x the deepest published LLMs
DEGREES = ("tp", "pp", "vpp", "cp", "ep", "dp")


def _counted(m: Model) -> str:
    """How FLOPs counted from the shape were counted: sliding-window layers over their window, sparse attention
    over the keys its indexer selects, a hybrid's recurrent mixers by their projections and chunked scan."""
    if m.ssm_layers:
        return "counted, hybrid"
    if m.sparse_keys and m.sparse_keys < m.seq_len:
        return "counted, sparse"
    return "counted, windowed" if m.local_layers and m.attended_keys(True) < m.seq_len else "counted"


def _mfu_warning(mfu: float, spec, dtype: str, gpus: int | None, days: float | None = None,
                 dense: bool = False) -> list[str]:
    """A line when the plan's MFU passes the highest a published run on its GPU architecture reached
    in its precision (``mfu_ceiling``), measured against that precision's peak: an FP8 plan's MFU of
    the bf16 peak is not compared with a bf16 run's.  With the plan's days, also the days the run takes
    at that highest MFU (days go as 1 / MFU), the figure to plan with if no run has done better.  A dense plan
    is held to dense runs."""
    ceiling = mfu_ceiling(spec, dtype, gpus, dense)
    of_peak = mfu * spec.peak_bf16_flops / peak_flops(spec, dtype)
    if ceiling is None or of_peak <= ceiling["mfu"]:
        return []
    said = f"MFU {mfu:.2f}" + (f" ({of_peak:.2f} of the FP8 peak)" if dtype == "fp8" else "")
    at_ceiling = f"; at {ceiling['mfu']:.2f} the run takes {days * of_peak / ceiling['mfu']:.3g} days" if days else ""
    if ceiling["large_run"]:
        return [f"{said} is above {ceiling['mfu']:.3f}, the highest published for a run of "
                f"{LARGE_RUN_GPUS:,}+ GPUs ({ceiling['run']}){at_ceiling}"]
    return [f"{said} is above {ceiling['mfu']:.2f}{' of the FP8 peak' if dtype == 'fp8' else ''}, the most any of "
            f"the {ceiling['runs']} published {'dense ' if dense else ''}{dtype.upper() if dtype == 'fp8' else dtype} "
            f"runs {ceiling['scope']} "
            f"that chapter 6 replays reached ({ceiling['run']}){at_ceiling}"]


def _fewer_experts_note(alternative: dict | None, step_s: float, gpus: int) -> str:
    """What the search found outside the kind ``MOE_MANY`` names, for a layout it chose inside it."""
    if alternative is None:
        return (f"every layout of {gpus} GPUs that fits leaves {MANY_LOCAL_EXPERTS} or more experts on a GPU, "
                "the kind of run warned of below; more GPUs (a larger EP) or a whole-iteration CUDA graph "
                "(--moe-launch graphed) leaves it")
    alt = alternative["step_time_s"]
    return (f"fastest layout with fewer than {MANY_LOCAL_EXPERTS} experts on a GPU (outside the kind warned of "
            f"below): {alternative['description']}, step {alt:.3g} s, {alt / step_s - 1:+.0%} on this layout's "
            f"{step_s:.3g} s as predicted; weigh it against the slowdown the warning gives")


def plan(params=None, active_params=None, tokens=None, compute=None, model: Model | str | None = None,
         layers=None, hidden=None, heads=None, vocab=None, seq_len=None, global_batch=None,
         global_batch_tokens=None, gpu="H100", gpus=None, mfu=None, achieved_tflops=None,
         price_per_gpu_hour=None, max_days=365, search_top=5, cluster: Cluster | None = None,
         model_source: str | None = None, gpu_mtbf_hours=None, checkpoint_gbs=None, restart_minutes=None,
         efficiency: Efficiency | None = None, unstated=(), **knobs) -> dict:
    """The capacity plan of one training run, as a JSON-ready dict (see the module docstring).
    Every step-time prediction in it uses ``efficiency`` (default: the sourced ``EFFICIENCY``); the
    predicted layout's step time, days and GPU-hours come with the range the constants' spread and
    the ``unstated`` layout fields span (``step_range.predict_range``).

    ``knobs``: the layout (``tp pp vpp cp ep expert_tp dp micro_batch zero_stage shard_group recompute
    dtype kernels attention_kernel sequence_parallel flash_attention dropout overlap_grad_reduce
    tp_overlap reshard_after_forward fp8_gather grad_reduce optimizer_moments offload_modules first_stage_layers
    last_stage_layers``) and architecture flags (``ffn kv_heads gated_mlp experts top_k moe_ffn
    shared_experts``); anything not given takes today's default (``Layout.today``).  With
    ``gpu_mtbf_hours`` the plan adds its failure budget (``goodput.plan_goodput``): checkpoints of
    14 bytes per parameter (bf16 weights, fp32 master and Adam moments; 10 with ``optimizer_moments="bf16"``) written at the storage's
    aggregate ``checkpoint_gbs`` GB/s, restarts of ``restart_minutes``."""
    params, active_params, tokens, compute, mfu, achieved_tflops, price_per_gpu_hour, max_days, \
        global_batch_tokens = (positive_number(k, v) for k, v in (
            ("params", params), ("active-params", active_params), ("tokens", tokens), ("compute", compute),
            ("mfu", mfu), ("achieved-tflops", achieved_tflops), ("price-per-gpu-hour", price_per_gpu_hour),
            ("max-days", max_days), ("global-batch-tokens", global_batch_tokens)))
    seq_len, gpus, global_batch = (positive_number(k, v, integer=True) for k, v in (
        ("seq-len", seq_len), ("gpus", gpus), ("global-batch", global_batch)))
    if compute is not None and (params is not None or tokens is not None):
        raise PlanError("give either --compute or --params/--tokens, not both")
    if mfu is not None and achieved_tflops is not None:
        raise PlanError("give either --mfu or --achieved-tflops, not both")
    if mfu is not None and mfu > 1:
        raise PlanError(f"--mfu must be in (0, 1], got {mfu!r}")
    if global_batch is not None and global_batch_tokens is not None:
        raise PlanError("give either --global-batch (sequences) or --global-batch-tokens, not both")
    try:
        spec = hardware.gpu(gpu)
    except hardware.UnknownGPUError as e:
        raise PlanError(str(e)) from None
    cluster = cluster or Cluster.of(spec)
    arch_keys = ("ffn", "kv_heads", "gated_mlp", "experts", "top_k", "moe_ffn", "shared_experts")
    arch = {"layers": layers, "hidden": hidden, "heads": heads, "vocab": vocab,
            **{k: knobs.pop(k) for k in arch_keys if k in knobs}}
    if compute is not None:
        params, tokens = chinchilla_optimal(compute)
    if tokens is None:
        raise PlanError("give --tokens (training tokens), or a FLOP budget with --compute")
    m, shape_source = resolve_plan_model(model, params, active_params, seq_len, arch)
    shape_source = model_source or shape_source
    if m.layers > MAX_LAYERS:
        raise PlanError(f"{m.layers:,} layers: the planner handles at most {MAX_LAYERS:,}")
    N = m.param_count
    N_active = active_params or m.active_param_count
    if N_active > N:
        raise PlanError("--active-params cannot exceed --params")
    if achieved_tflops is not None and achieved_tflops * 1e12 > peak_flops(spec, knobs.get("dtype") or "bf16"):
        raise PlanError(f"--achieved-tflops {achieved_tflops:g} exceeds the {spec.name}'s dense peak")
    notes, warnings = [], []

    # the batch: whole sequences
    if global_batch is None:
        want = global_batch_tokens or DEFAULT_GLOBAL_BATCH
        global_batch = max(1, round(want / m.seq_len))
        if global_batch * m.seq_len != want:
            notes.append(f"global batch of {want:,.0f} tokens rounded to {global_batch:,} sequences of "
                         f"{m.seq_len:,} = {global_batch * m.seq_len:,} tokens")
        if global_batch_tokens is None:
            notes.append(f"global batch not given: {DEFAULT_GLOBAL_BATCH:,} tokens (4Mi) assumed")
    batch_tokens = global_batch * m.seq_len
    steps = math.ceil(tokens / batch_tokens)

    # the layout and the source of speed
    knobs = {k: v for k, v in knobs.items() if v is not None}
    check_recompute_modules(m, knobs.get("recompute_modules", ()))
    check_offload_modules(m, knobs.get("offload_modules", ()))
    degrees = {k: knobs.pop(k) for k in DEGREES if k in knobs}
    speed_given = mfu is not None or achieved_tflops is not None
    prediction, searched = None, None
    if gpus is None and degrees:
        gpus = math.prod(degrees.get(k, 1) for k in ("tp", "pp", "cp", "dp")) if "dp" in degrees else None
        if gpus is None:
            raise PlanError("a layout needs --gpus (or --dp)")
    if gpus is not None and degrees:
        rest = gpus // math.prod(degrees.get(k, 1) for k in ("tp", "pp", "cp"))
        dp = degrees.get("dp", rest)
        layout = Layout.today(degrees.get("tp", 1), degrees.get("pp", 1), dp, global_batch=global_batch,
                              **{k: degrees[k] for k in ("vpp", "cp", "ep") if k in degrees}, **knobs)
        source = "given"
    elif gpus is not None and not speed_given:
        # a MoE: also the fastest layout outside the kind of run whose published runs ran well below prediction
        avoid = (lambda lay: many_local_experts(m, cluster, lay)) if m.is_moe else None
        check_batch_splits(m, gpus, global_batch, knobs)
        searched = search(m, cluster, gpus, global_batch, top=search_top, eff=efficiency or EFFICIENCY, avoid=avoid,
                          **knobs)
        if searched["best"] is None:
            layout, source = minimal_model_parallelism(m, spec, gpus, global_batch, **knobs)["layout"], "closest"
        else:
            layout, source = Layout(**searched["best"]["layout"]), "found by the search"
    else:
        found = minimal_model_parallelism(m, spec, gpus, global_batch, **knobs)
        layout, source = found["layout"], "least model parallelism that fits"
    check_layout(m, layout, gpus)
    memory = memory_per_gpu(m, layout, spec)
    if gpus is not None and not speed_given:
        prediction = predict_range(m, cluster, layout, unstated, efficiency or EFFICIENCY)
        warnings += prediction["caveats"]
        if source == "found by the search" and any(c.startswith(f"for {MOE_MANY},") for c in prediction["caveats"]):
            notes.append(_fewer_experts_note(searched["best_avoiding"], prediction["step_time_s"], gpus))
    notes += [note for note in (m.seq_len_from, m.read_note) if note]
    if m.position_note():
        warnings.append(m.position_note())

    # one source of speed for every figure
    if prediction is not None:
        step_s = prediction["step_time_s"]
        train_s = steps * step_s
        gpu_seconds = train_s * gpus
        model_flops = steps * prediction["model_flops_per_step"]
        total_flops = steps * prediction["flops_per_step"]
        speed = "predicted for this layout by the step-time model"
        flops_method = _counted(m)
    else:
        if shape_source == "inferred" or active_params is not None:
            model_flops = flops_per_token(N_active) * tokens
            total_flops = flops_per_token(N_active, layout.recompute, layout.recompute_share) * tokens
            flops_method = f"{total_flops / (N_active * tokens):.3g}ND"   # 6, 8 or 6 + 2 r
        else:
            unit = replace(layout, global_batch=1)
            model_flops = flops_per_step(m, unit, "none") / m.seq_len * tokens
            total_flops = flops_per_step(m, unit) / m.seq_len * tokens
            flops_method = _counted(m)
        if achieved_tflops is not None:
            gpu_seconds = total_flops / (achieved_tflops * 1e12)
            speed = "achieved TFLOP/s given (counts executed FLOPs, recomputation included)"
        else:
            gpu_seconds = model_flops / ((mfu or DEFAULT_MFU) * spec.peak_bf16_flops)
            speed = "MFU given" if mfu is not None else f"assumed MFU {DEFAULT_MFU} (no layout predicted: give --gpus)"
        train_s = gpu_seconds / gpus if gpus else None
        step_s = train_s / steps if gpus else None
    gpu_hours = gpu_seconds / 3600
    days = train_s / 86400 if train_s is not None else None
    mfu_out = model_flops / (gpu_seconds * spec.peak_bf16_flops)
    hfu_out = total_flops / (gpu_seconds * spec.peak_bf16_flops)
    # past the planner's margin (tight) or past the GPU: the single changes that would fit with room
    advice = fit_advice(m, layout, spec, gpus or layout.gpus) if memory["tight"] or not memory["fits"] else []
    if memory["tight"]:
        warnings.append(tight_note(memory))
    if not memory["fits"]:
        what = ("; would fit with: " + "; ".join(f"{a['change']} ({a['memory_bytes'] / 2 ** 30:.1f} GiB)"
                                                 for a in advice[:4])) if advice else \
            "; no single change fits"
        if not advice:
            more = gpus_that_fit(m, spec, gpus or layout.gpus, global_batch)
            if more:
                advice = [{"change": f"--gpus {more['gpus']} ({more['layout'].describe()})",
                           "memory_bytes": more["memory"]["total"], "layout": more["layout"]}]
                what += f": the fewest GPUs that fit are {more['gpus']:,}, as {more['layout'].describe()}"
        warnings.append(f"does NOT fit: {memory['total'] / 2 ** 30:.1f} GiB per GPU needed, "
                        f"{memory['usable'] / 2 ** 30:.1f} GiB usable on the {spec.name}{what}")
    better, split_note = split_advice(m, cluster, layout, global_batch, tokens, gpu_hours, efficiency or EFFICIENCY,
                                      knobs) if source == "found by the search" else ([], None)
    opt_N, opt_D = chinchilla_optimal(6 * N_active * tokens)
    warnings += _mfu_warning(mfu_out, spec, layout.dtype, gpus, days, dense=not m.is_moe)
    if tokens < TOKENS_PER_PARAM / 2 * N_active:
        warnings.append(f"{tokens / N_active:.1f} tokens per parameter: far below the ~{TOKENS_PER_PARAM:.0f} "
                        f"that is compute-optimal; the same FLOPs would buy a {opt_N / 1e9:.3g}B model "
                        f"on {opt_D / 1e9:.3g}B tokens")
    if global_batch < layout.dp * layout.micro_batch:
        warnings.append(f"global batch of {global_batch} sequences is smaller than DP={layout.dp} x micro-batch "
                        f"{layout.micro_batch}: some replicas would get no data")
    if days is not None and days > max_days:
        warnings.append(f"{days:.0f} days of training exceeds the {max_days:g}-day calendar")
    if gpus is None:
        warnings.append("no --gpus given: days, the data-parallel degree and a step-time prediction need it")

    out = {
        "params": N, "active_params": N_active, "tokens": tokens,
        "compute_optimal": {"params": opt_N, "tokens": opt_D, "approach": 1},
        "predicted_loss": chinchilla_loss(N_active, tokens),
        "architecture": {**{k: v for k, v in asdict(m).items()}, "source": shape_source, "description": m.describe()},
        "gpu": spec.name, "gpus": gpus,
        "flops_per_token": total_flops / tokens, "model_flops": model_flops, "total_flops": total_flops,
        "flops_method": flops_method, "recompute": layout.recompute, "recompute_share": layout.full_recompute_share,
        "global_batch": global_batch, "global_batch_tokens": batch_tokens, "steps": steps,
        "step_time_s": step_s, "tokens_per_s": batch_tokens / step_s if step_s else None,
        "mfu": mfu_out, "hfu": hfu_out, "mfu_source": speed, "speed_source": speed,
        "tflops_per_gpu": total_flops / gpu_seconds / 1e12, "model_tflops_per_gpu": model_flops / gpu_seconds / 1e12,
        "gpu_hours": gpu_hours, "days": days,
        "cost": gpu_hours * price_per_gpu_hour if price_per_gpu_hour else None,
        "memory": memory,
        "parallelism": {**{k: getattr(layout, k) for k in ("tp", "pp", "vpp", "cp", "ep", "dp", "zero_stage",
                                                           "micro_batch", "shard_group")},
                        "fits": memory["fits"], "source": source, "description": layout.describe()},
        "layout": asdict(layout), "fit_advice": [{k: a[k] for k in ("change", "memory_bytes")} for a in advice],
        "notes": notes, "warnings": warnings, "split_note": split_note, "better_runs": better,
    }
    if prediction is not None:
        lo, hi = prediction["step_time_range_s"]
        out.update(step_time_range_s=[lo, hi], days_range=[steps * lo / 86400, steps * hi / 86400],
                   gpu_hours_range=[steps * lo * gpus / 3600, steps * hi * gpus / 3600],
                   range_from=prediction["range_from"])
        out["layout_prediction"] = prediction
        out["time_breakdown"] = prediction["time_breakdown"]
        out["placement_note"] = prediction["placement_note"]
    if searched is not None:
        out["search"] = {k: v for k, v in searched.items() if k != "best"}
    if gpu_mtbf_hours is not None:
        if train_s is None:
            raise PlanError("--gpu-mtbf-hours needs --gpus: a job's failure rate grows with its GPUs")
        if checkpoint_gbs is None:
            notes.append("checkpoint write bandwidth not given: 1 GB/s per GPU, at most 2 TB/s, assumed "
                         "(--checkpoint-gbs)")
        restart = 600.0 if restart_minutes is None else 0.0 if restart_minutes == 0 else \
            positive_number("restart-minutes", restart_minutes) * 60
        bandwidth = None if checkpoint_gbs is None else positive_number("checkpoint-gbs", checkpoint_gbs) * 1e9
        # a checkpoint holds the bf16 weights and the optimizer state: 14 bytes a parameter, 10 with bf16 moments
        per_param = 2 + layout.optimizer_bytes_per_param
        out["goodput"] = plan_goodput(train_s, gpus, positive_number("gpu-mtbf-hours", gpu_mtbf_hours), per_param * N,
                                      bandwidth, restart)
    return out
