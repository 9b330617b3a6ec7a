"""The planner's one memory model: per-layer activations that reduce to Korthikanti et al.'s for a GPT,
model states under ZeRO, FSDP, HSDP and EP, FP8 weights, the pipeline schedules' in-flight micro-batches, the logits buffer, the
allowance, Megatron's stage placement — and the published layouts that ran judged as fitting."""

from dataclasses import replace

import pytest
import torch

from playground import hardware
from playground.planner import (FRAGMENTATION, FRAMEWORK_BYTES, Layout, Model, PlanError, activation_bytes_per_layer,
                                layer_activation_bytes, memory_per_gpu, model_state_bytes, preset, stage_layers,
                                usable_memory_bytes)
from playground.pipeline_parallel import max_in_flight, schedule_actions
from playground.planner.measure import measure_fp8_weight_bytes
from playground.planner.memory import fit_verdict, fp8_weight_bytes, in_flight_micro_batches, stage_params, tight_note

GPT = Model(96, 12288, 96, seq_len=2048)
LLAMA8, LLAMA70, LLAMA405 = preset("llama3-8b"), preset("llama3-70b"), preset("llama3-405b")


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("sp", [True, False])
def test_a_gpt_layer_saves_what_korthikanti_counts(recompute, sp):
    lay = Layout(8, 1, 1, recompute=recompute, sequence_parallel=sp)
    expected = activation_bytes_per_layer(2048, 1, 12288, 96, recompute, 8, sequence_parallel=sp)
    assert layer_activation_bytes(GPT, lay) == pytest.approx(expected, rel=1e-12)


def test_a_llama_layer_saves_norms_qkv_output_and_the_swiglu_intermediates():
    """Per token, bf16, no dropout: both norms' inputs and outputs (4 h), Q and the attention output
    (2 a d = 2 h), K and V of the 8 KV heads (2 k d), gate, up and their product (3 f); plus the
    flash kernel's fp32 log-sum-exp per head."""
    h, k, d, f, a, s = 4096, 8, 128, 14336, 32, 8192
    per_token = 2 * (4 * h + 2 * h + 2 * k * d + 3 * f) + 4 * a
    assert layer_activation_bytes(LLAMA8, Layout.today()) == s * per_token
    tp = Layout.today(tp=4)   # sequence parallelism: every saved tensor split over TP
    assert layer_activation_bytes(LLAMA8, tp) == pytest.approx(s * per_token / 4)


def test_flash_attention_drops_the_s_squared_scores():
    base = Layout.today(tp=8)
    flash, plain = (layer_activation_bytes(LLAMA405, replace(base, flash_attention=f)) for f in (True, False))
    s, a, t = 8192, 128, 8
    assert plain - flash == pytest.approx(2 * a * s * s / t - 4 * a * s / t)  # scores (no dropout) vs LSE


def test_context_parallelism_splits_every_saved_tensor_by_cp():
    one, four = (layer_activation_bytes(LLAMA70, Layout.today(tp=8, cp=c)) for c in (1, 4))
    assert four == pytest.approx(one / 4)


def test_model_states_shard_over_dp_times_cp_and_experts_over_ep():
    dense = memory_per_gpu(LLAMA8, Layout.today(1, 1, 8, global_batch=8, zero_stage=3))
    assert dense["model_states"] == pytest.approx(16 * LLAMA8.param_count / 8)
    cp = memory_per_gpu(LLAMA8, Layout.today(1, 1, 4, global_batch=8, cp=2, zero_stage=3))
    assert cp["model_states"] == pytest.approx(dense["model_states"])  # DP x CP = 8 shards either way
    mixtral = preset("mixtral-8x7b")
    lay = Layout.today(1, 1, 8, global_batch=8, ep=8, zero_stage=1)
    expert = mixtral.expert_params()
    rest = mixtral.param_count - expert
    states = model_state_bytes(rest, 8, 1)["total"] + model_state_bytes(expert / 8, 1, 1)["total"]
    assert memory_per_gpu(mixtral, lay)["model_states"] == pytest.approx(states)


def test_hsdp_shards_inside_the_group_and_holds_more_than_fsdp():
    fsdp = memory_per_gpu(LLAMA70, Layout.today(1, 1, 64, global_batch=64, zero_stage=3, recompute="full"))
    hsdp = memory_per_gpu(LLAMA70, Layout.today(1, 1, 64, global_batch=64, zero_stage=3, shard_group=8,
                                                recompute="full"))
    assert hsdp["model_states"] == pytest.approx(8 * fsdp["model_states"])
    assert fsdp["zero3_buffers"] > 0  # the gathered current and prefetched layer, one layer's gradient


