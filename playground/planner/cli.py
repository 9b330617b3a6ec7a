"""The capacity planner's command line: ``python -m playground.capacity_plan ... [--json]`` (or ``capacity-plan``).

``--help`` explains every option with its unit and default (``playground.planner.args``).  Bad
input gets one line on stderr and exit status 2, nothing on stdout.  The text report and
``--json`` carry the same numbers: the report is printed from the JSON-ready dict of ``plan``.
"""

from __future__ import annotations

import textwrap

from playground.planner.args import (cluster_from_args, efficiency_from_args, efficiency_line,
                                     efficiency_note, layout_knobs, number, resolve_model, run_command,
                                     unstated_from_args, whole)
from playground.planner.capacity import plan
from playground.planner.errors import PlanError
from playground.planner.layout import Layout
from playground.planner.memory import fit_verdict

__all__ = ["main", "report", "plan_from_args"]


def _si(x, unit="") -> str:
    if x is None:
        return "n/a"
    for p, s in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= p:
            return f"{x / p:.3g} {s}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def _gib(x) -> str:
    return f"{x / 2 ** 30:.1f} GiB"


def plan_from_args(opts) -> dict:
    """``plan(...)`` for parsed flags; with ``--efficiency FILE`` its measured constants, named under
    ``efficiency_from``."""
    eff = efficiency_from_args(opts)
    result = _plan(opts, eff)
    return result if eff is None else {**result, "efficiency_from": efficiency_note(eff)}


def _plan(opts, eff) -> dict:
    n = lambda k: number(opts, k)  # noqa: E731
    top = whole(opts, "top")
    knobs = layout_knobs(opts)
    if opts.search and any(k in knobs for k in ("tp", "pp", "dp", "cp", "ep", "vpp")):
        raise PlanError("--search varies the layout: give it without --tp/--pp/--dp/--cp/--ep/--vpp "
                        "(or give a layout without --search)")
    if opts.search and not opts.gpus:
        raise PlanError("--search needs --gpus")
    return plan(params=n("params"), active_params=n("active-params"), tokens=n("tokens"), compute=n("compute"),
                model=resolve_model(opts), global_batch=whole(opts, "global-batch"),
                global_batch_tokens=n("global-batch-tokens"), gpu=opts.gpu, gpus=whole(opts, "gpus"),
                mfu=n("mfu"), achieved_tflops=n("achieved-tflops"), price_per_gpu_hour=n("price-per-gpu-hour"),
                max_days=n("max-days") or 365, search_top=top or 5, cluster=cluster_from_args(opts),
                model_source=_model_source(opts), gpu_mtbf_hours=n("gpu-mtbf-hours"),
                checkpoint_gbs=n("checkpoint-gbs"), restart_minutes=number(opts, "restart-minutes", positive=False),
                efficiency=eff, unstated=unstated_from_args(opts), **knobs)


def _model_source(opts) -> str | None:
    """Where the shape came from, for the report: a preset, a config file, flags, or inferred."""
    flags = any(getattr(opts, k) is not None for k in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn",
                                                      "vocab", "seq_len", "experts", "top_k", "moe_ffn",
                                                      "shared_experts", "gated_mlp"))
    base = f"preset {opts.model}" if opts.model else f"config {opts.hf_config}" if opts.hf_config else None
    if base is None:
        return "flags" if opts.layers else None
    return base + (" + flags" if flags else "")


# Narayanan et al.'s count (2021) charges attention's scores over the whole sequence; Megatron-Core counts a causal
# mask's half since v0.16, so the two differ by the attention's half (flops.megatron_moe_flops_per_token)
_FLOPS_METHOD = {"counted": "counted from the architecture, attention over the whole sequence as Narayanan et al. "
                            "count it",
                 "counted, windowed": "counted from the architecture, attention over the whole sequence as Narayanan "
                                      "et al. count it, a sliding-window layer's over its window",
                 "counted, sparse": "counted from the architecture, each query's attention over the keys sparse "
                                    "attention selects, the indexer's scores over the earlier keys",
                 "counted, hybrid": "counted from the architecture, its attention layers over the whole sequence, its "
                                    "recurrent mixers (Mamba-2, Gated DeltaNet) by their projections and chunked scan",
                 "6ND": "6 N D: only a parameter count is known", "8ND": "8 N D: 6 N D and the recomputed forward"}


def _flops_method(p: dict) -> str:
    """How the plan counted its FLOPs, in words."""
    if p["flops_method"] in _FLOPS_METHOD:
        return _FLOPS_METHOD[p["flops_method"]]
    return f"{p['flops_method'][:-2]} N D: 6 N D and the forward again in {p['recompute_share']:.0%} of the blocks"


