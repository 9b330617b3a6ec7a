"""The capacity planner's command line: ``python -m playground.capacity_plan ... [--json]``.

Numbers accept K/M/B/T suffixes; bad input gets one line on stderr and exit status 2.  The layout
flags of the step-time model (``--tp --pp --dp --vpp --search``) are accepted too, so the same
command predicts a layout's step time (``playground.planner.step_time_cli``).
"""

from __future__ import annotations

import json
import math
import sys

from playground.planner import step_time_cli
from playground.planner.args import glue_negative_values, parse_number, planner_parser
from playground.planner.errors import PlanError
from playground.planner.capacity import plan

__all__ = ["main", "report"]


# flags that describe a layout for the step-time model, not arguments of plan()
_LAYOUT_KEYS = ("tp", "pp", "dp", "vpp", "ffn", "kv_heads", "gpus_per_node", "nvlink_gbs",
                "network_gbs", "global_batch", "sequence_parallel", "flash_attention",
                "overlap_grad_reduce", "gated_mlp", "search")


def _kwargs(opts) -> dict:
    kw = {}
    for key, value in vars(opts).items():
        if key in ("json", "gpu", "recompute", "zero_stage", *_LAYOUT_KEYS) or value in (None, False):
            continue
        number = parse_number(value)
        if key in ("layers", "hidden", "heads", "vocab", "seq_len", "gpus", "micro_batch_size"):
            if not math.isfinite(number):
                raise PlanError(f"--{key.replace('_', '-')} must be a finite number, got {value!r}")
            if number != int(number):
                raise PlanError(f"--{key.replace('_', '-')} must be a whole number, got {value!r}")
            number = int(number)
        kw[key] = number
    if opts.zero_stage not in ("0", "1", "2", "3"):
        raise PlanError(f"--zero-stage must be 0, 1, 2 or 3, got {opts.zero_stage!r}")
    kw.update(gpu=opts.gpu, recompute=opts.recompute, zero_stage=int(opts.zero_stage))
    return kw


def _si(x, unit="") -> str:
    if x is None:
        return "n/a"
    for p, s in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= p:
            return f"{x / p:.3g} {s}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def report(p: dict) -> str:
    """A readable report of a plan dict."""
    m, par = p["memory"], p["parallelism"]
    lines = [
        f"model      {_si(p['params'])} params ({_si(p['active_params'])} active), {_si(p['tokens'])} tokens; "
        f"predicted loss {p['predicted_loss']:.3f}",
        f"optimal    same FLOPs, Chinchilla: {_si(p['compute_optimal']['params'])} params on "
        f"{_si(p['compute_optimal']['tokens'])} tokens",
        f"compute    {_si(p['flops_per_token'], 'FLOP')}/token, {p['total_flops']:.3g} FLOPs ({p['flops_method']}, "
        f"recompute {p['recompute']}), {p['steps']:,} steps of {_si(p['global_batch_tokens'])} tokens",
        f"speed      {p['tflops_per_gpu']:.0f} TFLOP/s per {p['gpu']}, MFU {p['mfu']:.2f} ({p['mfu_source']})",
        f"time       {p['gpu_hours']:,.0f} GPU-hours"
        + (f" = {p['days']:.1f} days on {p['gpus']:,} GPUs" if p["days"] is not None else "")
        + (f", cost {p['cost']:,.0f} at {p['cost'] / p['gpu_hours']:g} per GPU-hour" if p["cost"] is not None else ""),
        f"memory     {m['model_states'] / 1e9:.1f} GB states + {m['activations'] / 1e9:.1f} GB activations = "
        f"{m['total'] / 1e9:.1f} GB of {m['usable'] / 1e9:.0f} GB usable ({m['capacity'] / 1e9:.0f} GB HBM) per GPU",
        f"layout     TP={par['tp']} x PP={par['pp']} x DP={par['dp']}, ZeRO-{par['zero_stage']}"
        + ("" if par["fits"] else "  (does NOT fit)"),
    ]
    lines += [f"WARNING    {w}" for w in p["warnings"]]
    return "\n".join(lines)


def main(argv=None) -> int:
    try:
        argv = glue_negative_values(list(sys.argv[1:] if argv is None else argv))
        opts = planner_parser().parse_args(argv)
        result = plan(**_kwargs(opts))
        if opts.search or any(getattr(opts, k) is not None for k in ("tp", "pp", "dp", "vpp")):
            prediction = step_time_cli.predict_from_args(opts)
            result["layout_prediction"] = prediction
            if not opts.search:  # the layout's own numbers at the top level, as the issue names them
                for key in ("step_time_s", "tflops_per_gpu", "mfu", "time_breakdown"):
                    if key in prediction:
                        result[key] = prediction[key]
    except PlanError as e:
        print(f"capacity_plan: error: {e}", file=sys.stderr)
        return 2
    if opts.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(report(result))
        if "layout_prediction" in result:
            print("\npredicted step time of the layout (playground.step_time)")
            print(step_time_cli.report(result["layout_prediction"]))
    return 0
