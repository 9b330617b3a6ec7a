"""Expert data parallelism, the spec: the dense weights' gradients reduce over every rank, each expert's
over the ranks holding the same experts (EP apart), and after that one step every gradient equals one
process's on all the tokens; the payloads are the formula's; published EP layouts put an expert-DP
group one rank to a node."""

import pytest

from playground.launch import run
from playground.systems_map.expert_dp import expert_grid
from playground.systems_map.expert_dp_runs import (expert_dp_report, expert_dp_step, layout_spans,
                                                   predicted_payloads)


@pytest.mark.parametrize("ep", [2, 4])
def test_expert_gradients_reduced_over_expert_dp_equal_one_process(ep):
    ranks = run(expert_dp_step, 4, ep, quiet=True, timeout_s=60)
    text, ok = expert_dp_report(ranks, ep)
    assert ok, text
    for r in ranks:
        assert r["ep_ranks"] == list(range(r["rank"] // ep * ep, r["rank"] // ep * ep + ep))
        assert r["edp_ranks"] == list(range(r["rank"] % ep, 4, ep))      # EP ranks apart
    dense, experts = predicted_payloads(ep)
    assert ranks[0]["expert_payload"] == experts and ranks[0]["dense_payload"] == dense


def test_the_expert_grid_strides_expert_dp_by_ep():
    grid = expert_grid(64, 8)
    assert grid.all_groups("ep")[0] == list(range(8))
    assert grid.all_groups("edp")[0] == list(range(0, 64, 8))
    assert grid.nodes_spanned("ep", 8) == 1 and grid.nodes_spanned("edp", 8) == 8
    with pytest.raises(ValueError, match="dividing"):
        expert_grid(64, 3)


def test_published_moe_layouts_put_one_expert_dp_rank_in_a_node():
    rows = layout_spans().splitlines()[1:]
    assert len(rows) == 3
    assert all(row.split()[-1] == "1" for row in rows)       # a node holds one rank of each expert-DP group
