"""Megatron-Bridge's performance summary (the 25.11 NeMo container): its DGX-H100 and DGX-B200 rows.

The table gives, per run, the GPUs, the precision, global and micro-batch, the sequence, FSDP (1: the
Megatron-FSDP, 0: DDP), TP / PP / CP / VP / EP, the gradient accumulation and the tokens/s and model
TFLOP/s per GPU.  It does not give the recompute policy, sequence parallelism, the communication
overlaps, the gradient-reduction dtype, whether a DDP run's optimizer is distributed, nor the MoE
token dispatcher: those are unstated (``Layout.today``'s values, the range over the rest).  Its MoE
runs force-balance the tokens over the experts and drop none.

The DGX-B200 rows were replayed, as read, before anything in the model was changed for them: the
first Blackwell runs of the validation.  ``FP8-MX`` (MXFP8, Blackwell's 32-element block scaling) is
taken as the model's FP8 GEMMs and casts.  The GB200 and GB300 rows are left out: when this table was read
the hardware table had no NVL72 rack (72 GPUs on one NVLink domain).  It has since (``nvl72_block`` places a job
on one as Megatron-Bridge's launcher does), and 26.06's rack runs are held out in ``published_bridge_2606``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from playground.planner.costs import Layout
from playground.planner.presets import preset
from playground.planner.published_automodel import DEEPSEEK_V3_4K, QWEN3_30B, gpt_oss
from playground.planner.published_row import MEGATRON_MOE_HOST, TE_ATTENTION, PublishedStackRun, llama31, te_experts
from playground.planner.published_zoo import QWEN3_235B

__all__ = ["MEGATRON_BRIDGE", "MEGATRON_BRIDGE_B200", "Recipe", "SELECTIVE_MLA_UP", "SELECTIVE_MLA_UP_MLP",
           "SELECTIVE_NORM_MOE_ACT", "TP_OVERLAP", "TP_OVERLAP_READ", "DSV3_B200_READ", "HYBRID_EP", "NONE_PRICED",
           "GPT_OSS_120B",
           "GPT_OSS_NOTE", "bridge_row", "nvl72_block",
           "archive_row"]

_BRIDGE = ("https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/00b7660be0254ac6f95f44164ddd0c3e9cc798ed/docs/"
           "performance-summary.md, 25.11 NeMo container, System: ")
_BRIDGE_UNSTATED = ("recompute", "sequence_parallel", "overlap_grad_reduce", "tp_overlap", "grad_reduce")
_BRIDGE_NOTE = ("{precision} on the linear layers; recompute, sequence parallelism, TP/DP communication "
                "overlap, gradient-reduction dtype not in the table (Layout.today's taken, or the recipe's "
                "where it was read and holds the table's layout: said below)")
_MOE_NOTE = ("{routing}; token dispatcher and whether its all-to-alls hide behind another micro-batch's compute "
             "not in the table (the all-to-all unhidden taken unless a recipe read says otherwise, below; DeepEP and "
             "the overlap in the range); the host's time to launch "
             "a MoE layer not measured for this stack (" + MEGATRON_MOE_HOST + ")")
_DROPLESS = "dropless, the tokens force-balanced over the experts"
_TOKEN_DROP = "token-drop (the table's 'tokendrop'): a capacity factor caps what each expert takes"
GPT_OSS_120B = gpt_oss(36, 128, "gpt-oss-120b")
GPT_OSS_NOTE = "sliding windows of 128 on every other layer; attention sinks left out"


class Recipe(NamedTuple):
    """The performance recipe behind a row (Megatron-Bridge's scripts/performance/configs at the release's
    tag), read where it holds the table's layout: the settings the table leaves out that the model prices,
    as ``Layout`` fields (the rest of the recipe's are the nominal ones), and what they are, in words.  The
    table still does not state them, so each row's range keeps spanning them."""
    tag: str
    config: str
    family: str
    read: str
    settings: dict

    def note(self) -> str:
        return (f"from Megatron-Bridge {self.tag}'s performance recipe {self.config} (scripts/performance/"
                f"configs/{self.family}/), which holds the table's layout: {self.read}; {RECIPE_COMMON_READ}")


# What every family's performance recipe sets, in every release read (v0.1.0rc4's YAML, v0.2.0's and v0.4.2's
# set_<family>_common_configs): gradients reduced in bf16 (mixed_precision and ddp grad_reduce_in_fp32 false)
RECIPE_COMMON = dict(grad_reduce="bf16")
RECIPE_COMMON_READ = "gradients reduced in bf16 (grad_reduce_in_fp32: false, as every family's recipe sets it)"
SELECTIVE_MLA_UP = dict(recompute="selective", recompute_modules=("mla_up_proj",))
SELECTIVE_MLA_UP_MLP = dict(recompute="selective", recompute_modules=("mla_up_proj", "mlp"))
SELECTIVE_NORM_MOE_ACT = dict(recompute="selective", recompute_modules=("layernorm", "moe_act"))
TP_OVERLAP = dict(tp_overlap="all")
TP_OVERLAP_READ = "TP communication overlapped with the GEMMs (tp_comm_overlap, userbuffers), no recompute"
DSV3_B200_READ = "MLA's up-projections recomputed (selective), the all-to-all dispatcher, not overlapped"
NONE_PRICED = "no recompute, the all-to-all dispatcher, not overlapped: the nominal reading"
HYBRID_EP = ("HybridEP (the flex dispatcher): a token sent once to each node it reaches, as DeepEP does, in bf16 "
             "after an all-gather of the routing maps; no recompute, the all-to-alls not overlapped")


_SYSTEMS = {"H100": "DGX-H100", "B200": "DGX-B200", "B300": "DGX-B300", "GB200": "DGX-GB200", "GB300": "DGX-GB300"}


def nvl72_block(gpus: int) -> int:
    """The GPUs of a job that share an NVLink domain when Megatron-Bridge's Slurm launcher places it on NVL72 racks:
    four GPUs to a node (a compute tray), the job's nodes kept in segments of the largest divisor of their count up to
    18, a rack's trays (``--segment``; scripts/performance/utils/executors.py, v0.5.0).  8 GPUs: one block of 2 trays;
    64 and 256: blocks of 16 trays, 64 GPUs."""
    trays = gpus // 4
    if trays <= 18:
        return gpus
    return 4 * next(segment for segment in range(18, 0, -1) if trays % segment == 0)


def bridge_row(name, gpu, model, layout, tps, tflops, note="", misfit="", source=_BRIDGE,
               stack="Megatron-Bridge", recipe: Recipe | None = None):
    """One row of a Megatron-Bridge performance table (``source``: the page and release read), with the
    settings of its ``recipe`` where one was read."""
    # FSDP = 0 says DDP, not whether the optimizer is distributed (Layout.today's ZeRO-1 taken; the range
    # over DDP without it and with it, never ZeRO-3)
    layout = replace(layout, attention_kernel=TE_ATTENTION, **({**RECIPE_COMMON, **recipe.settings} if recipe else {}),
                     **(dict(fp8_scaling="block") if "FP8-MX" in name else {}))
    if model.is_moe:
        layout = te_experts(layout)
    unstated = _BRIDGE_UNSTATED + (() if layout.zero_stage == 3 else ("distributed_optimizer",)) \
        + (("ep_dispatch", "ep_overlap") if layout.ep > 1 else ()) + (("moe_launch",) if model.is_moe else ())
    system = _SYSTEMS[gpu]
    precision = ("BF16" if layout.dtype == "bf16" else "FP8-MX (MXFP8 block scaling)" if "FP8-MX" in name
                 else "FP8-CS (current scaling)")
    routing = _TOKEN_DROP if "tokendrop" in name else _DROPLESS
    notes = [_BRIDGE_NOTE.format(precision=precision)] + ([_MOE_NOTE.format(routing=routing)] if model.is_moe else []) \
        + ([note] if note else []) + ([recipe.note()] if recipe else [])
    return PublishedStackRun(name, stack + ("" if gpu == "H100" else f", {system}"), source + system,
                             gpu, model, layout, unstated, tokens_per_s_per_gpu=tps, tflops_per_gpu=tflops,
                             flop_count="model", note="; ".join(notes), memory_misfit=misfit,
                             cite="nvidia2025megatronbridge",
                             gpus_per_node=nvl72_block(layout.gpus) if gpu.startswith("GB") else None)


_ARCHIVE = ("https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/067f987df03b8355b03192d88d70f1709fedf51a/docs/"
            "performance-summary-archive.md, {release} NeMo container, System: ")


def archive_row(release: str, held_out: bool = True):
    """A row builder for one release's table on the archive page: each name ends in the release, and the
    stack says whether the table is held out (read last, replayed before any change)."""
    source = _ARCHIVE.format(release=release)
    stack = f"Megatron-Bridge {release}" + (" (held out)" if held_out else "")

    def row(name, gpu, model, layout, tps, tflops, note="", misfit="", recipe=None):
        return bridge_row(f"{name}, {release}", gpu, model, layout, tps, tflops, note, misfit, source, stack, recipe)
    return row


MEGATRON_BRIDGE = (
    bridge_row("LLAMA3_8B, 8 H100, FSDP, FP8-CS", "H100", preset("llama3-8b"),
               Layout.today(1, 1, 8, micro_batch=1, global_batch=128, zero_stage=3, dtype="fp8"), 14451, 744,
               "FSDP = 1: Megatron-FSDP over the 8 GPUs"),
    bridge_row("LLAMA3_70B, 64 H100, TP 4 PP 8 VP 5, FP8-CS", "H100", preset("llama3-70b"),
               Layout.today(4, 8, 2, micro_batch=1, global_batch=128, vpp=5, dtype="fp8"), 1602, 719,
               recipe=Recipe("v0.2.0", "LLAMA3_70B_H100_FP8_CS_BASE_CONFIG", "llama3", TP_OVERLAP_READ, TP_OVERLAP)),
    bridge_row("LLAMA3.1_405B, 1024 H100, TP 8 PP 8 CP 2 VP 8, FP8-CS", "H100", llama31("405b"),
               Layout.today(8, 8, 8, cp=2, micro_batch=1, global_batch=512, vpp=8, dtype="fp8"), 292, 737,
               recipe=Recipe("v0.2.0", "LLAMA31_405B_H100_FP8_CS_BASE_CONFIG", "llama31", TP_OVERLAP_READ,
                             TP_OVERLAP)),
    bridge_row("Qwen3_30B_a3B, 16 H100, PP 2 VP 24 EP 8, FP8-CS", "H100", QWEN3_30B,
               Layout.today(1, 2, 8, ep=8, micro_batch=2, global_batch=512, vpp=24, dtype="fp8"), 5275, 121,
               "model shape from the Megatron MoE Model Zoo's Qwen3-30B-A3B.yaml"),
)

MEGATRON_BRIDGE_B200 = (
    bridge_row("LLAMA3_8B, 8 B200, FP8-CS", "B200", preset("llama3-8b"),
               Layout.today(1, 1, 8, micro_batch=2, global_batch=128, dtype="fp8"), 30624, 1576,
               "the FP8-CS figure (FP8-MX, in parentheses, 29,521)",
               recipe=Recipe("v0.2.0", "LLAMA3_8B_B200_FP8_CS_BASE_CONFIG", "llama3", "no recompute; the whole "
                             "iteration CUDA-graphed (a dense model's launches are not priced)", {})),
    bridge_row("LLAMA3.1_405B, 128 B200, TP 4 PP 8 CP 2 VP 8, FP8-CS", "B200", llama31("405b"),
               Layout.today(4, 8, 2, cp=2, micro_batch=1, global_batch=64, vpp=8, dtype="fp8"), 661, 1667,
               "the FP8-CS figure (FP8-MX, in parentheses, 624)",
               recipe=Recipe("v0.2.0", "LLAMA31_405B_B200_FP8_CS_BASE_CONFIG", "llama31", TP_OVERLAP_READ,
                             TP_OVERLAP)),
    bridge_row("DeepSeekV3, 256 B200, PP 16 EP 8, FP8-MX", "B200", DEEPSEEK_V3_4K,
               Layout.today(1, 16, 16, ep=8, micro_batch=1, global_batch=2048, dtype="fp8"), 2139, 557,
               "61 layers on 16 stages as Megatron-Core places them (the embedding and the loss each a layer)",
               recipe=Recipe("v0.2.0", "DEEPSEEK_V3_B200_FP8_MX_BASE_CONFIG", "deepseek", DSV3_B200_READ,
                             SELECTIVE_MLA_UP)),
    bridge_row("GPT OSS 120B, 64 B200, EP 8, BF16", "B200", GPT_OSS_120B,
               Layout.today(1, 1, 64, ep=8, micro_batch=4, global_batch=512), 8213, 223,
               GPT_OSS_NOTE + "; the v0.2.0 recipe (GPT_OSS_120B_B200_BF16_BASE_CONFIG) is EP 64, not the table's "
               "EP 8, and names layernorm and moe_act for recompute without the selective granularity, so "
               "recomputes nothing (v0.2.1 turned them on); taken as read, no recompute"),
    bridge_row("Qwen3_30B_a3B, 8 B200, EP 8, FP8-MX", "B200", QWEN3_30B,
               Layout.today(1, 1, 8, ep=8, micro_batch=1, global_batch=512, dtype="fp8"), 9299, 214,
               recipe=Recipe("v0.2.0", "QWEN3_30B_A3B_B200_FP8_MX_BASE_CONFIG", "qwen3", NONE_PRICED + "; the "
                             "router and permutation CUDA-graphed (not the experts)", {})),
    bridge_row("Qwen3_235B_a22B, 64 B200, PP 8 VP 2 EP 8, FP8-MX", "B200", QWEN3_235B,
               Layout.today(1, 8, 8, ep=8, micro_batch=1, global_batch=1024, vpp=2, dtype="fp8"), 3269, 484),
)
