"""Megatron-LM's weak-scaling table on H100s: nine GPT models from 1.7B to 462B parameters, Megatron-Core r0.8.0.

The README of Megatron-LM (commit f2e5db402c of July 2024, ``images/model_table.png``) gives, per run, the
heads, hidden size, layers, TP, PP and DP, the GPUs, the global batch and the model TFLOP/s per GPU (41-49%
of the bf16 peak).  Its text fixes the rest that the step-time model needs: GPT models with a 131,072-token
vocabulary and 4,096-token sequences; the data-parallel traffic behind compute (``--overlap-grad-reduce
--overlap-param-gather``, which needs the distributed optimizer: ZeRO-1), Transformer Engine's TP overlap
(``--tp-comm-overlap``, which needs sequence parallelism) and the pipeline's sends behind compute.  bf16
(the MFU is taken against the bf16 peak), and at that commit bf16 accumulates and reduces gradients in fp32
(``megatron/training/arguments.py``).  The parameter counts fix the shape: a 4h GELU MLP (12 l h^2) and
untied input and output embeddings (1.7B = 1.21B + 2 x 131,072 x 2,048).  Not given: the micro-batch, the
recompute policy and whether the schedule was interleaved (the range spans them); nor the dropout or
the loss fusion, for which the commit's defaults are taken: ``--hidden-dropout`` and
``--attention-dropout`` 0.1 (``dropout=True``), and ``--cross-entropy-loss-fusion`` off, so the loss is
Megatron's unfused vocab-parallel chain in fp32 (``loss_kernel="megatron"``).  The TFLOP/s are in
Megatron-Core's count (``megatron_core_flops_per_token``), turned back into tokens/s here.

These rows were replayed before anything in the model was changed for them: a held-out reading.  The
dropout and loss defaults above were read from the commit's code after these rows had been seen.
"""

from __future__ import annotations

from playground.planner.costs import Layout, Model
from playground.planner.flops import megatron_core_flops_per_token
from playground.planner.published_row import TE_ATTENTION, PublishedStackRun

__all__ = ["MEGATRON_WEAK_SCALING", "megatron_gpt"]

_SOURCE = ("https://github.com/NVIDIA/Megatron-LM/blob/f2e5db402c44ae309aa6448bcb4ae87e8ae0f5f4/README.md "
           "(Training Speed and Scalability; images/model_table.png, Megatron-Core r0.8.0, H100)")
_STACK = "Megatron-Core r0.8.0 weak scaling, H100"
_UNSTATED = ("micro_batch", "recompute", "vpp")
_NOTE = ("bf16, fp32 gradient reduction; DP traffic overlapped (distributed optimizer), Transformer Engine's TP "
         "overlap, PP sends behind compute, all stated; micro-batch, recompute and interleaving not given (a "
         "micro-batch of 1, no recompute and no interleaving taken, the range over them); dropout and loss fusion "
         "not given (the commit's defaults taken: dropout 0.1, the loss unfused); tokens/s from the table's "
         "TFLOP/s per GPU in Megatron-Core's count")


def megatron_gpt(layers: int, hidden: int, heads: int, name: str) -> Model:
    """A GPT of the weak-scaling table: 4h GELU MLP, untied embeddings, 131,072 tokens, 4,096-token sequences."""
    return Model(layers, hidden, heads, vocab=131072, seq_len=4096, tied_embeddings=False, name=name)


def _row(size, heads, hidden, layers, tp, pp, dp, gpus, batch, tflops):
    model = megatron_gpt(layers, hidden, heads, f"GPT {size}")
    layout = Layout.today(tp, pp, dp, micro_batch=1, global_batch=batch, grad_reduce="fp32",
                          tp_overlap="all" if tp > 1 else "none", attention_kernel=TE_ATTENTION, loss_kernel="megatron",
                          dropout=True)
    assert layout.gpus == gpus, (size, layout.gpus, gpus)
    tokens = tflops * 1e12 / megatron_core_flops_per_token(model)
    return PublishedStackRun(f"GPT {size}, {gpus} H100, TP {tp} PP {pp} DP {dp}", _STACK, _SOURCE, "H100", model,
                             layout, _UNSTATED, tokens_per_s_per_gpu=tokens, note=_NOTE, cite="nvidia2024megatronlm")


# (size, heads, hidden, layers, TP, PP, DP, GPUs, global batch, model TFLOP/s per GPU): the table's rows
MEGATRON_WEAK_SCALING = tuple(_row(*r) for r in (
    ("1.7B", 16, 2048, 24, 1, 1, 48, 48, 192, 408.8), ("7.1B", 32, 4096, 30, 2, 1, 48, 96, 192, 465.9),
    ("16B", 48, 6144, 32, 4, 1, 48, 192, 192, 489.1), ("32B", 56, 7168, 48, 8, 1, 48, 384, 192, 459.6),
    ("70B", 64, 8192, 84, 8, 2, 48, 768, 384, 419.7), ("119B", 80, 10240, 92, 8, 4, 48, 1536, 768, 420.5),
    ("177B", 96, 12288, 96, 8, 6, 48, 2304, 1152, 432.8), ("314B", 128, 16384, 96, 8, 8, 48, 3072, 1536, 474.4),
    ("462B", 144, 18432, 112, 8, 16, 48, 6144, 3072, 459.9),
))
