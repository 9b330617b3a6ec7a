"""A public peer model beside ours, on the same published rows: llm-analysis (Cheng Li, PyPI 0.2.2).

``llm_analysis_step_time`` maps the course's ``Model``, a GPU of ``playground.hardware`` and a
``Layout`` into llm-analysis's own inputs and runs its ``LLMAnalysis.training`` for real;
``peer_table`` does that for every published row (``published_layouts.ALL_LAYOUTS`` and
``published_stacks.STACK_RUNS``) beside ``step_time.predict`` and the published value, on one
metric (``published_stacks.published_metric``: a step time, tokens/s per GPU, or the step time a
published TFLOP/s implies); ``peer_summary`` gives the median and worst |ratio - 1| per stack.

What llm-analysis 0.2.2 is, read from its source and README (so the table can say where each wins):

* its training step time is compute only: the FLOPs of a micro-batch over TP x PP GPUs at
  ``flops_efficiency`` x peak, times the gradient-accumulation steps.  No pipeline bubble, no DP,
  PP, EP or ZeRO-3 communication ("ignored for now, i.e. assuming perfect ... overlapping"), and
  the TP all-reduces it models enter only its forward latency, not the step;
* its FLOP count takes every MLP as 4h wide (16 b s h^2 per layer forward) whatever the width, and
  full attention (4 b s^2 h); backward is twice forward; full recompute adds a forward;
* its documented defaults: ``flops_efficiency`` = ``hbm_memory_efficiency`` = 1, intra- and
  inter-node efficiency 1 ("the lower bound of ... latency, as it assumes the peak hardware
  performance (which is never the case)"); "if one has to make assumptions, ... literature
  reports up to 0.5 for large scale model training ... 0.9 can be an aggressive target for memory
  efficiency" (README, "How to Set FLOPS and Memory Efficiency").  The table runs it both ways:
  ``llm_analysis`` at the defaults, ``llm_analysis_readme`` at 0.5 / 0.9.

The mapping (each lossy step is recorded in the row's ``mapping``): a SwiGLU MLP of width f becomes
its two-matrix MLP of width 1.5 f (the isoparametric convention of its own code) with
``mlp_gated_linear_units``; untied embeddings are counted once (it has no untied output layer);
FP8 GEMMs (which llm-analysis does not model yet: its README lists FP8 as planned) run as its
8-bit config ``w8a8e16`` with the 8-bit peak set to the table's FP8 peak; an HSDP shard group becomes ZeRO-3 over all DP ranks.  Not representable, so
skipped with the reason: context parallelism, mixtures of experts (its FLOPs have no expert term),
a head size other than hidden / heads.  Its per-message latency is its own (8 us, every shipped
GPU config); every other hardware number comes from ``playground.hardware``.
"""

from __future__ import annotations

import logging
import statistics
import warnings
from types import SimpleNamespace

from playground import hardware
from playground.planner.costs import Cluster, Layout, Model
from playground.planner.errors import PlanError
from playground.planner.published_layouts import ALL_LAYOUTS
from playground.planner.published_stacks import STACK_RUNS, published_metric
from playground.planner.replay import SOURCES
from playground.planner.step_time import predict

__all__ = ["PIP_PIN", "README_EFFICIENCY", "llm_analysis_step_time", "unrepresentable", "peer_table",
           "peer_summary"]

PIP_PIN = "llm-analysis==0.2.2"
README_EFFICIENCY = {"flops_efficiency": 0.5, "hbm_memory_efficiency": 0.9}  # its README's assumption
_RECOMPUTE = {"none": "NONE", "selective": "SELECTIVE", "op": "SELECTIVE", "full": "FULL"}  # per-op, a share: its nearest


def _llm_analysis():
    """llm-analysis's modules, or one clear ImportError naming the pip package."""
    try:
        with warnings.catch_warnings():  # fire, which it imports, imports the deprecated ``pipes``
            warnings.simplefilter("ignore", DeprecationWarning)
            from llm_analysis import analysis, config
    except ImportError as e:
        raise ImportError(f"the peer model needs llm-analysis: pip install {PIP_PIN}") from e
    return analysis, config


