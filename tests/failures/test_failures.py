"""Chapter 7's claims: checkpoints reshard exactly, a restart loses at most one interval, a straggler
sets the pace, a hang is located, and the checkpoint interval Young derived is the best one."""

import math
import tempfile

import pytest
import torch

from playground.failures import (CHECKPOINT_CFG, launch_hang, launch_mismatch, launch_reshard, launch_straggler,
                                 launch_torchrun, lost_steps, odd_one_out, predicted_bytes, read_log, shard_rows)
from playground.planner.goodput import expected_goodput, simulate_goodput, young_interval


def test_dcp_reshard_4_to_2_ranks_restores_the_state_bitwise_and_continues_the_run():
    with tempfile.TemporaryDirectory() as d:
        r = launch_reshard(d, steps=4, save_at=2)
    assert set(r["loaded_state"]) == set(r["saved_state"])
    for name, tensor in r["saved_state"].items():
        torch.testing.assert_close(r["loaded_state"][name], tensor, rtol=0, atol=0, msg=name)
    assert r["resumed_same"] == r["uninterrupted"][2:]                      # same ranks: bitwise
    torch.testing.assert_close(r["resumed_resharded"], r["uninterrupted"][2:], rtol=1e-6, atol=0)
    assert r["async_equal"] == [True] * 4


def test_dcp_reshard_each_rank_writes_its_shard_of_12_bytes_per_parameter():
    assert [shard_rows(10, r, 4) for r in range(4)] == [3, 3, 3, 1]
    assert [shard_rows(2, r, 4) for r in range(4)] == [1, 1, 0, 0]
    evenly = 12 * CHECKPOINT_CFG.param_count() // 4
    assert [predicted_bytes(CHECKPOINT_CFG, r, 4) for r in range(4)] == [evenly] * 4


def test_restart_under_torchrun_redoes_only_the_steps_since_the_last_checkpoint():
    with tempfile.TemporaryDirectory() as d:
        out = launch_torchrun(d, steps=6, interval=3, fail_step=4)
        assert out.returncode == 0, out.stderr[-2000:]
        log = read_log(d)
    assert lost_steps(log) == [3]                       # failed at 4, last checkpoint after step 2
    assert [s for a, s, _ in log if a == 1] == [3, 4, 5]
    first = {s: loss for a, s, loss in log if a == 0}
    assert all(first[s] == loss for a, s, loss in log if a == 1 and s in first)   # redone bitwise


def test_straggler_sets_every_ranks_step_time():
    delay = 0.2
    times = launch_straggler(world_size=3, slow_rank=1, delay_s=delay, steps=3)
    assert all(t["straggler"] >= 0.9 * delay for t in times)
    with pytest.raises(ValueError, match="slow_rank"):
        launch_straggler(world_size=3, slow_rank=3)


def test_hang_mismatched_collectives_are_named_by_detail_and_located_by_the_launcher():
    plain = launch_mismatch(detail=False, timeout_s=1.0)
    # the first rank to give up times out; its peer times out too, or sees the connection it closed
    assert any("Timed out" in e for e in plain)
    assert all("Timed out" in e or "Connection closed" in e for e in plain)
    detail = launch_mismatch(detail=True)
    assert all("Detected mismatch between collectives" in e and "BROADCAST" in e for e in detail)
    error = launch_hang(world_size=3, culprit=2, timeout_s=3.0)
    assert odd_one_out(error.where) == [2] and error.where[2].startswith("broadcast")
    assert error.where[0].startswith("all_reduce") and "rank 2 waits in broadcast" in str(error)


def test_goodput_simulation_is_best_near_youngs_interval():
    c, r, m = 60.0, 300.0, 3 * 3600.0
    best = young_interval(c, m)
    sweep = {f: simulate_goodput(f * best, c, r, m, work_s=2000 * m, seed=1)["goodput"] for f in (0.25, 1, 4)}
    assert sweep[1] > sweep[0.25] and sweep[1] > sweep[4]
    assert math.isclose(sweep[1], expected_goodput(best, c, r, m), rel_tol=0.01)
