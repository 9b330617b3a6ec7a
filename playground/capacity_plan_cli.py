"""The capacity planner's command line: ``python -m playground.capacity_plan ... [--json]``.

Numbers accept K/M/B/T suffixes; bad input gets one line on stderr and exit status 2.  The layout
flags of the step-time model (``--tp --pp --dp --vpp --search``) are added here too, so the same
command predicts a layout's step time (``playground.step_time``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from playground import hardware
from playground.capacity_plan import PlanError, plan

__all__ = ["main", "report", "parse_number", "planner_parser", "glue_negative_values"]

_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}


def parse_number(text: str) -> float:
    """'175e9', '175B', '1.4T', '4M' -> float; anything else -> PlanError."""
    t = text.strip()
    scale = _SUFFIX.get(t[-1:].lower(), 1.0) if t and t[-1:].isalpha() else 1.0
    try:
        value = float(t[:-1] if scale != 1.0 else t) * scale
    except ValueError:
        raise PlanError(f"not a number: {text!r}") from None
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line on stderr, exit status 2, no usage dump
        raise PlanError(message)


def planner_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m playground.capacity_plan",
                description="Capacity plan of an LLM training run (numbers accept K/M/B/T suffixes).")
    num = ["params", "active-params", "tokens", "compute", "layers", "hidden", "heads", "vocab",
           "seq-len", "global-batch-tokens", "gpus", "mfu", "achieved-tflops", "price-per-gpu-hour",
           "micro-batch-size", "max-days"]
    for name in num:
        p.add_argument(f"--{name}", type=str, default=None)
    p.add_argument("--gpu", default="H100", help=f"one of {', '.join(hardware.gpu_names())}")
    p.add_argument("--recompute", default="none", help="none | selective | full")
    p.add_argument("--zero-stage", default="0", help="0 | 1 | 2 | 3")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    from playground.step_time_cli import add_layout_arguments  # lazy: it imports this module
    return add_layout_arguments(p)   # --tp --pp --dp --vpp --search ...: the step-time model


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


def glue_negative_values(argv: list[str]) -> list[str]:
    """``--params -7B`` -> ``--params=-7B``, so a negative number is reported as one, not as a flag."""
    out = []
    for arg in argv:
        if out and out[-1].startswith("--") and "=" not in out[-1] and arg[:1] == "-" \
                and arg[1:2].replace(".", "0").isdigit():
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def main(argv=None) -> int:
    try:
        argv = glue_negative_values(list(sys.argv[1:] if argv is None else argv))
        opts = planner_parser().parse_args(argv)
        result = plan(**_kwargs(opts))
        if opts.search or any(getattr(opts, k) is not None for k in ("tp", "pp", "dp", "vpp")):
            from playground.step_time_cli import predict_from_args
            prediction = predict_from_args(opts)
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
            from playground.step_time_cli import report as layout_report
            print("\npredicted step time of the layout (playground.step_time)")
            print(layout_report(result["layout_prediction"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
