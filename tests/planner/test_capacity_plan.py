"""The capacity planner: its formulas against PyTorch's own counts, its plans against published runs,
and its CLI against bad input."""

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from playground import planner as cp
from playground.planner import measure_layer_activation_bytes, measure_training_flops
from playground.planner.measure import checkpointed_blocks, measure_activation_bytes
from playground import hardware
from playground.memory import model_state_bytes as measured_state_bytes
from playground.model import ModelConfig, build_model
from playground.planner.layout import EFFICIENCY
from playground.planner.mfu_ceiling import mfu_ceiling, published_mfus
from playground.planner.published_runs import KINDS, MAX_REPORTED_MFU, PUBLISHED_RUNS
from playground.planner import LOSS_FIT, chinchilla_loss, chinchilla_optimal
from playground.planner.scaling_laws import HOFFMANN_LOSS_FIT

NUMERIC = ("peak_bf16_flops", "hbm_bytes", "hbm_bytes_per_s", "nvlink_bidirectional_bytes_per_s",
           "network_bytes_per_s", "gpus_per_node")


# ----------------------------------------------------------------------------- hardware table
def test_every_hardware_number_has_a_source():
    assert hardware.gpu_names() == ["A100-40GB", "A100-80GB", "H100", "H100-96GB", "H800", "H200", "B200", "GB200",
                                    "B300", "GB300", "V100", "TPUv3", "TPUv4"]
    for g in hardware.all_gpus():
        for name in NUMERIC:
            assert getattr(g, name) > 0
            assert "http" in g.sources[name] or g.name == "H800", (g.name, name)
        for name in ("peak_fp8_flops", "memory_mib", "tdp_w", "sms"):  # optional: a source whenever a value is given
            assert getattr(g, name) is None or g.sources[name], (g.name, name)
        assert g.exp_rate == 1 or "https://" in g.sources["exp_rate"], g.name   # Blackwell Ultra's doubled SFUs


def test_memory_is_what_the_framework_sees_and_fp8_is_dense():
    """An "80 GB" H100 shows 81,559 MiB (85.5e9 bytes) to a process; dense FP8 is twice dense BF16."""
    h100, a100 = hardware.gpu("H100"), hardware.gpu("A100-80GB")
    assert h100.memory_bytes == 81_559 * 2 ** 20 and a100.memory_bytes == 80 * 2 ** 30
    assert h100.peak_fp8_flops == 2 * h100.peak_bf16_flops and a100.peak_fp8_flops is None
    assert hardware.gpu("H800").peak_bf16_flops == h100.peak_bf16_flops
    assert hardware.gpu("H800").nvlink_bytes_per_s == 200e9  # 400 GB/s both directions


def test_an_nvl72_rack_is_one_nvlink_domain_and_its_gpus_run_at_their_own_power():
    """GB200 and GB300 NVL72: 72 GPUs on one NVLink domain, each with its own NIC; the GB200's GPU at 1,200 W peaks
    higher than the HGX B200's at 1,000 W; Blackwell Ultra (B300) keeps the B200's BF16 and FP8 peaks, with 288 GB
    and an 800 Gb/s NIC a GPU."""
    b200, gb200, b300, gb300 = (hardware.gpu(n) for n in ("B200", "GB200 NVL72", "dgx-b300", "GB300"))
    assert gb200.gpus_per_node == gb300.gpus_per_node == 72 and b300.gpus_per_node == 8
    assert gb200.peak_bf16_flops == 2.5e15 > b200.peak_bf16_flops == b300.peak_bf16_flops == 2.25e15
    for g in (gb200, b300, gb300):
        assert g.peak_fp8_flops == 2 * g.peak_bf16_flops and g.architecture == "blackwell"
        assert g.nvlink_bytes_per_s == b200.nvlink_bytes_per_s
    assert b300.hbm_bytes == gb300.hbm_bytes == 288e9 and gb200.hbm_bytes == 186e9
    assert b300.network_bytes_per_s == gb300.network_bytes_per_s == 2 * gb200.network_bytes_per_s == 100e9
    assert (b200.tdp_w, gb200.tdp_w, b300.tdp_w, gb300.tdp_w) == (1000, 1200, 1100, 1400)