def test_1f1b_holds_p_micro_batches_on_the_first_stage_and_the_fullest_stage_is_reported():
    lay = Layout.today(8, 16, 64, global_batch=2048)
    mem = memory_per_gpu(LLAMA405, lay)
    # 126 layers as 7 + 14 x 8 + 7: stage 1 (8 layers x 15 in flight) is fuller than stage 0 (7 x 16)
    assert (mem["stage"], mem["stage_layers"], mem["in_flight_micro_batches"]) == (1, 8, 15)
    per_layer = layer_activation_bytes(LLAMA405, lay)
    assert mem["activations"] == pytest.approx(8 * 15 * per_layer)
    interleaved = memory_per_gpu(LLAMA405, replace(lay, vpp=2))
    # stage 1's warm-up runs 2 (16 - 2) + 16 = 44 chunk forwards, then holds one more: 45 chunks of 4 layers
    assert interleaved["in_flight_micro_batches"] == 45 / 2
    assert interleaved["activations"] == pytest.approx(8 * 45 / 2 * per_layer)


@pytest.mark.parametrize("p,v,m", [(4, 2, 8), (4, 4, 12), (8, 2, 16), (8, 4, 32), (16, 4, 32), (3, 3, 6)])
def test_interleaved_stages_hold_what_the_schedule_keeps_in_flight(p, v, m):
    """The closed form equals the most (micro-batch, chunk) forwards whose backward has not run, counted
    on the interleaved 1F1B schedule chapter 2 runs, on every stage; stage 0's is Korthikanti et al.'s.  With
    as many micro-batches as stages, chapter 2's schedule (Megatron-LM's of 2021) runs every forward first on
    every stage, Megatron-Core's only where its warm-up reaches them all: the two agree on stages 0 and 1,
    the fullest."""
    for stage in range(p):
        held = max_in_flight(schedule_actions("interleaved", p, m, stage, v))
        assert in_flight_micro_batches(p, v, m, stage) == held / v
    assert in_flight_micro_batches(p, v, m, 0) == pytest.approx(p * (1 + (p - 1) / (p * v)))
    if p >= 4:
        for stage in (0, 1):
            held = max_in_flight(schedule_actions("interleaved", p, p, stage, v))
            assert in_flight_micro_batches(p, v, p, stage) == held / v == p


def test_the_last_stage_holds_the_logits_and_the_loss_copy():
    lay = Layout.today(1, 1, 8, global_batch=8)
    assert memory_per_gpu(LLAMA8, lay)["logits"] == 6 * 8192 * 128256  # bf16 logits + fp32 for the loss
    assert memory_per_gpu(LLAMA8, replace(lay, tp=2, dp=4))["logits"] == 6 * 8192 * 128256 / 2


@pytest.mark.parametrize("layers,pp,expected", [
    (126, 16, (7,) + (8,) * 14 + (7,)),   # Llama 3 405B: embedding and loss count as a layer
    (80, 8, (10,) * 8),
    (61, 16, (2,) + (4,) * 14 + (3,)),    # DeepSeek-V3's 61 layers
    (70, 12, (5,) + (6,) * 10 + (5,)),    # BLOOM
    (5, 2, (2, 3)),
])
def test_pipeline_stages_are_placed_as_megatron_places_them(layers, pp, expected):
    model = replace(LLAMA8, layers=layers)
    placed = stage_layers(model, Layout.today(1, pp, 1))
    assert placed == expected and sum(placed) == layers


def test_first_and_last_stage_layers_can_be_set_by_hand():
    model = replace(LLAMA8, layers=30)
    assert stage_layers(model, Layout.today(1, 4, 1, first_stage_layers=6, last_stage_layers=6)) == (6, 9, 9, 6)
    with pytest.raises(PlanError, match="do not split evenly"):
        stage_layers(model, Layout.today(1, 4, 1, first_stage_layers=5))


def test_usable_memory_is_what_the_gpu_shows_less_the_allowance():
    h100 = hardware.gpu("H100")
    assert usable_memory_bytes("H100") == pytest.approx(h100.memory_bytes * (1 - FRAGMENTATION) - FRAMEWORK_BYTES)
    assert FRAMEWORK_BYTES == 2 * 2 ** 30 and FRAGMENTATION == 0.05


# ----------------------------------------------------------------------------- published layouts
def test_llama3_405b_tp8_pp16_at_8k_fits_on_80_gb_without_recomputation():
    """Dubey et al. 2024: TP 8 x PP 16 x DP 64 on 8,192 H100s, 8K sequences, "without activation
    checkpointing"."""
    mem = memory_per_gpu(LLAMA405, Layout.today(8, 16, 64, global_batch=2048), "H100")
    assert mem["fits"] and mem["total"] > 0.8 * mem["usable"]  # it ran near the edge


