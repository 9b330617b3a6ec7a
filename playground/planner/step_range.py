"""An honest range: how far a prediction moves over what its user did not state.

A published run rarely states every setting the step-time model needs ("interleaved" without the
number of virtual stages, no recompute policy, no micro-batch size), and every efficiency constant of
``Efficiency`` is known only to within a spread.  ``predict_range`` re-runs
``step_time.predict`` over

* each **unstated setting** (a ``Layout`` field named in ``unstated``) over every value the layout
  allows (``setting_choices``), and
* the **efficiency constants** at the two ends of their spread together (``Efficiency.spread``):
  every constant at its optimistic end, then every one at its pessimistic end,

and reports the nominal prediction with the range those span: ``step_time_range_s``,
``tokens_per_s_range`` and ``mfu_range``, and the ``caveats`` the validation gives for a run of its
kind (``validation_caveats``: a mixture of experts launched from the host, with 16 or more experts on a GPU
or fewer, or replayed from a CUDA graph, a sequence beyond 64K tokens, ZeRO-3/FSDP on Hopper GPUs at full power, a dense model on Hopper GPUs, one kept whole on each GPU, TP traffic
under Transformer Engine's overlap; each while its published runs replay slower than predicted, by
over a tenth at the median).  ``tornado`` moves one factor at a time from the nominal prediction,
for the chapter's sensitivity chart.
"""

from __future__ import annotations

import functools
import itertools
import statistics
from dataclasses import replace

from playground.planner.costs import MOE_EXPERT_KERNELS, MOE_LAYER_KERNELS
from playground.planner.errors import PlanError
from playground.planner.layout import (EFFICIENCY, EP_DISPATCHERS, FP8_SCALINGS, MOE_LAUNCH, MOE_PROBS, OFFLOAD_CHOICES,
                                      OPTIMIZER_MOMENTS, RECOMPUTE_SHARES, Cluster, Efficiency, Layout)
from playground.planner.layout_checks import check_layout
from playground.planner.architecture import Model
from playground.planner.memory import memory_per_gpu
from playground.planner.published_row import published_metric
from playground.planner.published_stacks import STACK_RUNS
from playground.planner.step_time import power_clock, predict

__all__ = ["SETTINGS", "setting_choices", "efficiency_corners", "predict_range", "tornado", "kind_ratios",
           "validation_caveats", "fits_as_unstated", "MOE_MANY", "MOE_FEW", "MANY_LOCAL_EXPERTS", "CAVEAT_MEDIAN",
           "many_local_experts"]

