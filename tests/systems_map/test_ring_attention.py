"""Ring attention (context parallelism): the spec.

Every rank's output block and its q, k, v gradient blocks equal full single-process attention
(``assert_close`` inside the ranks, against a from-scratch s x s reference and PyTorch's SDPA);
bytes sent are exactly the formula; bytes saved for backward are exactly the formula; the ring
follows the schedule the chapter draws.
"""

import pytest
import torch

from playground.systems_map import ring_attention as ra
from playground.systems_map import ring_attention_runs as ra_runs
from playground.launch import RankFailedError, run

CASES = [
    dict(batch=2, heads=3, seq_len=24, head_dim=5, causal=True, dtype="float64", seed=1),
    dict(batch=2, heads=3, seq_len=24, head_dim=5, causal=False, dtype="float64", seed=2),
    dict(batch=1, heads=2, seq_len=48, head_dim=8, causal=True, dtype="float32", seed=3),
    dict(batch=1, heads=2, seq_len=12, head_dim=4, causal=True, dtype="bfloat16", seed=4),
    # batch = heads = 1: a rank's block is a contiguous slice, yet it must hold only its own bytes
    dict(batch=1, heads=1, seq_len=12, head_dim=4, causal=False, dtype="float64", seed=5),
    dict(batch=2, heads=2, seq_len=24, head_dim=8, causal=True, dtype="float16", seed=6),
]


def _check_formulas(values, n, cases=CASES):
    for c, case in enumerate(cases):
        shape = (case["batch"], case["heads"], case["seq_len"], case["head_dim"])
        dtype = getattr(torch, case["dtype"])
        pred = ra.predicted_bytes(*shape, n, dtype)
        for rank, per_rank in enumerate(values):
            got = per_rank[c]
            assert got["forward"]["sent_bytes"] == pred["forward"] == got["forward"]["received_bytes"]
            assert got["backward"]["sent_bytes"] == pred["backward"] == got["backward"]["received_bytes"]
            assert got["saved_bytes"] == ra.predicted_saved_bytes(*shape, n, dtype)
            assert got["computed_blocks"] == ra.predicted_blocks(n, case["causal"])[rank]
        recorded = sorted((s for v in values for s in v[c]["schedule"]),
                          key=lambda s: (s["rank"], s["step"]))
        assert recorded == ra.ring_schedule(n, case["causal"])


@pytest.mark.parametrize("world_size", [3, 4])
def test_equals_full_attention_and_formulas(world_size):
    values = run(ra_runs.check_ring_attention, world_size, CASES, quiet=True)
    _check_formulas(values, world_size)
    for c in range(len(CASES)):  # the chapter's table says so too
        assert ra_runs.layer_report([v[c] for v in values])[1]


@pytest.mark.parametrize("causal", [True, False])
def test_textbook_attention_keeps_the_s_by_s_probabilities(causal):
    """One process: textbook attention keeps b·a·s² probabilities (+ an s² bool mask when
    causal) and q, k, v; ring attention with one block keeps n times one rank's share."""
    case = dict(batch=1, heads=2, seq_len=32, head_dim=8, causal=causal, dtype="float32", seed=0)
    per_rank = ra.predicted_saved_bytes(1, 2, 32, 8, 4)
    assert ra.predicted_naive_saved_bytes(1, 2, 32, 8, causal) == \
        2 * 32 * 32 * 4 + (32 * 32 if causal else 0) + 3 * 2 * 32 * 8 * 4
    assert ra_runs.memory_report(case, per_rank, 4)[1]
    assert not ra_runs.memory_report(case, per_rank + 4, 4)[1]  # a wrong count is caught


def test_rings_on_subgroups_are_independent():
    """Two rings of 2 inside 4 ranks (a CP group within a grid) each equal full attention."""
    values = run(ra_runs.check_ring_attention, 4, CASES[:1], 2, quiet=True)
    _check_formulas(values[:2], 2, CASES[:1])
    _check_formulas(values[2:], 2, CASES[:1])


def test_single_process_is_plain_attention():
    values = ra_runs.check_ring_attention(0, 1, CASES)  # no process group: one block, no traffic
    assert all(v["forward"]["sent_bytes"] == 0 and v["backward"]["sent_bytes"] == 0 for v in values)


def test_reference_matches_sdpa_and_masks_the_future():
    q, k, v, _ = ra_runs._make_qkv(1, 2, 6, 4, torch.float64, 0)
    ref = ra.attention_reference(q, k, v, causal=True)
    torch.testing.assert_close(ref, torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
    v2 = v.clone()
    v2[:, :, -1] += 100.0  # changing the last value may only change the last query's output
    torch.testing.assert_close(ra.attention_reference(q, k, v2, causal=True)[:, :, :-1], ref[:, :, :-1])


def test_schedule_counts():
    assert ra.predicted_blocks(4, causal=True) == [1, 2, 3, 4]
    assert ra.predicted_blocks(4, causal=False) == [4, 4, 4, 4]
    kinds = [s["kind"] for s in ra.ring_schedule(3, causal=True)]
    assert kinds.count("diagonal") == 3 and kinds.count("full") == 3 and kinds.count("skipped") == 3


@pytest.mark.parametrize("bad, message", [
    (lambda t: (t[0, 0], t, t), "4-D"),
    (lambda t: (t, t[:, :, :2], t), "same shape"),
    (lambda t: (t[..., :3], t, t), "shape of k"),
    (lambda t: (t.long(), t.long(), t.long()), "floating point"),
    (lambda t: (t.float(), t, t), "one dtype"),
    (lambda t: (t[:, :, :0], t[:, :, :0], t[:, :, :0]), "empty"),
])
def test_bad_input_is_named(bad, message):
    t = torch.randn(1, 2, 4, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match=message):
        ra.ring_attention(*bad(t))


def test_uneven_sequence_is_refused():
    with pytest.raises(ValueError, match="does not split evenly"):
        ra.split_sequence(torch.zeros(1, 1, 10, 2), 0, 4)
    with pytest.raises(ValueError, match="does not split evenly"):
        ra.predicted_bytes(1, 1, 10, 2, 4)


@pytest.mark.parametrize("group_size", [0, 3, 2.0])
def test_bad_group_size_is_named_before_any_collective(group_size):
    with pytest.raises(ValueError, match="group_size"):
        ra_runs.check_ring_attention(0, 4, CASES[:1], group_size)


def test_a_rank_that_fails_names_itself():
    bad = [dict(CASES[0], seq_len=25)]  # 25 positions cannot be cut into 2 blocks
    with pytest.raises(RankFailedError, match="does not split evenly"):
        run(ra_runs.check_ring_attention, 2, bad, quiet=True)


def test_map_row_has_the_agreed_keys():
    (row,) = ra_runs.map_rows()
    assert {"strategy", "replicated", "sharded", "collective", "bytes_per_step_formula",
            "bytes_measured", "link", "buys", "cite"} <= set(row)
    assert row["bytes_predicted"] > 0
    assert row["bytes_measured"] is None
    (row3,) = ra_runs.map_rows(world_size=3)  # the map's layer splits evenly on any number of ranks
    assert row3["bytes_predicted"] == ra.predicted_bytes(1, 4, 192, 16, 3)["step"]
