"""NVIDIA's published NeMo pre-training benchmarks on H100s: the 24.07 FP8 table, the 24.03 long-sequence
table and the DGX Cloud recipes.

``NEMO_2407``: NeMo's ``docs/source/performance/performance_summary.md`` table gives, per run, the
GPUs, global and micro-batch, sequence, TP / PP / CP / VP and the tokens/s per GPU, FP8 throughout.  It does not
give the recompute policy, sequence parallelism, the communication overlaps or the gradient
reduction dtype: those are left unstated (``Layout.today``'s values, the range over the rest).
The GPT-3 shapes are NeMo's ``gpt3`` configs (5B: 24 layers of 4,096; 20B: 44 of 6,144; 175B: 96
of 12,288; GELU MLPs of 4h, learned positions, GPT-2's vocabulary padded to 50,304).  Nemotron-4 340B's
is its released ``model_config.yaml`` (96 layers of 18,432, 96 heads in 8 query groups, a squared-ReLU
MLP of 73,728, RoPE, LayerNorm1p, no biases) with the technical report's untied 256,000-token
vocabulary (NVIDIA 2024, arXiv:2406.11704, Sec. 2); the 8B and 22B Nemotrons are left out, their
shapes not in the stored sources.

``NEMO_2403_LONG`` is NeMo's long-sequence table: LLAMA2-7B in FP8 on DGX-H100s (the NeMo 24.03.01
container), 4K to 1M tokens, one GPU per 1K tokens, with TP / PP / DP / CP and the global batch per
row.  It prints model TFLOP/s per GPU in Megatron-Core's count (``megatron_core_flops_per_token``,
which the 24.07 table's tokens/s and TFLOP/s pairs confirm to 0.1%), turned back into tokens/s here.
Transformer Engine 1.5 runs cuDNN's fused attention on H100s, and its context parallelism is the
ring (``AttnFuncWithCP``, point-to-point K/V passing); the micro-batch, the recompute policy and the
overlaps are not given.  The same page's later table, LLAMA3-8B in FP8 on DGX-B200s (NeMo 25.04.rc2, the page
at 2025-05-08), is left out: in every one of its eight rows TP x PP x DP x CP comes to a quarter of the
GPUs it lists (8K: TP 1, PP 1, DP 2, CP 1 on 8 GPUs), so which column is off, and the layout, is unknown.

``NEMO_2409_DGXC`` is NVIDIA's DGX Cloud benchmarking recipes of its v25.01 release on H100s: Llama 3.1
8B, 70B and 405B and Nemotron-4 15B and 340B (the NeMo 24.09 container), GPT-3 175B (24.05) and the
Grok-1 314B MoE (a development container), each in BF16 and in FP8, weak-scaled over GPUs with the
measured step time.  Each recipe ships the config it ran, so
every setting is stated: recompute, sequence parallelism, Transformer Engine's TP overlap
(``ub_tp_comm_overlap``), the PP sends' overlap and bf16 gradient reduction.  Of each series the
smallest and the largest scale of the whole model are kept (the step grows 1-10% from one to the
other, the scales between lie between); the proxy configs with fewer layers are left out.
"""

from __future__ import annotations

from dataclasses import replace

from playground.planner.architecture import Model
from playground.planner.flops import megatron_core_flops_per_token
from playground.planner.layout import Layout
from playground.planner.presets import preset
from playground.planner.published_row import TE_ATTENTION, PublishedStackRun, llama2, llama31

__all__ = ["NEMO_2407", "NEMO_2403_LONG", "NEMO_2409_DGXC"]

_SOURCE = ("https://github.com/NVIDIA/NeMo/blob/070a0bb168d405d653b9734c0017cf5078e77c0d/docs/source/performance/"
           "performance_summary.md (Pretraining, NeMo 24.07 container, DGX-H100, FP8)")