def test_deepseek_v3_ep64_pp16_fits_on_h800s():
    """DeepSeek-AI 2024, Sec. 3.2: PP 16, EP 64 over 8 nodes, ZeRO-1 DP, no TP, 4K sequences."""
    lay = Layout.today(1, 16, 128, global_batch=15360, ep=64, zero_stage=1, recompute="full")
    assert memory_per_gpu(preset("deepseek-v3"), lay, "H800")["fits"]


def test_a_70b_fsdp_run_on_64_gpus_fits():
    """torchtitan's Llama 3 70B on 64 A100-80GB: FSDP over 64, local batch 1, 8K, full recomputation."""
    lay = Layout.today(1, 1, 64, global_batch=64, zero_stage=3, recompute="full")
    assert memory_per_gpu(LLAMA70, lay, "A100-80GB")["fits"]
    assert not memory_per_gpu(LLAMA70, replace(lay, recompute="none"), "A100-80GB")["fits"]


def test_405b_at_zero_0_without_model_parallelism_does_not_fit():
    lay = Layout.today(1, 1, 8192, global_batch=8192, zero_stage=0)
    mem = memory_per_gpu(LLAMA405, lay, "H100")
    assert not mem["fits"] and mem["model_states"] == pytest.approx(16 * LLAMA405.param_count)


QWEN3_MOE = Model(94, 4096, 64, seq_len=4096, kv_heads=4, head_dim=128, gated_mlp=True, position_embeddings=False,
                  norm="rmsnorm", experts=128, top_k=8, moe_ffn=1536, ffn=12288)


def test_megatron_selective_default_is_the_attention_core():
    lay = Layout.today(tp=2, recompute="selective")
    assert lay.selective_modules == ("core_attn",)
    assert layer_activation_bytes(LLAMA8, lay) == layer_activation_bytes(
        LLAMA8, replace(lay, recompute_modules=("core_attn",)))
    assert Layout.today(recompute="full", recompute_modules=("layernorm",)).selective_modules == ()


def test_recomputed_modules_keep_none_of_what_they_recompute():
    """Per token of one GPU (TP 2 with SP, so every saved tensor is halved): layernorm drops both
    norms' outputs (2 h x 2 B), moe_act each dispatched copy's activation (k f x 2 B), moe the whole
    expert part, its dispatched copies and router logits included (and, where the combine weights the
    experts' outputs, those outputs too)."""
    base = Layout.today(tp=2, recompute="selective", ep=8, dp=8)
    tokens, h, k, f = 4096, 4096, 8, 1536
    keep = lambda mods: layer_activation_bytes(QWEN3_MOE, replace(base, recompute_modules=mods), moe=True)  # noqa: E731
    core = keep(("core_attn",))
    assert core - keep(("core_attn", "layernorm")) == pytest.approx(tokens * 2 * h * 2 / 2)
    assert core - keep(("core_attn", "moe_act")) == pytest.approx(tokens * k * f * 2 / 2)
    assert core - keep(("core_attn", "moe")) == pytest.approx(tokens * (k * (2 * h + 3 * 2 * f) + 4 * 128) / 2)
    combine = replace(base, recompute_modules=("core_attn", "moe"), moe_probs="combine")
    assert layer_activation_bytes(QWEN3_MOE, combine, moe=True) == keep(("core_attn", "moe"))


def test_a_combine_that_weights_the_experts_outputs_keeps_each_of_them():
    """Megatron-Core since v0.13 scales each routed copy by its router weight inside the experts'
    activation (``activation_func_with_probs``) and unpermutes without the weights, so nothing past
    the experts' own inputs is kept; a combine that weights the outputs keeps each of them (h wide,
    2 B) for the weights' gradient: k h x 2 B a token more, halved by TP 2."""
    lay = Layout.today(tp=2, recompute="selective", ep=8, dp=8)
    tokens, h, k = 4096, 4096, 8
    inside = layer_activation_bytes(QWEN3_MOE, lay, moe=True)
    assert lay.moe_probs == "activation"
    assert layer_activation_bytes(QWEN3_MOE, replace(lay, moe_probs="combine"), moe=True) - inside == \
        pytest.approx(tokens * k * h * 2 / 2)
    with pytest.raises(PlanError, match="needs a mixture-of-experts model"):
        memory_per_gpu(LLAMA8, Layout.today(moe_probs="combine"))
    with pytest.raises(PlanError, match="moe_probs must be one of activation, combine"):
        memory_per_gpu(QWEN3_MOE, replace(lay, moe_probs="router"))


