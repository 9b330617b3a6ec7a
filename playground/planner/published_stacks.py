"""Published throughput of today's training stacks, each with the layout its source states.

The step-time model's first validation set (``published_layouts``) is Megatron-LM on A100s.  This
one adds other stacks: torchtitan (FSDP2, TP, PP, CP, float8 on H100/H200), fms-fsdp (``published_fms``: FSDP and
HSDP on A100s and H100s), Megatron-Bridge's performance summary (``published_bridge``: H100 and B200), the Megatron MoE Model Zoo
(``published_zoo``: Qwen3-235B-A22B with expert parallelism on H100s; DeepSeek-V3 on H800s), the ZeRO-3 rows of Narayanan
et al. 2021 Table 2, OPT-175B (FSDP + TP 8), llm-foundry's MPT sweep (``published_foundry``: Composer's FSDP
on A100s and H100s), NeMo AutoModel (``published_automodel``: PyTorch's FSDP2 with EP on H100s), NeMo's
benchmarks (``published_nemo``: Megatron-Core on H100s), Megatron-LM's weak-scaling table
(``published_megatron``: GPT 1.7B-462B on H100s) and Megatron-Bridge's measured A/B of its EP overlap
(``published_bridge_ab``: Qwen3-30B-A3B on 16 H100s, the overlap off and on); the held-out sets add
Megatron-Bridge's 26.04.01 and 26.06 tables, NeMo AutoModel's of 2026-04 and the Megatron-Core MoE report's Table 11
(``published_moe_report``).  Every row keeps apart:

* what the source states: the numbers quoted exactly, the page and the commit or date read;
* ``unstated``: the ``Layout`` fields the source does not give (the value in the row is then the
  stack's default or the nearest reading, said in ``note``);
* ``note``: settings the source states that ``Layout`` cannot say (torch.compile, async TP,
  FSDP2's ``reshard_after_forward=False`` under PP, expert tensor parallelism 1, a GPU the hardware
  table lacks).  These are the model's gaps, not tuned away.

The comparison is on time: a published step time, else tokens/s per GPU, else (for sources that
publish only TFLOP/s) the step time their FLOP count implies (``published_metric``).  Nothing here
is fitted: rows are data.
"""

from __future__ import annotations

from dataclasses import replace

from playground.planner.costs import Layout, Model
from playground.planner.published_fms import FMS_FSDP
from playground.planner.published_foundry import LLM_FOUNDRY
from playground.planner.published_megatron import MEGATRON_WEAK_SCALING
from playground.planner.published_automodel import AUTOMODEL, AUTOMODEL_2604, AUTOMODEL_HYBRID
from playground.planner.published_bridge import MEGATRON_BRIDGE, MEGATRON_BRIDGE_B200
from playground.planner.published_bridge_ab import BRIDGE_EP_OVERLAP_AB
from playground.planner.published_bridge_2509 import MEGATRON_BRIDGE_2509
from playground.planner.published_bridge_2604 import MEGATRON_BRIDGE_2604
from playground.planner.published_bridge_nemotron import MEGATRON_BRIDGE_NEMOTRON
from playground.planner.published_bridge_2606 import MEGATRON_BRIDGE_2606
from playground.planner.published_moe_recipes import MEGATRON_MOE_RECIPES
from playground.planner.published_moe_report import MCORE_MOE_REPORT
from playground.planner.published_nemo import NEMO_2403_LONG, NEMO_2407, NEMO_2409_DGXC
from playground.planner.published_zoo import DEEPSEEK_V3, MOE_MODEL_ZOO
from playground.planner.published_row import PublishedStackRun, llama31, published_metric

__all__ = ["PublishedStackRun", "TORCHTITAN", "FMS_FSDP", "MEGATRON_BRIDGE", "MEGATRON_BRIDGE_B200",
           "MEGATRON_BRIDGE_2604", "MEGATRON_BRIDGE_2606", "MCORE_MOE_REPORT", "AUTOMODEL_2604", "BRIDGE_EP_OVERLAP_AB", "MEGATRON_BRIDGE_2509", "HELD_OUT", "HELD_OUT_BAND",
           "HELD_OUT_FIRST_REPLAY", "MOE_MODEL_ZOO", "MEGATRON_MOE_RECIPES",
           "ZERO3_TABLE2", "OPT_175B", "LLM_FOUNDRY", "STACK_RUNS", "NOT_REPRESENTABLE", "published_metric"]