_UNSTATED = ("recompute", "sequence_parallel", "overlap_grad_reduce", "tp_overlap", "grad_reduce", "p2p_overlap")
_NOTE = ("FP8 (Transformer Engine 1.x, whose only recipe is delayed scaling) on the linear layers; recompute, sequence "
         "parallelism, TP/DP/PP communication overlap and the gradient-reduction dtype not in the table (Layout.today's "
         "taken, the range over them)")


def _gpt3(layers, hidden, heads, name):
    return Model(layers, hidden, heads, vocab=50304, seq_len=2048, name=name)


def _row(name, model, gpus, batch, micro, tp, pp, cp, vp, tps):
    dp = gpus // (tp * pp * cp)
    layout = Layout.today(tp, pp, dp, cp=cp, micro_batch=micro, global_batch=batch, vpp=vp, dtype="fp8",
                          fp8_scaling="delayed", attention_kernel=TE_ATTENTION)
    label = f"{name}, {gpus} H100, TP {tp} PP {pp}" + (f" CP {cp}" if cp > 1 else "") + (f" VP {vp}" if vp > 1 else "")
    return PublishedStackRun(label, "NeMo 24.07 (Megatron-Core, FP8)", _SOURCE, "H100", model, layout, _UNSTATED,
                             tokens_per_s_per_gpu=tps, note=_NOTE, cite="nvidia2024nemoperf")


_NEMOTRON_340B = Model(96, 18432, 96, vocab=256000, seq_len=4096, ffn=73728, kv_heads=8, tied_embeddings=False,
                       position_embeddings=False, qkv_bias=False, proj_bias=False, name="nemotron-4-340b")


_GPT3_175B = _gpt3(96, 12288, 96, "gpt3-175b")
# (name, model, GPUs, GBS, MBS, TP, PP, CP, VP, tokens/s per GPU), in the table's order; of the Nemotron
# rows, the 340B's (its shape released), last
NEMO_2407 = tuple(_row(*r) for r in (
    ("GPT3-5B", _gpt3(24, 4096, 32, "gpt3-5b"), 64, 2048, 4, 1, 1, 1, 1, 22521),
    ("GPT3-20B", _gpt3(44, 6144, 48, "gpt3-20b"), 64, 256, 2, 2, 1, 1, 1, 5851),
    ("GPT3-175B", _GPT3_175B, 128, 256, 1, 4, 8, 1, 6, 726),
    ("GPT3-175B", _GPT3_175B, 512, 2048, 2, 4, 8, 1, 6, 782),
    ("LLAMA2-7B", llama2("7b"), 8, 128, 1, 1, 1, 1, 1, 16847),
    ("LLAMA2-13B", llama2("13b"), 16, 128, 1, 1, 4, 1, 10, 8646),
    ("LLAMA2-70B", llama2("70b"), 64, 128, 1, 4, 4, 1, 20, 1707),
    ("LLAMA3-8B", preset("llama3-8b"), 8, 128, 1, 1, 1, 2, 1, 12036),
    ("LLAMA3-70B", preset("llama3-70b"), 64, 128, 1, 4, 4, 2, 5, 1533),
)) + (_row("Nemotron-340B", _NEMOTRON_340B, 128, 32, 1, 8, 8, 1, 12, 322),)

_LONG_SOURCE = ("https://github.com/NVIDIA/NeMo/blob/19fadb67b09ba94c55094d34df119d6f9c565068/docs/source/performance/"
                "performance_long_sequence.md (LLAMA2-7B (FP8) - H100, NeMo 24.03.01, DGX-H100, the 'With CP' columns)")
_LONG_UNSTATED = _UNSTATED + ("micro_batch", "vpp")
_LONG_NOTE = ("FP8 (Transformer Engine 1.5, delayed scaling: its only recipe) on the linear layers, cuDNN fused attention, ring CP; tokens/s from the "
              "table's TFLOP/s per GPU in Megatron-Core's count; micro-batch, recompute, sequence parallelism and the "
              "overlaps not given (Layout.today's and a micro-batch of 1 taken, the range over them)")


