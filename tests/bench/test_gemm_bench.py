"""`python -m playground.bench gemm`: real matmuls timed by shape, a results file with its provenance,
the planner's own layer shapes, no peak claimed on a CPU, and bad input as one line with exit 2."""

import json

import pytest
import torch

from playground.bench.__main__ import main as bench_main
from playground.planner.costs import layer_gemms
from playground.planner.layout import Efficiency
from playground.planner.presets import preset

TINY = ["gemm", "--sizes", "32", "48", "--tokens", "16", "--tp", "8", "--repeats", "2", "--warmup", "1"]


def _run(capsys, *extra):
    assert bench_main([*TINY, *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU run (fp32, no datasheet peak)")
def test_the_bench_times_squares_and_a_layers_gemms_and_writes_its_results_file(tmp_path, capsys):
    out = tmp_path / "gemm.json"
    printed = _run(capsys, "--json", "--out", str(out))
    assert json.loads(out.read_text()) == printed                      # --out holds what --json printed
    for key in ("device", "torch", "date", "git_commit"):
        assert key in printed["provenance"]
    assert printed["benchmark"] == "gemm" and "gemm --sizes 32 48" in printed["command"]
    assert printed["dtype"] == "fp32" and printed["device_type"] == "cpu"
    model = preset("llama3-8b").__class__(**{**preset("llama3-8b").__dict__, "seq_len": 16})
    layer = [(n, c, round(M), N, K) for n, c, M, N, K in layer_gemms(model, 1, 8)]
    rows = [(r["shape"], r["count"], r["m"], r["n"], r["k"]) for r in printed["rows"]]
    assert rows == [("square 32", 1, 32, 32, 32), ("square 48", 1, 48, 48, 48)] + layer
    assert all(r["tflops"] > 0 and r["median_ms"] > 0 for r in printed["rows"])
    assert max(r["fraction_of_best"] for r in printed["rows"]) == 1.0
    # a CPU has no datasheet peak: no fraction of peak and no efficiency is claimed
    assert printed["peak_tflops"] is None and printed["efficiency"] == {}
    assert all(r["fraction_of_peak"] is None for r in printed["rows"])
    assert "no datasheet peak" in printed["note"]


def test_with_a_peak_the_best_shape_gives_the_measured_gemm_efficiency(tmp_path, capsys):
    out = tmp_path / "gemm.json"
    printed = _run(capsys, "--json", "--out", str(out), "--peak-tflops", "2")
    best = printed["best"]
    assert printed["peak_tflops"] == 2.0 and printed["peak_source"] == "--peak-tflops"
    assert best["fraction_of_peak"] == pytest.approx(best["tflops"] / 2, abs=1e-4)
    assert printed["efficiency"] == {"gemm": best["fraction_of_peak"]}
    lo, hi = printed["efficiency_spread"]["gemm"]
    assert lo <= best["fraction_of_peak"] <= hi
    eff = Efficiency.from_results(out)                                # the planner takes it from the file
    assert eff.gemm == best["fraction_of_peak"] and eff.measured == ["gemm"]
    assert eff.sources["gemm"].startswith(f"measured: {out} (gemm on ")


def test_holding_the_best_shape_reports_its_sustained_share_and_claims_it_only_on_a_hopper(tmp_path, capsys):
    """--hold runs the best shape back to back, as gpu-fryer does, and reports its last quarter's rate
    over the short measurement; on a CPU (no Hopper) the ratio is reported, not claimed as
    hopper_sustained; a results file that does claim it sets the planner's constant."""
    printed = _run(capsys, "--json", "--hold", "0.2")
    held = printed["held"]
    assert held["shape"] == printed["best"]["shape"] and held["seconds"] == 0.2 and held["tflops"] > 0
    # each field is rounded to 4 significant digits: the ratio of two rounded rates agrees within 2e-3
    assert held["over_short"] == pytest.approx(held["tflops"] / printed["best"]["tflops"], rel=2e-3)
    assert "hopper_sustained" not in printed["efficiency"] and "blackwell_sustained" not in printed["efficiency"]
    assert _run(capsys, "--json")["held"] is None                      # off by default
    claimed = tmp_path / "held.json"
    claimed.write_text(json.dumps({"benchmark": "gemm", "efficiency": {"hopper_sustained": 0.9},
                                   "provenance": {"device": "NVIDIA H100 80GB HBM3"}}))
    eff = Efficiency.from_results(claimed)
    assert eff.hopper_sustained == 0.9 and eff.measured == ["hopper_sustained"]


def test_fp8_times_each_square_fast_and_split_and_claims_only_what_its_peak_and_gpu_allow(tmp_path, capsys):
    """--fp8 times E4M3 products of each square with fast accumulation (Transformer Engine's forward) and split
    (its backward).  A CPU knows no FP8 peak: nothing claimed.  Given one, the best fast square's fraction is
    fp8_gemm, which the planner takes from the file; the split-over-fast ratio is claimed on a Hopper only."""
    plain = _run(capsys, "--json", "--fp8")["fp8"]
    assert [r["shape"] for r in plain["rows"]] == ["square 32", "square 48"]
    for r in plain["rows"]:
        assert r["fast_tflops"] > 0 and r["split_tflops"] > 0 and r["split_over_fast"] > 0
    assert plain["efficiency"] == {} and plain["peak_tflops"] is None and "no FP8 peak" in plain["note"]
    out = tmp_path / "fp8.json"
    printed = _run(capsys, "--json", "--fp8", "--peak-fp8-tflops", "0.001", "--out", str(out))
    fp8 = printed["fp8"]
    best = next(r for r in fp8["rows"] if r["shape"] == fp8["best"])
    assert best["fast_tflops"] == max(r["fast_tflops"] for r in fp8["rows"])
    assert printed["efficiency"] == {"fp8_gemm": pytest.approx(best["fast_tflops"] / 0.001, rel=1e-3)}
    assert "not claimed" in fp8["note"]                                   # a CPU is no Hopper
    eff = Efficiency.from_results(out)
    assert eff.fp8_gemm == printed["efficiency"]["fp8_gemm"] and eff.measured == ["fp8_gemm"]
    assert _run(capsys, "--json")["fp8"] is None                          # off by default


def test_on_a_hopper_fp8_split_over_fast_is_the_measured_split_accumulation(monkeypatch, capsys):
    from playground import hardware
    from playground.bench import gemm
    monkeypatch.setattr(gemm, "_peak", lambda device: hardware.gpu("H100"))   # as if the run found an H100
    printed = _run(capsys, "--json", "--fp8")
    fp8 = printed["fp8"]
    best = next(r for r in fp8["rows"] if r["shape"] == fp8["best"])
    assert fp8["peak_source"] == "hardware table: H100 dense FP8"
    assert printed["efficiency"]["fp8_split_accumulation"] == best["split_over_fast"]
    low, high = printed["efficiency_spread"]["fp8_split_accumulation"]
    assert low <= best["split_over_fast"] <= high and "fp8_gemm" in printed["efficiency"]


def test_help_explains_every_option(capsys):
    assert bench_main(["gemm", "--help"]) == 0
    text = capsys.readouterr().out
    for flag in ("--model", "--tp", "--micro-batch", "--tokens", "--sizes", "--repeats", "--warmup", "--hold",
                 "--device", "--peak-tflops", "--fp8", "--peak-fp8-tflops", "--out", "--json", "--save"):
        assert flag in text
    assert "fp32" in text and "bf16" in text                        # it says which precision runs where


@pytest.mark.parametrize("bad", [["--tp", "0"], ["--tp", "3"], ["--tp", "x"], ["--sizes", "0"],
                                 ["--repeats", "0"], ["--warmup", "-1"], ["--tokens", "0"],
                                 ["--peak-tflops", "-1"], ["--hold", "-1"], ["--hold", "nan"],
                                 ["--peak-fp8-tflops", "0"], ["--fp8", "--sizes", "40"],
                                 ["--model", "gpt-5"], ["--device", "tpu"]])
def test_bad_input_is_one_line_and_exit_2(bad, capsys):
    assert bench_main(["gemm", *bad]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error:") and captured.err.count("\n") == 1