# the Layout fields a source may leave unstated, and the values each can take
SETTINGS = {
    "vpp": None,                       # every v the layer count allows (computed)
    "recompute": ("none", "selective", "op", "full"),
    "recompute_share": (*RECOMPUTE_SHARES, 1.0),   # with full: the share of the blocks recomputed
    "micro_batch": None,               # powers of two that divide the batch per replica (computed)
    "overlap_grad_reduce": (False, True),
    "sequence_parallel": (False, True),
    "tp_overlap": ("none", "forward", "all"),
    "cp_method": ("ring", "allgather", "ulysses"),
    # a source that says "flash attention" without naming the kernel: FlashAttention-2 (SDPA's until PyTorch
    # 2.5), FlashAttention-3 (from July 2024) or cuDNN's (Transformer Engine's); the 2022 FlashAttention-1 left out
    "attention_kernel": ("fa2", "fa3", "cudnn"),
    # dropless routing: the busiest EP rank over the mean.  The MoE Model Zoo's Qwen3-235B runs lose
    # 9-25% of their throughput dropless against forced balance (best_practice/Qwen3/readme.md)
    "moe_imbalance": (1.0, 1.25, 1.5),
    "ep_dispatch": EP_DISPATCHERS,
    "ep_overlap": (False, True),
    "moe_launch": MOE_LAUNCH,
    "moe_probs": MOE_PROBS,            # where the router's weights scale a routed copy (memory only)          # the experts' GEMMs as one kernel, one by one from Python, or graphed
    "p2p_overlap": (False, True),      # the interleaved schedule's transfers behind compute, or waited on
    "pp_schedule": ("1f1b", "zb-h1"),  # 1F1B, or zero-bubble's ZB-H1 (only where vpp is 1)
    "optimizer_moments": OPTIMIZER_MOMENTS,  # Adam's moments in fp32 or bf16
    "offload_modules": OFFLOAD_CHOICES,  # which saved inputs wait in host memory (none, or a set recipes use)
    "fp8_weight_cache": (True, False),  # FP8 weights cast once per step, or every micro-batch
    "fp8_params": (True, False),       # weights kept in FP8 (Megatron's --fp8-param-gather), or bf16 beside their copy
    "fp8_scaling": FP8_SCALINGS,       # scales per tensor now, per tensor from the past, or per block
    "grad_reduce": ("bf16", "fp32"),
    "zero_stage": (0, 1, 2, 3),
    # Megatron's DDP with or without its distributed optimizer (--use-distributed-optimizer, ZeRO-1):
    # what a source that says "FSDP = 0" leaves open; ZeRO-3 it rules out
    "distributed_optimizer": (0, 1),
    "reshard_after_forward": (True, False),   # FSDP2: gather every micro-batch, or keep the step's gathers
    "shard_group": None,               # None (shard over all of DP x CP) or a group dividing it (computed)
}
# settings that vary a Layout field under another name: the field, and the values above are its
FIELD = {"distributed_optimizer": "zero_stage"}
# for each constant, which end of its spread makes the step faster
_FASTER_WHEN_HIGH = {"gemm": True, "fp8_gemm": True, "fp8_split_accumulation": False, "hopper_sustained": True,
                     "blackwell_sustained": True, "blackwell_fp8": True, "blackwell_mxfp8": True, "comm_clock": True, "comm_share": False,
                     "power_exponent": False, "comm_sms": False,
                     "tp_overlap_hidden": True, "ep_overlap_hidden": True, "attention_fa1": True, "attention_fa2": True, "attention_fa2_hopper": True, "attention_fa2_blackwell": True,
                     "attention_fa3": True, "attention_cudnn": True, "attention_fast_exp": True, "hbm": True, "link": True, "network": True, "kernel_s": False, "host_kernel_s": False, "graph_kernel_s": False, "expert_gemm_host_s": False, "latency_s": False,
                     "optimizer_bytes": False, "loss_bytes": False}


def _valid(model: Model, layout: Layout) -> bool:
    try:
        check_layout(model, layout)
    except PlanError:
        return False
    return True


def setting_choices(model: Model, layout: Layout, field: str) -> list:
    """The values of ``field`` that make a valid layout with everything else as given (only the given one where
    none could change the prediction: TP's overlap without TP, the EP dispatcher without EP, the pipeline's
    transfers without a pipeline)."""
    if field not in SETTINGS:
        raise PlanError(f"cannot vary {field!r}: the unstated settings are {', '.join(SETTINGS)}")
    if field == "vpp":
        per_stage = model.layers // layout.pp   # Megatron's interleaving: v divides each stage's layers
        values = [v for v in range(1, per_stage + 1) if per_stage % v == 0] if layout.pp > 1 else [1]
    elif field == "micro_batch":
        per_replica = layout.global_batch // layout.dp
        values = [b for b in (1, 2, 4, 8, 16) if b <= per_replica and per_replica % b == 0]
    elif field == "shard_group":
        ranks = layout.dp * layout.cp
        values = [None] + [g for g in (2, 4, 8, 16, 32, 64) if g < ranks and ranks % g == 0] \
            if layout.zero_stage == 3 else [layout.shard_group]
    elif field == "sequence_parallel" and layout.tp == 1:
        values = [False]
    elif (field == "tp_overlap" and layout.tp == 1) or (field == "ep_dispatch" and layout.ep == 1) \
            or (field == "p2p_overlap" and layout.pp == 1):
        values = [getattr(layout, field)]   # no TP collective to hide, no all-to-all to route, no stage to send
        # to: every value alike (the degrees are never varied, so another unstated setting cannot make them matter)
    elif field == "attention_kernel" and not layout.flash_attention:   # unfused attention names no kernel
        values = [layout.attention_kernel]
    elif field in ("moe_launch", "moe_probs") and not model.is_moe:
        values = [getattr(layout, field)]
    else:
        values = SETTINGS[field]
    return [v for v in values if _valid(model, replace(layout, **{FIELD.get(field, field): v}))]


