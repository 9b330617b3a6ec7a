"""A hybrid of Mamba-2 mixers and attention (Nemotron-H, Nemotron 3): read, counted, priced and refused in one line."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from playground.planner.activations import layer_activation_bytes
from playground.planner.costs import Cluster, Layout, flops_per_step
from playground.planner.errors import PlanError
from playground.planner.hf_config import model_from_hf_dict, read_hf_config
from playground.planner.layout_checks import check_layout
from playground.planner.memory import memory_per_gpu
from playground.planner.published_automodel import AUTOMODEL_HYBRID, NEMOTRON_3_NANO
from playground.planner.published_zoo import QWEN3_NEXT
from playground.planner.ssm import GatedDeltaNet, Mamba2
from playground.planner.step_time import predict
from test_model_configs import within_published_rounding   # tests/planner is on the path (tests/conftest.py)

NANO_DIR = Path(__file__).resolve().parents[2] / "chapters" / "configs" / "families" / "nemotron-3-nano"
NANO = json.loads((NANO_DIR / "config.json").read_text())
H100 = Cluster.of("H100")


def test_nemotron_3_nano_reads_its_blocks_and_is_counted_to_its_card():
    """The card: 31.6B parameters, 3.6B active with the embeddings (3.2B without the output layer's 0.35B)."""
    nano = read_hf_config(NANO_DIR, seq_len=4096)
    assert (nano.layers, nano.ssm_layers, nano.attention_layers) == (23, 23, 6)   # its MoE, Mamba-2, attention blocks
    assert nano.ssm == Mamba2(heads=64, head_dim=64, state=128, groups=8, conv=4, chunk=128)
    assert (nano.experts, nano.top_k, nano.shared_width, nano.gated_mlp) == (128, 6, 3712, False)   # squared ReLU
    assert within_published_rounding(nano.param_count, "31.6")
    assert within_published_rounding(nano.active_param_count, "3.6")
    assert nano == NEMOTRON_3_NANO   # the validation row's model is the chapter's config
    assert "52 blocks: 23 Mamba-2" in nano.describe() and "priced as an average layer" in nano.read_note


def _mamba_params(h, heads, head_dim, state, groups, conv):
    """One Mamba-2 mixer's weights, tensor by tensor as Megatron-Core's MambaMixer holds them."""
    d = heads * head_dim
    in_proj = h * (2 * d + 2 * groups * state + heads)       # z, x, B, C, dt
    conv1d = (d + 2 * groups * state) * (conv + 1)           # depthwise weight and bias
    return in_proj + conv1d + heads + heads + heads + d + d * h   # dt_bias, A_log, D, the gated norm, out_proj


def test_a_hybrids_parameters_are_its_blocks_summed():
    nano, h = NEMOTRON_3_NANO, 2688
    attention = h * 32 * 128 + 2 * h * 2 * 128 + 32 * 128 * h
    moe = 128 * 2 * h * 1856 + 2 * h * 3712 + 128 * h + 128      # experts, the shared one, the router and its bias
    blocks = 23 * _mamba_params(h, 64, 64, 128, 8, 4) + 6 * attention + 23 * moe + 52 * h   # each block's norm
    assert nano.counted_params() == blocks + 2 * 131072 * h + h   # untied embeddings, the final norm


def test_a_hybrid_whose_mixers_are_all_attention_is_the_transformer_it_names():
    """The hybrid's path, given one attention mixer a layer and no Mamba-2, prices exactly what the plain one does."""
    plain = replace(NEMOTRON_3_NANO, ssm_layers=0, attention_layers=None)
    spelled = replace(plain, attention_layers=plain.layers)
    layout = replace(Layout.today(1, 1, 8, ep=8, micro_batch=4, global_batch=512, recompute="full"), zero_stage=3)
    assert spelled.counted_params() == plain.counted_params()
    assert predict(spelled, H100, layout)["step_time_s"] == pytest.approx(predict(plain, H100, layout)["step_time_s"])
    assert memory_per_gpu(spelled, layout, "H100")["total"] == pytest.approx(memory_per_gpu(plain, layout, "H100")["total"])


def test_the_mixers_add_their_projections_and_chunked_scan_to_a_steps_flops():
    """Per token, forward: 2 h (2d + 2GN + H) + 2 d h for the projections; the scan 2 G Q N (C B^T a group) + 2 H Q P
    (applied to x) + 2 H N P (each chunk's state) + 2 H P N (the states' share of the output); backward twice that."""
    nano, s, batch = NEMOTRON_3_NANO, 4096, 8
    without = replace(nano, ssm_layers=0)
    layout = Layout.today(1, 1, 8, ep=8, micro_batch=1, global_batch=batch)
    h, d, G, N, H, P, Q = 2688, 4096, 8, 128, 64, 64, 128
    per_token = 2 * h * (2 * d + 2 * G * N + H) + 2 * d * h + 2 * G * Q * N + 2 * H * Q * P + 4 * H * N * P
    extra = flops_per_step(nano, layout, "none") - flops_per_step(without, layout, "none")
    assert extra == pytest.approx(3 * batch * s * 23 * per_token)


def test_the_memory_model_keeps_what_the_memory_efficient_mixer_saves():
    """Each mixer keeps its norm's input and output (2 h each, bf16), in_proj's output (2d + 2GN + H) and the scan's
    output (d), bf16, and the gated norm's fp32 statistics (G): past what a layer without the mixer keeps."""
    nano = NEMOTRON_3_NANO
    layout = Layout.today(1, 1, 8, ep=8, micro_batch=2, global_batch=512)
    tokens = 2 * 4096
    extra = layer_activation_bytes(nano, layout, True) - layer_activation_bytes(replace(nano, ssm_layers=0), layout, True)
    per_mixer = 2 * 2688 * 2 + 2 * (2 * 4096 + 2 * 8 * 128 + 64 + 4096) + 4 * 8
    assert extra == pytest.approx(tokens * per_mixer * 23 / 23)


def test_the_hybrid_published_run_is_predicted_and_fits_as_read():
    run = AUTOMODEL_HYBRID[0]
    p = predict(run.model, run.cluster, run.layout)
    assert memory_per_gpu(run.model, run.layout, run.gpu)["fits"]
    assert p["tokens_per_s"] / run.layout.gpus == pytest.approx(15013, rel=0.02)   # 0.89 of its 16,789 tokens/s


NEXT_DIR = NANO_DIR.parent / "qwen3-next-80b-a3b"
NEXT = json.loads((NEXT_DIR / "config.json").read_text())


@pytest.mark.parametrize("config, change, message", [(NANO, *case) for case in [
    ({"moe_latent_size": 672}, "a latent MoE .'moe_latent_size'"),
    ({"hybrid_override_pattern": "MEM*X"}, "must be a string of the block letters M\\*-E"),
    ({"hybrid_override_pattern": "MM*M"}, "no MLP or MoE block in its 4 blocks"),
    ({"layers_block_type": ["mamba", "moe", "linear"]}, "'layers_block_type' must list blocks among"),
    ({"mlp_hidden_act": "swiglu"}, "'mlp_hidden_act' 'swiglu' is not an ungated activation"),
    ({"mamba_num_heads": 60}, "Mamba-2 groups .8. must divide its heads .60."),
]] + [(NEXT, *case) for case in [
    ({"layer_types": ["linear_attention", "sliding_attention"] * 24}, "'layer_types' must list 'linear_attention' or"),
    ({"linear_num_key_heads": 12}, "Gated DeltaNet key heads .12. must divide its value heads .32."),
]])
def test_a_hybrid_the_planner_cannot_count_is_refused_in_one_line(config, change, message):
    with pytest.raises(PlanError, match=message):
        model_from_hf_dict({**config, **change})


def test_a_layout_that_splits_a_mixers_heads_or_groups_unevenly_is_refused():
    nano = replace(NEMOTRON_3_NANO, seq_len=8192)
    with pytest.raises(PlanError, match="TP=16 does not divide the Mamba-2 mixers' 64 heads and 8 groups"):
        check_layout(replace(nano, kv_heads=32), Layout.today(16, 1, 1, global_batch=16))   # attention would split
    with pytest.raises(PlanError, match="CP=16 does not split the Mamba-2 mixers' 8 heads and 1 groups a TP rank"):
        check_layout(replace(nano, kv_heads=32), Layout.today(8, 1, 1, cp=16, global_batch=16))
    check_layout(nano, Layout.today(2, 1, 1, global_batch=16))   # TP 2 splits 32 heads, 2 KV heads and 8 groups
    check_layout(nano, Layout.today(1, 1, 1, cp=16, global_batch=16))   # 8 groups repeated over 16 CP ranks
    nxt = read_hf_config(NANO_DIR.parent / "qwen3-next-80b-a3b", seq_len=8192)
    with pytest.raises(PlanError, match="CP=32 does not split the Gated DeltaNet mixers' 16 key heads and 32 value"):
        check_layout(nxt, Layout.today(1, 1, 1, cp=32, global_batch=16))
    check_layout(nxt, Layout.today(1, 1, 1, cp=16, global_batch=16))   # headwise: 16 key heads over 16 ranks


def test_context_parallel_mixers_send_their_inputs_to_head_shards_and_their_output_back():
    """Megatron-Core's MambaContextParallel: z and x (d each), B and C (G N each, a group a CP rank where the ranks
    outnumber the groups) and dt (H) all-to-all before the scan, the output (d) back after; forward, backward and
    a recomputed forward each move (c - 1) / c of them, six all-to-alls a pass."""
    from playground.planner.comm_costs import context_parallel_link, mixer_cp_time
    from playground.planner.layout import EFFICIENCY as eff
    nano = replace(NEMOTRON_3_NANO, seq_len=131072)
    for cp, groups in ((4, 8), (16, 16)):
        layout = Layout.today(1, 1, 1, cp=cp, global_batch=1, recompute="none")
        link, bw = context_parallel_link(layout, H100)
        T = 131072 / cp
        moved = (cp - 1) / cp * T * (2 * 4096 + 64 + 2 * groups * 128 + 4096) * 2 / (eff.link_rate(link) * bw)
        assert mixer_cp_time(nano, H100, layout, eff, T, 0.0) == pytest.approx(2 * (6 * (cp - 1) * eff.latency_s + moved))
    p = predict(nano, H100, Layout.today(1, 1, 8, cp=8, global_batch=8, recompute="full"))
    assert p["time_breakdown"]["cp_comm_exposed"] > 0
    # Gated DeltaNet's headwise mode: all of in_proj's outputs in one all-to-all, the gated norm's output back
    nxt = replace(read_hf_config(NEXT_DIR), seq_len=131072)
    layout = Layout.today(1, 1, 1, cp=4, global_batch=1, recompute="none")
    link, bw = context_parallel_link(layout, H100)
    moved = 3 / 4 * 32768 * (2 * 2048 + 2 * 4096 + 2 * 32 + 4096) * 2 / (eff.link_rate(link) * bw)
    assert mixer_cp_time(nxt, H100, layout, eff, 32768, 0.0) == pytest.approx(2 * (2 * 3 * eff.latency_s + moved))



def test_the_command_line_plans_a_hybrid_from_its_config_and_says_how_it_counted(capsys):
    from playground.planner.cli import main
    assert main(["--hf-config", str(NANO_DIR), "--gpus", "8", "--gpu", "H100", "--tokens", "1e12", "--seq-len", "4096",
                 "--global-batch", "512", "--ep", "8", "--recompute", "full", "--zero-stage", "3"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "52 blocks: 23 Mamba-2 (64 heads of 64, state 128, 8 groups), 6 attention, 23 MoE" in out
    assert "its recurrent mixers (Mamba-2, Gated DeltaNet) by their projections and chunked scan" in out
    assert "31.6 G params (3.58 G active)" in out


# ----------------------------------------------------------------------------- Gated DeltaNet: Qwen3-Next, Qwen3.5


def test_qwen3_next_reads_its_gated_deltanet_layers_and_is_counted_to_its_card():
    """Qwen3-Next-80B-A3B's card: 80B parameters, 3B activated (ours keep its 0.62B of untied embeddings)."""
    nxt = read_hf_config(NEXT_DIR, seq_len=4096)
    assert (nxt.layers, nxt.ssm_layers, nxt.attention_layers, nxt.attention_gate) == (48, 36, 12, True)
    assert nxt.ssm == GatedDeltaNet(key_heads=16, key_dim=128, value_heads=32, value_dim=128, conv=4)
    assert (nxt.experts, nxt.top_k, nxt.shared_width, nxt.shared_expert_gate, nxt.qk_norm) == (512, 10, 512, True, True)
    assert within_published_rounding(nxt.param_count, "80")
    assert within_published_rounding(nxt.active_param_count - 2 * 151936 * 2048, "3")
    assert nxt == replace(QWEN3_NEXT, seq_len=4096)   # the validation row's model is the chapter's config
    assert nxt.describe().startswith("48 layers: 36 Gated DeltaNet (16 key heads of 128, 32 value heads of 128) and "
                                     "12 gated attention, each with its MoE")


def test_a_gated_deltanet_hybrids_parameters_are_its_layers_summed():
    h, K, V, nv = 2048, 16 * 128, 32 * 128, 32
    delta = h * (2 * K + 2 * V + 2 * nv) + (2 * K + V) * 4 + 2 * nv + 128 + V * h   # in_proj, conv, dt/A, norm, out
    gated = 2 * h * 16 * 256 + 2 * h * 2 * 256 + 16 * 256 * h + 2 * 256        # query and gate, K, V, output, Q/K norms
    moe = 512 * 3 * h * 512 + 3 * h * 512 + 512 * h + h                         # experts, shared, router, shared gate
    layers = 36 * delta + 12 * gated + 48 * moe + 2 * 48 * h                    # each mixer's norm and each MoE's
    assert read_hf_config(NEXT_DIR).counted_params() == layers + 2 * 151936 * h + h


def test_the_delta_rule_adds_its_chunkwise_products_to_a_steps_flops():
    """Per token and value head, forward, chunks of Q = 64: K K^T and Q K^T (2 Q d_k each), the corrected keys and
    values (2 Q (d_k + d_v)), the masked mix (2 Q d_v), the state's two reads and its update (2 d_k d_v each)."""
    nxt, s, batch = read_hf_config(NEXT_DIR, seq_len=4096), 4096, 4
    without = replace(nxt, ssm_layers=0)
    layout = Layout.today(1, 1, 8, ep=8, micro_batch=1, global_batch=batch)
    h, K, V, nv, dk, dv, Q = 2048, 2048, 4096, 32, 128, 128, 64
    per_token = 2 * h * (2 * K + 2 * V + 2 * nv) + 2 * V * h \
        + nv * (2 * Q * dk + 2 * Q * (dk + dv) + 2 * Q * dk + 2 * Q * dv + 2 * 2 * dk * dv + 2 * dk * dv)
    extra = flops_per_step(nxt, layout, "none") - flops_per_step(without, layout, "none")
    assert extra == pytest.approx(3 * batch * s * 36 * per_token)


def test_qwen3_5s_language_model_reads_as_qwen3_next_from_its_text_config():
    """Qwen3.5 ships one config for its vision and language towers: the language model's keys are Qwen3-Next's."""
    text = {**NEXT, "model_type": "qwen3_5_moe_text", "num_hidden_layers": 8, "attn_output_gate": True,
            "layer_types": ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3 + ["full_attention"],
            "mtp_num_hidden_layers": 1}
    wrapped = model_from_hf_dict({"model_type": "qwen3_5_moe", "text_config": text, "vision_config": {"depth": 27}})
    assert (wrapped.layers, wrapped.ssm_layers, wrapped.attention_layers) == (8, 6, 2)
    assert "multi-token-prediction layers are not counted" in wrapped.read_note
    assert "vision encoder is not counted" in wrapped.read_note
    assert model_from_hf_dict(text).counted_params() == wrapped.counted_params()


def test_a_gate_on_the_attention_output_widens_the_query_projection():
    nxt = read_hf_config(NEXT_DIR)
    plain = replace(nxt, attention_gate=False)
    assert nxt.attention_params() - plain.attention_params() == 2048 * 16 * 256
    layout = Layout.today(global_batch=1)
    assert flops_per_step(nxt, layout, "none") - flops_per_step(plain, layout, "none") == pytest.approx(
        3 * 4096 * 12 * 2 * 2048 * 16 * 256 * (8192 / 4096))   # 12 attention layers, 8,192 tokens


def test_tp_must_split_the_deltanets_key_heads():
    nxt = read_hf_config(NEXT_DIR, seq_len=4096)
    with pytest.raises(PlanError, match="TP=32 does not divide the Gated DeltaNet mixers' 16 key heads"):
        check_layout(replace(nxt, heads=32, kv_heads=32), Layout.today(32, 1, 1, global_batch=32))


# ----------------------------------------------------------------------------- the counts against real modules
@pytest.mark.parametrize("shape", [Mamba2(heads=8, head_dim=16, state=16, groups=2, chunk=16),
                                   GatedDeltaNet(key_heads=2, key_dim=16, value_heads=4, value_dim=16, chunk=16)],
                         ids=["mamba2", "gated_deltanet"])
def test_a_mixers_parameters_and_flops_are_what_pytorch_counts_on_a_real_module(shape):
    """A module holding the weights as Hugging Face's does, its scan written as the chunked products the planner
    prices: PyTorch counts the parameters ``params`` gives and the forward FLOPs ``gemms`` gives (its convolution's
    apart, priced as bytes), and the chunked scan equals the token-by-token recurrence."""
    from playground.planner.measure_mixers import measure_mixer
    got = measure_mixer(shape, hidden=64, tokens=48)
    assert got["params"] == got["predicted_params"]
    assert got["flops"] == got["predicted_flops"]
    # the convolution: k multiply-adds a channel and token (padded both ends, it computes k - 1 outputs it drops)
    assert got["conv_flops"] == 2 * shape.conv * shape.conv_channels * (48 + shape.conv - 1)
    assert got["max_error"] < 1e-12 * got["scale"]


def test_the_chunked_scans_equal_their_recurrences_whatever_the_chunk():
    import torch
    from playground.planner.measure_mixers import (delta_rule_chunked, delta_rule_recurrent, ssd_chunked,
                                                   ssd_recurrent)
    torch.manual_seed(1)
    T, H, P, N, G = 37, 4, 8, 6, 2      # a last chunk cut short
    x, B, C = torch.randn(T, H, P, dtype=torch.float64), *torch.randn(2, T, G, N, dtype=torch.float64)
    dt, A = torch.rand(T, H, dtype=torch.float64), -torch.rand(H, dtype=torch.float64)
    reference = ssd_recurrent(x, dt, A, B.repeat_interleave(H // G, 1), C.repeat_interleave(H // G, 1))
    q, k = (torch.nn.functional.normalize(torch.randn(T, H, 8, dtype=torch.float64), dim=-1) for _ in range(2))
    v, g, beta = torch.randn(T, H, 5, dtype=torch.float64), -torch.rand(T, H, dtype=torch.float64), torch.rand(T, H, dtype=torch.float64)
    delta = delta_rule_recurrent(q, k, v, g, beta)
    for chunk in (1, 5, 16, 64):
        torch.testing.assert_close(ssd_chunked(x, dt, A, B, C, chunk, G), reference)
        torch.testing.assert_close(delta_rule_chunked(q, k, v, g, beta, chunk), delta)


# ----------------------------------------------------------------------------- Granite 4.0's Mamba-2 hybrid
GRANITE_H_SMALL = {   # ibm-granite/granite-4.0-h-small's config.json, the keys the planner reads (the rest at defaults)
    "model_type": "granitemoehybrid", "hidden_size": 4096, "num_hidden_layers": 40, "num_attention_heads": 32,
    "num_key_value_heads": 8, "num_local_experts": 72, "num_experts_per_tok": 10, "shared_intermediate_size": 1536,
    "intermediate_size": 768, "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2, "tie_word_embeddings": True,
    "vocab_size": 100352, "hidden_act": "silu", "layer_types": (["mamba"] * 9 + ["attention"]) * 4}


def test_granite_4_reads_its_mamba_layers_and_shared_mlp_and_is_counted_to_its_card():
    """Granite 4.0-H-Small's card: 32B parameters, 9B active; every layer a mixer and an MoE beside a shared MLP."""
    small = model_from_hf_dict(GRANITE_H_SMALL)
    assert (small.layers, small.ssm_layers, small.attention_layers) == (40, 36, 4)
    assert small.ssm == Mamba2(heads=128, head_dim=64, state=128, groups=1, conv=4, chunk=256)   # d_head: 2 h / 128
    assert (small.experts, small.top_k, small.expert_width, small.shared_width) == (72, 10, 768, 1536)
    assert within_published_rounding(small.param_count, "32") and within_published_rounding(small.active_param_count, "9")
    dense = model_from_hf_dict({**GRANITE_H_SMALL, "num_local_experts": 0})   # the shared MLP alone: a dense layer
    assert not dense.is_moe and dense.ffn_width == 1536
    with pytest.raises(PlanError, match="'layer_types' must list 'mamba' or 'attention' for each of the 40 layers"):
        model_from_hf_dict({**GRANITE_H_SMALL, "layer_types": ["mamba", "linear_attention"] * 20})


def test_a_dense_nemotron_h_counts_its_mlp_blocks_as_layers_and_a_mixed_one_its_mlps_as_dense_layers():
    """Nemotron-H's dense models spell MLP blocks '-': their layers are those MLPs (squared ReLU, ungated), the
    mixers counted beside them; a pattern with both '-' and 'E' is an MoE whose MLP blocks are dense layers."""
    dense = model_from_hf_dict({**NANO, "hybrid_override_pattern": "M-M-M*-", "intermediate_size": 10752})
    assert (dense.layers, dense.ssm_layers, dense.attention_layers, dense.is_moe, dense.ffn_width) == (3, 3, 1, False, 10752)
    h = 2688
    attention = h * 32 * 128 + 2 * h * 2 * 128 + 32 * 128 * h
    blocks = 3 * _mamba_params(h, 64, 64, 128, 8, 4) + attention + 3 * 2 * h * 10752 + 7 * h
    assert dense.counted_params() == blocks + 2 * 131072 * h + h
    mixed = model_from_hf_dict({**NANO, "hybrid_override_pattern": "M-ME*E", "intermediate_size": 10752})
    assert (mixed.layers, mixed.dense_layers, mixed.experts, mixed.ffn_width) == (3, 1, 128, 10752)


@pytest.mark.parametrize("config, missing, message", [
    (NANO, "mamba_num_heads", "lacks 'mamba_num_heads' .needed for the Mamba-2 mixers' heads."),
    (NANO, "hybrid_override_pattern", "lacks 'hybrid_override_pattern' .or 'layers_block_type'.: the order of its"),
    (NEXT, "linear_num_value_heads", "lacks 'linear_num_value_heads' .needed for Gated DeltaNet's value heads."),
])
def test_a_hybrid_config_missing_a_key_says_which_and_what_for(config, missing, message):
    with pytest.raises(PlanError, match=message):
        model_from_hf_dict({k: v for k, v in config.items() if k != missing})
