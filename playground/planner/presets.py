"""Named models the planner knows by heart, each with where its shape and sequence length come from.

Each preset equals what ``hf_config.read_hf_config`` reads from the model's own ``config.json`` (the
copies in ``tests/planner/configs/`` are checked against these), except ``seq_len``: a config.json only
says how far positions reach at inference (``max_position_embeddings``), so the preset fixes the
length the model was pre-trained at, as its paper gives it.  Counts (``param_count``):

    gpt3-175b 174.6B   llama3-8b 8.03B   llama3-70b 70.6B   llama3-405b 405.9B   mistral-7b 7.24B
    qwen3-8b 8.19B   mixtral-8x7b 46.7B (12.9B active)   qwen1.5-moe-a2.7b 14.3B (2.69B active)
    deepseek-v3 671.0B (37.6B active; the 14B multi-token-prediction module is not counted)
"""

from __future__ import annotations

from playground.planner.architecture import Model
from playground.planner.errors import PlanError

__all__ = ["PRESETS", "preset", "preset_names", "preset_source"]

# Llama and its descendants: rotary positions, RMSNorm, SwiGLU, no biases, an untied output layer.
_LLAMA = dict(gated_mlp=True, tied_embeddings=False, position_embeddings=False, norm="rmsnorm",
              qkv_bias=False, proj_bias=False)


def _llama(name: str, layers: int, hidden: int, heads: int, vocab: int, seq_len: int, ffn: int, kv_heads: int,
           **extra) -> Model:
    return Model(layers, hidden, heads, vocab, seq_len, ffn, kv_heads, name=name, **{**_LLAMA, **extra})


PRESETS: dict[str, tuple[Model, str]] = {
    "gpt3-175b": (
        Model(96, 12288, 96, 50257, 2048, name="gpt3-175b"),
        "Brown et al. 2020, Language Models are Few-Shot Learners, Table 2.1 (n_ctx 2048)"),
    "llama3-8b": (
        _llama("llama3-8b", 32, 4096, 32, 128256, 8192, 14336, 8),
        "Dubey et al. 2024, The Llama 3 Herd of Models, Table 3; pre-trained at 8,192 tokens (sec. 3.4); "
        "config.json of meta-llama/Meta-Llama-3-8B"),
    "llama3-70b": (
        _llama("llama3-70b", 80, 8192, 64, 128256, 8192, 28672, 8),
        "Dubey et al. 2024, The Llama 3 Herd of Models, Table 3; pre-trained at 8,192 tokens (sec. 3.4)"),
    "llama3-405b": (
        _llama("llama3-405b", 126, 16384, 128, 128256, 8192, 53248, 8),
        "Dubey et al. 2024, The Llama 3 Herd of Models, Table 3; pre-trained at 8,192 tokens (sec. 3.4)"),
    "mistral-7b": (
        _llama("mistral-7b", 32, 4096, 32, 32000, 8192, 14336, 8, sliding_window=4096, local_layers=32),
        "Jiang et al. 2023, Mistral 7B, Table 1 (context_len 8192, sliding window 4096); "
        "config.json of mistralai/Mistral-7B-v0.1"),
    "qwen3-8b": (
        _llama("qwen3-8b", 36, 4096, 32, 151936, 4096, 12288, 8, qk_norm=True),
        "Qwen Team 2025, Qwen3 Technical Report: general and reasoning stages at 4,096 tokens, then a "
        "32,768-token long-context stage; config.json of Qwen/Qwen3-8B"),
    "mixtral-8x7b": (
        _llama("mixtral-8x7b", 32, 4096, 32, 32000, 32768, 14336, 8, experts=8, top_k=2, moe_ffn=14336),
        "Jiang et al. 2024, Mixtral of Experts, sec. 2 (trained with a 32k-token context); "
        "config.json of mistralai/Mixtral-8x7B-v0.1"),
    "qwen1.5-moe-a2.7b": (
        _llama("qwen1.5-moe-a2.7b", 24, 2048, 16, 151936, 8192, 5632, 16, qkv_bias=True, experts=60, top_k=4,
               moe_ffn=1408, shared_experts=1, shared_ffn=5632, shared_expert_gate=True),
        "Qwen Team 2024, blog 'Qwen1.5-MoE: Matching 7B Model Performance with 1/3 Activated Parameters'; "
        "pre-training length not published, 8,192 assumed; config.json of Qwen/Qwen1.5-MoE-A2.7B"),
    "deepseek-v3": (
        _llama("deepseek-v3", 61, 7168, 128, 129280, 4096, 18432, 128, experts=256, top_k=8, moe_ffn=2048,
               shared_experts=1, router_bias=True, dense_layers=3, q_lora_rank=1536, kv_lora_rank=512,
               qk_rope_dim=64, head_dim=192, v_head_dim=128, expert_groups=8, groups_per_token=4),
        "DeepSeek-AI 2024, DeepSeek-V3 Technical Report, sec. 4.2 (pre-trained at 4,096 tokens, then "
        "extended to 32K and 128K with YaRN); config.json of deepseek-ai/DeepSeek-V3"),
}


def preset_names() -> list[str]:
    return list(PRESETS)


def _entry(name: str) -> tuple[Model, str]:
    key = name.strip().lower()
    if key not in PRESETS:
        hint = "; a config.json goes to --hf-config" if key.endswith(".json") or "/" in key else ""
        raise PlanError(f"unknown model {name!r}; known: {', '.join(PRESETS)}{hint}")
    return PRESETS[key]


def preset(name: str) -> Model:
    """The named model (case-insensitive), its ``name`` the preset's."""
    return _entry(name)[0]


def preset_source(name: str) -> str:
    """Where the preset's shape and pre-training sequence length come from."""
    return _entry(name)[1]