# ----------------------------------------------------------------------------- torchtitan
_TITAN = ("https://github.com/pytorch/torchtitan/blob/31a17bfdb70bab6f62a13d21816a5339b911d6e3/benchmarks/"
          "llama3_h100_202412_torchtitan.md (same tables in docs/performance.md at eaea6f6a); runs of "
          "2024-12 with torchtitan 9dec370, torch 1963fc8")
_GRAND_TETON = ("Grand Teton H100: 96 GB HBM2e at 2.4 TB/s, 500 W power limit, 400 Gb/s RDMA per GPU: the "
                "hardware table's H100-96GB at power_limit_w = 500; attention through PyTorch's SDPA, whose "
                "flash backend is FlashAttention-2 (attention_kernel fa2)")
_TITAN_REDUCE = ("; gradients reduce-scattered in fp32 (torchtitan's training.mixed_precision_reduce default, "
                 "grad_reduce fp32)")
_SEQ_DEFAULT = "sequence length not in the table: 8192, train_configs/llama3_*.toml's seq_len"


# torchtitan's float8 is torchao's Float8Linear, which keeps each linear layer's bf16 input for backward and casts
# it again there (torchao/float8/float8_linear.py, matmul_with_hp_or_float8_args: save_for_backward(input_hp, ...))
_FLOAT8 = dict(fp8_saved_inputs=False)


def _titan(name, model, layout, tps, unstated, note):
    layout = replace(layout, attention_kernel="fa2", **_FLOAT8)  # PyTorch SDPA's flash backend: FlashAttention-2
    note += _TITAN_REDUCE
    return PublishedStackRun(name, "torchtitan", _TITAN, "H100-96GB", model, layout, unstated,
                             tokens_per_s_per_gpu=tps, note=f"{note}; {_GRAND_TETON}", cite="liang2024torchtitan",
                             power_limit_w=500)


def _titan_fsdp_8b(gpus, technique, tps, gib):
    fp8, compiled = "Float8" in technique, "compile" in technique
    layout = Layout.today(1, 1, gpus, micro_batch=2, global_batch=2 * gpus, zero_stage=3, recompute="op",
                          dtype="fp8" if fp8 else "bf16", kernels="fused" if compiled else "eager")
    note = (_SEQ_DEFAULT + "; selective AC, the toml's default option 'op' (per-op SAC: every other matmul's "
            "output kept, the rest recomputed)" + ("; torch.compile on" if compiled else "; eager")
            + ("; float8 on nn.Linear only" if fp8 else ""))
    note += (f"; the run peaked at {gib} GiB (published); the memory model counts less, fitting: it keeps no "
             "eager intermediates and no allocator cache")
    return _titan(f"Llama 3.1 8B, FSDP {gpus}, {technique}", llama31("8b"), layout, tps, ("recompute",), note)


# (GPUs, ((technique, TPS/GPU, memory GiB), ...)): Tables 1 and 3
_TITAN_8B = tuple(_titan_fsdp_8b(g, t, tps, gib) for g, rows in
                  ((8, (("FSDP", 5762, 82.4), ("FSDP + compile", 6667, 77.0),
                        ("FSDP + compile + Float8", 8532, 76.8))),
                   (128, (("FSDP", 5605, 67.0), ("FSDP + compile", 6514, 62.0),
                          ("FSDP + compile + Float8", 8380, 61.8))))
                  for t, tps, gib in rows)


def _titan_cp_8b(cp, seq_len, tps):
    layout = Layout.today(1, 1, 8 // cp, cp=cp, micro_batch=1, global_batch=8 // cp, zero_stage=3,
                          recompute="full", dtype="fp8")
    note = ("Table 2: FSDP + CP + torch.compile + Float8, local batch 1, full AC; CP is PyTorch's ring "
            "attention (all-gather rotation not stated)")
    return _titan(f"Llama 3.1 8B, FSDP {8 // cp} CP {cp}, {seq_len // 1024}K", llama31("8b", seq_len), layout, tps,
                  (), note)


