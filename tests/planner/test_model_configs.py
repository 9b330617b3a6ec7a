"""Models from Hugging Face config.json files and from the named presets.

The fixtures in ``chapters/configs/<preset>/config.json`` (the book's worked examples) are copies of
the public config.json files; each folder is named after the preset it must agree with.
"""

import dataclasses
import json
from pathlib import Path

import pytest

from playground.planner.errors import PlanError
from playground.planner.hf_config import model_from_hf_dict, read_hf_config
from playground.planner.costs import flops_per_step
from playground.planner.layout import Layout
from playground.planner.presets import PRESETS, preset, preset_names, preset_source

CONFIGS = Path(__file__).resolve().parents[2] / "chapters" / "configs"
FIXTURES = sorted(p.name for p in CONFIGS.iterdir() if (p / "config.json").is_file())


def within_published_rounding(count: float, published: str) -> bool:
    """A published "8.03" (billions) is the count rounded or cut to its last digit: within one unit of it."""
    unit = 10.0 ** -len(published.partition(".")[2])
    return abs(count / 1e9 - float(published)) < unit


@pytest.mark.parametrize("folder, total, active", [
    ("llama3-8b", "8.03", None),             # Meta-Llama-3-8B model card
    ("mistral-7b", "7.24", None),            # Jiang et al. 2023: 7.24B
    ("qwen3-8b", "8.2", None),               # Qwen3-8B model card: 8.2B
    ("mixtral-8x7b", "46.7", "12.9"),        # Jiang et al. 2024: 46.7B total, 12.9B active
    ("qwen1.5-moe-a2.7b", "14.3", "2.7"),    # Qwen1.5-MoE-A2.7B model card
    ("deepseek-v3", "671", "37"),            # DeepSeek-V3 report, MTP module not counted
])
def test_hf_config_counts_match_published_totals(folder, total, active):
    model = read_hf_config(CONFIGS / folder)
    assert within_published_rounding(model.param_count, total), f"{model.param_count:,}"
    if active is not None:
        assert within_published_rounding(model.active_param_count, active), f"{model.active_param_count:,}"


def test_hf_config_counts_are_exact_for_the_verified_shapes():
    counts = {name: read_hf_config(CONFIGS / name).param_count for name in FIXTURES}
    assert counts["llama3-8b"] == 8_030_261_248
    assert counts["mixtral-8x7b"] == 46_702_792_704
    assert counts["qwen1.5-moe-a2.7b"] == 14_315_784_192
    assert counts["deepseek-v3"] == 671_026_419_200
    assert read_hf_config(CONFIGS / "deepseek-v3").active_param_count == 37_552_297_472


@pytest.mark.parametrize("folder", FIXTURES)
def test_presets_equal_their_configs(folder):
    named = preset(folder)
    read = read_hf_config(CONFIGS / folder, seq_len=named.seq_len)  # a config.json has no training length
    assert named == read
    assert named.name == folder


def test_every_preset_is_named_after_itself_and_cited():
    for name, (model, source) in PRESETS.items():
        assert model.name == name and preset_source(name) == source and source
    assert preset_names() == list(PRESETS)
    assert preset("GPT3-175B").param_count == 174_604_259_328  # case-insensitive
    assert [preset(n).seq_len for n in ("gpt3-175b", "llama3-405b", "deepseek-v3")] == [2048, 8192, 4096]
    assert preset("llama3-70b").param_count == 70_553_706_496
    assert preset("llama3-405b").param_count == 405_853_388_800


def test_hf_config_reads_a_folder_or_a_file(tmp_path):
    from_folder = read_hf_config(CONFIGS / "llama3-8b")
    from_file = read_hf_config(CONFIGS / "llama3-8b" / "config.json", seq_len=4096)
    assert from_file == dataclasses.replace(from_folder, seq_len=4096)
    assert from_folder.seq_len == 8192 and from_folder.name == "llama3-8b"  # no _name_or_path: the folder

    cfg = json.loads((CONFIGS / "llama3-8b" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "_name_or_path": "meta-llama/Meta-Llama-3-8B"}))
    assert read_hf_config(tmp_path).name == "meta-llama/Meta-Llama-3-8B"
    assert model_from_hf_dict(cfg, name="mine").name == "mine"


