"""Throughput: the step-time model's error on every published row, per stack, as ratios.

For each stack of the validation sets (``planner.published_layouts``: Megatron-LM and its peers on
A100s, Llama 3 on H100s; ``planner.published_stacks``: torchtitan, fms-fsdp, Megatron-Bridge, the
Megatron MoE Model Zoo, DeepSpeed ZeRO-3, OPT-175B, llm-foundry) it reports the rows, the median and
the worst |predicted / published - 1|, how many rows fall within +-20%, and how many published values lie
inside the range the prediction reports (``planner.step_range``); ``held_out``, the same counts for the
runs read last and replayed before any change (within the held-out band, +-25%, and judged to fit as
read; ``planner.replay.held_out_table``); ``gemm_table``, eq-gemm against
cuBLAS's measured rates by shape on Hopper and the B200 (``planner.published_gemms``, OpenXLA's table):
predicted / measured at the median and its range; and ``attention_table``, the attention rate against cuDNN's
measured training attention on a GB200 and a GB300 (``planner.published_attention``), with the GB300's measured
gain beside the one charged.  Pure arithmetic: no device needed.
"""

from __future__ import annotations

import statistics

from playground.planner.published_attention import attention_check_summary
from playground.planner.published_gemms import gemm_check_summary
from playground.planner.replay import held_out_table, range_table, stack_table


def add_arguments(parser) -> None:
    parser.add_argument("--band", type=float, default=0.20,
                        help="the accuracy target, as a fraction (default 0.20: within +-20%%)")
    parser.add_argument("--rows", action="store_true", help="also list every row's ratio and range")


def _summary(rows: list[dict], band: float) -> dict:
    errors = [abs(r["ratio"] - 1) for r in rows]
    return {"rows": len(rows), "median_error": round(statistics.median(errors), 3),
            "worst_error": round(max(errors), 3), "within_band": sum(e <= band for e in errors),
            "inside_range": sum(r["inside"] for r in rows)}


def per_stack(band: float = 0.20, rows: bool = False) -> dict:
    """The report: each stack's summary, all rows together, and (``rows``) every row's ratio."""
    if not 0 < band < 1:
        raise ValueError(f"--band must be a fraction between 0 and 1, got {band}")
    table = range_table() + stack_table()
    stacks = {}
    for r in table:
        stacks.setdefault(r["stack"], []).append(r)
    out = {"benchmark": "throughput", "band": band,
           "stacks": {name: _summary(sel, band) for name, sel in stacks.items()},
           "all": _summary(table, band),
           # the runs read last and replayed before any change, held to +-25% and to fitting
           "held_out": held_out_table(table)["summary"],
           # eq-gemm against cuBLAS's measured rates by shape (OpenXLA's table): predicted / measured
           "gemm_table": gemm_check_summary(),
           # the fused attention's rate against cuDNN's measured forward + backward on Blackwell and Blackwell Ultra
           "attention_table": attention_check_summary()}
    if rows:
        out["ratios"] = [{"stack": r["stack"], "name": r["name"], "ratio": round(r["ratio"], 3),
                          "range": [round(x, 3) for x in r["ratio_range"]], "inside": r["inside"]} for r in table]
    return out


def run(args) -> dict:
    return per_stack(args.band, args.rows)
