"""What today's stacks pay that Megatron-LM of 2021 did not: FP8 casts, per-op checkpointing, eager
kernels, a power limit, a Hopper held at its power limit for a run, HSDP's intra-node gathers, NCCL's share of the SMs, TP overlap.  Each term is
checked against its own accounting, and against the direction it must move a step."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace

import pytest

from playground import hardware
from playground.results import RESULTS_DIR
from playground.planner.costs import (BYTES, Model, block_matmuls, eager_extra_bytes, flops_per_step,
                                      fp8_backward_accumulation, fp8_cast_bytes, layer_forward, layer_gemms,
                                      overlapped, per_op_recomputed, shard_link, sustained_rate)
from playground.planner.errors import PlanError
from playground.planner.layout import EFFICIENCY, Cluster, Layout
from playground.planner.memory import layer_activation_bytes
from playground.planner.presets import preset
from playground.planner.step_time import power_clock, predict
from playground.step_time import main as step_time_main

LLAMA = replace(preset("llama3-8b"), seq_len=8192)
H100 = Cluster.of("H100")
FSDP8 = Layout.today(1, 1, 8, micro_batch=2, global_batch=16, zero_stage=3)


def test_what_a_range_prices_again_is_remembered_without_leaking_between_callers():
    """A range or a search prices the same GEMM shapes and run-rate constants thousands of times; each is
    worked out once, yet a caller that changes its copy changes nothing for the next, and other constants
    (equal in value or not) get their own prediction."""
    shapes = layer_gemms(LLAMA, 2, 1)
    shapes.append(("junk", 1, 1, 1, 1))
    assert ("junk", 1, 1, 1, 1) not in layer_gemms(LLAMA, 2, 1)
    nominal = predict(LLAMA, H100, FSDP8)["step_time_s"]   # a Hopper: its tensor cores at their sustained share
    slower = replace(EFFICIENCY, gemm=EFFICIENCY.gemm / 2)
    assert predict(LLAMA, H100, FSDP8, slower)["step_time_s"] > 1.3 * nominal
    assert predict(LLAMA, H100, FSDP8, replace(EFFICIENCY))["step_time_s"] == nominal == predict(LLAMA, H100, FSDP8)["step_time_s"]


def test_fp8_casts_six_bytes_per_operand_element_and_keeps_the_logits_in_bf16():
    lay = replace(FSDP8, dtype="fp8")
    gemms = [g for g in layer_gemms(LLAMA, 2, 1) if g[0] not in ("scores", "context")]
    assert fp8_cast_bytes(LLAMA, lay) == 6 * sum(c * (M * K + K * N + M * N) for _, c, M, N, K in gemms)
    bf16, fp8 = predict(LLAMA, H100, FSDP8), predict(LLAMA, H100, lay)
    # faster, but far from the 2x of the datasheet: FP8 GEMMs at 0.70 of their peak, and the casts
    assert 1.2 < bf16["step_time_s"] / fp8["step_time_s"] < 1.6
    assert fp8["compute_parts"]["logits"] == pytest.approx(bf16["compute_parts"]["logits"])


def test_delayed_and_block_scaling_find_their_scales_in_the_cast_and_read_each_operand_once():
    lay = replace(FSDP8, dtype="fp8")
    for scaling in ("delayed", "block"):
        assert fp8_cast_bytes(LLAMA, replace(lay, fp8_scaling=scaling)) == pytest.approx(4 / 6 * fp8_cast_bytes(LLAMA, lay))
        assert f"FP8 GEMMs ({scaling} scaling)" in replace(lay, fp8_scaling=scaling).describe()
    assert predict(LLAMA, H100, replace(lay, fp8_scaling="delayed"))["step_time_s"] < predict(LLAMA, H100, lay)["step_time_s"]
    with pytest.raises(PlanError, match="needs --dtype fp8"):
        predict(LLAMA, H100, replace(FSDP8, fp8_scaling="block"))
    with pytest.raises(PlanError, match="fp8_scaling must be one of tensor, delayed, block"):
        predict(LLAMA, H100, replace(lay, fp8_scaling="rowwise"))


def test_a_hoppers_fp8_backward_gemms_pay_split_accumulation_and_its_forward_does_not():
    fp8 = replace(FSDP8, dtype="fp8")
    hopper, blackwell = H100.gpu, Cluster.of("B200").gpu
    fast, split = (layer_forward(LLAMA, fp8, hopper, replace(EFFICIENCY, fp8_split_accumulation=f)) for f in (1.0, 1.15))
    assert split["gemm_backward"] == pytest.approx(1.15 * fast["gemm_backward"]) and split["gemm"] == fast["gemm"]
    assert EFFICIENCY.fp8_split_accumulation == 1.15 and EFFICIENCY.spread["fp8_split_accumulation"] == (1.10, 1.20)
    # bf16, block scaling (its kernels promote in every GEMM) and a Blackwell (no fast mode) pay nothing
    for gpu, lay in ((hopper, FSDP8), (hopper, replace(fp8, fp8_scaling="block")), (blackwell, fp8)):
        assert fp8_backward_accumulation(gpu, lay, EFFICIENCY) == 1.0
    assert fp8_backward_accumulation(hopper, replace(fp8, fp8_scaling="delayed"), EFFICIENCY) == 1.15
    assert predict(LLAMA, H100, fp8)["assumptions"]["fp8_split_accumulation"] == 1.15
    assert predict(LLAMA, H100, fp8)["fp8_backward_accumulation"] == 1.15


def test_the_report_says_when_fp8_backward_gemms_pay_split_accumulation(capsys):
    base = ["--model", "llama3-8b", "--gpus", "16", "--tp", "2"]
    for gpu, dtype, said in (("H100", "fp8", True), ("B200", "fp8", False), ("H100", "bf16", False)):
        assert step_time_main([*base, "--gpu", gpu, "--dtype", dtype]) == 0
        out = capsys.readouterr().out
        assert ("backward GEMMs at split accumulation, 1.15x" in out) == said, (gpu, dtype)


def test_a_measured_split_accumulation_reaches_the_report_with_its_own_spread(tmp_path, capsys):
    path = tmp_path / "gemm-h100.json"
    path.write_text(json.dumps({"benchmark": "gemm", "efficiency": {"fp8_split_accumulation": 1.3},
                                "efficiency_spread": {"fp8_split_accumulation": [1.25, 1.35]},
                                "provenance": {"device": "NVIDIA H100 80GB HBM3"}}))
    assert step_time_main(["--model", "llama3-8b", "--gpus", "16", "--tp", "2", "--gpu", "H100", "--dtype", "fp8",
                           "--efficiency", str(path)]) == 0
    assert "split accumulation, 1.3x the forward's time at their size (1.25-1.35 in the range)" \
        in capsys.readouterr().out


def test_transformer_engine_casts_each_weight_once_per_step_unless_zero3_gathers_it_again():
    gemms = [g for g in layer_gemms(LLAMA, 1, 4) if g[0] not in ("scores", "context")]
    activations = 6 * sum(c * (M * K + M * N) for _, c, M, N, K in gemms)
    weights = 6 * sum(c * K * N for _, c, M, N, K in gemms)
    cached = Layout.today(4, 1, 2, micro_batch=1, global_batch=16, dtype="fp8")   # 8 micro-batches a step
    assert cached.micro_batches == 8
    # the step's first micro-batch casts the weights; the other seven reuse its FP8 copy
    assert fp8_cast_bytes(LLAMA, cached) == pytest.approx(activations + weights / 8)
    assert fp8_cast_bytes(LLAMA, replace(cached, fp8_weight_cache=False)) == pytest.approx(activations + weights)
    one = replace(cached, global_batch=2)   # one micro-batch: nothing to reuse
    assert fp8_cast_bytes(LLAMA, one) == pytest.approx(fp8_cast_bytes(LLAMA, replace(one, fp8_weight_cache=False)))
    # ZeRO-3 gathers the weights again every micro-batch, and casts them again
    sharded = replace(cached, zero_stage=3)
    assert fp8_cast_bytes(LLAMA, sharded) == pytest.approx(activations + weights)
    assert predict(LLAMA, H100, cached)["step_time_s"] < predict(LLAMA, H100, replace(cached, fp8_weight_cache=False))[
        "step_time_s"]
    assert "FP8 weights cast every micro-batch" in replace(cached, fp8_weight_cache=False).describe()


def test_per_op_checkpointing_recomputes_every_other_matmul_of_the_block():
    names = [g[0] for g in block_matmuls(LLAMA, 1, 1)]
    assert names == ["q", "k", "v", "proj", "mlp_in_gate", "mlp_in_up", "mlp_out"]
    assert [g[0] for g in per_op_recomputed(LLAMA, 1, 1)] == ["k", "proj", "mlp_in_up"]
    flops = {rc: flops_per_step(LLAMA, replace(FSDP8, recompute=rc)) for rc in ("none", "op", "full")}
    assert flops["none"] < flops["op"] < flops["full"]
    # it keeps the layer input, q, v, the gate, the MLP output and the attention output (+ log-sum-exp)
    T, h = 2 * 8192, LLAMA.hidden
    kept = T * (h + LLAMA.heads * LLAMA.head_size + LLAMA.kv_head_count * LLAMA.head_size + LLAMA.ffn_width + h
                + LLAMA.heads * LLAMA.head_size)
    assert layer_activation_bytes(LLAMA, replace(FSDP8, recompute="op")) == BYTES * kept + 4 * LLAMA.heads * T
    steps = {rc: predict(LLAMA, H100, replace(FSDP8, recompute=rc))["step_time_s"] for rc in ("none", "op", "full")}
    assert steps["none"] < steps["op"] < steps["full"]


def test_eager_kernels_move_more_bytes_than_fused_ones_and_layernorm_is_already_one_kernel():
    assert eager_extra_bytes(LLAMA, 1) == 2 * 36 * LLAMA.hidden
    assert eager_extra_bytes(replace(LLAMA, norm="layernorm"), 1) == 0
    fused, eager = (predict(LLAMA, H100, replace(FSDP8, kernels=k)) for k in ("fused", "eager"))
    assert eager["step_time_s"] > fused["step_time_s"]
    with pytest.raises(PlanError, match="kernels must be one of fused, eager"):
        predict(LLAMA, H100, replace(FSDP8, kernels="compiled"))


def test_an_eager_moe_layer_moves_the_bytes_measured_on_an_h200_beyond_a_fused_one():
    """costs.EAGER_MOE_*: 80 B per dispatched element and 83 per routed activation element, forward
    and backward, against a fused stack's 12 and 18 (the permutation, SwiGLU), the eager SwiGLU's
    split (12) counted once."""
    from playground.planner.costs import EAGER_MOE_ACT_BYTES, EAGER_MOE_ROW_BYTES, layer_forward
    moe = Model(4, 2048, 32, seq_len=4096, experts=128, top_k=8, moe_ffn=768, gated_mlp=True, norm="rmsnorm",
                kv_heads=4, head_dim=128, position_embeddings=False)
    lay = Layout.today(1, 1, 8, ep=8, micro_batch=1, global_batch=8, ep_dispatch="deepep")   # permuted once
    gpu = hardware.gpu("H200")
    fused, eager = (layer_forward(moe, replace(lay, kernels=k), gpu, EFFICIENCY, moe=True) for k in ("fused", "eager"))
    dense = [layer_forward(moe, replace(lay, kernels=k), gpu, EFFICIENCY, moe=False)["elementwise"] for k in ("fused", "eager")]
    T, k, h, f = 4096, 8, 2048, 768
    extra = ((EAGER_MOE_ROW_BYTES - 12) * T * k * h + (EAGER_MOE_ACT_BYTES - 18 - 12) * T * k * f) / 3
    # the dense layer's eager extras (norms, RoPE, its own SwiGLU split) apart, the MoE layer adds the measured bytes
    dense_extra = dense[1] - dense[0] - 4 * T * moe.ffn_width / (EFFICIENCY.hbm * gpu.hbm_bytes_per_s)
    moe_extra = eager["elementwise"] - fused["elementwise"] - 4 * T * k * f / (EFFICIENCY.hbm * gpu.hbm_bytes_per_s)
    assert moe_extra - dense_extra == pytest.approx(extra / (EFFICIENCY.hbm * gpu.hbm_bytes_per_s), rel=1e-9)


def test_megatrons_all_to_all_dispatcher_sorts_by_local_expert_a_second_time():
    """Megatron-Core's all-to-all dispatcher permutes the k copies by expert, exchanges them, then sorts
    what each rank sent by local expert ("Permutation 2"), and undoes both: twice a fused permutation's
    bytes, when each rank holds several experts.  One expert a rank, no experts spread, or DeepEP: once."""
    from playground.planner.costs import permutation_bytes
    moe = Model(4, 2048, 32, seq_len=4096, experts=128, top_k=8, moe_ffn=768, gated_mlp=True, norm="rmsnorm",
                kv_heads=4, head_dim=128, position_embeddings=False)
    once = 4 * 8 * 4096 * 2048
    a2a = Layout.today(1, 1, 8, ep=8, micro_batch=1, global_batch=8)
    assert permutation_bytes(moe, 4096, 1) == once
    assert permutation_bytes(moe, 4096, 1, a2a) == 2 * once                              # 16 experts a rank
    assert permutation_bytes(moe, 4096, 1, replace(a2a, ep_dispatch="deepep")) == once
    assert permutation_bytes(replace(moe, experts=8), 4096, 1, a2a) == once               # one expert a rank
    assert permutation_bytes(moe, 4096, 1, replace(a2a, ep=1, dp=8)) == once             # nothing exchanged
    rate = EFFICIENCY.hbm * H100.gpu.hbm_bytes_per_s
    sorted_twice, once_ = (layer_forward_elementwise(moe, lay) for lay in (a2a, replace(a2a, ep_dispatch="deepep")))
    assert sorted_twice - once_ == pytest.approx(once / rate)


def layer_forward_elementwise(model, layout):
    from playground.planner.costs import layer_forward
    return layer_forward(model, layout, H100.gpu, EFFICIENCY, moe=True)["elementwise"]


def test_a_power_limit_below_the_tdp_slows_the_tensor_cores_only():
    capped = Cluster.of("H100", power_limit_w=500)
    assert power_clock(capped) == pytest.approx((500 / 700) ** EFFICIENCY.power_exponent)
    assert power_clock(H100) == power_clock(Cluster.of("H100", power_limit_w=800)) == 1.0
    slow, full = predict(LLAMA, capped, FSDP8), predict(LLAMA, H100, FSDP8)
    assert slow["step_time_s"] > full["step_time_s"]
    assert slow["time_breakdown"]["optimizer"] == pytest.approx(full["time_breakdown"]["optimizer"])  # HBM-bound
    assert slow["mfu"] < full["mfu"] and slow["power_clock"] < 1


def test_a_hopper_through_a_run_holds_its_sustained_share_of_the_benchmark_rate():
    """The same matmul held against run briefly on three Hopper parts (gpu-fryer's H100 and GH200, the
    H200 measured here): a Hopper's bf16 GEMMs alone at the middle one, ``hopper_sustained``, FP8 ones at
    all of it; beside a collective both at DeepGEMM's ``comm_clock``, for ``comm_share`` of the step.
    The HBM-bound work and an A100 are untouched."""
    h100, a100 = hardware.gpu("H100"), hardware.gpu("A100-80GB")
    measured_here = json.loads((RESULTS_DIR / "gemm-nvidia-h200.json").read_text())["held"]["over_short"]
    assert EFFICIENCY.hopper_sustained == pytest.approx(statistics.median([730 / 797.5, 705 / 797.5, measured_here]),
                                                        abs=1e-3)
    assert EFFICIENCY.spread["hopper_sustained"][0] == measured_here
    again = json.loads((RESULTS_DIR / "gemm-nvidia-h200-hold90.json").read_text())["held"]
    assert again["seconds"] == 90 and again["over_short"] == pytest.approx(measured_here, abs=0.01)  # it repeats
    assert EFFICIENCY.comm_clock == pytest.approx(1575 / 1980, abs=1e-3) and EFFICIENCY.comm_share == 0.5
    alone = replace(EFFICIENCY, comm_share=0.0)
    assert sustained_rate(h100, alone) == EFFICIENCY.hopper_sustained
    assert sustained_rate(h100, alone, "fp8") == sustained_rate(a100, EFFICIENCY) == 1.0
    assert sustained_rate(h100, EFFICIENCY) == pytest.approx((0.884 + 0.795) / 2)
    assert sustained_rate(h100, EFFICIENCY, "fp8") == pytest.approx((1 + 0.795) / 2)
    burst = replace(EFFICIENCY, hopper_sustained=1.0, comm_share=0.0)
    held, short = predict(LLAMA, H100, FSDP8), predict(LLAMA, H100, FSDP8, burst)
    assert held["sustained_rate"] == sustained_rate(h100, EFFICIENCY) and short["sustained_rate"] == 1.0
    assert held["step_time_s"] > short["step_time_s"]
    assert held["compute_parts"]["gemm"] == pytest.approx(short["compute_parts"]["gemm"] / held["sustained_rate"],
                                                          rel=0.02)   # compute-bound GEMMs: the launch cost apart
    assert held["time_breakdown"]["optimizer"] == pytest.approx(short["time_breakdown"]["optimizer"])  # HBM-bound
    fp8 = replace(FSDP8, dtype="fp8", attention_kernel="fa3")
    low = replace(EFFICIENCY, hopper_sustained=0.5)
    # FP8 GEMMs alone keep their rate: halving the bf16 share is not halving the FP8 GEMMs' rate too
    both = replace(low, fp8_gemm=EFFICIENCY.fp8_gemm * 0.5)
    assert predict(LLAMA, H100, fp8)["step_time_s"] < predict(LLAMA, H100, fp8, low)["step_time_s"] \
        < predict(LLAMA, H100, fp8, both)["step_time_s"]
    a = Cluster.of("A100-80GB")
    assert predict(LLAMA, a, FSDP8, low)["step_time_s"] == predict(LLAMA, a, FSDP8)["step_time_s"]


def test_a_blackwell_through_a_run_holds_flashattention_4s_sustained_share_on_bf16_work():
    """FlashAttention-4 held back to back on a B200 throttles to 1237 of its 1450 TFLOPS: a Blackwell's
    bf16 GEMMs and attention at ``blackwell_sustained``, its FP8 GEMMs at what Transformer Engine's GEMM
    benchmark measured beside bf16 on a Blackwell (``blackwell_fp8``, MXFP8 ``blackwell_mxfp8``), and no
    clock beside collectives (none published)."""
    b200 = hardware.gpu("B200")
    assert EFFICIENCY.blackwell_sustained == pytest.approx(1237 / 1450, abs=1e-3)
    assert sustained_rate(b200, EFFICIENCY) == EFFICIENCY.blackwell_sustained
    # 15,872 tokens through a layer of hidden 4,096 and MLP 16,384: 6.39 TFLOP a pass, three passes in 6.812 ms
    # per-tensor FP8 and 7.161 ms MXFP8, of a 4,500 TFLOPS FP8 peak, over fp8_gemm's 0.70
    layer = 3 * 2 * 15872 * 4096 * (12288 + 4096 + 16384 + 16384)
    assert EFFICIENCY.blackwell_fp8 == pytest.approx(layer / 6.812e-3 / 4.5e15 / EFFICIENCY.fp8_gemm, abs=1e-3)
    assert EFFICIENCY.blackwell_mxfp8 == pytest.approx(layer / 7.161e-3 / 4.5e15 / EFFICIENCY.fp8_gemm, abs=1e-3)
    assert sustained_rate(b200, EFFICIENCY, "fp8") == EFFICIENCY.blackwell_fp8
    assert sustained_rate(b200, EFFICIENCY, "fp8", "block") == EFFICIENCY.blackwell_mxfp8 < EFFICIENCY.blackwell_fp8
    assert sustained_rate(hardware.gpu("H100"), replace(EFFICIENCY, comm_share=0.0), "fp8", "block") == 1.0
    fp8, mx = (replace(FSDP8, dtype="fp8", fp8_scaling=k) for k in ("tensor", "block"))
    unheld = replace(EFFICIENCY, blackwell_fp8=1.0, blackwell_mxfp8=1.0)
    cluster = Cluster.of("B200")
    for lay in (fp8, mx):
        assert predict(LLAMA, cluster, lay)["step_time_s"] > predict(LLAMA, cluster, lay, unheld)["step_time_s"]
    assert predict(LLAMA, cluster, mx)["sustained_rate_fp8"] == EFFICIENCY.blackwell_mxfp8
    assert sustained_rate(b200, replace(EFFICIENCY, comm_share=1.0)) == EFFICIENCY.blackwell_sustained
    held = predict(LLAMA, cluster, FSDP8)
    short = predict(LLAMA, cluster, FSDP8, replace(EFFICIENCY, blackwell_sustained=1.0))
    assert held["sustained_rate"] == EFFICIENCY.blackwell_sustained and held["step_time_s"] > short["step_time_s"]


def test_one_gpu_runs_no_collective_beside_its_gemms():
    """A step on one GPU has nothing to communicate: its tensor cores hold the GEMMs-alone rate, and
    the share of the step beside a collective, assumed for a multi-GPU step, does not apply."""
    one = Layout.today(1, 1, 1, micro_batch=1, global_batch=8)
    alone = predict(LLAMA, H100, one)
    assert alone["sustained_rate"] == EFFICIENCY.hopper_sustained
    assert alone["step_time_s"] == predict(LLAMA, H100, one, replace(EFFICIENCY, comm_share=1.0))["step_time_s"]
    assert predict(LLAMA, H100, replace(one, dp=2, global_batch=16))["sustained_rate"] < EFFICIENCY.hopper_sustained


def test_hsdp_gathers_ride_nvlink_when_a_node_holds_the_shard_group():
    hsdp = Layout.today(1, 1, 128, zero_stage=3, shard_group=8, global_batch=256)
    assert shard_link(hsdp, Cluster.of("A100-80GB"))[0] == "nvlink"
    assert shard_link(replace(hsdp, shard_group=None), Cluster.of("A100-80GB"))[0] == "network"


def test_the_hsdp_report_names_its_shard_groups_link_and_its_replicas_ring(capsys):
    """An HSDP step's bytes ride two groups: the gathers inside a node's shard group, the gradients'
    all-reduce across the replicas, one GPU of each node, on that GPU's share of the node's network
    (fms-fsdp's A100 cluster: 400 Gb/s a node, 6.25 GB/s a GPU)."""
    hsdp = Layout.today(1, 1, 128, zero_stage=3, shard_group=8, global_batch=256)
    r = predict(preset("llama3-8b"), Cluster.of("A100-80GB", network_bytes_per_s=6.25e9), hsdp)
    assert (r["links"]["shard"], r["links"]["replica"]) == ("nvlink", "network")
    assert r["ring_bytes_per_s"]["replica"] == 6.25e9
    assert "replica" not in predict(preset("llama3-8b"), H100, Layout.today(1, 1, 16, zero_stage=3))["links"]
    assert step_time_main(["--model", "llama3-8b", "--gpu", "A100-80GB", "--gpus", "128", "--zero-stage", "3",
                           "--hsdp", "8", "--network-gbs", "6.25"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("links"))
    assert line == "links    FSDP shards of 8 over nvlink (300 GB/s); HSDP's 16 replicas ring bound by network (6.25 GB/s)"


def test_an_overlapped_collective_costs_what_outlasts_compute_plus_the_sms_nccl_holds():
    gpu = hardware.gpu("H100")
    share = EFFICIENCY.comm_sms / (gpu.sms - EFFICIENCY.comm_sms)
    assert overlapped(1.0, 3.0, gpu) == pytest.approx(share)           # hidden, but not free
    assert overlapped(3.0, 1.0, gpu) == pytest.approx(2.0 + share)
    assert overlapped(1.0, 3.0, hardware.gpu("TPUv4")) == 0.0           # no SM count, no slowdown


def test_tp_overlap_hides_tensor_parallel_collectives_behind_the_gemms():
    tp8 = Layout.today(8, 1, 1, micro_batch=1, global_batch=8)
    plain, fwd, hidden = (predict(LLAMA, H100, replace(tp8, tp_overlap=o)) for o in ("none", "forward", "all"))
    assert hidden["time_breakdown"]["tp_comm"] < fwd["time_breakdown"]["tp_comm"] < plain["time_breakdown"]["tp_comm"]
    with pytest.raises(PlanError, match="tp_overlap must be one of none, forward, all"):
        predict(LLAMA, H100, replace(tp8, tp_overlap=True))


def test_the_command_line_takes_the_new_settings_and_refuses_bad_ones(capsys):
    base = ["--model", "llama3-8b", "--gpus", "8", "--zero-stage", "3", "--micro-batch-size", "2",
            "--global-batch", "16"]
    assert step_time_main(base + ["--gpu", "H100-96GB", "--power-limit", "500", "--recompute", "op",
                                  "--kernels", "eager", "--dtype", "fp8"]) == 0
    out = capsys.readouterr().out
    assert "eager kernels" in out and "capped at 500 W of the 700 W TDP" in out
    assert step_time_main(base + ["--power-limit", "-5"]) == 2
    assert "--power-limit must be a positive finite number" in capsys.readouterr().err


def test_expert_tensor_parallelism_of_one_lets_ep_span_tp_and_keeps_experts_whole():
    from playground.planner.costs import expert_parallel_link
    from playground.planner.memory import stage_params
    from playground.planner.published_stacks import MOE_MODEL_ZOO
    model = MOE_MODEL_ZOO[0].model
    split = Layout.today(2, 8, 16, ep=8, micro_batch=1, global_batch=2048, vpp=4)
    whole = replace(split, ep=32, expert_tp=1)          # EP 32 > DP x CP = 16: only with ETP = 1
    with pytest.raises(PlanError, match="EP=32 must divide DP x CP = 16"):
        predict(model, H100, replace(whole, expert_tp=None))
    assert whole.expert_dp == 1 and split.expert_dp == 2
    experts_split = stage_params(model, split, 0, 12, 0)[1]
    experts_whole = stage_params(model, replace(split, expert_tp=1), 0, 12, 0)[1]
    assert experts_whole == pytest.approx(2 * experts_split)  # ETP 1: each expert whole on its GPU
    assert expert_parallel_link(replace(split, expert_tp=1), H100) == ("nvlink", 8)   # ranks one apart
    assert expert_parallel_link(replace(split, tp=4, dp=8), H100)[0] == "network"     # ranks TP apart
    with pytest.raises(PlanError, match="expert TP=3 must be a whole number dividing TP=2"):
        predict(model, H100, replace(split, expert_tp=3))


def test_the_attention_kernel_runs_the_causal_half_at_its_measured_rate():
    from playground.planner.costs import attention_efficiency, layer_forward
    long = replace(LLAMA, seq_len=32768)
    lay = Layout.today(1, 1, 8, micro_batch=1, global_batch=8, zero_stage=3)
    fa2, fa3, cudnn = (replace(lay, attention_kernel=k) for k in ("fa2", "fa3", "cudnn"))
    assert attention_efficiency(hardware.gpu("H100"), fa2) == EFFICIENCY.attention_fa2_hopper
    assert attention_efficiency(hardware.gpu("H100"), fa3) == EFFICIENCY.attention_fa3
    # Transformer Engine's cuDNN kernel, a little behind FlashAttention-3 in the same figures
    assert attention_efficiency(hardware.gpu("H100"), cudnn) == EFFICIENCY.attention_cudnn < EFFICIENCY.attention_fa3
    fa1 = replace(lay, attention_kernel="fa1")   # the first FlashAttention: 25-40% of peak on A100
    assert attention_efficiency(hardware.gpu("A100-80GB"), fa1) == EFFICIENCY.attention_fa1
    assert attention_efficiency(hardware.gpu("H100"), fa1) < attention_efficiency(hardware.gpu("H100"), fa2)
    assert predict(long, H100, fa1)["step_time_s"] > predict(long, H100, fa2)["step_time_s"]
    a100 = hardware.gpu("A100-80GB")   # no FlashAttention-3 before Hopper: both are FlashAttention-2
    assert attention_efficiency(a100, fa2) == attention_efficiency(a100, fa3) == attention_efficiency(a100, cudnn) \
        == EFFICIENCY.attention_fa2
    core = sum(2 * c * M * N * K for n, c, M, N, K in layer_gemms(long, 1, 1) if n in ("scores", "context"))
    t = layer_forward(long, fa3, hardware.gpu("H100"), EFFICIENCY)["attention"]
    executed = (1 + 128 / 32768) / 2
    assert t == pytest.approx(executed * core / (EFFICIENCY.attention_fa3 * 989.5e12) + EFFICIENCY.kernel_s)
    assert predict(long, H100, fa2)["step_time_s"] > predict(long, H100, fa3)["step_time_s"]


def test_flashattention2_on_blackwell_runs_at_its_measured_rate_below_hoppers():
    from playground.planner.costs import attention_efficiency
    lay = Layout.today(1, 1, 8, micro_batch=1, global_batch=8, zero_stage=3)
    fa1, fa2, cudnn = (replace(lay, attention_kernel=k) for k in ("fa1", "fa2", "cudnn"))
    b200, h100 = hardware.gpu("B200"), hardware.gpu("H100")
    # its Ampere kernels on Blackwell's tensor cores: ~16% of the dense peak, half of what they reach on Hopper
    assert attention_efficiency(b200, fa2) == EFFICIENCY.attention_fa2_blackwell < EFFICIENCY.attention_fa2_hopper
    assert attention_efficiency(b200, cudnn) == EFFICIENCY.attention_cudnn
    assert attention_efficiency(b200, fa1) < attention_efficiency(b200, fa2)
    assert attention_efficiency(b200, fa1) / attention_efficiency(h100, fa1) == pytest.approx(
        EFFICIENCY.attention_fa2_blackwell / EFFICIENCY.attention_fa2_hopper)
    long = replace(LLAMA, seq_len=32768)
    on_b200 = Cluster.of("B200")
    assert predict(long, on_b200, fa2)["step_time_s"] > predict(long, on_b200, cudnn)["step_time_s"]


def test_blackwell_ultra_runs_fused_attention_faster_by_cudnns_measured_gain_and_its_gemms_as_blackwells():
    """Blackwell Ultra doubles the exponential's rate that the softmax waits on (``exp_rate`` 2 on the B300 and
    GB300); cuDNN's own benchmark ran its causal bf16 attention 1.125 times as fast on a GB300 as on a GB200
    (1.09-1.21 over 15 shapes).  The model charges that gain on the fused kernels, not on FlashAttention-2,
    whose warp-level MMAs are its bound, and not on any GEMM."""
    from playground.planner.costs import attention_efficiency
    lay = Layout.today(1, 1, 8, micro_batch=1, global_batch=8, zero_stage=3)
    fa2, cudnn = (replace(lay, attention_kernel=k) for k in ("fa2", "cudnn"))
    gb200, gb300, b200, b300 = (hardware.gpu(n) for n in ("GB200", "GB300", "B200", "B300"))
    assert (gb200.exp_rate, b200.exp_rate, gb300.exp_rate, b300.exp_rate) == (1, 1, 2, 2)
    assert EFFICIENCY.attention_fast_exp == 1.125 and EFFICIENCY.spread["attention_fast_exp"] == (1.092, 1.213)
    for old, ultra in ((gb200, gb300), (b200, b300)):
        assert attention_efficiency(ultra, cudnn) == attention_efficiency(old, cudnn) * EFFICIENCY.attention_fast_exp
        assert attention_efficiency(ultra, fa2) == attention_efficiency(old, fa2)
    long, no_gain = replace(LLAMA, seq_len=32768), replace(EFFICIENCY, attention_fast_exp=1.0)
    step = {(g, e): predict(long, Cluster.of(g), cudnn, eff)["step_time_s"]
            for g in ("GB300", "B200") for e, eff in (("gain", EFFICIENCY), ("none", no_gain))}
    assert step["GB300", "gain"] < step["GB300", "none"] and step["B200", "gain"] == step["B200", "none"]


def test_the_report_says_when_blackwell_ultras_attention_gain_is_charged(capsys):
    args = ["--model", "llama3-8b", "--gpus", "8", "--tp", "1", "--attention-kernel", "cudnn"]
    for gpu, said in (("GB300", True), ("B300", True), ("GB200", False), ("H100", False)):
        assert step_time_main([*args, "--gpu", gpu]) == 0
        out = capsys.readouterr().out
        assert ("fused attention at 1.125x a Blackwell's rate (1.092-1.213 in the range)" in out) == said, gpu
    assert step_time_main([*args, "--gpu", "GB300", "--attention-kernel", "fa2"]) == 0
    assert "Blackwell Ultra's" not in capsys.readouterr().out   # FlashAttention-2 gains nothing


def test_fsdp2_without_resharding_gathers_once_a_step_and_holds_the_stage():
    lay = Layout.today(1, 1, 64, micro_batch=1, global_batch=512, zero_stage=3)   # 8 micro-batches
    again, kept = (predict(LLAMA, H100, replace(lay, reshard_after_forward=r)) for r in (True, False))
    assert kept["time_breakdown"]["zero3_gathers"] < again["time_breakdown"]["zero3_gathers"]
    assert kept["memory"]["zero3_buffers"] > again["memory"]["zero3_buffers"]
    fp8 = predict(LLAMA, H100, replace(lay, dtype="fp8", fp8_gather=True))
    assert fp8["time_breakdown"]["zero3_gathers"] < predict(LLAMA, H100, replace(lay, dtype="fp8"))[
        "time_breakdown"]["zero3_gathers"]


def test_dropless_imbalance_paces_the_experts_and_the_all_to_all():
    from playground.planner.published_stacks import MOE_MODEL_ZOO
    row = MOE_MODEL_ZOO[1]
    even, skewed = (predict(row.model, row.cluster, replace(row.layout, moe_imbalance=f)) for f in (1.0, 1.25))
    assert skewed["time_breakdown"]["ep_all_to_all"] > 1.1 * even["time_breakdown"]["ep_all_to_all"]
    assert skewed["step_time_s"] > even["step_time_s"] and skewed["memory"]["total"] > even["memory"]["total"]
    with pytest.raises(PlanError, match="moe_imbalance is the busiest rank's tokens over the mean, >= 1"):
        predict(row.model, row.cluster, replace(row.layout, moe_imbalance=0.5))


def test_the_capacity_plan_gives_its_days_with_the_range_the_step_time_spans():
    from playground.planner.capacity import plan
    p = plan(model="llama3-8b", tokens=1e12, gpus=64, tp=1, pp=1, unstated=("recompute",))
    lo, hi = p["days_range"]
    assert lo <= p["days"] <= hi and p["range_from"]["unstated"] == ["recompute"]
    assert p["step_time_range_s"][0] <= p["step_time_s"] <= p["step_time_range_s"][1]


def test_a_fused_attention_backward_recomputes_the_scores_five_matmuls_to_two():
    from playground.planner.layer_costs import layer_costs
    cost = layer_costs(LLAMA, H100, FSDP8, EFFICIENCY, moe=False)
    parts = cost["parts"]
    assert cost["backward"] == pytest.approx(parts["gemm_backward"] + 2 * parts["elementwise"]
                                             + 2.5 * parts["attention"])
    # large dense GEMMs: the two gradients cost what two forwards do, within the roofline's rounding
    assert parts["gemm_backward"] == pytest.approx(2 * (parts["gemm"] - parts["attention"]), rel=0.05)


def test_deepep_sends_a_token_once_per_node_and_gpu_it_hits_not_once_per_expert():
    from playground.planner.costs import _hit, dispatch_time
    from playground.planner.published_stacks import MOE_MODEL_ZOO
    row = MOE_MODEL_ZOO[2]                                  # EP 32 over four nodes, top-8 of 128 experts
    assert _hit(4, 128, 8) == pytest.approx(4 * (1 - math.comb(96, 8) / math.comb(128, 8)))
    assert _hit(4, 128, 8) < 4 and _hit(32, 128, 8) < 8  # a token's 8 experts share nodes and GPUs
    per_pair, deepep = (dispatch_time(row.model, replace(row.layout, ep_dispatch=d), row.cluster, 4096)
                        for d in ("alltoall", "deepep"))
    assert deepep < per_pair
    with pytest.raises(PlanError, match="ep_dispatch must be one of alltoall, deepep, hybridep"):
        predict(row.model, row.cluster, replace(row.layout, ep_dispatch="nccl"))


def test_hybridep_routes_as_deepep_in_bf16_after_all_gathering_every_ranks_routing_map():
    """HybridEP sends a token as DeepEP does, but Megatron-Core never dispatches it in FP8, and each dispatch
    first all-gathers the EP group's routing maps (a bool per token and expert) with NCCL; combine and the
    backward reuse them.  Qwen3-30B-A3B on 16 H100s at EP 16: 16 x 4,096 x 128 bytes gathered across two nodes."""
    from playground.planner.costs import allgather_time, data_parallel_link, dispatch_time, routing_map_gather_time
    from playground.planner.published_bridge_ab import BRIDGE_EP_OVERLAP_AB
    row = BRIDGE_EP_OVERLAP_AB[0]
    lay = row.layout
    assert lay.ep_dispatch == "hybridep"
    deepep = replace(lay, ep_dispatch="deepep")
    assert dispatch_time(row.model, lay, row.cluster, 4096) == dispatch_time(row.model, deepep, row.cluster, 4096)
    gather = routing_map_gather_time(row.model, lay, row.cluster, 4096)
    link, bw = data_parallel_link(lay, row.cluster)          # TP 1 and EP = DP here: the same ring
    assert gather > allgather_time(16 * 4096 * 128, 16, bw, EFFICIENCY, link) > 0
    assert routing_map_gather_time(row.model, deepep, row.cluster, 4096) == 0.0
    passes = row.layout.micro_batches * row.model.layers   # one gather a layer's forward, none in the backward
    gap = predict(row.model, row.cluster, lay)["time_breakdown"]["ep_all_to_all"] \
        - predict(row.model, row.cluster, deepep)["time_breakdown"]["ep_all_to_all"]
    assert gap == pytest.approx(passes * gather, rel=1e-6)
    fp8, fp8_deepep = replace(lay, dtype="fp8"), replace(deepep, dtype="fp8")
    bf16_wire = predict(row.model, row.cluster, fp8)["time_breakdown"]["ep_all_to_all"]
    assert bf16_wire - predict(row.model, row.cluster, fp8_deepep)["time_breakdown"]["ep_all_to_all"] > gap


def test_gradients_reduced_in_fp32_move_twice_the_bytes_of_bf16_ones(capsys):
    # DDP over the network: the all-reduce is the gradient bytes, 4 a gradient in fp32, 2 in bf16
    ddp = Layout.today(1, 1, 64, micro_batch=2, global_batch=128, zero_stage=0, overlap_grad_reduce=False)
    assert ddp.grad_reduce == "fp32" and Layout(1, 1, 64).grad_reduce == "bf16"   # today's default, 2021's
    bytes_only = replace(EFFICIENCY, latency_s=0.0)
    fp32, bf16 = (predict(LLAMA, H100, replace(ddp, grad_reduce=g), bytes_only) for g in ("fp32", "bf16"))
    assert fp32["dp_comm_s"] / bf16["dp_comm_s"] == pytest.approx(2)
    # the distributed optimizer reduce-scatters the gradients (4 or 2 B) and all-gathers bf16 weights (2 B)
    zero1 = {g: predict(LLAMA, H100, replace(ddp, zero_stage=1, grad_reduce=g), bytes_only)["dp_comm_s"]
             for g in ("fp32", "bf16")}
    assert zero1["fp32"] / zero1["bf16"] == pytest.approx(1.5)
    assert zero1["bf16"] == pytest.approx(bf16["dp_comm_s"])   # bf16: the same bytes as the all-reduce
    # FSDP with one GPU per node (TP = 8): the reduce-scatter doubles, the gathers stay bf16; more is exposed
    fsdp = Layout.today(8, 1, 64, micro_batch=1, global_batch=64, zero_stage=3)
    exposed = {g: predict(LLAMA, H100, replace(fsdp, grad_reduce=g))["time_breakdown"]["zero3_gathers"]
               for g in ("bf16", "fp32")}
    assert exposed["fp32"] > exposed["bf16"]
    with pytest.raises(PlanError, match="grad_reduce must be bf16 or fp32"):
        predict(LLAMA, H100, replace(fsdp, grad_reduce="fp16"))
    base = ["--model", "llama3-8b", "--gpus", "64", "--zero-stage", "3", "--global-batch", "64"]
    assert step_time_main(base + ["--grad-reduce", "bf16", "--json"]) == 0
    assert '"grad_reduce": "bf16"' in capsys.readouterr().out


def test_per_tensor_zero3_gathers_pay_a_ring_latency_per_tensor_and_hide_nothing():
    gpt = Model(96, 12288, 96, vocab=51200, seq_len=2048)
    assert gpt.dense_layer_tensors() == 12   # QKV, projection, two MLP matrices, 4 biases, 2 LayerNorms x 2
    assert LLAMA.dense_layer_tensors() == 6  # no biases, RMSNorm weights only
    a100 = Cluster.of("A100-80GB")
    exposed = {}
    for n in (384, 1536):
        lay = Layout(1, 1, n, 1, n, zero_stage=3, recompute="full")
        unit, tensor = (predict(gpt, a100, replace(lay, fsdp_gather=g))["time_breakdown"]["zero3_gathers"]
                        for g in ("unit", "tensor"))
        assert tensor > unit
        exposed[n] = tensor
    # a recomputed layer's three gathers (forward, recomputed forward, backward) are 12 rings each, its
    # (bucketed) reduce-scatter one, each of n - 1 latency steps: that is what grows with the ranks (the
    # bytes per rank do not)
    extra = (3 * 12 + 1) * (1536 - 384) * EFFICIENCY.latency_s * gpt.layers
    assert exposed[1536] - exposed[384] == pytest.approx(extra, rel=0.02)
    with pytest.raises(PlanError, match="fsdp_gather must be unit or tensor"):
        predict(gpt, a100, replace(lay, fsdp_gather="param"))


def test_per_tensor_zero3_gathers_a_recomputed_layer_again_for_its_recomputed_forward():
    # DeepSpeed's module hooks gather on every forward, the recomputed one too: a share r of the blocks
    # recomputed adds r gathers a layer to the two (forward, backward) of a run that keeps everything
    gpt = Model(96, 12288, 96, vocab=51200, seq_len=2048)
    a100 = Cluster.of("A100-80GB")
    lay = Layout(1, 1, 768, 1, 768, zero_stage=3, fsdp_gather="tensor")
    gathers = {share: predict(gpt, a100, replace(lay, recompute="full", recompute_share=share))
               ["time_breakdown"]["zero3_gathers"] for share in (0.5, 1.0)}
    kept = predict(gpt, a100, replace(lay, recompute="none"))["time_breakdown"]["zero3_gathers"]
    one_gather = gathers[1.0] - gathers[0.5]
    assert one_gather > 0
    assert gathers[1.0] - kept == pytest.approx(2 * one_gather)
    # FSDP's unit gathers once for recompute and backward: recomputing only lengthens what hides it
    unit = replace(lay, fsdp_gather="unit")
    assert (predict(gpt, a100, replace(unit, recompute="full"))["time_breakdown"]["zero3_gathers"]
            <= predict(gpt, a100, replace(unit, recompute="none"))["time_breakdown"]["zero3_gathers"])


def test_the_distributed_optimizer_hides_its_weight_gather_behind_the_first_forward():
    # ZeRO-1 over the network: with overlap, the reduce-scatter hides behind the last micro-batch's
    # backward and the all-gather of the updated weights behind the next step's first forward
    zero1 = Layout.today(1, 1, 64, micro_batch=2, global_batch=128, zero_stage=1)
    on = predict(LLAMA, H100, zero1)
    off = predict(LLAMA, H100, replace(zero1, overlap_grad_reduce=False))
    assert off["dp_comm_hidden_s"] == 0 and off["time_breakdown"]["dp_comm_exposed"] == pytest.approx(off["dp_comm_s"])
    assert on["dp_comm_hidden_s"] > on["dp_comm_s"] / 2       # more than the reduce-scatter alone hides
    assert on["step_time_s"] < off["step_time_s"]


def test_the_cross_entropy_streams_its_fp32_logits_through_hbm():
    # the loss costs loss_bytes per logit (token x vocabulary entry) at eta_hbm of HBM bandwidth
    layout = Layout.today(1, 1, 8, micro_batch=1, global_batch=8)
    without = predict(LLAMA, H100, layout, replace(EFFICIENCY, loss_bytes=0))
    with_loss = predict(LLAMA, H100, layout)
    logits = LLAMA.seq_len * LLAMA.vocab
    expected = logits * EFFICIENCY.loss_bytes / (EFFICIENCY.hbm * H100.gpu.hbm_bytes_per_s)
    assert with_loss["compute_parts"]["logits"] - without["compute_parts"]["logits"] == pytest.approx(expected)
    assert EFFICIENCY.spread["loss_bytes"][0] < EFFICIENCY.loss_bytes < EFFICIENCY.spread["loss_bytes"][1]


def test_megatrons_unfused_loss_moves_52_bytes_a_logit_and_a_fused_one_6():
    """The two ends of the loss's spread are implementations a layout can name (``loss_kernel``):
    Megatron's vocab-parallel chain in place in fp32, its default, and one fused kernel."""
    layout = Layout.today(1, 1, 8, micro_batch=1, global_batch=8)
    logits = LLAMA.seq_len * LLAMA.vocab / (EFFICIENCY.hbm * H100.gpu.hbm_bytes_per_s)
    part = {k: predict(LLAMA, H100, replace(layout, loss_kernel=k))["compute_parts"]["logits"]
            for k in ("upcast", "megatron", "fused")}
    assert part["megatron"] - part["upcast"] == pytest.approx((52 - EFFICIENCY.loss_bytes) * logits)
    assert part["upcast"] - part["fused"] == pytest.approx((EFFICIENCY.loss_bytes - 6) * logits)
    with pytest.raises(PlanError, match="loss_kernel must be upcast, megatron or fused"):
        predict(LLAMA, H100, replace(layout, loss_kernel="liger"))


def test_ep_overlap_hides_the_all_to_alls_behind_another_micro_batchs_compute():
    from playground.planner.costs import overlapped
    from playground.planner.published_stacks import MOE_MODEL_ZOO
    from playground.planner.layer_costs import layer_costs
    row = MOE_MODEL_ZOO[2]                                  # DeepEP over four nodes
    alone, paired = (layer_costs(row.model, row.cluster, replace(row.layout, ep_overlap=o), EFFICIENCY, moe=True)
                     for o in (False, True))
    work = alone["forward"] + alone["backward"] + alone["recompute"]
    assert paired["ep"] == pytest.approx(overlapped(alone["ep"], work, row.cluster.gpu, EFFICIENCY,
                                                      EFFICIENCY.ep_overlap_hidden))
    assert 0 < paired["ep"] < alone["ep"]                   # the SMs DeepEP holds still cost something
    slow, fast = (predict(row.model, row.cluster, replace(row.layout, ep_overlap=o)) for o in (False, True))
    assert fast["step_time_s"] < slow["step_time_s"] and "EP all-to-all overlap" in replace(
        row.layout, ep_overlap=True).describe()
    with pytest.raises(PlanError, match="EP all-to-all overlap needs expert parallelism"):
        predict(LLAMA, H100, replace(FSDP8, ep_overlap=True))


def test_the_embedding_and_the_loss_may_each_take_a_pipeline_chunk():
    from playground.planner.layout import stage_layers
    from playground.planner.published_zoo import MOE_MODEL_ZOO
    row = next(r for r in MOE_MODEL_ZOO if "PP 32 VPP 3" in r.name)   # 94 layers in PP 32 x VPP 3 = 96 chunks
    assert row.layout.pp * row.layout.vpp == row.model.layers + 2
    assert stage_layers(row.model, row.layout) == (2,) + (3,) * 30 + (2,)
    with pytest.raises(PlanError, match="PP x VPP = 128 chunks is more than the 94 layers"):
        predict(row.model, row.cluster, replace(row.layout, vpp=4))


def test_a_sliding_window_layer_computes_its_attention_over_the_window_only():
    from playground.planner.costs import causal_executed, flops_per_step, layer_forward, layer_gemms
    long = replace(LLAMA, seq_len=8192)
    half = replace(long, sliding_window=4096, local_layers=LLAMA.layers // 2)
    core = lambda m, local: sum(2 * c * M * N * K for n, c, M, N, K in layer_gemms(m, 1, 1, local=local)  # noqa: E731
                                if n in ("scores", "context"))
    assert core(half, True) == core(half, False) / 2 == core(long, False) / 2   # s x w keys, not s x s
    lay = Layout.today(1, 1, 8, micro_batch=1, global_batch=8, zero_stage=3)
    full, windowed = (flops_per_step(m, lay, "none") for m in (long, half))
    assert full - windowed == pytest.approx(lay.global_batch * 3 * LLAMA.layers / 2 * core(long, False) / 2)
    assert causal_executed(8192, 8192) == pytest.approx((1 + 128 / 8192) / 2)   # the whole causal half
    assert causal_executed(8192, 4096) == pytest.approx(1 - 0.25 + 64 / 4096)   # the band of a window
    gpu = hardware.gpu("H100")
    assert layer_forward(half, lay, gpu, EFFICIENCY, local=True)["attention"] < \
        layer_forward(half, lay, gpu, EFFICIENCY)["attention"]
    assert predict(half, H100, lay)["step_time_s"] < predict(long, H100, lay)["step_time_s"]
    wide = replace(long, sliding_window=8192, local_layers=LLAMA.layers)     # a window as long as the sequence
    assert predict(wide, H100, lay)["step_time_s"] == pytest.approx(predict(long, H100, lay)["step_time_s"])


def test_group_limited_routing_sends_a_token_to_fewer_nodes():
    from playground.planner.costs import _hit, _reached, dispatch_time
    from playground.planner.presets import preset
    v3 = preset("deepseek-v3")                     # 256 experts in 8 groups, a token's from 4 of them
    assert (v3.expert_groups, v3.groups_per_token) == (8, 4)
    free = replace(v3, expert_groups=1, groups_per_token=1)
    assert _reached(free, 8) == _hit(8, 256, 8) > 5                              # 8 random experts: 5.3 nodes
    assert _reached(v3, 8) == pytest.approx(_hit(4, 128, 8)) and _reached(v3, 8) < 4   # at most 4 (Sec. 3.2.2)
    assert _reached(v3, 6) == _hit(6, 256, 8)     # groups that do not lie whole on the parts: no limit known
    lay = Layout.today(1, 16, 128, ep=64, micro_batch=1, global_batch=15360, dtype="fp8", ep_dispatch="deepep")
    h800 = Cluster.of("H800")
    assert dispatch_time(v3, lay, h800, 4096) < dispatch_time(free, lay, h800, 4096)
    with pytest.raises(PlanError, match="group-limited routing needs expert groups dividing the 256 experts"):
        replace(v3, expert_groups=7)


def test_the_three_ways_to_share_k_and_v_under_context_parallelism():
    """Ring attention hides its K/V passes behind block attention; Llama 3's all-gather CP gathers the
    whole sequence's K/V before attention and reduce-scatters its gradients after, exposed; Ulysses
    all-to-alls Q, K, V and the output, (c - 1) / c of each, forward and backward, exposed."""
    from playground.planner.comm_costs import allgather_time, context_parallel_link, context_parallel_time
    model, c = replace(preset("llama3-8b"), seq_len=131072), 8
    ring = Layout.today(1, 1, 1, cp=c, global_batch=1, recompute="full")
    T, kv_bytes = 131072 / c, 131072 / c * 8 * 256 * BYTES     # 8 KV heads of 128 for K and V
    _, bw = context_parallel_link(ring, H100)
    gather = context_parallel_time(model, H100, replace(ring, cp_method="allgather"), EFFICIENCY, 1.0, T, 1.0, False)
    assert gather == pytest.approx(3 * allgather_time(kv_bytes * c, c, bw, EFFICIENCY))
    ulysses = context_parallel_time(model, H100, replace(ring, cp_method="ulysses"), EFFICIENCY, 1.0, T, 1.0, False)
    q_out = T * 32 * 256 * BYTES
    assert ulysses == pytest.approx(3 * (4 * (c - 1) * EFFICIENCY.latency_s
                                         + (c - 1) / c * (kv_bytes + q_out) / (EFFICIENCY.link * bw)))
    times = {m: predict(model, H100, replace(ring, cp_method=m))["time_breakdown"]["cp_comm_exposed"]
             for m in ("ring", "allgather", "ulysses")}
    assert 0 < times["ring"] < times["ulysses"] < times["allgather"]


def test_ulysses_needs_the_heads_to_split_over_tp_times_cp():
    with pytest.raises(PlanError, match="Ulysses splits the heads over TP x CP = 16"):
        predict(LLAMA, H100, Layout.today(2, 1, 1, cp=8, global_batch=1, cp_method="ulysses"))


def test_fsdp1_weights_kept_in_fp32_gather_four_bytes_each_and_hold_fp32_buffers():
    """Composer's DEFAULT mixed precision (FSDP1, no param_dtype, autocast): the flat parameters stay
    fp32, so every all-gather moves 4 bytes a weight, twice bf16's, and the gathered layers and the
    unsharded gradient take 4 bytes each."""
    from playground.planner.comm_costs import fsdp_exposed_time, shard_link
    from playground.planner.memory import memory_per_gpu
    lay = replace(FSDP8, fp32_gather=True)
    cost = {"forward": 0.0, "backward": 0.0, "recompute": 0.0}     # nothing to hide behind: all exposed
    _, bw = shard_link(lay, H100)
    fp8, bf16, fp32 = (fsdp_exposed_time(cost, 1e9, 8, bw, H100.gpu, EFFICIENCY, x)
                       for x in (replace(FSDP8, fp8_gather=True), FSDP8, lay))
    # two gathers (forward, backward) of 1, 2 or 4 bytes a weight beside one reduce-scatter
    assert fp32 - bf16 == pytest.approx(2 * (bf16 - fp8))
    assert memory_per_gpu(LLAMA, lay)["zero3_buffers"] == pytest.approx(2 * memory_per_gpu(LLAMA, FSDP8)["zero3_buffers"])
    with pytest.raises(PlanError, match="exclude each other"):
        predict(LLAMA, H100, replace(lay, fp8_gather=True))
    with pytest.raises(PlanError, match="need ZeRO stage 3"):
        predict(LLAMA, H100, replace(lay, zero_stage=1))


def test_autocast_over_fp32_weights_keeps_the_residual_stream_in_fp32():
    """Plain PyTorch AMP over fp32 weights (``autocast_fp32``; FSDP's ``fp32_gather`` implies it):
    each weight is cast to bf16 where it is used (6 B a weight a pass), and the stream the fp32
    embedding starts stays fp32 (FP32_STREAM_BYTES, 40 B per element a pass, against the bf16
    stream's 14).  A composite RMSNorm on that stream has no upcast of its own (20 B beyond the
    stream per norm, not 36)."""
    from playground.planner.costs import BF16_STREAM_BYTES, FP32_STREAM_BYTES, layer_forward
    from playground.planner.gemms import ATTENTION_CORE
    lay = Layout.today(1, 1, 8, micro_batch=2, global_batch=16)
    T, h, gpu = 2 * LLAMA.seq_len, LLAMA.hidden, H100.gpu
    hbm = EFFICIENCY.hbm * gpu.hbm_bytes_per_s
    weights = sum(c * K * N for name, c, M, N, K in layer_gemms(LLAMA, 2, 1, 1, 1, False) if name not in ATTENTION_CORE)
    # chapter 5's eq-fp32-stream, forward and backward, charged a third a pass
    assert 3 * FP32_STREAM_BYTES == 2 * (8 + 6 + 10) + 2 * (6 + 6 + 12 + 12) == 120
    bf16, fp32 = (layer_forward(LLAMA, replace(lay, autocast_fp32=on), gpu, EFFICIENCY)["elementwise"]
                  for on in (False, True))
    assert fp32 - bf16 == pytest.approx(((FP32_STREAM_BYTES - BF16_STREAM_BYTES) * T * h + 6 * weights) / hbm)
    assert replace(FSDP8, fp32_gather=True).fp32_stream and not FSDP8.fp32_stream
    eager = replace(lay, kernels="eager")
    assert eager_extra_bytes(LLAMA, T, 1, fp32_stream=True) == pytest.approx(2 * 20 * T * h)
    assert eager_extra_bytes(LLAMA, T) == pytest.approx(2 * 36 * T * h)
    assert predict(LLAMA, H100, replace(eager, autocast_fp32=True))["step_time_s"] > predict(LLAMA, H100, eager)["step_time_s"]


def test_a_checkpointed_layer_on_an_fp32_stream_keeps_its_input_in_fp32():
    """Full recomputation keeps one tensor a layer, its input: on autocast's fp32 stream 4 bytes an
    element, twice a bf16 stream's."""
    lay = Layout.today(1, 1, 8, micro_batch=2, global_batch=16, recompute="full")
    bf16, fp32 = (layer_activation_bytes(LLAMA, replace(lay, autocast_fp32=on)) for on in (False, True))
    assert fp32 == pytest.approx(2 * bf16) == pytest.approx(4 * LLAMA.hidden * 2 * LLAMA.seq_len)


def test_ring_attention_adds_each_steps_partial_result_into_a_running_one():
    """Each ring step's output (forward) and dQ, dK, dV (backward) are read and added into a running sum,
    read and written: 3 passes of 2 bytes an element, over three quarters of the rows after the first step
    under causal load balancing.  Nothing without a ring; the merges are element-wise time in the step."""
    from playground.planner.costs import ring_merge_bytes
    from playground.planner.published_row import llama2
    model = replace(llama2("7b"), seq_len=32768)
    ring = Layout.today(2, 1, 8, cp=2, micro_batch=1, global_batch=8)
    T, width = 32768 / 2, 4096 / 2                       # this rank's tokens; Q, K, V and O widths after TP 2
    fwd, bwd, steps = ring_merge_bytes(model, ring)
    assert (fwd, bwd, steps) == (1.75 * 6 * T * width, 1.75 * 6 * T * 3 * width, 2)
    assert ring_merge_bytes(model, replace(ring, cp_method="allgather")) == (0.0, 0.0, 0)
    assert ring_merge_bytes(model, replace(ring, cp=1)) == (0.0, 0.0, 0)
    assert ring_merge_bytes(model, replace(ring, cp=4))[0] == pytest.approx(fwd / 2 * 3.25 / 1.75)  # T halves
    rate = EFFICIENCY.hbm * H100.gpu.hbm_bytes_per_s
    with_ring, gathered = (predict(model, H100, lay) for lay in (ring, replace(ring, cp_method="allgather")))
    layers = with_ring["micro_batches"] * with_ring["stage_layers"]
    extra = with_ring["compute_parts"]["elementwise"] - gathered["compute_parts"]["elementwise"]
    assert extra == pytest.approx(layers * ((fwd + bwd) / rate + 3 * steps * EFFICIENCY.kernel_s))  # 1 + 2 kernels


def test_a_narrow_head_slows_a_hopper_fused_attention_as_flashattention3s_figures_show():
    """At head dim 64 the FlashAttention-3 paper's H100 figures put FlashAttention-2, FlashAttention-3 and cuDNN
    at 0.89, 0.73 and 0.70 of their rate at 128 (causal forward, 4K); 256 runs as 128, 96 halfway.  Ampere's
    rate, read at 128 from the FlashAttention-2 paper, is left as it is."""
    from playground.planner.costs import attention_efficiency
    h100, a100 = hardware.gpu("H100"), hardware.gpu("A100-80GB")
    for kernel, narrow in (("fa2", 0.89), ("fa3", 0.73), ("cudnn", 0.70)):
        lay = Layout.today(attention_kernel=kernel)
        rate = attention_efficiency(h100, lay, EFFICIENCY, 128)
        assert attention_efficiency(h100, lay, EFFICIENCY, 256) == rate
        assert attention_efficiency(h100, lay, EFFICIENCY, 64) == pytest.approx(narrow * rate)
        assert attention_efficiency(h100, lay, EFFICIENCY, 96) == pytest.approx((1 + narrow) / 2 * rate)
    fa2 = Layout.today(attention_kernel="fa2")
    assert attention_efficiency(a100, fa2, EFFICIENCY, 64) == attention_efficiency(a100, fa2, EFFICIENCY, 128)