def efficiency_corners(eff: Efficiency = EFFICIENCY) -> tuple[Efficiency, Efficiency]:
    """(optimistic, pessimistic): every constant at the end of its spread that makes a step faster,
    then slower."""
    fast, slow = {}, {}
    for name, (low, high) in eff.spread.items():
        if name not in _FASTER_WHEN_HIGH:
            continue
        hi_fast = _FASTER_WHEN_HIGH[name]
        fast[name], slow[name] = (high, low) if hi_fast else (low, high)
    return replace(eff, **fast), replace(eff, **slow)


def _combos(model: Model, cluster: Cluster, layout: Layout, unstated) -> list[Layout]:
    """Every combination of the unstated settings that fits in memory (the published run did fit)."""
    fields = list(dict.fromkeys(unstated))
    options = [setting_choices(model, layout, f) for f in fields]
    names = [FIELD.get(f, f) for f in fields]
    variants = [replace(layout, **dict(zip(names, values))) for values in itertools.product(*options)]
    # each value is valid alone; together they may not be (interleaving needs enough micro-batches)
    fitting = [v for v in variants
               if v == layout or (_valid(model, v) and memory_per_gpu(model, v, cluster.gpu)["fits"])]
    return fitting if layout in fitting else [layout] + fitting   # the layout as given always counts


def fits_as_unstated(model: Model, cluster: Cluster, layout: Layout, unstated=()) -> bool:
    """Whether ``layout`` fits in memory as given or with some value of the settings its source left
    ``unstated`` (a published run did fit: with the recompute its table omits, say)."""
    return memory_per_gpu(model, layout, cluster.gpu)["fits"] or len(_combos(model, cluster, layout, unstated)) > 1


def predict_range(model: Model, cluster: Cluster, layout: Layout, unstated=(), eff: Efficiency = EFFICIENCY,
                  gpus: int | None = None) -> dict:
    """``predict``'s result, plus the range spanned by ``unstated`` settings and the constants' spread."""
    nominal = predict(model, cluster, layout, eff, gpus)
    steps, mfus = [nominal["step_time_s"]], [nominal["mfu"]]
    corners = efficiency_corners(eff)
    for variant in _combos(model, cluster, layout, unstated):
        for corner in corners:
            out = predict(model, cluster, variant, corner, gpus)
            steps.append(out["step_time_s"])
            mfus.append(out["mfu"])
    tokens = layout.global_batch * model.seq_len
    lo, hi = min(steps), max(steps)
    return {**nominal,
            "step_time_range_s": (lo, hi),
            "tokens_per_s_range": (tokens / hi, tokens / lo),
            "mfu_range": (min(mfus), max(mfus)),
            "range_from": {"unstated": list(unstated), "efficiency_spread": dict(eff.spread)},
            "caveats": validation_caveats(model, cluster, layout)}


def _full_power_fsdp_on_hopper(model: Model, cluster: Cluster | None, layout: Layout | None) -> bool:
    if cluster is None or layout is None:
        return False
    return layout.zero_stage == 3 and getattr(cluster.gpu, "architecture", "") == "hopper" and power_clock(cluster) == 1


def _whole_layers_kept(model: Model, cluster: Cluster | None, layout: Layout | None) -> bool:
    return layout is not None and not model.is_moe and layout.tp == 1 and layout.recompute == "none"


def _dense_on_hopper(model: Model, cluster: Cluster | None, layout: Layout | None) -> bool:
    return cluster is not None and not model.is_moe and getattr(cluster.gpu, "architecture", "") == "hopper"


def _te_tp_overlap(model: Model, cluster: Cluster | None, layout: Layout | None) -> bool:
    return layout is not None and layout.tp > 1 and layout.tp_overlap == "all"


def _moe_launched(model: Model, cluster: Cluster | None, layout: Layout | None) -> bool:
    return model.is_moe and (layout is None or layout.moe_launch != "graphed")


# Experts on a GPU from which a host-launched MoE layer counts as one with many: the course's H200 record
# (``bench moe``) found Qwen3-30B-A3B's 16 local experts host-bound when launched one by one (4.3x its grouped
# layer), and one to four local experts within a quarter of it (chapter 6).  Without a layout the model's
# experts all count (EP 1).
MANY_LOCAL_EXPERTS = 16