def test_gpu_lookup_is_forgiving_about_spelling_and_strict_about_names():
    assert hardware.gpu("h100 sxm") is hardware.gpu("H100")
    assert hardware.gpu("a100_40gb").hbm_bytes == 40e9
    assert hardware.gpu("H100").nvlink_bytes_per_s == 450e9  # one direction of 900 GB/s
    with pytest.raises(hardware.UnknownGPUError, match="unknown GPU 'MI300X'; known: A100-40GB"):
        hardware.gpu("MI300X")


def test_older_accelerators_follow_their_datasheets():
    v100, v3, v4 = hardware.gpu("V100"), hardware.gpu("TPU v3"), hardware.gpu("tpu-v4")
    assert (v100.peak_bf16_flops, v100.hbm_bytes, v100.nvlink_bytes_per_s) == (125e12, 32e9, 150e9)
    assert v100.network_bytes_per_s == 50e9 / 8  # DGX-1: 4 x 100 Gb/s EDR for 8 GPUs
    assert (v3.peak_bf16_flops, v3.hbm_bytes, v3.gpus_per_node) == (123e12, 32 * 2 ** 30, 1024)
    assert (v4.peak_bf16_flops, v4.hbm_bytes_per_s, v4.gpus_per_node) == (275e12, 1200e9, 4096)
    assert v4.nvlink_bytes_per_s == pytest.approx(1.1e15 / 4096)  # pod all-reduce bandwidth / chips


# ----------------------------------------------------------------------------- scaling laws
def test_chinchilla_optimal_spends_the_budget_and_reproduces_chinchilla():
    for approach in (1, 3):
        n, d = chinchilla_optimal(5.76e23, approach)
        assert math.isclose(6 * n * d, 5.76e23, rel_tol=1e-12)
    n, d = chinchilla_optimal(5.76e23)  # Chinchilla: 70B parameters, 1.4T tokens
    assert 0.95 < n / 70e9 < 1.05 and 0.95 < d / 1.4e12 < 1.05
    # Besiroglu et al.'s corrected Approach 3 agrees with the 20-token rule (18 tokens per parameter);
    # Hoffmann et al.'s published fit would choose a model less than half the size
    n3, d3 = chinchilla_optimal(5.76e23, 3)
    assert 0.9 < n3 / n < 1.1 and 15 < d3 / n3 < 22
    assert chinchilla_optimal(5.76e23, 3, fit="hoffmann")[0] < n / 2
    with pytest.raises(ValueError, match="compute"):
        chinchilla_optimal(-1)


def test_chinchilla_loss_is_the_fitted_formula_and_falls_with_scale():
    f = LOSS_FIT
    assert (f["E"], f["A"], f["B"], f["alpha"], f["beta"]) == (1.8172, 482.01, 2085.43, 0.3478, 0.3658)  # Besiroglu
    assert chinchilla_loss(1e9, 1e10) == pytest.approx(f["E"] + f["A"] / 1e9 ** f["alpha"] + f["B"] / 1e10 ** f["beta"])
    h = HOFFMANN_LOSS_FIT
    assert chinchilla_loss(1e9, 1e10, "hoffmann") == pytest.approx(h["E"] + h["A"] / 1e9 ** 0.34 + h["B"] / 1e10 ** 0.28)
    for fit in ("besiroglu", "hoffmann"):  # Chinchilla beats Gopher under either fit
        assert chinchilla_loss(70e9, 1.4e12, fit) < chinchilla_loss(280e9, 300e9, fit)
    with pytest.raises(ValueError, match="fit must be one of"):
        chinchilla_loss(1e9, 1e10, "kaplan")


# ----------------------------------------------------------------------------- formulas vs PyTorch
CFGS = [(ModelConfig(), 4), (ModelConfig(vocab=256, d_model=128, n_heads=8, n_layers=3, seq_len=64), 2)]


@pytest.mark.parametrize("cfg,batch", CFGS)
def test_megatron_flops_equal_pytorch_flop_counter(cfg, batch):
    for recompute in ("none", "full"):
        measured = measure_training_flops(cfg, batch, recompute)
        predicted = cp.megatron_flops_per_iteration(batch, cfg.seq_len, cfg.n_layers, cfg.d_model,
                                                    cfg.vocab, recompute)
        assert measured == predicted