def test_a_routed_copy_keeps_what_the_memory_model_counts_as_pytorch_measures_it():
    """Counted by saved-tensor hooks on a bf16 SwiGLU expert (``measure_routed_copy_bytes``): with the
    router weight inside a fused activation (Megatron-Core since v0.13) a copy keeps its input, the
    activation's input and the second GEMM's input, 2 (h + 3 f) bytes; weighted at the combine it also
    keeps the expert's output, 2 h more.  Those are the memory model's per-copy terms (it leaves out the
    weight's own 4 bytes as small), and both placements compute the same output and gradients."""
    import torch
    from playground.planner import measure_routed_copy_bytes
    h, f, k = 4096, 1536, 8                       # QWEN3_MOE's expert
    # 8 copies, not the default 64: the bytes are per copy, and a CPU's bf16 matmuls are slow
    inside, at_combine = (measure_routed_copy_bytes(h, f, probs, copies=8) for probs in ("activation", "combine"))
    assert (inside, at_combine) == (2 * (h + 3 * f) + 4, 2 * (2 * h + 3 * f) + 4)
    lay = Layout.today(recompute="selective", ep=8, dp=8)
    tokens = 4096
    for probs, measured in (("activation", inside), ("combine", at_combine)):
        keep = lambda mods: layer_activation_bytes(QWEN3_MOE, replace(lay, recompute_modules=mods,  # noqa: E731
                                                                       moe_probs=probs), moe=True)
        assert keep(("core_attn",)) - keep(("core_attn", "moe")) == \
            pytest.approx(tokens * (k * (measured - 4) + 4 * QWEN3_MOE.experts))
    a, c = (measure_routed_copy_bytes(256, 96, probs, grad=True) for probs in ("activation", "combine"))
    for x, y in zip([a[1]] + a[2], [c[1]] + c[2]):
        scale = y.float().abs().max().item()
        torch.testing.assert_close(x.float(), y.float(), rtol=2e-2, atol=2e-2 * scale)


def test_an_fp8_mlp_keeps_what_the_memory_model_counts_as_pytorch_measures_it():
    """Counted by saved-tensor hooks on a SwiGLU MLP whose linear layers run in FP8 (``measure_fp8_mlp_bytes``):
    keeping the FP8 copy of each linear layer's input, as Transformer Engine does, a token leaves h + 5 f bytes
    (the first input's copy, the checkpointed activation's bf16 gate and up, the product's copy); keeping the bf16
    inputs, as torchao does, 2 h + 6 f.  Their difference, h + f, is what the memory model takes off an MLP under
    ``fp8_saved_inputs``; both keep the same gradients, and they equal a fake-quantized reference's."""
    import torch
    from playground.planner import measure_fp8_mlp_bytes
    h, f = 4096, 14336
    kept = {keep: measure_fp8_mlp_bytes(h, f, keep, tokens=8) for keep in ("fp8", "bf16")}
    assert kept == {"fp8": h + 5 * f, "bf16": 2 * h + 6 * f}
    lay = Layout.today(recompute="selective", dtype="fp8")
    tokens = 8192
    # the whole layer's difference: the MLP's (h + f) and the attention's norm output (h) less the attention
    # output's one-byte copy (a d_h)
    attention_out = LLAMA8.heads * LLAMA8.head_size
    assert layer_activation_bytes(LLAMA8, replace(lay, fp8_saved_inputs=False)) - layer_activation_bytes(LLAMA8, lay) \
        == pytest.approx(tokens * (kept["bf16"] - kept["fp8"] + h - attention_out))
    (_, out8, grads8), (_, out16, grads16) = (measure_fp8_mlp_bytes(64, 96, keep, grad=True) for keep in ("fp8", "bf16"))
    torch.testing.assert_close(out8, out16)
    for a, b in zip(grads8, grads16):
        torch.testing.assert_close(a, b)

    def fake_quant(t):   # quantize-dequantize in fp32, the gradient passed straight through
        t, scale = t.float(), 448.0 / t.abs().amax().float().item()
        return t + ((t * scale).to(torch.float8_e4m3fn).float() / scale - t).detach()

    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 64, generator=g).to(torch.bfloat16).requires_grad_()
    w_in = (torch.randn(64, 192, generator=g) / 8).to(torch.bfloat16).requires_grad_()
    w_out = (torch.randn(96, 64, generator=g) / 96 ** 0.5).to(torch.bfloat16).requires_grad_()
    gate, up = (fake_quant(x) @ fake_quant(w_in)).to(torch.bfloat16).float().chunk(2, dim=-1)
    act = (torch.nn.functional.silu(gate) * up).to(torch.bfloat16)
    out = (fake_quant(act) @ fake_quant(w_out)).to(torch.bfloat16).float()
    out.square().sum().backward()
    torch.testing.assert_close(out.detach(), out8)
    for a, b in zip(grads8, (x.grad, w_in.grad, w_out.grad)):
        scale = b.float().abs().max().item()
        torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-2 * scale)


