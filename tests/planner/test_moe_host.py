"""A MoE layer's kernels: each a gap on the device, and host launches the GPU waits for where they outlast
the layer's device work.

The kernel counts and the host time per kernel are the H200 measurement's (tests/bench/test_moe_records.py
holds them to the record); here each is checked against its accounting and the direction it must move a step."""

from __future__ import annotations

from dataclasses import replace

import pytest

from playground.planner.costs import (EXPERT_BIAS_BYTES, EXPERT_GEMMS, FP8_QUANTIZE_KERNELS, MOE_EXPERT_KERNELS,
                                      MOE_LAYER_KERNELS, Model, expert_bias_kernels, expert_gemm_launches,
                                      fp8_expert_casts, layer_forward, layer_gemms, moe_gap_time, moe_host_time)
from playground.planner.errors import PlanError
from playground.planner.layout import EFFICIENCY, Cluster, Layout
from playground.planner.presets import preset
from playground.planner.step_range import predict_range
from playground.planner.step_time import predict

# Qwen3-30B-A3B's shape, four layers: 128 experts of 768, top 8
QWEN3_30B = Model(4, 2048, 32, seq_len=4096, experts=128, top_k=8, moe_ffn=768, gated_mlp=True, norm="rmsnorm",
                  kv_heads=4, head_dim=128, position_embeddings=False, tied_embeddings=False, qkv_bias=False,
                  proj_bias=False)
B200 = Cluster.of("B200")
EP8 = Layout.today(1, 1, 8, ep=8, micro_batch=1, global_batch=64)


def _wait(layout, model=QWEN3_30B, cluster=B200):
    return predict(model, cluster, layout)["time_breakdown"]["moe_host_wait"]


def test_the_host_launches_a_fixed_set_of_kernels_a_layer_and_more_per_expert_launched_apart():
    grouped, per_expert = (moe_host_time(QWEN3_30B, replace(EP8, moe_launch=m), EFFICIENCY)
                           for m in ("grouped", "per_expert"))
    assert grouped == pytest.approx(MOE_LAYER_KERNELS * EFFICIENCY.host_kernel_s)
    assert per_expert - grouped == pytest.approx(16 * MOE_EXPERT_KERNELS * EFFICIENCY.host_kernel_s)
    assert moe_host_time(QWEN3_30B, replace(EP8, moe_launch="graphed"), EFFICIENCY) == 0
    # the recomputed forward launches its third again
    assert moe_host_time(QWEN3_30B, replace(EP8, recompute="full"), EFFICIENCY) == pytest.approx(4 / 3 * grouped)


def test_transformer_engine_issues_a_cublas_gemm_per_local_expert_each_at_its_measured_host_time():
    """GroupedLinear's default grouped GEMM (multi_stream_cublas_gemm) runs one cuBLASLt GEMM per local expert from
    C++: forward the two matrices, backward each one's input and weight gradients.  The host pays each the time
    Transformer Engine's own benchmark measured (18.6 us a GEMM on a Blackwell, whatever the tokens); the device's
    gaps are the grouped layer's, the four streams overlapping each GEMM's launch with another's run."""
    multi = replace(EP8, moe_launch="multi_stream")                 # 16 local experts
    assert EXPERT_GEMMS == {"forward": 2, "backward": 4}
    assert expert_gemm_launches(QWEN3_30B, multi) == (32, 64)
    assert expert_gemm_launches(QWEN3_30B, EP8) == (0, 0)
    assert EFFICIENCY.expert_gemm_host_s == pytest.approx(18.6e-6)
    assert EFFICIENCY.spread["expert_gemm_host_s"] == (10e-6, 19.5e-6)
    grouped = moe_host_time(QWEN3_30B, EP8, EFFICIENCY)
    assert moe_host_time(QWEN3_30B, multi, EFFICIENCY) - grouped == pytest.approx(96 * 18.6e-6)
    # recomputing the MoE module issues the forward's GEMMs again
    again = replace(multi, recompute="selective", recompute_modules=("moe",))
    assert moe_host_time(QWEN3_30B, again, EFFICIENCY) - moe_host_time(QWEN3_30B, multi, EFFICIENCY) \
        == pytest.approx(grouped / 3 + 32 * 18.6e-6)
    gemms = layer_gemms(QWEN3_30B, 1, 1, 1, 8, True)
    assert moe_gap_time(QWEN3_30B, multi, gemms, EFFICIENCY) == moe_gap_time(QWEN3_30B, EP8, gemms, EFFICIENCY)
    # fewer, larger experts a rank cost the host less: EP 64 holds two
    ep64 = replace(multi, ep=64, dp=64)
    assert expert_gemm_launches(QWEN3_30B, ep64) == (4, 8)
    # so a step launched expert by expert from C++ lies between one grouped kernel and an eager loop in Python
    steps = [predict(QWEN3_30B, B200, replace(EP8, moe_launch=m))["step_time_s"]
             for m in ("graphed", "grouped", "multi_stream", "per_expert")]
    assert steps == sorted(steps) and steps[2] > steps[1]


