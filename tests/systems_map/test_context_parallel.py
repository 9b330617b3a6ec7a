"""All-gather CP (Llama 3's) and Ulysses beside ring attention: the spec.

On 4 ranks every rank's output and its q, k, v gradients equal single-process causal attention
(``assert_close`` inside the ranks, against a from-scratch reference itself checked against
PyTorch's SDPA), with multi-head and grouped-query attention, in fp64 and bf16; the payload the
byte counter records is exactly each formula; the head-and-tail layout gives every rank the same
causal work; bad sizes are refused with one clear error before any rank communicates.
"""

import pytest
import torch

from playground.launch import RankFailedError, run
from playground.systems_map import all_gather_cp, cp_runs, ulysses
from playground.systems_map import all_gather_attention, load_balanced_split, ulysses_attention

N = 4
CASES = [
    dict(batch=2, heads=4, kv_heads=4, seq_len=32, head_dim=8, dtype="float64", seed=0),
    dict(batch=1, heads=8, kv_heads=4, seq_len=16, head_dim=4, dtype="float64", seed=1),  # GQA
    dict(batch=1, heads=4, kv_heads=4, seq_len=24, head_dim=8, dtype="bfloat16", seed=2),
]


@pytest.fixture(scope="module")
def ranks():
    """One launch: every case, every algorithm, checked inside each of the 4 ranks."""
    return run(cp_runs.check_context_parallel, N, CASES, quiet=True, timeout_s=90)


def _case(ranks, c):
    return [r[c] for r in ranks]


def test_all_gather_cp_equals_full_attention_forward_and_backward(ranks):
    # the ranks asserted equality of outputs and q, k, v gradients; every case ran
    assert all("all_gather" in r[c] for r in ranks for c in range(len(CASES)))


def test_ulysses_equals_full_attention_forward_and_backward(ranks):
    assert all("ulysses" in r[c] for r in ranks for c in range(len(CASES)))


@pytest.mark.parametrize("c", range(len(CASES)))
def test_all_gather_cp_and_ulysses_bytes_equal_the_formulas(ranks, c):
    text, match = cp_runs.bytes_report(_case(ranks, c), CASES[c])
    assert match, text


def test_all_gather_cp_bytes_are_one_gather_forward_one_reduce_scatter_backward(ranks):
    case = CASES[0]
    block = 2 * case["batch"] * case["kv_heads"] * (case["seq_len"] // N) * case["head_dim"] * 8
    for r in _case(ranks, 0):
        fwd, bwd = r["all_gather"]["forward"], r["all_gather"]["backward"]
        assert fwd["payload_bytes"] == {"all_gather_single": block}
        assert bwd["payload_bytes"] == {"reduce_scatter_single": N * block}
    # forward wire bytes equal the ring's: (n - 1) blocks of K and V
    assert (all_gather_cp.predicted_bytes(2, 4, 32, 8, N, torch.float64)["forward"]
            == r["ring"]["forward"]["sent_bytes"])


def test_ulysses_bytes_are_all_to_alls_of_q_k_v_and_out(ranks):
    case = CASES[1]  # GQA: 8 query heads, 4 key/value heads
    rows = case["batch"] * (case["seq_len"] // N) * case["head_dim"] * 8
    for r in _case(ranks, 1):
        fwd, bwd = r["ulysses"]["forward"], r["ulysses"]["backward"]
        assert fwd["calls"] == {"all_to_all_single": 3} and bwd["calls"] == {"all_to_all_single": 3}
        assert fwd["payload_bytes"]["all_to_all_single"] == (2 * 8 + 2 * 4) * rows
        assert bwd["payload_bytes"]["all_to_all_single"] == (2 * 8 + 2 * 4) * rows
    assert "ring" not in r  # our ring is written for q, k, v of one shape


def test_all_gather_cp_balances_causal_work(ranks):
    assert all_gather_cp.predicted_tiles(N) == [2 * N + 1] * N
    assert [r[0]["all_gather"]["tiles"] for r in ranks] == [2 * N + 1] * N
    assert [r[0]["ring"]["tiles"] for r in ranks] == [4 * (k + 1) for k in range(N)]  # unbalanced


def test_all_gather_cp_and_ulysses_on_one_process_are_plain_causal_attention():
    values = cp_runs.check_context_parallel(0, 1, CASES[:2])  # no process group, nothing sent
    assert all(a["forward"]["payload_bytes"] == {} and a["forward"]["sent_bytes"] == 0
               for v in values for a in v.values())


def test_all_gather_cp_load_balanced_split_holds_head_and_tail():
    x = torch.arange(16.0).view(1, 1, 16, 1)
    assert load_balanced_split(x, 0, 4).flatten().tolist() == [0, 1, 14, 15]
    assert load_balanced_split(x, 3, 4).flatten().tolist() == [6, 7, 8, 9]


def test_ulysses_wins_bytes_with_many_kv_heads_all_gather_with_few():
    mha = dict(batch=1, heads=32, seq_len=4096, head_dim=128, world_size=8)
    assert (ulysses.predicted_bytes(**mha)["step"] * 4 == all_gather_cp.predicted_bytes(**mha)["step"])
    gqa = dict(mha, kv_heads=8, heads=64)  # Ulysses / all-gather = (a + a_kv) / (a_kv n) = 9/8
    assert (ulysses.predicted_bytes(**gqa)["step"] * 8 == all_gather_cp.predicted_bytes(**gqa)["step"] * 9)
    assert "n/a (8 kv heads)" in cp_runs.shape_table(cp_degrees=(16,))


@pytest.mark.parametrize("seq_len", [36, 20])
def test_all_gather_cp_refuses_a_sequence_not_cut_into_2cp_chunks(seq_len):
    bad = [dict(CASES[0], seq_len=seq_len, algorithms=("all_gather",))]
    with pytest.raises(ValueError, match=r"2·CP = 8 chunks: seq_len \d+ is not a multiple of 8"):
        cp_runs.check_context_parallel(0, N, bad)  # raised before the process group is touched
    with pytest.raises(ValueError, match="2·CP = 8 chunks"):
        all_gather_cp.predicted_bytes(1, 4, seq_len, 8, N)
    with pytest.raises(ValueError, match="must be even"):
        all_gather_attention(*(torch.zeros(1, 2, 3, 4),) * 3)


def test_ulysses_refuses_heads_not_divisible_by_cp():
    with pytest.raises(ValueError, match="6 query heads are not divisible by 4"):
        cp_runs.check_context_parallel(0, N, [dict(CASES[0], heads=6, kv_heads=6)])
    with pytest.raises(ValueError, match="2 key/value heads are not divisible by 4"):
        ulysses.predicted_bytes(1, 8, 64, 8, N, kv_heads=2)
    with pytest.raises(ValueError, match="do not share"):
        ulysses_attention(torch.zeros(1, 3, 4, 2), torch.zeros(1, 2, 4, 2), torch.zeros(1, 2, 4, 2))


def test_ulysses_bad_heads_fail_on_every_rank_with_the_message():
    with pytest.raises(RankFailedError, match="not divisible by 4"):
        run(cp_runs.check_context_parallel, N, [dict(CASES[0], heads=6, kv_heads=6)], quiet=True)
