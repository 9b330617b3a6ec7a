"""The Megatron-Core MoE report's final throughputs: DeepSeek-V3 and Qwen3-235B on GB300s, GB200s and H100s, held out.

NVIDIA's "Scalable Training of Mixture-of-Experts Models with Megatron Core" (arXiv:2603.07685, March 2026) gives,
in its Table 11, per-GPU TFLOP/s and tokens/s of nine runs (Megatron-Core v0.16, force-balanced routing), and
their layouts in Appendix B: Table 20 (TP, PP, CP, EP, VPP, micro- and global batch) and B.2 (the dispatcher, the
recompute, the all-to-all overlap and the CUDA graphs, by model and platform).  Read so:

* the dispatcher HybridEP on the GB300s and GB200s, DeepEP on the H100s;
* the CUDA graphs over the attention, the router and the dispatch's preprocessing (Section 4.3.6: "leaving routed
  expert computation to execute normally"), none for DeepSeek-V3 on H100s: in every run the host launches the
  experts, each grouped GEMM a cuBLASLt GEMM per local expert as Transformer Engine issues them
  (``moe_launch="multi_stream"``, at the host time Transformer Engine measured; the range spans the rest);
* recompute: DeepSeek-V3 none on GB300s, the MLP on GB200s, and on H100s the MLP, MLA's up-projections, the norms
  and the MoE activation (Table 17 and Section 9.2.2; B.2 names the first two only); Qwen3-235B the MoE activation
  and the norms on GB200s and H100s, not stated on GB300s (none taken);
* the 1F1B all-to-all overlap (``ep_overlap``) on for DeepSeek-V3 on GB300s and H100s and for Qwen3-235B on GB200s
  and H100s, off for the others;
* experts not split by TP (Parallel Folding: "expert TP is always 1"); MXFP8 on Blackwell and blockwise FP8 on
  Hopper, both the model's FP8 under block scaling; the routed tokens force-balanced (``moe_imbalance`` 1).

Two readings of the report disagree, and the row follows the majority: DeepSeek-V3 on 1,024 H100s is PP 8 in Table
17, in Section 9.2.2's layout string (32 virtual stages at VPP 4) and in its text ("TP2/PP8"), PP 4 in Table 20.
DeepSeek-V3's runs keep Adam's moments in BF16 (Table 18: ``optimizer_moments="bf16"``, 8 bytes of optimizer state a
parameter, not 12).  What the model does not price: DeepSeek-V3's multi-token-prediction layer (one more MoE layer and
an output head; the preset has 61 layers) and the optimizer states DeepSeek-V3 offloads to the host on GB200s ("0.1-0.2
seconds per iteration").  Qwen3-235B at micro-batch 3 on GB200s offloads activations (``Layout.offload_modules``): Table 5
runs it at TP 1 and EP 64 with fine-grained activation offloading at 920 TF/s, Table 11's 919, without naming the
modules (``expert_fc1`` taken, the range spanning the others).  The report does not say how it counts
TFLOP/s; the rows compare tokens/s.  Not stated, spanned by the range: sequence parallelism, the gradient
reduction's dtype and overlap, whether the optimizer is distributed, the host's launch time (``moe_launch``), and
the recompute where the report names none or disagrees with itself.

These nine rows were read after everything else (session 40) and replayed before anything in the model was changed
for them: the fourth held-out set (``published_stacks.HELD_OUT_FIRST_REPLAY``).  First replay, predicted / published
tokens/s: DeepSeek-V3 0.98 (GB300), 1.02 and 1.17 (GB200, MXFP8 and BF16), 1.13 (H100); Qwen3-235B 0.86 (GB300),
1.10 and 1.08 (GB200), 0.88 (H100), 0.78 at 128K (GB300).  All nine within +-25%, eight within +-20% and inside their
ranges; seven judged to fit.  The memory model then learnt BF16 moments, which the report states for DeepSeek-V3
(the ratios moved by less than 0.001), and DeepSeek-V3 in BF16 on GB200s fits, tightly; then (session 41) activation
offloading, and Qwen3-235B at micro-batch 3 on GB200s fits (its ratio unmoved: the copies hide behind the passes).
Then (session 43) Blackwell Ultra's fused attention at the gain cuDNN's own benchmark measured on a GB300 over a
GB200 (``Efficiency.attention_fast_exp``, not read from these rows): the 128K run 0.85, inside its range, the GB300
runs at 4K 1.00 (DeepSeek-V3) and 0.88 (Qwen3-235B).
"""

from __future__ import annotations

from dataclasses import replace

from playground.planner.costs import Layout
from playground.planner.published_automodel import DEEPSEEK_V3_4K
from playground.planner.published_bridge import nvl72_block
from playground.planner.published_row import TE_ATTENTION, PublishedStackRun
from playground.planner.published_zoo import QWEN3_235B

__all__ = ["MCORE_MOE_REPORT"]

_SOURCE = ("NVIDIA 2026, Scalable Training of Mixture-of-Experts Models with Megatron Core, arXiv:2603.07685: "
           "Table 11 (throughput), Table 20 and Appendix B.2 (settings), Table 17 and Section 9.2.2 (DeepSeek-V3)")
_STACK = "Megatron-Core MoE report (v0.16) (held out)"
_UNSTATED = ("sequence_parallel", "overlap_grad_reduce", "grad_reduce", "distributed_optimizer", "moe_launch")
_QWEN3_128K = replace(QWEN3_235B, seq_len=131072, name="qwen3-235b-a22b-128k")
_ETP_NOTE = "experts not split by TP (Parallel Folding)"


