"""Published MoE runs: the Megatron MoE Model Zoo's Qwen3-235B-A22B on 256 H100s, and DeepSeek-V3 on 2,048 H800s.

Its ``best_practice/Qwen3/readme.md`` gives, per run, the dispatcher (DeepEP or Megatron's all-to-all),
TP, EP, PP, VPP, expert TP, DP, FSDP, micro- and global batch, the recompute modules and the step
time.  Two rows are one layout with and without "1F1B A2A overlap" (the all-to-alls of one
micro-batch behind another's compute: ``ep_overlap``); one cuts 94 layers into 96 chunks (PP 32 x VPP
3, the embedding and the loss a chunk each).  ``qwen3_moe`` builds the shape, which Megatron-Bridge's
Qwen3-30B-A3B row shares.  DeepSeek-V3's report states its layout (PP 16 with DualPipe, EP 64, ZeRO-1
over DP 128, FP8, no TP) and its pre-training's GPU hours, which give its tokens/s per GPU.
"""

from __future__ import annotations

from dataclasses import replace

from playground.planner.costs import Layout, Model
from playground.planner.hf_config import model_from_hf_dict
from playground.planner.presets import preset
from playground.planner.published_row import MEGATRON_MOE_HOST, TE_ATTENTION, PublishedStackRun, te_experts

__all__ = ["MOE_MODEL_ZOO", "DEEPSEEK_V3", "QWEN3_235B", "qwen3_moe"]


def qwen3_moe(layers, hidden, heads, kv, ffn, experts, top_k, moe_ffn, seq_len, name) -> Model:
    return Model(layers, hidden, heads, vocab=151936, seq_len=seq_len, ffn=ffn, kv_heads=kv, head_dim=128,
                 gated_mlp=True, tied_embeddings=False, position_embeddings=False, norm="rmsnorm", qkv_bias=False,
                 proj_bias=False, qk_norm=True, experts=experts, top_k=top_k, moe_ffn=moe_ffn, name=name)


_ZOO = ("https://github.com/yanring/Megatron-MoE-ModelZoo/blob/c1ad0b5c89f425d60febddc38e7f741a16f08bd1/"
        "best_practice/Qwen3/readme.md (256 H100, NVLink 4, InfiniBand 8 x 50 GB/s); shape "
        "model_configs/benchmarking/Qwen3-235B-A22B.yaml")
QWEN3_235B = qwen3_moe(94, 4096, 64, 4, 12288, 128, 8, 1536, 4096, "qwen3-235b-a22b")
_ZOO_NOTE = ("dropless or forced balance not stated (moe_imbalance unstated: 1 taken); the host's launch time "
             "not measured for Megatron-Core (" + MEGATRON_MOE_HOST + "); DeepEP rows: ep_dispatch "
             "deepep; BF16, distributed optimizer with overlapped grad reduce and param gather, gradients reduced "
             "in bf16 (no --accumulate-allreduce-grads-in-fp32: Megatron-LM's default), sequence parallelism, "
             "flash attention (the yaml); expert tensor parallelism ETP = 1 while TP > 1 (expert_tp=1: experts "
             "whole on each GPU, EP x EDP spanning TP x DP); the embedding and the loss count as layers in the "
             "pipeline split")
