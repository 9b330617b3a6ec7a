"""Dropless expert parallelism beside capacity-factor dispatch, on 2 "nodes" x 2 ranks: the spec.

Dropless output and gradients equal the single-process MoE without capacity limits; capacity-
factor output equals the single-process MoE applying the same per-rank drop rule (asserted
inside the ranks); the bytes each rank sends on its intra-node and inter-node links are exactly
the formula; the load imbalance and the drops come from the real routing; bad sizes are refused
before any rank communicates.
"""

import pytest

from playground.launch import run
from playground.systems_map import NodeAwareEP, MoE, balance_report, check_dropless, link_report
from playground.systems_map.dropless import predicted_link_bytes

N, PER_NODE = 4, 2
CASES = [
    dict(tokens=24, d_model=8, d_ff=16, n_experts=8, top_k=2, capacity_factor=None, dtype="float64", seed=0),
    dict(tokens=24, d_model=8, d_ff=16, n_experts=8, top_k=2, capacity_factor=1.0, dtype="float64", seed=0),
    dict(tokens=16, d_model=8, d_ff=8, n_experts=4, top_k=1, capacity_factor=0.5, dtype="bfloat16", seed=3),
]


@pytest.fixture(scope="module")
def ranks():
    return run(check_dropless, N, CASES, PER_NODE, quiet=True, timeout_s=90)


def test_dropless_equals_single_process_moe_without_capacity(ranks):
    # equality of outputs, input, router and expert gradients was asserted on every rank
    assert [r[0]["dropped"] for r in ranks] == [0] * N


def test_dropless_capacity_factor_equals_the_reference_with_the_same_drop_rule(ranks):
    for c in (1, 2):  # the ranks asserted equality and that they dropped what the reference did
        assert sum(r[c]["dropped"] for r in ranks) > 0


@pytest.mark.parametrize("c", range(len(CASES)))
def test_dropless_bytes_per_link_equal_the_formula(ranks, c):
    text, match = link_report([r[c] for r in ranks], PER_NODE)
    assert match, text


def test_dropless_capacity_factor_bytes_do_not_depend_on_routing(ranks):
    case = CASES[1]
    capacity = ranks[0][1]["capacity"]
    slot = (case["n_experts"] // N) * capacity * case["d_model"] * 8  # one peer's buffer, bytes
    for r in ranks:  # 1 peer on the node, 2 on the other; dispatch + combine each way
        assert r[1]["links"]["forward"] == {"intra": 2 * slot, "inter": 2 * 2 * slot}
        assert r[1]["links"]["backward"] == r[1]["links"]["forward"]
    # dropless bytes follow the routing: the ranks differ
    assert len({r[0]["links"]["forward"]["inter"] for r in ranks}) > 1


def test_dropless_load_imbalance_is_measured_from_the_routing(ranks):
    text, ok = balance_report([r[0] for r in ranks], [r[1] for r in ranks])
    assert ok, text
    per_expert = [sum(col) for col in zip(*(r[0]["assigned"] for r in ranks))]
    assert sum(per_expert) == N * 24 * 2
    assert f"max/mean = {max(per_expert)}/24 = {max(per_expert) / 24:.2f}" in text  # mean: N·T·k/E
    padded = sum(r[1]["rows_computed"] for r in ranks)
    assert padded == N * CASES[1]["n_experts"] * ranks[0][1]["capacity"]  # n·C rows per expert


def test_dropless_one_node_puts_nothing_on_the_inter_node_links():
    rows = [3, 5, 0, 2]
    links = predicted_link_bytes(1, 4, 4, rows, rows, 8, 8, True)  # rank 1, h = 8, E = 8, fp32
    assert links["forward"]["inter"] == links["backward"]["inter"] == 0
    rows_to_peers = (3 + 3) + (0 + 0) + (2 + 2)  # dispatch + combine with ranks 0, 2, 3
    assert links["backward"]["intra"] == rows_to_peers * 8 * 4
    assert links["forward"]["intra"] == rows_to_peers * 8 * 4 + 3 * 2 * 8  # + E/n int64 counts


@pytest.mark.parametrize("ranks_per_node, cases, message", [
    (3, None, "4 ranks do not form nodes of 3"),
    (0, None, "ranks_per_node must be a positive integer"),
    (2, [dict(CASES[0], n_experts=6)], "6 experts do not split evenly over 4 ranks"),
    (2, [dict(CASES[1], capacity_factor=0.0)], "capacity_factor must be > 0"),
])
def test_dropless_bad_sizes_are_named_before_any_rank_communicates(ranks_per_node, cases, message):
    with pytest.raises(ValueError, match=message):
        check_dropless(0, N, cases, ranks_per_node)  # no process group exists: nothing was sent


def test_dropless_capacity_dispatch_needs_a_capacity_factor():
    with pytest.raises(ValueError, match="needs moe.capacity_factor"):
        NodeAwareEP(MoE(4, 8, 4), 1, dropless=False)
