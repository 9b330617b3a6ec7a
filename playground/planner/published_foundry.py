"""MosaicML's llm-foundry MPT benchmarks: Composer's FSDP (ZeRO-3, FSDP1) on 8 to 64 A100s and H100s.

Its ``scripts/train/benchmarking/README.md`` tables give, per run, the model, sequence length, GPUs,
micro-batch, accumulation, global batch, precision, mixed-precision mode, sharding strategy and
activation checkpointing, with the measured tokens/s per GPU: every ``Layout`` field the step-time
model needs except the kernels, which the benchmark yamls of the time fix (eager PyTorch and the
Triton FlashAttention, ``attn_impl: triton``: ``attention_kernel="fa1"``).  The MPT shapes are
GPT's (LayerNorm and biases, a 4h GELU MLP, learned positions, tied embeddings) with llm-foundry's
50,368-token vocabulary; each row's ``NumParams`` checks the shape.  A sweep of 2023, on the
software of 2023.
"""

from __future__ import annotations

from playground.planner.costs import Layout, Model
from playground.planner.published_row import PublishedStackRun

__all__ = ["LLM_FOUNDRY", "MPT_SHAPES"]

_SOURCE = ("https://github.com/mosaicml/llm-foundry/blob/061f2c7ce64e655100286584a7629e2a09f827ba/scripts/"
           "train/benchmarking/README.md; shapes scripts/train/yamls/pretrain/mpt-*.yaml")
# size: (layers, d_model, heads, NumParams at 2048 tokens as the tables print it)
MPT_SHAPES = {"1b": (24, 2048, 16, 1_315_950_592), "3b": (32, 2560, 20, 2_651_837_440),
              "7b": (32, 4096, 32, 6_658_859_008), "13b": (40, 5120, 40, 12_853_954_560),
              "30b": (48, 7168, 56, 29_975_214_080), "70b": (80, 8192, 64, 64_862_437_376)}


def mpt(size: str, seq_len: int) -> Model:
    layers, hidden, heads, _ = MPT_SHAPES[size]
    return Model(layers, hidden, heads, vocab=50368, seq_len=seq_len, name=f"mpt-{size}")


def _row(gpu, size, seq_len, gpus, micro, batch, checkpointing, tps, mode="DEFAULT"):
    layout = Layout.today(1, 1, gpus, micro_batch=micro, global_batch=batch, zero_stage=3,
                          recompute="full" if checkpointing else "none", kernels="eager", attention_kernel="fa1",
                          grad_reduce="bf16", fp32_gather=mode == "DEFAULT")
    note = (f"FULL_SHARD, mixed precision {mode}: "
            + ("parameters kept and gathered in fp32 under bf16 autocast (fp32_gather), gradients reduced in bf16 "
               "(Composer's DEFAULT of 2023; autocast casting each weight to bf16 where it is used and the residual "
               "stream kept in fp32, counted; MPT's low-precision LayerNorm, which runs the norms in bf16 and moves "
               "about 20 of the stream's 120 B per element less, left out)"
               if mode == "DEFAULT" else "bf16 parameters and gradients")
            + f"; activation checkpointing {checkpointing} (full); eager PyTorch, Triton FlashAttention (fa1); "
            "FSDP1 through Composer")
    if gpu == "H100":
        note += "; the H100 table states no interconnect: the hardware table's H100 network taken"
    table = "H100 80GB BF16" if gpu == "H100" else "A100 80GB, 1600 Gbps RoCE"
    return PublishedStackRun(f"MPT-{size.upper()}, {seq_len // 1024}K, FSDP {gpus} x {gpu}, micro-batch {micro}",
                             "llm-foundry (Composer FSDP)", f"{_SOURCE} (table '{table}')", gpu,
                             mpt(size, seq_len), layout, tokens_per_s_per_gpu=tps, note=note,
                             cite="mosaicml2023llmfoundry")


# (gpu, size, sequence, GPUs, micro-batch, global batch, activation checkpointing, tokens/s per GPU[, mode])
LLM_FOUNDRY = tuple(_row(*r) for r in (
    ("H100", "70b", 2048, 64, 8, 2048, True, 1039),
    ("H100", "70b", 2048, 32, 2, 1024, True, 882),
    ("H100", "30b", 2048, 32, 14, 1344, True, 2308),
    ("H100", "30b", 8192, 8, 1, 168, True, 1384),
    ("H100", "13b", 2048, 64, 2, 128, False, 4800),
    ("H100", "13b", 4096, 8, 10, 240, True, 4717),
    ("H100", "7b", 2048, 8, 6, 48, False, 10643),
    ("H100", "7b", 32768, 8, 2, 32, True, 3318),
    ("H100", "3b", 2048, 64, 6, 1152, False, 22525),
    ("H100", "1b", 2048, 64, 20, 1280, False, 44402),
    ("A100-80GB", "70b", 2048, 64, 8, 2048, True, 410, "PURE"),
    ("A100-80GB", "30b", 2048, 8, 3, 504, True, 916),
    ("A100-80GB", "13b", 8192, 8, 5, 120, True, 1795),
    ("A100-80GB", "7b", 2048, 8, 6, 96, False, 4641),
    ("A100-80GB", "7b", 65536, 8, 1, 16, True, 1013),
    ("A100-80GB", "1b", 2048, 8, 14, 448, False, 20513),
))