def write(tmp_path, text, name="config.json"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_repo_id_is_read_from_the_local_hub_cache_and_never_downloaded(tmp_path, monkeypatch):
    """``--hf-config meta-llama/Meta-Llama-3-8B``: the snapshot refs/main names in the hub cache; a repo
    that is not there gets one line saying how to fetch its config.json."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    snapshot = tmp_path / "models--meta-llama--Meta-Llama-3-8B" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    llama = json.loads((CONFIGS / "llama3-8b" / "config.json").read_text())
    llama.pop("_name_or_path", None)
    (snapshot / "config.json").write_text(json.dumps(llama))
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("abc123")
    model = read_hf_config("meta-llama/Meta-Llama-3-8B")
    assert model == read_hf_config(CONFIGS / "llama3-8b") and model.name == "meta-llama/Meta-Llama-3-8B"
    with pytest.raises(PlanError, match=r"^no such file or folder: Qwen/Qwen3-8B, nor a config.json for that "
                                        r"Hugging Face repo in .*hf download Qwen/Qwen3-8B config.json"):
        read_hf_config("Qwen/Qwen3-8B")
    with pytest.raises(PlanError, match=r"^no such file or folder: configs/none.json$"):
        read_hf_config("configs/none.json")


def test_hf_config_errors_name_the_problem(tmp_path):
    with pytest.raises(PlanError, match="no such file or folder: .*nowhere"):
        read_hf_config(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PlanError, match="empty has no config.json"):
        read_hf_config(tmp_path / "empty")
    with pytest.raises(PlanError, match=r"config.json is not valid JSON \(line 3"):
        read_hf_config(write(tmp_path, '{\n  "hidden_size": 4096,\n  oops\n}'))
    with pytest.raises(PlanError, match="holds a JSON list, not an object"):
        read_hf_config(write(tmp_path, "[1, 2]"))

    llama = json.loads((CONFIGS / "llama3-8b" / "config.json").read_text())
    del llama["num_attention_heads"]
    with pytest.raises(PlanError, match=r"config.json lacks 'num_attention_heads' \(needed for the attention heads\)"):
        read_hf_config(write(tmp_path, json.dumps(llama)))
    with pytest.raises(PlanError, match="'hidden_size' must be a whole number >= 1, got '4096'"):
        model_from_hf_dict({**llama, "num_attention_heads": 32, "hidden_size": "4096"})
    with pytest.raises(PlanError, match="'num_key_value_heads' must be a whole number >= 1, got 0"):
        model_from_hf_dict({**llama, "num_attention_heads": 32, "num_key_value_heads": 0})
    with pytest.raises(PlanError, match="'tie_word_embeddings' must be true or false"):
        model_from_hf_dict({**llama, "num_attention_heads": 32, "tie_word_embeddings": "no"})
    with pytest.raises(PlanError, match="model_type 'mamba' is not one the planner reads"):
        model_from_hf_dict({"model_type": "mamba", "hidden_size": 768})
    deepseek = json.loads((CONFIGS / "deepseek-v3" / "config.json").read_text())
    with pytest.raises(PlanError, match="moe_layer_freq 2 is not supported"):
        model_from_hf_dict({**deepseek, "moe_layer_freq": 2})


def test_hf_config_reads_a_multimodal_wrappers_text_config():
    llama = json.loads((CONFIGS / "llama3-8b" / "config.json").read_text())
    wrapper = {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"],
               "text_config": llama, "vision_config": {"hidden_size": 1024}}
    assert model_from_hf_dict(wrapper) == read_hf_config(CONFIGS / "llama3-8b")


def test_an_unknown_model_type_with_the_llama_keys_reads_as_llama_and_says_so():
    llama = json.loads((CONFIGS / "llama3-8b" / "config.json").read_text())
    unknown = model_from_hf_dict({**llama, "model_type": "my_llama"})
    assert unknown == read_hf_config(CONFIGS / "llama3-8b")
    assert "'my_llama' is not one the planner knows by name" in unknown.read_note
    assert read_hf_config(CONFIGS / "llama3-8b").read_note == ""


@pytest.mark.parametrize("extra, named", [
    ({"model_type": "falcon_h1", "mamba_d_ssm": 3072, "mamba_d_state": 256}, "mamba_d_ssm, mamba_d_state"),
    ({"model_type": "jamba", "attn_layer_period": 8}, "attn_layer_period"),   # Nemotron-H's Mamba-2: hf_hybrid
    ({"model_type": "minimax", "attn_type_list": [0, 0, 0, 1]}, "attn_type_list"),   # Qwen3-Next's: hf_hybrid
    ({"model_type": "my_hybrid", "layer_types": ["linear_attention"] * 3 + ["full_attention"]},
     "layer_types 'linear_attention'"),
])
def test_a_hybrid_of_attention_and_other_mixers_is_refused_naming_its_keys(extra, named):
    """Mamba, linear-attention or convolution layers read as attention would be a wrong count, silently."""
    llama = json.loads((CONFIGS / "llama3-8b" / "config.json").read_text())
    with pytest.raises(PlanError, match=f"has layers that are not attention \\({named}: state-space"):
        model_from_hf_dict({**llama, **extra})


def test_qwen_moe_dense_layers_are_counted_wherever_they_sit():
    qwen = json.loads((CONFIGS / "qwen1.5-moe-a2.7b" / "config.json").read_text())
    every_other = model_from_hf_dict({**qwen, "decoder_sparse_step": 2})  # layers 1, 3, ... are MoE
    assert every_other.dense_layers == 12
    one_dense = model_from_hf_dict({**qwen, "mlp_only_layers": [5]})      # not a first layer: same count
    assert one_dense.dense_layers == 1
    assert one_dense.counted_params() == 23 * one_dense.moe_layer_params() + one_dense.dense_layer_params() \
        + one_dense.embedding_params() + one_dense.hidden
    qwen3_moe = model_from_hf_dict({**qwen, "model_type": "qwen3_moe", "head_dim": 128})
    assert (qwen3_moe.shared_width, qwen3_moe.shared_expert_gate, qwen3_moe.qk_norm) == (0, False, True)


def test_deepseek_v2_has_no_routing_bias_and_may_leave_queries_uncompressed():
    v2 = dict(model_type="deepseek_v2", hidden_act="silu", num_hidden_layers=60, hidden_size=5120,
              num_attention_heads=128, num_key_value_heads=128, vocab_size=102400, intermediate_size=12288,
              n_routed_experts=160, n_shared_experts=2, num_experts_per_tok=6, moe_intermediate_size=1536,
              first_k_dense_replace=1, moe_layer_freq=1, q_lora_rank=1536, kv_lora_rank=512,
              qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, topk_method="group_limited_greedy")
    model = model_from_hf_dict(v2)
    assert not model.router_bias
    assert within_published_rounding(model.param_count, "236")        # DeepSeek-V2 report: 236B total,
    assert within_published_rounding(model.active_param_count, "21")  # 21B activated
    lite = model_from_hf_dict({**v2, "num_hidden_layers": 27, "hidden_size": 2048, "num_attention_heads": 16,
                               "num_key_value_heads": 16, "intermediate_size": 10944, "n_routed_experts": 64,
                               "moe_intermediate_size": 1408, "q_lora_rank": None})
    assert lite.q_lora_rank is None and within_published_rounding(lite.param_count, "15.7")  # V2-Lite


def test_gpt2_style_configs_count_their_position_table():
    gpt2 = {"model_type": "gpt2", "activation_function": "gelu_new", "n_layer": 12, "n_embd": 768,
            "n_head": 12, "n_inner": None, "n_positions": 1024, "vocab_size": 50257}
    model = model_from_hf_dict(gpt2)
    assert model.param_count == 124_439_808  # openai-community/gpt2, as PyTorch counts it
    assert (model.seq_len, model.tied_embeddings, model.norm) == (1024, True, "layernorm")


def test_mpt_configs_count_exactly_what_llm_foundrys_benchmark_tables_print():
    """llm-foundry's MPT yamls (learned positions, biases, vocabulary 50,368) read as the config.json
    they export: every size's count equals its table's NumParams, the shape chapter 6 replays."""
    from playground.planner.published_foundry import MPT_SHAPES
    for size, (layers, d_model, heads, published) in MPT_SHAPES.items():
        cfg = {"model_type": "mpt", "n_layers": layers, "d_model": d_model, "n_heads": heads, "expansion_ratio": 4,
               "max_seq_len": 2048, "vocab_size": 50368, "no_bias": False, "learned_pos_emb": True,
               "attn_config": {"alibi": False}}
        assert model_from_hf_dict(cfg).param_count == published, size
    # the Hub's MPT-7B: ALiBi instead of a position table, no biases, 6.7B (its model card)
    hub = {"model_type": "mpt", "n_layers": 32, "d_model": 4096, "n_heads": 32, "expansion_ratio": 4,
           "max_seq_len": 2048, "vocab_size": 50432, "no_bias": True, "learned_pos_emb": True,
           "attn_config": {"alibi": True}}
    model = model_from_hf_dict(hub, seq_len=4096)
    assert not model.position_embeddings and model.seq_len == 4096 and within_published_rounding(model.param_count, "6.7")
    assert model.max_positions is None   # ALiBi reaches past max_seq_len: no sequence warning
    with pytest.raises(PlanError, match="expansion_ratio"):
        model_from_hf_dict({**hub, "expansion_ratio": "four"})


def test_falcon_reads_multi_query_or_grouped_kv_heads_and_a_plain_gelu_mlp():
    falcon7 = {"model_type": "falcon", "hidden_size": 4544, "n_head": 71, "n_layer": 32, "multi_query": True,
               "parallel_attn": True, "bias": False, "vocab_size": 65024, "alibi": False}
    model = model_from_hf_dict(falcon7)
    assert (model.kv_head_count, model.head_size, model.ffn_width, model.gated_mlp) == (1, 64, 4 * 4544, False)
    assert model.tied_embeddings and not model.position_embeddings
    # 32 x (4544 x (4544 + 2 x 64) + 4544^2 + 2 x 4544 x 18176 + two LayerNorms) + 65024 x 4544 + final norm
    assert model.param_count == 32 * (4544 * 4672 + 4544 ** 2 + 2 * 4544 * 18176 + 4 * 4544) + 65024 * 4544 + 2 * 4544
    falcon40 = {"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128, "num_hidden_layers": 60,
                "new_decoder_architecture": True, "num_kv_heads": 8, "bias": False, "vocab_size": 65024}
    assert model_from_hf_dict(falcon40).kv_head_count == 8
    with pytest.raises(PlanError, match="ALiBi"):
        model_from_hf_dict({**falcon7, "alibi": True})


def test_nemotron_squared_relu_is_a_plain_mlp_with_layernorm():
    nemotron = {"model_type": "nemotron", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                "num_key_value_heads": 8, "intermediate_size": 16384, "hidden_act": "relu2", "vocab_size": 256000}
    model = model_from_hf_dict(nemotron)
    assert not model.gated_mlp and model.norm == "layernorm" and model.kv_head_count == 8


def test_apertus_xielu_is_a_plain_mlp_and_an_unknown_activation_is_refused():
    """Apertus 8B (its model card: 8.05B): no gate on its xIELU MLP; an activation the planner does not know
    is named, not guessed."""
    apertus = {"model_type": "apertus", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
               "num_key_value_heads": 8, "intermediate_size": 21504, "hidden_act": "xielu", "vocab_size": 131072,
               "tie_word_embeddings": False}
    model = model_from_hf_dict(apertus)
    assert not model.gated_mlp and within_published_rounding(model.param_count, "8.05")
    with pytest.raises(PlanError, match="hidden_act 'snake' is not one the planner knows"):
        model_from_hf_dict(apertus | {"hidden_act": "snake"})


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(PlanError) as err:
        preset("gpt-5")
    assert str(err.value) == f"unknown model 'gpt-5'; known: {', '.join(PRESETS)}"
    with pytest.raises(PlanError, match="unknown model"):
        preset_source("llama2-7b")


# config.json files of families beyond Llama's, as their model repositories publish them (the keys the
# planner reads and a few beside them), in chapters/configs/families/: google/gemma-7b, google/gemma-2-9b,
# openai/gpt-oss-120b and -20b, meta-llama/Llama-4-Scout-17B-16E and Llama-4-Maverick-17B-128E (text_config),
# zai-org/GLM-4.5 and -Air, allenai/OLMoE-1B-7B-0924, moonshotai/Kimi-K2-Instruct, deepseek-ai/DeepSeek-V2-Lite,
# microsoft/Phi-3.5-MoE-instruct, databricks/dbrx-base, bigscience/bloom, bigcode/starcoder2-15b,
# rednote-hilab/dots.llm1.base, baidu/ERNIE-4.5-21B-A3B-PT, inclusionAI/Ling-lite-1.5, deepseek-ai/DeepSeek-V3.2,
# zai-org/GLM-5
FAMILIES = CONFIGS / "families"


def family(name: str):
    return read_hf_config(FAMILIES / name)


def test_gemma_has_a_gated_mlp_and_ties_its_embedding_unless_told_otherwise():
    gemma, gemma2 = family("gemma-7b"), family("gemma-2-9b")
    assert gemma.gated_mlp and gemma.tied_embeddings          # GeGLU, though hidden_act says "gelu"
    assert within_published_rounding(gemma.param_count, "8.54")   # Gemma report (Table 1 + embeddings): 8.54B
    assert within_published_rounding(gemma2.param_count, "9.24")  # Gemma 2 model card: 9.24B
    # Gemma 2's sandwich norms: a norm after attention and after the MLP as well as before
    plain = dataclasses.replace(gemma2, sandwich_norm=False)
    assert gemma2.param_count - plain.param_count == gemma2.layers * 2 * gemma2.hidden
    untied = json.loads((FAMILIES / "gemma-7b" / "config.json").read_text()) | {"tie_word_embeddings": False}
    assert model_from_hf_dict(untied).param_count == gemma.param_count + gemma.vocab * gemma.hidden
    with pytest.raises(PlanError, match="not a GELU"):
        model_from_hf_dict(untied | {"hidden_act": "silu"})


def test_gpt_oss_counts_biased_experts_in_every_layer():
    for name, total, active in (("gpt-oss-120b", "116.83", "5.13"), ("gpt-oss-20b", "20.91", "3.61")):
        model = family(name)
        assert model.moe_layers == model.layers and model.router_bias and model.proj_bias
        # the gpt-oss model card's totals; its active count leaves the input embedding out
        assert within_published_rounding(model.param_count, total), f"{model.param_count:,}"
        embedding = model.vocab * model.hidden
        assert within_published_rounding(model.active_param_count - embedding, active)


def test_llama4_interleaves_dense_layers_between_its_moe_layers():
    scout, maverick = family("llama4-scout"), family("llama4-maverick")
    assert (scout.dense_layers, maverick.dense_layers) == (0, 24)   # interleave_moe_layer_step 1 and 2
    assert maverick.ffn_width == 16384 and maverick.expert_width == scout.shared_width == 8192
    # Meta's model cards: 17B active each, 400B total (Maverick); Scout's 109B counts its vision encoder too
    for model in (scout, maverick):
        assert within_published_rounding(model.active_param_count, "17")
    assert within_published_rounding(maverick.param_count, "400")
    assert 107e9 < scout.param_count < 109e9


def test_glm4_moe_reads_deepseeks_expert_keys_on_grouped_query_attention():
    air, glm = family("glm-4.5-air"), family("glm-4.5")
    assert (air.dense_layers, glm.dense_layers) == (1, 3) and glm.qkv_bias and not glm.proj_bias
    assert within_published_rounding(air.param_count, "106")  # GLM-4.5-Air: 106B total, 12B active
    # GLM's active counts leave out both embedding matrices (GLM-4.5: 32B active)
    for model, active in ((air, "12"), (glm, "32")):
        assert within_published_rounding(model.active_param_count - 2 * model.vocab * model.hidden, active)


def test_dots_llm1_reads_deepseeks_expert_keys_with_qwen3s_attention():
    dots = family("dots-llm1")
    assert (dots.experts, dots.top_k, dots.shared_experts, dots.dense_layers) == (128, 6, 2, 1)
    assert dots.qk_norm and dots.kv_heads == dots.heads == 32 and not dots.qkv_bias
    # the dots.llm1 model card: 142B total, 14B active
    assert within_published_rounding(dots.param_count, "142") and within_published_rounding(dots.active_param_count, "14")


def test_ernie_reads_its_own_expert_keys_and_the_range_of_its_moe_layers():
    ernie = family("ernie-4.5-21b-a3b")
    assert (ernie.experts, ernie.top_k, ernie.shared_experts, ernie.dense_layers) == (64, 6, 2, 1)
    assert ernie.shared_width == 2 * ernie.expert_width == 3072 and ernie.tied_embeddings
    # the ERNIE 4.5 model card: 21B total (21.8B on its page), 3B active without the (tied) embedding
    assert within_published_rounding(ernie.param_count, "21.8")
    assert within_published_rounding(ernie.active_param_count - ernie.vocab * ernie.hidden, "3")
    config = json.loads((FAMILIES / "ernie-4.5-21b-a3b" / "config.json").read_text())
    every = model_from_hf_dict(config | {"moe_layer_start_index": 0, "moe_layer_end_index": -1})
    halves = model_from_hf_dict(config | {"moe_layer_end_index": -1, "moe_layer_interval": 2})
    assert (every.dense_layers, halves.dense_layers) == (0, 14)
    with pytest.raises(PlanError, match="'moe_layer_end_index' must be a layer number or -1"):
        model_from_hf_dict(config | {"moe_layer_end_index": "last"})


# Ling-mini-2.0 (inclusionAI), as its config sets the keys the planner reads: its model card gives 16.26B total,
# 1.43B active and 789M active without the two embedding matrices
LING_MINI_2 = {"model_type": "bailing_moe", "num_hidden_layers": 20, "hidden_size": 2048, "intermediate_size": 5120,
               "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 157184,
               "num_experts": 256, "num_experts_per_tok": 8, "num_shared_experts": 1, "moe_intermediate_size": 512,
               "first_k_dense_replace": 1, "use_qk_norm": True, "moe_router_enable_expert_bias": True,
               "n_group": 8, "topk_group": 4, "score_function": "sigmoid", "num_nextn_predict_layers": 1,
               "use_bias": False, "use_qkv_bias": False, "tie_word_embeddings": False}


def test_ling_reads_its_shared_experts_beside_the_routed_ones():
    lite = family("ling-lite-1.5")
    assert (lite.experts, lite.top_k, lite.dense_layers, lite.shared_width) == (64, 6, 0, 2 * 1408)
    # the Ling-lite-1.5 model card: 16.8B total, 2.75B activated (the embeddings counted)
    assert within_published_rounding(lite.param_count, "16.8")
    assert within_published_rounding(lite.active_param_count, "2.75")
    mini = model_from_hf_dict(LING_MINI_2)
    assert (mini.dense_layers, mini.expert_groups, mini.groups_per_token) == (1, 8, 4)
    assert mini.router_bias and mini.qk_norm and not mini.qkv_bias
    assert within_published_rounding(mini.param_count, "16.26")
    assert within_published_rounding(mini.active_param_count, "1.43")
    assert round((mini.active_param_count - 2 * mini.vocab * mini.hidden) / 1e6) == 789
    # a shared expert of its own width, and use_bias's biases beyond Q/K/V said rather than counted
    wide = model_from_hf_dict(LING_MINI_2 | {"moe_shared_expert_intermediate_size": 1024})
    assert wide.shared_width == 1024 and wide.param_count - mini.param_count == 19 * 3 * 2048 * 512
    biased = model_from_hf_dict(LING_MINI_2 | {"use_bias": True})
    assert biased.qkv_bias and not biased.proj_bias and "use_bias" in biased.read_note


# Hunyuan-A13B's shape (tencent/Hunyuan-A13B-Instruct; its card: 80B total, 13B active): the expert keys a list of
# one value a layer
HUNYUAN_A13B = {"model_type": "hunyuan_v1_moe", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 3072,
                "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128167,
                "num_experts": 64, "moe_topk": [8] * 32, "moe_intermediate_size": [3072] * 32,
                "num_shared_expert": [1] * 32, "use_mixed_mlp_moe": True, "use_qk_norm": True, "use_cla": False,
                "tie_word_embeddings": True}


def test_hunyuan_reads_its_per_layer_expert_lists_and_refuses_cross_layer_attention():
    """Hunyuan-A13B: 64 experts of 3,072 (8 a token) beside one shared MLP in every layer, Q/K norms; a list that
    differs between layers, or keys and values shared across layers (CLA), is refused in one line."""
    a13b = model_from_hf_dict(HUNYUAN_A13B)
    assert (a13b.experts, a13b.top_k, a13b.expert_width, a13b.shared_width, a13b.moe_layers) == (64, 8, 3072, 3072, 32)
    assert a13b.qk_norm and not a13b.router_bias and a13b.read_note == ""
    assert within_published_rounding(a13b.param_count, "80") and within_published_rounding(a13b.active_param_count, "13")
    scalar = model_from_hf_dict(HUNYUAN_A13B | {"moe_topk": 8, "moe_intermediate_size": 3072, "num_shared_expert": 1})
    assert scalar == a13b
    assert model_from_hf_dict(HUNYUAN_A13B | {"use_mixed_mlp_moe": False}).shared_width == 0
    with pytest.raises(PlanError, match="'moe_topk' differs between layers"):
        model_from_hf_dict(HUNYUAN_A13B | {"moe_topk": [8] * 31 + [4]})
    with pytest.raises(PlanError, match="cross-layer attention"):
        model_from_hf_dict(HUNYUAN_A13B | {"use_cla": True, "cla_share_factor": 2})
    dense = model_from_hf_dict({k: v for k, v in HUNYUAN_A13B.items() if k in (
        "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
        "head_dim", "vocab_size", "use_qk_norm")} | {"model_type": "hunyuan_v1_dense"})
    assert not dense.is_moe and dense.qk_norm and dense.read_note == ""


QWEN3_VL_235B_TEXT = {"model_type": "qwen3_vl_moe_text", "hidden_size": 4096, "num_hidden_layers": 94,
                      "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 12288,
                      "moe_intermediate_size": 1536, "num_experts": 128, "num_experts_per_tok": 8,
                      "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936, "tie_word_embeddings": False}


def test_a_vision_language_config_is_read_as_its_language_model_and_says_what_it_leaves_out():
    """Qwen3-VL-235B-A22B's language model is Qwen3-MoE's, Qwen3-235B-A22B's shape (its card: 235B, 22B active);
    Qwen2-VL's is Qwen2's, with its Q/K/V biases; GLM-4.5V's GLM-4.5-Air's.  The encoders beside them are not counted,
    and the note says so."""
    wrapped = model_from_hf_dict({"model_type": "qwen3_vl_moe", "vision_config": {"depth": 27},
                                  "text_config": QWEN3_VL_235B_TEXT})
    assert wrapped == model_from_hf_dict(QWEN3_VL_235B_TEXT | {"model_type": "qwen3_moe"}) and wrapped.qk_norm
    assert within_published_rounding(wrapped.param_count, "235") and within_published_rounding(wrapped.active_param_count, "22")
    assert "the language model only: its vision encoder is not counted (vision_config)" in wrapped.read_note
    assert "not one the planner knows" not in wrapped.read_note
    qwen2_vl = {"model_type": "qwen2_vl", "vision_config": {}, "hidden_size": 3584, "num_hidden_layers": 28,
                "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064}
    text = model_from_hf_dict(qwen2_vl)
    assert text.qkv_bias and not text.proj_bias and within_published_rounding(text.param_count, "7.62")   # Qwen2-7B
    assert model_from_hf_dict({k: v for k, v in qwen2_vl.items() if k != "vision_config"}).read_note == ""
    air = json.loads((FAMILIES / "glm-4.5-air" / "config.json").read_text())   # GLM-4.5V's language model
    glm_v = model_from_hf_dict({"model_type": "glm4v_moe", "vision_config": {}, "text_config": air | {"model_type": "glm4v_moe_text"}})
    assert glm_v == family("glm-4.5-air") and "vision encoder" in glm_v.read_note


def test_olmo_3_is_olmo_2_with_a_window_on_three_layers_in_four():
    """OLMo 3 7B (allenai/Olmo-3-1025-7B: OLMo 2 7B's shape, 7.3B) adds a 4,096-token window on three of every four
    layers (layer_types); read by its name, with Q/K norms, and no note that it was guessed."""
    shape = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
             "intermediate_size": 11008, "vocab_size": 100278, "tie_word_embeddings": False}
    olmo3 = model_from_hf_dict(shape | {"model_type": "olmo3", "sliding_window": 4096,
                                        "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 8})
    assert (olmo3.local_layers, olmo3.sliding_window, olmo3.qk_norm, olmo3.read_note) == (24, 4096, True, "")
    assert olmo3.param_count == model_from_hf_dict(shape | {"model_type": "olmo2"}).param_count
    assert within_published_rounding(olmo3.param_count, "7.3")


def test_dbrx_reads_its_attention_and_experts_from_their_own_blocks():
    dbrx = family("dbrx")
    assert (dbrx.kv_heads, dbrx.experts, dbrx.top_k, dbrx.moe_layers) == (8, 16, 4, 40)
    assert dbrx.gated_mlp and not (dbrx.qkv_bias or dbrx.proj_bias or dbrx.tied_embeddings)
    # Databricks' announcement: 132B total parameters, 36B active on any input
    assert within_published_rounding(dbrx.param_count, "132") and within_published_rounding(dbrx.active_param_count, "36")
    config = json.loads((FAMILIES / "dbrx" / "config.json").read_text())
    with pytest.raises(PlanError, match=r"'ffn_config' must be an object"):
        model_from_hf_dict(config | {"ffn_config": 10752})
    with pytest.raises(PlanError, match=r"\(ffn_config\) lacks 'moe_num_experts' \(needed for the expert count\)"):
        model_from_hf_dict(config | {"ffn_config": {"ffn_hidden_size": 10752, "moe_top_k": 4}})
    with pytest.raises(PlanError, match="not silu"):
        model_from_hf_dict(config | {"ffn_config": config["ffn_config"] | {"ffn_act_fn": {"name": "gelu"}}})


def test_bloom_is_counted_to_its_published_total_but_its_embeddings_norm():
    bloom = family("bloom")
    assert not bloom.position_embeddings and bloom.tied_embeddings and bloom.norm == "layernorm"
    # BigScience's model card: 176,247,271,424 parameters; the LayerNorm after the embedding (2 h) is not counted
    assert bloom.param_count == 176_247_271_424 - 2 * bloom.hidden


def test_phi_moe_is_mixtrals_shape_with_layernorm_and_qkv_biases():
    phi = family("phi-3.5-moe")
    assert (phi.experts, phi.top_k, phi.norm, phi.qkv_bias, phi.proj_bias) == (16, 2, "layernorm", True, False)
    # the model card: 42B total (41.9B on its page), 6.6B active
    assert within_published_rounding(phi.param_count, "41.9") and within_published_rounding(phi.active_param_count, "6.6")


def test_starcoder2_has_biases_a_plain_gelu_mlp_and_a_window_on_every_layer():
    coder = family("starcoder2-15b")
    assert coder.qkv_bias and coder.proj_bias and not coder.gated_mlp and coder.norm == "layernorm"
    assert (coder.local_layers, coder.sliding_window) == (40, 4096)
    assert coder.param_count == 15_957_889_024   # the checkpoint's tensors (the model card: 15B, "16B params")
    assert coder.read_note == ""


def test_biases_the_model_cannot_place_are_left_out_and_said_not_refused():
    """Llama's attention_bias puts a bias on Q, K, V and the output projection; ``Model`` keeps the output
    projection's with the MLP's, so alone it is left out (h a layer) and the note says so."""
    llama = json.loads((CONFIGS / "llama3-8b" / "config.json").read_text())
    plain = model_from_hf_dict(llama)
    biased = model_from_hf_dict(llama | {"attention_bias": True})
    assert biased.qkv_bias and not biased.proj_bias and "output projection's biases" in biased.read_note
    kv = plain.kv_heads * plain.head_size
    assert biased.param_count - plain.param_count == plain.layers * (plain.hidden + 2 * kv)
    both = model_from_hf_dict(llama | {"attention_bias": True, "mlp_bias": True})
    assert both.proj_bias and both.read_note == ""
    # Seed-OSS spells the output projection's apart: Q, K and V biased, nothing left out
    seed = model_from_hf_dict(llama | {"attention_bias": True, "attention_out_bias": False})
    assert seed.qkv_bias and not seed.proj_bias and seed.read_note == ""


def test_an_unknown_model_type_with_expert_keys_is_refused_not_counted_dense():
    llama = json.loads((CONFIGS / "llama3-8b" / "config.json").read_text())
    with pytest.raises(PlanError, match="'my_moe' has expert keys \\(num_local_experts\\)"):
        model_from_hf_dict({**llama, "model_type": "my_moe", "num_local_experts": 8})


def test_a_renamed_config_file_is_named_after_itself(tmp_path):
    llama = json.loads((CONFIGS / "llama3-8b" / "config.json").read_text())
    llama.pop("_name_or_path", None)
    (tmp_path / "my-llama.json").write_text(json.dumps(llama))
    assert read_hf_config(tmp_path / "my-llama.json").name == "my-llama"


def test_sliding_window_layers_are_read_from_layer_types_or_the_familys_rule():
    assert (family("gemma-2-9b").local_layers, family("gemma-2-9b").sliding_window) == (21, 4096)   # every other
    assert (family("gpt-oss-120b").local_layers, family("gpt-oss-120b").sliding_window) == (18, 128)  # layer_types
    mistral = read_hf_config(CONFIGS / "mistral-7b")
    assert mistral.local_layers == mistral.layers and mistral.sliding_window == 4096   # every layer
    qwen = json.loads((CONFIGS / "qwen1.5-moe-a2.7b" / "config.json").read_text())
    assert model_from_hf_dict(qwen).local_layers == 0                                  # use_sliding_window false
    assert model_from_hf_dict({**qwen, "use_sliding_window": True}).local_layers == 24 - 21  # from layer 21 on
    gemma3 = json.loads((FAMILIES / "gemma-2-9b" / "config.json").read_text()) | {"model_type": "gemma3_text",
                                                                       "num_hidden_layers": 48}
    assert model_from_hf_dict(gemma3).local_layers == 40                               # 5 local to 1 global
    with pytest.raises(PlanError, match="'layer_types' must list one type for each of the 36 layers"):
        model_from_hf_dict(json.loads((FAMILIES / "gpt-oss-120b" / "config.json").read_text()) | {"layer_types": ["full"]})


def test_olmoe_and_granite_moe_read_mixtrals_expert_keys():
    """OLMoE-1B-7B (Muennighoff et al. 2024: 6.9B total, 1.3B active): 64 experts of 1024 in every
    layer, 8 a token, Q/K norms; Granite's MoE names its experts as Mixtral does."""
    olmoe = family("olmoe-1b-7b")
    assert (olmoe.experts, olmoe.top_k, olmoe.expert_width, olmoe.qk_norm) == (64, 8, 1024, True)
    assert within_published_rounding(olmoe.param_count, "6.9") and within_published_rounding(olmoe.active_param_count, "1.3")
    granite = model_from_hf_dict({"model_type": "granitemoe", "num_hidden_layers": 24, "hidden_size": 1024,
                                  "num_attention_heads": 16, "num_key_value_heads": 8, "intermediate_size": 512,
                                  "vocab_size": 49155, "num_local_experts": 32, "num_experts_per_tok": 8,
                                  "tie_word_embeddings": True, "hidden_act": "silu"})
    assert (granite.experts, granite.top_k, granite.expert_width) == (32, 8, 512)


def test_minimax_m2_reads_mixtrals_expert_keys_with_qk_norms_and_a_routing_bias():
    """MiniMax-M2 (its model card: 230B total, 10B active): 62 layers of 3,072, 48 query heads and 8
    K/V heads of 128, 256 experts of 1,536, 8 a token; the shape keys of its config.json."""
    m2 = model_from_hf_dict({"model_type": "minimax_m2", "num_hidden_layers": 62, "hidden_size": 3072,
                             "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128,
                             "intermediate_size": 1536, "num_local_experts": 256, "num_experts_per_tok": 8,
                             "vocab_size": 200064, "hidden_act": "silu", "tie_word_embeddings": False,
                             "use_qk_norm": True, "use_routing_bias": True, "scoring_func": "sigmoid"})
    assert (m2.experts, m2.top_k, m2.expert_width, m2.qk_norm, m2.router_bias) == (256, 8, 1536, True, True)
    assert round(m2.param_count / 1e10) == 23 and m2.read_note == ""        # 228.7B: "230B" to two figures
    assert within_published_rounding(m2.active_param_count - 2 * m2.vocab * m2.hidden, "10")  # 9.8B


def test_kimi_k2_reads_as_deepseek_v3s_architecture():
    """Kimi K2 ships DeepSeek-V3's architecture under model_type kimi_k2 (Moonshot's model card: 1T
    total, 32B activated): 384 experts of 2048 with a routing bias, 8 a token, one dense first layer, MLA."""
    kimi = family("kimi-k2")
    assert (kimi.experts, kimi.top_k, kimi.expert_width, kimi.dense_layers, kimi.is_mla) == (384, 8, 2048, 1, True)
    assert kimi.router_bias
    assert within_published_rounding(kimi.param_count / 1000, "1") and within_published_rounding(kimi.active_param_count, "32")


def test_deepseek_v3_2_is_v3_with_sparse_attention_its_indexer_counted():
    """DeepSeek-V3.2 (model_type deepseek_v32) is DeepSeek-V3's architecture with DeepSeek Sparse Attention: each
    query attends index_topk = 2,048 keys, which a lightning indexer picks, 61 x (1,536 x 64 x 128 + 7,168 x (128 +
    64) + 2 x 128) = 851.5 M parameters more than V3.  At 4K tokens the two cost about the same a token (half the
    keys, plus the indexer's scores); at 128K, a fifth: the attention that dominated V3's long sequences is gone,
    the indexer's scores over every earlier key what remains."""
    v32, v3 = family("deepseek-v3.2"), read_hf_config(CONFIGS / "deepseek-v3")
    indexer = 61 * (1536 * 64 * 128 + 7168 * (128 + 64) + 2 * 128)
    assert v32.param_count - v3.param_count == indexer and v32.attended_keys() == 2048 and v3.read_note == ""
    assert dataclasses.replace(v32, sparse_keys=None, indexer_heads=0, indexer_dim=0) == v3
    assert "index_topk = 2,048 keys" in v32.read_note and "851.5 M parameters" in v32.read_note
    assert "not counted: the dense warm-up" in v32.read_note
    one = Layout.today(global_batch=1)
    per_token = {s: [flops_per_step(dataclasses.replace(m, seq_len=s), one, "none") / s for m in (v32, v3)]
                 for s in (4096, 131072)}
    assert 0.9 < per_token[4096][0] / per_token[4096][1] < 0.95
    assert 0.19 < per_token[131072][0] / per_token[131072][1] < 0.22
    # from 4K to 128K a query's sparse attention stays at 2,048 keys: what grows is the indexer's scores, 2 x 64 x 128
    # FLOPs a key over half the sequence on average, forward and backward (x 3) in each of the 61 layers
    indexer_scores = lambda s: 2 * (s / 2) * 64 * 128   # noqa: E731
    assert per_token[131072][0] - per_token[4096][0] == pytest.approx(
        61 * 3 * (indexer_scores(131072) - indexer_scores(4096)), rel=1e-9)
    # the indexer's scores multiply two activations: no weight to gather whole under ZeRO-3, however long the sequence
    from playground.planner.memory import largest_weight
    assert largest_weight(dataclasses.replace(v32, seq_len=131072), one) == largest_weight(v3, one)
    from playground.planner import plan   # the plan says how it counted
    sparse = plan(model=dataclasses.replace(v32, seq_len=131072), tokens=1e12, gpus=1024, global_batch=512, tp=1, pp=1,
                  cp=8, ep=32, zero_stage=3, recompute="full")
    assert sparse["flops_method"] == "counted, sparse"
    assert sparse["model_flops"] / 1e12 == pytest.approx(per_token[131072][0], rel=1e-4)   # whole steps of 64Mi


def test_glm_5_reads_as_deepseek_v3s_architecture_with_its_sparse_attention():
    """GLM-5 (model_type glm_moe_dsa; zai-org/GLM-5's card: 744B total, 40B active) is DeepSeek-V3's architecture
    at its own shape, 256-wide heads and values, with DeepSeek Sparse Attention: an indexer of 32 heads a layer.
    Where only some layers hold an indexer (GLM-5.2's: indexer_types, or Megatron-Core's rule for index_topk_freq and
    index_skip_topk_offset), only those are counted, in the parameters and the FLOPs."""
    glm = family("glm-5")
    assert (glm.experts, glm.top_k, glm.expert_width, glm.dense_layers, glm.is_mla) == (256, 8, 2048, 3, True)
    assert (glm.head_size, glm.value_head_size, glm.q_lora_rank, glm.indexer_heads) == (256, 256, 2048, 32)
    assert within_published_rounding(glm.param_count / 1000, "0.744")      # 743.9B with its 731.0 M of indexers
    assert within_published_rounding(glm.active_param_count - glm.vocab * glm.hidden, "40")   # the input embedding out
    assert "731.0 M parameters" in glm.read_note            # 78 x (2048 x 32 x 128 + 6144 x 160 + 256)
    config = json.loads((FAMILIES / "glm-5" / "config.json").read_text())
    shared = model_from_hf_dict(config | {"indexer_types": ["full", "shared", "shared", "shared"] * 19 + ["full"] * 2})
    one = 2048 * 32 * 128 + 6144 * 160 + 256
    assert shared.indexer_layers == 21 and glm.param_count - shared.param_count == pytest.approx(57 * one)
    assert "21 of the 78 layers hold an indexer" in shared.read_note and "196.8 M parameters" in shared.read_note
    # Megatron-Core's rule: layers 1-3 select, then every 4th (7, 11, ..., 75): 21 of 78
    by_rule = model_from_hf_dict(config | {"index_topk_freq": 4, "index_skip_topk_offset": 3})
    assert by_rule == shared and by_rule.read_note == shared.read_note and "hold an indexer" not in glm.read_note
    # the indexer's FLOPs in 21 layers, not 78: its projections' (the weights less the LayerNorm) and its scores'
    one_seq = Layout.today(global_batch=1)
    saved = (flops_per_step(glm, one_seq, "none") - flops_per_step(shared, one_seq, "none")) / glm.seq_len
    per_layer = 2 * (one - 2 * 128) + 2 * (glm.seq_len / 2) * 32 * 128   # a token's, over half the sequence
    assert saved == pytest.approx(57 * 3 * per_layer, rel=1e-9)
    with pytest.raises(PlanError, match="lacks 'index_n_heads' \\(needed for sparse attention's indexer heads\\)"):
        model_from_hf_dict({k: v for k, v in config.items() if k != "index_n_heads"})


def test_deepseek_v2_lite_projects_queries_whole_where_q_lora_rank_is_null():
    """DeepSeek-V2-Lite (its model card: 15.7B total, 2.4B activated) is MLA with the key-value
    compression only: q_lora_rank null means one 2048 x 16·192 query matrix, not a low-rank pair."""
    lite = family("deepseek-v2-lite")
    assert lite.is_mla and lite.q_lora_rank is None and lite.kv_lora_rank == 512
    assert "16 MLA heads (q not compressed, kv rank 512)" in lite.describe() and "1 dense first layer (" in lite.describe()
    assert within_published_rounding(lite.param_count, "15.7")
    assert within_published_rounding(lite.active_param_count - lite.vocab * lite.hidden, "2.4")


def test_a_sequence_beyond_the_configs_positions_is_warned_about(tmp_path):
    """OLMoE's positions reach 4,096: planning it at 8,192 says so; at its own length nothing is said."""
    from playground.planner import plan
    olmoe = family("olmoe-1b-7b")
    warned = plan(model=olmoe, tokens=1e12, gpu="H100", gpus=8, seq_len=8192)["warnings"]
    assert any("beyond this config's max_position_embeddings (4,096)" in w for w in warned)
    quiet = plan(model=olmoe, tokens=1e12, gpu="H100", gpus=8, seq_len=4096)["warnings"]
    assert not any("max_position_embeddings" in w for w in quiet)


def test_without_a_sequence_length_a_config_is_planned_no_longer_than_its_positions_reach():
    """No --seq-len: 8,192 tokens (Llama 3's pre-training length), unless the config's positions stop
    short of it, as OLMoE's (4,096) do: then its reach, and the plan's notes say so; a length given
    wins and the note goes."""
    from playground.planner import plan
    olmoe, llama = family("olmoe-1b-7b"), read_hf_config(CONFIGS / "llama3-8b")
    assert (olmoe.seq_len, llama.seq_len) == (4096, 8192)
    assert "max_position_embeddings, 4,096 tokens, taken" in olmoe.seq_len_from and not llama.seq_len_from
    notes = plan(model=olmoe, tokens=1e12, gpu="H100", gpus=8)["notes"]
    assert any("sequence length not given" in n for n in notes)
    assert not any("sequence length" in n for n in plan(model=olmoe, tokens=1e12, gpu="H100", gpus=8, seq_len=2048)["notes"])
    assert read_hf_config(CONFIGS / "families" / "olmoe-1b-7b", seq_len=8192).seq_len == 8192