def _long_row(k_tokens, gpus, batch, tp, pp, dp, cp, tflops):
    model = replace(llama2("7b"), seq_len=k_tokens * 1024)
    layout = Layout.today(tp, pp, dp, cp=cp, micro_batch=1, global_batch=batch, dtype="fp8", fp8_scaling="delayed",
                          attention_kernel=TE_ATTENTION)
    tokens = tflops * 1e12 / megatron_core_flops_per_token(model)
    label = f"LLAMA2-7B, {k_tokens}K, {gpus} H100, TP {tp} PP {pp} DP {dp} CP {cp}"
    return PublishedStackRun(label, "NeMo 24.03 long sequences (Megatron-Core, FP8, CP)", _LONG_SOURCE, "H100",
                             model, layout, _LONG_UNSTATED, tokens_per_s_per_gpu=tokens, note=_LONG_NOTE,
                             cite="nvidia2024nemoperf")


# (sequence in K tokens, GPUs, global batch, TP, PP, DP, CP, model TFLOP/s per GPU), the table's rows
NEMO_2403_LONG = tuple(_long_row(*r) for r in (
    (4, 4, 1024, 1, 1, 4, 1, 768), (8, 8, 512, 1, 2, 4, 1, 730), (16, 16, 256, 2, 1, 8, 1, 660),
    (32, 32, 128, 2, 1, 8, 2, 610), (64, 64, 64, 4, 1, 8, 2, 574), (128, 128, 32, 4, 1, 8, 4, 555),
    (256, 256, 16, 4, 1, 8, 8, 549), (512, 512, 8, 8, 1, 4, 16, 549), (1024, 1024, 4, 8, 1, 4, 32, 536),
))

_DGXC = "https://github.com/NVIDIA/dgxc-benchmarking/tree/143b90dd91f9be958fed4773ae95d941a3356a82/"
_DGXC_NOTE = ("{container}; the recipe's config states every setting: {recompute}, sequence parallelism {sp}, "
              "Transformer Engine's TP overlap {tp}, PP sends {p2p}, gradients reduced in bf16 behind backward; "
              "{dtype}{dropout}")


def _dgxc_row(model, folder, container, tp, pp, cp, ep, vp, micro, recompute, tp_overlap, p2p_overlap, extra,
              gpus, batch, dtype, step_s):
    dp = gpus // (tp * pp * cp)
    layout = Layout.today(tp, pp, dp, cp=cp, ep=ep, micro_batch=micro, global_batch=batch, vpp=vp, dtype=dtype,
                          recompute=recompute, tp_overlap=tp_overlap, p2p_overlap=p2p_overlap, grad_reduce="bf16",
                          attention_kernel=TE_ATTENTION, **extra, **(dict(fp8_scaling="delayed") if dtype == "fp8" else {}))
    label = f"{model.name}, {gpus} H100, TP {tp} PP {pp}" + (f" CP {cp}" if cp > 1 else "") \
        + (f" EP {ep}" if ep > 1 else "") + (f" VP {vp}" if vp > 1 else "") + f", {'FP8' if dtype == 'fp8' else 'BF16'}"
    note = _DGXC_NOTE.format(container=container, recompute=f"recompute {recompute}",
                             sp="on" if layout.sequence_parallel else "off", tp=tp_overlap if tp > 1 else "n/a",
                             p2p="behind compute" if p2p_overlap else "waited on",
                             dtype="FP8 on the linear layers, delayed scaling (fp8_amax_history_len 1024)"
                             if dtype == "fp8" else "BF16",
                             dropout="; dropout 0.1" if layout.dropout else "")
    if model.is_moe:   # a container of 2024: Megatron-Core before v0.13 weighted the experts' outputs at the combine
        note += "; the routing weights scale each expert's output at the combine, which keeps it (moe_probs combine)"
    return PublishedStackRun(label, "DGX Cloud benchmarking (NeMo)", _DGXC + folder, "H100", model, layout, (),
                             step_time_s=step_s, note=note, cite="nvidia2024dgxcbenchmarking")


