"""The planner's ZB-H1 schedule: chapter 2's zero-bubble pipeline, priced, at 1F1B's memory, and held to
the speedups Qi et al. measured."""

from dataclasses import replace

import pytest

from playground.pipeline_parallel.schedules import WEIGHT_SHARE, simulate
from playground.planner import Cluster, Layout, PlanError, preset
from playground.planner.memory import memory_per_gpu
from playground.planner.published_zero_bubble import ZERO_BUBBLE_MEASURED, zero_bubble_ab
from playground.planner.step_time import predict

MODEL, H100 = preset("llama3-8b"), Cluster.of("H100")
ONE_F_ONE_B = Layout.today(1, 4, 2, global_batch=32)          # 4 stages, 16 micro-batches
ZB_H1 = replace(ONE_F_ONE_B, pp_schedule="zb-h1")


def _idle(timeline, work: float) -> float:
    return max(event[3] for stage in timeline for event in stage) - work


def test_the_planners_bubbles_are_chapter_2s_simulated_schedules():
    """Feed chapter 2's event simulation the planner's own forward, input-gradient and weight-gradient times:
    its 1F1B and ZB-H1 timelines idle exactly the bubbles the planner charges."""
    one, zb = predict(MODEL, H100, ONE_F_ONE_B), predict(MODEL, H100, ZB_H1)
    p, m = 4, ONE_F_ONE_B.micro_batches
    per_mb = one["time_breakdown"]["bubble"] / (p - 1)                      # (p - 1)(F + B + W)
    t_w = (per_mb - zb["time_breakdown"]["bubble"] / (p - 1)) / 2          # (p - 1)(F + B - W)
    t_b = t_w / WEIGHT_SHARE                                               # the whole backward, B + W
    assert 0 < t_w <= min(per_mb - t_b, t_b - t_w)                         # where the formula holds
    for schedule, r in (("1f1b", one), ("zb", zb)):
        assert _idle(simulate(schedule, p, m, per_mb - t_b, t_b), m * per_mb) == pytest.approx(
            r["time_breakdown"]["bubble"], rel=1e-9)
    assert zb["bubble_fraction"] < one["bubble_fraction"] == (p - 1) / m
    assert zb["step_time_s"] < one["step_time_s"]


def test_zb_h1_holds_what_1f1b_holds():
    assert memory_per_gpu(MODEL, ZB_H1, H100.gpu)["total"] == memory_per_gpu(MODEL, ONE_F_ONE_B, H100.gpu)["total"]


def test_zb_h1_runs_one_chunk_a_stage_and_needs_a_micro_batch_for_every_stage():
    with pytest.raises(PlanError, match="ZB-H1 schedule runs one chunk a stage"):
        predict(MODEL, H100, replace(ZB_H1, vpp=2))
    with pytest.raises(PlanError, match="at least as many micro-batches as stages"):
        predict(MODEL, H100, replace(ZB_H1, global_batch=4))
    with pytest.raises(PlanError, match="pp_schedule must be one of"):
        predict(MODEL, H100, replace(ZB_H1, pp_schedule="zbv"))
    assert "ZB-H1 schedule" in ZB_H1.describe()


def test_zb_h1_speeds_up_1f1b_as_qi_et_al_measured():
    """Qi et al.'s Table 4, twelve settings on 8 to 32 A100s: ZB-1p (ZB-H1's bubble, their Table 5) over 1F1B
    measured 1.04-1.15x; the planner predicts each within 0.04, and the order: the gain shrinks as the
    micro-batches grow, and the deeper pipelines gain more."""
    rows = zero_bubble_ab()
    assert len(rows) == 12 == len(ZERO_BUBBLE_MEASURED["zb-1p"])
    for r in rows:
        assert r["predicted_speedup"] == pytest.approx(r["measured_speedup"], abs=0.04), r
        assert r["bubble_zb"] < r["bubble_1f1b"]
    for model in ("1.5B", "6.2B", "14.6B", "28.3B"):
        gains = [r["predicted_speedup"] for r in rows if r["model"] == model]
        assert gains == sorted(gains, reverse=True)
    assert all(0.85 < r[f"predicted_{k}"] / r[f"measured_{k}"] < 1.2 for r in rows for k in ("1f1b", "zb"))