class _Captured(logging.Handler):
    """llm-analysis logs to its own logger and stdout handler; hold its warnings, print nothing."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _quiet_run(logger, fn):
    saved = logger.handlers[:], logger.level, logger.propagate
    captured = _Captured()
    logger.handlers[:], logger.propagate = [captured], False
    logger.setLevel(logging.WARNING)
    try:
        return fn(), captured.messages
    finally:
        logger.handlers[:], logger.propagate = saved[0], saved[2]
        logger.setLevel(saved[1])


def unrepresentable(model: Model, layout: Layout) -> str:
    """Why llm-analysis 0.2.2 cannot describe this run ('' when it can)."""
    if model.ssm_layers:
        return "a hybrid: it knows attention layers only, not the recurrent mixers (Mamba-2, Gated DeltaNet)"
    if model.is_moe:
        return "MoE: its FLOP count has no expert or top-k term (every MLP is a dense 4h one)"
    if layout.cp > 1:
        return f"context parallelism (CP={layout.cp}): llm-analysis has no CP"
    if model.head_size * model.heads != model.hidden:
        return f"head size {model.head_size} x {model.heads} heads != hidden {model.hidden}: it derives h / a"
    return ""


def _configs(model: Model, gpu: hardware.GPU, cluster: Cluster, layout: Layout, config):
    mapping = []
    ffn = model.ffn_width
    if model.gated_mlp:
        ffn = ffn * 3 // 2  # three h x f matrices = two of width 1.5 f (its isoparametric SwiGLU)
        mapping.append(f"SwiGLU {model.ffn_width} as a 2-matrix MLP of {ffn}")
    if ffn != 4 * model.hidden:
        mapping.append("its MLP FLOPs stay those of a 4h MLP")
    if not model.tied_embeddings:
        mapping.append("untied embeddings counted once")
    mc = config.ModelConfig(name=model.name or "model", num_layers=model.layers, n_head=model.heads,
                            hidden_dim=model.hidden, vocab_size=model.vocab, max_seq_len=model.seq_len,
                            num_key_value_heads=model.kv_head_count, ffn_embed_dim=ffn,
                            expansion_ratio=ffn / model.hidden)
    own = config.gpu_configs["a100-sxm-80gb"]  # its per-message latency: 8e-6 s, as in every config it ships
    gc = config.GPUConfig(name=gpu.name, mem_per_GPU_in_GB=gpu.memory_bytes / 2 ** 30,  # it reads GB as GiB
                          hbm_bandwidth_in_GB_per_sec=gpu.hbm_bytes_per_s / 1e9,
                          intra_node_bandwidth_in_GB_per_sec=cluster.nvlink_bytes_per_s / 1e9,
                          intra_node_min_message_latency=own.intra_node_min_message_latency,
                          peak_fp16_TFLOPS=gpu.peak_bf16_flops / 1e12,
                          peak_i8_TFLOPS=(gpu.peak_fp8_flops or 2 * gpu.peak_bf16_flops) / 1e12,
                          inter_node_bandwidth_in_GB_per_sec=cluster.network_bytes_per_s / 1e9)
    dtype = "w16a16e16"
    if layout.dtype == "fp8":
        dtype = "w8a8e16"
        mapping.append("FP8 as its 8-bit config w8a8e16 at the FP8 peak")
    dc = config.get_dtype_config_by_name(dtype)
    pc = config.ParallelismConfig(tp_size=layout.tp, pp_size=layout.pp, dp_size=layout.dp,
                                  sp_size=layout.tp if layout.sequence_parallel else 1)
    if layout.shard_group:
        mapping.append(f"HSDP (shard {layout.shard_group}) as ZeRO-3 over DP")
    if layout.full_recompute_share and layout.recompute_share < 1:
        mapping.append(f"{layout.recompute_share:.0%} of the blocks recomputed as all of them (FULL)")
    return mc, gc, dc, pc, mapping


def llm_analysis_step_time(model: Model, gpu_name: str, layout: Layout, flops_efficiency: float | None = None,
                           hbm_memory_efficiency: float | None = None) -> dict:
    """llm-analysis's prediction of one training step of ``layout`` (run for real, its logging held).

    Efficiencies left at None take llm-analysis's documented defaults (1: peak).  Returns
    ``step_time_s``, ``tokens_per_s`` (whole cluster), ``params`` (its count), ``flops_per_step``
    (its count, summed over GPUs), ``fits`` (its memory model), ``memory_per_gpu_bytes``, the
    efficiencies it used, ``mapping`` (the lossy steps) and ``warnings`` (what it logged).
    Raises ``PlanError`` for a run it cannot describe (``unrepresentable``)."""
    analysis, config = _llm_analysis()
    why = unrepresentable(model, layout)
    if why:
        raise PlanError(f"llm-analysis cannot describe this run: {why}")
    cluster = Cluster.of(gpu_name)
    mc, gc, dc, pc, mapping = _configs(model, cluster.gpu, cluster, layout, config)
    logger = analysis.logger

    def run():
        la = analysis.LLMAnalysis(mc, gc, dc, pc, flops_efficiency=flops_efficiency,
                                  hbm_memory_efficiency=hbm_memory_efficiency)
        return la, la.training(batch_size_per_gpu=layout.micro_batch, global_batch_size=layout.global_batch,
                               seq_len=model.seq_len,
                               activation_recomputation=analysis.ActivationRecomputation[
                                   _RECOMPUTE[layout.recompute]],
                               ds_zero=analysis.DSZeRO(layout.zero_stage), flash_attn=layout.flash_attention,
                               softmax_dropout=layout.dropout and not layout.flash_attention,
                               mlp_gated_linear_units=model.gated_mlp)

    (la, out), logged = _quiet_run(logger, run)
    step = out["latency_per_iter"]
    return {"step_time_s": step, "tokens_per_s": layout.global_batch * model.seq_len / step,
            "params": out["num_params_total"],
            "flops_per_step": out["num_flops_total_per_micro_batch"] * out["gradient_accumulation_steps"]
            * layout.dp,
            "fits": out["memory_left_per_gpu"] >= 0,
            "memory_per_gpu_bytes": out["(weight+op_state+grad+act)_memory_per_gpu"],
            "flops_efficiency": la.flops_efficiency, "hbm_memory_efficiency": la.hbm_memory_efficiency,
            "mapping": tuple(mapping), "warnings": tuple(logged)}


def _stack(row) -> str:
    if hasattr(row, "stack"):
        return row.stack
    return next(label for label, match in SOURCES if match(row))


def _as_stack_row(row):
    """A ``PublishedLayout`` in the shape ``published_metric`` reads (it has no tokens/s)."""
    if hasattr(row, "tokens_per_s_per_gpu"):
        return row
    return SimpleNamespace(step_time_s=row.step_time_s, tokens_per_s_per_gpu=None, flop_count=row.flop_count,
                           tflops_per_gpu=row.tflops_per_gpu, model=row.model, layout=row.layout)


def peer_table(rows=None) -> list[dict]:
    """Each published row: the published value, ours and llm-analysis's (at its defaults and at its
    README's 0.5 / 0.9) on the row's one metric, and each ratio (predicted / published throughput:
    > 1 optimistic).  Rows llm-analysis cannot describe keep ours and give ``skipped`` (the reason)."""
    _llm_analysis()
    table = []
    for row in (ALL_LAYOUTS + STACK_RUNS) if rows is None else rows:
        metric_row = _as_stack_row(row)
        ours = predict(row.model, row.cluster, row.layout)
        metric, predicted, published, ratio = published_metric(metric_row, ours)
        entry = {"name": row.name, "stack": _stack(row), "gpu": row.gpu, "gpus": row.layout.gpus, "metric": metric,
                 "published": published, "ours": predicted, "ratio_ours": ratio, "skipped": "",
                 "llm_analysis": None, "ratio_llm_analysis": None, "llm_analysis_readme": None,
                 "ratio_llm_analysis_readme": None, "params_ratio": None, "flops_ratio": None,
                 "fits_llm_analysis": None, "mapping": ()}
        why = unrepresentable(row.model, row.layout)
        if why:
            entry["skipped"] = why
            table.append(entry)
            continue
        for key, eff in (("llm_analysis", {}), ("llm_analysis_readme", README_EFFICIENCY)):
            peer = llm_analysis_step_time(row.model, row.gpu, row.layout, **eff)
            _, entry[key], _, entry["ratio_" + key] = published_metric(metric_row, peer)
        entry.update(params_ratio=peer["params"] / row.model.param_count,
                     flops_ratio=peer["flops_per_step"] / ours["flops_per_step"],
                     fits_llm_analysis=peer["fits"], mapping=peer["mapping"])
        table.append(entry)
    return table


def _spread(ratios):
    errors = [abs(r - 1) for r in ratios]
    return (statistics.median(errors), max(errors)) if errors else (None, None)


def peer_summary(table: list[dict]) -> list[dict]:
    """Per stack, over the rows llm-analysis describes: median and worst |ratio - 1| of ours and of
    llm-analysis (defaults, README), and on how many rows ours is the closer of the two."""
    out = []
    for stack in dict.fromkeys(r["stack"] for r in table):
        rows = [r for r in table if r["stack"] == stack and not r["skipped"]]
        entry = {"stack": stack, "rows": len(rows), "skipped": sum(r["stack"] == stack and bool(r["skipped"])
                                                                   for r in table)}
        for key in ("ours", "llm_analysis", "llm_analysis_readme"):
            entry[f"median_{key}"], entry[f"worst_{key}"] = _spread([r["ratio_" + key] for r in rows])
        for key in ("llm_analysis", "llm_analysis_readme"):
            entry[f"ours_closer_than_{key}"] = sum(abs(r["ratio_ours"] - 1) < abs(r["ratio_" + key] - 1)
                                                   for r in rows)
        out.append(entry)
    return out