_TITAN_CP_8B = tuple(_titan_cp_8b(cp, s, tps) for cp, s, tps in
                     ((1, 32768, 3890), (2, 65536, 2540), (4, 131072, 1071), (8, 262144, 548)))


def _titan_70b(async_tp, tps):
    layout = Layout.today(8, 1, 32, micro_batch=16, global_batch=512, zero_stage=3, recompute="full", dtype="fp8",
                          tp_overlap="forward" if async_tp else "none")
    note = (_SEQ_DEFAULT + "; Table 4: FSDP 32 x TP 8, torch.compile + Float8, full AC"
            + ("; AsyncTP (forward TP communication overlapped with the GEMMs: tp_overlap forward)" if async_tp else ""))
    return _titan(f"Llama 3.1 70B, FSDP 32 TP 8{', AsyncTP' if async_tp else ''}", llama31("70b"), layout, tps,
                  ("sequence_parallel",), note)


# torchtitan at the runs' commit splits a rank's local batch into as many micro-batches as pipeline stages
# unless told otherwise (torchtitan/parallelisms/pipelining_utils.py at 9dec370: n_microbatches defaults to
# pipeline_parallel_degree; a micro-batch size of 1 became the default only in April 2025, 5e2033c)
_TITAN_MICROBATCHES = ("pipeline micro-batches not stated: torchtitan's default at 9dec370 (torchtitan/parallelisms/"
                       "pipelining_utils.py: as many as pipeline stages) taken, read after these rows were replayed")


def _titan_405b_pp(interleaved, tps):
    layout = Layout.today(8, 8, 8, micro_batch=4, global_batch=256, vpp=2 if interleaved else 1, zero_stage=3,
                          recompute="full", dtype="fp8", tp_overlap="forward", reshard_after_forward=False)
    note = (_SEQ_DEFAULT + "; Table 5: FSDP 8 x TP 8 x PP 8, torch.compile + Float8 + AsyncTP (tp_overlap), "
            "full AC; " + _TITAN_MICROBATCHES + ": 8 micro-batches of 4 sequences of the local batch 32"
            + ("; Interleaved 1F1B: stages per rank not stated, 2 taken" if interleaved else "")
            + "; FSDP2 under PP keeps the gathered weights over the micro-batches (reshard_after_forward="
              "False)")
    unstated = ("micro_batch", "sequence_parallel") + (("vpp",) if interleaved else ())
    return _titan(f"Llama 3.1 405B, FSDP 8 TP 8 PP 8, {'interleaved ' if interleaved else ''}1F1B",
                  llama31("405b"), layout, tps, unstated, note)


def _titan_405b_cp(cp, seq_len, tps):
    dp = 8 // cp
    layout = Layout.today(8, 8, dp, cp=cp, micro_batch=1, global_batch=8 * dp, zero_stage=3, recompute="full",
                          dtype="fp8", tp_overlap="forward", reshard_after_forward=False)
    note = ("Table 6: TP 8 x PP 8 (1F1B) with FSDP x CP = 8, local batch 8, torch.compile + Float8 + AsyncTP "
            "(tp_overlap), full AC; " + _TITAN_MICROBATCHES + ": 8 micro-batches of 1 sequence; FSDP2 under PP: "
            "reshard_after_forward=False")
    return _titan(f"Llama 3.1 405B, TP 8 PP 8 FSDP {dp} CP {cp}, {seq_len // 1024}K", llama31("405b", seq_len),
                  layout, tps, ("micro_batch", "sequence_parallel"), note)


_TITAN_H200 = ("https://github.com/pytorch/torchtitan/blob/bcdeaa37c92d1eaceeec3351e7ac81be6a1488af/benchmarks/"
               "llama3_8b_h200_2025-06_torchtitan.md (Trainy, 2025-06, torchtitan e7c0cae)")


