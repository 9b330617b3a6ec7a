"""The command line of the step-time model: the capacity planner's flags plus a layout.

``python -m playground.step_time --layers 80 --hidden 12288 --heads 96 --gpu A100-80GB --gpus 1536
--global-batch 2304 --recompute full --tp 8 --pp 8 [--vpp 2] [--micro-batch-size 1] [--json]``
prints the prediction of ``planner.step_time.predict``; ``--search`` ranks the layouts that fit instead.
``predict_from_args(opts)`` lets ``python -m playground.capacity_plan`` predict the same layout
from its own (identical) flags.  Bad input: one line on stderr and exit status 2 (``PlanError``).
"""

from __future__ import annotations

import json
import math
import sys

from playground.planner.capacity import DEFAULT_GLOBAL_BATCH, DEFAULT_SEQ_LEN, DEFAULT_VOCAB
from playground.planner.args import glue_negative_values, parse_number, planner_parser
from playground.planner.costs import Cluster, Layout, Model
from playground.planner.errors import PlanError
from playground.planner.layout_search import report as search_report
from playground.planner.layout_search import search
from playground.planner.step_time import predict

__all__ = ["predict_from_args", "report", "main"]


def _number(opts, name):
    """The value of ``--name`` parsed as a number (``7B``, ``1e3``), or None when not given."""
    raw = getattr(opts, name.replace("-", "_"), None)
    if raw is None:
        return None, None
    try:
        return parse_number(str(raw)), raw
    except PlanError as e:
        raise PlanError(f"--{name}: {e}") from None


def _int(opts, name, default=None):
    value, raw = _number(opts, name)
    if value is None:
        return default
    if not math.isfinite(value) or value != int(value) or value < 1:
        raise PlanError(f"--{name} must be a whole number >= 1, got {raw!r}")
    return int(value)


def _bandwidth(opts, name):
    """A link override in GB/s (``--nvlink-gbs``, ``--network-gbs``) as bytes/s; None when not given."""
    value, raw = _number(opts, name)
    if value is None:
        return None
    if not math.isfinite(value) or value <= 0:
        raise PlanError(f"--{name} must be a positive finite number of GB/s, got {raw!r}")
    return value * 1e9


def _from_args(opts):
    layers, hidden, heads = (_int(opts, k) for k in ("layers", "hidden", "heads"))
    if None in (layers, hidden, heads):
        raise PlanError("the step-time model needs the architecture: give --layers, --hidden and --heads")
    params = parse_number(opts.params) if getattr(opts, "params", None) else None
    model = Model(layers, hidden, heads, _int(opts, "vocab", DEFAULT_VOCAB),
                  _int(opts, "seq-len", DEFAULT_SEQ_LEN), _int(opts, "ffn"),
                  _int(opts, "kv-heads"), bool(getattr(opts, "gated_mlp", False)), params)
    cluster = Cluster.of(opts.gpu, _int(opts, "gpus-per-node"), _bandwidth(opts, "nvlink-gbs"),
                         _bandwidth(opts, "network-gbs"))
    seqs = _int(opts, "global-batch")
    if seqs is None:
        tokens = parse_number(opts.global_batch_tokens) if opts.global_batch_tokens else \
            DEFAULT_GLOBAL_BATCH
        seqs = max(1, int(tokens // model.seq_len))
    if opts.zero_stage not in ("0", "1", "2", "3"):
        raise PlanError(f"--zero-stage must be 0, 1, 2 or 3, got {opts.zero_stage!r}")
    common = dict(global_batch=seqs, zero_stage=int(opts.zero_stage), recompute=opts.recompute,
                  sequence_parallel=opts.sequence_parallel, flash_attention=opts.flash_attention,
                  overlap_grad_reduce=opts.overlap_grad_reduce)
    return model, cluster, common, _int(opts, "gpus")


def predict_from_args(opts) -> dict:
    """The prediction (or, with ``--search``, the ranked layouts) for parsed planner + layout flags."""
    model, cluster, common, gpus = _from_args(opts)
    if opts.search:
        if gpus is None:
            raise PlanError("--search needs --gpus")
        return search(model, cluster, gpus, **common)
    tp, pp, dp = (_int(opts, k) for k in ("tp", "pp", "dp"))
    if tp is None or pp is None:
        raise PlanError("give --tp and --pp (and --dp or --gpus), or --search")
    if dp is None and gpus is None:
        raise PlanError("give --dp or --gpus")
    layout = Layout(tp, pp, dp or max(1, gpus // (tp * pp)), _int(opts, "micro-batch-size", 1),
                    vpp=_int(opts, "vpp", 1), **common)
    return predict(model, cluster, layout, gpus=gpus)


def _parser():
    p = planner_parser()
    p.prog = "python -m playground.step_time"
    p.description = "Predicted step time of a parallel layout (or --search for the best layouts)."
    return p


def report(r: dict) -> str:
    if "ranked" in r:
        return search_report(r)
    lay = r["layout"]
    lines = [f"layout   TP={lay['tp']} PP={lay['pp']} DP={lay['dp']} VPP={lay['vpp']} micro-batch "
             f"{lay['micro_batch']} x {r['micro_batches']} on {r['gpus']} x {r['gpu']}",
             f"step     {r['step_time_s']:.3f} s, {r['tokens_per_s']:,.0f} tokens/s, "
             f"{r['tflops_per_gpu']:.0f} TFLOP/s per GPU, MFU {r['mfu']:.2f}",
             f"memory   {r['memory']['total'] / 1e9:.1f} GB of {r['memory']['usable'] / 1e9:.0f} GB usable "
             f"({r['memory']['capacity'] / 1e9:.0f} GB HBM)"
             + ("" if r["memory"]["fits"] else "  (does NOT fit)")]
    lines += [f"  {k:<16} {v:8.3f} s  {100 * r['fractions'][k]:5.1f} %" for k, v in r["time_breakdown"].items()]
    return "\n".join(lines)


def main(argv=None) -> int:
    try:
        argv = glue_negative_values(list(sys.argv[1:] if argv is None else argv))
        opts = _parser().parse_args(argv)
        result = predict_from_args(opts)
    except PlanError as e:
        print(f"step_time: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, default=str) if opts.json else report(result))
    return 0
