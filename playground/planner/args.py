"""The planner's flags, shared by its two commands (``capacity_plan`` and ``step_time``).

Every option has a help line with its unit and default.  Numbers accept K/M/B/T (decimal) and
Ki/Mi/Gi/Ti (binary) suffixes (``parse_number``: ``16M`` = 16e6, ``16Mi`` = 2^24).  A parse
error raises ``PlanError`` instead of printing argparse's usage dump, so each command says it in
one line and exits with status 2.  ``resolve_model`` turns ``--model`` / ``--hf-config`` / the
architecture flags into one ``Model`` (flags override what a preset or config says);
``layout_knobs`` collects the layout flags, leaving out what was not given so that today's
defaults (``Layout.today``) apply.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import replace

from playground import hardware
from playground.planner.architecture import Model
from playground.planner.capacity import DEFAULT_SEQ_LEN
from playground.planner.errors import PlanError
from playground.planner.hf_config import read_hf_config
from playground.planner.layout import Cluster, Efficiency
from playground.planner.presets import preset, preset_names
from playground.planner.step_range import SETTINGS

__all__ = ["parse_number", "planner_parser", "glue_negative_values", "resolve_model", "layout_knobs",
           "number", "whole", "cluster_from_args", "run_command", "efficiency_from_args",
           "efficiency_line", "efficiency_note", "unstated_from_args"]

_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15,
           "ki": 2 ** 10, "mi": 2 ** 20, "gi": 2 ** 30, "ti": 2 ** 40}


def parse_number(text: str) -> float:
    """'175e9', '175B', '1.4T', '4M' (4e6), '16Mi' (2^24) -> float; anything else -> PlanError."""
    t = str(text).strip()
    scale = 1.0
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if t.lower().endswith(suffix) and t[:-len(suffix)][-1:].replace(".", "0").isdigit():
            scale, t = _SUFFIX[suffix], t[:-len(suffix)]
            break
    try:
        value = float(t) * scale
    except ValueError:
        raise PlanError(f"not a number: {text!r}") from None
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line on stderr, exit status 2, no usage dump
        raise PlanError(message)


_BOOL = argparse.BooleanOptionalAction


def planner_parser(prog: str = "python -m playground.capacity_plan") -> argparse.ArgumentParser:
    p = _Parser(prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter, description=(
        "Capacity plan of an LLM training run: tokens -> steps -> FLOPs -> GPU-hours -> days, memory per GPU,\n"
        "and the step time of one parallel layout (given, or found with --search).  Every figure of the\n"
        "report comes from that one layout's prediction (or from --mfu when given).\n"
        "Numbers take K/M/B/T (decimal) or Ki/Mi/Gi/Ti (binary) suffixes: 16M = 16e6, 16Mi = 2^24."),
        epilog=("examples:\n"
                "  %(prog)s --model llama3-8b --tokens 15T --gpus 64 --gpu H100\n"
                "  %(prog)s --hf-config path/to/config.json --tokens 2T --gpus 512 --search\n"
                "  %(prog)s --model llama3-405b --tokens 15.6T --gpus 8192 --tp 8 --pp 16 "
                "--global-batch-tokens 16Mi\n"
                "  %(prog)s --params 70B --tokens 1.4T --gpus 1024 --mfu 0.40   (no layout predicted)"))
    m = p.add_argument_group("model (a preset, a config.json, or the shape by flags; flags override)")
    m.add_argument("--model", metavar="NAME", help=f"a preset (default: none): {', '.join(preset_names())}")
    m.add_argument("--hf-config", metavar="PATH", help="a Hugging Face config.json, or a folder holding one, "
                   "read offline: Llama, Mistral, Qwen 2/3 (and their MoEs), Mixtral, DeepSeek-V2/V3, Gemma 1-3, "
                   "gpt-oss, Llama 4, GLM-4.5, GPT-2, or any config with Llama's keys; sliding-window layers "
                   "counted over their window (default: none)")
    m.add_argument("--params", metavar="N", help="total parameters (default: counted from the shape; alone, "
                   "a Llama-3-style shape is inferred)")
    m.add_argument("--active-params", metavar="N", help="parameters one token passes through (default: counted; "
                   "= --params for a dense model)")
    given = "(default: the preset's or config's)"
    for flag, text in (("layers", f"transformer layers {given}"), ("hidden", f"hidden size h {given}"),
                       ("heads", f"attention heads {given}"), ("kv-heads", "key/value heads (GQA; default: = --heads)"),
                       ("head-dim", "size of one head (default: hidden / heads)"),
                       ("ffn", "MLP width (default: 4 h)"),
                       ("vocab", "vocabulary (default: 128256 when the shape is inferred, 51200 for a GPT by flags)"),
                       ("seq-len", f"training sequence length in tokens (default: the preset's, else "
                                   f"{DEFAULT_SEQ_LEN})"),
                       ("experts", "routed experts per MoE layer (default: 0, dense)"),
                       ("top-k", f"experts each token is routed to {given}"),
                       ("moe-ffn", "one routed expert's MLP width (default: --ffn)"),
                       ("shared-experts", "shared experts per MoE layer, each of --moe-ffn (default: 0)")):
        m.add_argument(f"--{flag}", metavar="N", help=text)
    m.add_argument("--gated-mlp", action=_BOOL, default=None, help="SwiGLU MLP, three matrices (default: as the "
                   "preset or config says; off for a GPT by flags)")
    d = p.add_argument_group("data")
    d.add_argument("--tokens", metavar="N", help="training tokens (no default: required unless --compute)")
    d.add_argument("--compute", metavar="FLOPS", help="a FLOP budget instead of --params/--tokens, split "
                   "Chinchilla-optimally at 20 tokens per parameter (default: none)")
    d.add_argument("--global-batch", metavar="SEQS", help="sequences per optimizer step "
                   "(default: from --global-batch-tokens)")
    d.add_argument("--global-batch-tokens", metavar="N", help="tokens per optimizer step, rounded to whole "
                   "sequences (default: 4Mi = 2^22)")
    h = p.add_argument_group("hardware")
    h.add_argument("--gpu", default="H100", help=f"GPU type (default: H100): {', '.join(hardware.gpu_names())}")
    h.add_argument("--gpus", metavar="N", help="GPUs in the job, needed for days, DP and a step-time "
                   "prediction (default: none)")
    h.add_argument("--gpus-per-node", metavar="N", help="GPUs joined by NVLink (default: the GPU's node, 8)")
    h.add_argument("--nvlink-gbs", metavar="GB/s", help="NVLink bandwidth per GPU, one direction "
                   "(default: the hardware table's)")
    h.add_argument("--network-gbs", metavar="GB/s", help="network bandwidth per GPU, one direction "
                   "(default: the hardware table's, 50 GB/s on H100)")
    h.add_argument("--power-limit", metavar="W", help="board power limit each GPU runs under, watts; below the "
                   "GPU's TDP its tensor cores clock down as (limit / TDP)^0.5 (default: the TDP, 700 W on H100)")
    lay = p.add_argument_group("layout (not given: --gpus alone searches for the fastest layout that fits)")
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
    lay.add_argument("--dtype", choices=("bf16", "fp8"), help="GEMM precision; fp8 casts every GEMM operand, "
                     "the attention core and the logits stay bf16 (default: bf16)")
    lay.add_argument("--kernels", choices=("fused", "eager"), help="fused: Megatron/Transformer Engine or "
                     "torch.compile kernels; eager: PyTorch op by op (RMSNorm, RoPE, SwiGLU unfused) "
                     "(default: fused)")
    lay.add_argument("--flash-attention", action=_BOOL, default=None, help="fused attention, no s^2 scores "
                     "(default: on)")
    lay.add_argument("--attention-kernel", choices=("fa3", "fa2", "fa1"), help="fused attention kernel: on Hopper "
                     "and later fa3 (FlashAttention-3, cuDNN via Transformer Engine, ~55%% of peak) or fa2 (PyTorch "
                     "SDPA's FlashAttention-2, ~32%%), before Hopper both are FlashAttention-2 (~55%%); fa1 is "
                     "FlashAttention-1 or its Triton port, 2022-23's (~33%% on A100) (default: fa3)")
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
    lay.add_argument("--fp8-activations", action=_BOOL, default=None, help="keep what the linear layers read "
                     "for backward (norm outputs, MLA latents, dispatched tokens, MLP inputs) in FP8, 1 byte each, as "
                     "DeepSeek-V3 did; needs --dtype fp8 (default: off)")
    lay.add_argument("--moe-imbalance", metavar="F", help="routed tokens on the busiest expert-parallel rank over "
                     "the mean, >= 1: dropless routing's imbalance, which paces the expert GEMMs and all-to-alls "
                     "(default: 1, forced balance)")
    lay.add_argument("--ep-dispatch", choices=("alltoall", "deepep"), help="expert-parallel token dispatcher: "
                     "alltoall sends a copy per token and expert (Megatron-Core's); deepep once per node over the "
                     "network and once per GPU over NVLink, in FP8 with --dtype fp8 (DeepSeek's) (default: alltoall)")
    lay.add_argument("--ep-overlap", action=_BOOL, default=None, help="hide each MoE layer's all-to-alls behind "
                     "another micro-batch's compute, its forward paired with the other's backward (Megatron-Core's "
                     "--overlap-moe-expert-parallel-comm, DeepSeek-V3's DualPipe) (default: off)")
    lay.add_argument("--grad-reduce", choices=("bf16", "fp32"), help="dtype gradients are reduced in (all-reduce "
                     "or FSDP's reduce-scatter): fp32 moves 4 bytes a gradient, as torchtitan and Megatron-Bridge "
                     "do by default; bf16 2, as Megatron-LM does without --accumulate-allreduce-grads-in-fp32 "
                     "(default: fp32)")
    lay.add_argument("--tp-overlap", choices=("none", "forward", "all"), help="overlap tensor-parallel collectives "
                     "with the GEMMs beside them: forward (PyTorch's async TP, the forward passes only) or all "
                     "(Transformer Engine's TP comm overlap) (default: none)")
    lay.add_argument("--search", action="store_true", help="rank the layouts that fit and print the best few, with "
                     "why each beats the next (default: off; the best is used either way)")
    lay.add_argument("--top", metavar="N", help="layouts --search prints (default: 5)")
    s = p.add_argument_group("speed, money, calendar")
    s.add_argument("--mfu", metavar="F", help="assume this model-FLOPs utilization instead of predicting "
                   "(0-1; default: predicted, or 0.40 without --gpus)")
    s.add_argument("--achieved-tflops", metavar="TF", help="assume this executed TFLOP/s per GPU instead, "
                   "recomputation included (default: predicted)")
    s.add_argument("--efficiency", metavar="FILE", help="take the efficiency constants a benchmark measured "
                   "from its results file (python -m playground.bench gemm --out FILE); the report says which "
                   "(default: the sourced constants of planner.layout.Efficiency)")
    s.add_argument("--unstated", metavar="FIELDS", help="layout settings your run does not fix, comma-separated, "
                   "from: vpp, recompute, micro-batch, overlap-grad-reduce, sequence-parallel, tp-overlap, cp-method, moe-imbalance, "
                   "ep-dispatch, ep-overlap, grad-reduce, zero-stage, shard-group; the "
                   "range "
                   "spans every value each can take (default: none; the constants' sourced spread is always spanned)")
    s.add_argument("--price-per-gpu-hour", metavar="USD", help="price of one GPU-hour (default: no cost)")
    s.add_argument("--max-days", metavar="DAYS", help="calendar to warn against (default: 365)")
    f = p.add_argument_group("failures (optional: expected interruptions, checkpoint interval, goodput)")
    f.add_argument("--gpu-mtbf-hours", metavar="HOURS", help="mean time between failures of ONE GPU with its "
                   "share of host, network and software; the job's is this / GPUs (default: none; Llama 3 405B's "
                   "run implies about 51,000)")
    f.add_argument("--checkpoint-gbs", metavar="GB/s", help="write bandwidth the checkpoint storage sustains "
                   "for the whole job (default: 1 GB/s per GPU, at most 2,000: Llama 3's storage)")
    f.add_argument("--restart-minutes", metavar="MIN", help="time from a failure to training again "
                   "(default: 10)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the report "
                   "(default: the text report; the same numbers)")
    return p


def number(opts, name: str, positive: bool = True) -> float | None:
    """``--name`` parsed as a finite number (``7B``, ``1e3``, ``16Mi``), or None when not given."""
    raw = getattr(opts, name.replace("-", "_"), None)
    if raw is None:
        return None
    try:
        value = parse_number(raw)
    except PlanError as e:
        raise PlanError(f"--{name}: {e}") from None
    if not math.isfinite(value) or (positive and value <= 0):
        raise PlanError(f"--{name} must be a positive finite number, got {raw!r}")
    return value


def whole(opts, name: str) -> int | None:
    value = number(opts, name)
    if value is not None and value != int(value):
        raise PlanError(f"--{name} must be a whole number, got {getattr(opts, name.replace('-', '_'))!r}")
    return None if value is None else int(value)


def resolve_model(opts) -> Model | None:
    """The ``Model`` the flags describe, or None when only ``--params`` is given (the plan infers one)."""
    if opts.model and opts.hf_config:
        raise PlanError("give --model or --hf-config, not both")
    base = preset(opts.model) if opts.model else read_hf_config(opts.hf_config) if opts.hf_config else None
    shape = {k: whole(opts, k.replace("_", "-")) for k in ("layers", "hidden", "heads", "kv_heads", "head_dim",
                                                           "ffn", "vocab", "seq_len", "experts", "top_k",
                                                           "moe_ffn", "shared_experts")}
    if opts.gated_mlp is not None:
        shape["gated_mlp"] = opts.gated_mlp
    given = {k: v for k, v in shape.items() if v is not None}
    if base is None:
        core = [shape[k] for k in ("layers", "hidden", "heads")]
        if all(v is None for v in core):
            extra = sorted(set(given) - {"seq_len", "vocab"})
            if extra:
                raise PlanError(f"--{extra[0].replace('_', '-')} needs the shape: give --layers, --hidden and "
                                f"--heads (or --model / --hf-config)")
            return None
        if any(v is None for v in core):
            raise PlanError("give all of --layers, --hidden, --heads, or none of them")
        return Model(**{"seq_len": DEFAULT_SEQ_LEN, **given})
    if "experts" in given and "moe_ffn" not in given and not base.moe_ffn:
        given["moe_ffn"] = base.ffn_width
    return replace(base, **given) if given else base


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
    for key in ("recompute", "dtype", "kernels", "attention_kernel", "flash_attention", "sequence_parallel", "dropout",
                "overlap_grad_reduce", "tp_overlap", "reshard_after_forward", "fp8_gather", "ep_dispatch", "ep_overlap",
                "grad_reduce", "cp_method", "fp8_activations"):
        knobs[key] = getattr(opts, key) if getattr(opts, key) is not None else knobs.get(key)
    return {k: v for k, v in knobs.items() if v is not None}


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


def cluster_from_args(opts) -> Cluster:
    gbs = lambda k: None if number(opts, k) is None else number(opts, k) * 1e9  # noqa: E731
    return Cluster.of(opts.gpu, whole(opts, "gpus-per-node"), gbs("nvlink-gbs"), gbs("network-gbs"),
                      number(opts, "power-limit"))


def efficiency_from_args(opts) -> Efficiency | None:
    """The ``Efficiency`` of ``--efficiency FILE`` (measured constants from a results file), or None."""
    path = getattr(opts, "efficiency", None)
    return None if path is None else Efficiency.from_results(path)


def efficiency_note(eff: Efficiency) -> dict:
    """What a report says of measured constants: the file and each value taken from it."""
    return {"path": eff.sources["measured_from"]["path"],
            "constants": {k: getattr(eff, k) for k in eff.measured}}


def efficiency_line(note: dict) -> str:
    """The one report line naming the constants that came from ``--efficiency FILE``."""
    taken = ", ".join(f"{k} {v:.4g}" for k, v in note["constants"].items())
    return f"efficiency {taken} measured, from {note['path']}; the other constants: the defaults"


def run_command(name: str, argv, compute, show) -> int:
    """Parse, compute, print; one line on stderr and exit 2 for bad input; quiet on a closed pipe."""
    try:
        argv = glue_negative_values(list(sys.argv[1:] if argv is None else argv))
        opts = planner_parser(f"python -m playground.{name}").parse_args(argv)
        result = compute(opts)
    except PlanError as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return 2
    try:
        print(json.dumps(result, indent=2, default=str) if opts.json else show(result, opts))
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
