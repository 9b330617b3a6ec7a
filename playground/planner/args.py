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
import os
import sys
from dataclasses import replace

from playground import hardware
from playground.planner.architecture import DEFAULT_SEQ_LEN, Model
from playground.planner.kernel_rates import sustained_rate
from playground.planner.errors import PlanError
from playground.planner.hf_config import read_hf_config
from playground.planner.layout import EFFICIENCY, Cluster, Efficiency
from playground.planner.presets import preset, preset_names
from playground.planner.flag_values import number, parse_number, whole
from playground.planner.layout_flags import add_layout_arguments, layout_knobs, unstated_from_args
from playground.planner.step_range import SETTINGS

__all__ = ["parse_number", "planner_parser", "glue_negative_values", "resolve_model", "layout_knobs",
           "number", "whole", "cluster_from_args", "run_command", "efficiency_from_args",
           "efficiency_line", "efficiency_note", "unstated_from_args"]

class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line on stderr, exit status 2, no usage dump
        raise PlanError(message)


_BOOL = argparse.BooleanOptionalAction


def planner_parser(prog: str = "python -m playground.capacity_plan") -> argparse.ArgumentParser:
    p = _Parser(prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter, description=(
        "Capacity plan of an LLM training run: tokens -> steps -> FLOPs -> GPU-hours -> days, memory per GPU,\n"
        "and the step time of one parallel layout (given, or found with --search).  Every figure of the\n"
        "report comes from that one layout's prediction (or from --mfu when given).  When the search has to\n"
        "take more model parallelism than memory needs because the batch does not split over the GPUs, the\n"
        "report adds the GPU counts and batches that would save GPU-hours, each searched the same way.\n"
        "Numbers take K/M/B/T (decimal) or Ki/Mi/Gi/Ti (binary) suffixes: 16M = 16e6, 16Mi = 2^24."),
        epilog=("examples:\n"
                "  %(prog)s --model llama3-8b --tokens 15T --gpus 64 --gpu H100\n"
                "  %(prog)s --hf-config path/to/config.json --tokens 2T --gpus 512 --search\n"
                "  %(prog)s --model llama3-405b --tokens 15.6T --gpus 8192 --tp 8 --pp 16 "
                "--global-batch-tokens 16Mi\n"
                "  %(prog)s --params 70B --tokens 1.4T --gpus 1024 --mfu 0.40   (no layout predicted)"))
    m = p.add_argument_group("model (a preset, a config.json, or the shape by flags; flags override)")
    m.add_argument("--model", metavar="NAME", help=f"a preset (default: none): {', '.join(preset_names())}")
    m.add_argument("--hf-config", metavar="PATH", help="a Hugging Face config.json, a folder holding one, or a repo id "
                   "(owner/name) whose config.json is in the local Hugging Face cache, read offline: Llama, Mistral, "
                   "Qwen 2/3 (their MoEs, and Qwen2-VL to Qwen3-VL's language models), Mixtral, DeepSeek-V2/V3/V3.2, Gemma 1-3, gpt-oss, Llama 4, GLM-4.5/5, "
                   "dots.llm1, ERNIE 4.5, Ling, Hunyuan, OLMo 2/3, OLMoE, Kimi K2, MiniMax-M2, Phi-3.5-MoE, DBRX, Nemotron, GPT-NeoX, "
                   "StarCoder2, MPT, Falcon, BLOOM, GPT-2, "
                   "or any config with Llama's keys (read as Llama, and said so); sliding-window layers counted over "
                   "their window, DeepSeek Sparse Attention over the keys its indexer picks; hybrids of recurrent mixers and "
                   "attention (Nemotron-H, Nemotron 3 and Granite 4.0's Mamba-2, Qwen3-Next and Qwen3.5's Gated DeltaNet) counted block by "
                   "block and priced as an average layer; other hybrids (Jamba, Falcon-H1, MiniMax-01's lightning attention, "
                   "convolutions) and latent MoEs refused (default: none)")
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
                                   f"{DEFAULT_SEQ_LEN}, or a config's max_position_embeddings when shorter)"),
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
    h.add_argument("--gpus-per-node", metavar="N", help="GPUs joined by NVLink (default: the GPU's node: 8, or a GB200 "
                   "or GB300 NVL72 rack's 72; give 64 for a job placed in blocks of 64 of a rack's GPUs, as "
                   "Megatron-Bridge's launcher places 64- and 256-GPU jobs, so that a group of 64 rides NVLink)")
    h.add_argument("--nvlink-gbs", metavar="GB/s", help="NVLink bandwidth per GPU, one direction "
                   "(default: the hardware table's)")
    h.add_argument("--network-gbs", metavar="GB/s", help="network bandwidth per GPU, one direction: a node's "
                   "NICs over its GPUs, so 400 Gb/s a node of 8 is 6.25 (default: the hardware table's, 50 GB/s on "
                   "H100, eight 400 Gb/s NICs)")
    h.add_argument("--power-limit", metavar="W", help="board power limit each GPU runs under, watts; below the "
                   f"GPU's TDP its tensor cores clock down as (limit / TDP)^{EFFICIENCY.power_exponent:g} (a Hopper's "
                   f"bf16 ones already hold {sustained_rate(hardware.gpu('H100'), EFFICIENCY):.3g} of their benchmark "
                   "rate at the TDP; default: the TDP, 700 W on H100)")
    add_layout_arguments(p)
    s = p.add_argument_group("speed, money, calendar")
    s.add_argument("--mfu", metavar="F", help="assume this model-FLOPs utilization instead of predicting "
                   "(0-1; default: predicted, or 0.40 without --gpus)")
    s.add_argument("--achieved-tflops", metavar="TF", help="assume this executed TFLOP/s per GPU instead, "
                   "recomputation included (default: predicted)")
    s.add_argument("--efficiency", metavar="FILE", help="take the efficiency constants a benchmark measured "
                   "from its results file (python -m playground.bench gemm --out FILE); the report says which "
                   "(default: the sourced constants of planner.layout.Efficiency)")
    s.add_argument("--unstated", metavar="FIELDS", help="layout settings your run does not fix, comma-separated, "
                   "from: " + ", ".join(k.replace("_", "-") for k in SETTINGS) + " (zero-stage: any of 0-3; "
                   "distributed-optimizer: DDP with or without Megatron's distributed optimizer, ZeRO 0 or 1); the "
                   "range spans every value each can take (default: none; the constants' sourced spread is always spanned)")
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
    if "seq_len" in given:
        given["seq_len_from"] = ""
    return replace(base, **given) if given else base


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