def test_the_model_zoos_pp32_run_fits_with_its_norms_and_activations_recomputed():
    """Megatron MoE Model Zoo, Qwen3-235B-A22B on 256 H100s, TP 2 EP 8 PP 32 VPP 3, recompute
    'norm, act' (--recompute-modules layernorm moe_act): it fits with room.  Without it the memory
    model leaves no margin only where a combine keeps each expert's output, as Megatron-Core's did
    before v0.13."""
    lay = Layout.today(2, 32, 4, ep=8, expert_tp=1, global_batch=2048, vpp=3, grad_reduce="bf16",
                       recompute="selective", recompute_modules=("layernorm", "moe_act"))
    recomputed = memory_per_gpu(QWEN3_MOE, lay, "H100")
    assert recomputed["fits"] and not recomputed["tight"]
    assert memory_per_gpu(QWEN3_MOE, replace(lay, recompute="none", moe_probs="combine"), "H100")["tight"]
    assert not memory_per_gpu(QWEN3_MOE, replace(lay, recompute="none"), "H100")["tight"]


def test_a_plan_past_the_allowance_but_inside_the_gpu_fits_only_tightly():
    """Usable memory keeps 2 GiB and 5% for what no formula counts; a total past it but inside the
    GPU's memory fits, tightly (the count is uncertain by about as much), and past the GPU does not."""
    lay = Layout.today(2, 32, 4, ep=8, expert_tp=1, global_batch=2048, vpp=3, grad_reduce="bf16",
                       moe_probs="combine")
    mem = memory_per_gpu(QWEN3_MOE, lay, "H100")
    assert mem["usable"] < mem["total"] <= mem["capacity"]
    assert (mem["fits"], mem["tight"], fit_verdict(mem)) == (True, True, "fits only tightly")
    assert "expandable_segments" in tight_note(mem) and f"{(mem['capacity'] - mem['total']) / 2**30:.1f} GiB" \
        in tight_note(mem)
    over = memory_per_gpu(QWEN3_MOE, replace(lay, micro_batch=2), "H100")
    assert over["total"] > over["capacity"] and fit_verdict(over) == "does NOT fit" and not over["tight"]


@pytest.mark.parametrize("modules, message", [(("bogus",), "unknown recompute module"),
                                              (("mla_up_proj",), "latent attention"),
                                              ("layernorm", "a list")])
def test_recompute_modules_that_cannot_apply_are_refused(modules, message):
    with pytest.raises(PlanError, match=message):
        memory_per_gpu(LLAMA8, Layout.today(recompute="selective", recompute_modules=modules))


def test_fp8_activation_caching_halves_what_the_linear_layers_read_and_deepseek_v3_fits_as_it_ran():
    """DeepSeek-V3 Sec. 3.3.4: the linear layers' inputs cached in FP8. In a dense Llama layer they
    are both norms' outputs (2 h) and the MLP's gate, up and product (3 f): one byte saved on each
    against a layer that keeps them in bf16; Q, K, V, the attention output and the residual stream stay
    in bf16.  With its recompute modules and that caching DeepSeek-V3's PP 16 x EP 64 fits on its H800s;
    in bf16 it would not, with each expert's output kept as the validation row reads HAI-LLM's combine
    (``moe_probs="combine"``)."""
    lay = Layout.today(recompute="selective", dtype="fp8", fp8_saved_inputs=False)
    h, f, s = 4096, 14336, 8192
    saved = layer_activation_bytes(LLAMA8, lay) - layer_activation_bytes(LLAMA8, replace(lay, fp8_activations=True))
    assert saved == pytest.approx(s * (2 * h + 3 * f))
    deepseek = Layout.today(1, 16, 128, ep=64, global_batch=15360, dtype="fp8", recompute="selective",
                            recompute_modules=("layernorm", "mla_up_proj", "moe_act"), fp8_activations=True,
                            moe_probs="combine")
    assert memory_per_gpu(preset("deepseek-v3"), deepseek, "H800")["fits"]
    assert not memory_per_gpu(preset("deepseek-v3"), replace(deepseek, fp8_activations=False), "H800")["fits"]
    with pytest.raises(PlanError, match="needs --dtype fp8"):
        memory_per_gpu(LLAMA8, Layout.today(fp8_activations=True))


def test_transformer_engine_keeps_each_linear_layers_fp8_input_and_torchao_the_bf16_one():
    """Under FP8, Transformer Engine's Linear keeps for the weight gradient the FP8 copy of its input it cast
    (how much less that is, the test above measures); torchao's Float8Linear keeps the bf16 input
    (``fp8_saved_inputs=False``): a bf16 layer's bytes, and the layout says so.  The default is Transformer
    Engine's, what Megatron-Core and NeMo run."""
    lay = Layout.today(recompute="selective", dtype="fp8")
    assert lay.fp8_saved_inputs
    bf16 = layer_activation_bytes(LLAMA8, replace(lay, dtype="bf16"))
    assert layer_activation_bytes(LLAMA8, replace(lay, fp8_saved_inputs=False)) == bf16 > layer_activation_bytes(LLAMA8, lay)
    assert "bf16 inputs saved" in replace(lay, fp8_saved_inputs=False).describe()
    assert "bf16 inputs saved" not in lay.describe()


