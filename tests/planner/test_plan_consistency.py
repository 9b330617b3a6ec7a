"""One consistent plan: with a layout given or found, every figure of the report comes from that
layout's prediction; today's defaults; the search finds what practitioners run and never ranks a
layout below a slower one; and when nothing fits the plan says what would."""

from dataclasses import replace

import pytest

from playground import planner as cp
from playground.planner import Cluster, Layout, predict, preset

H100 = Cluster.of("H100")
LLAMA8, LLAMA405 = preset("llama3-8b"), preset("llama3-405b")


def test_every_figure_comes_from_the_one_layout():
    p = cp.plan(model="llama3-405b", tokens=15.6e12, gpus=8192, tp=8, pp=16, global_batch_tokens=2 ** 24)
    r = p["layout_prediction"]
    assert (p["parallelism"]["tp"], p["parallelism"]["pp"], p["parallelism"]["dp"]) == (8, 16, 64)
    assert p["step_time_s"] == r["step_time_s"] and p["mfu"] == pytest.approx(r["mfu"])
    assert p["hfu"] == pytest.approx(r["hfu"]) and p["hfu"] >= p["mfu"]
    assert p["tflops_per_gpu"] == pytest.approx(r["tflops_per_gpu"])
    assert p["days"] == pytest.approx(p["steps"] * r["step_time_s"] / 86400)
    assert p["gpu_hours"] == pytest.approx(p["steps"] * r["step_time_s"] * 8192 / 3600)
    assert p["total_flops"] == pytest.approx(p["steps"] * r["flops_per_step"])
    assert p["memory"] == r["memory"] and p["memory"]["fits"] == p["parallelism"]["fits"]
    assert p["global_batch_tokens"] == 2 ** 24 and r["layout"]["global_batch"] == 2048  # --global-batch is used
    assert "search" not in p and p["speed_source"].startswith("predicted")


def test_recomputation_makes_hfu_exceed_mfu():
    p = cp.plan(model="llama3-70b", tokens=1e12, gpus=64, zero_stage=3, tp=1, recompute="full",
                global_batch=64)
    assert p["hfu"] > p["mfu"] and p["hfu"] / p["mfu"] == pytest.approx(p["total_flops"] / p["model_flops"])


def test_defaults_are_todays():
    lay = Layout(**cp.plan(model="llama3-70b", tokens=1e12, gpus=64, tp=4, pp=2)["layout"])
    assert (lay.dtype, lay.flash_attention, lay.sequence_parallel, lay.dropout) == ("bf16", True, True, False)
    assert (lay.zero_stage, lay.overlap_grad_reduce, lay.recompute) == (1, True, "none")
    alone = Layout(**cp.plan(model="llama3-8b", tokens=1e12, gpus=1, tp=1)["layout"])
    assert alone.zero_stage == 0 and not alone.sequence_parallel  # nothing to shard over, nothing to split


def test_switches_bring_back_the_old_behaviour_and_flash_attention_changes_memory():
    kw = dict(model="llama3-70b", tokens=1e12, gpus=64, tp=8, pp=8)
    flash, plain = (cp.plan(**kw, flash_attention=f)["memory"]["activations"] for f in (True, False))
    assert plain > 2 * flash  # the s^2 scores of an unfused softmax
    old = Layout(**cp.plan(**kw, sequence_parallel=False, dropout=True, overlap_grad_reduce=False)["layout"])
    assert (old.sequence_parallel, old.dropout, old.overlap_grad_reduce) == (False, True, False)


def test_mfu_given_sets_the_time_and_the_layout_only_the_memory():
    p = cp.plan(model="llama3-8b", tokens=1e12, gpus=64, tp=1, mfu=0.4)
    assert "layout_prediction" not in p and p["mfu"] == pytest.approx(0.4)
    assert p["parallelism"]["source"] == "given" and p["memory"]["fits"]
    alone = cp.plan(params=70e9, tokens=1.4e12, mfu=0.4)  # no GPUs: the least model parallelism that fits
    assert alone["parallelism"]["source"] == "least model parallelism that fits" and alone["memory"]["fits"]


def test_fp8_gemms_run_at_the_fp8_peak():
    bf16 = predict(LLAMA8, H100, Layout.today(1, 1, 8, global_batch=64))
    fp8 = predict(LLAMA8, H100, Layout.today(1, 1, 8, global_batch=64, dtype="fp8"))
    assert 1.2 < bf16["step_time_s"] / fp8["step_time_s"] < 2  # attention and element-wise stay bf16


def test_search_finds_tp_1_for_an_8b_model_on_64_h100s():
    p = cp.plan(model="llama3-8b", tokens=15e12, gpus=64, global_batch_tokens=2 ** 22)
    assert p["parallelism"]["tp"] == 1 and p["parallelism"]["source"] == "found by the search"
    ranked = p["search"]["ranked"]
    assert ranked[0]["layout"] == p["layout"] and all(r["layout"]["tp"] <= 8 for r in ranked)
    speeds = [r["tokens_per_s"] for r in ranked]
    assert speeds == sorted(speeds, reverse=True) and len(set(speeds)) == len(speeds)
    for better, worse in zip(ranked, ranked[1:]):  # why each beats the next
        assert "% faster" in better["beats_next"]


def test_search_finds_a_405b_layout_at_least_as_fast_as_the_published_one():
    published = predict(LLAMA405, H100, Layout.today(8, 16, 64, global_batch=2048))
    found = cp.plan(model="llama3-405b", tokens=15.6e12, gpus=8192, global_batch_tokens=2 ** 24)
    assert found["memory"]["fits"] and found["parallelism"]["tp"] <= 8
    assert found["tokens_per_s"] >= published["tokens_per_s"]
    # the same model ranks both: nothing ranked above the published layout is predicted slower than it
    for r in found["search"]["ranked"]:
        assert r["tokens_per_s"] >= published["tokens_per_s"]


