"""Published runs and layouts replayed through the planner: the tables chapters 5 and 6 show.

``published_table`` and ``published_flops_table`` replay each run of ``published_runs`` through the
capacity plan; ``validation_table`` replays each layout of ``published_layouts`` through the
step-time model, ``range_table`` the same with the range over what each source leaves unstated,
``stack_table`` the rows of today's stacks (``published_stacks``) likewise, ``held_out_table`` the
held-out ones among them with what the check counts, ``tight_runs`` those the
memory model counts into its allowance, ``miss_shares`` what the
dense rows' misses on one GPU architecture go with, and ``tp_sweep`` / ``microbatch_sweep`` vary one
knob of Narayanan et al.'s GPT-145B row.  The figures of ``playground.figures.capacity`` and
``.throughput`` draw these tables; ``host_launch_check`` holds the MoE host launches' pricing to the
published runs it explains, ``device_only`` replays a run with none of them priced.
"""

from __future__ import annotations

import functools
import json
import statistics
from dataclasses import replace

from playground.hardware import on_every_core
from playground.planner.costs import EFFICIENCY, Cluster, Efficiency, Layout, Model
from playground.planner.capacity import plan
from playground.planner.memory import fit_verdict, memory_per_gpu
from playground.planner.published_bridge_ab import BRIDGE_EP_OVERLAP_AB, NSIGHT_GPU_ACTIVE_S, NSIGHT_KERNELS
from playground.planner.published_layouts import ALL_LAYOUTS, NARAYANAN_TABLE1, NARAYANAN_TABLE2
from playground.planner.published_runs import PUBLISHED_RUNS
from playground.planner.published_row import published_step_time
from playground.planner.published_stacks import (HELD_OUT, HELD_OUT_BAND, HELD_OUT_FIRST_REPLAY, MEGATRON_BRIDGE,
                                                 MEGATRON_BRIDGE_2604,
                                                 MEGATRON_BRIDGE_B200, STACK_RUNS, published_metric)
from playground.planner.replay_cache import remembered
from playground.planner.step_range import SETTINGS, fits_as_unstated, predict_range, tornado
from playground.planner.step_time import predict

__all__ = ["plan_json", "published_table", "published_flops_table", "validation_table", "tp_sweep",
           "microbatch_sweep", "range_table", "stack_table", "held_out_table", "held_out_summary", "tight_runs", "miss_shares",
           "tornado_rows", "host_launch_check", "device_only", "UNSTATED", "SOURCES", "GPT145", "A100"]


# ----------------------------------------------------------------------------- the capacity plan
def plan_json(**kw) -> dict:
    """``plan(...)`` as the CLI's ``--json`` prints it (a JSON round trip)."""
    return json.loads(json.dumps(plan(**kw)))


def published_table() -> list[dict]:
    """One row per published run: the published number, the planner's, their ratio, the kind of check
    (``PublishedRun.kind``), and for a time the MFU the published time implies (planner MFU / ratio)."""
    rows = []
    for run in PUBLISHED_RUNS:
        p = plan_json(**run.plan_kwargs)
        ratio = run.published[run.compare] / p[run.compare]
        rows.append({"run": run.name, "metric": run.compare, "published": run.published[run.compare],
                     "planner": p[run.compare], "ratio": ratio, "kind": run.kind,
                     "gpu": run.plan_kwargs.get("gpu", "-") if run.throughput_source != "n/a" else "-",
                     "gpus": run.plan_kwargs.get("gpus"), "throughput": run.throughput_source,
                     "mfu": p["mfu"] if run.throughput_source != "n/a" else None,
                     "implied_mfu": p["mfu"] / ratio if run.kind != "flops" else None,
                     "cite": run.cite, "outlier": run.outlier})
    return rows


def published_flops_table() -> list[dict]:
    """Runs held to a time that also published a FLOP total: that total against the planner's count."""
    rows = []
    for run in PUBLISHED_RUNS:
        if run.compare != "total_flops" and "total_flops" in run.published:
            p = plan_json(**run.plan_kwargs)
            rows.append({"run": run.name, "published": run.published["total_flops"], "planner": p["total_flops"],
                         "method": p["flops_method"], "recompute": p["recompute"],
                         "ratio": run.published["total_flops"] / p["total_flops"]})
    return rows