_NORM_ACT = "; recompute 'norm, act' (--recompute-modules layernorm moe_act: recompute_modules)"
_NORM_ACT_LAYOUT = dict(recompute="selective", recompute_modules=("layernorm", "moe_act"))
MOE_MODEL_ZOO = (
    PublishedStackRun("Qwen3-235B-A22B, TP 2 EP 8 FSDP 128, full recompute", "Megatron MoE Model Zoo", _ZOO, "H100",
                      QWEN3_235B, Layout.today(2, 1, 128, ep=8, expert_tp=1, micro_batch=4, global_batch=2048,
                                                zero_stage=3, recompute="full", ep_dispatch="deepep", grad_reduce="bf16"),
                      ("moe_imbalance", "moe_launch"), step_time_s=17.6, tflops_per_gpu=276, flop_count="model",
                      note=_ZOO_NOTE + "; DeepEP dispatcher; FSDP On (Megatron-FSDP), EDP 32, 'disable log para norm'",
                      cite="nvidia2025moemodelzoo"),
    PublishedStackRun("Qwen3-235B-A22B, TP 4 EP 8 PP 8 VPP 4, no recompute", "Megatron MoE Model Zoo", _ZOO, "H100",
                      QWEN3_235B, Layout.today(4, 8, 8, ep=8, expert_tp=1, micro_batch=1, global_batch=2048, vpp=4,
                                                ep_dispatch="deepep", grad_reduce="bf16"),
                      ("recompute", "moe_imbalance", "moe_launch"), step_time_s=29.0, tflops_per_gpu=167, flop_count="model",
                      note=_ZOO_NOTE + "; DeepEP dispatcher; EDP 4; the recompute cell is empty (none taken)",
                      cite="nvidia2025moemodelzoo"),
    PublishedStackRun("Qwen3-235B-A22B, TP 2 EP 32 PP 8 VPP 4, cross-node EP", "Megatron MoE Model Zoo", _ZOO, "H100",
                      QWEN3_235B, Layout.today(2, 8, 16, ep=32, expert_tp=1, micro_batch=1, global_batch=2048,
                                                vpp=4, ep_dispatch="deepep", grad_reduce="bf16", **_NORM_ACT_LAYOUT),
                      ("moe_imbalance", "moe_launch"), step_time_s=19.7, tflops_per_gpu=245, flop_count="model",
                      note=_ZOO_NOTE + "; DeepEP dispatcher; EDP 1; EP 32 spans four nodes" + _NORM_ACT
                      + "; the same layout with 1F1B A2A overlap ran 17.6 s (not modelled: no row)",
                      cite="nvidia2025moemodelzoo"),
    PublishedStackRun("Qwen3-235B-A22B, TP 2 EP 32 PP 8 VPP 4, cross-node EP, 1F1B A2A overlap",
                      "Megatron MoE Model Zoo", _ZOO, "H100",
                      QWEN3_235B, Layout.today(2, 8, 16, ep=32, expert_tp=1, micro_batch=1, global_batch=2048,
                                                vpp=4, ep_dispatch="deepep", grad_reduce="bf16", ep_overlap=True,
                                                **_NORM_ACT_LAYOUT),
                      ("moe_imbalance", "moe_launch"), step_time_s=17.6, tflops_per_gpu=276, flop_count="model",
                      note=_ZOO_NOTE + "; DeepEP dispatcher; EDP 1; EP 32 spans four nodes" + _NORM_ACT
                      + "; '+1f1b overlap': the row above with the all-to-alls behind another micro-batch's "
                      "compute (ep_overlap)", cite="nvidia2025moemodelzoo"),
    PublishedStackRun("Qwen3-235B-A22B, TP 2 EP 8 PP 32 VPP 3, all-to-all dispatcher", "Megatron MoE Model Zoo",
                      _ZOO, "H100",
                      QWEN3_235B, Layout.today(2, 32, 4, ep=8, expert_tp=1, micro_batch=1, global_batch=2048,
                                                vpp=3, grad_reduce="bf16", **_NORM_ACT_LAYOUT),
                      ("moe_imbalance", "moe_launch"), step_time_s=24.2, tflops_per_gpu=200, flop_count="model",
                      note=_ZOO_NOTE + "; Megatron's all-to-all dispatcher (A2A); EDP 1; 96 chunks for 94 layers, "
                      "the embedding and the loss a chunk each" + _NORM_ACT,
                      cite="nvidia2025moemodelzoo"),
)
# Qwen3-Next-80B-A3B (Qwen/Qwen3-Next-80B-A3B-Instruct's config.json, as chapters/configs/families holds it): 36 Gated
# DeltaNet layers and 12 of gated attention, each with an MoE of 512 experts of 512 and a gated shared one
QWEN3_NEXT = model_from_hf_dict(dict(
    model_type="qwen3_next", hidden_size=2048, intermediate_size=5120, num_hidden_layers=48, num_attention_heads=16,
    num_key_value_heads=2, head_dim=256, hidden_act="silu", full_attention_interval=4, linear_num_key_heads=16,
    linear_key_head_dim=128, linear_num_value_heads=32, linear_value_head_dim=128, linear_conv_kernel_dim=4,
    num_experts=512, num_experts_per_tok=10, moe_intermediate_size=512, shared_expert_intermediate_size=512,
    vocab_size=151936, tie_word_embeddings=False, max_position_embeddings=262144), seq_len=4096,
    name="qwen3-next-80b-a3b")
