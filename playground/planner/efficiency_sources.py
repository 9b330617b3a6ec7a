"""Where each of the step-time model's constants (``efficiency.Efficiency``) comes from, in words.

One entry per constant: a cited measurement with its address (a datasheet, a published microbenchmark such
as nccl-tests' bus bandwidth or a maximum-achievable-matmul table, a paper's figure), an accounting of the
bytes a kernel moves, a measurement made for this course, or "assumed".  ``Efficiency.sources`` starts from
this table; ``Efficiency.spread`` gives each constant's (low, high) over the same sources.
"""

from __future__ import annotations

__all__ = ["SOURCES"]

_MAMF = ("https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md"
         "#maximum-achievable-matmul-flops-comparison-table")
_NCCL_212 = "https://github.com/NVIDIA/nccl-tests/issues/212"
_NCCL_178 = "https://github.com/NVIDIA/nccl-tests/issues/178"
_MM_GUIDE = "https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/index.html"
_DEEPGEMM = "https://github.com/deepseek-ai/DeepGEMM (README, news of 2025-04-18)"
_TILELANG = "https://github.com/tile-ai/tilelang/blob/main/benchmark/matmul_fp8/README.md"
_FRYER = "https://github.com/huggingface/gpu-fryer (README, reference table and 'How it works')"