def report(p: dict, ranked: bool = False) -> str:
    """A readable report of a plan dict: every number in it is a number of the dict."""
    m, par, a = p["memory"], p["parallelism"], p["architecture"]
    opt = p["compute_optimal"]
    lines = [
        f"model      {a['name'] or 'the model'}: {a['description']} ({a['source']})",
        f"           {_si(p['params'])} params ({_si(p['active_params'])} active), {_si(p['tokens'])} tokens; "
        f"predicted loss {p['predicted_loss']:.3f}; Chinchilla for the same FLOPs: {_si(opt['params'])} params "
        f"on {_si(opt['tokens'])} tokens",
        f"batch      {p['global_batch']:,} sequences x {a['seq_len']:,} tokens = {p['global_batch_tokens']:,} tokens; "
        f"{p['steps']:,} steps",
        f"layout     {par['description']} ({par['source']})"
        + (f"; {p['placement_note']}" if p.get("placement_note") and par["pp"] > 1 else ""),
    ]
    if p.get("step_time_s"):
        lines.append(f"speed      step {p['step_time_s']:.3g} s, {_si(p['tokens_per_s'])} tokens/s; "
                     f"{p['tflops_per_gpu']:.0f} TFLOP/s per {p['gpu']} ({p['model_tflops_per_gpu']:.0f} model), "
                     f"MFU {p['mfu']:.3f}, HFU {p['hfu']:.3f} ({p['speed_source']})")
    else:
        lines.append(f"speed      {p['tflops_per_gpu']:.0f} TFLOP/s per {p['gpu']}, MFU {p['mfu']:.3f}, "
                     f"HFU {p['hfu']:.3f} ({p['speed_source']})")
    lines += [
        f"compute    {p['model_flops']:.3g} model FLOPs, {p['total_flops']:.3g} executed "
        f"({_si(p['flops_per_token'], 'FLOP')}/token; " + _flops_method(p) + ")",
        f"time       {p['gpu_hours']:,.0f} GPU-hours"
        + (f" = {p['days']:.1f} days on {p['gpus']:,} {p['gpu']}s" if p["days"] is not None else "")
        + (f", cost {p['cost']:,.0f} at {p['cost'] / p['gpu_hours']:g} per GPU-hour" if p["cost"] is not None else "")
        + (f"; range {p['days_range'][0]:.1f}-{p['days_range'][1]:.1f} days over "
           + ", ".join(["the constants' spread"] + [f.replace("_", "-") for f in p["range_from"]["unstated"]])
           if p.get("days_range") else ""),
        f"memory     {_gib(m['total'])} per GPU = states {_gib(m['model_states'])}"
        + (f" + ZeRO-3 buffers {_gib(m['zero3_buffers'])}" if m["zero3_buffers"] else "")
        + f" + activations {_gib(m['activations'])}" + (f" + logits {_gib(m['logits'])}" if m["logits"] else "")
        + f" (stage {m['stage']}) of {_gib(m['usable'])} usable ({_gib(m['capacity'])} on the GPU): "
        + fit_verdict(m) + (f"; {_gib(m['offloaded'])} of activations in host memory" if m.get("offloaded") else ""),
    ]
    if p.get("time_breakdown"):
        step = p["step_time_s"]
        parts = sorted(p["time_breakdown"].items(), key=lambda kv: -kv[1])
        lines.append("step parts " + ", ".join(f"{k} {100 * v / step:.1f}%" for k, v in parts if v > 0))
    if p.get("goodput"):
        g = p["goodput"]
        lines.append(f"failures   job MTBF {g['job_mtbf_s'] / 3600:.3g} h ({g['gpu_mtbf_hours']:,.0f} h per GPU / "
                     f"{p['gpus']:,}): {g['expected_interruptions']:,.0f} interruptions expected; checkpoint "
                     f"{g['checkpoint_s']:.3g} s every {g['interval_s'] / 60:.3g} min (Daly); goodput "
                     f"{g['goodput']:.3f} -> {g['effective_days']:.1f} days")
    for advice in p["fit_advice"]:   # for a tight plan: what would leave the planner's margin
        lines.append(f"{'with room' if m['fits'] else 'would fit'}  {advice['change']}: "
                     f"{_gib(advice['memory_bytes'])}")
    if p.get("split_note"):   # the batch does not split well over the GPUs: what would run better
        lines.append(f"instead    {p['split_note']}")
    for r in p.get("better_runs", []):
        lines.append(f"           - {r['gpus']:,} {p['gpu']}s, batch {r['global_batch']:,} ({r['why']}): {r['layout']}; "
                     f"MFU {r['mfu']:.3f}, {r['days']:.1f} days, {r['gpu_hours']:,.0f} GPU-hours "
                     f"({r['gpu_hours_change']:+.0%})")
    if p.get("search"):
        s = p["search"]
        lines.append(f"search     {s['considered']:,} layouts of {s['gpus']:,} {s['gpu']}s; {s['fit']:,} fit"
                     + (" (TP across nodes: nothing fits inside one)" if s["tp_across_nodes"] else ""))
        if ranked:
            for r in s["ranked"]:
                lines.append(f"  #{r['rank']} {_describe(r['layout'])}: {_si(r['tokens_per_s'])} tokens/s, "
                             f"MFU {r['mfu']:.3f}, {_gib(r['memory']['total'])}")
                if "beats_next" in r:
                    lines.append(f"     beats #{r['rank'] + 1}: {r['beats_next']}")
    if p.get("efficiency_from"):
        lines.append(efficiency_line(p["efficiency_from"]))
    lines += [f"note       {x}" for x in p["notes"]]
    lines += [f"WARNING    {w}" for w in p["warnings"]]
    return "\n".join(_wrapped(line) for line in lines)


REPORT_WIDTH = 88  # what a terminal and the book's output cells show without scrolling


def _wrapped(line: str) -> str:
    """A report line folded at ``REPORT_WIDTH``, continuations indented under its text."""
    lead = len(line) - len(line.lstrip(" "))
    indent = " " * (lead + 3 if lead else 11)
    return "\n".join(textwrap.wrap(line, REPORT_WIDTH, subsequent_indent=indent, break_long_words=False,
                                   break_on_hyphens=False)) or line


def _describe(layout: dict) -> str:
    return Layout(**layout).describe()


def main(argv=None) -> int:
    return run_command("capacity_plan", argv, plan_from_args, lambda p, opts: report(p, ranked=opts.search))