def test_every_kernel_of_a_moe_layer_costs_the_device_a_gap_beyond_the_gemms_already_priced():
    gemms = layer_gemms(QWEN3_30B, 1, 1, 1, 8, True)
    k, graph = EFFICIENCY.kernel_s, EFFICIENCY.graph_kernel_s
    # the router's and the experts' GEMMs are charged a launch each, once forward and twice backward
    assert moe_gap_time(QWEN3_30B, EP8, gemms, EFFICIENCY) == pytest.approx((MOE_LAYER_KERNELS - 3 * 3) * k)
    assert moe_gap_time(QWEN3_30B, replace(EP8, moe_launch="per_expert"), gemms, EFFICIENCY) == \
        pytest.approx((MOE_LAYER_KERNELS + 16 * MOE_EXPERT_KERNELS - 9) * k)
    # a graph replays every kernel at its own, shorter gap, less what the GEMMs were charged
    assert moe_gap_time(QWEN3_30B, replace(EP8, moe_launch="graphed"), gemms, EFFICIENCY) == \
        pytest.approx(MOE_LAYER_KERNELS * graph - 9 * k)
    assert EFFICIENCY.graph_kernel_s < EFFICIENCY.spread["kernel_s"][0] / 2
    graphed, grouped, per_expert = (
        predict(QWEN3_30B, B200, replace(EP8, moe_launch=m), replace(EFFICIENCY, host_kernel_s=0.0))["step_time_s"]
        for m in ("graphed", "grouped", "per_expert"))
    assert graphed < grouped < per_expert


def test_transformer_engine_casts_each_expert_apart_unless_delayed_scaling_fuses_them():
    """GroupedLinear's split_quantize fuses the experts' casts under delayed scaling only: under tensor scaling
    each expert's operand takes four kernels (zero the maximum, find it, the scale, the cast), under block one."""
    fp8 = replace(EP8, dtype="fp8")                    # 16 local experts, 8 micro-batches: weights cast on the first
    assert fp8.micro_batches == 8 and FP8_QUANTIZE_KERNELS == {"tensor": 4, "block": 1, "delayed": 0}
    # forward the two inputs and an eighth of the two weights, backward the two output gradients
    assert fp8_expert_casts(QWEN3_30B, fp8) == pytest.approx(((2 + 2 / 8) * 4 * 16, 2 * 4 * 16))
    assert fp8_expert_casts(QWEN3_30B, replace(fp8, fp8_scaling="block")) == pytest.approx(((2 + 2 / 8) * 16, 2 * 16))
    assert fp8_expert_casts(QWEN3_30B, replace(fp8, fp8_scaling="delayed")) == pytest.approx((2 + 2 / 8, 2))
    assert fp8_expert_casts(QWEN3_30B, EP8) == (0, 0)                      # bf16 casts nothing
    # each cast kernel is a gap on the device and a launch from Transformer Engine's C++ loop on the host
    gemms, k = layer_gemms(QWEN3_30B, 1, 1, 1, 8, True), EFFICIENCY.kernel_s
    casts = sum(fp8_expert_casts(QWEN3_30B, fp8))
    assert moe_gap_time(QWEN3_30B, fp8, gemms, EFFICIENCY) - moe_gap_time(QWEN3_30B, EP8, gemms, EFFICIENCY) \
        == pytest.approx(casts * k)
    assert moe_host_time(QWEN3_30B, fp8, EFFICIENCY) - moe_host_time(QWEN3_30B, EP8, EFFICIENCY) \
        == pytest.approx(casts * k)
    # so, all else equal, tensor scaling's step is the slowest on a MoE of many small experts
    steps = {s: predict(QWEN3_30B, B200, replace(fp8, fp8_scaling=s))["step_time_s"] for s in ("tensor", "block", "delayed")}
    assert steps["delayed"] < steps["block"] < steps["tensor"]