@pytest.mark.parametrize("cfg,batch", CFGS)
def test_recomputing_a_share_of_the_blocks_adds_that_share_of_their_forward(cfg, batch):
    """fms-fsdp's selective checkpointing (every other block at 1/2) under PyTorch's FLOP counter: the
    executed FLOPs are Megatron's with the forward of the checkpointed blocks' share run again."""
    for share in (1 / 3, 1 / 2, 2 / 3):
        chosen = checkpointed_blocks(cfg.n_layers, share)
        measured = measure_training_flops(cfg, batch, "full", share)
        predicted = cp.megatron_flops_per_iteration(batch, cfg.seq_len, cfg.n_layers, cfg.d_model, cfg.vocab,
                                                    "full", recompute_share=len(chosen) / cfg.n_layers)
        assert measured == pytest.approx(predicted, rel=1e-12)
    assert checkpointed_blocks(6, 1 / 2) == [0, 2, 4] and checkpointed_blocks(6, 1 / 3) == [1, 4]
    assert checkpointed_blocks(6, 2 / 3) == [0, 2, 3, 5] and checkpointed_blocks(6, 1) == list(range(6))


@pytest.mark.parametrize("cfg,batch", CFGS)
def test_checkpointing_a_share_of_the_blocks_keeps_their_inputs_and_the_rest_whole(cfg, batch):
    """Saved-tensor hooks over the blocks of a bf16 TinyGPT: each checkpointed block keeps its input,
    2 s b h bytes, and each other one what it keeps unrecomputed, so the total is the planner's mix."""
    whole, checkpointed = measure_activation_bytes(cfg, batch), measure_activation_bytes(cfg, batch, 1.0)
    l = cfg.n_layers
    assert checkpointed == l * 2 * cfg.seq_len * batch * cfg.d_model
    for share in (1 / 3, 1 / 2, 2 / 3):
        k = len(checkpointed_blocks(l, share))
        assert measure_activation_bytes(cfg, batch, share) == k * checkpointed / l + (l - k) * whole / l


@pytest.mark.parametrize("cfg,batch", CFGS)
def test_activation_bytes_per_layer_match_saved_tensors(cfg, batch):
    measured = measure_layer_activation_bytes(cfg, batch)
    predicted = cp.activation_bytes_per_layer(cfg.seq_len, batch, cfg.d_model, cfg.n_heads,
                                              dropout=False, flash_attention=True)
    assert 1.0 <= measured / predicted < 1.01  # the rest: LayerNorm statistics, 8 b s bytes


def test_activation_formulas_are_korthikantis_with_and_without_sequence_parallelism():
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    act = lambda rc, sp: cp.activation_bytes_per_layer(s, b, h, a, rc, t, sequence_parallel=sp)  # noqa: E731
    # with sequence parallelism every saved tensor is split over the t ranks (their Table 2)
    assert act("none", True) == pytest.approx(s * b * h / t * (34 + 5 * a * s / h))
    assert act("selective", True) == pytest.approx(34 * s * b * h / t)
    assert act("full", True) == pytest.approx(2 * s * b * h / t)
    # without it the LayerNorm and dropout regions (10 s b h) stay whole on every TP rank (their Eq. 2)
    assert act("none", False) == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)))
    assert act("selective", False) == pytest.approx(s * b * h * (10 + 24 / t))
    assert act("full", False) == pytest.approx(2 * s * b * h)  # the whole layer input, on every rank
    for rc in ("none", "selective", "full"):  # without TP the two agree
        assert cp.activation_bytes_per_layer(s, b, h, a, rc, 1, sequence_parallel=False) == \
            pytest.approx(cp.activation_bytes_per_layer(s, b, h, a, rc, 1))


