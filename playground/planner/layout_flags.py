"""The layout flags of the planner's two commands: their definitions (``add_layout_arguments``), the
``Layout`` keywords the given ones make (``layout_knobs``: what was not given is left out, so that
today's defaults, ``Layout.today``, apply) and ``--unstated`` (``unstated_from_args``)."""

from __future__ import annotations

import argparse

from playground.planner.costs import FP8_QUANTIZE_KERNELS, MOE_EXPERT_KERNELS, MOE_LAYER_KERNELS
from playground.planner.errors import PlanError
from playground.planner.layout import EFFICIENCY, EP_DISPATCHERS, FP8_SCALINGS, MOE_LAUNCH, MOE_PROBS, OPTIMIZER_MOMENTS, PP_SCHEDULES
from playground.planner.flag_values import number, whole
from playground.planner.step_range import SETTINGS

__all__ = ["add_layout_arguments", "layout_knobs", "unstated_from_args"]

_BOOL = argparse.BooleanOptionalAction


def add_layout_arguments(p: argparse.ArgumentParser) -> None:
    """The layout group of flags, each with its default."""
    lay = p.add_argument_group("layout (not given: --gpus alone searches for the fastest layout that fits with "
                               "the planner's 2 GiB + 5% memory margin; a layout you give that fits only "
                               "inside that margin is reported as fitting only tightly)")
    for flag, text in (("tp", "tensor-parallel degree (default: 1)"), ("pp", "pipeline stages (default: 1)"),
                       ("vpp", "virtual stages per GPU, interleaved 1F1B (default: 1)"),
                       ("cp", "context-parallel degree: the sequence split (default: 1)"),
                       ("ep", "expert-parallel degree, within DP x CP (default: 1)"),
                       ("expert-tp", "expert tensor-parallel degree, dividing TP; below TP, EP x expert TP spans "
                                     "TP x CP x DP (default: TP's)"),
                       ("dp", "data-parallel degree (default: GPUs / (TP x PP x CP))"),
                       ("micro-batch-size", "sequences per micro-batch (default: 1)"),
                       ("first-stage-layers", "layers on the first pipeline stage (default: as Megatron "
                                              "places them)"),
                       ("last-stage-layers", "layers on the last pipeline stage (default: as Megatron)"),
                       ("hsdp", "ZeRO-3 as HSDP: shard over this many GPUs, replicate across (implies "
                                "--zero-stage 3; default: plain FSDP, sharded over all of DP x CP)")):
        lay.add_argument(f"--{flag}", metavar="N", help=text)
    lay.add_argument("--zero-stage", choices=("0", "1", "2", "3"), help="ZeRO stage; 3 = FSDP (default: 1, the "
                     "distributed optimizer, when DP x CP > 1; the search tries 1-3)")
    lay.add_argument("--recompute", choices=("none", "selective", "op", "full"), help="activation recomputation: "
                     "selective is Megatron's (the attention core again), op torchtitan's per-op checkpointing "
                     "(every other matmul and the element-wise ops again) (default: none; the search tries none, "
                     "selective, op, then full)")
    lay.add_argument("--recompute-share", metavar="F", help="with full recomputation, the share of the blocks "
                     "recomputed, evenly spread, the rest keeping all their activations: a number in (0, 1] or a "
                     "fraction such as 1/3 (fms-fsdp's selective_checkpointing; Megatron's --recompute-method block "
                     "--recompute-num-layers N is N over a stage's layers); implies --recompute full (default: 1, "
                     "every block)")
    lay.add_argument("--cp-method", choices=("ring", "allgather", "ulysses"), help="how context parallelism "
                     "shares K and V: ring (blocks passed around the CP ring behind block attention: ring attention, "
                     "Megatron-Core's p2p), allgather (the sequence's K/V gathered before attention, exposed: "
                     "Llama 3's) or ulysses (all-to-alls from sequence to head shards and back, exposed: "
                     "DeepSpeed-Ulysses; the heads must split over TP x CP) (default: ring)")
    lay.add_argument("--recompute-modules", metavar="LIST", help="with selective recomputation, which modules run "
                     "again, comma-separated, as Megatron-Core's --recompute-modules: core_attn (the attention core), "
                     "layernorm (the norms' outputs), moe_act (the experts' activation), mla_up_proj (MLA's "
                     "up-projections), mlp (the dense MLP), moe (the whole MoE layer), shared_experts; implies "
                     "--recompute selective (default: core_attn)")
    lay.add_argument("--offload-modules", metavar="LIST", help="fine-grained activation offloading, as Megatron-Core's "
                     "--offload-modules, comma-separated: the modules whose saved input waits in host memory between "
                     "forward and backward, copied over the GPU's host link (PCIe, or NVLink-C2C on GB200/GB300) behind "
                     "the layer's passes: attn_norm, qkv_linear, core_attn (Q, K and V), attn_proj (the attention "
                     "output; with core_attn), mlp_norm, expert_fc1 (each dispatched copy), moe_act (the experts' gate "
                     "and up products); none offloads nothing (default: none)")
    lay.add_argument("--dtype", choices=("bf16", "fp8"), help="GEMM precision; fp8 casts every GEMM operand, "
                     "the attention core and the logits stay bf16 (default: bf16)")
    lay.add_argument("--fp8-scaling", choices=FP8_SCALINGS, help="with --dtype fp8, how each operand is scaled: "
                     "tensor (one scale from the tensor's current maximum, read in a pass of its own: Megatron-Bridge's "
                     "FP8-CS, torchao's tensorwise float8), delayed (one from earlier steps' maxima: Transformer "
                     "Engine's DelayedScaling, NeMo's FP8 before 2025) or block (one per block of 32 or 128 elements, "
                     "found in the cast: MXFP8 on Blackwell, DeepSeek-V3's tiles); tensor reads each operand once more "
                     "(6 bytes an element cast, not 4), and Transformer Engine casts a MoE layer's experts one by one "
                     f"under tensor ({FP8_QUANTIZE_KERNELS['tensor']} kernels each) and block scaling "
                     f"({FP8_QUANTIZE_KERNELS['block']}), all at once under delayed (default: tensor)")
    lay.add_argument("--kernels", choices=("fused", "eager"), help="fused: Megatron/Transformer Engine or "
                     "torch.compile kernels; eager: PyTorch op by op (RMSNorm, RoPE, SwiGLU unfused; a MoE layer's "
                     "routing, permutation and combine at the bytes measured on an H200) (default: fused)")
    lay.add_argument("--flash-attention", action=_BOOL, default=None, help="fused attention, no s^2 scores "
                     "(default: on)")
    lay.add_argument("--attention-kernel", choices=("fa3", "cudnn", "fa2", "fa1"), help="fused attention kernel: on "
                     "Hopper and later fa3 (FlashAttention-3, ~56%% of peak; on Blackwell its successor FlashAttention-4, "
                     "charged the same), cudnn (cuDNN's, which Transformer Engine "
                     "and so Megatron and NeMo run, ~51%%) or fa2 (PyTorch SDPA's FlashAttention-2, ~32%% on Hopper, ~16%% on "
                     "Blackwell, whose new tensor-core instructions it does not use), before Hopper all are "
                     "FlashAttention-2 (~55%%); fa1 is FlashAttention-1 or its Triton port, 2022-23's "
                     "(~33%% on A100) (default: fa3)")
    lay.add_argument("--sequence-parallel", action=_BOOL, default=None, help="split norms and dropout over TP "
                     "(default: on when TP > 1)")
    lay.add_argument("--dropout", action=_BOOL, default=None, help="keep dropout masks (default: off)")
    lay.add_argument("--overlap-grad-reduce", action=_BOOL, default=None, help="reduce gradients during "
                     "backward (default: on)")
    lay.add_argument("--reshard-after-forward", action=_BOOL, default=None, help="FSDP: free the gathered "
                     "weights after each forward and gather again for backward, every micro-batch; off keeps "
                     "them gathered for the whole step (FSDP2 under PP), more memory, fewer gathers (default: on)")
    lay.add_argument("--fp8-gather", action=_BOOL, default=None, help="FSDP all-gathers weights in float8, "
                     "1 byte per weight (torchtitan's enable_fsdp_float8_all_gather) (default: off)")
    lay.add_argument("--fp32-gather", action=_BOOL, default=None, help="FSDP keeps and all-gathers the weights "
                     "in fp32, 4 bytes per weight, autocast casting them where used (FSDP1 without a param_dtype: "
                     "Composer's DEFAULT mixed precision) (default: off, bf16 gathers)")
    lay.add_argument("--autocast-fp32", action=_BOOL, default=None, help="weights kept in fp32 under bf16 "
                     "autocast (plain PyTorch AMP, no param_dtype): each weight cast to bf16 where it is used, the "
                     "residual stream and its norms in fp32; --fp32-gather implies it (default: off, bf16 weights)")
    lay.add_argument("--fp8-activations", action=_BOOL, default=None, help="keep what the linear layers read "
                     "for backward (norm outputs, MLA latents, dispatched tokens, MLP inputs) in FP8, 1 byte each, as "
                     "DeepSeek-V3 did; needs --dtype fp8 (default: off)")
    lay.add_argument("--fp8-saved-inputs", action=_BOOL, default=None, help="with --dtype fp8, each linear "
                     "layer keeps for backward the FP8 copy of its input it cast, 1 byte an element (Transformer "
                     "Engine: Megatron-Core, NeMo); --no-fp8-saved-inputs keeps the bf16 input and casts it again "
                     "in backward (torchao's Float8Linear: torchtitan) (default: on)")
    lay.add_argument("--loss-fp32", action=_BOOL, default=None, help="the cross-entropy upcasts the logits to "
                     "fp32 (torchtitan, Megatron, llm-foundry); --no-loss-fp32 computes it on the bf16 logits "
                     "(NeMo AutoModel's fp32_upcast: false), 4 bytes a logit held instead of 6 (default: on)")
    lay.add_argument("--loss-kernel", choices=("upcast", "megatron", "fused"), help="how the cross-entropy runs: "
                     "upcast (logits.float(), then PyTorch's cross-entropy: torchtitan, llm-foundry; 36 bytes a "
                     "logit), megatron (Megatron's unfused vocab-parallel chain in fp32, its default: 52) or fused "
                     "(one kernel on the bf16 logits: Megatron's --cross-entropy-loss-fusion, Liger's: 6) "
                     "(default: upcast)")
    lay.add_argument("--moe-imbalance", metavar="F", help="routed tokens on the busiest expert-parallel rank over "
                     "the mean, >= 1: dropless routing's imbalance, which paces the expert GEMMs and all-to-alls "
                     "(default: 1, forced balance)")
    lay.add_argument("--ep-dispatch", choices=EP_DISPATCHERS, help="expert-parallel token dispatcher: "
                     "alltoall sends a copy per token and expert (Megatron-Core's); deepep once per node over the "
                     "network and once per GPU over NVLink, in FP8 with --dtype fp8 (DeepSeek's); hybridep as "
                     "deepep but always in bf16, each dispatch first all-gathering every rank's routing map over the "
                     "EP group (NVIDIA's HybridEP, Megatron-Core's flex dispatcher) (default: alltoall)")
    lay.add_argument("--moe-launch", choices=MOE_LAUNCH, help="how the host launches a MoE layer's kernels, "
                     "which the GPU waits for when they outlast its work: grouped (each expert GEMM one kernel: "
                     f"torch._grouped_mm, DeepGEMM; {MOE_LAYER_KERNELS} kernels a layer), multi_stream (as grouped, "
                     "but each grouped GEMM issued as a cuBLASLt GEMM per local expert from C++ over four streams, "
                     f"{EFFICIENCY.expert_gemm_host_s * 1e6:.1f} us of host time each as Transformer Engine measured "
                     "it: its GroupedLinear's default, so Megatron-Core's experts), per_expert (each local "
                     "expert's GEMMs and activation launched from Python, as an eager loop over experts does: "
                     f"{MOE_EXPERT_KERNELS} more a local expert) or graphed (the layer replayed from a CUDA graph: "
                     f"none); each kernel {EFFICIENCY.host_kernel_s * 1e6:.0f} us of host time, as measured on an "
                     f"H200, and a {EFFICIENCY.kernel_s * 1e6:.0f} us gap on the device ({EFFICIENCY.graph_kernel_s * 1e6:.1f} us "
                     "graphed) (default: grouped)")
    lay.add_argument("--moe-probs", choices=MOE_PROBS, help="where the router's weights scale each routed copy, "
                     "which decides what a MoE layer keeps for backward: activation (inside the experts' activation, "
                     "no expert output kept: Megatron-Core since v0.13, NeMo AutoModel) or combine (on each expert's "
                     "output as the combine sums them, which keeps it: Megatron-Core before v0.13) "
                     "(default: activation)")
    lay.add_argument("--ep-overlap", action=_BOOL, default=None, help="hide each MoE layer's all-to-alls behind "
                     "another micro-batch's compute, its forward paired with the other's backward (Megatron-Core's "
                     "--overlap-moe-expert-parallel-comm, DeepSeek-V3's DualPipe): of what that compute covers, "
                     f"{EFFICIENCY.ep_overlap_hidden * 100:.0f}%% hidden, as Nsight measured Megatron-Core's (default: off)")
    lay.add_argument("--p2p-overlap", action=_BOOL, default=None, help="with --vpp > 1, run each model chunk's "
                     "pipeline sends and receives behind the next chunk's compute (Megatron-Core's overlap_p2p_comm, "
                     "on whenever the schedule is interleaved; torch.distributed.pipelining posts its receives ahead); "
                     "--no-p2p-overlap waits on each, as Megatron-LM of 2021-22 did; without interleaving both wait "
                     "(default: on)")
    lay.add_argument("--pp-schedule", choices=PP_SCHEDULES, default=None, help="the pipeline schedule: 1f1b "
                     "(interleaved with --vpp > 1) or zb-h1, Qi et al.'s zero-bubble schedule at 1F1B's memory, which "
                     "splits each backward into its input gradient and a weight gradient run later, into the fill and "
                     "drain; it needs --vpp 1 and at least as many micro-batches as stages (default: 1f1b)")
    lay.add_argument("--fp8-weight-cache", action=_BOOL, default=None, help="with --dtype fp8 and without "
                     "ZeRO-3, cast each weight to FP8 once per step and reuse it for the step's other micro-batches "
                     "(Transformer Engine's is_first_microbatch, which Megatron-Core sets); --no-fp8-weight-cache "
                     "casts every micro-batch (float8 without such a cache); under ZeRO-3 each micro-batch gathers "
                     "and casts the weights again either way (default: on)")
    lay.add_argument("--fp8-params", action=_BOOL, default=None, help="with --dtype fp8 and without ZeRO-3, "
                     "keep the weights themselves in FP8 (Megatron's --fp8-param-gather, on in Megatron-Bridge's and "
                     "NeMo 2's FP8 recipes): each linear weight one FP8 copy (its transpose too on a Hopper, whose FP8 "
                     "GEMMs take one layout; both directions under block scaling) and no bf16 one, gathered in FP8 "
                     "by the distributed optimizer; --no-fp8-params keeps bf16 weights with that FP8 copy beside "
                     "each; with --no-fp8-weight-cache the weights are bf16 and cast afresh (default: on)")
    lay.add_argument("--grad-reduce", choices=("bf16", "fp32"), help="dtype gradients are reduced in (all-reduce "
                     "or FSDP's reduce-scatter): fp32 moves 4 bytes a gradient, as torchtitan and Megatron-Bridge "
                     "do by default; bf16 2, as Megatron-LM does without --accumulate-allreduce-grads-in-fp32 "
                     "(default: fp32)")
    lay.add_argument("--optimizer-moments", choices=OPTIMIZER_MOMENTS, help="dtype of Adam's two moments: bf16 keeps "
                     "8 bytes of optimizer state a parameter, not 12 (the fp32 master weight stays), and its step "
                     "moves 8 bytes less, as DeepSeek-V3 trained and Megatron-Core's --use-precision-aware-optimizer "
                     "--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 run it (default: fp32)")
    lay.add_argument("--tp-overlap", choices=("none", "forward", "all"), help="overlap tensor-parallel collectives "
                     "with the GEMMs beside them: forward (PyTorch's async TP, the forward passes only) or all "
                     "(Transformer Engine's TP comm overlap; NVIDIA's recipes with it on ran about as fast as "
                     "'none' predicts, and the plan says so) (default: none)")
    lay.add_argument("--search", action="store_true", help="rank the layouts that fit and print the best few, with "
                     "why each beats the next (default: off; the best is used either way)")
    lay.add_argument("--top", metavar="N", help="layouts --search prints (default: 5)")