def _row(label, model, gpu, gpus, dtype, tp, pp, cp, ep, vpp, mbs, gbs, tps, tflops, recompute=(), overlap=False,
         recompute_stated=True, note="", offload=()):
    fp8 = dtype != "BF16"
    moments = "bf16" if label == "DeepSeek-V3" else "fp32"   # Table 18: "Low-precision optimizer states" (BF16)
    layout = Layout.today(tp, pp, gpus // (tp * pp * cp), cp=cp, ep=ep, expert_tp=1, micro_batch=mbs,
                          moe_launch="multi_stream", global_batch=gbs, vpp=vpp, dtype="fp8" if fp8 else "bf16",
                          **(dict(fp8_scaling="block") if fp8 else {}),
                          ep_dispatch="deepep" if gpu == "H100" else "hybridep", ep_overlap=overlap,
                          attention_kernel=TE_ATTENTION, optimizer_moments=moments, offload_modules=offload,
                          **(dict(recompute="selective", recompute_modules=recompute) if recompute else {}))
    name = f"{label}, {gpus} {gpu}, TP {tp} PP {pp}" + (f" CP {cp}" if cp > 1 else "") + f" EP {ep} VPP {vpp}, {dtype}" \
        + (f", {model.seq_len // 1024}K" if model.seq_len > 4096 else "")
    settings = [f"{'HybridEP' if gpu != 'H100' else 'DeepEP'}",
                "the all-to-alls overlapped with another micro-batch's compute (1F1B overlap)" if overlap
                else "the all-to-alls not overlapped",
                f"recomputed: {', '.join(recompute)}" if recompute else "nothing recomputed" if recompute_stated
                else "the recompute not stated (none taken; the range spans it)",
                "the attention, router and preprocessing CUDA-graphed, the experts launched by the host"
                if not (gpu == "H100" and label == "DeepSeek-V3") else "no CUDA graphs",
                _ETP_NOTE, "force-balanced routing"] + (["Adam's moments in BF16 (Table 18)"] if moments == "bf16" else [])
    return PublishedStackRun(name, _STACK if gpu == "H100" else f"{_STACK}, {gpu}", _SOURCE, gpu, model, layout,
                             _UNSTATED + (() if recompute_stated else ("recompute",)) + (("offload_modules",) if offload else ()),
                             tokens_per_s_per_gpu=tps, tflops_per_gpu=tflops, flop_count="unstated",
                             note="; ".join(settings + ([note] if note else [])), cite="nvidia2026megatroncoremoe",
                             gpus_per_node=nvl72_block(gpus) if gpu.startswith("GB") else None)


_MTP = "DeepSeek-V3's multi-token-prediction layer not priced"
# The run that needs its activations offloaded to fit a GB200 (counted at 211.0 GB at micro-batch 3 with every one on
# the GPU): the report's Table 5 runs Qwen3-235B at TP 1 and EP 64 with fine-grained activation offloading at 920 TF/s,
# this row's 919, without naming the modules
_OFFLOAD_NOTE = ("fine-grained activation offloading read from Table 5 (Qwen3-235B at TP 1, EP 64 with it: 920 TF/s, "
                 "this row's 919); the modules not stated: expert_fc1 taken (what Megatron-Bridge's DeepSeek-V3 GB200 "
                 "recipe offloads), the range spans the others")
_OFFLOADED = ("expert_fc1",)
_MLP = ("mlp",)
_H100_DSV3 = ("mlp", "mla_up_proj", "layernorm", "moe_act")
_NORM_ACT = ("moe_act", "layernorm")

MCORE_MOE_REPORT = (
    _row("DeepSeek-V3", DEEPSEEK_V3_4K, "GB300", 256, "MXFP8", 1, 4, 1, 64, 4, 1, 8192, 4730, 1233, overlap=True,
         note=_MTP),
    _row("DeepSeek-V3", DEEPSEEK_V3_4K, "GB200", 256, "MXFP8", 1, 4, 1, 64, 4, 1, 8192, 4020, 1048, _MLP,
         note=_MTP + "; the optimizer states offloaded to the host (not priced)"),
    _row("DeepSeek-V3", DEEPSEEK_V3_4K, "GB200", 256, "BF16", 1, 8, 1, 32, 4, 1, 4096, 3298, 857, _MLP,
         note=_MTP + "; the optimizer states offloaded to the host (not counted)"),
    _row("DeepSeek-V3", DEEPSEEK_V3_4K, "H100", 1024, "FP8-BLK", 2, 8, 1, 64, 4, 1, 8192, 1412, 368, _H100_DSV3,
         overlap=True, recompute_stated=False,
         note=_MTP + "; PP 8 as Table 17 and Section 9.2.2 give it (Table 20: PP 4); the recompute as Table 17 and "
         "9.2.2 give it (B.2: up_proj and mlp), spanned by the range"),
    _row("Qwen3-235B", QWEN3_235B, "GB300", 256, "MXFP8", 1, 4, 1, 64, 6, 2, 3072, 6583, 974, recompute_stated=False),
    _row("Qwen3-235B", QWEN3_235B, "GB200", 256, "MXFP8", 1, 4, 1, 64, 6, 3, 3072, 6212, 919, _NORM_ACT, overlap=True,
         note=_OFFLOAD_NOTE, offload=_OFFLOADED),
    _row("Qwen3-235B", QWEN3_235B, "GB200", 256, "BF16", 1, 4, 1, 32, 12, 1, 8192, 5100, 750, _NORM_ACT, overlap=True),
    _row("Qwen3-235B", QWEN3_235B, "H100", 256, "BF16", 2, 8, 1, 32, 4, 1, 2048, 2132, 320, _NORM_ACT, overlap=True),
    _row("Qwen3-235B", _QWEN3_128K, "GB300", 128, "MXFP8", 4, 4, 4, 32, 12, 1, 1024, 1556, 1150,
         recompute_stated=False),
)