def _local_experts(model: Model, layout: Layout | None) -> float:
    return model.experts / (layout.ep if layout is not None else 1)


def many_local_experts(model: Model, cluster: Cluster | None, layout: Layout | None) -> bool:
    """Whether a run is of the kind ``MOE_MANY`` names: its MoE layers launched from the host, with
    ``MANY_LOCAL_EXPERTS`` or more experts on each GPU (what the planner's search can steer round)."""
    return _moe_launched(model, cluster, layout) and _local_experts(model, layout) >= MANY_LOCAL_EXPERTS


def _moe_launched_few(model: Model, cluster: Cluster | None, layout: Layout | None) -> bool:
    return _moe_launched(model, cluster, layout) and _local_experts(model, layout) < MANY_LOCAL_EXPERTS


def _moe_graphed(model: Model, cluster: Cluster | None, layout: Layout | None) -> bool:
    return model.is_moe and layout is not None and layout.moe_launch == "graphed"


# the kinds of run whose published runs ran slower than predicted (chapter 6), and the reason; a MoE is three kinds,
# by whether the host launches its layers' kernels, for the runs that replay from a CUDA graph land near the model, and
# by how many experts each GPU's host launches, for the host's work grows with them
MOE_MANY = f"a mixture of experts launched from the host, {MANY_LOCAL_EXPERTS} or more experts on a GPU"
MOE_FEW = f"a mixture of experts launched from the host, fewer than {MANY_LOCAL_EXPERTS} experts on a GPU"
_KINDS = ((MOE_MANY, many_local_experts,
           "a MoE layer's host work is priced only as a floor measured for eager PyTorch on one H200 (--moe-launch: "
           f"{MOE_LAYER_KERNELS} kernels a layer, {MOE_EXPERT_KERNELS} more per local expert launched one by one, "
           f"{EFFICIENCY.host_kernel_s * 1e6:.0f} us each), and launching "
           "Qwen3-30B-A3B's 16 local experts one by one made its layer 4.3x slower there (a host sync alone: 1.06x; "
           "chapter 6); Transformer Engine's expert-by-expert FP8 casts (--fp8-scaling), its cuBLASLt GEMM per "
           "expert (--moe-launch multi_stream) and biased experts' "
           "expert-by-expert biases are priced as their stacks' code runs them, but your stack's own launch cost is "
           "not known to the model, and Megatron-Bridge's Qwen3-30B-A3B "
           "ran twice as fast token-drop in 25.09 as dropless in 25.11, same layouts; read the time as optimistic, "
           "even if your stack groups its experts' GEMMs or dispatches with DeepEP or HybridEP: Megatron-Bridge's "
           "runs that did, read as their recipes ran them, ran slower than predicted too, unless the whole "
           "iteration was one CUDA graph (--moe-launch graphed)"),
          (MOE_FEW, _moe_launched_few,
           "the host's launches grow with the experts on each GPU, and the course's H200 record launched one to four of "
           "them one by one within a quarter of the grouped layer's time; your stack's own launch cost is not known "
           "to the model: read the time as optimistic"),
          ("a mixture of experts replayed from a CUDA graph", _moe_graphed,
           "the runs whose recipes replay the iteration from CUDA graphs, nothing launched from the host, ran slower "
           "than predicted by more than a tenth at the median"),
          ("a sequence beyond 64K tokens", lambda m, c, l: m.seq_len > 65536,
           "what long-context attention loses beyond its kernel's rate and the CP ring's messages and merges is not modelled"),
          ("ZeRO-3 / FSDP on Hopper GPUs at their full power", _full_power_fsdp_on_hopper,
           "what these runs lose beyond a Hopper's sustained tensor-core rate was not found (the same model fits "
           "FSDP at a 500 W cap and on A100s); read the time as optimistic"),
          ("a dense model without tensor parallelism or activation recomputation", _whole_layers_kept,
           "in all but one stack that published such runs (FSDP, HSDP and data parallelism, A100, H100 and B200, "
           "bf16 and FP8) they ran slower than predicted, while most of those stacks' runs that recompute fit; a "
           "profile of one such run (the course's GPT on an H200, eager autocast over fp32 weights; chapter 5) priced "
           "its matrix work within 5% and its element-wise kernels at 1.7x their charge, the fp32 residual stream "
           "counted: read the time as optimistic"),
          ("a dense model on Hopper GPUs", _dense_on_hopper,
           "the misses follow the share of the step the layers' GEMMs and attention take, not element-wise work or "
           "communication (chapter 6), as if Hopper tensor cores ran slower in a training step than in the "
           "benchmarks behind the model's rates; read the time as optimistic by about the median"),
          ("tensor-parallel traffic hidden by Transformer Engine's overlap", _te_tp_overlap,
           "NVIDIA's DGX Cloud (NeMo) recipes that turn it on ran about as fast as the model predicts with the TP "
           "traffic waited on (--tp-overlap none), Megatron-LM's own weak-scaling runs as fast as with it hidden: "
           "read the time as lying between the two"))