def test_zero_formulas_and_a_real_adam_step():
    psi = 1000
    assert cp.model_state_bytes(psi)["total"] == 16 * psi
    assert cp.model_state_bytes(psi, 4, 1)["total"] == 4 * psi + 12 * psi / 4
    assert cp.model_state_bytes(psi, 4, 2)["total"] == 2 * psi + 14 * psi / 4
    assert cp.model_state_bytes(psi, 4, 3)["total"] == 16 * psi / 4
    # fp32 Adam: 4-byte parameters and gradients, 8 bytes of moments, counted by playground.memory
    model = build_model(ModelConfig())
    opt = torch.optim.Adam(model.parameters())
    model(torch.zeros(1, 16, dtype=torch.long)).sum().backward()
    opt.step()
    real = measured_state_bytes(model.parameters(), opt)
    formula = cp.model_state_bytes(ModelConfig().param_count(), param_bytes=4, grad_bytes=4,
                                   optimizer_bytes_per_param=8)
    assert real["parameters"] == formula["parameters"]
    assert real["gradients"] == formula["gradients"]
    assert real["optimizer"] == formula["optimizer"]
    with pytest.raises(cp.PlanError, match="zero_stage"):
        cp.model_state_bytes(psi, 1, 4)


# ----------------------------------------------------------------------------- plans
def test_flops_time_and_cost_follow_the_formulas_when_mfu_is_given():
    p = cp.plan(params=10e9, tokens=200e9, gpu="A100-80GB", gpus=64, mfu=0.5, price_per_gpu_hour=2)
    assert p["total_flops"] == 6 * 10e9 * 200e9 and p["flops_method"] == "6ND"
    assert p["gpu_hours"] == pytest.approx(6 * 10e9 * 200e9 / (0.5 * 312e12) / 3600)
    assert p["days"] == pytest.approx(p["gpu_hours"] / 64 / 24)
    assert p["cost"] == pytest.approx(2 * p["gpu_hours"])
    assert p["speed_source"] == "MFU given" and "layout_prediction" not in p
    full = cp.plan(params=10e9, tokens=200e9, gpu="A100-80GB", gpus=64, mfu=0.5, recompute="full")
    assert full["total_flops"] == 8 * 10e9 * 200e9 and full["gpu_hours"] == p["gpu_hours"]
    assert full["hfu"] == pytest.approx(0.5 * 8 / 6)  # recomputation is work, not progress
    moe = cp.plan(params=100e9, active_params=10e9, tokens=200e9, gpus=64, mfu=0.4)
    assert moe["total_flops"] == 6 * 10e9 * 200e9


def test_compute_budget_gives_the_chinchilla_model():
    p = cp.plan(compute=5.76e23, gpus=1024, mfu=0.4)
    assert (p["params"], p["tokens"]) == pytest.approx(chinchilla_optimal(5.76e23))
    assert p["total_flops"] == pytest.approx(5.76e23)


def test_inferred_shape_is_todays_and_keeps_the_parameter_count():
    """Only a parameter count: a Llama-3-style shape (GQA, SwiGLU, RMSNorm, 8K context)."""
    m = cp.infer_architecture(70e9)
    assert (m.kv_heads, m.gated_mlp, m.norm, m.seq_len, m.vocab) == (8, True, "rmsnorm", 8192, 128256)
    assert m.param_count == 70e9 and abs(m.counted_params() / 70e9 - 1) < 0.15
    assert m.hidden == 128 * m.heads and m.layers % 8 == 0


def test_fantasy_plans_are_flagged():
    warn = lambda **kw: " | ".join(cp.plan(**kw)["warnings"])  # noqa: E731
    assert "the most any of the 50 published dense bf16 runs on Hopper GPUs" in \
        warn(params=7e9, tokens=1e12, gpus=64, mfu=0.9)
    assert "the highest published for a run of 10,000+ GPUs" in warn(params=7e11, tokens=1e13, gpus=16384, mfu=0.6)
    # and the days at the highest published MFU: days go as 1 / MFU
    fantasy = cp.plan(params=7e9, tokens=1e12, gpus=64, mfu=0.9)
    ceiling = mfu_ceiling(hardware.gpu("H100"), "bf16", 64, dense=True)["mfu"]
    assert fantasy["warnings"][0].endswith(f"at {ceiling:.2f} the run takes {fantasy['days'] * 0.9 / ceiling:.3g} days")
    assert "tokens per parameter" in warn(params=70e9, tokens=100e9, gpus=64, mfu=0.4)
    assert "calendar" in warn(params=70e9, tokens=1.4e12, gpus=8, mfu=0.4)
    assert "smaller than DP" in warn(params=1e9, tokens=20e9, gpus=4096, global_batch_tokens=2 ** 20, mfu=0.4)
    assert warn(params=70e9, tokens=1.4e12, gpus=2048, mfu=0.4) == ""