def layout_knobs(opts) -> dict:
    """The layout flags that were given, as ``plan`` / ``Layout`` keywords."""
    knobs = {k: whole(opts, f) for k, f in (("tp", "tp"), ("pp", "pp"), ("vpp", "vpp"), ("cp", "cp"), ("ep", "ep"),
                                            ("expert_tp", "expert-tp"), ("dp", "dp"), ("micro_batch", "micro-batch-size"),
                                            ("first_stage_layers", "first-stage-layers"),
                                            ("last_stage_layers", "last-stage-layers"), ("shard_group", "hsdp"))}
    if opts.zero_stage is not None:
        knobs["zero_stage"] = int(opts.zero_stage)
    if getattr(opts, "moe_imbalance", None) is not None:
        knobs["moe_imbalance"] = number(opts, "moe-imbalance")
    if knobs.get("shard_group"):
        if knobs.get("zero_stage", 3) != 3:
            raise PlanError("--hsdp is ZeRO-3 sharded inside a group: it needs --zero-stage 3 (or none)")
        knobs["zero_stage"] = 3
    modules = getattr(opts, "recompute_modules", None)
    if modules is not None:
        if opts.recompute not in (None, "selective"):
            raise PlanError(f"--recompute-modules chooses what selective recomputation runs again; it does not go "
                            f"with --recompute {opts.recompute}")
        knobs["recompute"] = "selective"
        knobs["recompute_modules"] = tuple(m.strip() for m in modules.split(",") if m.strip())
        if not knobs["recompute_modules"]:
            raise PlanError("--recompute-modules needs at least one module, e.g. core_attn,layernorm")
    offload = getattr(opts, "offload_modules", None)
    if offload is not None:
        knobs["offload_modules"] = () if offload.strip() == "none" else \
            tuple(m.strip() for m in offload.split(",") if m.strip())
        if offload.strip() != "none" and not knobs["offload_modules"]:
            raise PlanError("--offload-modules needs at least one module, e.g. expert_fc1, or none")
    share = getattr(opts, "recompute_share", None)
    if share is not None:
        if opts.recompute not in (None, "full"):
            raise PlanError(f"--recompute-share chooses which blocks full recomputation runs again; it does not go "
                            f"with --recompute {opts.recompute}")
        knobs["recompute"], knobs["recompute_share"] = "full", _share(share)
    for key in ("recompute", "dtype", "fp8_scaling", "kernels", "attention_kernel", "flash_attention", "sequence_parallel", "dropout",
                "overlap_grad_reduce", "tp_overlap", "reshard_after_forward", "fp8_gather", "ep_dispatch", "moe_launch", "moe_probs", "ep_overlap", "p2p_overlap",
                "fp8_weight_cache", "fp8_params", "grad_reduce", "cp_method", "fp8_activations", "fp8_saved_inputs", "fp32_gather",
                "autocast_fp32", "pp_schedule", "optimizer_moments",
                "loss_fp32", "loss_kernel"):
        knobs[key] = getattr(opts, key) if getattr(opts, key) is not None else knobs.get(key)
    return {k: v for k, v in knobs.items() if v is not None}


def _share(text: str) -> float:
    """``--recompute-share``: a number in (0, 1] or a fraction a/b."""
    top, _, bottom = text.partition("/")
    try:
        value = float(top) / (float(bottom) if bottom else 1.0)
    except (ValueError, ZeroDivisionError):
        raise PlanError(f"--recompute-share must be a number in (0, 1] or a fraction such as 1/3, got {text!r}") \
            from None
    if not 0 < value <= 1:   # NaN fails this too
        raise PlanError(f"--recompute-share must be in (0, 1] (no block at all is --recompute none), got {text!r}")
    return value


def unstated_from_args(opts) -> tuple[str, ...]:
    """``--unstated vpp,micro-batch`` -> ("vpp", "micro_batch"), each checked against what can vary."""
    text = getattr(opts, "unstated", None)
    if not text:
        return ()
    fields = tuple(f.strip().replace("-", "_") for f in text.split(",") if f.strip())
    bad = [f for f in fields if f not in SETTINGS]
    if bad:
        raise PlanError(f"--unstated: cannot vary {', '.join(bad)}; choose from "
                        + ", ".join(k.replace("_", "-") for k in SETTINGS))
    return fields