def test_fp8_weight_copies_hold_what_the_memory_model_counts_as_pytorch_measures_it():
    """A step whose linear layers cast each weight to FP8 once and reuse the cast keeps 1 byte a weight element,
    2 with the transposed copy a Hopper's FP8 GEMMs need; the cached casts give the gradients casting every
    micro-batch gives.  The memory model counts 2 on a Hopper, 1 on a Blackwell (whose FP8 GEMMs take either
    layout), and under block scaling both directions with a scale per 32 elements."""
    for transpose, hopper in ((False, False), (True, True)):
        held, cached, fresh = measure_fp8_weight_bytes(256, 96, transpose, grad=True)
        for a, b in zip(cached, fresh):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        gpu = hardware.gpu("H100" if hopper else "B200")
        assert held == fp8_weight_bytes(Layout.today(1, dtype="fp8"), gpu) == (2 if hopper else 1)
    assert fp8_weight_bytes(Layout.today(1, dtype="fp8", fp8_scaling="block"), hardware.gpu("B200")) == 2 + 1 / 16


def test_fp8_weights_replace_the_bf16_ones_or_sit_beside_them():
    """Megatron's --fp8-param-gather keeps each linear weight in FP8 and no bf16 copy: on a Hopper the cast and
    its transpose take a bf16 weight's 2 bytes, on a Blackwell 1.  Without it the bf16 weights stay and Transformer
    Engine's cached FP8 copies sit beside them for the step.  Only the layers' weights run in FP8: the
    embedding and output layer keep their bf16 bytes.  ZeRO-3 gathers the weights for each use and keeps none."""
    lay = Layout.today(8, 4, 4, global_batch=64, dtype="fp8")
    layers = stage_params(LLAMA70, lay, 0, 20, 0, embeddings=False)[0]
    bf16 = memory_per_gpu(LLAMA70, replace(lay, dtype="bf16"), "H100")["model_state_parts"]["parameters"]
    for gpu, fp8_params, extra in (("H100", True, 0), ("H100", False, 2), ("B200", True, -1), ("B200", False, 1)):
        parts = memory_per_gpu(LLAMA70, replace(lay, fp8_params=fp8_params), gpu)["model_state_parts"]
        assert parts["parameters"] == pytest.approx(bf16 + extra * layers)
    assert layers < stage_params(LLAMA70, lay, 0, 20, 0)[0]   # stage 0 also holds the embedding
    assert "bf16 weights" in replace(lay, fp8_params=False).describe() and "bf16 weights" not in lay.describe()
    cast_afresh = replace(lay, fp8_params=False, fp8_weight_cache=False)   # bf16 weights, no copy kept
    assert memory_per_gpu(LLAMA70, cast_afresh, "H100")["model_state_parts"]["parameters"] == pytest.approx(bf16)
    fsdp = Layout.today(1, 1, 64, global_batch=64, zero_stage=3)
    assert memory_per_gpu(LLAMA70, replace(fsdp, dtype="fp8"), "B200")["model_states"] == \
        memory_per_gpu(LLAMA70, fsdp, "B200")["model_states"]


def test_recomputing_a_share_of_the_blocks_keeps_that_share_of_inputs_and_the_rest_whole():
    """fms-fsdp's selective checkpointing, Megatron's --recompute-num-layers: a share r of the layers keep
    their input alone, the others everything, r x full + (1 - r) x none a layer on average; the step and
    its FLOPs grow by r of a forward."""
    from playground.planner.costs import flops_per_step
    full = Layout.today(2, recompute="full")
    none = replace(full, recompute="none")
    keep = lambda lay: layer_activation_bytes(LLAMA8, lay)  # noqa: E731
    for r in (0.25, 0.5, 0.75):
        lay = replace(full, recompute_share=r)
        assert keep(lay) == pytest.approx(r * keep(full) + (1 - r) * keep(none))
        assert flops_per_step(LLAMA8, lay) == pytest.approx(r * flops_per_step(LLAMA8, full)
                                                            + (1 - r) * flops_per_step(LLAMA8, none))
    with pytest.raises(PlanError, match="does not go with recompute selective"):
        memory_per_gpu(LLAMA8, Layout.today(recompute="selective", recompute_share=0.5))
    with pytest.raises(PlanError, match=r"in \(0, 1\]"):
        memory_per_gpu(LLAMA8, Layout.today(recompute="full", recompute_share=0))