@pytest.mark.parametrize("run", PUBLISHED_RUNS, ids=lambda r: r.name)
def test_planner_lands_within_1_5x_of_every_published_run(run):
    p = cp.plan(**run.plan_kwargs)
    ratio = run.published[run.compare] / p[run.compare]
    if run.outlier:  # documented miss: the table shows it, the test keeps it honest
        assert ratio > 1.5, f"{run.name} is no longer an outlier ({ratio:.2f}); update its note"
    else:
        assert 1 / 1.5 <= ratio <= 1.5, f"{run.name}: published/planner = {ratio:.2f}"
    assert "total_flops" not in run.published or \
        1 / 1.5 <= run.published["total_flops"] / p["total_flops"] <= 1.5


def test_no_published_run_would_be_flagged_by_the_mfu_warning():
    """The fantasy-plan warning's ceiling is the highest MFU a replayed run reached on the plan's GPU
    architecture in its precision: no run of chapter 6 passes its own ceiling, and none of chapter 5's
    runs, replayed at its reported throughput, is warned about."""
    for run in published_mfus():
        assert run["mfu"] <= mfu_ceiling(hardware.gpu(run["gpu"]), run["dtype"], run["gpus"])["mfu"], run["name"]
    for run in PUBLISHED_RUNS:
        if run.throughput_source == "reported":
            assert not [w for w in cp.plan(**run.plan_kwargs)["warnings"] if w.startswith("MFU")], run.name


def test_an_fp8_plan_is_held_to_fp8_runs_against_the_fp8_peak():
    """An FP8 plan's MFU of the bf16 peak can pass 0.8 (NeMo's FP8 runs did); the warning measures it
    against the FP8 peak and the FP8 runs: Llama 3 8B at TP 2 is within them, and so at TP 1 at the
    sourced FP8 rate, but above them with FP8 GEMMs claimed at DeepGEMM's best (0.78 of the peak, as a
    results file might measure) and fast accumulation in the backward too."""
    fp8 = mfu_ceiling(hardware.gpu("H100"), "fp8", dense=True)
    assert fp8["mfu"] == max(r["mfu"] for r in published_mfus()
                             if r["dtype"] == "fp8" and hardware.gpu(r["gpu"]).architecture == "hopper" and not r["moe"])
    assert fp8["scope"] == "on Hopper GPUs" and 0.4 < fp8["mfu"] < 0.45
    within = cp.plan(model="llama3-8b", gpus=64, tokens=1e12, tp=2, dtype="fp8")
    sourced = cp.plan(model="llama3-8b", gpus=64, tokens=1e12, tp=1, dtype="fp8")
    above = cp.plan(model="llama3-8b", gpus=64, tokens=1e12, tp=1, dtype="fp8",
                    efficiency=replace(EFFICIENCY, fp8_gemm=0.78, fp8_split_accumulation=1.0))
    assert not [w for w in sourced["warnings"] if w.startswith("MFU")]
    assert within["mfu"] > 0.6 and not [w for w in within["warnings"] if w.startswith("MFU")]
    [line] = [w for w in above["warnings"] if w.startswith("MFU")]
    assert "of the FP8 peak" in line and "60 published dense FP8 runs on Hopper GPUs" in line


