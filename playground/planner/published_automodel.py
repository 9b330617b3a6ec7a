"""NeMo AutoModel's pre-training benchmarks: PyTorch's FSDP2 with expert parallelism on H100s, in BF16.

Its ``docs/performance-summary.md`` table gives, per run, the GPUs, global, micro- and local batch,
accumulation, sequence, TP / PP / CP / EP / VP, the FSDP degree, the kernels (Transformer Engine's
attention, linear layers and RMSNorm, DeepEP's dispatcher; FlexAttention for gpt-oss), the step time
and tokens/s per GPU.  What the table leaves out its benchmark configs state
(``examples/benchmark/configs/*.yaml``, read at a later commit than the table, so each row's note says
what it takes from them): activation checkpointing, ``reshard_after_forward``, the loss on bf16 logits
(``MaskedCrossEntropy(fp32_upcast=False)``), forced-balanced routing (``fake_balanced_gate``) and, for
gpt-oss, the expert-parallel degree the table prints as "-".  Mock data, no gradient clipping.

``AUTOMODEL_2604`` is the one dense row the page gained in April 2026, Llama 3.1 70B under FSDP2 and
context parallelism on 64 H100s: held out (read last, replayed before any change).
"""

from __future__ import annotations

from dataclasses import replace

from playground.planner.costs import Layout
from playground.planner.hf_config import model_from_hf_dict
from playground.planner.presets import preset
from playground.planner.published_row import PublishedStackRun, llama31
from playground.planner.published_zoo import qwen3_moe

__all__ = ["AUTOMODEL", "AUTOMODEL_2604", "AUTOMODEL_HYBRID", "DEEPSEEK_V3_4K", "NEMOTRON_3_NANO", "QWEN3_30B",
           "gpt_oss"]

_SOURCE = ("https://github.com/NVIDIA-NeMo/Automodel/blob/01926a5c443b7979463c73341bf64adf79de638e/docs/"
           "performance-summary.md (System: DGX-H100, Precision: BF16; 'Last Updated 2025-10-02'); settings "
           "beyond the table from examples/benchmark/configs/*.yaml at 037e04a6a256 (Kimi K2: 080dca533b63)")
_COMMON = ("FSDP2 over DP (the table's FSDP column), EP inside it; DeepEP dispatch, forced-balanced routing "
           "(fake_balanced_gate); the loss on the bf16 logits (fp32_upcast false: loss_fp32 off); gradient "
           "reduction dtype not stated (fp32 taken)")


def _row(name, model, gpus, layout, tps, note, unstated=()):
    layout = replace(layout, zero_stage=3, ep_dispatch="deepep", loss_fp32=False)
    return PublishedStackRun(f"{name}, {gpus} H100", "NeMo AutoModel (FSDP2 + EP)", _SOURCE, "H100", model, layout,
                             ("grad_reduce",) + unstated, tokens_per_s_per_gpu=tps, note=f"{_COMMON}; {note}",
                             cite="nvidia2025automodel")