# The same table's hybrid, read once the model held Gated DeltaNet mixers (``ssm``) and replayed before anything was
# changed for it: 1.59 of the published speed, a run its source calls "not well tuned"
MOE_MODEL_ZOO += (
    PublishedStackRun("Qwen3-Next-80B-A3B, EP 32 PP 4 VPP 3, 128 H100", "Megatron MoE Model Zoo", _ZOO, "H100",
                      QWEN3_NEXT, Layout.today(1, 4, 32, ep=32, expert_tp=1, micro_batch=1, global_batch=256, vpp=3,
                                               ep_dispatch="deepep", grad_reduce="bf16", recompute="selective",
                                               recompute_modules=("layernorm", "moe_act", "shared_experts")),
                      ("moe_imbalance", "moe_launch"), step_time_s=2.2, tflops_per_gpu=89, flop_count="model",
                      note=_ZOO_NOTE + "; DeepEP dispatcher; EDP 1; recompute 'norm, act, shared_expert'; the Megatron-Core "
                      "dev branch of its day (bbc762d5), 'not well tuned', its table says", cite="nvidia2025moemodelzoo"),)
# Megatron-Core on Transformer Engine: cuDNN's fused attention on the H100s, the experts' GEMMs launched as its
# GroupedLinear launches them
MOE_MODEL_ZOO = tuple(replace(r, layout=replace(te_experts(r.layout), attention_kernel=TE_ATTENTION))
                      for r in MOE_MODEL_ZOO)

# ----------------------------------------------------------------------------- DeepSeek-V3
_DEEPSEEK = ("DeepSeek-AI 2024, DeepSeek-V3 Technical Report, arXiv:2412.19437: Sec. 3.1-3.2 (2,048 H800; PP 16 "
             "with DualPipe, EP 64 over 8 nodes, ZeRO-1 DP; no TP), Sec. 3.3 (FP8 mixed precision), Sec. 4.2 "
             "(4,096-token sequences, batch 3,072 -> 15,360 over the first 469B tokens, then 15,360), Table 1 "
             "(pre-training: 2,664K H800 GPU hours for 14.8T tokens = 1,543 tokens/s per GPU)")
DEEPSEEK_V3 = PublishedStackRun(
    "DeepSeek-V3, 2,048 H800, PP 16 (DualPipe) EP 64 DP 128, FP8", "DeepSeek-V3 (HAI-LLM), H800", _DEEPSEEK, "H800",
    preset("deepseek-v3"),
    Layout.today(1, 16, 128, ep=64, micro_batch=1, global_batch=15360, zero_stage=1, dtype="fp8",
                 ep_dispatch="deepep", ep_overlap=True, recompute="selective",
                 recompute_modules=("layernorm", "mla_up_proj", "moe_act"), fp8_activations=True,
                 moe_probs="combine", fp8_scaling="block", optimizer_moments="bf16"),
    ("micro_batch", "grad_reduce", "fp8_weight_cache", "moe_probs", "attention_kernel"),
    tokens_per_s_per_gpu=14.8e12 / (2.664e6 * 3600),
    note=("FP8 in 1 x 128 tiles for activations and 128 x 128 blocks for weights (Sec. 3.3.2: block scaling); "
          "the whole pre-training's average (batch ramp, the MTP module, any downtime included; the model takes "
          "batch 15,360 and no MTP); DualPipe taken as 1F1B with the all-to-alls behind the paired micro-batch "
          "(ep_overlap, credited with the share Megatron-Core's overlap was measured hiding, ep_overlap_hidden: "
          "the report says DualPipe hides them fully, the constant's spread reaches that; its smaller bubble not "
          "modelled); DeepEP with node-limited routing (each token to at "
          "most 4 nodes: the config's n_group 8, topk_group 4); RMSNorm, the MLA up-projections and the "
          "MoE SwiGLU's output recomputed (Megatron-Core's modules layernorm, mla_up_proj, moe_act) and the "
          "linear layers' inputs cached in FP8 (Sec. 3.3.4: fp8_activations; the attention output's E5M6 "
          "counted in bf16); HAI-LLM's MoE is not public: each expert's output taken as kept for the routing "
          "weights' gradient, as a combine that weights them keeps it (moe_probs combine; Megatron-Core since v0.13 "
          "weights them inside the activation instead, keeping less); the EMA kept on the CPU (nothing on the GPU); AdamW's moments in BF16 (Sec. 3.3.3: optimizer_moments bf16); micro-batch not stated (1 taken); the attention kernel not "
          "named (FlashAttention-3 taken; the range spans FlashAttention-2 and cuDNN's too)"),
    cite="deepseek2024v3")
