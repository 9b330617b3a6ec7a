"""The capacity planner: its formulas against PyTorch's own counts, its plans against published runs,
and its CLI against bad input."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from playground import planner as cp
from playground.planner import measure_layer_activation_bytes, measure_training_flops
from playground import hardware
from playground.memory import model_state_bytes as measured_state_bytes
from playground.model import ModelConfig, build_model
from playground.planner.published_runs import HIGHEST_PUBLISHED_MFU, KINDS, MAX_REPORTED_MFU, PUBLISHED_RUNS
from playground.planner import LOSS_FIT, chinchilla_loss, chinchilla_optimal

NUMERIC = ("peak_bf16_flops", "hbm_bytes", "hbm_bytes_per_s", "nvlink_bidirectional_bytes_per_s",
           "network_bytes_per_s", "gpus_per_node")


# ----------------------------------------------------------------------------- hardware table
def test_every_hardware_number_has_a_source():
    assert hardware.gpu_names() == ["A100-40GB", "A100-80GB", "H100", "H200", "B200", "V100", "TPUv3", "TPUv4"]
    for g in hardware.all_gpus():
        for name in NUMERIC:
            assert getattr(g, name) > 0
            assert "http" in g.sources[name], (g.name, name)


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
    assert chinchilla_optimal(5.76e23, 3)[0] < n  # Approach 3 prefers smaller models
    with pytest.raises(ValueError, match="compute"):
        chinchilla_optimal(-1)


def test_chinchilla_loss_is_the_fitted_formula_and_falls_with_scale():
    f = LOSS_FIT
    assert chinchilla_loss(1e9, 1e10) == pytest.approx(f["E"] + f["A"] / 1e9 ** 0.34 + f["B"] / 1e10 ** 0.28)
    assert chinchilla_loss(70e9, 1.4e12) < chinchilla_loss(280e9, 300e9)  # Chinchilla beats Gopher


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


def test_per_gpu_memory_of_a_small_layout_worked_by_hand():
    """1,000 parameters in 5 layers on TP=2, PP=2, DP=2, ZeRO-1, selective recomputation, 1F1B.
    The first stage takes ceil(5/2) = 3 layers, so a GPU holds 1000 x 3/5 / 2 = 300 parameters:
    2 x 300 B of weights + 2 x 300 B of gradients + 12 x 300 / 2 B of Adam (sharded over DP)
    = 3,000 B.  Activations: 34 s b h / t = 34 x 32 x 1 x 64 / 2 = 34,816 B per layer and
    micro-batch, for 3 layers and the PP = 2 micro-batches 1F1B keeps in flight: 208,896 B."""
    arch = {"layers": 5, "hidden": 64, "heads": 4, "seq_len": 32}
    mem = cp.per_gpu_memory(1000, arch, tp=2, pp=2, dp=2, zero_stage=1, recompute="selective",
                            micro_batch=1, opt_bytes=12)
    assert mem["model_state_parts"]["parameters"] == 600
    assert mem["model_state_parts"]["gradients"] == 600
    assert mem["model_state_parts"]["optimizer"] == 1800
    assert mem["model_states"] == 3000
    assert mem["activations"] == 3 * 2 * 34_816 == 208_896
    assert mem["total"] == 211_896


GPT_LIKE = {"layers": 30, "hidden": 4096, "heads": 32, "seq_len": 2048}  # 30 layers: PP 4 and 8 leave a short stage


@pytest.mark.parametrize("tp,pp,dp,zero_stage,recompute", [
    (1, 1, 8, 0, "none"), (8, 1, 4, 1, "selective"), (2, 4, 16, 2, "full"),
    (4, 8, 2, 3, "none"), (8, 4, 1, 0, "selective")])
def test_per_gpu_memory_is_the_first_stages_share_of_states_and_its_1f1b_activations(
        tp, pp, dp, zero_stage, recompute):
    """Model states of the first (fullest) stage's ceil(l/PP) layers, split over TP, with ZeRO over
    DP; activations of those layers times the PP micro-batches 1F1B holds in flight on it.  The
    step-time model's ``memory_per_gpu`` (its own code, same formulas) gives the same bytes for
    the same layout (sequence parallelism, no fused attention, vpp = 1, M >= PP)."""
    from playground.planner import Layout, Model, memory_per_gpu
    psi, micro_batch, l = 7e9, 2, GPT_LIKE["layers"]
    mem = cp.per_gpu_memory(psi, GPT_LIKE, tp, pp, dp, zero_stage, recompute, micro_batch, 12)
    stage_layers = math.ceil(l / pp)
    states = cp.model_state_bytes(psi * stage_layers / l / tp, dp, zero_stage)["total"]
    acts = stage_layers * pp * cp.activation_bytes_per_layer(
        GPT_LIKE["seq_len"], micro_batch, GPT_LIKE["hidden"], GPT_LIKE["heads"], recompute, tp)
    assert mem["model_states"] == pytest.approx(states, rel=1e-12)
    assert mem["activations"] == pytest.approx(acts, rel=1e-12)
    assert mem["total"] == pytest.approx(states + acts, rel=1e-12)
    model = Model(layers=l, hidden=GPT_LIKE["hidden"], heads=GPT_LIKE["heads"],
                  seq_len=GPT_LIKE["seq_len"], params=psi)
    layout = Layout(tp=tp, pp=pp, dp=dp, micro_batch=micro_batch, global_batch=dp * micro_batch * 4 * pp,
                    zero_stage=zero_stage, recompute=recompute, sequence_parallel=True)
    other = memory_per_gpu(model, layout)
    for key in ("model_states", "activations", "total"):
        assert mem[key] == pytest.approx(other[key], rel=1e-12), key


# ----------------------------------------------------------------------------- plans
def test_flops_time_and_cost_follow_the_formulas():
    p = cp.plan(params=10e9, tokens=200e9, gpu="A100-80GB", gpus=64, mfu=0.5, price_per_gpu_hour=2)
    assert p["total_flops"] == 6 * 10e9 * 200e9 and p["flops_method"] == "6ND"
    assert p["gpu_hours"] == pytest.approx(6 * 10e9 * 200e9 / (0.5 * 312e12) / 3600)
    assert p["days"] == pytest.approx(p["gpu_hours"] / 64 / 24)
    assert p["cost"] == pytest.approx(2 * p["gpu_hours"])
    full = cp.plan(params=10e9, tokens=200e9, gpu="A100-80GB", gpus=64, mfu=0.5, recompute="full")
    assert full["total_flops"] == 8 * 10e9 * 200e9 and full["gpu_hours"] == p["gpu_hours"]
    assert full["hfu"] == pytest.approx(0.5 * 8 / 6)  # recomputation is work, not progress
    moe = cp.plan(params=100e9, active_params=10e9, tokens=200e9, gpus=64)
    assert moe["total_flops"] == 6 * 10e9 * 200e9


def test_compute_budget_gives_the_chinchilla_model():
    p = cp.plan(compute=5.76e23, gpus=1024)
    assert (p["params"], p["tokens"]) == pytest.approx(chinchilla_optimal(5.76e23))
    assert p["total_flops"] == pytest.approx(5.76e23)


def test_forced_parallelism_fits_and_says_when_nothing_does():
    p = cp.plan(params=70e9, tokens=1.4e12, gpu="H100", gpus=1024)
    par, mem = p["parallelism"], p["memory"]
    # "fits" leaves a reserve of HBM for what the formulas do not count (CUDA context, NCCL, fragmentation)
    assert mem["usable"] == pytest.approx((1 - cp.MEMORY_RESERVE) * mem["capacity"]) and 0 < cp.MEMORY_RESERVE < 0.5
    assert par["fits"] and mem["total"] <= mem["usable"] and par["tp"] <= 8
    assert par["tp"] * par["pp"] * par["dp"] == 1024
    smaller = [(t, q) for t in (1, 2, 4, 8) for q in range(1, 73) if t * q < par["tp"] * par["pp"]]
    arch = p["architecture"]
    for t, q in smaller:  # nothing smaller would have fit
        if arch["heads"] % t == 0 and 1024 % (t * q) == 0:
            m = cp.per_gpu_memory(70e9, arch, t, q, 1024 // (t * q), 0, "none", 1, 12)
            assert m["total"] > mem["usable"]
    huge = cp.plan(params=10e12, tokens=1e12, gpu="A100-40GB", gpus=8)
    assert not huge["parallelism"]["fits"]
    assert any("nothing fits" in w for w in huge["warnings"])
    assert cp.plan(params=70e9, tokens=1.4e12, gpus=1024, zero_stage=3)["memory"]["model_states"] \
        < mem["model_states"]


def test_fantasy_plans_are_flagged():
    warn = lambda **kw: " | ".join(cp.plan(**kw)["warnings"])  # noqa: E731
    assert "more than any published large run reached" in warn(params=7e9, tokens=1e12, gpus=64, mfu=0.9)
    assert "tokens per parameter" in warn(params=70e9, tokens=100e9, gpus=64)
    assert "calendar" in warn(params=70e9, tokens=1.4e12, gpus=8)
    assert "smaller than DP" in warn(params=1e9, tokens=20e9, gpus=4096, global_batch_tokens=2 ** 20)
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


def test_highest_published_mfu_is_recomputed_from_the_table():
    """The fantasy-plan warning quotes the highest MFU a replayed run reports or implies; it is below
    the warning's threshold, so no published run would be flagged."""
    reported = {r.name: cp.plan(**r.plan_kwargs)["mfu"] for r in PUBLISHED_RUNS if r.throughput_source == "reported"}
    assert round(max(reported.values()), 2) == HIGHEST_PUBLISHED_MFU < MAX_REPORTED_MFU
    assert max(reported, key=reported.get) == "LLaMA 65B"
    assert reported["PaLM 540B"] == pytest.approx(0.462)


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


