"""The MoE layer measured on an H200 (results/moe-nvidia-h200*.json), read back: what chapter 6 says of it."""

import pytest

from playground import results
from playground.bench.moe import GRAPHED, eager_bytes, summary
from playground.planner.costs import EAGER_MOE_ACT_BYTES, EAGER_MOE_ROW_BYTES

RECORDS = [r for r in results.on_record("moe") if r["provenance"]["device_count"]]
FULL = [r for r in RECORDS if len(r["rows"]) > 1]


def test_a_gpu_record_of_every_published_shape_is_kept():
    assert FULL, "scripts/gpu_check.sh on a GPU writes one; the H200 runs of 2026-12-04 were kept"
    assert {r["shape"] for r in FULL[0]["rows"]} == {"qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3",
                                                      "gpt-oss-120b", "mixtral-8x7b"}


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: f"{r['rows'][0]['tokens']} tokens")
def test_every_dropless_path_computed_what_the_grouped_one_did(record):
    for row in record["rows"]:
        for path in ("grouped_sync", "loop_sync"):
            assert row["paths"][path]["agrees_with_grouped"] is True


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: f"{r['rows'][0]['tokens']} tokens")
def test_the_expert_gemms_run_at_the_models_roofline_and_the_rest_at_five_to_six_times_its_price(record):
    for row in summary(record):
        assert 0.95 <= row["gemm_over_model"] <= 1.3, row
        assert 4.5 <= row["other_over_model"] <= 6.5, row


def test_a_host_sync_costs_little_launching_expert_by_expert_costs_much_with_many_small_experts():
    rows = {r["shape"]: r for r in summary(FULL[0])}
    assert all(r["grouped_sync_over_grouped"] <= 1.1 for r in rows.values())
    assert rows["qwen3-30b-a3b"]["loop_sync_over_grouped"] >= 3       # 16 local experts, 2,048 rows each
    assert all(r["loop_sync_over_grouped"] <= 1.25 for r in rows.values() if r["local_experts"] <= 4)
    assert all(0.85 <= r[f"{GRAPHED}_over_grouped"] <= 1.0 for r in rows.values())


def test_the_eager_bytes_the_model_charges_are_the_ones_measured():
    row_bytes, act_bytes = eager_bytes(FULL[0])
    assert row_bytes == pytest.approx(EAGER_MOE_ROW_BYTES, rel=0.05)
    assert act_bytes == pytest.approx(EAGER_MOE_ACT_BYTES, rel=0.05)


def test_the_planners_moe_warning_quotes_the_record():
    from playground.planner.step_range import _KINDS, MOE_MANY
    why = next(w for kind, _, w in _KINDS if kind == MOE_MANY)
    row = next(r for r in summary(FULL[0]) if r["shape"] == "qwen3-30b-a3b")
    assert f"{row['loop_sync_over_grouped']:.1f}x slower" in why and f"{row['grouped_sync_over_grouped']:.2f}x" in why


def test_the_two_eager_byte_counts_reproduce_every_shape_and_the_run_left_out_of_the_fit():
    from playground.bench.moe import eager_bytes_fit
    fit = eager_bytes(FULL[0])
    assert all(abs(v - 1) <= 0.04 for v in eager_bytes_fit(FULL[0], *fit).values())
    left_out = [r for r in RECORDS if r is not FULL[0]]
    assert left_out and all(abs(v - 1) <= 0.09 for r in left_out for v in eager_bytes_fit(r, *fit).values())


def test_the_host_launches_the_model_prices_are_the_ones_measured():
    from playground.bench.moe import launch_fit
    from playground.planner.costs import MOE_EXPERT_KERNELS, MOE_LAYER_KERNELS
    from playground.planner.layout import EFFICIENCY
    fit = launch_fit(RECORDS)
    assert fit["layer_kernels"] == pytest.approx(MOE_LAYER_KERNELS, abs=1)
    assert fit["expert_kernels"] == pytest.approx(MOE_EXPERT_KERNELS, abs=0.5)
    assert fit["host_us_per_kernel"] == pytest.approx(EFFICIENCY.host_kernel_s * 1e6, rel=0.03)
    low, high = EFFICIENCY.spread["host_kernel_s"]
    assert (low * 1e6, high * 1e6) == pytest.approx(fit["host_us_range"], abs=0.05)


def test_the_device_idles_about_the_priced_launch_gap_between_eager_kernels_and_less_from_a_graph():
    """Wall time less the traced kernels' busy time, over their count: the gap each kernel costs the device,
    which the model charges as ``kernel_s`` (inside its sourced spread eager, with or without the host sync)
    and, replayed from a CUDA graph, as ``graph_kernel_s``, about a microsecond."""
    from playground.bench.moe import GRAPHED, launch_fit
    from playground.planner.layout import EFFICIENCY
    gap, (low, high) = launch_fit(RECORDS)["gap_us"], EFFICIENCY.spread["kernel_s"]
    assert low * 1e6 <= gap["grouped"] < gap["grouped_sync"] <= high * 1e6
    assert gap[GRAPHED] < low * 1e6 / 2
    assert gap[GRAPHED] == pytest.approx(EFFICIENCY.graph_kernel_s * 1e6, abs=0.05)
    g_low, g_high = EFFICIENCY.spread["graph_kernel_s"]
    assert g_low * 1e6 <= gap[GRAPHED] <= g_high * 1e6


def test_a_layer_takes_about_the_longer_of_its_device_work_and_its_launching_unless_the_two_take_turns():
    """eq-moe-host's floor, from each eager layer's measured device time and host time: within about a fifth
    of the layer's time, except the one layer where the two are nearly equal (16 experts apart at 8,192 tokens)."""
    from playground.bench.moe import launch_fit
    floor = launch_fit(RECORDS)["floor_over_measured"]
    close = [f for f in floor if 0.8 <= f[3] <= 1.2]
    assert [f[:3] for f in floor if f not in close] == [("qwen3-30b-a3b", 8192, "loop_sync")]
