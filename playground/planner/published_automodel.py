"""NeMo AutoModel's pre-training benchmarks: PyTorch's FSDP2 with expert parallelism on H100s, in BF16.

Its ``docs/performance-summary.md`` table gives, per run, the GPUs, global, micro- and local batch,
accumulation, sequence, TP / PP / CP / EP / VP, the FSDP degree, the kernels (Transformer Engine's
attention, linear layers and RMSNorm, DeepEP's dispatcher; FlexAttention for gpt-oss), the step time
and tokens/s per GPU.  What the table leaves out its benchmark configs state
(``examples/benchmark/configs/*.yaml``, read at a later commit than the table, so each row's note says
what it takes from them): activation checkpointing, ``reshard_after_forward``, the loss on bf16 logits
(``MaskedCrossEntropy(fp32_upcast=False)``), forced-balanced routing (``fake_balanced_gate``) and, for
gpt-oss, the expert-parallel degree the table prints as "-".  Mock data, no gradient clipping.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from playground.planner.costs import Layout
from playground.planner.hf_config import read_hf_config
from playground.planner.presets import preset
from playground.planner.published_row import PublishedStackRun
from playground.planner.published_zoo import qwen3_moe

__all__ = ["AUTOMODEL"]

_SOURCE = ("https://github.com/NVIDIA-NeMo/Automodel/blob/01926a5c443b7979463c73341bf64adf79de638e/docs/"
           "performance-summary.md (System: DGX-H100, Precision: BF16; 'Last Updated 2025-10-02'); settings "
           "beyond the table from examples/benchmark/configs/*.yaml at 037e04a6a256 (Kimi K2: 080dca533b63)")
_FAMILIES = Path(__file__).resolve().parents[2] / "chapters" / "configs" / "families"
_COMMON = ("FSDP2 over DP (the table's FSDP column), EP inside it; DeepEP dispatch, forced-balanced routing "
           "(fake_balanced_gate); the loss on the bf16 logits (fp32_upcast false: loss_fp32 off); gradient "
           "reduction dtype not stated (fp32 taken)")


def _row(name, model, gpus, layout, tps, note, unstated=(), misfit=""):
    layout = replace(layout, zero_stage=3, ep_dispatch="deepep", loss_fp32=False)
    return PublishedStackRun(f"{name}, {gpus} H100", "NeMo AutoModel (FSDP2 + EP)", _SOURCE, "H100", model, layout,
                             ("grad_reduce",) + unstated, tokens_per_s_per_gpu=tps, note=f"{_COMMON}; {note}",
                             memory_misfit=misfit, cite="nvidia2025automodel")


def _seq4k(model):
    return replace(model, seq_len=4096)


_QWEN3_30B = qwen3_moe(48, 2048, 32, 4, 6144, 128, 8, 768, 4096, "qwen3-30b-a3b")
_GPT_OSS_NOTE = ("FlexAttention for the sliding windows and the sinks (attention_kernel fa2: PyTorch's blog puts "
                 "Flex at 85-90% of FlashAttention-2); EP from the config (ep_size {ep}), the table prints '-'; "
                 "no activation checkpointing; gpt-oss's clamped SwiGLU runs in PyTorch ops, not counted as "
                 "unfused")
_GPT_OSS_MISFIT = ("the memory model counts a little more than it allows of the 80 GB (its 2 GiB framework and 5% "
                   "fragmentation allowances), nothing recomputed; the run fit, so the allowances or the count of "
                   "the expert activations are too large for it")
_DSV3_NOTE = ("activation checkpointing on, reshard_after_forward off (the config); the interleaved 1F1B "
              "schedule, two layers a virtual stage; the multi-token-prediction module not in the config")

AUTOMODEL = (
    _row("Qwen3 MoE 30B, FSDP 8 EP 8, MBS 4", _QWEN3_30B, 8,
         Layout.today(1, 1, 8, ep=8, micro_batch=4, global_batch=512, attention_kernel="fa3", recompute="full"),
         12040, "Transformer Engine attention (cuDNN: fa3); activation checkpointing on (the config)"),
    _row("gpt-oss 20B, FSDP 8 EP 8, MBS 2", _seq4k(read_hf_config(_FAMILIES / "gpt-oss-20b")), 8,
         Layout.today(1, 1, 8, ep=8, micro_batch=2, global_batch=256, attention_kernel="fa2"),
         13058, _GPT_OSS_NOTE.format(ep=8), misfit=_GPT_OSS_MISFIT),
    _row("gpt-oss 120B, FSDP 64 EP 64, MBS 2", _seq4k(read_hf_config(_FAMILIES / "gpt-oss-120b")), 64,
         Layout.today(1, 1, 64, ep=64, micro_batch=2, global_batch=512, attention_kernel="fa2"),
         7626, _GPT_OSS_NOTE.format(ep=64), misfit=_GPT_OSS_MISFIT),
    _row("DeepSeek-V3 671B, PP 4 VP 8 EP 64 FSDP 64", _seq4k(preset("deepseek-v3")), 256,
         Layout.today(1, 4, 64, ep=64, micro_batch=1, global_batch=512, vpp=8, attention_kernel="fa3",
                      recompute="full", reshard_after_forward=False), 1002, _DSV3_NOTE),
    _row("DeepSeek-V3 671B, PP 4 VP 8 EP 64 FSDP 256", _seq4k(preset("deepseek-v3")), 1024,
         Layout.today(1, 4, 256, ep=64, micro_batch=1, global_batch=8192, vpp=8, attention_kernel="fa3",
                      recompute="full", reshard_after_forward=False), 865, _DSV3_NOTE),
    _row("Kimi K2 1T, PP 8 VP 4 EP 32 FSDP 32", _seq4k(read_hf_config(_FAMILIES / "kimi-k2")), 256,
         Layout.today(1, 8, 32, ep=32, micro_batch=1, global_batch=512, vpp=4, attention_kernel="fa3",
                      recompute="full"), 924,
         "activation checkpointing on (the config); reshard_after_forward not in it (FSDP2's default, on, "
         "taken); the interleaved 1F1B schedule, two layers a virtual stage", ("reshard_after_forward",)),
)
