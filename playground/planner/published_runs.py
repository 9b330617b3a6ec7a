"""Published training runs, with their published numbers and what the planner must assume to replay them.

Each ``PublishedRun`` keeps three kinds of fact apart:

* ``published``: what the paper (or model card) states, with the exact meaning of each number
  (total FLOPs, GPU-hours, days), and ``cite`` the BibTeX key it comes from;
* the run's inputs to ``planner.capacity.plan`` (parameters, tokens, GPU type and count, and a
  throughput) — ``plan_kwargs`` —,
* ``throughput_source``: whether that throughput was *reported* by the authors, or *assumed*
  because they did not report one (then the planner's default MFU of 0.40 is used and said so).

``compare`` names the published number the planner is held to (within 1.5x, see the tests), and
``kind`` says what agreement with it would show:

* ``"measured"``: an independent check of the time arithmetic: the published time was measured
  over the whole run, and the planner's throughput input is not derived from it;
* ``"consistency"``: the published time and the throughput the planner is given come from the
  same arithmetic (Megatron-LM's 84 days are its own projection 8TP/(nX) from the measured
  163 TFLOP/s; LLaMA 65B's GPU-hours and its 380 tokens/s per GPU describe the same run), so
  agreement only checks that the planner counts FLOPs the same way;
* ``"flops"``: the authors published no time (GPT-3, Chinchilla); only the FLOP total is compared.

TPU runs are planned on the TPU's row of the hardware table, and their "GPU-hours" are chip-hours.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PublishedRun", "PUBLISHED_RUNS", "published_run", "MAX_REPORTED_MFU", "KINDS"]

KINDS = ("measured", "consistency", "flops")
# The MFU a run that reported no throughput is replayed at: the planner's default (capacity.DEFAULT_MFU),
# given explicitly so that the replay times the run instead of predicting a layout for it.
ASSUMED_MFU = 0.40


@dataclass(frozen=True)
class PublishedRun:
    name: str
    cite: str                  # BibTeX key in references.bib
    published: dict            # metric -> published value ("total_flops", "gpu_hours", "days")
    compare: str               # which published metric the planner is checked against
    plan_kwargs: dict          # arguments of planner.capacity.plan that replay the run
    throughput_source: str     # "reported", "assumed", or "n/a" (FLOPs-only comparison)
    note: str                  # where each number sits in the source, and caveats
    outlier: str = ""          # non-empty: why the planner is known to miss this run by > 1.5x
    extra: dict = field(default_factory=dict)
    kind: str = "measured"     # one of KINDS: what agreement with the published number shows


PUBLISHED_RUNS = (
    PublishedRun(
        "GPT-3 175B", "brown2020gpt3", {"total_flops": 3.14e23}, "total_flops",
        dict(params=175.0e9, tokens=300e9), "n/a",
        "Brown et al. Table D.1: 3.14e23 training FLOPs (3.64e3 PF-days), 300B tokens (Table 2.2); "
        "trained on V100s, outside the hardware table, so only FLOPs are compared.", kind="flops"),
    PublishedRun(
        "Chinchilla 70B", "hoffmann2022chinchilla", {"total_flops": 5.76e23}, "total_flops",
        dict(params=70e9, tokens=1.4e12), "n/a",
        "Hoffmann et al.: Chinchilla (70B, 1.4T tokens) uses Gopher's budget of 5.76e23 FLOPs; "
        "TPUv3/v4, so only FLOPs are compared.", kind="flops"),
    PublishedRun(
        "Gopher 280B", "rae2021gopher", {"gpu_hours": 4096 * 920, "total_flops": 6.31e23}, "gpu_hours",
        dict(params=280e9, tokens=300e9, gpu="TPUv3", gpus=4096, mfu=0.325, recompute="full",
             seq_len=2048, vocab=32000, global_batch_tokens=6e6),
        "reported",
        "Rae et al. (2021): 280B parameters, 80 layers, h=16384, 128 heads, 2048-token context, 32K "
        "vocabulary, 300B tokens, batch 3M rising to 6M tokens; Appendix F: 4096 TPUv3 chips for 920 "
        "hours (= 3,768,320 chip-hours) and 6.31e23 training FLOPs, which count rematerialization "
        "(hence full recomputation; the shape is left to the planner, as Gopher's relative position "
        "encodings are outside Megatron's FLOP count). MFU 32.5% from Chowdhery et al. (2022) Table 3.",
        extra={"mfu_cite": "chowdhery2022palm"}),
    PublishedRun(
        "PaLM 540B", "chowdhery2022palm", {"gpu_hours": 6144 * 1200 + 3072 * 336, "total_flops": 2.56e24},
        "gpu_hours",
        dict(params=540.35e9, tokens=780e9, gpu="TPUv4", gpus=6144, mfu=0.462, global_batch_tokens=4e6),
        "reported",
        "Chowdhery et al.: 540.35B parameters, 780B tokens, 2.56e24 training FLOPs, 46.2% MFU "
        "(Table 3; Appendix B); Sec. 12: trained 'on 6144 TPU v4 chips for 1200 hours and 3072 TPU v4 "
        "chips for 336 hours including some downtime and repeated steps' = 8,404,992 chip-hours.",
        outlier="46.2% MFU is the steady-state throughput; the published chip-hours include downtime and "
                "repeated steps (the paper says so), about 1.5x the steady-state time."),
    PublishedRun(
        "Megatron-LM 1T", "narayanan2021megatron", {"days": 84.0}, "days",
        dict(params=1008e9, tokens=450e9, gpu="A100-80GB", gpus=3072, achieved_tflops=163,
             recompute="full", layers=128, hidden=25600, heads=160, vocab=51200, seq_len=2048,
             global_batch_tokens=3072 * 2048),
        "reported",
        "Narayanan et al. Table 1: 1008B parameters, 3072 A100s, batch 3072, 163 TFLOP/s per GPU "
        "(counted with full recomputation, Eq. 3); Sec. 5.1 estimates 84 days for 450B tokens. "
        "That published figure is itself a prediction from 8TP/(nX), not a finished run: the "
        "planner's agreement with it is an identity (Eq. 3 against its approximation 8TP), not a check.",
        kind="consistency"),
    PublishedRun(
        "OPT-175B", "zhang2022opt", {"gpu_hours": 809_472}, "gpu_hours",
        dict(params=175e9, tokens=180e9, gpu="A100-80GB", gpus=992, achieved_tflops=147,
             zero_stage=3, layers=96, hidden=12288, heads=96, vocab=50272, seq_len=2048,
             global_batch_tokens=2 ** 21),
        "reported",
        "Zhang et al.: 992 A100-80GB, up to 147 TFLOP/s per GPU, a 180B-token corpus, 2M-token "
        "batches, fully sharded data parallel (ZeRO-3) with Megatron TP; 96 layers, h=12288. GPU-hours "
        "from Touvron et al. (2023) Table 15: 809,472 (992 GPUs x 34 days, from the OPT logbook).",
        outlier="147 TFLOP/s is the best reported throughput, not the average: the OPT logbook "
                "records dozens of restarts, hardware replacements and rollbacks after loss "
                "spikes, so the run took about 2.3x the steady-state GPU-hours.",
        extra={"gpu_hours_cite": "touvron2023llama"}),
    PublishedRun(
        "BLOOM 176B", "workshop2022bloom", {"gpu_hours": 1_082_990}, "gpu_hours",
        dict(params=176.247e9, tokens=366e9, gpu="A100-80GB", gpus=384, achieved_tflops=149.77,
             recompute="full", zero_stage=1, layers=70, hidden=14336, heads=112, vocab=250880,
             seq_len=2048, global_batch_tokens=2048 * 2048),
        "reported",
        "BigScience Workshop (2022): 384 A100-80GB for about 3.5 months, 1,082,990 compute hours, "
        "366B tokens, ZeRO stage 1; 70 layers, h=14336, 112 heads. Throughput: the achieved 149.77 "
        "TFLOP/s per GPU of the tr11 training log (iteration 85376, the same number the step-time "
        "chapter uses), counted by Megatron-DeepSpeed with activation checkpointing (so replayed "
        "with full recomputation) and the vocabulary padded to 250,880 (so replayed with it); the "
        "paper's 156 TFLOP/s is its fastest configuration, not the run's average.",
        extra={"tflops_cite": "bigscience2022tr11"}),
    PublishedRun(
        "LLaMA 65B", "touvron2023llama", {"gpu_hours": 1_022_362}, "gpu_hours",
        dict(params=65.2e9, tokens=1.4e12, gpu="A100-80GB", gpus=2048,
             achieved_tflops=6 * 65.2e9 * 380 / 1e12, global_batch_tokens=4e6),
        "reported",
        "Touvron et al. (2023): 380 tokens/s/GPU on 2048 A100-80GB (about 21 days for 1.4T "
        "tokens), i.e. 6 N x 380 = 149 TFLOP/s; Table 15: 1,022,362 GPU-hours. Both numbers "
        "describe the same run, so the planner reproducing one from the other is a consistency check.",
        kind="consistency"),
    PublishedRun(
        "Llama 2 7B", "touvron2023llama2", {"gpu_hours": 184_320}, "gpu_hours",
        dict(params=7e9, tokens=2e12, gpu="A100-80GB", seq_len=4096, global_batch_tokens=4e6, mfu=ASSUMED_MFU),
        "assumed",
        "Touvron et al. (2023b) Table 2 (and the Llama 2 model card): 184,320 A100-80GB GPU-hours "
        "for pretraining, 2.0T tokens, 4M-token batches, 4K context. No throughput or GPU count is reported: the "
        "planner's default MFU of 0.40 is assumed."),
    PublishedRun(
        "Llama 2 70B", "touvron2023llama2", {"gpu_hours": 1_720_320}, "gpu_hours",
        dict(params=70e9, tokens=2e12, gpu="A100-80GB", seq_len=4096, global_batch_tokens=4e6, mfu=ASSUMED_MFU),
        "assumed",
        "Touvron et al. (2023b) Table 2 (and the Llama 2 model card): 1,720,320 A100-80GB GPU-hours "
        "for pretraining, 2.0T tokens, 4M-token batches, 4K context (grouped-query attention and a "
        "SwiGLU MLP, outside Megatron's FLOP count, so 6ND is used). No throughput or GPU count is "
        "reported: MFU 0.40 is assumed."),
    PublishedRun(
        "Falcon 180B", "almazrouei2023falcon", {"gpu_hours": 7.0e6}, "gpu_hours",
        dict(params=180e9, tokens=3.5e12, gpu="A100-40GB", gpus=4096, seq_len=2048, mfu=ASSUMED_MFU),
        "assumed",
        "Almazrouei et al. (2023) and the release post: 180B parameters, 3.5T tokens, up to 4,096 "
        "A100-40GB on AWS SageMaker, 'a total of ~7,000,000 GPU hours'. No MFU is stated with the "
        "GPU-hours: the planner's default 0.40 is assumed.",
        extra={"gpu_hours_cite": "huggingface2023falcon180b"}),
    PublishedRun(
        "MPT-7B", "mosaicml2023mpt7b", {"days": 9.5}, "days",
        dict(params=6.7e9, tokens=1e12, gpu="A100-40GB", gpus=440, seq_len=2048, mfu=ASSUMED_MFU),
        "assumed",
        "MosaicML (2023), blog post and model card: 6.7B parameters, 1T tokens, trained on 440 "
        "A100-40GB for about 9.5 days. No MFU is reported: the planner's default 0.40 is assumed."),
    PublishedRun(
        "Llama 3 405B", "dubey2024llama3", {"gpu_hours": 30.84e6, "total_flops": 3.8e25}, "gpu_hours",
        dict(params=405e9, tokens=15.6e12, gpu="H100", gpus=16384, mfu=0.40,
             global_batch_tokens=16e6),
        "reported",
        "Dubey et al.: 405B parameters, 15.6T tokens, 3.8e25 FLOPs, 16K H100s, BF16 MFU 38-43% "
        "(Table 4; we use 0.40); GPU-hours from the Llama 3.1 model card: 30.84M H100-hours "
        "for the 405B model.",
        extra={"gpu_hours_cite": "meta2024llama31card"}),
    PublishedRun(
        "DeepSeek-V3 (MoE)", "deepseek2024v3", {"gpu_hours": 2.664e6}, "gpu_hours",
        dict(model="deepseek-v3", active_params=37e9, tokens=14.8e12, gpu="H800", gpus=2048, mfu=ASSUMED_MFU,
             pp=16, ep=64, zero_stage=1, recompute="full", global_batch=15360),
        "assumed",
        "DeepSeek-AI (2024) Table 1: pre-training 2,664K H800 GPU-hours (2,788K with context "
        "extension and post-training), 14.8T tokens, 671B total / 37B activated parameters, 2048 "
        "H800s; Sec. 3.2: PP 16, EP 64 across 8 nodes, ZeRO-1 data parallelism, no TP; Sec. 4.2: 4K "
        "sequences, 15,360 per batch. The planner's deepseek-v3 preset (MLA, 256 experts, 3 dense "
        "layers) sets the memory; the paper recomputes norms and MLA up-projections and caches "
        "activations in FP8, which the planner's full recomputation stands in for. No MFU is reported "
        "(and GEMMs ran in FP8): the planner's default 0.40 of BF16 peak is assumed. The report states no "
        "rollbacks and that the 2,664K hours exclude context extension, so a ratio above 1 says only "
        "that its BF16-equivalent MFU was below the assumed 0.40."),
)

# The highest MFU published for a run of 10,000+ GPUs (the planner's ceiling for a bf16 plan that large),
# MegaScale's 175B on 12,288 A100s at 55.2% (Jiang et al. 2024, Table 2).  Smaller jobs reach more
# (MegaScale's own 256-GPU row: 65.3%), so smaller plans are held to the runs of mfu_ceiling instead.
MAX_REPORTED_MFU = 0.552


def published_run(name: str) -> PublishedRun:
    for run in PUBLISHED_RUNS:
        if run.name.lower() == name.lower():
            return run
    raise ValueError(f"unknown published run {name!r}; known: {', '.join(r.name for r in PUBLISHED_RUNS)}")