def gpt_oss(layers: int, experts: int, name: str):
    """gpt-oss's config.json (openai/gpt-oss-20b and -120b; the planner's keys, as
    chapters/configs/families holds them): windows of 128 on every other layer, biased experts."""
    return model_from_hf_dict(dict(
        model_type="gpt_oss", num_hidden_layers=layers, num_local_experts=experts, hidden_size=2880,
        intermediate_size=2880, head_dim=64, num_attention_heads=64, num_key_value_heads=8, num_experts_per_tok=4,
        experts_per_token=4, attention_bias=True, hidden_act="silu", sliding_window=128, vocab_size=201088,
        tie_word_embeddings=False, max_position_embeddings=131072,
        layer_types=["sliding_attention", "full_attention"] * (layers // 2)), seq_len=4096, name=name)


# Kimi K2's config.json (moonshotai/Kimi-K2-Instruct; as chapters/configs/families/kimi-k2 holds it)
_KIMI_K2 = model_from_hf_dict(dict(
    model_type="kimi_k2", hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048, num_hidden_layers=61,
    num_attention_heads=64, num_key_value_heads=64, n_shared_experts=1, n_routed_experts=384, kv_lora_rank=512,
    q_lora_rank=1536, qk_rope_head_dim=64, v_head_dim=128, qk_nope_head_dim=128, topk_method="noaux_tc", n_group=1,
    topk_group=1, num_experts_per_tok=8, moe_layer_freq=1, first_k_dense_replace=1, hidden_act="silu",
    vocab_size=163840, tie_word_embeddings=False, max_position_embeddings=131072), seq_len=4096, name="kimi-k2")


DEEPSEEK_V3_4K = replace(preset("deepseek-v3"), seq_len=4096)


QWEN3_30B = qwen3_moe(48, 2048, 32, 4, 6144, 128, 8, 768, 4096, "qwen3-30b-a3b")
_GPT_OSS_NOTE = ("FlexAttention for the sliding windows and the sinks, taken at FlashAttention-2's rate "
                 "(attention_kernel fa2); EP from the config (ep_size {ep}), the table prints '-'; no activation "
                 "checkpointing; gpt-oss's clamped SwiGLU priced as a fused SwiGLU")
# Nemotron 3 Nano's config.json (nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16; as chapters/configs/families/nemotron-3-nano
# holds it): 23 Mamba-2 mixers, 6 attention layers and 23 MoEs of 128 squared-ReLU experts and a shared one
NEMOTRON_3_NANO = model_from_hf_dict(dict(
    model_type="nemotron_h", hidden_size=2688, num_hidden_layers=52,
    hybrid_override_pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", num_attention_heads=32,
    num_key_value_heads=2, head_dim=128, intermediate_size=1856, mlp_hidden_act="relu2", mamba_num_heads=64,
    mamba_head_dim=64, ssm_state_size=128, n_groups=8, conv_kernel=4, chunk_size=128, n_routed_experts=128,
    num_experts_per_tok=6, moe_intermediate_size=1856, moe_shared_expert_intermediate_size=3712, n_shared_experts=1,
    vocab_size=131072, tie_word_embeddings=False, max_position_embeddings=262144), seq_len=4096,
    name="nemotron-3-nano")
_SOURCE_NANO = ("https://github.com/NVIDIA-NeMo/Automodel/blob/main/docs/performance-summary.md as of 2026-04-17 (also "
                "docs.nvidia.com/nemo/automodel/latest/performance/performance-summary.md; System: DGX-H100, Precision: "
                "BF16: Nemotron V3 Nano 30B (26.02), 8 GPUs, 15.614 s a step); settings from "
                "examples/benchmark/configs/nemotron_nano_v3_te_deepep.yaml at 08a48f76cef6")
_DSV3_NOTE = ("activation checkpointing on, reshard_after_forward off (the config); the interleaved 1F1B "
              "schedule, two layers a virtual stage; the multi-token-prediction module not in the config")

AUTOMODEL = (
    _row("Qwen3 MoE 30B, FSDP 8 EP 8, MBS 4", QWEN3_30B, 8,
         Layout.today(1, 1, 8, ep=8, micro_batch=4, global_batch=512, attention_kernel="cudnn", recompute="full"),
         12040, "Transformer Engine attention: cuDNN's, which TE picks over FlashAttention on Hopper and later "
                "(its get_attention_backend: \"give FusedAttention preference on Hopper+\"); activation "
                "checkpointing on (the config)"),
    _row("gpt-oss 20B, FSDP 8 EP 8, MBS 2", gpt_oss(24, 32, "gpt-oss-20b"), 8,
         Layout.today(1, 1, 8, ep=8, micro_batch=2, global_batch=256, attention_kernel="fa2"),
         13058, _GPT_OSS_NOTE.format(ep=8)),
    _row("gpt-oss 120B, FSDP 64 EP 64, MBS 2", gpt_oss(36, 128, "gpt-oss-120b"), 64,
         Layout.today(1, 1, 64, ep=64, micro_batch=2, global_batch=512, attention_kernel="fa2"),
         7626, _GPT_OSS_NOTE.format(ep=64)),
    _row("DeepSeek-V3 671B, PP 4 VP 8 EP 64 FSDP 64", DEEPSEEK_V3_4K, 256,
         Layout.today(1, 4, 64, ep=64, micro_batch=1, global_batch=512, vpp=8, attention_kernel="cudnn",
                      recompute="full", reshard_after_forward=False), 1002, _DSV3_NOTE),
    _row("DeepSeek-V3 671B, PP 4 VP 8 EP 64 FSDP 256", DEEPSEEK_V3_4K, 1024,
         Layout.today(1, 4, 256, ep=64, micro_batch=1, global_batch=8192, vpp=8, attention_kernel="cudnn",
                      recompute="full", reshard_after_forward=False), 865, _DSV3_NOTE),
    _row("Kimi K2 1T, PP 8 VP 4 EP 32 FSDP 32", _KIMI_K2, 256,
         Layout.today(1, 8, 32, ep=32, micro_batch=1, global_batch=512, vpp=4, attention_kernel="cudnn",
                      recompute="full"), 924,
         "activation checkpointing on (the config); reshard_after_forward not in it (FSDP2's default, on, "
         "taken); the interleaved 1F1B schedule, two layers a virtual stage", ("reshard_after_forward",)),
)
# The hybrid's row, read once the model held Mamba-2 mixers (``ssm``) and replayed before anything was changed for
# it: 0.89 of the published tokens/s.
AUTOMODEL_HYBRID = (PublishedStackRun(
    "Nemotron 3 Nano 30B-A3B, FSDP 8 EP 8, MBS 4, 8 H100", "NeMo AutoModel (FSDP2 + EP)", _SOURCE_NANO, "H100",
    NEMOTRON_3_NANO,
    replace(Layout.today(1, 1, 8, ep=8, micro_batch=4, global_batch=512, attention_kernel="fa2", recompute="full"),
            zero_stage=3, ep_dispatch="deepep", loss_fp32=False),
    ("grad_reduce",), step_time_s=15.614, tokens_per_s_per_gpu=16789,
    note=(f"{_COMMON}; activation checkpointing on (the config); PyTorch's SDPA for the 6 attention layers (its "
          "backend not stated: FlashAttention-2, its first choice, taken); the Mamba-2 mixers' scan as Megatron-Core's "
          "kernels run it (ssm.Mamba2)"),
    cite="nvidia2025automodel"),)

# Held out: the page's Llama 3.1 70B pre-training row, added in April 2026 (absent from the page read
# above), read after everything else and replayed before anything in the model was changed for it.  First
# replay: 18.48 s a step predicted against 18.90 s published (1.02), range 0.84-1.35, judged to fit (30 GiB).
_SOURCE_2604 = ("https://github.com/NVIDIA-NeMo/Automodel/blob/2013a4dd6e932c4e4f48ca6b4a3fc295cdd64e33/docs/"
                "performance-summary.md (System: DGX-H100, Precision: BF16: Llama3 70B, 64 GPUs, 18.90 s a step); "
                "settings from examples/llm_pretrain/custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml at that commit")
AUTOMODEL_2604 = (PublishedStackRun(
    "Llama 3.1 70B, FSDP 32 CP 2, 8K, 64 H100", "NeMo AutoModel 2026-04 (held out)", _SOURCE_2604, "H100",
    llama31("70b", 8192),
    Layout.today(1, 1, 32, cp=2, micro_batch=1, global_batch=128, zero_stage=3, recompute="full",
                 attention_kernel="fa2", cp_method="allgather"),
    ("grad_reduce", "cp_method"), step_time_s=18.90, tokens_per_s_per_gpu=866.77,
    note=("FSDP2 with prefetch over DP 32, CP 2 (PyTorch's context parallelism: its default all-gather "
          "rotation taken, the ring in the range), full activation checkpointing, torch.compile, bf16; SDPA "
          "attention (its backend not stated: FlashAttention-2, PyTorch's first choice, taken); the loss upcast "
          "to fp32 (MaskedCrossEntropy's default); gradient-reduction dtype not stated (fp32 taken)"),
    cite="nvidia2025automodel"),)