def test_a_bf16_plan_of_10000_gpus_is_held_to_the_highest_mfu_published_at_that_scale():
    small, large = (mfu_ceiling(hardware.gpu("H100"), "bf16", gpus) for gpus in (512, 16384))
    assert small["mfu"] > MAX_REPORTED_MFU and not small["large_run"]
    assert large["mfu"] == MAX_REPORTED_MFU and "MegaScale" in large["run"]
    # Blackwell's five bf16 runs are all MoE: enough to bound a MoE plan there, none to bound a dense one
    moe_ceiling, dense_ceiling = (mfu_ceiling(hardware.gpu("B200"), "bf16", dense=dense) for dense in (False, True))
    assert (moe_ceiling["scope"], moe_ceiling["runs"]) == ("on Blackwell GPUs", 5) and moe_ceiling["mfu"] < 0.4
    assert dense_ceiling["scope"] == "on any GPU" and dense_ceiling["mfu"] > 0.6
    assert mfu_ceiling(hardware.gpu("B200"), "fp8", dense=True)["scope"] == "on Blackwell GPUs"   # eight dense FP8 runs


def test_a_dense_plan_is_held_to_dense_runs_and_a_moe_plan_to_every_run():
    """A mixture of experts reaches a lower MFU of its active parameters: a dense Llama 3 70B on B200s is not warned
    against Blackwell's bf16 MoE runs (0.37 at most), and no published run passes the ceiling of its own kind."""
    dense = cp.plan(model="llama3-70b", gpu="B200", gpus=1024, tokens=15e12)
    assert dense["mfu"] > 0.4 and not [w for w in dense["warnings"] if w.startswith("MFU")]
    for run in published_mfus():
        assert run["mfu"] <= mfu_ceiling(hardware.gpu(run["gpu"]), run["dtype"], run["gpus"], not run["moe"])["mfu"]


def test_runs_say_what_kind_of_check_they_are():
    """Only runs whose time was measured independently of the planner's throughput input test the
    time arithmetic; the others are FLOP-only or consistency checks, counted apart."""
    kinds = {r.name: r.kind for r in PUBLISHED_RUNS}
    assert set(kinds.values()) <= set(KINDS)
    assert {n for n, k in kinds.items() if k == "flops"} == {"GPT-3 175B", "Chinchilla 70B"}
    assert {n for n, k in kinds.items() if k == "consistency"} == {"Megatron-LM 1T", "LLaMA 65B"}
    assert all((r.kind == "flops") == (r.compare == "total_flops") for r in PUBLISHED_RUNS)
    measured = [r for r in PUBLISHED_RUNS if r.kind == "measured"]
    within = [r for r in measured
              if 1 / 1.5 <= r.published[r.compare] / cp.plan(**r.plan_kwargs)[r.compare] <= 1.5]
    assert all(r.throughput_source != "assumed" or r.plan_kwargs["mfu"] == cp.DEFAULT_MFU for r in PUBLISHED_RUNS)
    assert (len(measured), len(within)) == (10, 8)
    assert sum(r.throughput_source == "assumed" for r in within) == 5  # resting on the default MFU 0.40


def test_published_flop_totals_are_6nd_within_about_2_percent():
    """The chapter's claim: a published FLOP total is 0.98-1.01x of 6ND (8ND within 10% where it counts recomputation)."""
    checked = 0
    for run in PUBLISHED_RUNS:
        if "total_flops" in run.published:
            p = cp.plan(**run.plan_kwargs)
            ratio = run.published["total_flops"] / p["total_flops"]
            assert abs(ratio - 1) <= (0.025 if p["flops_method"] == "6ND" else 0.10), (run.name, ratio)
            checked += 1
    assert checked >= 5


def test_published_runs_are_cited_and_cover_gpus_and_tpus():
    bib = open(Path(__file__).resolve().parents[2] / "references.bib").read()
    for run in PUBLISHED_RUNS:
        for key in (run.cite, *(v for k, v in run.extra.items() if k.endswith("_cite"))):
            assert f"{{{key}," in bib, (run.name, key)
        assert run.throughput_source in ("reported", "assumed", "n/a")
        assert run.throughput_source == "n/a" or "gpu" in run.plan_kwargs, run.name
    names = {r.name for r in PUBLISHED_RUNS}
    assert {"Gopher 280B", "PaLM 540B", "Llama 2 70B", "Falcon 180B", "MPT-7B"} <= names
    timed = [r for r in PUBLISHED_RUNS if r.compare != "total_flops"]
    assert {hardware.gpu(r.plan_kwargs["gpu"]).name for r in timed} >= {"A100-40GB", "A100-80GB", "H100", "TPUv3",
                                                                         "TPUv4"}