@functools.lru_cache(maxsize=None)
def _published_ratios(kind: int) -> tuple[float, ...]:
    test = _KINDS[kind][1]
    return tuple(sorted(published_metric(r, predict(r.model, r.cluster, r.layout))[3]
                        for r in STACK_RUNS if test(r.model, r.cluster, r.layout)))


# a kind of run is warned about when its published runs, replayed, ran slower than predicted by more
# than this at the median: beyond the spread of the rows the model fits
CAVEAT_MEDIAN = 1.1


def _kind_stats(i: int) -> dict:
    kind, ratios = _KINDS[i][0], _published_ratios(i)
    median = statistics.median(ratios) if ratios else None
    return {"kind": kind, "runs": len(ratios), "slower": sum(r > 1 for r in ratios), "median": median,
            "range": (ratios[0], ratios[-1]) if ratios else None,
            "flagged": median is not None and median > CAVEAT_MEDIAN}


def kind_ratios() -> list[dict]:
    """Each kind of run of ``_KINDS`` as its published rows replay: how many, how many slower than
    predicted, the median and the range of published / predicted, and whether that median passes
    ``CAVEAT_MEDIAN`` (``flagged``: the kind gets a caveat)."""
    return [_kind_stats(i) for i in range(len(_KINDS))]


def validation_caveats(model: Model, cluster: Cluster | None = None, layout: Layout | None = None) -> list[str]:
    """One line for each kind of run this one is (``_KINDS``: by its model, or by its layout on its
    cluster) whose published runs, replayed by the step-time model, ran slower than predicted by more
    than ``CAVEAT_MEDIAN`` at the median: how many, how many of them slower, the median and the range
    (computed, not quoted).  Without a cluster and layout only the kinds a model decides are tested."""
    out = []
    for i, (kind, test, why) in enumerate(_KINDS):
        if not test(model, cluster, layout):
            continue
        seen = _kind_stats(i)     # replayed only for a kind the run is
        if seen["flagged"]:
            lo, hi = seen["range"]
            out.append(f"for {kind}, {seen['slower']} of {seen['runs']} published runs, replayed as each states "
                       f"its layout, ran slower than predicted, by {seen['median']:.2f}x at the median "
                       f"({lo:.2f}-{hi:.2f}x): {why}")
    return out


def tornado(model: Model, cluster: Cluster, layout: Layout, unstated=(), eff: Efficiency = EFFICIENCY) -> list[dict]:
    """One factor at a time: the step time at each end of each factor, others nominal; widest first."""
    nominal = predict(model, cluster, layout, eff)["step_time_s"]
    rows = []
    for name, (low, high) in eff.spread.items():
        if name in _FASTER_WHEN_HIGH:
            ends = [predict(model, cluster, layout, replace(eff, **{name: x}))["step_time_s"] for x in (low, high)]
            rows.append({"factor": name, "values": (low, high), "step_time_s": tuple(ends)})
    for field in dict.fromkeys(unstated):
        name = FIELD.get(field, field)
        values = [getattr(v, name) for v in _combos(model, cluster, layout, [field])]
        ends = [predict(model, cluster, replace(layout, **{name: v}), eff)["step_time_s"] for v in values]
        rows.append({"factor": field, "values": tuple(values), "step_time_s": (min(ends), max(ends))})
    for row in rows:
        row["nominal_s"] = nominal
        row["swing"] = max(row["step_time_s"]) - min(row["step_time_s"])
    return sorted(rows, key=lambda r: -r["swing"])
