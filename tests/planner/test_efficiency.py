"""The step-time model's efficiency constants: each traced to a source with a spread around it, and
measured values taken from a benchmark results file (`--efficiency FILE`), which the report names."""

import json

import pytest

from playground.capacity_plan import main as capacity_main
from playground.planner.errors import PlanError
from playground.planner.layout import EFFICIENCY, MEASURED, Efficiency
from playground.step_time import main as step_time_main

CONSTANTS = ("gemm", "fp8_gemm", "hopper_sustained", "power_exponent", "comm_sms", "attention_fa1", "attention_fa2",
             "attention_fa2_hopper", "attention_fa3", "hbm", "link", "kernel_s", "latency_s", "tile", "optimizer_bytes")
STEP = ["--model", "llama3-8b", "--gpu", "H100", "--gpus", "8", "--tp", "2"]
PLAN = ["--model", "llama3-8b", "--tokens", "1T", "--gpu", "H100", "--gpus", "64", "--tp", "1", "--pp", "1"]


def _results(tmp_path, efficiency, **extra):
    path = tmp_path / "gemm-h200.json"
    path.write_text(json.dumps({"benchmark": "gemm", "efficiency": efficiency, **extra,
                                "provenance": {"device": "NVIDIA H200", "torch": "2.13.0", "date": "2026-12-01"}}))
    return path


def test_every_constant_has_a_source_and_a_spread_around_its_unchanged_default():
    assert (EFFICIENCY.gemm, EFFICIENCY.hbm, EFFICIENCY.link, EFFICIENCY.kernel_s, EFFICIENCY.latency_s,
            EFFICIENCY.tile, EFFICIENCY.optimizer_bytes) == (0.80, 0.80, 0.80, 5e-6, 10e-6, (256, 128), 30)
    assert (EFFICIENCY.fp8_gemm, EFFICIENCY.power_exponent, EFFICIENCY.comm_sms) == (0.70, 0.87, 16)
    assert EFFICIENCY.hopper_sustained == 0.915
    for name in CONSTANTS:
        source = EFFICIENCY.sources[name]
        assert "https://" in source or source.startswith(("accounted", "assumed")), name
        low, high = EFFICIENCY.spread[name]
        assert low <= getattr(EFFICIENCY, name) <= high, name
    assert EFFICIENCY.measured == [] and set(MEASURED) <= set(CONSTANTS)


def test_a_results_file_gives_its_measured_constants_and_names_itself(tmp_path):
    path = _results(tmp_path, {"gemm": 0.72}, efficiency_spread={"gemm": [0.70, 0.73]}, note="best of 9 shapes")
    eff = Efficiency.from_results(path)
    assert eff.gemm == 0.72 and eff.measured == ["gemm"]
    assert eff.spread["gemm"] == (0.70, 0.73)
    assert eff.sources["gemm"].startswith(f"measured: {path} (gemm on NVIDIA H200, torch 2.13.0, 2026-12-01")
    for name in CONSTANTS[1:]:                                # everything else stays as sourced
        assert getattr(eff, name) == getattr(EFFICIENCY, name)
        assert eff.sources[name] == EFFICIENCY.sources[name] and eff.spread[name] == EFFICIENCY.spread[name]
    assert eff == Efficiency(gemm=0.72)


@pytest.mark.parametrize("content, says", [
    (None, "cannot read"), ("not json", "cannot read"), ({"rows": []}, "'efficiency' block"),
    ({"efficiency": {}}, "measured no efficiency"), ({"efficiency": {"tflops": 1}}, "not an efficiency"),
    ({"efficiency": {"gemm": -0.5}}, "positive"), ({"efficiency": {"gemm": "high"}}, "positive")])
def test_a_file_that_measured_nothing_usable_is_one_clear_error(tmp_path, content, says):
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(PlanError, match=says):
        Efficiency.from_results(path)


def test_the_step_time_report_names_the_file_only_when_given(tmp_path, capsys):
    path = _results(tmp_path, {"gemm": 0.6})
    assert step_time_main(STEP) == 0
    plain = capsys.readouterr().out
    assert step_time_main([*STEP, "--efficiency", str(path)]) == 0
    measured = capsys.readouterr().out
    assert "efficiency" not in plain and measured.startswith(plain.splitlines()[0].split("  ")[0])
    line = f"efficiency gemm 0.6 measured, from {path}; the other constants: the defaults"
    assert measured.splitlines()[-1] == line and line not in plain
    assert step_time_main([*STEP, "--json"]) == 0
    assert "efficiency_from" not in json.loads(capsys.readouterr().out)
    assert step_time_main([*STEP, "--json", "--efficiency", str(path)]) == 0
    slower = json.loads(capsys.readouterr().out)
    assert slower["efficiency_from"] == {"path": str(path), "constants": {"gemm": 0.6}}
    assert step_time_main([*STEP, "--json"]) == 0                # the defaults are back afterwards
    nominal = json.loads(capsys.readouterr().out)
    assert slower["step_time_s"] > nominal["step_time_s"]     # GEMMs at 0.6 of peak, not 0.8: slower


def test_the_capacity_plan_uses_and_names_the_file_only_when_given(tmp_path, capsys):
    path = _results(tmp_path, {"gemm": 0.6})
    assert capacity_main(PLAN) == 0
    plain = capsys.readouterr().out
    assert capacity_main([*PLAN, "--efficiency", str(path)]) == 0
    measured = capsys.readouterr().out
    assert "efficiency gemm 0.6 measured" in measured and "efficiency " not in plain
    assert capacity_main([*PLAN, "--efficiency", str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
