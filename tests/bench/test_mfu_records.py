"""The MFU runs on record, read back: their FLOP counts and the step-time model's prediction of them."""

import pytest

from playground import results
from playground.bench.mfu import formula_over_counted_expected, predicted

RECORDS = results.on_record("mfu")
GPU_RECORDS = [r for r in RECORDS if r["provenance"]["device_count"] and r["gpu_in_table"]]


def _name(record):
    m = record["model"]
    return f"{record['provenance']['device']}, {m['batch']} x {m['seq_len']} tokens"


@pytest.mark.parametrize("record", RECORDS, ids=_name)
def test_the_flop_formula_differs_from_pytorchs_count_by_the_attention_it_sees(record):
    """eq-megatron against PyTorch's FLOP counter on the same step: a CPU's counter misses the fused
    attention, a GPU's counts FlashAttention's backward as 2.5 forwards (the scores computed again)."""
    expected = formula_over_counted_expected(record["model"], record["device_type"])
    assert record["formula_over_counted"] == pytest.approx(expected, abs=1e-3)


def test_a_gpu_run_is_on_record():
    assert GPU_RECORDS, "scripts/gpu_check.sh on a GPU adds one; the H200 runs of 2026-12-04 were kept"


@pytest.mark.parametrize("record", GPU_RECORDS, ids=_name)
def test_the_step_time_model_brackets_each_gpu_run_on_record(record):
    """The bench's steps, timed on a GPU, against the step-time model told only the run's shape and
    setup (one GPU, eager kernels, the cuDNN attention SDPA ran): inside the reported range, within ±20%."""
    p = predicted(record)
    low, high = p["step_time_range_s"]
    assert low <= record["median_step_s"] <= high
    assert p["step_time_s"] / record["median_step_s"] == pytest.approx(1, abs=0.2)