def _titan_h200(nodes, tps):
    gpus = 8 * nodes
    layout = Layout.today(1, 1, gpus, micro_batch=2, global_batch=2 * gpus, zero_stage=3, recompute="op",
                          dtype="fp8", fp8_gather=True, attention_kernel="fa2", **_FLOAT8)
    note = (_SEQ_DEFAULT + "; local batch 2, torch.compile, float8 with FSDP float8 all-gather (fp8_gather: "
            "1 byte per weight); AC not given on the command line: the toml's selective (op)" + _TITAN_REDUCE)
    return PublishedStackRun(f"Llama 3.1 8B, FSDP {gpus}, H200, compile + Float8", "torchtitan", _TITAN_H200, "H200",
                             llama31("8b"), layout, ("recompute",), tokens_per_s_per_gpu=tps, note=note,
                             cite="liang2024torchtitan")


_TITAN_ASYNC = ("https://github.com/pytorch/torchtitan/blob/c720cb872308d6d179b7fb3a4d6ff6ed8029bc27/benchmarks/"
                "asyncTP_llama3_h100_2025-06_torchtitan.md (2025-06, torch 38410cf9)")


def _titan_async(size, dp, local, recompute, fp8, async_tp, tps):
    layout = Layout.today(8, 1, dp, micro_batch=local, global_batch=local * dp, zero_stage=3, recompute=recompute,
                          dtype="fp8" if fp8 else "bf16", tp_overlap="forward" if async_tp else "none")
    note = (f"{_SEQ_DEFAULT}; FSDP {dp} x TP 8, torch.compile, {'full AC' if recompute == 'full' else 'per-op SAC'}, "
            f"local batch {local}" + ("; float8 tensorwise" if fp8 else "") + ("; async TP" if async_tp else ""))
    name = f"Llama 3.1 {size.upper()}, FSDP {dp} TP 8, 2025-06, {'Float8' if fp8 else 'bf16'}" \
        + (", AsyncTP" if async_tp else "")
    return replace(_titan(name, llama31(size), layout, tps, ("sequence_parallel",), note), source=_TITAN_ASYNC)


# (size, FSDP, local batch, AC, float8, async TP, tokens/s a GPU): the June 2025 async-TP tables, float8
# rowwise left out (its vanilla baseline's low performance is a known bug, the page notes)
_TITAN_ASYNC_ROWS = tuple(_titan_async(*r) for r in (
    ("70b", 32, 16, "full", False, False, 597.3), ("70b", 32, 16, "full", False, True, 652.4),
    ("70b", 32, 16, "full", True, False, 809.8), ("70b", 32, 16, "full", True, True, 942.4),
    ("8b", 8, 12, "op", False, False, 4378), ("8b", 8, 12, "op", False, True, 4809.4),
    ("8b", 8, 12, "op", True, False, 5078.1), ("8b", 8, 12, "op", True, True, 5570.1)))

TORCHTITAN = _TITAN_8B + _TITAN_CP_8B + (_titan_70b(False, 829), _titan_70b(True, 876)) \
    + (_titan_405b_pp(False, 100), _titan_405b_pp(True, 128)) \
    + tuple(_titan_405b_cp(cp, s, tps) for cp, s, tps in ((1, 32768, 76), (2, 65536, 47), (4, 131072, 31),
                                                          (8, 262144, 16))) \
    + (_titan_h200(4, 10938), _titan_h200(8, 10753)) + _TITAN_ASYNC_ROWS

NOT_REPRESENTABLE = (
    "Megatron-Bridge DGX-H100, GPT OSS 120B: GA 2 disagrees with GBS 512 / (DP 16 x MBS 4) = 8, so the row's "
    "batch is not readable (its sliding windows now are: Model.sliding_window; its attention sinks are left out)",
    "Megatron-Bridge DGX-H100, Qwen3_235B_a22B: the row has one column too few (GBS missing), not readable",
    "MegaScale (Jiang et al. 2024): its per-scale table was not found in the stored sources; not recorded",
    "Megatron-Bridge 25.09, the DGX-GB200 rows: no NVL72 rack in the hardware table",
    "Megatron-Bridge 26.04.01, the transformers' DGX-GB200, DGX-GB300 and DGX-B300 rows: no NVL72 rack and no B300 "
    "in the hardware table when it was read (its Nemotron 3 Nano runs on all five systems, read once the model held "
    "Mamba-2 mixers, are rows: published_bridge_nemotron); its Nemotron 3 Super runs: a latent MoE, not modelled",
    "NeMo 25.04 long sequences, LLAMA3-8B on DGX-B200: each row's TP x PP x DP x CP is a quarter of its GPUs, so its "
    "layout is not readable",
)

