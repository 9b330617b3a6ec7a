"""ZeRO-3's peak memory: the allocator's peak (playground.memory.PeakMemory) is exact on known
allocations, and a real ZeRO-3 step rises above its steady state by at least the transients the
accounting names (gathered units, gradient buffers, the update's fp32 gradient copy)."""

import pytest
import torch

from playground.memory import PeakMemory
from playground.zero import unit_numels
from playground.zero.peak_runs import PEAK_CFG, activations, launch_peak, predicted_peak
from playground.zero.reference import reference_parameters


def test_peak_memory_counts_allocations_frees_and_resizes():
    with PeakMemory() as peak:
        a = torch.ones(250_000)           # 1 MB
        b = torch.ones(250_000)           # 2 MB held
        del a                             # 1 MB
        c = torch.ones(500_000)           # 3 MB: the peak
        del c
        storage = b.untyped_storage()
        storage.resize_(0)                # ZeroDP's free: 0 MB
        storage.resize_(2_000_000)        # ZeroDP's re-gather into the same storage: 2 MB
    assert (peak.bytes, peak.net_bytes) == (3_000_000, 2_000_000)


@pytest.fixture(scope="module")
def runs():
    return launch_peak(2, micro_batch=1, steps=2)


def test_zero3_peak_rises_above_steady_state_by_the_accounted_transients(runs):
    numels, n = unit_numels(PEAK_CFG), 2
    acts = activations(PEAK_CFG, 1)
    psi = PEAK_CFG.param_count()
    for result in runs:
        for prefetch in (False, True):
            got = result[prefetch]
            terms = predicted_peak(numels, n, prefetch, acts)
            # between steps a rank holds parameter shards, masters and moments: 14 Psi / n bytes
            assert got["start_bytes"] == 14 * psi // n
            # forward + backward: at least this unit gathered (+ the next) and its gradient
            # buffers; at most the accounted bound plus one unit for gloo's staging copy
            assert terms["gathered"] + terms["grad_buffers"] <= got["passes_rise"]
            assert got["passes_rise"] <= terms["passes"] + 2 * max(numels)
            # the update: at least the gradient shards and their fp32 copy
            assert got["update_rise"] >= terms["update"]
    ref, _ = reference_parameters(PEAK_CFG, "mixed", n_micro=n, steps=2, batch_size=n)
    for prefetch in (False, True):  # measuring changes nothing: still the reference, bitwise
        assert torch.equal(runs[0][prefetch]["params"], ref)


def test_launch_peak_rejects_bad_input():
    with pytest.raises(ValueError, match="steps"):
        launch_peak(2, steps=1)
    with pytest.raises(ValueError, match="micro_batch"):
        launch_peak(2, micro_batch=0)
    with pytest.raises(ValueError, match="precision"):
        launch_peak(2, precision="fp16")