# ----------------------------------------------------------------------------- the CLI
def _cli(*args):
    return subprocess.run([sys.executable, "-m", "playground.capacity_plan", *args],
                          capture_output=True, text=True, timeout=60)


def test_report_states_the_price_it_multiplied_by(capsys):
    assert cp.main(["--params", "7B", "--tokens", "140B", "--gpus", "64", "--price-per-gpu-hour", "2.5"]) == 0
    out = capsys.readouterr().out
    p = cp.plan(params=7e9, tokens=140e9, gpus=64, price_per_gpu_hour=2.5)
    assert f"cost {p['cost']:,.0f} at 2.5 per GPU-hour" in out


def test_cli_json_has_every_key_the_issue_names():
    out = _cli("--params", "70B", "--tokens", "1.4T", "--gpu", "H100", "--gpus", "1024", "--json")
    assert out.returncode == 0, out.stderr
    p = json.loads(out.stdout)
    for key in ("params", "active_params", "tokens", "flops_per_token", "total_flops", "steps",
                "gpu_hours", "days", "cost", "memory", "parallelism", "warnings"):
        assert key in p
    for key in ("model_states", "activations", "total", "capacity"):
        assert key in p["memory"]
    for key in ("dp", "tp", "pp", "zero_stage"):
        assert key in p["parallelism"]
    assert p == json.loads(json.dumps(cp.plan(params=70e9, tokens=1.4e12, gpu="H100", gpus=1024)))
    text = _cli("--params", "70B", "--tokens", "1.4T", "--gpus", "1024")
    assert text.returncode == 0 and "GPU-hours" in text.stdout