# every constant: where its value comes from (a cited measurement, an accounting, or "assumed")
SOURCES = {
    "gemm": "published measurement: Maximum Achievable Matmul FLOPS (mamf-finder.py, bf16, best shape "
            "found, mean of 100 iterations): A100 SXM 271.2 of 312 TFLOPS = 86.9%, H100 SXM 794.5 of 989 "
            "= 80.3% ('H200 is the same'), B200 SXM 1745 of 2250 = 77.6%; " + _MAMF + "; 0.80 is the H100/"
            "H200 row; NVIDIA's Matrix Multiplication Background guide explains the gap (tile and wave "
            "quantization), " + _MM_GUIDE + "; off the best shape, square bf16 matmuls on one H100 SXM: 797.5 "
            "TFLOPS at 8192 (80.6%), 719.7 at 10240 (72.7%), https://github.com/zzc0721/torch-performance-"
            "test-data/issues/79, the spread's low end; short runs all: a run held at a Hopper's power limit keeps "
            "hopper_sustained of them; checked at a step's shapes against OpenXLA's table of cuBLAS's measured "
            "bf16 rates (published_gemms): on Hopper within 6% wherever every side is at least 2,048",
    "fp8_gemm": "published measurements on H800 SXM (the H100's compute): DeepGEMM's FP8 GEMMs 'up to 1550 "
                "TFLOPS' of 1979 = 78% at their best shape after tuning, 1350+ (68%) at release, " + _DEEPGEMM
                + "; TileLang's FP8 matmul benchmark M = N = 8192: 1378-1467 TFLOPS at K = 4096, 1461-1507 "
                "at K = 8192 (70-76%), " + _TILELANG + "; 0.70 is the K = 4096 reading, the shapes of a "
                "training step's GEMMs",
    "fp8_split_accumulation": "published measurement, read from the stacks' code: a Hopper's FP8 tensor cores "
                              "accumulate at reduced precision unless the GEMM promotes its partial sums to fp32 as it "
                              "goes (cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM off, 'split accumulator'), which costs "
                              "time; Transformer Engine runs the forward GEMM fast and both backward GEMMs split "
                              "(transformer_engine/pytorch/module/base.py _2X_ACC_FPROP False, _2X_ACC_DGRAD and "
                              "_2X_ACC_WGRAD True; recipe Float8CurrentScaling's MMParams; common/gemm/cublaslt_gemm.cu "
                              "sets fastAccuMode from it, read at d0067d0da), as torchao's float8 does (use_fast_accum "
                              "in the forward only); a user measured 'enabling fast accumulation can lead to a 1.1x to "
                              "1.2x speedup' (https://github.com/pytorch/ao/issues/2377, 2025-06-14, the maintainers "
                              "agreeing it trades accuracy for speed): 1.15 the middle.  The fast rate is fp8_gemm's "
                              "(TileLang's benchmark kernel accumulates in the tensor cores, no promotion: "
                              "benchmark/matmul_fp8/benchmark_matmul.py); block scaling's kernels promote in "
                              "every GEMM and DeepGEMM's measured rates behind fp8_gemm include it; a Blackwell has no "
                              "fast mode (its tensor cores accumulate at full precision; 'there is no fastAccuMode for "
                              "sm100', https://github.com/NVIDIA/TransformerEngine/pull/2748)",
    "attention_fa2": "published: FlashAttention-2 'reaching 50-73% of the theoretical maximum FLOPs/s on A100' "
                     "(Dao 2023, https://arxiv.org/abs/2307.08691, abstract; causal runs counted on the FLOPs executed); 0.55 "
                     "taken for forward and backward together, the backward being the slower; the kernel "
                     "of GPUs without a faster one",
    "attention_fa1": "published: the first FlashAttention 'reaching only 25-40% of the theoretical maximum "
                     "FLOPs/s' (Dao 2023, FlashAttention-2, https://arxiv.org/abs/2307.08691, abstract); the "
                     "kernels of 2022-23 (FlashAttention-1, its Triton port that MPT and llm-foundry ran); 0.325 "
                     "the middle; on Hopper scaled as FlashAttention-2 is (attention_fa2_hopper / attention_fa2)",
    "attention_fa2_hopper": "published measurement: the FlashAttention-3 paper's H100 SXM5 benchmark figures at "
                            "head dim 128, 'Attention forward speed' with the causal mask and 'Attention backward "
                            "speed' (Shah et al. 2024, https://arxiv.org/abs/2407.08608, Sec. 4.1): "
                            "FlashAttention-2's causal forward 260 / 298 / 319 / 333 / 335 TFLOPS at 1K / 2K / "
                            "4K / 8K / 16K tokens, its backward 260 / 291 / 310 / 318 / 322; a step runs the "
                            "backward's 2.5 forwards of FLOPs at the backward's rate, so together 1 + 2.5 FLOPs "
                            "over 1/319 + 2.5/310 = 312 TFLOPS at 4K, 0.32 of the dense peak (0.26 at 1K, 0.33 at "
                            "16K: the spread); 'FlashAttention-2 achieving only 35% utilization on the H100' (its "
                            "abstract) is the forward alone; PyTorch's SDPA flash backend is FlashAttention-2",
    "attention_fa2_blackwell": "published measurement: FlashAttention-2 on a B200, whose Ampere kernels (mma.sync, no "
                               "tcgen05) leave Blackwell's tensor cores mostly idle: tritonbench's flash_attention "
                               "operator, flash_v2, batch 8, 16 heads of 128, 315 / 352 / 354 / 362 / 331 TFLOPS at 1K / "
                               "2K / 4K / 8K / 16K tokens (https://github.com/meta-pytorch/tritonbench/pull/171, "
                               "2025-03-04), 354 / 2250 = 0.157 at 4K, 0.14 at 1K to 0.161 at 8K the spread; the forward, "
                               "and the backward runs alike at long sequences (flash-attn 2.7.4 on a B200, head dim 64: "
                               "forward 307 / 343, forward + backward 312 / 333 TFLOPS at 4K / 8K, "
                               "https://github.com/Dao-AILab/flash-attention/issues/1589); PyTorch SDPA's flash backend "
                               "on a Blackwell is this kernel",
    "attention_fa3": "published measurement: the same figures (H100 SXM5, head dim 128): FlashAttention-3's "
                     "causal forward 423 / 521 / 579 / 602 / 616 TFLOPS at 1K-16K, backward 424 / 501 / 542 / 559 / "
                     "561; cuDNN's 410 / 484 / 518 / 529 / 539 and 408 / 465 / 499 / 518 / 516 (Shah et al. 2024, "
                     "https://arxiv.org/abs/2407.08608, Sec. 4.1); composed as for FlashAttention-2, FlashAttention-3 "
                     "reaches 0.56 of the dense peak at 4K, spread from 1K (0.43) to 16K (0.58)",
    "attention_cudnn": "published measurement: cuDNN's fused attention in the same figures (H100 SXM5, head dim "
                       "128): causal forward 410 / 484 / 518 / 529 / 539 TFLOPS at 1K-16K, backward 408 / 465 / 499 / "
                       "518 / 516 (Shah et al. 2024, https://arxiv.org/abs/2407.08608, Sec. 4.1); composed as for "
                       "FlashAttention-2, 0.51 of the dense peak at 4K, spread from 1K (0.41) to 16K (0.53); the "
                       "kernel Transformer Engine selects on Hopper ('Select FusedAttention on sm90', "
                       "transformer_engine/pytorch/attention.py at v1.5, context parallelism included) and PyTorch's "
                       "SDPA ran on the H200 of chapter 5",
    "tp_overlap_hidden": "published measurements, read as a spread: the share of an overlapped tensor-parallel "
                         "collective's covered time (what the GEMM beside it covers) that the overlap takes off the "
                         "step; 1, the accounting, is the nominal.  torchtitan's async-TP tables of June 2025 (Llama "
                         "3.1 8B and 70B on H100s, bf16 and float8 tensorwise, 1.09-1.16x faster) gain what hiding "
                         "all of it predicts (https://github.com/pytorch/torchtitan/blob/c720cb872308d6d179b7fb3a4d6f"
                         "f6ed8029bc27/benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md); NVIDIA's DGX Cloud "
                         "recipes with Transformer Engine's TP overlap on (ub_tp_comm_overlap) ran as fast as hiding "
                         "none of it predicts (https://github.com/NVIDIA/dgxc-benchmarking, v25.01), while Megatron-LM's "
                         "own weak-scaling runs with it (--tp-comm-overlap, GPT 7.1B-462B on H100s, README of July "
                         "2024) ran about as fast as hiding all of it predicts: the spread, 0-1",
    "ep_overlap_hidden": "published measurement: the share of an overlapped expert-parallel all-to-all's covered "
                         "time (what the paired micro-batch's compute covers) that the overlap takes off the step.  "
                         "Megatron-Bridge's Nsight comparison of Megatron-Core's EP overlap "
                         "(overlap_moe_expert_parallel_comm; Qwen3-30B-A3B, 16 H100s, BF16, EP 16, HybridEP, "
                         "2026-07-25): communication concurrent with GEMMs and attention rose from 0.11% to 36.55% "
                         "of its time, and the step fell from 24.71 s to 20.99 s, about that hidden time "
                         "(skills/nemo-mbridge-perf-moe-comm-overlap/SKILL.md, https://github.com/NVIDIA-NeMo/"
                         "Megatron-Bridge); 0.3655 taken.  DeepSeek-V3's DualPipe is reported to hide its "
                         "all-to-alls fully (arXiv:2412.19437 Sec. 3.2.1): the spread's high end, 1",
    "comm_sms": "published: NCCL's maintainer, 'NCCL uses the minimal number of SMs to achieve the performance "
                "of the platform ... on DGX with 8 NICs ... it would use 16 SMs' and 'NCCL CTAs won't share an SM "
                "with compute kernels', https://github.com/NVIDIA/nccl/issues/689; NVLink SHARP reaches peak "
                "with 6 (GTC 2024, quoted in https://github.com/NVIDIA/nccl/issues/1656); DeepSeek-V3 gives its "
                "all-to-all 20 SMs (arXiv:2412.19437 Sec. 3.2.2)",
    "hopper_sustained": "measurements of three Hopper parts, the same 8192 x 8192 bf16 matmul held (30-90 s) "
                        "against run briefly: Hugging Face's gpu-fryer, which multiplies such matrices with cuBLAS "
                        "for 60 s by default to find throttled GPUs, lists ~730 TFLOPS for a healthy H100 80GB HBM3 "
                        "and ~705 for a GH200, " + _FRYER + ", where a short torch.matmul run of that shape on an "
                        "H100 80GB HBM3 reaches 797.5 (https://github.com/zzc0721/torch-performance-test-data/issues/"
                        "79), as MAMF's best shape does (794.5): 0.915 (H100) and 0.884 (GH200); measured here on "
                        "one H200 with this package's bench gemm --hold 30 (results/gemm-nvidia-h200.json): 767.2 "
                        "TFLOPS run briefly, 646.6 held, 0.843, nvidia-smi reading the SM clock at 1440-1470 MHz "
                        "of 1980 at 690-695 W against the 700 W cap, the power cap the reason it gave (run again "
                        "on a freshly lent H200 machine the same day and held 90 s: 654.4 of 772.8, 0.847, "
                        "results/gemm-nvidia-h200-hold90.json).  0.884 is "
                        "the middle of the three: a training run holds its tensor cores at the power limit for "
                        "hours, and the kernel benchmarks behind gemm and the attention rates ran briefly.  Applied "
                        "to Hopper's bf16 GEMMs and attention only: gpu-fryer's FP8 matmul holds ~1530 TFLOPS (77% "
                        "of the FP8 peak), no lower than the short FP8 benchmarks behind fp8_gemm, FP8 drawing less "
                        "power (its README); no sustained measurement of an A100 found (1 there); a Blackwell's: "
                        "blackwell_sustained",
    "blackwell_sustained": "published measurement: FlashAttention-4's bf16 kernel run back to back on a B200 "
                           "(b 4, s 8192, 16 heads of 128) peaks at 1450 TFLOPS and, fully throttled, holds 1237 "
                           "(-15%), the SM clock falling from 1965 to ~1580 MHz at ~1000 W "
                           "(https://github.com/flashinfer-ai/flashinfer/pull/2899): 1237 / 1450 = 0.853, charged on "
                           "a Blackwell's bf16 GEMMs and attention as hopper_sustained is on a Hopper's; its FP8 GEMMs "
                           "are held to what Transformer Engine measured (blackwell_fp8, blackwell_mxfp8); nothing "
                           "measured beside a collective",
    "blackwell_fp8": "published measurement: Transformer Engine's own GEMM benchmark (benchmarks/gemm/benchmark_gemm.py; its "
                     "tutorial, https://github.com/NVIDIA/TransformerEngine/blob/d0067d0da6cb01811b8072a7d304f0e00344ce2b/docs/examples/"
                     "gemm_profiling/gemm_profiling.rst) on a B300 SXM6 (Blackwell; dense "
                     "peaks 2,250 TFLOPS bf16 and 4,500 FP8, a B200's), the twelve GEMMs of a layer of hidden 4,096 and "
                     "MLP 16,384 at 15,872 tokens (6.39 TFLOP a pass), 100 timed iterations each, inputs pre-quantized: "
                     "per-tensor FP8 6.812 ms a layer, 2,815 TFLOPS, 0.625 of the FP8 peak against fp8_gemm's 0.70: 0.894 "
                     "(its fprop 0.940, dgrad 0.871, wgrad 0.873: the spread); bf16 in the same run 13.102 ms, 0.650 of its "
                     "peak, where the model holds 0.80 x blackwell_sustained = 0.682 (5% above), so the two agree on how "
                     "a Blackwell runs held; read as what a Blackwell's FP8 GEMMs keep of fp8_gemm through a run",
    "blackwell_mxfp8": "published measurement: the same benchmark and run (https://github.com/NVIDIA/TransformerEngine/blob/"
                       "d0067d0da6cb01811b8072a7d304f0e00344ce2b/docs/examples/gemm_profiling/gemm_profiling.rst), MXFP8 "
                       "(32-element blocks, Blackwell's "
                       "block-scaled tensor-core instructions, what Transformer Engine's block scaling runs there): "
                       "7.161 ms a layer, 2,677 TFLOPS, 0.595 of the FP8 peak: 0.850 of fp8_gemm's rate (fprop 0.858, "
                       "dgrad 0.846, wgrad 0.845: the spread)",
    "comm_clock": "published measurement: an H800 running DeepGEMM's GEMMs with communication overlapped "
                  "'exceeded the limit' of power and its SM clock fell 'from 1980MHz to 1575 MHz' (0.795; "
                  "https://github.com/deepseek-ai/DeepGEMM/issues/120; its maintainers: expected, it depends on "
                  "the GPU); a short benchmark runs at the top clock, so a Hopper's tensor cores keep 0.795 of "
                  "its rate while a collective runs beside them, FP8 or bf16",
    "comm_share": "assumed, bounded: the share of a step's tensor-core time with a collective running beside "
                  "it (gradient reduce-scatters behind backward, FSDP's prefetched gathers, TP and CP "
                  "overlap, the power they draw from the same limit), between none (0) and all of it (1); "
                  "0.5 the middle",
    "power_exponent": "published, secondhand: 'capping an H100 at 600 W typically loses 10 to 15 % step "
                      "throughput' on transformer pretraining (FP8 15-20 %), Scale Atlas, https://factryze.ai/"
                      "scale-atlas/power/power-capping; (600/700)^x = 0.85-0.90 gives x = 0.68-1.05, 0.87 at "
                      "12.5 %; physics bounds it: the SM clock drops until the dynamic power alpha C V^2 f fits "
                      "the cap, so the clock goes as cap^(1/3) while the voltage follows it and as cap^1 (or "
                      "faster, the static power being fixed) once the voltage sits at its floor; torchtitan's "
                      "Grand Teton pages: 'the default 500W power limit, although tuning it up to 700W TDP can "
                      "potentially provide further speedups' (benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md)",
    "hbm": "published measurements: a memory-copy kernel on an A100 SXM4 80GB moves 1536 GB/s of its 2039 "
           "(75%, reads and writes counted, as this model counts them; https://github.com/AnjaliSandip/FastIceFlo, "
           "output/EffectiveMemoryThroughput.md); on an H100 SXM a third-party Nsight Compute study reports "
           "coalesced matrix loads at 2.8 of 3.35 TB/s (84%) and MLP weight loads at 2.6 (78%), "
           "https://mikamirai.com/blog/gpu-memory-bandwidth/; 0.80 sits inside them",
    "link": "published measurement: NCCL bus bandwidth (nccl-tests PERFORMANCE.md's busbw) against the "
            "one-direction line rate: H100 NVLink, NCCL's maintainer: 'with the protocol overhead (~20%) "
            "NCCL can get an effective NVLink bandwidth of 370GB/s' of 450 (82%), " + _NCCL_212 + "; "
            "A100 NVLink all_reduce_perf busbw 208 of 300 GB/s (69%), " + _NCCL_178 + "; a link inside "
            "a node (across nodes: network)",
    "network": "published measurements: NCCL's bus bandwidth across nodes against the NIC's line rate, "
               "higher than over NVLink: 'For NDR @ 400Gbps you should see 46-48GB/s per NIC' of 50 (92-96%; "
               "NCCL's maintainer, https://github.com/NVIDIA/nccl-tests/issues/290), 'you should get ... 24GB/s "
               "inter-node' on a 200 Gb/s HDR NIC's 25 (96%, https://github.com/NVIDIA/nccl/issues/412), a "
               "DGX-1's four 100 Gb/s NICs an all-reduce busbw of 48 GB/s of 50 (96%, "
               "https://github.com/NVIDIA/nccl-tests/issues/29); 0.94 the middle of the NDR reading",
    "kernel_s": "published measurement: launch cost per kernel on GB200, tritonbench PR #1017 "
                "(https://github.com/meta-pytorch/tritonbench/pull/1017): raw cuLaunchKernel 3.0 us, "
                "Triton's launcher 4.7 us, Inductor's per-kernel path 6.8 us; 5 us is their middle.  "
                "Checked as the device's idle time per kernel: Megatron-Bridge's Nsight comparison of "
                "Qwen3-30B-A3B on 16 H100s (EP 16, HybridEP, overlap off; skills/nemo-mbridge-perf-"
                "expert-parallel-overlap/SKILL.md) counts 463,348 kernels on rank 0 in a 24.714 s step whose "
                "GPU-active union is 22.821 s: 4.1 us idle a kernel; the course's eager MoE layer on one "
                "H200 (python -m playground.bench moe, results/moe-nvidia-h200*.json), wall time less the "
                "traced kernels' busy time over their count, median over its layers at 4,096-8,192 tokens: "
                "3.7 us launched eagerly, 6.5 after a host sync, 1.1 from a CUDA graph",
    "host_kernel_s": "measured: the host's time per kernel of the course's eager MoE layer on one H200 (python -m "
                     "playground.bench moe, results/moe-nvidia-h200.json and -tokens8192.json; torch 2.11, 2026-12-04): "
                     "a layer's forward and backward at 64 tokens, where launches set the pace, over the kernels it "
                     "launched, 24.8-39.5 us over three paths (grouped, grouped after a host sync, a GEMM per "
                     "expert) and six shapes, median 31.6; 32 taken.  It is Python, PyTorch's dispatcher and the "
                     "launch on that VM's host CPU: another host or a stack that launches from C++ differs",
    "graph_kernel_s": "measured: the device's idle time a kernel of the course's MoE layer captured in a CUDA graph "
                      "on one H200 (python -m playground.bench moe, its grouped_graph path; results/moe-nvidia-"
                      "h200*.json): wall time less the traced kernels' busy time over their count, median over its "
                      "layers at 4,096-8,192 tokens 1.1 us, 1.02-1.63 over the layers whose kernels run one at a "
                      "time; the gap a graphed MoE layer's kernels cost, as kernel_s is an eager one's",
    "latency_s": "bounded by published measurements, the value between them assumed: a small send/recv between "
                 "two H100s over NVLink takes ~3 us in nccl-tests (NCCL's maintainer, https://github.com/NVIDIA/nccl/"
                 "issues/1487); NCCL's own tuning model prints 25.2 us for a whole 8-byte all-reduce on an H100 "
                 "cluster (NCCL INFO '8 Bytes -> Algo 0 proto 0 time 25.200924', https://github.com/NVIDIA/nccl/"
                 "issues/1453), an upper end for one ring step or message; 10 us per step is taken",
    "tile": "NVIDIA's Matrix Multiplication Background guide: cuBLAS splits the output into thread-block "
            "tiles, 256x128 the largest of those it lists (then 128x256, 128x128 ...), and its tile-"
            "quantization examples use 256x128; " + _MM_GUIDE,
    "optimizer_bytes": "accounted: one fused Adam step reads the fp32 master weight, both moments and the "
                       "fp32 main gradient (16 B), writes weight and moments back (12 B) and the bf16 "
                       "copy of the weight (2 B) = 30 B; 28 B with bf16 gradients, 34 B when the fp32 "
                       "gradient is also zeroed",
    "loss_bytes": "accounted: HBM bytes per logit (token x vocabulary entry) of an unfused fp32 cross-entropy, "
                  "the loss torchtitan (logits.float() then F.cross_entropy), llm-foundry and Megatron's "
                  "vocab-parallel cross-entropy compute: the upcast reads 2 B and writes 4, log-softmax reads "
                  "its input twice (max, then the sum of exponentials) and writes once (12), its backward reads "
                  "the saved output and writes the gradient (8), the cast back to bf16 reads 4 and writes 2 = "
                  "36 B; a fused loss kernel (Liger's, Megatron's cross_entropy_loss_fusion) reads the bf16 "
                  "logits forward and backward and writes the gradient: 6 B, the spread's low end; Megatron's "
                  "unfused in-place chain (max, subtract, exp, sum, divide, then the backward's multiply) "
                  "moves 52 B, its high end",
}