# ----------------------------------------------------------------------------- the step-time model
A100 = Cluster.of("A100-80GB")
GPT145 = Model(80, 12288, 96, params=145.6e9)   # Narayanan et al. Table 1, the GPT-3-sized row
# the validation set's sources, in the order the figure and the chapter's table show them
SOURCES = (("Narayanan Table 1: GPT 1.7B-1T, A100", lambda r: r in NARAYANAN_TABLE1),
           ("Narayanan Table 2: PTD-P 175B/530B, A100", lambda r: r in NARAYANAN_TABLE2),
           ("Korthikanti Table 5: 22B-1T, A100", lambda r: r.cite == "korthikanti2022reducing"),
           ("Llama 3 405B, H100 (Dubey Table 4)", lambda r: r.cite == "dubey2024llama3"),
           ("BLOOM 176B, A100 (BigScience tr11; outlier)", lambda r: r.cite == "bigscience2022tr11"),
           ("MT-NLG 530B, A100 (outlier)", lambda r: r.cite == "smith2022mtnlg"))


def validation_table() -> list[dict]:
    """Each published layout: published and predicted TFLOP/s per GPU (in the source's FLOP count)."""
    rows = []
    for row in ALL_LAYOUTS:
        r = predict(row.model, row.cluster, row.layout)
        key = "tflops_per_gpu" if row.flop_count == "hardware" else "model_tflops_per_gpu"
        lay = row.layout
        rows.append({"name": row.name, "gpu": row.gpu, "gpus": lay.gpus, "tp": lay.tp, "pp": lay.pp,
                     "dp": lay.dp, "published": row.tflops_per_gpu, "predicted": r[key],
                     "ratio": r[key] / row.tflops_per_gpu, "mfu": r["mfu"], "fractions": r["fractions"],
                     "cite": row.cite, "count": row.flop_count, "outlier": row.outlier,
                     "source": next(i for i, (_, match) in enumerate(SOURCES) if match(row))})
    return rows


