"""Megatron-Bridge's performance summary of the 26.06 NeMo container: its GB300, GB200, B300 and H100 rows, held out.

The archive page (``docs/performance-summary-archive.md``) keeps each release's table.  The 26.06 one gives, per
run, the system, the GPUs, the precision, global and micro-batch, the sequence, TP / PP / CP / VP / EP and the
tokens/s and model TFLOP/s per GPU; like the others, not the recompute policy, sequence parallelism, the overlaps,
the gradient-reduction dtype, whether the optimizer is distributed, the token dispatcher nor CUDA graphs
(``Layout.today``'s values, the range over the rest), and its MoE runs force-balance the tokens and drop none.
26.06 is Megatron-Bridge v0.5.0 (its docs/versions1.json names "0.5.0 · 26.06").  ``FP8`` is read as current
scaling (the recipes' ``fp8cs``), ``MXFP8`` as the model's FP8 under block scaling.  An NVL72 rack's GPUs are
placed as Megatron-Bridge's launcher places them, four to a node and the nodes in segments of up to a rack
(``published_bridge.nvl72_block``: 64 GPUs to an NVLink domain in the 64- and 256-GPU runs).  Left out: the
NVFP4 rows (no FP4 in the model), Kimi K2 (Muon, not Adam) and the Nemotron 3 runs (hybrid Mamba layers, no
``Model`` for them).

These eighteen rows were read after everything else in the validation, once the hardware table had the GB200,
B300 and GB300 (their datasheets' figures, nothing fitted), and replayed before anything in the model was changed
for them: the second held-out check.  First replay, predicted / published tokens/s (``published_stacks.
HELD_OUT_FIRST_REPLAY`` keeps each), every setting the table omits at ``Layout.today``'s (no recipe read): Llama 3.1
405B 0.81 and 0.96 on GB300s, 1.01 and 1.06 on GB200s, 0.83 on H100s; DeepSeek-V3 0.71 and 0.71 on GB300s, 0.83 on
GB200s, 1.14 on B300s; gpt-oss 0.88 (GB300), 0.92 (GB200), 1.35 (B300); Qwen3-30B-A3B 0.75 (GB300), 0.79 (GB200), 0.80
(B300), 0.80 (H100); Qwen3-235B-A22B 0.71 (GB300), 0.73 (GB200).  Thirteen of eighteen within +-25%, nine within
+-20%, all eighteen inside their ranges; fifteen judged to fit as read, the other three (Llama 3.1 405B on GB200s,
DeepSeek-V3 on B300s) once the recompute the table omits may take any value.  Most runs of this release ran faster
than the nominal reading predicts, the other way from the B200 runs of 26.04.01; what their recipes set (CUDA graphs,
the dispatcher, the recompute) is what the table leaves unsaid.

Then the v0.5.0 recipes were read (each row's ``Recipe``; every preset holds its row's layout): the MXFP8 MoE runs on
GB200s and GB300s, and Qwen3-30B-A3B on B300s, run HybridEP with their all-to-alls overlapped and the whole iteration
replayed from one CUDA graph (``moe_launch="graphed"``), DeepSeek-V3 on GB200s and B300s recomputes MLA's
up-projections, the other two B300 runs graph the attention, router and permutation but launch their experts from
the host, and the dense runs overlap their TP communication.  Read so, the ten graphed MoE runs land at 0.84-1.04,
the dense ones at 0.92-1.19, and the misses are the MoE runs whose experts the host launches: DeepSeek-V3 (1.27) and
gpt-oss (1.48) on B300s, Qwen3-30B-A3B on H100s (1.25).  Fifteen of eighteen within +-25% (and +-20%), all inside
their ranges, sixteen judged to fit as read: Llama 3.1 405B on GB200s at PP 16 with nothing recomputed, as its
recipe runs it, was counted past a GB200's memory.  The memory model then kept each linear layer's saved input in
bf16; Transformer Engine keeps the FP8 copy it casts for the weight gradient (``Layout.fp8_saved_inputs``, the
default under FP8 since), and all eighteen fit as read, that run tightly.  Counting since what each interleaved
stage holds in flight as Megatron-Core's schedule does (stage 1 two chunks fewer than stage 0) and the weights its
FP8 recipes keep in FP8 (``Layout.fp8_params``: 1 byte each on a Blackwell under tensor scaling, no bf16 copy),
both PP 16 runs fit tightly; with bf16 weights the VP 4 one would not.
"""