def test_chapter_5s_fp8_exercise_saves_what_its_solution_says():
    """Exercise ex-capacity-fp8-memory: Llama 3 70B at 8K on 64 H100s, TP 8 x PP 4, nothing recomputed.  Stage 0
    holds 80 layer passes of 1,024 tokens: 21.0 GiB of activations in bf16 (274,688 bytes a token), 18.1 GiB
    under Transformer Engine's FP8 (36,864 bytes a token less), and 21.0 again under torchao's float8."""
    from playground.planner.capacity import plan
    run = dict(model="llama3-70b", tokens=1e12, gpus=64, tp=8, pp=4, global_batch=256, recompute="none", dtype="fp8")
    gib = [plan(**run, **extra)["memory"]["activations"] / 2 ** 30 for extra in ({}, {"fp8_saved_inputs": False})]
    assert [round(g, 1) for g in gib] == [18.1, 21.0]
    assert gib[1] * 2 ** 30 == pytest.approx(80 * 1024 * 274_688)
    assert (gib[1] - gib[0]) * 2 ** 30 == pytest.approx(80 * 1024 * 36_864)


def test_bf16_adam_moments_keep_eight_bytes_of_optimizer_state_a_parameter_not_twelve():
    """The fp32 master weight stays; the two moments drop from 4 bytes to 2 (DeepSeek-V3's AdamW, Megatron-Core's
    precision-aware optimizer): 4 bytes a parameter the optimizer owns, on its ZeRO shard; and the step, which reads
    and writes both moments once, moves 8 bytes less a parameter it owns."""
    from playground.planner import Cluster, predict
    lay = Layout.today(1, 1, 8, global_batch=64)          # ZeRO-1: the optimizer state sharded over 8
    fp32 = memory_per_gpu(LLAMA8, lay)
    bf16 = memory_per_gpu(LLAMA8, replace(lay, optimizer_moments="bf16"))
    assert fp32["model_states"] - bf16["model_states"] == pytest.approx(4 * LLAMA8.param_count / 8)
    assert bf16["activations"] == fp32["activations"]
    cluster = Cluster.of("H100")
    t32, t16 = (predict(LLAMA8, cluster, replace(lay, optimizer_moments=m))["time_breakdown"]["optimizer"]
                for m in ("fp32", "bf16"))
    assert t16 == pytest.approx(t32 * (30 - 8) / 30)
    assert "bf16 Adam moments" in replace(lay, optimizer_moments="bf16").describe()
    with pytest.raises(PlanError, match="optimizer_moments"):
        memory_per_gpu(LLAMA8, replace(lay, optimizer_moments="fp16"))


def test_offloaded_inputs_wait_in_host_memory_and_two_layers_worth_stay_on_the_gpu():
    """Megatron-Core's fine-grained activation offloading sends each named module's saved input to host memory:
    for Llama 3 8B the five dense modules take both norms' inputs, the attention norm's output, Q, K, V and the
    attention output off the GPU, leaving the MLP norm's output and the SwiGLU's three products (and the
    log-sum-exp); for Mixtral, expert_fc1 takes each dispatched copy (h a copy) and moe_act its gate and up products
    (2 f).  On the GPU the activations are the kept bytes of every layer in flight plus two layers' offloaded ones:
    the copies leaving in forward and those brought back ahead of backward."""
    from playground.planner.activations import layer_offloaded_bytes
    h, k, d, f, a, s = 4096, 8, 128, 14336, 32, 8192
    dense = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm")
    lay = Layout.today(global_batch=8)
    off = replace(lay, offload_modules=dense)
    assert layer_activation_bytes(LLAMA8, off) == s * (2 * (h + 3 * f) + 4 * a)
    assert layer_offloaded_bytes(LLAMA8, off) == s * 2 * (5 * h + 2 * k * d)
    kept, moved = memory_per_gpu(LLAMA8, lay), memory_per_gpu(LLAMA8, off)
    assert moved["activations"] == pytest.approx(kept["activations"] - 32 * layer_offloaded_bytes(LLAMA8, off)
                                                 + 2 * layer_offloaded_bytes(LLAMA8, off))
    assert moved["offloaded"] == pytest.approx(32 * layer_offloaded_bytes(LLAMA8, off)) and "offloaded" not in kept
    mixtral = preset("mixtral-8x7b")
    moe = Layout.today(ep=8, dp=8, global_batch=64)
    tokens, top_k, fm = mixtral.seq_len, mixtral.top_k, mixtral.expert_width
    base = layer_activation_bytes(mixtral, moe, moe=True)
    assert base - layer_activation_bytes(mixtral, replace(moe, offload_modules=("expert_fc1",)), moe=True) == \
        pytest.approx(tokens * top_k * 2 * mixtral.hidden)
    assert base - layer_activation_bytes(mixtral, replace(moe, offload_modules=("moe_act",)), moe=True) == \
        pytest.approx(tokens * top_k * 2 * 2 * fm)
    assert "offloading the inputs of expert_fc1" in replace(moe, offload_modules=("expert_fc1",)).describe()


