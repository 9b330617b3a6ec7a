"""Published parallel layouts with their measured throughput: the step-time model's validation set.

Narayanan et al. 2021 (arXiv:2104.04473), Table 1: ten GPT models from 1.7B to 1T parameters on
DGX A100 (80 GB) nodes of Selene, sequence length 2048, vocabulary 51,200, full activation
recomputation, mixed precision.  "Achieved teraFLOP/s per GPU" there counts the FLOPs of their
Eq. 3 (which includes the recomputed forward pass) divided by the measured iteration time, so the
model is compared on the same count (``step_time.predict(...)["tflops_per_gpu"]``).

What the table does *not* publish, and what we therefore assume for every row alike (no row has
a setting of its own):

* micro-batch size 1 and the plain 1F1B schedule (one model chunk per GPU, v = 1), with the
  scatter/gather optimisation for pipeline sends (Sec. 4.1);
* gradients reduced after the pipeline flush, not overlapped with backward (Megatron-LM of 2021);
* no sequence parallelism and no flash attention (both postdate the paper).

Dubey et al. 2024 (arXiv:2407.21783), Table 4: Llama 3 405B on H100s at 8K context, the two
rows without context parallelism.  There "TFLOPs/GPU" is *model* FLOPs (BF16 MFU x 989 TFLOP/s),
compared with ``model_tflops_per_gpu``.  Assumed alike for both rows: micro-batch 1, two virtual
stages (the paper runs an interleaved schedule, Sec. 3.3.2), flash attention with sequence
parallelism, the attention core recomputed in backward (what a flash-attention backward does),
FSDP gradients reduced during backward (ZeRO stage 2 traffic).
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.step_costs import Layout, Model

__all__ = ["PublishedLayout", "NARAYANAN_TABLE1", "OTHER_LAYOUTS", "ALL_LAYOUTS"]


@dataclass(frozen=True)
class PublishedLayout:
    name: str
    cite: str
    gpu: str
    model: Model
    layout: Layout
    tflops_per_gpu: float        # published, in the source's own FLOP count
    flop_count: str              # "hardware" (recomputation counted) or "model"
    note: str = ""


def _gpt(params_b, heads, hidden, layers, tp, pp, gpus, batch, tflops, micro_batch=1, vpp=1):
    model = Model(layers, hidden, heads, vocab=51200, seq_len=2048, params=params_b * 1e9)
    layout = Layout(tp, pp, gpus // (tp * pp), micro_batch, batch, vpp, recompute="full")
    return PublishedLayout(f"GPT {params_b:g}B", "narayanan2021megatron", "A100-80GB", model, layout,
                           tflops, "hardware", "Table 1")


# (parameters in billions, heads, hidden, layers, TP, PP, GPUs, batch, TFLOP/s per GPU)
_TABLE1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
]

NARAYANAN_TABLE1 = tuple(_gpt(*row) for row in _TABLE1)
_LLAMA3_405B = Model(126, 16384, 128, vocab=128256, seq_len=8192, ffn=53248, kv_heads=8, gated_mlp=True,
                     tied_embeddings=False, position_embeddings=False)


def _llama(gpus, dp, batch_per_dp, tflops):
    layout = Layout(8, 16, dp, 1, batch_per_dp * dp, 2, zero_stage=2, recompute="selective",
                    sequence_parallel=True, flash_attention=True, overlap_grad_reduce=True)
    return PublishedLayout(f"Llama 3 405B, {gpus:,} GPUs", "dubey2024llama3", "H100", _LLAMA3_405B, layout,
                           tflops, "model", "Table 4 (TP 8, CP 1, PP 16, 8K sequence, 16M tokens per batch)")


OTHER_LAYOUTS = (_llama(8192, 64, 32, 430), _llama(16384, 128, 16, 400))
ALL_LAYOUTS = NARAYANAN_TABLE1 + OTHER_LAYOUTS