from __future__ import annotations

from playground.planner.costs import Layout
from playground.planner.published_automodel import DEEPSEEK_V3_4K, QWEN3_30B
from playground.planner.published_bridge import (GPT_OSS_120B, GPT_OSS_NOTE, HYBRID_EP, SELECTIVE_MLA_UP, TP_OVERLAP,
                                                 TP_OVERLAP_READ, Recipe, archive_row)
from playground.planner.published_row import llama31
from playground.planner.published_zoo import QWEN3_235B

__all__ = ["MEGATRON_BRIDGE_2606"]

_row = archive_row("26.06")
_FP8 = "the table's FP8: current scaling, as the recipes name it (fp8cs)"
_LLAMA = llama31("405b")
# What the 26.06 recipes of the MXFP8 MoE runs on GB200s and GB300s (and Qwen3-30B-A3B on B300s) set: HybridEP with
# the all-to-alls overlapped (moe_a2a_overlap, with delay_wgrad_compute), the whole iteration replayed from one CUDA
# graph (cuda_graph_impl "full_iteration", made sync-free by padding each expert's rows: nothing left for the host to
# launch), the experts' MLP fused (cutedsl_fused_grouped_mlp), and FP8 attention (fp8_dot_product_attention, which
# the model does not price: its attention stays bf16)
_GRAPHED = dict(ep_dispatch="hybridep", ep_overlap=True, moe_launch="graphed")
_GRAPHED_READ = ("HybridEP with the all-to-alls overlapped (moe_a2a_overlap, delay_wgrad_compute), the whole iteration "
                 "CUDA-graphed (full_iteration: nothing launched from the host), the experts' MLP fused "
                 "(cutedsl_fused_grouped_mlp), FP8 attention (not priced: the model's attention stays bf16)")
_PARTIAL_READ = ("HybridEP, not overlapped; the attention, router and permutation CUDA-graphed (not the experts: "
                 "their host launches still priced)")


def _recipe(family, config, read, settings):
    """The 26.06 recipes: Megatron-Bridge v0.5.0 (the container's release), the config variant that holds the table's
    layout (V2 where one exists, as the scripts default to; Qwen3-30B-A3B's V1)."""
    return Recipe("v0.5.0", config, family, read, settings)


# Llama 3.1 405B at PP 16 on GB200s with no recompute, as its recipe runs it, was first counted past a GB200's 186 GB:
# the memory model kept every linear layer's input in bf16.  Transformer Engine keeps the FP8 copy it cast
# (``Layout.fp8_saved_inputs``, read in its linear.py after this replay), and the runs fit, tightly, the VP 4 one
# because its recipe keeps the weights in FP8 (``Layout.fp8_params``, Megatron-Bridge's fp8_param_gather).