@pytest.mark.parametrize("modules, error", [(("attn_proj",), "needs core_attn"), (("expert_fc1",), "needs a model with experts"),
                                            (("mlp",), "unknown offload module"), ("core_attn", "a list")])
def test_offload_modules_follow_megatron_cores_rules(modules, error):
    with pytest.raises(PlanError, match=error):
        memory_per_gpu(LLAMA8, replace(Layout.today(), offload_modules=modules))


def test_offloaded_copies_cost_only_what_outlasts_the_pass_they_hide_behind():
    """Each layer's offloaded bytes leave over the host link during its forward and come back during its backward, on
    a copy engine: the exposed time is what outlasts each pass, at the ``link`` share of the datasheet rate.  Llama 3
    8B's dense modules over an H100's PCIe Gen5 (64 GB/s a direction) outlast the forward; over a GB200's share of
    NVLink-C2C (225 GB/s) they hide.  A TPU has no host link in the table: offloading there is an error, not a guess."""
    from playground.planner import Cluster, EFFICIENCY, predict
    from playground.planner.activations import layer_offloaded_bytes
    from playground.planner.layer_costs import layer_costs
    lay = replace(Layout.today(global_batch=8), offload_modules=("attn_norm", "qkv_linear", "core_attn", "attn_proj",
                                                                 "mlp_norm"))
    h100, gb200 = Cluster.of("H100"), Cluster.of("GB200")
    costs = layer_costs(LLAMA8, h100, lay, EFFICIENCY, moe=False)
    one_way = layer_offloaded_bytes(LLAMA8, lay) / (EFFICIENCY.link * 64e9)
    assert costs["offload"] == pytest.approx(max(0, one_way - costs["forward"])
                                             + max(0, one_way - costs["backward"] - costs["recompute"]))
    assert costs["offload"] > 0 and layer_costs(LLAMA8, gb200, lay, EFFICIENCY, moe=False)["offload"] == 0
    p, kept = predict(LLAMA8, h100, lay), predict(LLAMA8, h100, Layout.today(global_batch=8))
    assert p["time_breakdown"]["activation_offload"] > 0 and "activation_offload" not in kept["time_breakdown"]
    assert p["step_time_s"] - kept["step_time_s"] == pytest.approx(p["time_breakdown"]["activation_offload"])
    with pytest.raises(PlanError, match="no link to host memory"):
        predict(LLAMA8, Cluster.of("TPUv4"), lay)


def test_chapter_5s_offload_exercise_prints_what_its_solution_says():
    """ex-capacity-offload: Qwen3-235B at micro-batch 3 on 256 GB200s fits offloading each dispatched copy, at full
    speed; recomputing the MoE layer or dropping to micro-batch 1 fits too, slower."""
    from playground.planner import predict
    from playground.planner.published_moe_report import MCORE_MOE_REPORT
    row = next(r for r in MCORE_MOE_REPORT if r.layout.offload_modules)
    kept = replace(row.layout, offload_modules=())
    quoted = {"offload": (row.layout, "168.6", "6,849"),
              "moe": (replace(kept, recompute_modules=("moe_act", "layernorm", "moe")), "102.2", "5,520"),
              "mbs1": (replace(kept, micro_batch=1), "86.0", "5,321")}
    for lay, gb, speed in quoted.values():
        p = predict(row.model, row.cluster, lay)
        assert (f"{p['memory']['total'] / 1e9:.1f}", f"{p['tokens_per_s'] / p['gpus']:,.0f}") == (gb, speed)
    assert not memory_per_gpu(row.model, kept, row.gpu)["fits"]


def test_offloading_beside_whole_block_recomputation_is_an_error_not_a_silent_no_op():
    """Full (every block) and per-op recomputation keep none of the inputs offloading moves: asking for both is a
    one-line error; with a share of the blocks recomputed the others still offload, and the fit advice that moves
    an offloading layout to full recomputation says it drops the offloading."""
    from playground.planner.layout_search import fit_advice
    for rc in ("full", "op"):
        with pytest.raises(PlanError, match="nothing to offload"):
            memory_per_gpu(LLAMA8, replace(Layout.today(), recompute=rc, offload_modules=("core_attn",)))
    half = replace(Layout.today(global_batch=8), recompute="full", recompute_share=0.5, offload_modules=("core_attn",))
    assert memory_per_gpu(LLAMA8, half)["offloaded"] > 0
    mixtral = preset("mixtral-8x7b")
    lay = Layout.today(ep=8, dp=64, global_batch=128, offload_modules=("expert_fc1", "moe_act"))
    assert "--recompute full --offload-modules none" in [a["change"] for a in fit_advice(mixtral, lay, "H100", 64)]