# ----------------------------------------------------------------------------- ZeRO-3, OPT-175B
_NARAYANAN = "Narayanan et al. 2021, arXiv:2104.04473, Table 2 (ZeRO-3 without model parallelism), DGX A100 80GB"
_GPT175 = Model(96, 12288, 96, vocab=51200, seq_len=2048)
_GPT530 = Model(105, 20480, 128, vocab=51200, seq_len=2048)


def _zero3(label, model, gpus, batch, micro, tflops):
    note = ("DeepSpeed ZeRO-3, no TP/PP; published TFLOP/s in Eq. 3 (recomputation counted); recompute, "
            "overlap and prefetch of the ZeRO-3 run not stated (full recompute and the Table 1 conventions taken); "
            "DeepSpeed's ZeRO-3 of the time gathered each parameter tensor with its own all_gather "
            "(partition_parameters.py, _allgather_param): fsdp_gather 'tensor', 12 collectives a GPT layer, "
            "and freed each after use, so a GPU holds one tensor gathered at a time, not a layer; its module "
            "hooks gather again for the recomputed forward (DeepSpeed issue #4784): three gathers a layer. "
            "Replayed with two gathers a layer, before the third was charged: 1.23, 1.34, 1.21 (175B), 1.40, 1.49, 1.63 (530B)")
    if batch == 2560:
        note += "; batch 2560 (starred in the table: larger than the other 530B rows, to fit)"
    return PublishedStackRun(f"GPT {label} ZeRO-3, {gpus:,} GPUs, micro-batch {micro}", "DeepSpeed ZeRO-3",
                             _NARAYANAN, "A100-80GB", model,
                             Layout(1, 1, gpus, micro, batch, zero_stage=3, recompute="full", fsdp_gather="tensor"),
                             ("recompute", "overlap_grad_reduce"), tflops_per_gpu=tflops, flop_count="hardware",
                             note=note, cite="narayanan2021megatron")


ZERO3_TABLE2 = (_zero3("174.6B", _GPT175, 384, 1536, 4, 144), _zero3("174.6B", _GPT175, 768, 1536, 2, 88),
                _zero3("174.6B", _GPT175, 1536, 1536, 1, 44), _zero3("529.6B", _GPT530, 640, 2560, 4, 138),
                _zero3("529.6B", _GPT530, 1120, 2240, 2, 98), _zero3("529.6B", _GPT530, 2240, 2240, 1, 48))

OPT_175B = PublishedStackRun(
    "OPT-175B, FSDP + TP 8, 992 GPUs", "metaseq (FSDP + Megatron TP)",
    "Zhang et al. 2022, arXiv:2205.01068, Sec. 2.4 ('992 80GB A100 GPUs ... Fully Sharded Data Parallel with "
    "Megatron-LM Tensor Parallelism ... up to 147 TFLOP/s per GPU') and Table 1 (batch 2M tokens)",
    "A100-80GB", Model(96, 12288, 96, vocab=50272, seq_len=2048, name="opt-175b"),
    Layout(8, 1, 124, 8, 992, zero_stage=3, recompute="full"),
    ("micro_batch", "global_batch", "recompute", "overlap_grad_reduce"), tflops_per_gpu=147, flop_count="unstated",
    note=("FLOP count of the 147 TFLOP/s not stated: model FLOPs assumed for the implied step time; batch 2M "
          "tokens read as 992 sequences (8 per DP rank, 2.03M tokens); micro-batch, recompute not stated "
          "(metaseq's activation checkpointing taken as full); FP16 weights, FP32 Adam sharded"),
    cite="zhang2022opt")

