"""The command line of the step-time model: the capacity planner's flags, without the training run.

``python -m playground.step_time --model llama3-405b --gpu H100 --gpus 8192 --tp 8 --pp 16
--global-batch 2048 [--json]`` prints the prediction of ``planner.step_time.predict`` for one layout;
``--search`` ranks the layouts that fit instead and, where the batch splits badly over the GPUs, names the
GPU counts and batches whose fastest layout costs fewer GPU-seconds a token (``batch_split``).  The flags and their defaults are the capacity
planner's (``playground.planner.args``); bad input: one line on stderr and exit status 2.
"""

from __future__ import annotations

from playground.planner.args import (cluster_from_args, efficiency_from_args, efficiency_line,
                                     efficiency_note, layout_knobs, number, resolve_model, run_command,
                                     unstated_from_args, whole)
from playground import hardware
from playground.planner.architecture import DEFAULT_SEQ_LEN
from playground.planner.capacity import DEFAULT_GLOBAL_BATCH
from playground.planner.capacity_inputs import infer_architecture
from playground.planner.errors import PlanError
from playground.planner.layout import EFFICIENCY, Layout
from playground.planner.batch_split import check_batch_splits, split_advice
from playground.planner.layout_search import fit_advice, gpus_that_fit, search
from playground.planner.memory import fit_verdict, tight_note
from playground.planner.step_range import predict_range

__all__ = ["predict_from_args", "report", "main"]

PER_TOKEN_STEPS = 10 ** 6   # the training a searched layout's neighbours are compared over, per token


def predict_from_args(opts) -> dict:
    """The prediction (or, with ``--search``, the ranked layouts) for parsed planner flags; with
    ``--efficiency FILE`` its measured constants, named under ``efficiency_from``."""
    eff = efficiency_from_args(opts)
    result = _predict(opts, eff or EFFICIENCY)
    return result if eff is None else {**result, "efficiency_from": efficiency_note(eff)}


