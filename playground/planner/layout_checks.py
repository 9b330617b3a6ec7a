"""Whether a layout can run: one clear ``PlanError`` naming what stops it, before any arithmetic.

``check_layout`` checks a ``Layout`` against a ``Model`` (and a GPU count): degrees that divide what they
split, knobs that go together, values in their ranges; ``check_recompute_modules`` checks Megatron-Core's
``--recompute-modules`` (``check_offload_modules`` its ``--offload-modules``) before a search would find that no
layout runs.
"""

from __future__ import annotations

import math

from playground.planner.architecture import Model
from playground.planner.errors import PlanError
from playground.planner.layout import (CP_METHODS, DTYPES, EP_DISPATCHERS, FP8_SCALINGS, KERNELS, MOE_LAUNCH, MOE_PROBS,
                                      OFFLOAD_MODULES, OPTIMIZER_MOMENTS, PP_SCHEDULES, RECOMPUTE,
                                       RECOMPUTE_MODULES, TP_OVERLAP, Layout)

__all__ = ["check_layout", "check_recompute_modules", "check_offload_modules"]


def check_recompute_modules(model: Model, modules) -> None:
    """A ``PlanError`` naming a recompute module that is unknown or that ``model`` lacks (before a
    search, which would otherwise only find that no layout runs)."""
    _check_modules(model, Layout(1, 1, 1, recompute="selective", recompute_modules=modules))


def check_offload_modules(model: Model, modules) -> None:
    """A ``PlanError`` naming an offload module that is unknown, alone where Megatron-Core needs a partner (attn_proj
    beside core_attn: the two share the attention's output), or one ``model`` lacks (the experts' on a dense model)."""
    if not modules:
        return
    _known(modules, "offload", OFFLOAD_MODULES)
    if "attn_proj" in modules and "core_attn" not in modules:
        raise PlanError("offload module attn_proj needs core_attn beside it (Megatron-Core's rule: they share the "
                        "attention's output)")
    moe = [m for m in modules if m in ("expert_fc1", "moe_act")]
    if moe and not model.is_moe:
        raise PlanError(f"offload module {moe[0]} needs a model with experts; this one has none")


def _known(modules, kind: str, allowed: tuple) -> None:
    """Megatron-Core's --recompute-modules or --offload-modules: a list of names it knows."""
    if isinstance(modules, str) or not isinstance(modules, (tuple, list)):
        raise PlanError(f"{kind} modules are Megatron-Core's --{kind}-modules, a list; got {modules!r}")
    bad = [m for m in modules if m not in allowed]
    if bad:
        raise PlanError(f"unknown {kind} module {bad[0]!r}; choose from {', '.join(allowed)}")


def _check_modules(model: Model, layout: Layout) -> None:
    modules = layout.recompute_modules
    if not modules:
        return
    _known(modules, "recompute", RECOMPUTE_MODULES)
    needs = {"moe_act": model.is_moe, "moe": model.is_moe, "shared_experts": model.is_moe and model.shared_width,
             "mla_up_proj": model.is_mla}
    wrong = [m for m in modules if not needs.get(m, True)]
    if wrong:
        what = {"mla_up_proj": "latent attention (MLA)", "shared_experts": "shared experts"}.get(wrong[0], "experts")
        raise PlanError(f"recompute module {wrong[0]} needs a model with {what}; this one has none")