def tp_sweep(model=GPT145, gpus=1536, global_batch=2304, degrees=(1, 2, 4, 8, 16, 32)) -> list[dict]:
    """Same GPUs, same model: TP grows, PP shrinks to keep TP x PP = 64 (DP = 24)."""
    out = []
    for tp in degrees:
        r = predict(model, A100, Layout(tp, 64 // tp, gpus // 64, 1, global_batch))
        out.append({"tp": tp, "pp": 64 // tp, "tflops": r["tflops_per_gpu"], "link": r["links"]["tp"],
                    "tp_comm": r["fractions"]["tp_comm"], "bubble": r["fractions"]["bubble"]})
    return out


def microbatch_sweep(batches=(128, 512), sizes=(1, 2, 4, 8, 16), model=GPT145) -> dict:
    """TP = 8, PP = 8, DP = 1 (64 GPUs): throughput, bubble and GEMM efficiency per micro-batch size."""
    return {B: [{"b": b, **{k: v for k, v in predict(model, A100, Layout(8, 8, 1, b, B)).items()
                            if k in ("tflops_per_gpu", "bubble_fraction", "gemm_efficiency")}}
                for b in sizes] for B in batches}


# what each source of the validation set leaves unstated (its docstring in published_layouts says
# what the rows assume instead): the range of each row spans these and the constants' spread
UNSTATED = {"Narayanan Table 1: GPT 1.7B-1T, A100": ("vpp",),
            "Narayanan Table 2: PTD-P 175B/530B, A100": ("vpp",),
            "Korthikanti Table 5: 22B-1T, A100": (),
            # V = 8 derived from one layer a chunk; "flash attention" never named, so its kernel is open
            "Llama 3 405B, H100 (Dubey Table 4)": ("attention_kernel",),
            "BLOOM 176B, A100 (BigScience tr11; outlier)": (),
            "MT-NLG 530B, A100 (outlier)": ("vpp",)}


def range_table() -> list[dict]:
    """Each published layout: the published TFLOP/s, the prediction and the range it spans over the
    source's unstated settings and the constants' spread, and whether the published value is inside."""
    rows = []
    for row, base in zip(ALL_LAYOUTS, validation_table()):
        label = SOURCES[base["source"]][0]
        r = predict_range(row.model, row.cluster, row.layout, UNSTATED[label])
        key = "tflops_per_gpu" if row.flop_count == "hardware" else "model_tflops_per_gpu"
        lo_s, hi_s = r["step_time_range_s"]
        low, high = r[key] * r["step_time_s"] / hi_s, r[key] * r["step_time_s"] / lo_s
        rows.append({**base, "stack": label, "unstated": UNSTATED[label], "low": low, "high": high,
                     "inside": low <= row.tflops_per_gpu <= high,
                     "ratio_range": (low / row.tflops_per_gpu, high / row.tflops_per_gpu)})
    return rows


def miss_shares(architecture: str, eff: Efficiency = EFFICIENCY) -> dict:
    """The dense published rows on one GPU architecture (today's stacks, and on Ampere Megatron-LM's
    in-band layouts), each as predicted / published throughput beside the share of its predicted
    step that each part takes: the layers' tensor-core work (GEMMs and attention), their element-wise
    kernels, the logits and loss, and what communication leaves exposed.  Returns ``rows``, the
    Pearson correlation of the ratio with each share (``correlation``), and ``tensor_core_factor``:
    the k that fits ratio - 1 = (k - 1) x tensor-core share best (least squares), the factor on
    tensor-core time that would explain the misses if they all lived there.  ``eff``: the constants
    to replay them with (the sourced ones by default)."""
    rows = []
    layouts = [r for r in ALL_LAYOUTS if not r.outlier] if architecture == "ampere" else []
    for row in list(layouts) + [r for r in STACK_RUNS if not r.model.is_moe]:
        if row.cluster.gpu.architecture != architecture:
            continue
        p = predict(row.model, row.cluster, row.layout, eff)
        if hasattr(row, "stack"):
            ratio = published_metric(row, p)[3]
        else:
            ratio = p["tflops_per_gpu" if row.flop_count == "hardware" else "model_tflops_per_gpu"] / row.tflops_per_gpu
        step, parts = p["step_time_s"], p["compute_parts"]
        exposed = sum(v for k, v in p["fractions"].items() if k not in ("compute", "recompute"))
        rows.append({"name": row.name, "ratio": ratio, "tensor_core": parts["gemm"] / step,
                     "elementwise": parts["elementwise"] / step, "logits": parts["logits"] / step,
                     "exposed": exposed})
    shares = ("tensor_core", "elementwise", "logits", "exposed")
    ratios = [r["ratio"] for r in rows]
    k = 1 + sum((r["ratio"] - 1) * r["tensor_core"] for r in rows) / sum(r["tensor_core"] ** 2 for r in rows)
    return {"rows": rows, "median_ratio": statistics.median(ratios), "tensor_core_factor": k,
            "correlation": {s: statistics.correlation(ratios, [r[s] for r in rows]) for s in shares}}


def stack_table() -> list[dict]:
    """Each run of today's stacks: predicted / published throughput, its range, inside or not.  Every run and
    constant it reads is code, so the replay (half a minute of ranges) runs once a process, and once for as long as
    the package's code is unchanged where a checkout can keep it (``replay_cache``); each call gets its own
    copy of the rows."""
    return [dict(row) for row in _stack_rows()]


@functools.lru_cache(maxsize=1)
def _stack_rows() -> tuple[dict, ...]:
    return remembered("stack-rows", lambda: tuple(on_every_core(_stack_row, range(len(STACK_RUNS)))))


def _stack_row(index: int) -> dict:
    row = STACK_RUNS[index]
    varied = tuple(f for f in row.unstated if f in SETTINGS)   # a batch the source omits stays as read
    r = predict_range(row.model, row.cluster, row.layout, varied)
    metric, predicted, published, ratio = published_metric(row, r)
    lo_s, hi_s = r["step_time_range_s"]
    low, high = ratio * r["step_time_s"] / hi_s, ratio * r["step_time_s"] / lo_s
    return {"name": row.name, "stack": row.stack, "gpu": row.gpu, "gpus": row.layout.gpus,
            "layout": row.layout.describe(), "metric": metric, "published": published,
            "predicted": predicted, "ratio": ratio, "ratio_range": (low, high),
            "inside": low <= 1.0 <= high, "unstated": row.unstated, "note": row.note,
            "misfit": row.memory_misfit}


def held_out_table(table: list[dict] | None = None) -> dict:
    """The held-out runs (``published_stacks.HELD_OUT``) as ``stack_table`` replays them, each with its
    source and the memory model's verdict, and what the check counts: within +-20% and within the
    held-out band (+-25%), inside the range, judged to fit as read, and fitting once the settings its source
    leaves unstated may take any value (``fit_as_unstated``: the recompute a table omits); beside each ratio,
    ``first_replay``, the one recorded before anything was changed for it, and its counts (``first_within_20``,
    ``first_within_band``)."""
    by_name = {r["name"]: r for r in (table or stack_table())}
    rows = []
    for source, runs in HELD_OUT.items():
        for run in runs:
            memory = memory_per_gpu(run.model, run.layout, run.cluster.gpu)
            unstated = tuple(f for f in run.unstated if f in SETTINGS)
            rows.append(dict(by_name[run.name], source=source, moe=run.model.is_moe, fits=memory["fits"],
                             first_replay=HELD_OUT_FIRST_REPLAY[run.name],
                             fits_unstated=fits_as_unstated(run.model, run.cluster, run.layout, unstated),
                             memory=fit_verdict(memory)))
    return {"rows": rows, "summary": held_out_summary(rows)}


def held_out_summary(rows: list[dict]) -> dict:
    """What the held-out check counts over ``rows`` of ``held_out_table`` (all of them, or one set's)."""
    count = lambda ok: sum(1 for r in rows if ok(r))   # noqa: E731
    return {
        "rows": len(rows), "within_20": count(lambda r: abs(r["ratio"] - 1) <= 0.20),
        "within_band": count(lambda r: abs(r["ratio"] - 1) <= HELD_OUT_BAND), "band": HELD_OUT_BAND,
        "inside_range": count(lambda r: r["inside"]), "judged_to_fit": count(lambda r: r["fits"]),
        "fit_as_unstated": count(lambda r: r["fits_unstated"]),
        "first_within_20": count(lambda r: abs(r["first_replay"] - 1) <= 0.20),
        "first_within_band": count(lambda r: abs(r["first_replay"] - 1) <= HELD_OUT_BAND)}


def tight_runs() -> list[str]:
    """The published runs (each of which ran) that the memory model counts past a GPU's usable memory
    but inside the GPU's: the ones that fit only tightly, the allowance's own uncertainty."""
    return [row.name for row in ALL_LAYOUTS + STACK_RUNS
            if memory_per_gpu(row.model, row.layout, row.cluster.gpu)["tight"]]


def tornado_rows() -> list[dict]:
    """The sensitivity chapter 6 draws: three published rows, each factor moved alone (``tornado``),
    as predicted throughput relative to the nominal, with the published value on the same scale."""
    picks = [(next(r for r in STACK_RUNS if r.name == "LLAMA3-70B, 64 H100, TP 4 PP 4 CP 2 VP 5"), None),
             (next(r for r in ALL_LAYOUTS if r.name == "GPT 174.6B PTD-P, 384 GPUs"), ("vpp",)),
             (next(r for r in STACK_RUNS if r.name == "Llama 3.1 8B, FSDP 2 CP 4, 128K"), None)]
    out = []
    for row, unstated in picks:
        unstated = tuple(f for f in (row.unstated if unstated is None else unstated) if f in SETTINGS)
        cluster = row.cluster
        nominal = predict(row.model, cluster, row.layout)
        if hasattr(row, "stack"):
            published = published_metric(row, nominal)[3]  # predicted / published throughput
        else:
            key = "tflops_per_gpu" if row.flop_count == "hardware" else "model_tflops_per_gpu"
            published = nominal[key] / row.tflops_per_gpu
        bars = [{"factor": t["factor"], "values": t["values"],
                 "relative": tuple(nominal["step_time_s"] / s for s in t["step_time_s"])}
                for t in tornado(row.model, cluster, row.layout, unstated)]
        out.append({"name": row.name, "unstated": unstated, "bars": bars, "published_relative": 1 / published})
    return out


def device_only(row) -> float:
    """Predicted / published with no host time priced for the launches (the host infinitely fast): the
    device's work alone, its kernels' gaps included."""
    idle_host = replace(EFFICIENCY, host_kernel_s=0.0, expert_gemm_host_s=0.0)
    return published_metric(row, predict(row.model, row.cluster, row.layout, idle_host))[3]


def kernel_gap_check() -> dict:
    """Megatron-Bridge's EP-overlap A/B with the overlap off, as Nsight profiled it: the time the device idled
    between kernels (the step less the GPU's active union) and the kernels it ran, against what the model
    charges the step for launches (the step less the same step with ``kernel_s`` zero) and the launches that is."""
    off = BRIDGE_EP_OVERLAP_AB[0]
    with_gaps, without = (predict(off.model, off.cluster, off.layout, replace(EFFICIENCY, kernel_s=k))["step_time_s"]
                          for k in (EFFICIENCY.kernel_s, 0.0))
    return {"run": off.name, "model_gap_s": with_gaps - without,
            "model_kernels": (with_gaps - without) / EFFICIENCY.kernel_s,
            "nsight_idle_s": off.step_time_s - NSIGHT_GPU_ACTIVE_S, "nsight_kernels": NSIGHT_KERNELS}


def host_launch_check() -> dict:
    """What chapter 6 holds the MoE host launches' pricing to: Megatron-Bridge's Qwen3-30B-A3B on eight B200s
    at a micro-batch of 1 (25.11) and 4 (26.04.01), predicted by each ``moe_launch`` (tokens/s a GPU, over
    published, the share of the step waiting on the host); the published rows whose nominal prediction the
    grouped launch's floor moves (from the device's work alone); and the H100 run's layer passes, published
    against predicted from a graphed layer to one launched expert by expert."""
    small, big = (next(r for r in rows if r.name.startswith("Qwen3_30B") and r.gpu == "B200")
                  for rows in (MEGATRON_BRIDGE_B200, MEGATRON_BRIDGE_2604))
    launches = {}
    for launch in ("graphed", "grouped", "multi_stream", "per_expert"):
        speed = [predict(r.model, r.cluster, replace(r.layout, moe_launch=launch)) for r in (small, big)]
        tps = [p["tokens_per_s"] / p["gpus"] for p in speed]
        launches[launch] = {"tokens_per_s": tps, "ratio": [t / r.tokens_per_s_per_gpu for t, r in zip(tps, (small, big))],
                            "wait": [p["time_breakdown"]["moe_host_wait"] / p["step_time_s"] for p in speed]}
    both = [(run.name, device_only(run), published_metric(run, predict(run.model, run.cluster, run.layout))[3])
            for run in STACK_RUNS if run.model.is_moe]
    moved = [(name, alone, priced) for name, alone, priced in both if abs(alone - priced) > 0.005]
    h100 = next(r for r in MEGATRON_BRIDGE if r.name.startswith("Qwen3_30B"))
    ends = [predict(h100.model, h100.cluster, replace(h100.layout, moe_launch=launch))
            for launch in ("graphed", "per_expert")]
    passes = ends[0]["micro_batches"] * ends[0]["stage_layers"]
    return {"published_tokens_per_s": [small.tokens_per_s_per_gpu, big.tokens_per_s_per_gpu],
            "launches": launches, "moved": moved, "h100_run": h100.name,
            "h100_layer_pass_ms": [published_step_time(h100) / passes * 1e3]
            + [p["step_time_s"] / passes * 1e3 for p in ends]}
