"""Transformer Engine's own GEMM benchmark against the step-time model: the GEMM rates it measured where no
constant was taken from it, and the FP8 casts' time against the bytes the model charges them."""

from dataclasses import replace

import pytest

from playground.planner.efficiency import EFFICIENCY
from playground.planner.published_te_gemms import TE_TOKENS, te_cast_times, te_gemm_rates, te_gemm_shapes


def test_the_tool_times_a_layers_twelve_gemms_forward_and_both_gradients():
    shapes = te_gemm_shapes()
    assert len(shapes) == 12 and TE_TOKENS == 15872
    assert shapes[0] == (15872, 4096, 12288) and shapes[4] == (15872, 12288, 4096) and shapes[8] == (4096, 15872, 12288)
    # every pass of a layer multiplies the same 6.39 TFLOP
    passes = [sum(2 * M * K * N for M, K, N in shapes[i:i + 4]) for i in (0, 4, 8)]
    assert passes[0] == passes[1] == passes[2] == pytest.approx(6.39e12, rel=1e-3)


def test_gemm_rates_the_benchmark_did_not_set_agree_with_the_model_within_a_twentieth():
    rows = te_gemm_rates()
    checks = [r for r in rows if not r["sets"]]
    assert {(r["part"], r["precision"]) for r in checks} == {("B300", "bf16"), ("H200 NVL", "bf16"),
                                                             ("H200 NVL", "tensor")}
    assert all(abs(r["model"] / r["measured"] - 1) < 0.05 for r in checks)
    # the Blackwell FP8 readings are where blackwell_fp8 and blackwell_mxfp8 come from: equal by construction
    for r in (r for r in rows if r["sets"]):
        assert r["model"] == pytest.approx(r["measured"], abs=1e-3)


def test_the_casts_bytes_price_tensor_scaling_within_an_eighth_and_overprice_delayed_scaling():
    rows = {(r["part"], r["scaling"]): r for r in te_cast_times()}
    ratio = {k: r["model_ms"] / r["measured_ms"] for k, r in rows.items()}
    assert abs(ratio["B300", "tensor"] - 1) < 0.01 and abs(ratio["H200 NVL", "tensor"] - 1) < 0.125
    assert 0.8 < ratio["B300", "block"] < 1          # MXFP8's casts cost a little more than 4 B an element
    assert ratio["B300", "delayed"] > 1.5 and ratio["H200 NVL", "delayed"] > 1.1
    # the model's bytes move with its HBM constant
    slow = te_cast_times(replace(EFFICIENCY, hbm=EFFICIENCY.hbm / 2))
    assert slow[0]["model_ms"] == pytest.approx(2 * rows["B300", "tensor"]["model_ms"])