# ----------------------------------------------------------------------------- checks
def _whole(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise PlanError(f"{name} must be a whole number >= 1, got {v!r}")


def _divisors(n: int) -> str:
    """``n``'s divisors in words: "1, 2, 4 or 8"."""
    found = [str(d) for d in range(1, n + 1) if n % d == 0]
    return found[0] if len(found) == 1 else f"{', '.join(found[:-1])} or {found[-1]}"


def check_layout(model: Model, layout: Layout, gpus: int | None = None) -> None:
    """One clear ``PlanError`` for a layout that cannot run (before any arithmetic)."""
    for name in ("tp", "pp", "dp", "vpp", "cp", "ep", "micro_batch", "global_batch"):
        _whole(name.upper() if len(name) <= 3 else name.replace("_", " "), getattr(layout, name))
    if model.hidden % model.heads and model.head_dim is None:
        raise PlanError(f"hidden size {model.hidden} is not divisible by {model.heads} heads")
    if model.heads % layout.tp:
        raise PlanError(f"TP={layout.tp} does not divide the {model.heads} attention heads")
    if not model.is_mla and model.kv_head_count % layout.tp:
        raise PlanError(f"TP={layout.tp} does not divide the {model.kv_head_count} key/value heads "
                        f"(it would split a KV head; use a TP that divides both head counts, "
                        f"{_divisors(math.gcd(model.heads, model.kv_head_count))}"
                        + ", or context parallelism)")
    if model.ssm_layers:   # a hybrid's recurrent mixers: their heads split over TP, and over CP as Megatron-Core does
        model.ssm.check_tp(layout.tp)
        if layout.cp > 1:
            model.ssm.check_cp(layout.tp, layout.cp)
    if layout.pp > model.layers:
        raise PlanError(f"PP={layout.pp} is more than the {model.layers} layers")
    chunks = layout.pp * layout.vpp
    # Megatron-Core may count the embedding and the loss as a layer each (94 layers in 96 chunks)
    if chunks > model.layers and not (chunks == model.layers + 2 and layout.first_stage_layers is None
                                      and layout.last_stage_layers is None):
        raise PlanError(f"PP x VPP = {chunks} chunks is more than the {model.layers} layers "
                        f"(or the {model.layers + 2} the embedding and the loss make, each counted as one)")
    if layout.vpp > 1 and layout.pp == 1:
        raise PlanError("virtual stages (VPP > 1) need pipeline parallelism (PP > 1)")
    if model.seq_len % (2 * layout.cp if layout.cp > 1 else 1):
        raise PlanError(f"CP={layout.cp} does not divide the {model.seq_len}-token sequence into "
                        f"2 x CP = {2 * layout.cp} equal chunks (causal load balancing)")
    if layout.cp_method not in CP_METHODS:
        raise PlanError(f"cp_method must be one of {', '.join(CP_METHODS)}, got {layout.cp_method!r}")
    if layout.cp > 1 and layout.cp_method == "ulysses":
        split, kv = layout.tp * layout.cp, model.materialized_kv_heads
        if model.heads % split or kv % split:
            raise PlanError(f"Ulysses splits the heads over TP x CP = {split}: it does not divide the "
                            f"{model.heads} heads and {kv} key/value heads (use ring or allgather CP)")
    if layout.ep > 1 and not model.is_moe:
        raise PlanError(f"EP={layout.ep} needs a mixture-of-experts model (this one is dense)")
    if model.is_moe and model.experts % layout.ep:
        raise PlanError(f"EP={layout.ep} does not divide the {model.experts} experts")
    if not model.is_moe and (layout.expert_tp not in (None, layout.tp) or layout.moe_imbalance != 1):
        raise PlanError("expert TP and MoE imbalance need a mixture-of-experts model (this one is dense)")
    if not model.is_moe and layout.moe_probs != "activation":
        raise PlanError("--moe-probs says where a router's weights scale its experts' outputs: it needs a "
                        "mixture-of-experts model (this one is dense)")
    if layout.expert_tp is not None and (layout.expert_tp < 1 or layout.tp % layout.expert_tp):
        raise PlanError(f"expert TP={layout.expert_tp} must be a whole number dividing TP={layout.tp}")
    if layout.expert_tp_degree == layout.tp and (layout.dp * layout.cp) % layout.ep:
        raise PlanError(f"EP={layout.ep} must divide DP x CP = {layout.dp * layout.cp} (experts are spread "
                        f"over the data-parallel ranks; with --expert-tp 1 EP may span TP x DP x CP)")
    if (layout.tp * layout.dp * layout.cp) % (layout.ep * layout.expert_tp_degree):
        raise PlanError(f"EP x expert TP = {layout.ep * layout.expert_tp_degree} must divide TP x CP x DP = "
                        f"{layout.tp * layout.cp * layout.dp}")
    if gpus is not None and layout.gpus != gpus:
        raise PlanError(f"TP x PP x CP x DP = {layout.tp} x {layout.pp} x {layout.cp} x {layout.dp} = "
                        f"{layout.gpus} is not the {gpus} GPUs")
    if layout.global_batch % (layout.dp * layout.micro_batch):
        unit = layout.dp * layout.micro_batch
        lower, upper = layout.global_batch // unit * unit, (layout.global_batch // unit + 1) * unit
        raise PlanError(f"global batch {layout.global_batch} is not a multiple of DP x micro-batch = "
                        f"{layout.dp} x {layout.micro_batch}: use "
                        + (f"{lower} or {upper}" if lower else f"at least {upper}") + " sequences")
    if layout.vpp > 1 and layout.micro_batches % layout.pp:
        raise PlanError(f"the interleaved schedule needs the {layout.micro_batches} micro-batches "
                        f"to be a multiple of PP={layout.pp}")
    check_offload_modules(model, layout.offload_modules)
    if layout.offload_modules and (layout.recompute == "op" or layout.full_recompute_share == 1):
        raise PlanError(f"--offload-modules sends to host memory inputs that --recompute {layout.recompute} does not "
                        "keep: with it there is nothing to offload (offload with selective or no recomputation, or a "
                        "--recompute-share below 1)")
    if layout.optimizer_moments not in OPTIMIZER_MOMENTS:
        raise PlanError(f"optimizer_moments must be one of {', '.join(OPTIMIZER_MOMENTS)}, got {layout.optimizer_moments!r}")
    if layout.pp_schedule not in PP_SCHEDULES:
        raise PlanError(f"pp_schedule must be one of {', '.join(PP_SCHEDULES)}, got {layout.pp_schedule!r}")
    if layout.pp_schedule == "zb-h1" and layout.vpp > 1:
        raise PlanError(f"the ZB-H1 schedule runs one chunk a stage: use vpp 1, not {layout.vpp} (interleaving is "
                        "the 1f1b schedule with vpp > 1)")
    if layout.pp_schedule == "zb-h1" and layout.pp > 1 and layout.micro_batches < layout.pp:
        raise PlanError(f"the ZB-H1 schedule needs at least as many micro-batches as stages: "
                        f"{layout.micro_batches} < PP={layout.pp}")
    if layout.recompute not in RECOMPUTE:
        raise PlanError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {layout.recompute!r}")
    _check_modules(model, layout)
    share = layout.recompute_share
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise PlanError(f"recompute share is the share of blocks recomputed, in (0, 1]; got {share!r} "
                        "(no block at all is recompute none)")
    if share < 1 and layout.recompute != "full":
        raise PlanError(f"a recompute share below 1 chooses which blocks full recomputation runs again; it does "
                        f"not go with recompute {layout.recompute}")
    if layout.zero_stage not in (0, 1, 2, 3) or isinstance(layout.zero_stage, bool):
        raise PlanError(f"zero stage must be 0, 1, 2 or 3, got {layout.zero_stage!r}")
    if layout.dtype not in DTYPES:
        raise PlanError(f"dtype must be one of {', '.join(DTYPES)}, got {layout.dtype!r}")
    if isinstance(layout.moe_imbalance, bool) or not isinstance(layout.moe_imbalance, (int, float)) \
            or not math.isfinite(layout.moe_imbalance) or layout.moe_imbalance < 1:
        raise PlanError(f"moe_imbalance is the busiest rank's tokens over the mean, >= 1; got {layout.moe_imbalance!r}")
    if layout.attention_kernel not in ("fa1", "fa2", "fa3", "cudnn"):
        raise PlanError(f"attention_kernel must be fa1, fa2, fa3 or cudnn, got {layout.attention_kernel!r}")
    if layout.loss_kernel not in ("upcast", "megatron", "fused"):
        raise PlanError(f"loss_kernel must be upcast, megatron or fused, got {layout.loss_kernel!r}")
    if layout.moe_launch not in MOE_LAUNCH:
        raise PlanError(f"moe_launch must be one of {', '.join(MOE_LAUNCH)}, got {layout.moe_launch!r}")
    if layout.moe_probs not in MOE_PROBS:
        raise PlanError(f"moe_probs must be one of {', '.join(MOE_PROBS)}, got {layout.moe_probs!r}")
    if layout.ep_dispatch not in EP_DISPATCHERS:
        raise PlanError(f"ep_dispatch must be one of {', '.join(EP_DISPATCHERS)}, got {layout.ep_dispatch!r}")
    if layout.fp32_gather and (layout.zero_stage != 3 or layout.fp8_gather):
        raise PlanError("fp32 gathers are FSDP's weights kept in fp32: they need ZeRO stage 3 (--zero-stage 3)"
                        if layout.zero_stage != 3 else "fp32 gathers and float8 gathers exclude each other")
    if layout.fp8_scaling not in FP8_SCALINGS:
        raise PlanError(f"fp8_scaling must be one of {', '.join(FP8_SCALINGS)}, got {layout.fp8_scaling!r}")
    if layout.fp8_scaling != "tensor" and layout.dtype != "fp8":
        raise PlanError(f"{layout.fp8_scaling} scaling is how FP8 GEMMs scale their operands: it needs --dtype fp8")
    if layout.fp8_activations and layout.dtype != "fp8":
        raise PlanError("FP8 activation caching stores what FP8 GEMMs read: it needs --dtype fp8")
    if layout.ep_overlap and layout.ep == 1:
        raise PlanError("EP all-to-all overlap needs expert parallelism (EP > 1)")
    if layout.fsdp_gather not in ("unit", "tensor"):
        raise PlanError(f"fsdp_gather must be unit or tensor, got {layout.fsdp_gather!r}")
    if layout.grad_reduce not in ("bf16", "fp32"):
        raise PlanError(f"grad_reduce must be bf16 or fp32, got {layout.grad_reduce!r}")
    if layout.tp_overlap not in TP_OVERLAP:
        raise PlanError(f"tp_overlap must be one of {', '.join(TP_OVERLAP)}, got {layout.tp_overlap!r}")
    if layout.kernels not in KERNELS:
        raise PlanError(f"kernels must be one of {', '.join(KERNELS)}, got {layout.kernels!r}")
    if layout.shard_group is not None:
        if layout.zero_stage != 3:
            raise PlanError("a shard group (HSDP) needs ZeRO stage 3 (FSDP)")
        _whole("shard group", layout.shard_group)
        if (layout.dp * layout.cp) % layout.shard_group:
            raise PlanError(f"the HSDP shard group of {layout.shard_group} must divide DP x CP = "
                            f"{layout.dp * layout.cp}")
