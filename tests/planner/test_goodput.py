"""Goodput: Young's and Daly's checkpoint intervals, the first-order goodput formula against a
simulation of failures, and the failure budget the capacity plan reports."""

import math

import pytest

from playground import planner as cp
from playground.planner import daly_interval, expected_goodput, simulate_goodput, young_interval
from playground.planner.goodput import first_order_goodput
from playground.planner.goodput import LLAMA3_GPU_MTBF_HOURS


def test_young_interval_is_the_square_root_of_twice_checkpoint_times_mtbf():
    assert young_interval(60, 3 * 3600) == pytest.approx(math.sqrt(2 * 60 * 3 * 3600))


def test_daly_agrees_with_young_when_checkpoints_are_cheap_and_shortens_it_when_not():
    m = 3 * 3600
    assert daly_interval(1, m) == pytest.approx(young_interval(1, m), rel=0.01)
    assert daly_interval(600, m) < young_interval(600, m) * 1.1
    assert daly_interval(3 * m, m) == m  # checkpointing costs more than the MTBF: once per MTBF


def test_the_best_interval_maximises_the_goodput_and_the_first_order_form_is_its_expansion():
    c, r, m = 30.0, 600.0, 3 * 3600.0
    best = daly_interval(c, m)
    g = lambda tau: expected_goodput(tau, c, r, m)  # noqa: E731
    assert g(best) > g(best / 2) and g(best) > g(2 * best)
    grid = max((g(best * f), f) for f in [0.5 + 0.01 * i for i in range(100)])
    assert grid[1] == pytest.approx(1.0, abs=0.1)   # Daly's interval sits at the exact optimum, within 10%
    assert first_order_goodput(best, c, r, m) == pytest.approx(1 / (1 + c / best + (r + (best + c) / 2) / m))
    assert first_order_goodput(60, 1, 0, 1e6) == pytest.approx(expected_goodput(60, 1, 0, 1e6), rel=1e-4)


@pytest.mark.parametrize("c,tau", [(30.0, None), (120.0, None), (30.0, 3600.0)])
def test_simulated_failures_give_the_goodput_the_formula_predicts(c, tau):
    """Poisson failures, one per 3 hours, 10-minute restarts, 2,000 hours of training."""
    m, r = 3 * 3600.0, 600.0
    tau = tau or daly_interval(c, m)
    sim = simulate_goodput(tau, c, r, m, work_s=2000 * 3600, seed=1)
    assert sim["goodput"] == pytest.approx(expected_goodput(tau, c, r, m), abs=0.01)
    assert first_order_goodput(tau, c, r, m) >= expected_goodput(tau, c, r, m)  # it misses repeated failures
    assert sim["failures"] == pytest.approx(sim["wall_s"] / m, rel=0.1)


def test_llama3_failure_rate_is_about_fifty_thousand_gpu_hours():
    """419 unexpected interruptions in 54 days on 16,384 GPUs (Dubey et al. 2024, Table 5)."""
    assert LLAMA3_GPU_MTBF_HOURS == pytest.approx(54 * 24 / 419 * 16384) and 50_000 < LLAMA3_GPU_MTBF_HOURS < 51_000


def test_the_plan_reports_interruptions_best_interval_goodput_and_effective_days():
    p = cp.plan(model="llama3-405b", tokens=15.6e12, gpus=16384, tp=8, pp=16, global_batch_tokens=2 ** 24,
                gpu_mtbf_hours=LLAMA3_GPU_MTBF_HOURS, checkpoint_gbs=2000)
    g = p["goodput"]
    assert g["job_mtbf_s"] == pytest.approx(54 * 86400 / 419)
    assert g["checkpoint_s"] == pytest.approx(14 * p["params"] / 2e12)
    assert g["effective_days"] == pytest.approx(p["days"] / g["goodput"])
    assert g["expected_interruptions"] == pytest.approx(g["wall_s"] / g["job_mtbf_s"])
    assert 0.85 < g["goodput"] < 0.99  # Llama 3: "more than 90% effective training time"
    bf16 = cp.plan(model="llama3-405b", tokens=15.6e12, gpus=16384, tp=8, pp=16, global_batch_tokens=2 ** 24,
                   gpu_mtbf_hours=LLAMA3_GPU_MTBF_HOURS, checkpoint_gbs=2000, optimizer_moments="bf16")
    assert bf16["goodput"]["checkpoint_s"] == pytest.approx(10 * p["params"] / 2e12)   # bf16 moments: 2 + 4 + 2 + 2


def test_failure_flags_need_gpus_and_positive_numbers(capsys):
    assert cp.main(["--model", "llama3-8b", "--tokens", "1T", "--gpu-mtbf-hours", "50000"]) == 2
    assert "needs --gpus" in capsys.readouterr().err
    assert cp.main(["--model", "llama3-8b", "--tokens", "1T", "--gpus", "8", "--gpu-mtbf-hours", "-1"]) == 2
    assert "--gpu-mtbf-hours must be a positive" in capsys.readouterr().err
    assert cp.main(["--model", "llama3-8b", "--tokens", "1T", "--gpus", "8", "--tp", "1", "--gpu-mtbf-hours", "50000",
                    "--restart-minutes", "0"]) == 0
    assert "goodput" in capsys.readouterr().out