def _predict(opts, eff) -> dict:
    model = resolve_model(opts)
    if model is None:
        params = number(opts, "params")
        if params is None:
            raise PlanError("the step-time model needs a model: --model, --hf-config, --layers/--hidden/--heads "
                            "or --params")
        model = infer_architecture(params, whole(opts, "seq-len") or DEFAULT_SEQ_LEN)
    cluster = cluster_from_args(opts)
    gpus = whole(opts, "gpus")
    seqs = whole(opts, "global-batch")
    if seqs is None:
        tokens = number(opts, "global-batch-tokens") or DEFAULT_GLOBAL_BATCH
        seqs = max(1, round(tokens / model.seq_len))
    knobs = layout_knobs(opts)
    unstated = unstated_from_args(opts)
    if opts.search:
        if unstated:
            raise PlanError("--unstated gives one layout's range; it does not combine with --search")
        if gpus is None:
            raise PlanError("--search needs --gpus")
        check_batch_splits(model, gpus, seqs, knobs)   # none runs: say which counts and batches do
        found = search(model, cluster, gpus, seqs, top=whole(opts, "top") or 5, eff=eff, **knobs)
        return {**found, **_split_advice(model, cluster, found["best"], seqs, eff, knobs)} if found["best"] else found
    degrees = {k: knobs.pop(k) for k in ("tp", "pp", "dp") if k in knobs}
    if "dp" not in degrees and gpus is None:
        raise PlanError("give --dp or --gpus (or --search)")
    tp, pp = degrees.get("tp", 1), degrees.get("pp", 1)
    dp = degrees.get("dp") or max(1, gpus // (tp * pp * knobs.get("cp", 1)))
    layout = Layout.today(tp, pp, dp, global_batch=seqs, **knobs)
    result = predict_range(model, cluster, layout, unstated, eff, gpus=gpus)
    result["caveats"] = result["caveats"] + [note for note in (model.position_note(), model.read_note) if note]
    if not result["memory"]["fits"] or result["memory"]["tight"]:   # what one change would make it fit (with
        # the planner's margin), as the capacity planner says
        advice = [{k: a[k] for k in ("change", "memory_bytes")}
                  for a in fit_advice(model, layout, cluster.gpu, layout.gpus)[:4]]
        more = None if advice else gpus_that_fit(model, cluster.gpu, layout.gpus, seqs)
        if more:   # no single change fits: the fewest GPUs that do, and how they are laid out
            advice = [{"change": f"--gpus {more['gpus']} ({more['layout'].describe()})",
                       "memory_bytes": more["memory"]["total"]}]
        result["fit_advice"] = advice
    return result


def _split_advice(model, cluster, best: dict, seqs: int, eff, knobs: dict) -> dict:
    """What the capacity planner says of a searched layout whose GPU count or batch splits badly (``batch_split``),
    per token: the neighbours whose fastest layout costs at least a tenth fewer GPU-seconds a token."""
    tokens = PER_TOKEN_STEPS * seqs * model.seq_len   # steps enough that rounding them up weighs nothing
    hours = PER_TOKEN_STEPS * best["step_time_s"] * best["gpus"] / 3600
    runs, note = split_advice(model, cluster, Layout(**best["layout"]), seqs, tokens, hours, eff, knobs,
                              cost="the GPU-seconds per token")
    return {"split_note": note, "better_runs": [
        {k: r[k] for k in ("gpus", "global_batch", "global_batch_tokens", "why", "layout", "mfu", "step_time_s")}
        | {"tokens_per_s": r["global_batch_tokens"] / r["step_time_s"], "gpu_seconds_per_token_change": r["gpu_hours_change"]}
        for r in runs]} if runs else {}


def report(r: dict, opts=None) -> str:
    text = _report(r)
    return text if "efficiency_from" not in r else text + "\n" + efficiency_line(r["efficiency_from"])


def _report(r: dict) -> str:
    if "ranked" in r:
        lines = [f"{r['considered']:,} layouts of {r['gpus']:,} {r['gpu']}s for a batch of {r['global_batch']:,} "
                 f"sequences; {r['too_big']:,} do not fit in memory, {r['fit']:,} do"]
        for x in r["ranked"]:
            lines.append(f"#{x['rank']} {Layout(**x['layout']).describe()}: {x['tokens_per_s']:,.0f} tokens/s, "
                         f"MFU {x['mfu']:.3f}, {x['memory']['total'] / 2 ** 30:.1f} GiB -- {x['why']}")
            if "beats_next" in x:
                lines.append(f"   beats #{x['rank'] + 1}: {x['beats_next']}")
        if r.get("split_note"):   # the batch splits badly over these GPUs: what runs better, per token
            lines.append(f"instead  {r['split_note']}")
            lines += [f"         - {b['gpus']:,} {r['gpu']}s, batch {b['global_batch']:,} ({b['why']}): {b['layout']}; "
                      f"{b['tokens_per_s']:,.0f} tokens/s, MFU {b['mfu']:.3f} ({b['gpu_seconds_per_token_change']:+.0%} "
                      f"GPU-seconds per token)" for b in r["better_runs"]]
        return "\n".join(lines)
    lay, mem = Layout(**r["layout"]), r["memory"]
    m = r["micro_batches"]
    lines = [f"layout   {lay.describe()}, {m} micro-batch{'' if m == 1 else 'es'} on {r['gpus']:,} x {r['gpu']}",
             f"         {r['placement_note']}",
             f"step     {r['step_time_s']:.3f} s, {r['tokens_per_s']:,.0f} tokens/s, "
             f"{r['tflops_per_gpu']:.0f} TFLOP/s per GPU ({r['model_tflops_per_gpu']:.0f} model), "
             f"MFU {r['mfu']:.3f}, HFU {r['hfu']:.3f}",
             _range_line(r)] + _power_line(r) + [

             f"memory   {mem['total'] / 2 ** 30:.1f} GiB of {mem['usable'] / 2 ** 30:.1f} GiB usable "
             f"({mem['capacity'] / 2 ** 30:.1f} GiB on the GPU)" + ("" if fit_verdict(mem) == "fits" else
                                                                    f"  ({fit_verdict(mem)})")
             + (f"; {mem['offloaded'] / 2 ** 30:.1f} GiB of activations in host memory" if mem.get("offloaded") else "")]
    if mem["tight"]:
        lines.append(f"memory   {tight_note(mem)}")
    if not mem["fits"] or mem["tight"]:
        say = "would fit" if not mem["fits"] else "with room"
        lines += [f"{say} {a['change']}: {a['memory_bytes'] / 2 ** 30:.1f} GiB" for a in r.get("fit_advice", [])] \
            or [f"{say} no single change of the layout fits: more GPUs or a smaller model"]
    lines += _links_line(r, lay)
    lines += [f"  {k:<16} {v:8.3f} s  {100 * r['fractions'][k]:5.1f} %" for k, v in r["time_breakdown"].items()
              if v or k != "moe_host_wait"]    # a wait on the host only where a MoE layer makes one
    lines += [f"caveat   {c}" for c in r.get("caveats", [])]
    return "\n".join(lines)


def _links_line(r: dict, lay: Layout) -> list[str]:
    """Which link each group's traffic rides (for a ring across nodes, the one that binds it: eq-ring-nics) and
    the gradient rings' line rates: where a step's bytes go."""
    links, rates = r["links"], r["ring_bytes_per_s"]
    dp = lay.dp * lay.cp
    axes = [f"{name} {n} over {links[key]}" for name, n, key in
            (("TP", lay.tp, "tp"), ("CP", lay.cp, "cp"), ("EP", lay.ep, "ep"), ("PP", lay.pp, "pp")) if n > 1]
    if "replica" in links:   # HSDP: gathers inside the shard group, the gradients' all-reduce across its copies
        g = lay.shard_group
        axes += [f"FSDP shards of {g} over {links['shard']} ({rates['shard'] / 1e9:.3g} GB/s)",
                 f"HSDP's {dp // g} replicas ring bound by {links['replica']} ({rates['replica'] / 1e9:.3g} GB/s)"]
    elif dp > 1:
        axes += [f"DP {dp} ring bound by {links['dp']} ({rates['dp'] / 1e9:.0f} GB/s)"]
    if "expert_dp" in links and lay.ep > 1 and lay.expert_dp > 1:   # EP x ETP apart: with EP filling a node, one NIC each
        axes.append(f"experts' DP {lay.expert_dp} ring bound by {links['expert_dp']} "
                    f"({rates['expert_dp'] / 1e9:.0f} GB/s)")
    return [f"links    {'; '.join(axes)}"] if axes else []


def _power_line(r: dict) -> list[str]:
    lines = []
    if r.get("sustained_rate", 1.0) < 1 and hardware.gpu(r["gpu"]).architecture == "blackwell":
        fp8 = (f"; FP8 GEMMs at {r['sustained_rate_fp8']:.3f} of fp8_gemm's rate, as Transformer Engine's GEMM "
               "benchmark measured them beside bf16's on a Blackwell" if r["layout"]["dtype"] == "fp8" else "")
        lines.append(f"sustain  bf16 tensor cores at {r['sustained_rate']:.3f} of a short benchmark's rate through a run\n"
                     f"         ({r['gpu']}s at their power limit, as FlashAttention-4 held back to back on a B200 "
                     f"measures{fp8})")
    elif r.get("sustained_rate", 1.0) < 1:
        a = r["assumptions"]
        fp8 = f", FP8 at {r['sustained_rate_fp8']:.3f}" if r["layout"]["dtype"] == "fp8" else ""
        lines.append(f"sustain  bf16 tensor cores at {r['sustained_rate']:.3f} of a short benchmark's rate through a run{fp8}\n"
                     f"         ({r['gpu']}s at their power limit: bf16 GEMMs alone at {a['hopper_sustained']:g}, a "
                     f"matmul held against run briefly on three Hopper parts, FP8 alone at 1;\n"
                     + (f"         either at {a['comm_clock']:g} of the clock beside a collective, assumed for "
                        f"{a['comm_share']:g} of the step)" if r["gpus"] > 1 else
                        "         on one GPU no collective runs beside them)"))
    if hardware.gpu(r["gpu"]).exp_rate > 1 and r["layout"]["attention_kernel"] in ("fa3", "cudnn"):
        lo, hi = r["range_from"]["efficiency_spread"]["attention_fast_exp"]
        lines.append(f"attn     fused attention at {r['assumptions']['attention_fast_exp']:g}x a Blackwell's rate "
                     f"({lo:g}-{hi:g} in the range): Blackwell Ultra's\n"
                     f"         exponential runs twice as fast, as cuDNN's own benchmark measured on a GB300 against a GB200")
    if r.get("fp8_backward_accumulation", 1.0) > 1:
        lo, hi = r["range_from"]["efficiency_spread"]["fp8_split_accumulation"]   # a results file's, when given
        lines.append(f"fp8      backward GEMMs at split accumulation, {r['fp8_backward_accumulation']:g}x the forward's "
                     f"time at their size ({lo:g}-{hi:g} in the range): Transformer Engine and torchao\n"
                     f"         promote a Hopper's FP8 sums to fp32 as they go in the backward only")
    if r.get("power_clock", 1.0) < 1:
        lo, hi = r["range_from"]["efficiency_spread"]["power_exponent"]
        lines.append(f"power    capped at {r['power_limit_w']:.0f} W of the {r['tdp_w']:.0f} W TDP: tensor cores at "
                     f"{r['power_clock']:.3f} of their rate (assumed (limit / TDP)^{r['assumptions']['power_exponent']:g}; "
                     f"the range spans ^{lo:g} to ^{hi:g})")
    return lines


def _range_line(r: dict) -> str:
    (lo, hi), (t_lo, t_hi), (m_lo, m_hi) = r["step_time_range_s"], r["tokens_per_s_range"], r["mfu_range"]
    over = ", ".join(["the constants' spread"] + [f.replace("_", "-") for f in r["range_from"]["unstated"]])
    return (f"range    {lo:.3f}-{hi:.3f} s, {t_lo:,.0f}-{t_hi:,.0f} tokens/s, MFU {m_lo:.3f}-{m_hi:.3f}\n"
            f"         over {over}")


def main(argv=None) -> int:
    return run_command("step_time", argv, predict_from_args, report)