def test_search_holds_the_knobs_it_is_given():
    p = cp.plan(model="llama3-70b", tokens=1e12, gpus=64, zero_stage=3, recompute="full", global_batch=64)
    assert all(r["layout"]["zero_stage"] == 3 and r["layout"]["recompute"] == "full"
               for r in p["search"]["ranked"])


def test_a_plan_that_does_not_fit_names_the_smallest_changes_that_would():
    p = cp.plan(model="llama3-405b", tokens=15.6e12, gpus=8192, tp=8, pp=16, micro_batch=2,
                global_batch_tokens=2 ** 24)
    assert not p["memory"]["fits"] and any("does NOT fit" in w for w in p["warnings"])
    changes = [a["change"] for a in p["fit_advice"]]
    assert any(c.startswith("--recompute") for c in changes) and any(c.startswith("--micro-batch-size 1")
                                                                    for c in changes)
    assert all(a["memory_bytes"] <= p["memory"]["usable"] for a in p["fit_advice"])


def test_fp8_weights_kept_beside_bf16_ones_are_named_as_a_way_to_fit():
    """Llama 3 70B at TP 4 x PP 4 (VP 5) on 64 H100s in FP8 with bf16 weights fits only tightly: each weight
    keeps its FP8 cast and transpose beside it.  Among the changes that would leave room, the plan names the
    flag that keeps the weights in FP8 alone, 2 bytes a weight less."""
    p = cp.plan(model="llama3-70b", tokens=1e12, gpus=64, tp=4, pp=4, vpp=5, dtype="fp8", fp8_params=False,
                global_batch_tokens=2 ** 22)
    assert p["memory"]["tight"]
    advice = {a["change"]: a["memory_bytes"] for a in p["fit_advice"]}
    assert advice["--fp8-params"] <= p["memory"]["usable"] < p["memory"]["total"]


def test_a_search_that_finds_nothing_says_so_and_what_would_fit():
    p = cp.plan(model="llama3-405b", tokens=1e12, gpus=8, gpu="A100-40GB")
    assert not p["memory"]["fits"] and p["search"]["fit"] == 0
    assert any("the fewest GPUs that fit are 256" in w for w in p["warnings"])
    assert p["fit_advice"][0]["change"].startswith("--gpus 256")


def test_uneven_pipeline_placement_is_in_the_report():
    p = cp.plan(model="llama3-405b", tokens=15.6e12, gpus=8192, tp=8, pp=16, global_batch_tokens=2 ** 24)
    assert p["placement_note"].startswith("126 layers as 7 + 14 x 8 + 7")
    assert p["layout_prediction"]["placement"] == [7] + [8] * 14 + [7]


def test_context_and_expert_parallelism_cost_time_on_their_links():
    long = replace(LLAMA8, seq_len=131072)
    r = predict(long, H100, Layout.today(1, 1, 8, global_batch=8, cp=8, recompute="full"))
    assert r["links"]["cp"] == "nvlink" and r["time_breakdown"]["cp_comm_exposed"] >= 0
    ds = preset("deepseek-v3")
    inside = predict(ds, Cluster.of("H800"), Layout.today(1, 16, 128, global_batch=15360, ep=8, recompute="full"))
    across = predict(ds, Cluster.of("H800"), Layout.today(1, 16, 128, global_batch=15360, ep=64, recompute="full"))
    assert inside["links"]["ep"] == "nvlink" and across["links"]["ep"] == "network"
    assert across["time_breakdown"]["ep_all_to_all"] > inside["time_breakdown"]["ep_all_to_all"]


def test_bf16_adam_moments_are_named_among_the_changes_that_would_fit():
    """Llama 3 8B at TP 2 without ZeRO on 8 GPUs holds 16 bytes of state a parameter of its shard and does not fit;
    Adam's moments in bf16 make it 12, and the plan names that flag beside ZeRO-1 and the rest."""
    p = cp.plan(model="llama3-8b", tokens=1e12, gpus=8, tp=2, zero_stage=0, global_batch_tokens=2 ** 20)
    assert not p["memory"]["fits"]
    advice = {a["change"]: a["memory_bytes"] for a in p["fit_advice"]}
    assert advice["--optimizer-moments bf16"] <= p["memory"]["usable"] and "--zero-stage 1" in advice
    assert p["memory"]["total"] - advice["--optimizer-moments bf16"] == pytest.approx(4 * p["params"] / 2, rel=0.01)


def test_activation_offloading_is_named_among_the_changes_that_would_fit():
    """The Megatron-Core MoE report's Qwen3-235B at micro-batch 3 on 256 GB200s, with every activation on the GPU, is
    counted past the GB200; offloading each dispatched copy to host memory (--offload-modules expert_fc1, what its
    Table 5 ran) is the smallest change that fits, named beside the others; on a TPU, with no host link in the
    hardware table, it is not offered."""
    from dataclasses import replace
    from playground.planner.layout_search import fit_advice
    from playground.planner.published_moe_report import MCORE_MOE_REPORT
    row = next(r for r in MCORE_MOE_REPORT if r.layout.offload_modules)
    kept = replace(row.layout, offload_modules=())
    advice = [a["change"] for a in fit_advice(row.model, kept, "GB200", 256)]
    assert "--offload-modules expert_fc1" in advice and "--micro-batch-size 1" in advice
    assert not any(a["change"].startswith("--offload") for a in fit_advice(row.model, kept, "TPUv4", 256))