# the held-out sets: read after everything else and replayed before anything in the model was changed
# for them (each module's docstring records that first replay); the check holds them within +-25%
HELD_OUT = {"Megatron-Bridge 26.04.01": MEGATRON_BRIDGE_2604, "NeMo AutoModel 2026-04": AUTOMODEL_2604,
            "Megatron-Bridge 26.06": MEGATRON_BRIDGE_2606, "Megatron-Core MoE report (v0.16)": MCORE_MOE_REPORT,
            "Megatron-LM MoE recipes": MEGATRON_MOE_RECIPES}
HELD_OUT_BAND = 0.25
# each held-out run's predicted / published throughput at its first replay, before anything in the model was
# changed for it (recorded then in published_bridge_2604's, published_automodel's, published_bridge_2606's and
# published_moe_report's notes; published_moe_recipes' ratios are these)
HELD_OUT_FIRST_REPLAY = {
    "LLAMA3_70B, 64 H100, TP 4 PP 8 VP 5, FP8-CS, 26.04.01": 0.86,
    "LLAMA3.1_405B, 1024 H100, TP 8 PP 8 CP 2 VP 8, FP8-CS, 26.04.01": 0.87,
    "GPT OSS 120B, 64 H100, PP 4 EP 8, BF16, 26.04.01": 1.64,
    "Qwen3_30B_a3B, 16 H100, EP 16, FP8-CS, 26.04.01": 0.90,
    "Qwen3_235B_a22B, 256 H100, TP 2 PP 8 VP 4 EP 32, FP8-CS, 26.04.01": 0.81,
    "DeepSeekV3, 256 B200, PP 8 VP 2 EP 32, FP8-MX, 26.04.01": 0.46,
    "GPT OSS 120B, 64 B200, EP 8, BF16, 26.04.01": 2.25,
    "Qwen3_30B_a3B, 8 B200, EP 8, FP8-MX, 26.04.01": 1.28,
    "Qwen3_235B_a22B, 256 B200, PP 8 EP 8, FP8-MX, 26.04.01": 1.69,
    "Llama 3.1 70B, FSDP 32 CP 2, 8K, 64 H100": 1.02,
    "LLAMA3.1_405B, 256 GB300, TP 4 PP 8 VP 4, FP8-CS, 26.06": 0.8148,
    "LLAMA3.1_405B, 256 GB300, TP 2 PP 8 CP 2 VP 4, FP8-MX, 26.06": 0.9647,
    "LLAMA3.1_405B, 256 GB200, TP 4 PP 16 VP 4, FP8-CS, 26.06": 1.0052,
    "LLAMA3.1_405B, 256 GB200, TP 4 PP 16 VP 8, FP8-MX, 26.06": 1.0575,
    "LLAMA3.1_405B, 1024 H100, TP 8 PP 8 CP 2 VP 8, FP8-CS, 26.06": 0.8272,
    "DeepSeekV3, 256 GB300, PP 2 VP 8 EP 32, FP8-MX, 26.06": 0.7108,
    "DeepSeekV3, 256 GB300, PP 2 VP 8 EP 32, FP8-MX, GBS 15360, 26.06": 0.7058,
    "DeepSeekV3, 256 GB200, PP 4 VP 4 EP 64, FP8-MX, 26.06": 0.8273,
    "DeepSeekV3, 256 B300, PP 8 EP 8, FP8-MX, 26.06": 1.1428,
    "GPT OSS 120B, 64 GB300, EP 16, FP8-MX, 26.06": 0.8827,
    "GPT OSS 120B, 64 GB200, EP 64, FP8-MX, 26.06": 0.9153,
    "GPT OSS 120B, 64 B300, EP 8, FP8-MX, 26.06": 1.3481,
    "Qwen3_30B_a3B, 8 GB300, EP 8, FP8-MX, 26.06": 0.7527,
    "Qwen3_30B_a3B, 8 GB200, EP 8, FP8-MX, 26.06": 0.7853,
    "Qwen3_30B_a3B, 8 B300, EP 8, FP8-MX, 26.06": 0.7998,
    "Qwen3_30B_a3B, 16 H100, EP 16, FP8-CS, 26.06": 0.7967,
    "Qwen3_235B_a22B, 256 GB300, PP 4 VP 12 EP 32, FP8-MX, 26.06": 0.7060,
    "Qwen3_235B_a22B, 256 GB200, PP 8 VP 3 EP 32, FP8-MX, 26.06": 0.7289,
    "DeepSeek-V3, 256 GB300, TP 1 PP 4 EP 64 VPP 4, MXFP8": 0.9812,
    "DeepSeek-V3, 256 GB200, TP 1 PP 4 EP 64 VPP 4, MXFP8": 1.0236,
    "DeepSeek-V3, 256 GB200, TP 1 PP 8 EP 32 VPP 4, BF16": 1.1734,
    "DeepSeek-V3, 1024 H100, TP 2 PP 8 EP 64 VPP 4, FP8-BLK": 1.1311,
    "Qwen3-235B, 256 GB300, TP 1 PP 4 EP 64 VPP 6, MXFP8": 0.8637,
    "Qwen3-235B, 256 GB200, TP 1 PP 4 EP 64 VPP 6, MXFP8": 1.1026,
    "Qwen3-235B, 256 GB200, TP 1 PP 4 EP 32 VPP 12, BF16": 1.0763,
    "Qwen3-235B, 256 H100, TP 2 PP 8 EP 32 VPP 4, BF16": 0.8801,
    "Qwen3-235B, 128 GB300, TP 4 PP 4 CP 4 EP 32 VPP 12, MXFP8, 128K": 0.7763,
    "DeepSeek-V3, 256 B200, TP 1 PP 8 EP 32 VP 2, MXFP8": 0.9918,
    "DeepSeek-V3, 256 GB200, TP 1 PP 4 EP 64 VP 4, MXFP8, partial CG": 1.0539,
    "DeepSeek-V3, 256 GB300, TP 1 PP 4 EP 64 VP 4, MXFP8, partial CG": 0.9045,
    "Qwen3-235B, 256 H100, TP 2 PP 8 EP 32 VP 4, BF16": 1.2707,
    "Qwen3-235B, 128 B200, TP 2 PP 4 EP 16 VP 12, MXFP8": 1.3463,
    "Qwen3-235B, 128 B300, TP 2 PP 1 EP 16, MXFP8, partial CG": 1.0949,
    "Qwen3-235B, 128 GB200, TP 1 PP 1 EP 64, MXFP8, full CG": 0.7451,
    "Qwen3-235B, 128 GB200, TP 1 PP 1 EP 64, MXFP8, partial CG": 0.8151,
    "Qwen3-235B, 128 GB300, TP 1 PP 1 EP 64, MXFP8, full CG": 0.6606,
    "Qwen3-30B, 32 H100, TP 1 PP 1 EP 8, FP8-BLK, partial CG": 1.2768,
    "Qwen3-30B, 32 H100, TP 1 PP 1 EP 8, BF16": 1.2549,
    "Qwen3-30B, 16 GB200, TP 1 PP 1 EP 16, BF16": 1.3782,
    "Qwen3-30B, 16 GB200, TP 1 PP 1 EP 16, MXFP8, partial CG": 1.4895,
    "Qwen3-30B, 16 GB200, TP 1 PP 1 EP 16, MXFP8, full CG": 1.2512,
}

STACK_RUNS = TORCHTITAN + FMS_FSDP + MEGATRON_BRIDGE + MOE_MODEL_ZOO + (DEEPSEEK_V3,) + ZERO3_TABLE2 + (OPT_175B,) \
    + LLM_FOUNDRY + AUTOMODEL + AUTOMODEL_HYBRID + NEMO_2407 + NEMO_2403_LONG + NEMO_2409_DGXC + MEGATRON_BRIDGE_B200 \
    + MEGATRON_WEAK_SCALING + MEGATRON_BRIDGE_2509 + BRIDGE_EP_OVERLAP_AB + MEGATRON_BRIDGE_NEMOTRON + tuple(run for runs in HELD_OUT.values() for run in runs)