def test_biased_experts_get_their_output_biases_added_expert_by_expert_from_python():
    """Megatron-Core's TEGroupedMLP (and NeMo AutoModel's experts of 2025) add each expert's output bias, scaled by
    its rows' routing probabilities in fp32, one expert at a time, then concatenate the rows and cast them back."""
    biased = replace(QWEN3_30B, proj_bias=True)                 # 16 local experts at EP 8
    assert expert_bias_kernels(QWEN3_30B, EP8) == (0, 0)
    assert expert_bias_kernels(biased, EP8) == (2 * 16 + 2, 5 * 16 + 3)
    kernels = sum(expert_bias_kernels(biased, EP8))
    gemms = layer_gemms(QWEN3_30B, 1, 1, 1, 8, True)
    # each kernel a gap on the device and a launch from Python on the host
    assert moe_gap_time(biased, EP8, gemms, EFFICIENCY) - moe_gap_time(QWEN3_30B, EP8, gemms, EFFICIENCY) == \
        pytest.approx(kernels * EFFICIENCY.kernel_s)
    assert moe_host_time(biased, EP8, EFFICIENCY) - moe_host_time(QWEN3_30B, EP8, EFFICIENCY) == \
        pytest.approx(kernels * EFFICIENCY.host_kernel_s)
    # and 68 bytes per element of the experts' output (a routed copy h wide), a third of them a pass
    assert EXPERT_BIAS_BYTES == 68
    routed = 4096 * 8 * 2048                                    # 4,096 tokens, top 8, h = 2,048
    extra = layer_forward(biased, EP8, B200.gpu, EFFICIENCY, moe=True)["elementwise"] \
        - layer_forward(QWEN3_30B, EP8, B200.gpu, EFFICIENCY, moe=True)["elementwise"]
    assert extra == pytest.approx(EXPERT_BIAS_BYTES / 3 * routed / (EFFICIENCY.hbm * B200.gpu.hbm_bytes_per_s)
                                  + kernels * EFFICIENCY.kernel_s / 3)
    assert predict(biased, B200, EP8)["step_time_s"] > predict(QWEN3_30B, B200, EP8)["step_time_s"]


def test_recomputing_the_moe_module_pays_its_forward_third_of_the_gaps_again():
    from playground.planner.costs import module_recompute_time
    recompute = replace(EP8, recompute="selective", recompute_modules=("moe",))
    with_gaps, without = (module_recompute_time(QWEN3_30B, recompute, B200.gpu, e, moe=True)
                          for e in (EFFICIENCY, replace(EFFICIENCY, kernel_s=0.0)))
    gaps = moe_gap_time(QWEN3_30B, recompute, layer_gemms(QWEN3_30B, 1, 1, 1, 8, True), EFFICIENCY)
    assert with_gaps - without >= gaps / 3
    # biased experts run their expert-by-expert bias forward again: its third of the bytes and of the kernels
    biased = replace(QWEN3_30B, proj_bias=True)
    extra = module_recompute_time(biased, recompute, B200.gpu, EFFICIENCY, moe=True) \
        - module_recompute_time(QWEN3_30B, recompute, B200.gpu, EFFICIENCY, moe=True)
    assert extra == pytest.approx(EXPERT_BIAS_BYTES / 3 * 4096 * 8 * 2048 / (EFFICIENCY.hbm * B200.gpu.hbm_bytes_per_s)
                                  + sum(expert_bias_kernels(biased, recompute)) * EFFICIENCY.kernel_s / 3)


def test_the_gaps_a_moe_step_is_charged_are_the_idle_time_nsight_measured_between_its_kernels():
    """Megatron-Bridge's Nsight comparison (Qwen3-30B-A3B, 16 H100s, EP 16, overlap off): 463,348 kernels
    on rank 0, the GPU active 22.821 s of the 24.714 s step.  The model's launch cost over the step, the
    step less the same step with ``kernel_s`` zero, lands within 20% of that idle time, for about as many
    kernels (it charged a third of it when only the MoE block's GEMMs were priced a launch)."""
    from playground.planner.replay import kernel_gap_check
    check = kernel_gap_check()
    assert check["nsight_idle_s"] == pytest.approx(1.893, abs=1e-3)
    assert check["model_gap_s"] == pytest.approx(check["nsight_idle_s"], rel=0.2)
    assert check["model_kernels"] == pytest.approx(check["nsight_kernels"], rel=0.1)