def _llama(gpu, gpus, tp, pp, cp, vp, mx, tps, tflops):
    name = f"LLAMA3.1_405B, {gpus} {gpu}, TP {tp} PP {pp}" + (f" CP {cp}" if cp > 1 else "") + f" VP {vp}, " \
        + ("FP8-MX" if mx else "FP8-CS")
    layout = Layout.today(tp, pp, gpus // (tp * pp * cp), cp=cp, micro_batch=1, global_batch=1536, vpp=vp, dtype="fp8")
    config = f"LLAMA31_405B_PRETRAIN_CONFIG_{gpu}_FP8_{'MX' if mx else 'CS'}_V2"
    return _row(name, gpu, _LLAMA, layout, tps, tflops, "" if mx else _FP8,
                recipe=_recipe("llama", config, TP_OVERLAP_READ, TP_OVERLAP))


def _moe(label, model, gpu, gpus, gbs, mbs, pp, vp, ep, tps, tflops, config, read=_GRAPHED_READ, settings=None,
         mx=True, note="", suffix=""):
    name = f"{label}, {gpus} {gpu}, " + (f"PP {pp} " if pp > 1 else "") + (f"VP {vp} " if vp > 1 else "") \
        + f"EP {ep}, " + ("FP8-MX" if mx else "FP8-CS") + suffix
    layout = Layout.today(1, pp, gpus // pp, ep=ep, micro_batch=mbs, global_batch=gbs, vpp=vp, dtype="fp8")
    family = {"DeepSeekV3": "deepseek", "GPT OSS 120B": "gpt_oss"}.get(label, "qwen")
    return _row(name, gpu, model, layout, tps, tflops, "; ".join(n for n in (note, "" if mx else _FP8) if n),
                recipe=_recipe(family, config, read, _GRAPHED if settings is None else settings))


MEGATRON_BRIDGE_2606 = (
    _llama("GB300", 256, 4, 8, 1, 4, False, 1048, 2646),
    _llama("GB300", 256, 2, 8, 2, 4, True, 952, 2403),
    _llama("GB200", 256, 4, 16, 1, 4, False, 843, 2129),
    _llama("GB200", 256, 4, 16, 1, 8, True, 783, 1976),
    _llama("H100", 1024, 8, 8, 2, 8, False, 326, 822),
    _moe("DeepSeekV3", DEEPSEEK_V3_4K, "GB300", 256, 4096, 1, 2, 8, 32, 6338, 1648,
         "DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_FP8_MX_V2"),
    _moe("DeepSeekV3", DEEPSEEK_V3_4K, "GB300", 256, 15360, 1, 2, 8, 32, 6422, 1670,
         "DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_FP8_MX_GBS15360", suffix=", GBS 15360"),
    _moe("DeepSeekV3", DEEPSEEK_V3_4K, "GB200", 256, 4096, 1, 4, 4, 64, 4969, 1292,
         "DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_FP8_MX_V2", "MLA's up-projections recomputed (selective); " + _GRAPHED_READ,
         dict(_GRAPHED, **SELECTIVE_MLA_UP)),
    _moe("DeepSeekV3", DEEPSEEK_V3_4K, "B300", 256, 4096, 2, 8, 1, 8, 3541, 920,
         "DEEPSEEK_V3_PRETRAIN_CONFIG_B300_FP8_MX_V2", "MLA's up-projections recomputed (selective); " + _PARTIAL_READ,
         dict(SELECTIVE_MLA_UP, ep_dispatch="hybridep")),
    _moe("GPT OSS 120B", GPT_OSS_120B, "GB300", 64, 1280, 4, 1, 1, 16, 33166, 1081,
         "GPT_OSS_120B_PRETRAIN_CONFIG_GB300_FP8_MX_V2", note=GPT_OSS_NOTE),
    _moe("GPT OSS 120B", GPT_OSS_120B, "GB200", 64, 1280, 4, 1, 1, 64, 28947, 943,
         "GPT_OSS_120B_PRETRAIN_CONFIG_GB200_FP8_MX_V2", note=GPT_OSS_NOTE),
    _moe("GPT OSS 120B", GPT_OSS_120B, "B300", 64, 1280, 4, 1, 1, 8, 18534, 604,
         "GPT_OSS_120B_PRETRAIN_CONFIG_B300_FP8_MX_V2", "no recompute; " + _PARTIAL_READ, dict(ep_dispatch="hybridep"),
         note=GPT_OSS_NOTE),
    _moe("Qwen3_30B_a3B", QWEN3_30B, "GB300", 8, 512, 8, 1, 1, 8, 45275, 1041, "QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1"),
    _moe("Qwen3_30B_a3B", QWEN3_30B, "GB200", 8, 512, 4, 1, 1, 8, 40706, 936, "QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1"),
    _moe("Qwen3_30B_a3B", QWEN3_30B, "B300", 8, 512, 8, 1, 1, 8, 40769, 938, "QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1"),
    _moe("Qwen3_30B_a3B", QWEN3_30B, "H100", 16, 1024, 1, 1, 1, 16, 8826, 203, "QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1",
         HYBRID_EP, dict(ep_dispatch="hybridep"), mx=False),
    _moe("Qwen3_235B_a22B", QWEN3_235B, "GB300", 256, 8192, 2, 4, 12, 32, 9015, 1335,
         "QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_MX_V2"),
    _moe("Qwen3_235B_a22B", QWEN3_235B, "GB200", 256, 8192, 1, 8, 3, 32, 7376, 1092,
         "QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_MX_V2"),
)