_NEMOTRON_15B = Model(32, 6144, 48, vocab=256000, seq_len=4096, ffn=24576, kv_heads=8, tied_embeddings=False,
                      position_embeddings=False, qkv_bias=False, proj_bias=False, name="Nemotron-4 15B")
_LLAMA31 = {size: llama31(size, name=f"Llama 3.1 {size.upper()}") for size in ("8b", "70b", "405b")}
# GPT-3 175B as nemo_megatron/gpt3_175b_hydra.yaml gives it: GPT-2's BPE vocabulary padded to 128 x TP
_GPT3_175B_DGXC = Model(96, 12288, 96, vocab=50688, seq_len=2048, name="GPT-3 175B")
# Grok-1 as grok1/grok1_314b.yaml gives it: 8 experts of a gated 32,768-wide MLP, top-2, GQA 8, RoPE
_GROK1 = Model(64, 6144, 48, vocab=131072, seq_len=8192, kv_heads=8, gated_mlp=True, tied_embeddings=False,
               position_embeddings=False, norm="rmsnorm", qkv_bias=False, proj_bias=False, experts=8, top_k=2,
               moe_ffn=32768, name="Grok-1 314B")
_NEMO_2409, _NEMO_2405, _NEMO_DEV = "NeMo 24.09 container", "NeMo 24.05 container", "a NeMo development container"
# model, folder, container, TP, PP, CP, EP, VP, micro-batch, recompute, TP overlap, PP sends overlapped, other
# settings (the recipe yamls), then the README tables' smallest and largest scale of the whole model: GPUs,
# global batch, BF16 and FP8 seconds a step
_DGXC_SERIES = (
    (_LLAMA31["8b"], "llama3.1/", _NEMO_2409, 1, 1, 2, 1, 1, 1, "none", "none", True, {},
     ((8, 128, 12.91, 9.67), (128, 2048, 13.10, 9.82))),
    (_LLAMA31["70b"], "llama3.1/", _NEMO_2409, 4, 4, 2, 1, 5, 1, "none", "all", True, {},
     ((64, 128, 14.72, 11.01), (2048, 4096, 14.98, 11.39))),
    (_LLAMA31["405b"], "llama3.1/", _NEMO_2409, 8, 9, 2, 1, 7, 1, "none", "all", True, {},
     ((576, 252, 17.20, 11.24), (2304, 1008, 17.62, 12.35))),
    (_NEMOTRON_15B, "nemotron/", _NEMO_2409, 4, 1, 1, 1, 1, 4, "none", "all", True, {},
     ((16, 64, 2.83, 2.08), (2048, 8192, 2.96, 2.18))),
    (replace(_NEMOTRON_340B, name="Nemotron-4 340B"), "nemotron/", _NEMO_2409, 8, 8, 1, 1, 12, 1, "selective",
     "none", False, {}, ((128, 32, 4.61, 3.16), (2048, 512, 4.84, 3.49))),
    (_GPT3_175B_DGXC, "nemo_megatron/", _NEMO_2405, 4, 8, 1, 1, 12, 1, "none", "all", True, {"dropout": True},
     ((128, 256, 8.91, 5.92), (2048, 4096, 9.02, 6.24))),
    # padded to a capacity factor of 1 (moe_pad_expert_input_to_capacity): every expert gets its share exactly
    (_GROK1, "grok1/", _NEMO_DEV, 4, 8, 2, 8, 8, 1, "none", "none", True, {"moe_probs": "combine"},
     ((512, 1024, 20.83, 16.69), (2048, 4096, 21.09, 17.04))),
)
NEMO_2409_DGXC = tuple(_dgxc_row(*series[:13], gpus, batch, dtype, step)
                       for series in _DGXC_SERIES for gpus, batch, bf16_s, fp8_s in series[13]
                       for dtype, step in (("bf16", bf16_s), ("fp8", fp8_s)))