def test_sixteen_small_experts_launched_one_by_one_leave_a_b200_waiting_on_its_host():
    per_expert, grouped, graphed = (predict(QWEN3_30B, B200, replace(EP8, moe_launch=m))
                                    for m in ("per_expert", "grouped", "graphed"))
    assert per_expert["step_time_s"] > 2 * graphed["step_time_s"]
    assert per_expert["time_breakdown"]["moe_host_wait"] > 0.5 * per_expert["step_time_s"]
    assert graphed["time_breakdown"]["moe_host_wait"] == 0
    assert grouped["step_time_s"] >= graphed["step_time_s"]
    # the wait is what the launches outlast: the step less it is the layer's device work, its kernels' gaps
    # included (what a host with no launch time would see)
    device = predict(QWEN3_30B, B200, replace(EP8, moe_launch="per_expert"), replace(EFFICIENCY, host_kernel_s=0.0))
    assert device["time_breakdown"]["moe_host_wait"] == 0
    assert per_expert["step_time_s"] - per_expert["time_breakdown"]["moe_host_wait"] == \
        pytest.approx(device["step_time_s"], rel=1e-9)


def test_enough_work_on_the_device_hides_the_host_and_dense_layers_never_wait():
    assert _wait(replace(EP8, micro_batch=8, moe_launch="per_expert")) < _wait(replace(EP8, moe_launch="per_expert"))
    assert _wait(replace(EP8, moe_launch="per_expert"), cluster=Cluster.of("A100-80GB")) \
        < _wait(replace(EP8, moe_launch="per_expert"))          # a slower GPU has more work to hide it behind
    llama = replace(preset("llama3-8b"), layers=4)
    assert _wait(replace(EP8, ep=1, moe_launch="per_expert"), model=llama) == 0


def test_the_range_over_an_unstated_launch_spans_a_graphed_layer_to_one_launched_expert_by_expert():
    graphed, per_expert = (predict(QWEN3_30B, B200, replace(EP8, moe_launch=m))["step_time_s"]
                           for m in ("graphed", "per_expert"))
    lo, hi = predict_range(QWEN3_30B, B200, EP8, unstated=("moe_launch",))["step_time_range_s"]
    assert lo <= graphed and hi >= per_expert


def test_an_unknown_launch_is_a_clear_error():
    with pytest.raises(PlanError, match="moe_launch must be one of grouped, multi_stream, per_expert, graphed"):
        predict(QWEN3_30B, B200, replace(EP8, moe_launch="compiled"))


def test_the_command_line_takes_the_launch_and_names_the_wait(capsys, tmp_path):
    from playground.step_time import main as step_time_main
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, '
                      '"moe_intermediate_size": 768, "num_attention_heads": 32, "num_key_value_heads": 4, '
                      '"head_dim": 128, "num_hidden_layers": 48, "num_experts": 128, "num_experts_per_tok": 8, '
                      '"vocab_size": 151936, "tie_word_embeddings": false}')
    base = ["--hf-config", str(config), "--gpu", "B200", "--gpus", "8", "--ep", "8", "--seq-len", "4096",
            "--global-batch", "64"]
    assert step_time_main(base + ["--moe-launch", "per_expert"]) == 0
    assert "moe_host_wait" in capsys.readouterr().out
    assert step_time_main(base + ["--moe-launch", "compiled"]) == 2
    assert "invalid choice: 'compiled'" in capsys.readouterr().err
    assert step_time_main(base + ["--dtype", "fp8", "--fp8-scaling", "block"]) == 0
    assert "FP8 GEMMs (block scaling)" in capsys.readouterr().out
    assert step_time_main(base + ["--fp8-scaling", "block"]) == 2
    assert capsys.readouterr().err.strip().endswith("block scaling is how FP8 GEMMs scale their operands: it needs --dtype fp8")


def test_a_host_floor_is_why_a_bigger_micro_batch_paid_megatron_bridge_so_much_on_b200s():
    """Qwen3-30B-A3B on eight B200s ran 2.9x the tokens a second at a micro-batch of 4 (26.04.01) as of 1
    (25.11): the device's work alone explains 1.2x; the published jump lies between launching grouped and
    launching each expert from Python, and only the runs at a micro-batch of 1 move at the nominal pricing."""
    from playground.planner.replay import host_launch_check
    check = host_launch_check()
    one, four = check["published_tokens_per_s"]
    jump = {launch: p["tokens_per_s"][1] / p["tokens_per_s"][0] for launch, p in check["launches"].items()}
    assert jump["graphed"] < jump["grouped"] < four / one < jump["per_expert"]
    assert all(p["wait"][0] > p["wait"][1] for launch, p in check["launches"].items() if launch != "graphed")
    # the 25.09 token-drop run on B200s graphs its layers (its recipe), so no host floor moves it
    assert {name.split(",")[0] for name, _, _ in check["moved"]} == {"Qwen3_30B_a3B"}
    assert all(after < before for _, before, after in check["moved"])