BAD = [
    (["--params", "-7B", "--tokens", "1T"], "--params must be positive"),
    (["--params", "0", "--tokens", "1T"], "--params must be positive"),
    (["--params", "seven", "--tokens", "1T"], "not a number"),
    (["--params", "7B", "--tokens", "nan"], "--tokens must be a finite number"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "V100x"], "unknown GPU 'V100x'; known: A100-40GB"),
    (["--params", "7B", "--tokens", "1T", "--gpu", ""], "unknown GPU ''"),
    (["--params", "7B", "--tokens", "1T", "--gpus", "0"], "--gpus must be positive"),
    (["--params", "7B", "--tokens", "1T", "--gpus", "-64"], "--gpus must be positive"),
    (["--params", "7B", "--tokens", "1T", "--gpus", "inf"], "--gpus must be a finite number"),
    (["--params", "7B", "--tokens", "1T", "--gpus", "nan"], "--gpus must be a finite number"),
    (["--params", "1e400", "--tokens", "1T"], "--params must be a finite number"),
    (["--params", "7B", "--tokens", "1T", "--mfu", "nan"], "--mfu must be a finite number"),
    (["--params", "7B", "--tokens", "1T", "--achieved-tflops", "-5"], "--achieved-tflops must be positive"),
    (["--params", "7B", "--tokens", "1T", "--price-per-gpu-hour", "0"], "--price-per-gpu-hour must be positive"),
    (["--params", "7B", "--tokens", "1T", "--seq-len", "0"], "--seq-len must be positive"),
    (["--params", "7B", "--tokens", "1T", "--global-batch-tokens", "100"], "less than one sequence"),
    (["--compute", "inf"], "--compute must be a finite number"),
    (["--params", "7B", "--tokens", "1T", "--layers", "32", "--hidden", "4096", "--heads", "32",
      "--gpus", "1024", "--tp", "8", "--pp", "8", "--dp", "3"], "8 x 8 x 3 = 192 is not the 1024 GPUs"),
    (["--params", "7B", "--tokens", "1T", "--layers", "32", "--hidden", "4096", "--heads", "32",
      "--gpus", "1024", "--tp", "64", "--pp", "1"], "TP=64 does not divide the 32 attention heads"),
    (["--params", "7B", "--tokens", "1T", "--layers", "32", "--hidden", "4096", "--heads", "32",
      "--gpus", "1024", "--tp", "8", "--pp", "64"], "PP=64 is more than the 32 layers"),
    (["--params", "7B", "--tokens", "1T", "--layers", "32", "--hidden", "4096", "--heads", "32",
      "--gpus", "1024", "--tp", "8", "--pp", "8", "--nvlink-gbs", "-5"], "--nvlink-gbs must be a positive"),
    (["--params", "7B", "--tokens", "1T", "--layers", "32", "--hidden", "4096", "--heads", "32",
      "--gpus", "1024", "--tp", "8", "--pp", "8", "--network-gbs", "nan"], "--network-gbs must be a positive"),
    (["--params", "7B", "--tokens", "1T", "--mfu", "1.5"], "--mfu must be in (0, 1]"),
    (["--params", "7B", "--tokens", "1T", "--mfu", "0"], "--mfu must be positive"),
    (["--params", "7B", "--tokens", "1T", "--mfu", "0.4", "--achieved-tflops", "100"], "not both"),
    (["--params", "7B", "--compute", "1e23"], "not both"),
    (["--params", "7B"], "give --params and --tokens"),
    (["--params", "7B", "--tokens", "1T", "--active-params", "8B"], "cannot exceed"),
    (["--params", "7B", "--tokens", "1T", "--gpus", "2.5"], "whole number"),
    (["--params", "7B", "--tokens", "1T", "--zero-stage", "4"], "--zero-stage"),
    (["--params", "7B", "--tokens", "1T", "--recompute", "some"], "--recompute"),
    (["--params", "7B", "--tokens", "1T", "--layers", "32"], "all of --layers"),
    (["--params", "7B", "--tokens", "1T", "--layers", "32", "--hidden", "4096", "--heads", "30"],
     "not divisible"),
    (["--params", "7B", "--tokens", "1T", "--achieved-tflops", "2000", "--gpu", "A100"], "exceeds"),
    (["--params", "7B", "--tokens", "1T", "--frobnicate"], "unrecognized arguments"),
    # sizes that used to keep the layout loops busy for hours
    (["--params", "1e40", "--tokens", "1e40"], "the planner handles at most 10,000"),
    (["--params", "7B", "--tokens", "1T", "--layers", "1e30", "--hidden", "4096", "--heads", "32"],
     "layers from --layers"),
    (["--params", "7B", "--tokens", "1T", "--layers", "32", "--hidden", "4096", "--heads", "32",
      "--search", "--gpus", "1e18"], "no layout of 1000000000000000000 GPUs"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[m for _, m in BAD])
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    assert cp.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_bad_input_from_a_real_process_is_one_line_and_exit_2():
    out = _cli("--params", "7B", "--tokens", "1T", "--gpu", "TPUv9")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("capacity_plan: error: unknown GPU")


@pytest.mark.parametrize("call, message", [
    (lambda: cp.activation_bytes_per_layer(2048, 1, 4096, 32, "Full"), "recompute must be one of"),
    (lambda: cp.activation_bytes_per_layer(2048, 1, 4096, 32, "full", tp=0), "tp must be a whole"),
    (lambda: cp.activation_bytes_per_layer(2048, -1, 4096, 32), "micro_batch must be a whole"),
    (lambda: cp.usable_memory_bytes("H1000"), "H1000"),
    (lambda: cp.forced_parallelism(70e9, cp.infer_architecture(70e9), "H100", gpus=0), "gpus must be"),
])
def test_memory_formulas_refuse_bad_input_in_one_line(call, message):
    with pytest.raises(cp.PlanError, match=message):
        call()


def test_usable_memory_takes_a_gpu_or_its_name():
    assert cp.usable_memory_bytes("H100") == cp.usable_memory_bytes(hardware.gpu("H100")) \
        == pytest.approx(0.9 * 80e9)
